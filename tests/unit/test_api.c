/* The bindings' API (fsgd/api.h): its version, and a model file read into
 * an opaque handle whose accessors give back what was saved; a bad file is
 * an error with a message and no handle. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fsgd/api.h"
#include "fsgd/error.h"
#include "fsgd/loss.h"
#include "fsgd/model.h"
#include "testlib.h"

static void test_version(void)
{
    CU_ASSERT_EQUAL(fsgd_api_version(), FSGD_API_VERSION);
}

static void test_model_handle(void)
{
    fsgd_model_t m = {0};
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_SQUARED, 3, 1, 2.5f), 0);
    const float w[] = {0.5f, -1.25f, 3.0f, 0.75f};
    memcpy(m.w, w, sizeof w);
    snprintf(m.input, sizeof m.input, "tsv:label,num*3");
    const char *path = fsgd_test_tmp("api.fsgd");
    CU_ASSERT_EQUAL_FATAL(fsgd_model_save(&m, path, err, sizeof err), 0);
    fsgd_model_free(&m);

    fsgd_model_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(fsgd_api_model_load(path, &h, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(fsgd_api_model_kind(h), FSGD_LOSS_SQUARED);
    CU_ASSERT_EQUAL(fsgd_api_model_dim(h), 3);
    CU_ASSERT_EQUAL(fsgd_api_model_has_bias(h), 1);
    CU_ASSERT_EQUAL(fsgd_api_model_bias_value(h), 2.5f);
    CU_ASSERT_EQUAL(memcmp(fsgd_api_model_weights(h), w, sizeof w), 0);
    CU_ASSERT_STRING_EQUAL(fsgd_api_model_input(h), "tsv:label,num*3");
    fsgd_api_model_free(h);
    fsgd_api_model_free(NULL);
}

static void test_bad_file(void)
{
    const char *path = fsgd_test_tmp("not_a_model");
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, "hello\n", 6), 0);
    fsgd_model_t *h = (fsgd_model_t *)&h; /* set to NULL on failure */
    char err[256] = "";
    CU_ASSERT_TRUE(fsgd_api_model_load(path, &h, err, sizeof err) < 0);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_TRUE(strstr(err, "not_a_model") != NULL);
    CU_ASSERT_TRUE(fsgd_api_model_load(fsgd_test_tmp("missing.fsgd"), &h, err, sizeof err) < 0);
    CU_ASSERT_PTR_NULL(h);
}

/* Rows of a toy problem as a binding holds them: row r has columns r % 7
 * and 7 + r % 5 (values v, or 1 when v is 0), label +1 when r % 7 < 3. */
#define TOY_ROWS 400
typedef struct toy {
    int64_t row_ptr[TOY_ROWS + 1];
    uint32_t col[2 * TOY_ROWS];
    double val[2 * TOY_ROWS], label[TOY_ROWS];
} toy_t;

static void toy_rows(toy_t *t, double v)
{
    t->row_ptr[0] = 0;
    for (int r = 0; r < TOY_ROWS; r++) {
        t->col[2 * r] = (uint32_t)(r % 7);
        t->col[2 * r + 1] = (uint32_t)(7 + r % 5);
        t->val[2 * r] = t->val[2 * r + 1] = v ? v : 1.0;
        t->label[r] = r % 7 < 3 ? 1.0 : -1.0;
        t->row_ptr[r + 1] = 2 * (r + 1);
    }
}

