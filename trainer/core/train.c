/* fsgd train's driver: the call's checks and set-up, the rows cut into the
 * step batches, the epoch loop with early stopping on a holdout, and the
 * model at the end. The steps themselves are the engine's (train_engine.h),
 * the scoring train_eval.h's. */
#include "fsgd/train.h"

#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/adam.h"
#include "fsgd/backend.h"
#include "fsgd/clock.h"
#include "fsgd/csr_bias.h"
#include "fsgd/error.h"
#include "fsgd/ftrl.h"
#include "fsgd/loss.h"
#include "fsgd/strategy.h"
#include "train_batches.h"
#include "train_engine.h"
#include "train_eval.h"
#include "train_optimizer.h"
#include "train_pages.h"
#include "train_stream.h"

/* The codec spec the run uses: the job's, with efsign's stepsize added
 * when neither it nor the job's lr is given (fsgd_train_auto_efsign_lr).
 * Sets *lr_set to that stepsize, else 0. */
static void run_codec(const fsgd_train_params_t *job, size_t n_fit, size_t B, char *out, size_t outsz, double *lr_set)
{
    *lr_set = 0;
    snprintf(out, outsz, "%s", job->codec);
    const char *colon = strchr(job->codec, ':');
    size_t name_len = colon ? (size_t)(colon - job->codec) : strlen(job->codec);
    if (job->lr >= 0 || name_len != 6 || strncmp(job->codec, "efsign", 6) != 0)
        return;
    for (const char *p = colon; p; p = strchr(p + 1, ','))
        if (strncmp(p + 1, "lr=", 3) == 0)
            return;
    double lr = fsgd_train_auto_efsign_lr(n_fit, B);
    int n = snprintf(out, outsz, "%s%slr=%.4g", job->codec, colon ? "," : ":", lr);
    if (n < 0 || (size_t)n >= outsz) /* no room: the job's spec as it is */
        snprintf(out, outsz, "%s", job->codec);
    else
        *lr_set = lr;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void shuffle(uint32_t *p, size_t n, uint64_t *rng)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix(rng) % i);
        uint32_t tmp = p[i - 1];
        p[i - 1] = p[j];
        p[j] = tmp;
    }
}

/* Writes every page of p (each byte keeps its value), so that the pages
 * are mapped now rather than at their first use. */
static void touch_pages(void *p, size_t bytes)
{
    volatile unsigned char *c = p;
    for (size_t i = 0; i < bytes; i += 4096)
        c[i] = c[i];
    if (bytes)
        c[bytes - 1] = c[bytes - 1];
}

/* Cuts m down to its first rows rows, giving the rest of its arrays back
 * (a shrinking realloc of a large block unmaps its tail). */
static void keep_head(fsgd_csr_t *m, size_t rows)
{
    if (rows >= m->n_rows)
        return;
    size_t nnz = (size_t)m->row_ptr[rows];
    m->n_rows = m->cap_rows = rows;
    m->nnz = m->cap_nnz = nnz;
    void *p;
    if ((p = realloc(m->col, (nnz ? nnz : 1) * sizeof *m->col)))
        m->col = p;
    if (m->val && (p = realloc(m->val, (nnz ? nnz : 1) * sizeof *m->val)))
        m->val = p;
    if ((p = realloc(m->label, (rows ? rows : 1) * sizeof *m->label)))
        m->label = p;
    if ((p = realloc(m->row_ptr, (rows + 1) * sizeof *m->row_ptr)))
        m->row_ptr = p;
}

/* Batches of at least this many bytes are kept in a temporary file
 * (train_spill.h): FSGD_SPILL_MB MiB (0: always, as tests use; negative:
 * never), else 64 MiB. Smaller batches cost little memory, and reading
 * them back a step at a time would be a syscall more a step for nothing. */
static uint64_t spill_min_bytes(void)
{
    const char *e = getenv("FSGD_SPILL_MB");
    if (e && *e) {
        char *end;
        double mb = strtod(e, &end);
        if (*end == 0 && mb == mb)
            return mb < 0 ? UINT64_MAX : (uint64_t)(mb * 1048576.0);
    }
    return (uint64_t)64 << 20;
}

/* Gives back m's values past its first rows rows (a shrinking realloc of
 * a large block unmaps its tail); its rows stay, and those values must not
 * be read again. */
static void drop_values_after(fsgd_csr_t *m, size_t rows)
{
    if (rows >= m->n_rows || !m->val)
        return;
    size_t nnz = (size_t)m->row_ptr[rows];
    void *p = realloc(m->val, (nnz ? nnz : 1) * sizeof *m->val);
    if (p)
        m->val = p;
}

/* What the phases of train_impl share: the call's arguments, the trainer,
 * what set-up decides (holdout, batch size, threads) and the epoch loop's
 * running sums. */
typedef struct train_run {
    const fsgd_train_params_t *job;
    const fsgd_csr_t *train; /* NULL once shrunk: not read again */
    fsgd_csr_t *shrink;
    size_t keep_rows;
    const fsgd_csr_t *test;
    fsgd_csr_t *free_test;
    uint64_t dim, model_dim;
    int bias, ftrl;
    const fsgd_model_t *init;
    fsgd_model_t *model;
    fsgd_train_stats_t *stats;
    fsgd_train_progress_fn progress;
    void *ctx;
    char *err;
    size_t errsz;
    trainer_t t;
    fsgd_csr_t rows, test_rows;
    int auto_epochs, noisy_epochs;
    int tuned; /* lr auto with Adam: the settings it was tuned with */
    size_t n_hold, n_fit, B;
    double *test_margin;
    float *new_vals; /* device backends: the new θ of a step's keys */
    uint64_t rng;
    int started; /* threads running, this one included */
    fsgd_pages_t theta_pages; /* θ mapped on a helper during the cut */
    int max_epochs, test_live;
    uint64_t looks;
    fsgd_early_t early; /* epochs auto */
    double train_time, loss_acc, last_report;
    uint64_t loss_rows;
} train_run_t;

