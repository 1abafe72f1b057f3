/* The local trainer: thread-count invariance, convergence on data with a
 * known answer, batch semantics and argument errors. */
#include <math.h>
#include <stdlib.h>

#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/train.h"
#include "testlib.h"

static void base_job(fsgd_job_t *job)
{
    fsgd_job_defaults(job);
    job->quiet = 1;
    job->threads = 1;
    job->epochs = 2;
}

/* Rows with labels from a known sparse weight vector, so the answer is known. */
static void synthetic(fsgd_csr_t *m, size_t rows, uint32_t dim, int regression, uint64_t *rng)
{
    for (size_t r = 0; r < rows; r++) {
        uint32_t col[8];
        float val[8];
        size_t n = 0;
        for (uint32_t c = (uint32_t)(fsgd_test_rand(rng) % 5); c < dim && n < 8;
             c += 1 + (uint32_t)(fsgd_test_rand(rng) % 7)) {
            col[n] = c;
            val[n++] = (float)((double)(fsgd_test_rand(rng) % 2000) / 1000.0 - 1.0);
        }
        double margin = 0;
        for (size_t i = 0; i < n; i++)
            margin += (col[i] % 2 ? 1.5 : -1.0) * val[i];
        double y = regression ? margin + 0.25 : (margin > 0 ? 1 : -1);
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, y, col, val, n), 0);
    }
}

static void test_threads_agree(void)
{
    FSGD_TEST_DATA(path, "a9a");
    fsgd_csr_t data = {0};
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(path, NULL, &data, NULL, err, sizeof err), 0);
    fsgd_model_t m1 = {0}, m3 = {0};
    fsgd_train_stats_t s1, s3;
    fsgd_job_t job;
    base_job(&job);
    job.batch = 8192; /* ~113k nonzeros a step: enough work for 3 threads */
    job.epochs = 4;
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job, &data, NULL, data.max_col, &m1, &s1, NULL, NULL, err, sizeof err), 0);
    job.threads = 3;
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job, &data, NULL, data.max_col, &m3, &s3, NULL, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(s1.threads_used, 1);
    CU_ASSERT_EQUAL(s3.threads_used, 3);
    CU_ASSERT_EQUAL(s1.steps, s3.steps);
    CU_ASSERT_EQUAL(s1.rows, 4 * data.n_rows);
    double worst = 0;
    for (uint64_t k = 0; k <= m1.dim; k++)
        worst = fmax(worst, fabs((double)m1.w[k] - m3.w[k]));
    /* Same rows per step, same math; only float rounding of partial sums differs. */
    CU_ASSERT_TRUE(worst < 1e-4);
    if (worst >= 1e-4)
        fprintf(stderr, "\n  max |w1 - w3| = %g\n", worst);
    fsgd_model_free(&m1);
    fsgd_model_free(&m3);
    fsgd_csr_free(&data);
}

