/* The aggregator's best weights (epochs auto, agg_auto.c) are never copied:
 * an undo log of θ before each step's update, emptied at every new best,
 * gives θ back exactly as it was at the best look when the last weights
 * score worse, whether keys repeat within a step or across steps, θ starts
 * at zero or not, and the log is compacted on the way (a small model). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agg_tune.h"
#include "fsgd/job.h"
#include "fsgd/loss.h"
#include "fsgd/model.h"
#include "testlib.h"

#define DIM 4096
#define HOLD_ROWS 64
#define STEPS 300

static double hold_loss(const fsgd_csr_t *h, const float *theta)
{
    fsgd_model_t m = {.kind = FSGD_LOSS_LOGISTIC, .dim = DIM, .w = (float *)theta};
    double sum = 0;
    for (size_t r = 0; r < h->n_rows; r++) {
        uint64_t lo = h->row_ptr[r];
        sum += fsgd_loss_value(FSGD_LOSS_LOGISTIC, fsgd_model_margin(&m, h->col + lo, h->val + lo, h->row_ptr[r + 1] - lo),
                               h->label[r]);
    }
    return sum / (double)h->n_rows;
}

static void run_case(int theta_zero)
{
    uint64_t seed = fsgd_test_seed() + (uint64_t)theta_zero;
    fsgd_job_t job;
    fsgd_job_dist_defaults(&job);
    job.train.bias = 0;
    fsgd_agg_stats_t st = {0};
    st.dataset_rows = 1000;
    char err[256];
    uint8_t logged[FSGD_AGG_REJ_COUNT] = {0};
    const agg_env_t env = {.err = err, .errsz = sizeof err, .s = &st, .logged = logged};
    agg_tune_t tune = {0};
    float *theta = calloc(DIM, sizeof *theta), *want = calloc(DIM, sizeof *want);
    tune.track = 1;
    CU_ASSERT_FATAL(theta && want);
    CU_ASSERT_EQUAL_FATAL(fsgd_sparse_reserve(&tune.before, 80), 0);
    if (!theta_zero)
        for (int k = 0; k < DIM; k++)
            theta[k] = (float)((double)(fsgd_test_rand(&seed) % 200) / 100.0 - 1.0);
    /* held-out rows over a few hundred keys, so that a step's keys move the loss */
    fsgd_csr_t *h = &tune.hold;
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_reserve(h, HOLD_ROWS, HOLD_ROWS * 8), 0);
    h->row_ptr[0] = 0;
    for (int r = 0; r < HOLD_ROWS; r++) {
        uint64_t at = h->row_ptr[r];
        for (int j = 0; j < 8; j++) {
            h->col[at + j] = (uint32_t)(j * 40 + fsgd_test_rand(&seed) % 40);
            h->val[at + j] = 1.0f;
        }
        h->label[r] = fsgd_test_rand(&seed) % 2 ? 1.0 : -1.0;
        h->row_ptr[r + 1] = at + 8;
    }
    h->n_rows = HOLD_ROWS;
    h->nnz = HOLD_ROWS * 8;
    CU_ASSERT_EQUAL_FATAL(fsgd_holdout_init(&tune.holdout, h, DIM), 0);
    tune.look_rows = 3; /* a look every 3 steps of one row */
    tune.patience = 1000;
    tune.best_loss = INFINITY;
    int bests = 0;
    uint32_t keys[80];
    for (int step = 0; step < STEPS; step++) {
        /* a step: distinct keys (a reduced gradient's), θ before the update kept as the step function keeps it */
        size_t n = 0, want_n = 1 + fsgd_test_rand(&seed) % 64;
        while (n < want_n) {
            uint32_t k = (uint32_t)(fsgd_test_rand(&seed) % (step % 2 ? 320 : DIM)); /* keys repeat across steps */
            int dup = 0;
            for (size_t i = 0; i < n; i++)
                dup |= keys[i] == k;
            if (dup)
                continue;
            keys[n] = k;
            tune.before.keys[n] = k;
            tune.before.vals[n++] = theta[k];
            theta[k] += (float)((double)(fsgd_test_rand(&seed) % 200) / 400.0 - 0.25);
        }
        if (step % 3 == 0) { /* a step that fits a held-out row: the loss falls now and then */
            size_t r = fsgd_test_rand(&seed) % HOLD_ROWS;
            for (uint64_t j = h->row_ptr[r]; j < h->row_ptr[r + 1]; j++) {
                int dup = 0;
                for (size_t i = 0; i < n; i++)
                    dup |= keys[i] == h->col[j];
                if (dup)
                    continue;
                keys[n] = h->col[j];
                tune.before.keys[n] = h->col[j];
                tune.before.vals[n++] = theta[h->col[j]];
                theta[h->col[j]] += (float)(0.3 * h->label[r]);
            }
        }
        tune.before.n = n;
        double before = tune.best_loss;
        int stop = 0;
        CU_ASSERT_EQUAL_FATAL(agg_auto_look(&tune, &env, &job.train, theta, DIM, 0, 1, &stop), 0);
        if (tune.best_loss < before) { /* a new best: the log starts again */
            bests++;
            CU_ASSERT_EQUAL(tune.n_undo, 0);
            CU_ASSERT(tune.best_loss == hold_loss(h, theta)); /* fsgd/holdout.h: bit for bit */
            memcpy(want, theta, DIM * sizeof *theta);
        }
    }
    CU_ASSERT(bests >= 2);
    CU_ASSERT(tune.cap_undo >= DIM); /* the log was compacted on the way (one entry a key at most then) */
    /* moves that make the holdout loss worse, then the end of the job */
    for (int r = 0; r < HOLD_ROWS; r++)
        for (uint64_t j = h->row_ptr[r]; j < h->row_ptr[r + 1]; j++) {
            tune.before.keys[0] = h->col[j];
            tune.before.vals[0] = theta[h->col[j]];
            tune.before.n = 1;
            theta[h->col[j]] -= (float)(3.0 * h->label[r]);
            int stop = 0;
            CU_ASSERT_EQUAL_FATAL(agg_auto_look(&tune, &env, &job.train, theta, DIM, 0, 0, &stop), 0);
        }
    CU_ASSERT(hold_loss(h, theta) > tune.best_loss);
    agg_auto_finish(&tune, &st, &job.train, theta, 1, 0);
    CU_ASSERT_EQUAL(memcmp(theta, want, DIM * sizeof *theta), 0);
    agg_auto_free(&tune);
    free(theta);
    free(want);
}

static void test_best_from_zero(void)
{
    run_case(1);
}

static void test_best_from_weights(void)
{
    run_case(0);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"best weights key by key, θ from zero", test_best_from_zero},
        {"best weights key by key, θ from a model", test_best_from_weights},
        {NULL, NULL},
    };
    fsgd_test_suite("agg_best", cases);
}