/* Gives back everything set-up made; returns rc. */
static int train_fail(train_run_t *r, int rc)
{
    fsgd_pages_join(&r->theta_pages);
    free(r->test_margin);
    fsgd_trainer_free(&r->t);
    fsgd_csr_free(&r->rows);
    fsgd_csr_free(&r->test_rows);
    return rc;
}

/* The call's limits, checked before anything is allocated. */
static int train_check(train_run_t *r)
{
    fsgd_train_stats_t *stats = r->stats;
    const fsgd_csr_t *train = r->train;
    char *err = r->err;
    size_t errsz = r->errsz;
    memset(stats, 0, sizeof *stats);
    stats->alpha = NAN;
    stats->time_to_target = -1;
    stats->best_test_auc = NAN;
    if (train->n_rows == 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "no training rows");
    if (train->n_rows > UINT32_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "%zu training rows: at most 2^32-1 in one process",
                            train->n_rows);
    if (train->max_col > r->dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "training data has column %llu >= dim %llu",
                            (unsigned long long)train->max_col - 1, (unsigned long long)r->dim);
    if (r->model_dim > (uint64_t)UINT32_MAX + 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "dim %llu plus the intercept exceeds 2^32 keys",
                            (unsigned long long)r->dim);
    if (r->init)
        FSGD_TRY(fsgd_train_check_init(r->job, r->dim, r->init, err, errsz));
    return 0;
}

/* The test rows' copy (with the intercept feature), θ and the row order.
 * Its failure is reported with set-up's other allocations (train_setup). */
static int train_alloc(train_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    int rc = 0;
    if (r->test)
        rc = fsgd_csr_copy_biased(r->test, r->dim, r->bias, (float)job->bias_value, &r->test_rows);
    if (rc == 0 && r->free_test) {
        fsgd_csr_free(r->free_test); /* copied: not read again */
        r->test = NULL;
    }
    fsgd_adam_params_t ap = {.lr = job->lr, .beta1 = job->beta1, .beta2 = job->beta2, .eps = job->eps};
    if (rc == 0)
        rc = r->ftrl ? fsgd_adam_init_weights(&r->t.adam, r->model_dim)
                     : fsgd_adam_init(&r->t.adam, r->model_dim, &ap);
    r->t.perm = malloc(r->train->n_rows * sizeof *r->t.perm);
    return rc;
}

/* epochs auto: a random holdout fraction of the rows is never trained on;
 * its mean loss decides when to stop (see train_look_holdout). Too few
 * rows of the rarer class for that: fixed epochs instead (noisy_epochs). */
static int train_pick_holdout(train_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    const fsgd_csr_t *train = r->train;
    r->auto_epochs = job->epochs <= 0;
    if (r->auto_epochs && job->model != FSGD_LOSS_SQUARED) {
        /* a holdout with a few dozen rows of the rarer class judges by
         * those rows alone: training stopped after 2-3 epochs on 27k rows
         * with 1% positives, 0.04 test AUC short of LIBLINEAR's C = 1 */
        size_t pos = 0;
        for (size_t i = 0; i < train->n_rows; i++)
            pos += train->label[i] > 0;
        size_t rare = pos < train->n_rows - pos ? pos : train->n_rows - pos;
        double held = job->holdout * (double)train->n_rows;
        if (held > FSGD_TRAIN_HOLDOUT_MAX)
            held = FSGD_TRAIN_HOLDOUT_MAX;
        double rare_held = (double)rare * held / (double)train->n_rows;
        if (rare_held < FSGD_TRAIN_HOLDOUT_MIN_CLASS) {
            r->auto_epochs = 0;
            r->noisy_epochs = fsgd_train_noisy_epochs(train->n_rows, job->max_epochs);
            r->stats->holdout_rare = rare_held;
        }
    }
    if (!r->auto_epochs)
        return 0;
    if (train->n_rows < 2)
        return fsgd_err_fmt(r->err, r->errsz, FSGD_E_ARG, "epochs auto needs at least 2 rows (one held out)");
    size_t n_hold = (size_t)(job->holdout * (double)train->n_rows);
    /* 50k rows measure a mean loss to ~0.3% and, the same rows at every
     * look, its changes far better; more would only cost look time and
     * training rows. */
    if (n_hold > FSGD_TRAIN_HOLDOUT_MAX)
        n_hold = FSGD_TRAIN_HOLDOUT_MAX;
    if (n_hold < 1)
        n_hold = 1;
    if (n_hold > train->n_rows / 2)
        n_hold = train->n_rows / 2;
    r->n_hold = n_hold;
    return 0;
}

/* The rows trained on and the rows of a step (the job's, or its fraction
 * of them), within 1 .. n_fit. */
static void train_pick_batch(train_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    r->n_fit = r->train->n_rows - r->n_hold;
    r->stats->holdout_rows = r->n_hold;
    size_t B = (size_t)fsgd_train_auto_batch(job, r->n_fit, 1); /* >= 1 */
    if (B > r->n_fit)
        B = r->n_fit;
    r->B = B;
}