/* A model trained on toy rows [0, n) with row weights w (NULL: none). */
static fsgd_model_t *toy_train(const toy_t *t, size_t n, const double *w)
{
    fsgd_api_train_t *h = NULL;
    fsgd_model_t *m = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(fsgd_api_train_new(&h, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_set(h, "epochs", "3", err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_set(h, "test_fraction", "0", err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_set(h, "dim", "12", err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_set(h, "threads", "1", err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_data(h, n, t->row_ptr, t->col, t->val, t->label, err, sizeof err), 0);
    if (w)
        CU_ASSERT_EQUAL(fsgd_api_train_weights(h, w, n, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_run(h, &m, err, sizeof err), 0);
    size_t kept = 0; /* rows of weight 0 are left out */
    for (size_t r = 0; r < n; r++)
        kept += !w || w[r] > 0;
    CU_ASSERT_EQUAL(fsgd_api_train_stat(h, "train_rows"), (double)kept);
    fsgd_api_train_free(h);
    return m;
}

static int same_model(const fsgd_model_t *a, const fsgd_model_t *b)
{
    return fsgd_api_model_dim(a) == fsgd_api_model_dim(b) &&
           !memcmp(fsgd_api_model_weights(a), fsgd_api_model_weights(b), (fsgd_api_model_dim(a) + 1) * sizeof(float));
}

static void test_train_arrays(void)
{
    static toy_t t, u;
    toy_rows(&t, 0);
    fsgd_model_t *m = toy_train(&t, TOY_ROWS, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(fsgd_api_model_dim(m), 12);
    CU_ASSERT_EQUAL(fsgd_api_model_kind(m), FSGD_LOSS_LOGISTIC);
    CU_ASSERT_TRUE(fsgd_api_model_weights(m)[0] > 0 && fsgd_api_model_weights(m)[5] < 0); /* r % 7 < 3: positive */
    void *buf = NULL;
    size_t len = 0;
    char err[256];
    CU_ASSERT_EQUAL(fsgd_api_model_encode(m, &buf, &len, err, sizeof err), 0);
    CU_ASSERT_TRUE(len > 12 * sizeof(float) && !memcmp(buf, "FSGDMODL", 8));
    fsgd_api_buffer_free(buf);

    /* values other than 1 are kept: another model */
    toy_rows(&u, 2.0);
    fsgd_model_t *m2 = toy_train(&u, TOY_ROWS, NULL);
    CU_ASSERT_FALSE(same_model(m, m2));
    fsgd_api_model_free(m2);

    /* weight 1 changes nothing; weight 0 leaves the row out */
    static double w[TOY_ROWS];
    for (int r = 0; r < TOY_ROWS; r++)
        w[r] = 1;
    fsgd_model_t *ones = toy_train(&t, TOY_ROWS, w);
    CU_ASSERT_TRUE(same_model(m, ones));
    fsgd_api_model_free(ones);
    for (int r = TOY_ROWS / 2; r < TOY_ROWS; r++)
        w[r] = 0;
    fsgd_model_t *half = toy_train(&t, TOY_ROWS, w), *first = toy_train(&t, TOY_ROWS / 2, NULL);
    CU_ASSERT_TRUE(same_model(half, first));
    fsgd_api_model_free(half);
    fsgd_api_model_free(first);
    fsgd_api_model_free(m);
}

static void test_train_arrays_refused(void)
{
    static toy_t t;
    toy_rows(&t, 0);
    fsgd_api_train_t *h = NULL;
    fsgd_model_t *m = (fsgd_model_t *)&m;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(fsgd_api_train_new(&h, err, sizeof err), 0);
    CU_ASSERT_TRUE(isnan(fsgd_api_train_stat(h, "train_rows"))); /* before the run */
    CU_ASSERT_EQUAL(fsgd_api_train_set(h, "epochz", "3", err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_TRUE(strstr(err, "epochz") != NULL);
    CU_ASSERT_EQUAL(fsgd_api_train_set(h, "format", "criteo", err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_TRUE(strstr(err, "arrays") != NULL);
    CU_ASSERT_EQUAL(fsgd_api_train_run(h, &m, err, sizeof err), FSGD_E_FORMAT); /* no rows */
    CU_ASSERT_PTR_NULL(m);

    t.col[7] = t.col[6]; /* row 3: a column twice */
    CU_ASSERT_EQUAL(fsgd_api_train_data(h, TOY_ROWS, t.row_ptr, t.col, t.val, t.label, err, sizeof err),
                    FSGD_E_FORMAT);
    CU_ASSERT_TRUE(strstr(err, "row 3") != NULL);
    toy_rows(&t, 0);
    t.val[9] = NAN;
    CU_ASSERT_EQUAL(fsgd_api_train_data(h, TOY_ROWS, t.row_ptr, t.col, t.val, t.label, err, sizeof err),
                    FSGD_E_NONFINITE);
    CU_ASSERT_TRUE(strstr(err, "row 4") != NULL);
    toy_rows(&t, 0);
    t.label[2] = 7; /* labels -1, 1 and 7: not two classes */
    CU_ASSERT_EQUAL(fsgd_api_train_data(h, TOY_ROWS, t.row_ptr, t.col, t.val, t.label, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_run(h, &m, err, sizeof err), FSGD_E_FORMAT);
    CU_ASSERT_PTR_NULL(m);
    fsgd_api_train_free(h);

    CU_ASSERT_EQUAL_FATAL(fsgd_api_train_new(&h, err, sizeof err), 0);
    toy_rows(&t, 0);
    const double w[3] = {1, 1, 1};
    CU_ASSERT_EQUAL(fsgd_api_train_data(h, TOY_ROWS, t.row_ptr, t.col, NULL, t.label, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_data(h, TOY_ROWS, t.row_ptr, t.col, NULL, t.label, err, sizeof err),
                    FSGD_E_STATE);
    CU_ASSERT_EQUAL(fsgd_api_train_weights(h, w, 3, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_api_train_run(h, &m, err, sizeof err), FSGD_E_ARG); /* 3 weights, 400 rows */
    CU_ASSERT_TRUE(strstr(err, "3 of them for 400") != NULL);
    fsgd_api_train_free(h);
    fsgd_api_train_free(NULL);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"version", test_version},
        {"a model through its handle", test_model_handle},
        {"a bad or missing file: an error, no handle", test_bad_file},
        {"training on arrays: values, weights", test_train_arrays},
        {"training on arrays: bad rows, keys and calls refused", test_train_arrays_refused},
        {NULL, NULL},
    };
    fsgd_test_suite("api", cases);
}
