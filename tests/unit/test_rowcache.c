/* The binary row cache: rows come back exactly (labels as f32), binary rows
 * store no values, chunks respect max_rows, the holdout and test sections
 * and the metadata come back, and a cut, unfinished, old or corrupt file is
 * an error that names it and what is wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/rowcache.h"
#include "testlib.h"
#include "data_testing.h"

#define HEADER 120

static void rows3(fsgd_csr_t *m)
{
    uint32_t c0[] = {0, 5, 9}, c1[] = {3}, c2[] = {1, 2};
    float v0[] = {1, 1, 1}, v1[] = {0.25f}, v2[] = {-2, 1};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, 1, c0, v0, 3), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, -1, c1, v1, 1), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, 0, NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, 1, c2, v2, 2), 0);
}

/* Writes m twice as train rows, hold = {row 1} and test = {row 0} with meta. */
static long write_cache(const char *path, const fsgd_csr_t *m, const char *meta)
{
    char err[512];
    fsgd_csr_t hold = {0}, test = {0};
    fsgd_csr_append_rows(&hold, m, 1, 1);
    fsgd_csr_append_rows(&test, m, 0, 1);
    fsgd_rowcache_writer_t *w = fsgd_rowcache_create(path, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(fsgd_rowcache_append(w, m, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_rowcache_append(w, m, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_rowcache_close(w, &hold, &test, meta, err, sizeof err), 0);
    fsgd_csr_free(&hold);
    fsgd_csr_free(&test);
    struct stat st;
    CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
    return (long)st.st_size;
}

static void test_round_trip(void)
{
    fsgd_csr_t m = {0}, back = {0};
    rows3(&m);
    const char *path = fsgd_test_tmp("rows.cache");
    char err[512];
    long size = write_cache(path, &m, "source=x\n");
    /* header; per copy: row 0 binary 8+12, row 1 8+8, row 2 8, row 3 8+16;
     * holdout row 1; test row 0; the metadata */
    CU_ASSERT_EQUAL(size, HEADER + 2 * (20 + 16 + 8 + 24) + 16 + 20 + 9);
    fsgd_rowcache_info_t info;
    int why = 0;
    fsgd_rowcache_reader_t *r = fsgd_rowcache_open(path, &info, &why, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(info.rows[FSGD_ROWCACHE_TRAIN], 8);
    CU_ASSERT_EQUAL(info.max_col[FSGD_ROWCACHE_TRAIN], 10);
    CU_ASSERT_EQUAL(info.rows[FSGD_ROWCACHE_HOLD], 1);
    CU_ASSERT_EQUAL(info.max_col[FSGD_ROWCACHE_HOLD], 4);
    CU_ASSERT_EQUAL(info.rows[FSGD_ROWCACHE_TEST], 1);
    CU_ASSERT_STRING_EQUAL(info.meta, "source=x\n");
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
    CU_ASSERT_EQUAL(fsgd_rowcache_seek(r, FSGD_ROWCACHE_TEST, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_rowcache_read(r, &back, SIZE_MAX, err, sizeof err), 1);
    CU_ASSERT_EQUAL(back.nnz, 3);
    CU_ASSERT_EQUAL(back.col[1], 5);
    CU_ASSERT_EQUAL(back.max_col, 10);
    CU_ASSERT_EQUAL(fsgd_rowcache_seek(r, FSGD_ROWCACHE_HOLD, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_rowcache_read(r, &back, SIZE_MAX, err, sizeof err), 1);
    CU_ASSERT_EQUAL(back.val[0], 0.25f);
    CU_ASSERT_EQUAL(back.label[0], -1);
    fsgd_rowcache_free(r);
    fsgd_csr_free(&m);
    fsgd_csr_free(&back);
}

/* A binary batch (fsgd/csr.h: no values) is written as the same rows with
 * their values of 1 are: the same file, byte for byte. */
static void test_binary_batch(void)
{
    uint32_t c0[] = {0, 5, 9}, c1[] = {3};
    float ones[] = {1, 1, 1};
    fsgd_csr_t valued = {0}, bin;
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&valued, 1, c0, ones, 3), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&valued, -1, c1, ones, 1), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_init_binary(&bin, 0, 0), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&bin, &valued, 0, 2), 0);
    CU_ASSERT_PTR_NULL_FATAL(bin.val);
    const char *pa = fsgd_test_tmp("valued.cache"), *pb = fsgd_test_tmp("binary.cache");
    long sa = write_cache(pa, &valued, "m\n"), sb = write_cache(pb, &bin, "m\n");
    CU_ASSERT_EQUAL_FATAL(sa, sb);
    size_t la, lb;
    uint8_t *a = fsgd_test_read_file(pa, &la), *b = fsgd_test_read_file(pb, &lb);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(la, lb);
    CU_ASSERT_EQUAL(memcmp(a, b, la), 0);
    free(a);
    free(b);
    fsgd_csr_free(&valued);
    fsgd_csr_free(&bin);
}

static void flip_byte(const char *path, long at)
{
    FILE *f = fopen(path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* Reads every train row; the last result (0 or an error). */
static long drain(fsgd_rowcache_reader_t *r, char *err, size_t errsz)
{
    fsgd_csr_t back = {0};
    long got;
    while ((got = fsgd_rowcache_read(r, &back, 3, err, errsz)) > 0)
        ;
    fsgd_csr_free(&back);
    return got;
}

static void test_damage(void)
{
    fsgd_csr_t m = {0};
    rows3(&m);
    const char *path = fsgd_test_tmp("bad.cache");
    char err[512];
    int why = 0;
    long size = write_cache(path, &m, "source=x\n");
    fsgd_rowcache_info_t info;

    /* cut short: refused at open, with both lengths */
    CU_ASSERT_EQUAL_FATAL(truncate(path, size - 5), 0);
    CU_ASSERT_PTR_NULL(fsgd_rowcache_open(path, &info, &why, err, sizeof err));
    CU_ASSERT_EQUAL(why, FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, "bad.cache: row cache is");
    FSGD_ASSERT_CONTAINS(err, "cut short");

    /* a flipped value in a train row: the section's sum at its end */
    write_cache(path, &m, "source=x\n");
    flip_byte(path, HEADER + 20 + 12); /* row 1's value 0.25 */
    fsgd_rowcache_reader_t *r = fsgd_rowcache_open(path, &info, &why, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(drain(r, err, sizeof err), FSGD_E_CRC);
    FSGD_ASSERT_CONTAINS(err, "bad.cache: corrupt row cache: a checksum mismatch in train");
    fsgd_rowcache_free(r);

    /* a row length that overruns the section */
    write_cache(path, &m, "source=x\n");
    flip_byte(path, HEADER + 20 + 16 + 4 + 2); /* row 2's n: 0 -> 2^20 */
    r = fsgd_rowcache_open(path, &info, &why, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(drain(r, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "a record past the section's end in train row 2");
    fsgd_rowcache_free(r);

    /* a column past the header's largest */
    write_cache(path, &m, "source=x\n");
    flip_byte(path, HEADER + 8 + 8 + 3); /* row 0's column 9 -> 2^28 + 9 */
    r = fsgd_rowcache_open(path, &info, &why, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(drain(r, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "a column past the header's largest in train row 0");
    fsgd_rowcache_free(r);

    /* the header's counts, or the metadata: the header checksum */
    write_cache(path, &m, "source=x\n");
    flip_byte(path, 16 + 8); /* train max_col */
    CU_ASSERT_PTR_NULL(fsgd_rowcache_open(path, &info, &why, err, sizeof err));
    CU_ASSERT_EQUAL(why, FSGD_E_CRC);
    FSGD_ASSERT_CONTAINS(err, "bad.cache: row cache header is corrupt");
    write_cache(path, &m, "source=x\n");
    flip_byte(path, size - 3);
    CU_ASSERT_PTR_NULL(fsgd_rowcache_open(path, &info, &why, err, sizeof err));
    CU_ASSERT_EQUAL(why, FSGD_E_CRC);

    /* an unfinished writer's file: version 0 */
    char err2[512];
    fsgd_rowcache_writer_t *w = fsgd_rowcache_create(path, err2, sizeof err2);
    CU_ASSERT_EQUAL(fsgd_rowcache_append(w, &m, err2, sizeof err2), 0);
    fsgd_rowcache_discard(w);
    CU_ASSERT_PTR_NULL(fsgd_rowcache_open(path, &info, &why, err, sizeof err));
    CU_ASSERT_EQUAL(why, FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, "unfinished");

    /* a version 1 cache (the 32-byte header of fsgd before reuse) */
    uint8_t v1[32] = {'F', 'S', 'G', 'D', 'R', 'O', 'W', 'S', 1};
    fsgd_test_write_file(path, v1, sizeof v1);
    CU_ASSERT_PTR_NULL(fsgd_rowcache_open(path, &info, &why, err, sizeof err));
    CU_ASSERT_EQUAL(why, FSGD_E_VERSION);
    FSGD_ASSERT_CONTAINS(err, "format version 1");

    /* not a cache at all */
    fsgd_test_write_file(path, "FSGDMODL", 8);
    CU_ASSERT_PTR_NULL(fsgd_rowcache_open(path, &info, &why, err, sizeof err));
    CU_ASSERT_EQUAL(why, FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "not an fsgd row cache");
    fsgd_csr_free(&m);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"rows, holdout and test sections and metadata round-trip; binary rows store no values", test_round_trip},
        {"cut, unfinished, old-version and corrupt caches are errors naming the file and the fault", test_damage},
        {"a binary batch is written as its rows with values of 1", test_binary_batch},
        {NULL, NULL},
    };
    fsgd_test_suite("rowcache", cases);
}