/* A thread pays two barrier crossings per step (microseconds, far more
 * when the machine is busy); below ~FSGD_TRAIN_MIN_NNZ_PER_THREAD nonzeros
 * of work per thread a step is faster on fewer threads. Allocates the
 * workers and the test rows' margins. */
static void train_pick_threads(train_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    const fsgd_csr_t *train = r->train;
    double nnz_per_step =
        (double)r->B * (double)(train->nnz + (r->bias ? train->n_rows : 0)) / (double)train->n_rows;
    int W = job->threads < 1 ? 1 : job->threads;
    if (W > 64) /* the update merge keeps one cursor per thread on the stack */
        W = 64;
    int fit = (int)(nnz_per_step / FSGD_TRAIN_MIN_NNZ_PER_THREAD);
    if (W > 1 && fit < W)
        W = fit < 1 ? 1 : fit;
    r->stats->threads_used = W;
    r->stats->nnz_per_step = nnz_per_step;
    r->t.n_workers = W;
    r->t.workers = calloc((size_t)W, sizeof *r->t.workers);
    r->test_margin = malloc((r->test_rows.n_rows ? r->test_rows.n_rows : 1) * sizeof *r->test_margin);
}

/* Each thread's backend and worker side of the strategy, on the run's
 * codec spec, and the strategy's aggregator side. */
static int train_open_strategy(train_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    trainer_t *t = &r->t;
    const int W = t->n_workers;
    int rc = 0;
    char codec[sizeof job->codec + 32];
    run_codec(job, r->n_fit, r->B, codec, sizeof codec, &r->stats->codec_lr);
    for (int i = 0; i < W && rc == 0; i++) {
        worker_t *w = &t->workers[i];
        w->t = t;
        w->backend = fsgd_backend_new(fsgd_train_backend(job, (double)r->B / W), r->model_dim,
                                      t->adam.theta, r->err, r->errsz);
        if (!w->backend) {
            rc = FSGD_E_ARG;
            break;
        }
        w->strat = fsgd_sworker_new(codec, r->model_dim, job->seed + (uint64_t)i, r->err, r->errsz);
        if (!w->strat)
            rc = FSGD_E_ARG;
    }
    if (rc == 0 && !(t->agg = fsgd_sagg_new(codec, r->model_dim, job->seed, r->err, r->errsz)))
        rc = FSGD_E_ARG;
    t->plain = rc == 0 && fsgd_sagg_plain_sum(t->agg);
    t->direct = t->plain && strcmp(job->codec, "none") == 0;
    return rc;
}

/* --staleness τ (only when given: fsgd run's default is not fsgd train's):
 * the distributed run's bounded delay, simulated through the strategy's
 * aggregator side, as the aggregator process runs it. Then what the
 * strategy cannot be combined with. rc: set-up's so far (the staleness
 * stat is set either way). */
static int train_check_strategy(train_run_t *r, int rc)
{
    const fsgd_train_params_t *job = r->job;
    trainer_t *t = &r->t;
    if (rc == 0 && t->delay > 0) {
        if (strcmp(fsgd_backend_name(t->workers[0].backend), "cpu") != 0)
            rc = fsgd_err_fmt(r->err, r->errsz, FSGD_E_ARG,
                              "staleness %d: simulated on the cpu backend only (--backend cpu)", t->delay);
        else if (fsgd_stale_init(&t->stale, t->delay) < 0)
            rc = fsgd_err_fmt(r->err, r->errsz, FSGD_E_NOMEM, "out of memory");
        t->plain = t->direct = 0;
    }
    r->stats->staleness = t->delay; /* set with the optimizer */
    if (rc == 0 && job->shards > 1) {
        /* refused before the rows are cut: shard 0's spec is made as every shard's is */
        char spec[256];
        rc = fsgd_strategy_shard_spec(job->codec, r->model_dim, 0, (uint32_t)job->shards, spec, sizeof spec, r->err,
                                      r->errsz);
    }
    if (rc == 0 && r->ftrl && fsgd_sagg_optimizer(t->agg) == FSGD_OPT_APPLY)
        rc = fsgd_err_fmt(r->err, r->errsz, FSGD_E_ARG,
                          "codec %s runs the optimizer on the workers (the aggregator only averages their steps): "
                          "it cannot be combined with optimizer ftrl",
                          job->codec);
    return rc;
}

/* Everything before the rows are shuffled: holdout and batch size, the
 * optimizer (and the intercept's start), threads, backends and strategy.
 * On an error all is given back. */
