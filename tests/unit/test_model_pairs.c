/* A model given as pairs (a sharded job's sparse tables, assembled without
 * a dense array): fsgd_model_save_pairs writes the bytes fsgd_model_save
 * writes for the same weights, and fsgd_train_evaluate_pairs scores rows
 * to the same metrics bit for bit, columns past the model's dim included;
 * pairs out of order are refused. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/model.h"
#include "fsgd/train.h"
#include "testlib.h"

#define DIM 5000

static void test_pairs_same_file_and_scores(void)
{
    uint64_t seed = fsgd_test_seed();
    fsgd_model_t dense;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&dense, FSGD_LOSS_LOGISTIC, DIM, 1, 1.0f), 0);
    snprintf(dense.input, sizeof dense.input, "%s", "tsv:label,cat*3:header=0:bits=12:seed=0");
    fsgd_sparse_t w = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_sparse_reserve(&w, DIM + 1), 0);
    for (uint32_t k = 0; k <= DIM; k++) {
        uint64_t r = fsgd_test_rand(&seed) % 10;
        if (r >= 3)
            continue; /* not held */
        float v = r == 0 ? 0.0f : (float)((double)(fsgd_test_rand(&seed) % 2001) / 1000.0 - 1.0); /* a held +0 too */
        dense.w[k] = v;
        w.keys[w.n] = k;
        w.vals[w.n++] = v;
    }
    if (w.n == 0 || w.keys[w.n - 1] != DIM) { /* the intercept's weight held */
        dense.w[DIM] = 0.25f;
        w.keys[w.n] = DIM;
        w.vals[w.n++] = 0.25f;
    }
    const char *a = fsgd_test_tmp("dense.fsgd"), *b = fsgd_test_tmp("pairs.fsgd");
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_save(&dense, a, err, sizeof err), 0);
    fsgd_model_t shape = dense;
    shape.w = NULL;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_save_pairs(&shape, &w, b, err, sizeof err), 0);
    size_t la, lb;
    uint8_t *pa = fsgd_test_read_file(a, &la), *pb = fsgd_test_read_file(b, &lb);
    CU_ASSERT_TRUE_FATAL(pa && pb);
    CU_ASSERT_EQUAL(la, lb);
    CU_ASSERT_TRUE(la == lb && memcmp(pa, pb, la) == 0);
    free(pa);
    free(pb);
    /* 300 rows of 1-30 columns, some past dim */
    fsgd_csr_t rows = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_reserve(&rows, 300, 300 * 30), 0);
    rows.row_ptr[0] = 0;
    for (size_t r = 0; r < 300; r++) {
        size_t n = 1 + fsgd_test_rand(&seed) % 30;
        for (size_t i = 0; i < n; i++) {
            rows.col[rows.nnz] = (uint32_t)(fsgd_test_rand(&seed) % (DIM + 50));
            rows.val[rows.nnz++] = (float)(fsgd_test_rand(&seed) % 5) * 0.5f + 0.5f;
        }
        rows.label[r] = (double)(fsgd_test_rand(&seed) % 2);
        rows.row_ptr[r + 1] = rows.nnz;
        rows.n_rows++;
    }
    fsgd_metrics_t md, mp;
    CU_ASSERT_EQUAL_FATAL(fsgd_train_evaluate(&dense, &rows, &md), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_evaluate_pairs(&shape, &w, &rows, &mp), 0);
    CU_ASSERT_EQUAL(md.n, mp.n);
    CU_ASSERT_EQUAL(memcmp(&md.auc, &mp.auc, sizeof md.auc), 0);
    CU_ASSERT_EQUAL(memcmp(&md.logloss, &mp.logloss, sizeof md.logloss), 0);
    CU_ASSERT_EQUAL(memcmp(&md.accuracy, &mp.accuracy, sizeof md.accuracy), 0);
    /* out of order, or the intercept's key without an intercept: refused, named */
    if (w.n >= 2) {
        uint32_t k = w.keys[0];
        w.keys[0] = w.keys[1];
        w.keys[1] = k;
        CU_ASSERT_EQUAL(fsgd_model_save_pairs(&shape, &w, b, err, sizeof err), FSGD_E_ARG);
        FSGD_ASSERT_CONTAINS(err, "out of order");
        w.keys[1] = w.keys[0];
        w.keys[0] = k;
    }
    shape.has_bias = 0;
    CU_ASSERT_EQUAL(fsgd_model_save_pairs(&shape, &w, b, err, sizeof err), FSGD_E_ARG);
    fsgd_csr_free(&rows);
    fsgd_sparse_free(&w);
    fsgd_model_free(&dense);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"a model as pairs: the same file and the same scores as dense", test_pairs_same_file_and_scores},
        {NULL, NULL},
    };
    fsgd_test_suite("model_pairs", cases);
}
