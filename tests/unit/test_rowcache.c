/* The binary row cache: rows come back exactly (labels as f32), binary rows
 * store no values, chunks respect max_rows, and a cut file is an error that
 * names it. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/rowcache.h"
#include "testlib.h"

static void test_round_trip(void)
{
    fsgd_csr_t m = {0}, back = {0};
    uint32_t c0[] = {0, 5, 9}, c1[] = {3}, c2[] = {1, 2};
    float v0[] = {1, 1, 1}, v1[] = {0.25f}, v2[] = {-2, 1};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&m, 1, c0, v0, 3), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&m, -1, c1, v1, 1), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&m, 0, NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&m, 1, c2, v2, 2), 0);
    const char *path = fsgd_test_tmp("rows.cache");
    char err[512];
    fsgd_rowcache_writer_t *w = fsgd_rowcache_create(path, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(fsgd_rowcache_append(w, &m, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_rowcache_append(w, &m, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowcache_close(w, err, sizeof err), 0);
    struct stat st;
    CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
    /* header 32; per copy: row 0 binary 8+12, row 1 8+8, row 2 8, row 3 8+16 */
    CU_ASSERT_EQUAL(st.st_size, 32 + 2 * (20 + 16 + 8 + 24));
    uint64_t rows, max_col;
    fsgd_rowcache_reader_t *r = fsgd_rowcache_open(path, &rows, &max_col, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(rows, 8);
    CU_ASSERT_EQUAL(max_col, 10);
    for (int pass = 0; pass < 2; pass++) {
        CU_ASSERT_EQUAL(fsgd_rowcache_read(r, &back, 3, err, sizeof err), 3);
        CU_ASSERT_EQUAL(back.nnz, 4);
        CU_ASSERT_EQUAL(back.col[2], 9);
        CU_ASSERT_EQUAL(back.val[3], 0.25f);
        CU_ASSERT_EQUAL(back.label[1], -1);
        CU_ASSERT_EQUAL(fsgd_rowcache_read(r, &back, 100, err, sizeof err), 5);
        CU_ASSERT_EQUAL(back.val[0], -2.0f);
        CU_ASSERT_EQUAL(back.label[4], 1);
        CU_ASSERT_EQUAL(fsgd_rowcache_read(r, &back, 100, err, sizeof err), 0);
        CU_ASSERT_EQUAL(fsgd_rowcache_rewind(r, err, sizeof err), 0);
    }
    fsgd_rowcache_free(r);
    /* cut short: the header promises 8 rows */
    CU_ASSERT_EQUAL_FATAL(truncate(path, st.st_size - 5), 0);
    r = fsgd_rowcache_open(path, &rows, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    long got = fsgd_rowcache_read(r, &back, 100, err, sizeof err);
    CU_ASSERT_EQUAL(got, FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, "rows.cache: cut short");
    fsgd_rowcache_free(r);
    fsgd_test_write_file(path, "FSGDMODL", 8);
    CU_ASSERT_PTR_NULL(fsgd_rowcache_open(path, &rows, NULL, err, sizeof err));
    FSGD_ASSERT_CONTAINS(err, "not an fsgd row cache");
    fsgd_csr_free(&m);
    fsgd_csr_free(&back);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"rows round-trip; binary rows store no values; cut files named", test_round_trip},
        {NULL, NULL},
    };
    fsgd_test_suite("rowcache", cases);
}