static int train_setup(train_run_t *r)
{
    int rc = train_alloc(r);
    int hrc = train_pick_holdout(r);
    if (hrc < 0)
        return train_fail(r, hrc);
    train_pick_batch(r);
    if (r->job->staleness_given && r->job->staleness > 0) /* only a delay reads it: a pass over every value */
        r->t.row_l1 = fsgd_train_row_l1(r->job, fsgd_csr_abs_sum(r->train), r->train->n_rows);
    if (rc == 0) {
        rc = fsgd_train_setup_optimizer(&r->t, r->model_dim, r->n_fit, r->B, r->init, r->stats, r->err, r->errsz);
        if (rc == FSGD_E_ARG)
            return train_fail(r, rc);
    }
    /* with lr auto (whose Adam was tuned with it); an explicit lr keeps fsgd
     * run's start at 0 */
    r->tuned = rc == 0 && r->job->lr < 0 && !r->ftrl;
    if (r->tuned && r->bias && !r->init && r->job->model == FSGD_LOSS_LOGISTIC)
        r->t.adam.theta[r->dim] = fsgd_train_start_intercept(r->train->label, r->train->n_rows, r->job->bias_value);
    train_pick_threads(r);
    if (rc < 0 || !r->t.perm || !r->t.workers || !r->test_margin)
        return train_fail(r, fsgd_err_fmt(r->err, r->errsz, FSGD_E_NOMEM,
                                          "out of memory setting up training (model dim %llu)",
                                          (unsigned long long)r->model_dim));
    for (size_t i = 0; i < r->train->n_rows; i++)
        r->t.perm[i] = (uint32_t)i;
    rc = train_check_strategy(r, train_open_strategy(r));
    if (rc < 0)
        return train_fail(r, rc);
    snprintf(r->stats->backend, sizeof r->stats->backend, "%s (%s)", fsgd_backend_name(r->t.workers[0].backend),
             fsgd_backend_device(r->t.workers[0].backend));
    if (r->progress)
        r->progress(r->ctx, r->stats, -1);
    return 0;
}

/* The rows in the seed's random order: the first n_hold the holdout, the
 * rest cut into the batches' per-thread slices (fsgd_train_cut_slices). */
static int train_cut(train_run_t *r)
{
    trainer_t *t = &r->t;
    const fsgd_csr_t *train = r->train;
    const size_t W = (size_t)t->n_workers;
    int rc = 0;
    r->rng = r->job->seed;
    shuffle(t->perm, train->n_rows, &r->rng);
    const float bv = (float)r->job->bias_value;
    /* Binary rows (CTR data) are copied without their values, half the
     * memory: the holdout always (scored here), the slices where the
     * backend reads such batches (cpu). */
    const int ones = fsgd_csr_ones_with_bias(train, r->bias, bv);
    const int binary = ones && strcmp(fsgd_backend_name(t->workers[0].backend), "cpu") == 0;
    size_t hold_nnz = 0;
    for (size_t i = 0; i < r->n_hold; i++)
        hold_nnz += (size_t)(train->row_ptr[t->perm[i] + 1] - train->row_ptr[t->perm[i]]) + (r->bias ? 1 : 0);
    if (r->n_hold)
        rc = fsgd_csr_room(&t->hold, r->n_hold, hold_nnz, ones);
    for (size_t i = 0; i < r->n_hold && rc == 0; i++)
        rc = fsgd_csr_append_biased(&t->hold, train, t->perm[i], r->dim, r->bias, bv);
    /* then no copy reads the caller's values (all 1): those past the rows
     * it keeps go before the slices are made */
    if (binary && r->shrink)
        drop_values_after(r->shrink, r->keep_rows);
    /* Large batches go to a temporary file as they are cut (train_spill.h),
     * on the cpu backend (a device one keeps them on the device) */
    uint64_t batch_bytes =
        fsgd_spill_bytes(r->n_fit, train->nnz + (r->bias ? train->n_rows : 0), binary) + W * sizeof(uint64_t);
    if (rc == 0 && strcmp(fsgd_backend_name(t->workers[0].backend), "cpu") == 0 && batch_bytes >= spill_min_bytes())
        rc = fsgd_spill_open(&t->spill, ((r->n_fit + r->B - 1) / r->B) * W, binary);
    t->n_batches = (r->n_fit + r->B - 1) / r->B;
    t->slices = calloc(t->n_batches * W, sizeof *t->slices);
    t->batch_rows = malloc(t->n_batches * sizeof *t->batch_rows);
    t->order = malloc(t->n_batches * sizeof *t->order);
    if (!t->slices || !t->batch_rows || !t->order)
        return train_fail(r, fsgd_err_fmt(r->err, r->errsz, FSGD_E_NOMEM, "out of memory for %zu batches",
                                          t->n_batches));
    for (size_t b = 0; b < t->n_batches; b++) {
        size_t pos = r->n_hold + b * r->B;
        t->batch_rows[b] = train->n_rows - pos < r->B ? train->n_rows - pos : r->B;
        t->order[b] = (uint32_t)b;
    }
    if (rc == 0) {
        fsgd_train_cut_t cut = {.n_hold = r->n_hold, .B = r->B, .dim = r->dim, .bias = r->bias, .bv = bv,
                                .binary = binary, .helper = r->job->threads > 1};
        rc = fsgd_train_cut_slices(t, train, &cut);
        r->stats->batch_bytes = cut.bytes;
        r->stats->batch_bytes_on_disk = cut.on_disk;
        r->stats->batches_binary = binary;
    }
    if (rc < 0)
        return train_fail(r, fsgd_err_fmt(r->err, r->errsz, rc, "out of memory cutting the data into batches"));
    return 0;
}

/* Adam's key state, mapped before the first step (it touches every page):
 * with a second thread, half of it by a helper (train_pages.h). Nothing
 * else reads or writes it yet. */
static void map_key_state(train_run_t *r, void *keys, size_t bytes)
{
    /* split at a 2 MiB boundary: page-aligned for either page size */
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t mid = ((uintptr_t)keys + bytes / 2 + huge - 1) & ~(huge - 1);
    size_t low = mid < (uintptr_t)keys + bytes ? (size_t)(mid - (uintptr_t)keys) : bytes;
    fsgd_pages_t upper = {0};
    if (r->job->threads > 1 && low < bytes)
        fsgd_pages_start(&upper, (char *)keys + low, bytes - low);
    if (!upper.running)
        low = bytes;
    if (!fsgd_pages_map(keys, low))
        touch_pages(keys, low);
    fsgd_pages_join(&upper);
    if (low < bytes && !upper.mapped)
        touch_pages((char *)keys + low, bytes - low);
}

