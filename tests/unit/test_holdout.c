/* fsgd/holdout.h: held-out rows scored over their own keys give the loss
 * of fsgd_model_margin + fsgd_loss_value, bit for bit, for every loss, with
 * and without an intercept and values, columns past dim left out. */
#include <stdlib.h>

#include "fsgd/holdout.h"
#include "fsgd/model.h"
#include "testlib.h"

#define DIM 5000

static double direct_loss(const fsgd_csr_t *r, fsgd_loss_kind_t kind, float *theta, int has_bias, float bias)
{
    fsgd_model_t m = {.kind = kind, .dim = DIM, .has_bias = has_bias, .bias = bias, .w = theta};
    float ones[64];
    for (int i = 0; i < 64; i++)
        ones[i] = 1.0f;
    double sum = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        uint64_t lo = r->row_ptr[i];
        const float *v = r->val ? r->val + lo : ones;
        sum += fsgd_loss_value(kind, fsgd_model_margin(&m, r->col + lo, v, r->row_ptr[i + 1] - lo), r->label[i]);
    }
    return sum / (double)r->n_rows;
}

static void test_same_loss(void)
{
    uint64_t seed = fsgd_test_seed();
    float *theta = malloc((DIM + 1) * sizeof *theta);
    CU_ASSERT_FATAL(theta != NULL);
    for (int k = 0; k <= DIM; k++)
        theta[k] = (float)((double)(fsgd_test_rand(&seed) % 2001) / 1000.0 - 1.0);
    for (int binary = 0; binary < 2; binary++) {
        fsgd_csr_t r = {0};
        CU_ASSERT_EQUAL_FATAL(binary ? fsgd_csr_init_binary(&r, 300, 300 * 40) : fsgd_csr_reserve(&r, 300, 300 * 40), 0);
        r.row_ptr[0] = 0;
        for (size_t i = 0; i < 300; i++) {
            uint64_t at = r.row_ptr[i];
            size_t n = fsgd_test_rand(&seed) % 40; /* empty rows too */
            uint32_t c = (uint32_t)(fsgd_test_rand(&seed) % 50);
            for (size_t j = 0; j < n; j++) {
                c += 1 + (uint32_t)(fsgd_test_rand(&seed) % (j < 10 ? 20 : 400)); /* hot low keys, some >= DIM */
                r.col[at + j] = c;
                if (!binary)
                    r.val[at + j] = (float)((double)(fsgd_test_rand(&seed) % 100) / 50.0);
            }
            r.label[i] = fsgd_test_rand(&seed) % 2 ? 1.0 : -1.0;
            r.row_ptr[i + 1] = at + n;
        }
        r.n_rows = 300;
        r.nnz = r.row_ptr[300];
        fsgd_holdout_t h;
        CU_ASSERT_EQUAL_FATAL(fsgd_holdout_init(&h, &r, DIM), 0);
        CU_ASSERT(h.n_keys > 0 && h.n_keys < r.nnz);
        for (size_t i = 1; i < h.n_keys; i++)
            CU_ASSERT(h.keys[i - 1] < h.keys[i] && h.keys[i] < DIM);
        fsgd_loss_kind_t kinds[] = {FSGD_LOSS_LOGISTIC, FSGD_LOSS_SQUARED, FSGD_LOSS_HINGE};
        for (int k = 0; k < 3; k++)
            for (int bias = 0; bias < 2; bias++) {
                double want = direct_loss(&r, kinds[k], theta, bias, 0.5f);
                CU_ASSERT(fsgd_holdout_loss(&h, kinds[k], theta, bias, 0.5f) == want);
            }
        theta[h.keys[0]] += 3.0f; /* a look reads θ as it is now */
        CU_ASSERT(fsgd_holdout_loss(&h, FSGD_LOSS_LOGISTIC, theta, 1, 1.0f) ==
                  direct_loss(&r, FSGD_LOSS_LOGISTIC, theta, 1, 1.0f));
        fsgd_holdout_free(&h);
        fsgd_csr_free(&r);
    }
    free(theta);
}

static void test_no_rows(void)
{
    fsgd_csr_t r = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_reserve(&r, 1, 1), 0);
    r.row_ptr[0] = 0;
    fsgd_holdout_t h;
    CU_ASSERT_EQUAL_FATAL(fsgd_holdout_init(&h, &r, DIM), 0);
    float w[DIM + 1] = {0};
    CU_ASSERT(fsgd_holdout_loss(&h, FSGD_LOSS_LOGISTIC, w, 1, 1.0f) == 0.0);
    fsgd_holdout_free(&h);
    fsgd_csr_free(&r);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"the loss of fsgd_model_margin, bit for bit", test_same_loss},
        {"no rows", test_no_rows},
        {NULL, NULL},
    };
    fsgd_test_suite("holdout", cases);
}
