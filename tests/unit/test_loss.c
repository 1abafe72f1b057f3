/* Losses: derivatives agree with finite differences of the values, the
 * values are stable at extreme margins, and the CPU backend's batch gradient
 * agrees with finite differences of the summed (regularized) loss on real
 * rows from a9a and ijcnn1. */
#include <math.h>
#include <stdlib.h>

#include "fsgd/backend.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "testlib.h"
#include "loss_testing.h"

static double urand(uint64_t *s) { return (double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0; }

static const fsgd_loss_kind_t kinds[] = {FSGD_LOSS_LOGISTIC, FSGD_LOSS_SQUARED, FSGD_LOSS_HINGE};

static void test_names(void)
{
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(fsgd_loss_parse(fsgd_loss_name(kinds[i])), kinds[i]);
    CU_ASSERT_EQUAL(fsgd_loss_parse("lr"), FSGD_LOSS_LOGISTIC);
    CU_ASSERT_EQUAL(fsgd_loss_parse("squared"), FSGD_LOSS_SQUARED);
    CU_ASSERT_EQUAL(fsgd_loss_parse("hinge"), FSGD_LOSS_HINGE);
    CU_ASSERT_EQUAL(fsgd_loss_parse("poisson"), 0);
    CU_ASSERT_STRING_EQUAL(fsgd_loss_name((fsgd_loss_kind_t)9), "unknown");
    CU_ASSERT_EQUAL(fsgd_loss_label(FSGD_LOSS_LOGISTIC, 0), -1);
    CU_ASSERT_EQUAL(fsgd_loss_label(FSGD_LOSS_LOGISTIC, 1), 1);
    CU_ASSERT_EQUAL(fsgd_loss_label(FSGD_LOSS_HINGE, -1), -1);
    CU_ASSERT_EQUAL(fsgd_loss_label(FSGD_LOSS_SQUARED, 3.25), 3.25);
}

/* d loss / d m against a central difference, for random (m, y). */
static void test_scalar_finite_differences(void)
{
    uint64_t s = fsgd_test_seed() ^ 0xD1FF;
    const double h = 1e-5;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2000; i++) {
            double m = (urand(&s) - 0.5) * 30;
            double y = kinds[k] == FSGD_LOSS_SQUARED ? (urand(&s) - 0.5) * 10 : (urand(&s) < 0.5 ? 1 : -1);
            if (kinds[k] == FSGD_LOSS_HINGE && fabs(1 - y * m) < 10 * h)
                continue; /* the kink: no derivative */
            double fd = (fsgd_loss_value(kinds[k], m + h, y) - fsgd_loss_value(kinds[k], m - h, y)) / (2 * h);
            double d = fsgd_loss_deriv(kinds[k], m, y);
            double tol = 1e-7 * (1 + fabs(d)) + 1e-9;
            if (fabs(fd - d) > tol)
                fprintf(stderr, "\n  %s m=%.17g y=%g: deriv %.17g, finite difference %.17g\n",
                        fsgd_loss_name(kinds[k]), m, y, d, fd);
            CU_ASSERT_TRUE(fabs(fd - d) <= tol);
        }
    /* the hinge subgradient at the kink is 0 (documented choice) */
    CU_ASSERT_EQUAL(fsgd_loss_deriv(FSGD_LOSS_HINGE, 1, 1), 0);
    CU_ASSERT_EQUAL(fsgd_loss_deriv(FSGD_LOSS_HINGE, 0.5, 1), -1);
    CU_ASSERT_EQUAL(fsgd_loss_deriv(FSGD_LOSS_HINGE, -0.5, -1), 1);
}

static void test_extremes(void)
{
    /* logistic: log(1 + e^{-ym}) at |m| far beyond exp's range */
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_value(FSGD_LOSS_LOGISTIC, 1000, 1), 0, 1e-300);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_value(FSGD_LOSS_LOGISTIC, -1000, 1), 1000, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_value(FSGD_LOSS_LOGISTIC, 1000, -1), 1000, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_value(FSGD_LOSS_LOGISTIC, 0, 1), log(2), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_value(FSGD_LOSS_LOGISTIC, 40, 1), exp(-40), 1e-30); /* log1p accuracy */
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_deriv(FSGD_LOSS_LOGISTIC, 1000, 1), 0, 1e-300);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_deriv(FSGD_LOSS_LOGISTIC, -1000, 1), -1, 0);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_deriv(FSGD_LOSS_LOGISTIC, 1000, -1), 1, 0);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_loss_deriv(FSGD_LOSS_LOGISTIC, 0, -1), 0.5, 0);
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_TRUE(isfinite(fsgd_loss_value(kinds[k], 1e300, -1)) || kinds[k] == FSGD_LOSS_SQUARED);
        CU_ASSERT_TRUE(isfinite(fsgd_loss_deriv(kinds[k], -1e300, 1)));
    }
}