/* After the cut, before the steps: the caller's rows go, Adam's key state
 * is mapped, and the keys' l2 (and lr) factors are made where they help. */
static int train_prepare_steps(train_run_t *r)
{
    trainer_t *t = &r->t;
    fsgd_pages_join(&r->theta_pages);
    /* the batches and the holdout have their copies: train is not read again */
    if (r->shrink) {
        keep_head(r->shrink, r->keep_rows);
        r->train = NULL;
    }
    free(t->perm); /* the cut's order */
    t->perm = NULL;
    /* The cut's slices were small blocks of the heap, most of them freed
     * again (written to the file): give those pages back before Adam's
     * state is mapped (1M-row CTR set: ~20 MB of the peak). */
    malloc_trim(0);
    /* Adam's per-key state was left unmapped at setup, so that it did not
     * add to the two copies of the rows above (fsgd_adam_count_keys); it is
     * mapped now, outside the steps, as it was before that: 49k page
     * faults for 2^24 keys, 0.25 s, not charged to the first steps */
    if (t->adam.keys)
        map_key_state(r, t->adam.keys, (size_t)r->model_dim * sizeof *t->adam.keys);
    /* Only without a holdout: with one (large data), early stopping does
     * the rare keys' regularizing, and the factors' array cost a cache miss
     * a key and step (1M-row CTR set: same test AUC, ~15% slower). */
    if (r->tuned && r->noisy_epochs && t->plain && t->l2 > 0 && !(t->l2_scale = fsgd_train_key_l2_scale(t, r->model_dim)))
        return train_fail(r, fsgd_err_fmt(r->err, r->errsz, FSGD_E_NOMEM, "out of memory for the keys' l2 factors"));
    /* Without a holdout the run must come near the regularized optimum
     * within its fixed epochs, and a rare key moved by about lr a touch gets
     * there last: lr·sqrt(rarity) gave +0.003 test AUC on 27k rows with 1%
     * positives (three seeds). With a holdout on large data it only
     * overfits the rare keys (1M-row CTR set: 0.767 against 0.781). */
    if (t->l2_scale) {
        t->adam.rarity = t->l2_scale;
        t->adam.rarity_cap = (float)(FSGD_TRAIN_KEY_LR_MAX / t->adam.p.lr);
    }
    return 0;
}

/* --shards S > 1: the shards take over θ's optimizer state once every
 * factor of it is set (after train_prepare_steps). */
static int train_open_shards(train_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    trainer_t *t = &r->t;
    r->stats->shards = job->shards > 1 ? job->shards : 1;
    r->stats->shard_busy_mean = r->stats->shard_busy_max = NAN;
    r->stats->shard_range_busy_mean = r->stats->shard_range_busy_max = NAN;
    if (job->shards <= 1)
        return 0;
    char codec[sizeof job->codec + 32];
    double lr_set;
    run_codec(job, r->n_fit, r->B, codec, sizeof codec, &lr_set);
    fsgd_shards_opt_t o = {.spec = codec, .shards = (uint32_t)job->shards, .workers = t->n_workers,
                           .seed = job->seed, .adam = &t->adam, .ftrl = t->ftrl_on ? &t->ftrl : NULL,
                           .l2 = t->l2, .l2_scale = t->l2_scale};
    int rc;
    if (!(t->shards = fsgd_shards_new(&o, &rc, r->err, r->errsz)))
        return train_fail(r, rc);
    return 0;
}

/* Worker threads 1..W-1 (this thread is worker 0). When one cannot start,
 * the barriers count only those that did, so they can be released. */
static int train_start_threads(train_run_t *r)
{
    if (fsgd_trainer_start(&r->t, &r->started) < 0)
        return fsgd_err_fmt(r->err, r->errsz, FSGD_E_NOMEM, "cannot start worker thread %d", r->started);
    return 0;
}

/* The epoch loop's limits. Early stopping looks at the holdout `looks`
 * times an epoch (on big data one epoch can already be past the best
 * point) and stops after `patience` looks without a new best
 * (fsgd/train.h). */
static int train_loop_setup(train_run_t *r, int rc)
{
    const fsgd_train_params_t *job = r->job;
    trainer_t *t = &r->t;
    r->last_report = fsgd_clock_s();
    r->max_epochs = r->auto_epochs ? job->max_epochs : r->noisy_epochs ? r->noisy_epochs : job->epochs;
    r->looks = fsgd_train_looks(r->n_fit, t->n_batches);
    r->early.patience = fsgd_train_patience(r->looks);
    r->stats->patience_epochs = (double)r->early.patience / (double)r->looks;
    r->early.best_loss = r->early.kept_loss = INFINITY;
    if (r->auto_epochs && rc == 0) {
        int brc = fsgd_best_open(&t->best, (size_t)r->model_dim);
        t->hold_margin = malloc(t->hold.n_rows * sizeof *t->hold_margin);
        if (brc < 0 || !t->hold_margin)
            rc = fsgd_err_fmt(r->err, r->errsz, FSGD_E_NOMEM,
                              "out of memory for the early-stopping copy of the model");
    }
    /* Test rows are scored during training only when someone looks: progress
     * lines, --target-auc or --eval-every; otherwise once, at the end. */
    r->test_live = !job->quiet || job->target_auc > 0 || job->eval_every > 0;
    return rc;
}

