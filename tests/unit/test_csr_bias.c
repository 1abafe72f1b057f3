/* The rows a trainer sees (fsgd/csr_bias.h): columns >= dim dropped, the
 * intercept's feature (dim, bias_value) appended to every row, binary
 * copies only when every value is 1; a row appended one at a time is the
 * same as the whole copy. */
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/csr_bias.h"
#include "fsgd/error.h"
#include "testlib.h"

/* 3 rows over columns 0..6: row 1 empty, row 2 has columns past dim 5 */
static void rows3(fsgd_csr_t *m, float v)
{
    const uint32_t c0[] = {0, 3}, c2[] = {1, 5, 6};
    const float v0[] = {1, v}, v2[] = {v, 1, 1};
    memset(m, 0, sizeof *m);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, 1, c0, v0, 2), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, -1, NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, 1, c2, v2, 3), 0);
}

static void test_copy_drops_and_appends(void)
{
    fsgd_csr_t src, dst = {0};
    rows3(&src, 0.5f);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_copy_biased(&src, 5, 1, 2.0f, &dst), 0);
    const uint64_t row_ptr[] = {0, 3, 4, 6};
    const uint32_t col[] = {0, 3, 5, 5, 1, 5};
    const float val[] = {1, 0.5f, 2, 2, 0.5f, 2};
    CU_ASSERT_EQUAL(dst.n_rows, 3);
    CU_ASSERT_EQUAL(dst.nnz, 6);
    CU_ASSERT_EQUAL(dst.max_col, 6);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dst.val);
    CU_ASSERT_EQUAL(memcmp(dst.row_ptr, row_ptr, sizeof row_ptr), 0);
    CU_ASSERT_EQUAL(memcmp(dst.col, col, sizeof col), 0);
    CU_ASSERT_EQUAL(memcmp(dst.val, val, sizeof val), 0);
    CU_ASSERT_EQUAL(dst.label[1], -1);
    fsgd_csr_free(&dst);
    /* no intercept: only the drop */
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_copy_biased(&src, 5, 0, 2.0f, &dst), 0);
    CU_ASSERT_EQUAL(dst.nnz, 3);
    CU_ASSERT_EQUAL(dst.max_col, 5);
    fsgd_csr_free(&dst);
    fsgd_csr_free(&src);
}

static void test_binary_only_when_all_ones(void)
{
    fsgd_csr_t ones, dst = {0};
    rows3(&ones, 1.0f);
    CU_ASSERT_TRUE(fsgd_csr_ones_with_bias(&ones, 1, 1.0f));
    CU_ASSERT_FALSE(fsgd_csr_ones_with_bias(&ones, 1, 2.0f)); /* the intercept's value is not 1 */
    CU_ASSERT_TRUE(fsgd_csr_ones_with_bias(&ones, 0, 2.0f));  /* ... unless there is none */
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_copy_biased(&ones, 5, 1, 1.0f, &dst), 0);
    CU_ASSERT_PTR_NULL(dst.val);
    CU_ASSERT_EQUAL(dst.nnz, 6);
    fsgd_csr_free(&dst);
    fsgd_csr_t halves;
    rows3(&halves, 0.5f);
    CU_ASSERT_FALSE(fsgd_csr_ones_with_bias(&halves, 0, 1.0f));
    fsgd_csr_free(&halves);
    fsgd_csr_free(&ones);
}

/* row by row, in another order, into a batch with values and a binary one */
static void test_append_matches_copy(void)
{
    for (int binary = 0; binary <= 1; binary++) {
        fsgd_csr_t src, whole = {0}, rows = {0};
        rows3(&src, binary ? 1.0f : 0.25f);
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_room(&rows, 3, 8, binary), 0);
        CU_ASSERT_EQUAL(rows.val == NULL, binary);
        const size_t order[] = {2, 0, 1};
        for (int i = 0; i < 3; i++)
            CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_biased(&rows, &src, order[i], 5, 1, 1.0f), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_copy_biased(&src, 5, 1, 1.0f, &whole), 0);
        CU_ASSERT_EQUAL(rows.n_rows, 3);
        CU_ASSERT_EQUAL(rows.nnz, whole.nnz);
        CU_ASSERT_EQUAL(rows.max_col, 6);
        /* row 0 of rows is row 2 of whole */
        size_t n2 = (size_t)(whole.row_ptr[3] - whole.row_ptr[2]);
        CU_ASSERT_EQUAL_FATAL(rows.row_ptr[1], n2);
        CU_ASSERT_EQUAL(memcmp(rows.col, whole.col + whole.row_ptr[2], n2 * sizeof *rows.col), 0);
        if (!binary)
            CU_ASSERT_EQUAL(memcmp(rows.val, whole.val + whole.row_ptr[2], n2 * sizeof *rows.val), 0);
        CU_ASSERT_EQUAL(rows.label[2], -1);
        fsgd_csr_free(&rows);
        fsgd_csr_free(&whole);
        fsgd_csr_free(&src);
    }
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"copy drops columns >= dim, appends the intercept", test_copy_drops_and_appends},
        {"binary copies only when every value is 1", test_binary_only_when_all_ones},
        {"appended rows are the copy's", test_append_matches_copy},
        {NULL, NULL},
    };
    fsgd_test_suite("csr_bias", cases);
}