static void test_learns_known_models(void)
{
    uint64_t rng = fsgd_test_seed();
    fsgd_csr_t train = {0}, test = {0};
    synthetic(&train, 4000, 40, 0, &rng);
    synthetic(&test, 1000, 40, 0, &rng);
    char err[512];
    fsgd_job_t job;
    base_job(&job);
    job.threads = 2;
    job.epochs = 10;
    job.lr = 0.05;
    fsgd_loss_kind_t kinds[] = {FSGD_LOSS_LOGISTIC, FSGD_LOSS_HINGE};
    for (int i = 0; i < 2; i++) {
        job.model = kinds[i];
        fsgd_model_t m = {0};
        fsgd_train_stats_t st;
        CU_ASSERT_EQUAL_FATAL(fsgd_train(&job, &train, &test, 40, &m, &st, NULL, NULL, err, sizeof err), 0);
        CU_ASSERT_TRUE(st.test.auc > 0.98);
        CU_ASSERT_TRUE(st.test.accuracy > 0.9);
        /* the signs of the generating weights are recovered */
        int right = 0;
        for (uint32_t c = 0; c < 40; c++)
            right += (m.w[c] > 0) == (c % 2 == 1);
        CU_ASSERT_TRUE(right >= 36);
        fsgd_model_free(&m);
    }
    fsgd_csr_free(&train);
    fsgd_csr_free(&test);

    /* linear regression: the intercept 0.25 and the weights come back */
    synthetic(&train, 4000, 40, 1, &rng);
    synthetic(&test, 1000, 40, 1, &rng);
    job.model = FSGD_LOSS_SQUARED;
    fsgd_model_t m = {0};
    fsgd_train_stats_t st;
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job, &train, &test, 40, &m, &st, NULL, NULL, err, sizeof err), 0);
    CU_ASSERT_TRUE(st.test.rmse < 0.05);
    CU_ASSERT_DOUBLE_EQUAL(m.w[40], 0.25, 0.03);
    CU_ASSERT_DOUBLE_EQUAL(m.w[1], 1.5, 0.05);
    CU_ASSERT_DOUBLE_EQUAL(m.w[2], -1.0, 0.05);
    fsgd_model_free(&m);
    fsgd_csr_free(&train);
    fsgd_csr_free(&test);
}

static void test_batch_fraction_and_steps(void)
{
    uint64_t rng = 42;
    fsgd_csr_t train = {0};
    synthetic(&train, 100, 10, 0, &rng);
    char err[512];
    fsgd_job_t job;
    base_job(&job);
    job.batch = 0.25; /* 25 rows: 4 steps per epoch */
    job.epochs = 3;
    fsgd_model_t m = {0};
    fsgd_train_stats_t st;
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job, &train, NULL, 10, &m, &st, NULL, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(st.steps, 12);
    CU_ASSERT_EQUAL(st.rows, 300);
    fsgd_model_free(&m);
    job.batch = 30; /* 30, 30, 30, 10 */
    job.threads = 4; /* ~100 nonzeros a step: too little to split, one thread does it */
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job, &train, NULL, 10, &m, &st, NULL, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(st.steps, 12);
    CU_ASSERT_EQUAL(st.threads_used, 1);
    fsgd_model_free(&m);
    fsgd_csr_free(&train);
}

static void test_errors(void)
{
    uint64_t rng = 7;
    fsgd_csr_t train = {0}, empty = {0};
    synthetic(&train, 50, 20, 0, &rng);
    char err[512] = "";
    fsgd_job_t job;
    base_job(&job);
    fsgd_model_t m = {0};
    fsgd_train_stats_t st;
    CU_ASSERT_EQUAL(fsgd_train(&job, &train, NULL, 5, &m, &st, NULL, NULL, err, sizeof err), FSGD_E_RANGE);
    FSGD_ASSERT_CONTAINS(err, ">= dim 5");
    CU_ASSERT_EQUAL(fsgd_train(&job, &empty, NULL, 5, &m, &st, NULL, NULL, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "no training rows");
    snprintf(job.codec, sizeof job.codec, "fastsgd:tau=999");
    CU_ASSERT_TRUE(fsgd_train(&job, &train, NULL, 20, &m, &st, NULL, NULL, err, sizeof err) < 0);
    FSGD_ASSERT_CONTAINS(err, "tau");
    fsgd_job_defaults(&job);
    job.quiet = 1;
    snprintf(job.backend, sizeof job.backend, "tpu");
    CU_ASSERT_TRUE(fsgd_train(&job, &train, NULL, 20, &m, &st, NULL, NULL, err, sizeof err) < 0);
    FSGD_ASSERT_CONTAINS(err, "unknown backend 'tpu'");
    fsgd_csr_free(&train);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"1 and 3 threads train the same model", test_threads_agree},
        {"logistic, svm and linear learn known models", test_learns_known_models},
        {"batch as fraction and rows; steps per epoch", test_batch_fraction_and_steps},
        {"errors name the problem", test_errors},
        {NULL, NULL},
    };
    fsgd_test_suite("train", cases);
}