/* Device backends keep their own θ: send them the new values. */
static int train_send_theta(train_run_t *r)
{
    trainer_t *t = &r->t;
    const int W = t->n_workers;
    int rc = 0;
    for (int i = 0; i < W && rc == 0; i++) {
        const fsgd_sparse_t *u = &t->workers[i].upd;
        float *nv = realloc(r->new_vals, (u->n ? u->n : 1) * sizeof *nv);
        if (!nv)
            return fsgd_err_fmt(r->err, r->errsz, FSGD_E_NOMEM, "out of memory");
        r->new_vals = nv;
        for (size_t e = 0; e < u->n; e++)
            r->new_vals[e] = t->adam.theta[u->keys[e]];
        for (int j = 0; j < W && rc == 0; j++)
            rc = fsgd_backend_apply(t->workers[j].backend, u->keys, r->new_vals, u->n, r->err, r->errsz);
    }
    return rc;
}

/* One step on batch b: every thread's gradient round, then the update (the
 * threads' own reduction when the strategy only sums, else the strategy's
 * step as the aggregator takes it). */
static int train_step(train_run_t *r, size_t b)
{
    trainer_t *t = &r->t;
    fsgd_train_stats_t *stats = r->stats;
    const int W = t->n_workers;
    int rc = 0;
    double s0 = fsgd_clock_s();
    size_t cnt = t->batch_rows[b];
    for (int i = 0; i < W; i++) {
        t->workers[i].batch = &t->slices[b * (size_t)W + (size_t)i];
        t->workers[i].batch_id = (int64_t)(b * (size_t)W + (size_t)i);
    }
    fsgd_stale_rewind(&t->stale, t->adam.theta);
    fsgd_trainer_round(t, PHASE_GRADIENT);
    fsgd_stale_replay(&t->stale, t->adam.theta);
    double s1 = fsgd_clock_s();
    stats->t_grad_round += s1 - s0;
    for (int i = 0; i < W && rc == 0; i++) {
        worker_t *w = &t->workers[i];
        if (w->rc < 0)
            rc = fsgd_err_fmt(r->err, r->errsz, w->rc, "worker %d: %s", i, w->err);
        r->loss_acc += w->loss;
    }
    if (rc < 0)
        return rc;
    r->loss_rows += cnt;
    t->inv_rows = 1.0 / (double)cnt;
    if (t->shards) {
        rc = fsgd_trainer_shards_step(t, cnt, s1 - s0, r->err, r->errsz);
        if (rc < 0)
            return rc;
    } else if (t->plain) {
        fsgd_trainer_split_keys(t, r->model_dim);
        fsgd_adam_advance(&t->adam);
        fsgd_trainer_round(t, PHASE_UPDATE);
    } else {
        double lsum = 0;
        for (int i = 0; i < W; i++)
            lsum += t->workers[i].loss;
        rc = fsgd_trainer_strategy_step(t, cnt, lsum, s1 - s0, r->err, r->errsz);
        if (rc < 0)
            return rc;
    }
    for (int i = 0; i < W && rc == 0; i++)
        if (t->workers[i].rc < 0)
            rc = fsgd_err_fmt(r->err, r->errsz, t->workers[i].rc, "worker %d: %s", i, t->workers[i].err);
    if (rc == 0 && strcmp(fsgd_backend_name(t->workers[0].backend), "cpu") != 0)
        rc = train_send_theta(r);
    if (rc < 0)
        return rc;
    double s2 = fsgd_clock_s();
    stats->t_update += s2 - s1;
    r->train_time += s2 - s0;
    stats->steps++;
    stats->rows += cnt;
    for (int i = 0; i < W; i++)
        stats->nnz += t->workers[i].batch->nnz;
    return 0;
}

/* epochs auto: the holdout's mean loss after step k of the epoch, at
 * evenly spread steps, the last of the epoch among them: exactly `looks`
 * an epoch (fsgd_train_looks). Keeps θ at a new best; stops early after
 * `patience` looks without one. Returns 0 or FSGD_E_NOMEM (with err). */
static int train_look_holdout(train_run_t *r, int epoch, size_t k, int last_step)
{
    const fsgd_train_params_t *job = r->job;
    trainer_t *t = &r->t;
    fsgd_train_stats_t *stats = r->stats;
    const uint64_t E = r->looks, nb = t->n_batches;
    if (!r->auto_epochs || !(last_step || ((uint64_t)(k + 1) * E) / nb != ((uint64_t)k * E) / nb))
        return 0;
    double h0 = fsgd_clock_s();
    /* the mean loss only: an AUC would sort the holdout at every look */
    fsgd_train_margins(job->threads, t->adam.theta, r->model_dim, &t->hold, t->hold_margin);
    double hold_loss = 0;
    for (size_t i = 0; i < t->hold.n_rows; i++)
        hold_loss += fsgd_loss_value(job->model, t->hold_margin[i], fsgd_loss_label(job->model, t->hold.label[i]));
    hold_loss /= (double)t->hold.n_rows;
    int rc = fsgd_early_look(&r->early, &t->best, t->adam.theta, hold_loss,
                             (double)(epoch - 1) + (double)(k + 1) / (double)t->n_batches, stats, r->err, r->errsz);
    double h1 = fsgd_clock_s();
    stats->t_holdout += h1 - h0;
    r->train_time += h1 - h0;
    return rc;
}