/* Loads the first n rows of a real dataset. */
static int first_rows(const char *name, size_t n, fsgd_csr_t *out)
{
    const char *path = fsgd_test_data(name);
    if (!path)
        return -1;
    char err[512];
    fsgd_libsvm_reader_t *r = fsgd_libsvm_open(path, NULL, err, sizeof err);
    if (!r) {
        fprintf(stderr, "\n  %s\n", err);
        return -1;
    }
    long got = fsgd_libsvm_read(r, out, n, err, sizeof err);
    fsgd_libsvm_close(r);
    if (got != (long)n)
        fprintf(stderr, "\n  %s: read %ld rows: %s\n", name, got, got < 0 ? err : "");
    return got == (long)n ? 0 : -1;
}

/* F(θ) = scale·Σ loss(x_i·θ, y_i) + λ/2 Σ_{k touched} θ_k², whose gradient
 * the backend computes (λθ_k on touched keys). */
static double objective(fsgd_backend_t *b, const fsgd_grad_request_t *req, const fsgd_sparse_t *touched,
                        const float *theta)
{
    fsgd_sparse_t scratch = {0};
    double loss = 0;
    char err[256];
    int rc = fsgd_backend_gradient(b, req, &scratch, &loss, err, sizeof err);
    CU_ASSERT_EQUAL(rc, 0);
    fsgd_sparse_free(&scratch);
    double reg = 0;
    for (size_t i = 0; i < touched->n; i++)
        reg += (double)theta[touched->keys[i]] * theta[touched->keys[i]];
    return req->scale * loss + 0.5 * req->l2 * reg;
}

