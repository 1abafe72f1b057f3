/* Labels that carry a row's importance weight and map any two values onto
 * the classes (fsgd/rowlabel.h), and the cpu backend's gradient scaled by
 * that weight. */
#include <math.h>
#include <string.h>

#include "fsgd/backend.h"
#include "fsgd/csr.h"
#include "fsgd/rowlabel.h"
#include "testlib.h"

static void test_weigh_and_drop(void)
{
    fsgd_csr_t m = {0};
    const uint32_t c[] = {1, 2, 3};
    const float v[] = {1, 1, 1};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&m, 1, c, v, 2), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&m, 0, c + 1, v, 1), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&m, -1, c, v, 3), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&m, 1, c + 2, v, 1), 0);
    const double w[] = {2.5, 0, 1, 4};
    CU_ASSERT_EQUAL(fsgd_rowlabel_weigh(&m, 0, w, 1, 0.5), 1); /* the weight-0 row left out */
    CU_ASSERT_EQUAL_FATAL(m.n_rows, 3);
    CU_ASSERT_EQUAL(m.label[0], 2.5);
    CU_ASSERT_EQUAL(m.label[1], -0.5);
    CU_ASSERT_EQUAL(m.label[2], 4);
    CU_ASSERT_EQUAL(m.nnz, 6);
    CU_ASSERT_EQUAL(m.row_ptr[1], 2);
    CU_ASSERT_EQUAL(m.row_ptr[2], 5);
    CU_ASSERT_EQUAL(m.col[5], 3); /* the last row moved down over the dropped one */
    CU_ASSERT_EQUAL(fsgd_rowlabel_weight(m.label[1]), 0.5);
    CU_ASSERT_EQUAL(fsgd_rowlabel_weight(0), 1);
    CU_ASSERT_EQUAL(fsgd_rowlabel_weight(-1), 1);
    fsgd_csr_free(&m);
}

static void test_map_two(void)
{
    double y[] = {2, 1, 1, 2, 2}, lo, hi;
    CU_ASSERT_EQUAL(fsgd_rowlabel_map_two(y, 5, &lo, &hi), 1);
    CU_ASSERT_EQUAL(lo, 1);
    CU_ASSERT_EQUAL(hi, 2);
    CU_ASSERT_EQUAL(y[0], 1);
    CU_ASSERT_EQUAL(y[1], -1);
    double ok[] = {0, 1, 1}, three[] = {1, 2, 3}, one[] = {5, 5};
    CU_ASSERT_EQUAL(fsgd_rowlabel_map_two(ok, 3, &lo, &hi), 0);
    CU_ASSERT_EQUAL(ok[0], 0);
    CU_ASSERT_EQUAL(fsgd_rowlabel_map_two(three, 3, &lo, &hi), 0);
    CU_ASSERT_EQUAL(fsgd_rowlabel_map_two(one, 2, &lo, &hi), 0);
}

/* The cpu backend: a row of label +3 gives 3 times the gradient of +1. */
static void test_cpu_gradient_weighted(void)
{
    char err[512];
    float theta[4] = {0.1f, -0.2f, 0.3f, 0};
    fsgd_csr_t one = {0}, three = {0};
    const uint32_t c[] = {0, 2};
    const float v[] = {1, 2};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&one, 1, c, v, 2), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&three, 3, c, v, 2), 0);
    fsgd_backend_t *b = fsgd_backend_new("cpu", 4, theta, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    fsgd_sparse_t g1 = {0}, g3 = {0};
    double l1 = 0, l3 = 0;
    fsgd_grad_request_t r = {.batch = &one, .batch_id = -1, .loss = FSGD_LOSS_LOGISTIC, .scale = 1};
    CU_ASSERT_EQUAL_FATAL(fsgd_backend_gradient(b, &r, &g1, &l1, err, sizeof err), 0);
    r.batch = &three;
    CU_ASSERT_EQUAL_FATAL(fsgd_backend_gradient(b, &r, &g3, &l3, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(g1.n, g3.n);
    for (size_t i = 0; i < g1.n; i++)
        CU_ASSERT_DOUBLE_EQUAL(g3.vals[i], 3 * g1.vals[i], 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(l3, 3 * l1, 1e-9);
    fsgd_sparse_free(&g1);
    fsgd_sparse_free(&g3);
    fsgd_backend_destroy(b);
    fsgd_csr_free(&one);
    fsgd_csr_free(&three);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"weights ride in labels; weight-0 rows dropped", test_weigh_and_drop},
        {"any two label values map onto the classes", test_map_two},
        {"the cpu gradient and loss scale with the label's weight", test_cpu_gradient_weighted},
        {NULL, NULL},
    };
    fsgd_test_suite("rowlabel", cases);
}