/* The test metrics on the current θ, when someone looks (test_live) at the
 * epoch's end, at an early stop and every --eval-every steps; the time
 * --target-auc was first reached. */
static void train_eval_test(train_run_t *r, int last_step)
{
    const fsgd_train_params_t *job = r->job;
    fsgd_train_stats_t *stats = r->stats;
    int eval_now = r->test_rows.n_rows && r->test_live &&
                   (last_step || r->early.stop ||
                    (job->eval_every > 0 && stats->steps % (uint64_t)job->eval_every == 0));
    stats->seconds = r->train_time;
    if (!eval_now)
        return;
    fsgd_train_margins(job->threads, r->t.adam.theta, r->model_dim, &r->test_rows, r->test_margin);
    stats->test = fsgd_metrics_compute(job->model, r->test_margin, r->test_rows.label, r->test_rows.n_rows);
    if (!isnan(stats->test.auc) && (isnan(stats->best_test_auc) || stats->test.auc > stats->best_test_auc))
        stats->best_test_auc = stats->test.auc;
    if (job->target_auc > 0 && stats->time_to_target < 0 && stats->test.auc >= job->target_auc) {
        stats->time_to_target = r->train_time;
        stats->target_clock = fsgd_clock_s();
    }
}

/* A progress line at the epoch's end (or an early stop) and at most once a
 * second otherwise, with the mean training loss since the last. */
static void train_report(train_run_t *r, int last_step)
{
    double tnow = fsgd_clock_s();
    if (r->early.stop)
        last_step = 1;
    if (!r->progress || !(last_step || tnow - r->last_report >= 1.0))
        return;
    r->stats->last_loss = r->loss_rows ? r->loss_acc / (double)r->loss_rows : NAN;
    fsgd_trainer_sum_stats(&r->t, r->stats);
    r->progress(r->ctx, r->stats, last_step);
    r->last_report = tnow;
    r->loss_acc = 0;
    r->loss_rows = 0;
}

/* The epochs: each visits the batches in a new random order. Returns rc,
 * or the first step's error. */
static int train_epochs(train_run_t *r, int rc)
{
    trainer_t *t = &r->t;
    for (int epoch = 1; epoch <= r->max_epochs && !r->early.stop && rc == 0; epoch++) {
        r->stats->epoch = epoch;
        shuffle(t->order, t->n_batches, &r->rng);
        for (size_t k = 0; k < t->n_batches && !r->early.stop && rc == 0; k++) {
            rc = train_step(r, t->order[k]);
            if (rc < 0)
                break;
            int last_step = k + 1 == t->n_batches;
            if ((rc = train_look_holdout(r, epoch, k, last_step)) < 0)
                break;
            train_eval_test(r, last_step);
            train_report(r, last_step);
        }
    }
    return rc;
}

/* Releases the worker threads from their wait for a round and joins them. */
static void train_stop_threads(train_run_t *r)
{
    fsgd_trainer_stop(&r->t, r->started);
}

/* The model's weights take θ's memory where the sizes agree (an intercept:
 * both dim + 1) and nothing reads θ after: its pages are mapped (touched
 * by the steps), where a fresh array's 2^24 floats took
 * 16k page faults to fill (the best weights read back, or θ copied). */
static int adopt_theta(train_run_t *r)
{
    trainer_t *t = &r->t;
    if (!t->adam.theta || r->model_dim != r->dim + 1 || r->job->save_state)
        return 0;
    free(r->model->w);
    r->model->w = t->adam.theta;
    t->adam.theta = NULL; /* the model frees it now */
    return 1;
}

/* The run's end: its stats, the final weights' test metrics and the model.
 * epochs auto keeps the weights of the best holdout loss, not the last. */