static void check_batch_gradient(const char *name, fsgd_loss_kind_t kind)
{
    fsgd_csr_t X = {0};
    if (!fsgd_test_data(name))
        return; /* skipped */
    CU_ASSERT_EQUAL_FATAL(first_rows(name, 64, &X), 0);
    uint64_t dim = X.max_col + 3; /* some keys no row touches */
    float *theta = calloc(dim, sizeof *theta);
    uint64_t s = fsgd_test_seed() ^ (0x6A4D + (uint64_t)kind);
    const float h = 1.0f / 1024; /* exact in float, so θ ± h is exact */
    char err[256];
    fsgd_backend_t *b = fsgd_backend_new("cpu", dim, theta, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    /* random θ; for hinge, redraw until no row sits within a step of the kink */
    for (int tries = 0;; tries++) {
        for (uint64_t k = 0; k < dim; k++)
            theta[k] = (float)((urand(&s) - 0.5) * 0.6);
        if (kind != FSGD_LOSS_HINGE)
            break;
        int near = 0;
        for (size_t r = 0; r < X.n_rows; r++) {
            double m = 0, l1 = 0;
            for (uint64_t i = X.row_ptr[r]; i < X.row_ptr[r + 1]; i++) {
                m += (double)theta[X.col[i]] * X.val[i];
                l1 = fabs(X.val[i]) > l1 ? fabs(X.val[i]) : l1;
            }
            near |= fabs(1 - fsgd_loss_label(kind, X.label[r]) * m) < 4 * h * l1;
        }
        if (!near)
            break;
        CU_ASSERT_TRUE_FATAL(tries < 1000);
    }
    fsgd_grad_request_t req = {.batch = &X, .batch_id = -1, .loss = kind, .scale = 1.0 / X.n_rows, .l2 = 0.1};
    fsgd_sparse_t g = {0};
    double loss_sum = 0;
    CU_ASSERT_EQUAL_FATAL(fsgd_backend_gradient(b, &req, &g, &loss_sum, err, sizeof err), 0);

    /* keys: exactly the union of the batch's columns, increasing */
    uint8_t *seen = calloc(dim, 1);
    size_t distinct = 0;
    for (size_t i = 0; i < X.nnz; i++)
        distinct += !seen[X.col[i]]++;
    CU_ASSERT_EQUAL(g.n, distinct);
    for (size_t i = 0; i < g.n; i++) {
        CU_ASSERT_TRUE(seen[g.keys[i]]);
        if (i)
            CU_ASSERT_TRUE(g.keys[i] > g.keys[i - 1]);
    }
    /* the loss sum is the plain sum of the rows' losses */
    double direct = 0;
    for (size_t r = 0; r < X.n_rows; r++) {
        double m = 0;
        for (uint64_t i = X.row_ptr[r]; i < X.row_ptr[r + 1]; i++)
            m += (double)theta[X.col[i]] * X.val[i];
        direct += fsgd_loss_value(kind, m, fsgd_loss_label(kind, X.label[r]));
    }
    CU_ASSERT_DOUBLE_EQUAL(loss_sum, direct, 1e-9 * (1 + fabs(direct)));

    size_t bad = 0;
    for (size_t i = 0; i < g.n; i++) {
        uint32_t k = g.keys[i];
        float t0 = theta[k];
        theta[k] = t0 + h;
        double fp = objective(b, &req, &g, theta);
        theta[k] = t0 - h;
        double fm = objective(b, &req, &g, theta);
        theta[k] = t0;
        double fd = (fp - fm) / (2.0 * h);
        double tol = 1e-5 + 1e-4 * fabs(fd);
        if (fabs(fd - g.vals[i]) > tol) {
            if (bad++ < 5)
                fprintf(stderr, "\n  %s %s key %u: gradient %.9g, finite difference %.9g\n", name,
                        fsgd_loss_name(kind), k, (double)g.vals[i], fd);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(seen);
    fsgd_sparse_free(&g);
    fsgd_backend_destroy(b);
    free(theta);
    fsgd_csr_free(&X);
}

static void test_batch_gradient_a9a(void)
{
    for (int k = 0; k < 3; k++)
        check_batch_gradient("a9a", kinds[k]);
}

static void test_batch_gradient_ijcnn1(void)
{
    for (int k = 0; k < 3; k++)
        check_batch_gradient("ijcnn1", kinds[k]);
}

/* Labels that do not fit the model: {1, 2} for logistic used to train
 * "silently" on one class (train auc nan, accuracy 1.0). */
static void test_label_sets(void)
{
    char err[512] = "";
    static const double ok01[] = {0, 1, 1, 0}, okpm[] = {-1, 1, 1}, l12[] = {1, 2, 2, 1}, one[] = {1, 1, 1},
                        three[] = {-1, 0, 1}, wide[] = {1, 2, 3, 4, 5, 6};
    fsgd_label_set_t s = {0};
    fsgd_label_set_add(&s, ok01, 4);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_LOGISTIC, &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_HINGE, &s, err, sizeof err), 0);
    memset(&s, 0, sizeof s);
    fsgd_label_set_add(&s, okpm, 3);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_LOGISTIC, &s, err, sizeof err), 0);
    memset(&s, 0, sizeof s);
    fsgd_label_set_add(&s, l12, 4);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_LOGISTIC, &s, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "labels {1, 2}: a logistic model needs two classes labelled {0, 1} or {-1, 1}");
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_SQUARED, &s, err, sizeof err), 0);
    memset(&s, 0, sizeof s);
    fsgd_label_set_add(&s, one, 3);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_HINGE, &s, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "every row has label 1: a svm model needs both classes");
    memset(&s, 0, sizeof s);
    fsgd_label_set_add(&s, three, 3);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_LOGISTIC, &s, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "labels {-1, 0, 1}");
    memset(&s, 0, sizeof s);
    fsgd_label_set_add(&s, wide, 6);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_LOGISTIC, &s, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "labels {1, 2, 3, 4, ...}");
    memset(&s, 0, sizeof s);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_LOGISTIC, &s, err, sizeof err), FSGD_E_FORMAT);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"names, parsing and label mapping", test_names},
        {"label sets that do not fit the model are refused", test_label_sets},
        {"derivatives agree with finite differences", test_scalar_finite_differences},
        {"values and derivatives at extreme margins", test_extremes},
        {"cpu batch gradient with l2 vs finite differences (a9a)", test_batch_gradient_a9a},
        {"cpu batch gradient with l2 vs finite differences (ijcnn1)", test_batch_gradient_ijcnn1},
        {NULL, NULL},
    };
    fsgd_test_suite("loss", cases);
}
