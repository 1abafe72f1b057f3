/* fsgd train --shards S (trainer/core/train_shards.c): the model must not
 * depend on S with the lossless strategy (bit for bit), a lossy one stays
 * within a small AUC of S = 1, and the strategies that cannot shard are
 * refused with the reason (issue 25). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/job.h"
#include "fsgd/train.h"
#include "testlib.h"

typedef struct run {
    fsgd_model_t model;
    fsgd_train_stats_t stats;
    int rc;
    char err[512];
} run_t;

static void train_s(const fsgd_job_t *base, int shards, const fsgd_csr_t *data, const fsgd_csr_t *test, run_t *r)
{
    fsgd_job_t job = *base;
    job.train.shards = shards;
    memset(r, 0, sizeof *r);
    uint64_t dim = data->max_col > (test ? test->max_col : 0) ? data->max_col : test->max_col;
    r->rc = fsgd_train(&job.train, &(fsgd_train_input_t){.rows = data, .test = test, .dim = dim}, NULL, &r->model, &r->stats,
                       NULL, r->err, sizeof r->err);
    if (r->rc < 0 && !strstr(r->err, "cannot"))
        fprintf(stderr, "\n  shards %d, codec %s: %s\n", shards, job.train.codec, r->err);
}

static int load(const char *name, fsgd_csr_t *m)
{
    const char *path = fsgd_test_data(name);
    if (!path)
        return -1;
    char err[512];
    int rc = fsgd_libsvm_load(path, NULL, m, NULL, err, sizeof err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc < 0)
        fprintf(stderr, "\n  %s: %s\n", path, err);
    return rc;
}

static int same_model(const fsgd_model_t *a, const fsgd_model_t *b)
{
    return a->dim == b->dim && memcmp(a->w, b->w, (a->dim + (a->has_bias ? 1 : 0)) * sizeof *a->w) == 0;
}

/* codec none: S = 2 and 4 give S = 1's model exactly, for Adam (lr auto:
 * per-key counts and rarity; an explicit lr: plain Adam), FTRL, one thread
 * and three, fixed epochs and early stopping. */
static void test_none_bit_for_bit(void)
{
    fsgd_csr_t data = {0}, test = {0};
    if (load("a9a", &data) < 0 || load("a9a.t", &test) < 0)
        goto out;
    struct {
        const char *what;
        int threads, batch, epochs, ftrl;
        double lr;
    } cases[] = {
        {"epochs auto, 1 thread", 1, 0, 0, 0, -1},
        {"3 threads, batch 8192, 3 epochs", 3, 8192, 3, 0, -1},
        {"ftrl, 3 threads", 3, 8192, 2, 1, -1},
        {"lr 0.01 (plain Adam), 2 epochs", 1, 0, 2, 0, 0.01},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        fsgd_job_t job;
        fsgd_job_train_defaults(&job);
        job.train.quiet = 1;
        job.train.threads = cases[c].threads;
        if (cases[c].batch)
            job.train.batch = cases[c].batch;
        job.train.epochs = cases[c].epochs;
        job.train.lr = cases[c].lr;
        if (cases[c].ftrl)
            job.train.optimizer = FSGD_OPTIMIZER_FTRL;
        run_t r1, rs;
        train_s(&job, 1, &data, &test, &r1);
        CU_ASSERT_EQUAL_FATAL(r1.rc, 0);
        CU_ASSERT_EQUAL(r1.stats.shards, 1);
        CU_ASSERT_TRUE(isnan(r1.stats.shard_busy_mean));
        for (int S = 2; S <= 4; S += 2) {
            train_s(&job, S, &data, &test, &rs);
            CU_ASSERT_EQUAL_FATAL(rs.rc, 0);
            CU_ASSERT_EQUAL(rs.stats.shards, S);
            CU_ASSERT_EQUAL(rs.stats.steps, r1.stats.steps);
            CU_ASSERT_EQUAL(rs.stats.threads_used, r1.stats.threads_used);
            int same = same_model(&r1.model, &rs.model);
            CU_ASSERT_TRUE(same);
            if (!same)
                fprintf(stderr, "\n  %s: S = %d's model differs from S = 1's\n", cases[c].what, S);
            /* a share is the busiest shard's keys over the mean: >= 1, <= S */
            CU_ASSERT_TRUE(rs.stats.shard_busy_mean >= 1 && rs.stats.shard_busy_mean <= rs.stats.shard_busy_max);
            CU_ASSERT_TRUE(rs.stats.shard_busy_max <= S);
            CU_ASSERT_TRUE(rs.stats.shard_range_busy_mean >= 1 && rs.stats.shard_range_busy_max <= S);
            /* none's parts: the same entries in S messages of the same format */
            CU_ASSERT_EQUAL(rs.stats.raw_bytes, r1.stats.raw_bytes);
            CU_ASSERT_TRUE(rs.stats.wire_bytes > r1.stats.wire_bytes);
            fsgd_model_free(&rs.model);
        }
        fsgd_model_free(&r1.model);
    }
out:
    fsgd_csr_free(&data);
    fsgd_csr_free(&test);
}