static int train_finish(train_run_t *r, int rc)
{
    const fsgd_train_params_t *job = r->job;
    trainer_t *t = &r->t;
    fsgd_train_stats_t *stats = r->stats;
    fsgd_trainer_sum_stats(t, stats);
    if (t->shards) {
        /* the shards' state is the model's: back into the global arrays */
        if (fsgd_shards_store(t->shards, &t->adam, t->ftrl_on ? &t->ftrl : NULL) < 0 && rc == 0)
            rc = fsgd_err_fmt(r->err, r->errsz, FSGD_E_NOMEM, "out of memory for the optimizer's state");
        fsgd_shards_busy(t->shards, &stats->shard_busy_mean, &stats->shard_busy_max, &stats->shard_range_busy_mean,
                         &stats->shard_range_busy_max);
        fsgd_shards_destroy(t->shards);
        t->shards = NULL;
    }
    stats->stopped_early = r->early.stop;
    stats->epochs_run = t->n_batches ? (double)stats->steps / (double)t->n_batches : 0;
    /* The batches are not read again: their memory goes before the model's
     * copy of the weights is made. */
    if (t->slices)
        for (size_t i = 0; i < t->n_batches * (size_t)t->n_workers; i++)
            fsgd_csr_free(&t->slices[i]);
    if (rc == 0) /* features only: the intercept (key dim) is not one */
        stats->weights_touched = t->ftrl_on ? fsgd_ftrl_touched(&t->ftrl, r->dim) : fsgd_adam_touched(&t->adam, r->dim);
    /* The optimizer's per-key state is not read again unless the model
     * keeps it: it goes before the model's weights are made (1M x 2^24
     * CTR set: 201 MB, else a peak of its own at the end) */
    if (!job->save_state) {
        free(t->adam.keys);
        free(t->adam.m);
        free(t->adam.v);
        t->adam.keys = NULL;
        t->adam.m = t->adam.v = NULL;
        fsgd_ftrl_free(&t->ftrl);
    }
    /* the model's weights: epochs auto's best, read back (train_best.h) */
    if (rc == 0) {
        rc = fsgd_model_init(r->model, job->model, r->dim, r->bias, (float)job->bias_value);
        if (rc < 0)
            fsgd_err_fmt(r->err, r->errsz, rc, "out of memory for the model");
        else {
            int adopted = adopt_theta(r);
            if (r->auto_epochs && r->early.best_loss < INFINITY)
                rc = fsgd_best_load(&t->best, r->model->w, r->err, r->errsz);
            else if (!adopted)
                memcpy(r->model->w, t->adam.theta, r->model_dim * sizeof *r->model->w);
        }
    }
    /* the caller may write the model while the test rows are scored */
    if (rc == 0 && r->progress && !job->save_state)
        r->progress(r->ctx, stats, FSGD_TRAIN_MODEL_READY);
    const float *final_w = r->model->w;
    if (rc == 0) {
        for (uint64_t k = 0; k < r->dim; k++)
            stats->weights_nonzero += final_w[k] != 0;
    }
    if (rc == 0 && r->test_rows.n_rows) {
        fsgd_train_margins(job->threads, final_w, r->model_dim, &r->test_rows, r->test_margin);
        stats->test = fsgd_metrics_compute(job->model, r->test_margin, r->test_rows.label, r->test_rows.n_rows);
        if (!isnan(stats->test.auc) && (isnan(stats->best_test_auc) || stats->test.auc > stats->best_test_auc))
            stats->best_test_auc = stats->test.auc;
    }
    if (rc == 0 && job->save_state && (rc = fsgd_train_save_state(t, fsgd_train_state_kind(job), r->model_dim, r->model)) < 0)
        fsgd_err_fmt(r->err, r->errsz, rc, "out of memory for the model");
    return rc;
}

/* fsgd_train on rows in memory (FSGD_TRAIN_ROWS, FSGD_TRAIN_ROWS_OWNED). */
static int train_in_memory(const fsgd_train_params_t *job, const fsgd_train_input_t *in, const fsgd_model_t *init,
                           fsgd_model_t *model, fsgd_train_stats_t *stats, const fsgd_train_hooks_t *hooks, char *err,
                           size_t errsz)
{
    const int owned = in->source == FSGD_TRAIN_ROWS_OWNED;
    train_run_t r = {.job = job, .train = owned ? in->owned_rows : in->rows,
                     .shrink = owned ? in->owned_rows : NULL, .keep_rows = owned ? in->keep_rows : 0,
                     .test = owned ? in->owned_test : in->test, .free_test = owned ? in->owned_test : NULL,
                     .dim = in->dim, .model_dim = in->dim + (job->bias ? 1 : 0),
                     .bias = job->bias, .ftrl = job->optimizer == FSGD_OPTIMIZER_FTRL, .init = init,
                     .model = model, .stats = stats, .progress = hooks ? hooks->progress : NULL,
                     .ctx = hooks ? hooks->ctx : NULL, .err = err, .errsz = errsz, .t = {.job = job}};
    int rc;
    if ((rc = train_check(&r)) < 0 || (rc = train_setup(&r)) < 0)
        return rc;
    /* θ's pages, every one touched by the first step, are mapped while the
     * rows are cut (train_pages.h) */
    if (job->threads > 1 && r.t.adam.theta)
        fsgd_pages_start(&r.theta_pages, r.t.adam.theta, (size_t)r.model_dim * sizeof *r.t.adam.theta);
    if ((rc = train_cut(&r)) < 0 || (rc = train_prepare_steps(&r)) < 0 || (rc = train_open_shards(&r)) < 0)
        return rc;
    rc = train_start_threads(&r);
    rc = train_loop_setup(&r, rc);
    rc = train_epochs(&r, rc);
    train_stop_threads(&r);
    rc = train_finish(&r, rc);
    free(r.new_vals);
    free(r.test_margin);
    fsgd_trainer_free(&r.t);
    fsgd_csr_free(&r.rows);
    fsgd_csr_free(&r.test_rows);
    return rc;
}

int fsgd_train(const fsgd_train_params_t *job, const fsgd_train_input_t *in, const fsgd_model_t *init, fsgd_model_t *model,
               fsgd_train_stats_t *stats, const fsgd_train_hooks_t *hooks, char *err, size_t errsz)
{
    switch (in->source) {
    case FSGD_TRAIN_CACHE:
        if (init)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "a warm start (init) is not supported from a row cache");
        return fsgd_train_stream(job, in, model, stats, hooks, err, errsz);
    case FSGD_TRAIN_ROWS:
    case FSGD_TRAIN_ROWS_OWNED:
        break;
    default:
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unknown training input source %d", (int)in->source);
    }
    const int owned = in->source == FSGD_TRAIN_ROWS_OWNED;
    if (!(owned ? in->owned_rows : in->rows))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "no training rows");
    int rc = train_in_memory(job, in, init, model, stats, hooks, err, errsz);
    if (owned)
        fsgd_csr_free(in->owned_test); /* if an early error left it whole */
    return rc;
}