/* w8a (3% positives): epochs auto trains fixed epochs on every row with
 * λ's per-key factors (fsgd train's key_l2_scale), which the sharded step
 * takes too: still S = 1's model exactly. */
static void test_none_key_l2(void)
{
    fsgd_csr_t data = {0};
    if (load("w8a", &data) < 0)
        goto out;
    fsgd_job_t job;
    fsgd_job_train_defaults(&job);
    job.train.quiet = 1;
    job.train.threads = 1;
    run_t r1, r4;
    train_s(&job, 1, &data, NULL, &r1);
    train_s(&job, 4, &data, NULL, &r4);
    CU_ASSERT_EQUAL_FATAL(r1.rc, 0);
    CU_ASSERT_EQUAL_FATAL(r4.rc, 0);
    CU_ASSERT_TRUE(r1.stats.holdout_rare > 0); /* the path with the factors */
    CU_ASSERT_TRUE(same_model(&r1.model, &r4.model));
    fsgd_model_free(&r1.model);
    fsgd_model_free(&r4.model);
out:
    fsgd_csr_free(&data);
}

/* fastsgd (ef=0, τ = 128): each shard's part is encoded with the whole
 * gradient's Σ|v| (fsgd_sworker_set_whole), so the parts carry exactly the
 * pairs and levels of S = 1's one message: S = 2, 4, 8 give S = 1's model
 * bit for bit. Per part, the threshold Σ|v|/b^τ fell with the part's sum and
 * kept up to 3.4x the pairs (the paper-regime bench's sharded uplink). */
static void test_fastsgd_bit_for_bit(void)
{
    fsgd_csr_t data = {0}, test = {0};
    if (load("a9a", &data) < 0 || load("a9a.t", &test) < 0)
        goto out;
    fsgd_job_t job;
    fsgd_job_train_defaults(&job);
    job.train.quiet = 1;
    job.train.threads = 2;
    job.train.epochs = 3;
    snprintf(job.train.codec, sizeof job.train.codec, "fastsgd");
    run_t r1, rs;
    train_s(&job, 1, &data, &test, &r1);
    CU_ASSERT_EQUAL_FATAL(r1.rc, 0);
    for (int S = 2; S <= 8; S *= 2) {
        train_s(&job, S, &data, &test, &rs);
        CU_ASSERT_EQUAL_FATAL(rs.rc, 0);
        int same = same_model(&r1.model, &rs.model);
        CU_ASSERT_TRUE(same);
        if (!same)
            fprintf(stderr, "\n  fastsgd S = %d: model differs from S = 1's (test AUC %.6f against %.6f)\n", S,
                    rs.stats.test.auc, r1.stats.test.auc);
        CU_ASSERT_EQUAL(rs.stats.raw_bytes, r1.stats.raw_bytes);
        fsgd_model_free(&rs.model);
    }
    fsgd_model_free(&r1.model);
out:
    fsgd_csr_free(&data);
    fsgd_csr_free(&test);
}

/* Every strategy at S = 4: within 0.01 test AUC of its S = 1, or refused
 * with the error naming it and why. */
static void test_every_strategy(void)
{
    fsgd_csr_t data = {0}, test = {0};
    if (load("a9a", &data) < 0 || load("a9a.t", &test) < 0)
        goto out;
    static const struct {
        const char *spec, *refusal; /* refusal NULL: it shards */
    } cases[] = {
        {"none", NULL},
        {"fastsgd", NULL},
        {"logquant", NULL},
        {"topk", NULL},
        {"sketchml", NULL},
        {"efsign", NULL},
        {"gtopk:k=8", NULL},
        {"gtopk:density=0.05", NULL},
        /* a9a's 124 keys: ceil(0.001 x 124) = 1 entry, no budget for 4 shards */
        {"gtopk", "strategy gtopk: k = ceil(density x dim 124) = 1 entries cannot be split over 4 shards"},
        {"gradiveq", "strategy gradiveq cannot run on 4 shards (shards > 1): its PCA basis"},
        {"mqgrad", "strategy mqgrad cannot run on 4 shards (shards > 1): one SARSA agent"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        fsgd_job_t job;
        fsgd_job_train_defaults(&job);
        job.train.quiet = 1;
        job.train.threads = 2;
        job.train.batch = 4096; /* two worker threads, each with its strategy state per shard */
        job.train.epochs = 3;
        snprintf(job.train.codec, sizeof job.train.codec, "%s", cases[c].spec);
        run_t r4;
        train_s(&job, 4, &data, &test, &r4);
        if (cases[c].refusal) {
            CU_ASSERT_EQUAL(r4.rc, FSGD_E_ARG);
            int named = strstr(r4.err, cases[c].refusal) != NULL;
            CU_ASSERT_TRUE(named);
            if (!named)
                fprintf(stderr, "\n  %s: refusal '%s'\n", cases[c].spec, r4.err);
            continue;
        }
        run_t r1;
        train_s(&job, 1, &data, &test, &r1);
        CU_ASSERT_EQUAL_FATAL(r1.rc, 0);
        CU_ASSERT_EQUAL_FATAL(r4.rc, 0);
        CU_ASSERT_EQUAL(r4.stats.threads_used, 2);
        double d = fabs(r4.stats.test.auc - r1.stats.test.auc);
        CU_ASSERT_TRUE(d <= 0.01);
        if (d > 0.01)
            fprintf(stderr, "\n  %s S = 4: test AUC %.5f, S = 1 %.5f\n", cases[c].spec, r4.stats.test.auc,
                    r1.stats.test.auc);
        fsgd_model_free(&r1.model);
        fsgd_model_free(&r4.model);
    }
out:
    fsgd_csr_free(&data);
    fsgd_csr_free(&test);
}

/* The busy shares on steps whose keys are known: every row has features
 * 0, 2, 4, 6 of 8 and the intercept is key 8, so each step touches keys
 * {0, 2, 4, 6, 8}. At S = 2 they are all shard 0's: 5 keys against a mean
 * of 2.5, a share of exactly 2; contiguous ranges [0, 4) and [4, 9) hold 2
 * and 3 of them: 1.2. */
static void test_busy_share(void)
{
    fsgd_csr_t data = {0};
    const uint32_t col[4] = {0, 2, 4, 6};
    const float val[4] = {1, 1, 1, 1};
    for (int r = 0; r < 64; r++)
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&data, r % 2 ? 1 : -1, col, val, 4), 0);
    fsgd_job_t job;
    fsgd_job_train_defaults(&job);
    job.train.quiet = 1;
    job.train.threads = 1;
    job.train.epochs = 2;
    job.train.batch = 16;
    job.train.bias = 1;
    run_t r;
    fsgd_job_t j2 = job;
    j2.train.shards = 2;
    memset(&r, 0, sizeof r);
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&j2.train, &(fsgd_train_input_t){.rows = &data, .dim = 8}, NULL, &r.model,
                                     &r.stats, NULL, r.err, sizeof r.err), 0);
    CU_ASSERT_EQUAL(r.stats.steps, 8);
    CU_ASSERT_DOUBLE_EQUAL(r.stats.shard_busy_mean, 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.stats.shard_busy_max, 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.stats.shard_range_busy_mean, 1.2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.stats.shard_range_busy_max, 1.2, 1e-12);
    /* shard 1 owns odd keys no row has: their weights stay 0 */
    for (uint64_t k = 1; k < 8; k += 2)
        CU_ASSERT_EQUAL(r.model.w[k], 0.0f);
    CU_ASSERT_NOT_EQUAL(r.model.w[0], 0.0f);
    fsgd_model_free(&r.model);
    fsgd_csr_free(&data);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"codec none: S = 1, 2, 4 give the same model bit for bit", test_none_bit_for_bit},
        {"codec none with lambda's per-key factors: S = 4 is S = 1", test_none_key_l2},
        {"fastsgd: S = 2, 4, 8 give S = 1's model bit for bit", test_fastsgd_bit_for_bit},
        {"every strategy at S = 4: within 0.01 AUC of S = 1 or refused", test_every_strategy},
        {"busiest shard's share on steps of known keys", test_busy_share},
        {NULL, NULL},
    };
    fsgd_test_suite("train_shards", cases);
}
