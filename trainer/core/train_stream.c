/* fsgd_train over a row cache: bounded memory for files larger than RAM.
 * The same step as fsgd_train with codec none (the raw gradient sums,
 * divided by the step's rows, plus λθ, into sparse Adam), the same defaults
 * and the same early stopping; only where the rows come from differs: chunks
 * read from the cache each epoch, shuffled within a chunk. With threads, as
 * fsgd_train decides them (FSGD_TRAIN_MIN_NNZ_PER_THREAD nonzeros a thread
 * a step), each step's rows are cut into one slice a thread (each thread
 * copying its own) and run through fsgd_train's own parallel step
 * (train_pool.h); one thread keeps the plain serial step. With --threads > 1 a reader thread also reads the next
 * chunk while the step loop trains on this one (the same rows in the same
 * order: the model does not depend on it). */
#include "train_stream.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/adam.h"
#include "fsgd/clock.h"
#include "fsgd/csr_bias.h"
#include "fsgd/ftrl.h"
#include "fsgd/backend.h"
#include "fsgd/error.h"
#include "fsgd/loss.h"
#include "fsgd/rowcache.h"
#include "fsgd/sparse.h"
#include "fsgd/train.h"
#include "train_pool.h"
#include "train_best.h"

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double mean_loss(fsgd_loss_kind_t kind, const float *theta, uint64_t model_dim, const fsgd_csr_t *rows)
{
    double sum = 0;
    for (size_t r = 0; r < rows->n_rows; r++) {
        double m = 0;
        for (uint64_t i = rows->row_ptr[r]; i < rows->row_ptr[r + 1]; i++)
            if (rows->col[i] < model_dim)
                m += (double)theta[rows->col[i]] * rows->val[i];
        sum += fsgd_loss_value(kind, m, fsgd_loss_label(kind, rows->label[r]));
    }
    return rows->n_rows ? sum / (double)rows->n_rows : NAN;
}

static fsgd_metrics_t metrics(fsgd_loss_kind_t kind, const float *theta, uint64_t model_dim, const fsgd_csr_t *rows,
                              double *margin)
{
    for (size_t r = 0; r < rows->n_rows; r++) {
        double m = 0;
        for (uint64_t i = rows->row_ptr[r]; i < rows->row_ptr[r + 1]; i++)
            if (rows->col[i] < model_dim)
                m += (double)theta[rows->col[i]] * rows->val[i];
        margin[r] = m;
    }
    return fsgd_metrics_compute(kind, margin, rows->label, rows->n_rows);
}

/* Copies every row of src through fsgd_csr_append_biased. */
static int biased_copy(const fsgd_csr_t *src, uint64_t dim, int bias, float bv, fsgd_csr_t *dst)
{
    for (size_t r = 0; src && r < src->n_rows; r++)
        FSGD_TRY(fsgd_csr_append_biased(dst, src, r, dim, bias, bv));
    return FSGD_E_OK;
}

/* The reader thread: fills one chunk while the other is trained on. */
typedef struct prefetch {
    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    fsgd_rowcache_reader_t *rd;
    fsgd_csr_t *into; /* the chunk to fill */
    int state;        /* 0 idle, 1 a read asked for, 2 read done */
    int stop;
    long got;
    char err[512];
} prefetch_t;

static void *prefetch_main(void *arg)
{
    prefetch_t *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->state != 1 && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        long got = fsgd_rowcache_read(p->rd, p->into, FSGD_TRAIN_STREAM_CHUNK, p->err, sizeof p->err);
        pthread_mutex_lock(&p->mu);
        p->got = got;
        p->state = 2;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void prefetch_ask(prefetch_t *p, fsgd_csr_t *into)
{
    pthread_mutex_lock(&p->mu);
    p->into = into;
    p->state = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Waits for the read asked for, if any: its result (0 when none was asked). */
static long prefetch_wait(prefetch_t *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->state == 1)
        pthread_cond_wait(&p->cv, &p->mu);
    long got = p->state == 2 ? p->got : 0;
    p->state = 0;
    pthread_mutex_unlock(&p->mu);
    return got;
}

static void prefetch_stop(prefetch_t *p)
{
    if (!p->running)
        return;
    prefetch_wait(p);
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    p->running = 0;
}

typedef struct stream {
    fsgd_rowcache_reader_t *rd;
    prefetch_t pf;
    fsgd_csr_t chunks[2]; /* the one trained on, the one being read (prefetch) */
    fsgd_csr_t *chunk;    /* this step loop's rows */
    int filling;          /* prefetch: the chunk the reader fills */
    fsgd_backend_t *backend;
    fsgd_train_pool_t *pool; /* threads > 1: the parallel step */
    fsgd_adam_t adam;
    int ftrl_on; /* optimizer ftrl, one thread: FTRL's z and n; θ is adam.theta */
    fsgd_ftrl_t ftrl;
    fsgd_csr_t batch, hold, test;
    fsgd_sparse_t grad;
    uint32_t *perm;
    fsgd_best_t best; /* epochs auto: θ at the best look, in a temporary file (train_best.h) */
    double *margin;
} stream_t;

static void stream_free(stream_t *s)
{
    prefetch_stop(&s->pf);
    fsgd_rowcache_free(s->rd);
    fsgd_backend_destroy(s->backend);
    fsgd_train_pool_free(s->pool);
    fsgd_adam_free(&s->adam);
    fsgd_ftrl_free(&s->ftrl);
    fsgd_csr_free(&s->chunks[0]);
    fsgd_csr_free(&s->chunks[1]);
    fsgd_csr_free(&s->batch);
    fsgd_csr_free(&s->hold);
    fsgd_csr_free(&s->test);
    fsgd_sparse_free(&s->grad);
    free(s->perm);
    fsgd_best_close(&s->best);
    free(s->margin);
}

/* What the phases of fsgd_train_stream share: the call's arguments, the
 * stream, what set-up decides (batch, threads, optimizer) and the epoch
 * loop's running sums. */
typedef struct stream_run {
    const fsgd_train_params_t *job;
    const char *cache_path;
    const fsgd_csr_t *hold_in, *test_in;
    uint64_t dim, model_dim, n_fit;
    int bias, auto_epochs, W;
    float bv;
    fsgd_train_stats_t *stats;
    fsgd_train_progress_fn progress;
    void *ctx;
    char *err;
    size_t errsz;
    stream_t s;
    fsgd_adam_t *adam; /* the pool's (threads) or s.adam */
    size_t B, steps_per_epoch;
    double l2;
    uint64_t rng;
    int max_epochs, test_live;
    double train_time, loss_acc, last_report;
    uint64_t loss_rows;
    fsgd_early_t early; /* epochs auto */
} stream_run_t;

/* One step on rows perm[lo, lo + cnt) of the chunk, on this thread: the
 * step gradient of fsgd_train (mean over the step's rows plus λθ) into Adam. */
static int step_serial(stream_run_t *r, size_t lo, size_t cnt, double *loss, size_t *nnz)
{
    stream_t *s = &r->s;
    fsgd_adam_t *adam = r->adam;
    fsgd_train_stats_t *stats = r->stats;
    const double l2 = r->l2;
    double s0 = fsgd_clock_s();
    fsgd_csr_clear(&s->batch);
    for (size_t i = lo; i < lo + cnt; i++)
        FSGD_TRY(fsgd_csr_append_biased(&s->batch, s->chunk, s->perm[i], r->dim, r->bias, r->bv));
    fsgd_grad_request_t req = {.batch = &s->batch, .batch_id = -1, .loss = r->job->model, .scale = 1.0, .l2 = 0};
    FSGD_TRY(fsgd_backend_gradient(s->backend, &req, &s->grad, loss, r->err, r->errsz));
    double s1 = fsgd_clock_s();
    stats->t_grad += s1 - s0;
    stats->t_grad_round += s1 - s0;
    fsgd_adam_advance(adam);
    if (s->ftrl_on) { /* the summed gradient, λ2 in FTRL's closed form (fsgd/ftrl.h) */
        fsgd_ftrl_apply(&s->ftrl, adam->theta, s->grad.keys, s->grad.vals, s->grad.n);
    } else {
        const double inv = 1.0 / (double)cnt;
        for (size_t e = 0; e < s->grad.n; e++)
            s->grad.vals[e] = fsgd_adam_step_grad(s->grad.vals[e], inv, l2, adam->theta[s->grad.keys[e]]);
        fsgd_adam_apply(adam, s->grad.keys, s->grad.vals, s->grad.n);
    }
    stats->t_update += fsgd_clock_s() - s1;
    *nnz = s->batch.nnz;
    return FSGD_E_OK;
}

/* The same step over W threads: the rows cut into one slice a thread, as
 * fsgd_train cuts a batch, each thread copying its own slice, then
 * fsgd_train's parallel step (train_pool.h). */
typedef struct fill_ctx {
    const stream_t *s;
    size_t lo, cnt;
    int W;
    uint64_t dim;
    int bias;
    float bv;
} fill_ctx_t;

static int fill_slice(void *ctx, int w, fsgd_csr_t *slice, char *err, size_t errsz)
{
    const fill_ctx_t *f = ctx;
    fsgd_csr_clear(slice);
    const size_t a = f->lo + f->cnt * (size_t)w / (size_t)f->W, b = f->lo + f->cnt * (size_t)(w + 1) / (size_t)f->W;
    for (size_t i = a; i < b; i++)
        if (fsgd_csr_append_biased(slice, f->s->chunk, f->s->perm[i], f->dim, f->bias, f->bv) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory for a slice of %zu rows", b - a);
    return FSGD_E_OK;
}

static int step_threads(stream_run_t *r, size_t lo, size_t cnt, double *loss, size_t *nnz)
{
    double s0 = fsgd_clock_s();
    fill_ctx_t f = {.s = &r->s, .lo = lo, .cnt = cnt, .W = r->W, .dim = r->dim, .bias = r->bias, .bv = r->bv};
    double t_round = 0;
    FSGD_TRY(fsgd_train_pool_step(r->s.pool, fill_slice, &f, cnt, loss, nnz, &t_round, r->err, r->errsz));
    r->stats->t_grad_round += t_round;
    r->stats->t_update += fsgd_clock_s() - s0 - t_round;
    return FSGD_E_OK;
}

/* Back to the first train row (the reader thread idle first) and, with the
 * reader thread, the first chunk asked for. */
static int epoch_start(stream_t *s, char *err, size_t errsz)
{
    if (s->pf.running)
        prefetch_wait(&s->pf);
    FSGD_TRY(fsgd_rowcache_rewind(s->rd, err, errsz));
    if (s->pf.running) {
        s->filling = 0;
        prefetch_ask(&s->pf, &s->chunks[0]);
    }
    return FSGD_E_OK;
}

/* The epoch's next chunk into s->chunk: its rows (0 at the end) or an error. */
static long next_chunk(stream_t *s, char *err, size_t errsz)
{
    if (!s->pf.running) {
        s->chunk = &s->chunks[0];
        return fsgd_rowcache_read(s->rd, s->chunk, FSGD_TRAIN_STREAM_CHUNK, err, errsz);
    }
    long got = prefetch_wait(&s->pf);
    if (got < 0) {
        snprintf(err, errsz, "%s", s->pf.err);
        return got;
    }
    s->chunk = &s->chunks[s->filling];
    if (got > 0) {
        s->filling ^= 1;
        prefetch_ask(&s->pf, &s->chunks[s->filling]);
    }
    return got;
}

/* Opens the cache and checks the call against it. On an error all is given
 * back. */
static int stream_open(stream_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    char *err = r->err;
    size_t errsz = r->errsz;
    fsgd_rowcache_info_t info;
    int why;
    r->s.rd = fsgd_rowcache_open(r->cache_path, &info, &why, err, errsz);
    if (!r->s.rd)
        return why;
    const uint64_t n_fit = info.rows[FSGD_ROWCACHE_TRAIN], max_col = info.max_col[FSGD_ROWCACHE_TRAIN];
    r->n_fit = n_fit;
    r->auto_epochs = job->epochs <= 0;
    int rc = FSGD_E_OK;
    if (job->staleness_given && job->staleness > 0) {
        fsgd_rowcache_free(r->s.rd);
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "staleness %d is simulated in memory only: leave out --cache, or --staleness", job->staleness);
    }
    if (n_fit == 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "no training rows");
    else if (max_col > r->dim)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "training data has column %llu >= dim %llu",
                          (unsigned long long)max_col - 1, (unsigned long long)r->dim);
    else if (r->auto_epochs && (!r->hold_in || r->hold_in->n_rows == 0))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "epochs auto needs holdout rows");
    if (rc < 0) {
        stream_free(&r->s);
        return rc;
    }
    return 0;
}

/* Batch, lr, λ and the threads, as fsgd_train picks them, then the
 * optimizer (the pool's with threads), the holdout and test copies and the
 * reader thread. On an error all is given back. */
static int stream_setup(stream_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    fsgd_train_stats_t *stats = r->stats;
    stream_t *s = &r->s;
    char *err = r->err;
    size_t errsz = r->errsz;
    const uint64_t n_fit = r->n_fit, model_dim = r->model_dim;
    const int bias = r->bias, auto_epochs = r->auto_epochs;
    int rc = 0;
    size_t B = (size_t)fsgd_train_auto_batch(job, n_fit, 1); /* >= 1 */
    if (B > n_fit)
        B = (size_t)n_fit;
    r->B = B;
    r->steps_per_epoch = (size_t)((n_fit + B - 1) / B);
    fsgd_adam_params_t ap = {.lr = fsgd_train_auto_lr(job, (size_t)n_fit, B, 0, 0),
                             .beta1 = fsgd_train_auto_beta1(job, 0),
                             .beta2 = job->beta2, .eps = job->eps};
    const double l2 = fsgd_train_auto_l2(job, (size_t)n_fit);
    r->l2 = l2;
    stats->lr = ap.lr;
    stats->l2 = l2;
    /* optimizer ftrl: λ1, λ2 as in fsgd_train (the mean-loss l1, l2 times the rows) */
    const int ftrl = job->optimizer == FSGD_OPTIMIZER_FTRL;
    const fsgd_ftrl_params_t fp = {.alpha = fsgd_train_auto_alpha(job, (size_t)n_fit, B), .beta = job->beta,
                                   .l1 = job->l1 * (double)n_fit, .l2 = l2 * (double)n_fit};
    if (ftrl) {
        stats->alpha = fp.alpha;
        stats->lr = NAN;
    }
    stats->holdout_rows = auto_epochs ? r->hold_in->n_rows : 0;
    /* Threads as fsgd_train picks them, from the nonzeros a step has: the
     * first chunk's rows stand for the file (read again in epoch 1). */
    long first = fsgd_rowcache_read(s->rd, &s->chunks[0], FSGD_TRAIN_STREAM_CHUNK, err, errsz);
    if (first < 0) {
        stream_free(s);
        return (int)first;
    }
    double nnz_per_step = first > 0 ? (double)B * ((double)s->chunks[0].nnz / (double)first + (bias ? 1 : 0)) : 0;
    int W = job->threads < 1 ? 1 : job->threads > 64 ? 64 : job->threads;
    int fit = (int)(nnz_per_step / FSGD_TRAIN_MIN_NNZ_PER_THREAD);
    if (W > 1 && fit < W)
        W = fit < 1 ? 1 : fit;
    r->W = W;
    stats->threads_used = W;
    stats->nnz_per_step = nnz_per_step;
    r->adam = &s->adam;
    if (W > 1) {
        s->pool = fsgd_train_pool_new(job, model_dim, &ap, job->lr < 0, ftrl ? &fp : NULL, l2, W, err, errsz);
        if (!s->pool) {
            stream_free(s);
            return FSGD_E_NOMEM;
        }
        r->adam = fsgd_train_pool_adam(s->pool);
    } else if (ftrl) {
        rc = fsgd_adam_init_weights(&s->adam, model_dim);
        if (rc == 0 && (rc = fsgd_ftrl_init(&s->ftrl, model_dim, &fp)) == FSGD_E_ARG) {
            stream_free(s);
            return fsgd_err_fmt(err, errsz, rc, "ftrl: alpha %g must be > 0, beta %g, l1 %g and l2 %g >= 0", fp.alpha,
                                fp.beta, job->l1, l2);
        }
        s->ftrl_on = rc == 0;
    } else {
        rc = fsgd_adam_init(&s->adam, model_dim, &ap);
        if (rc == 0 && job->lr < 0)
            rc = fsgd_adam_count_keys(&s->adam);
    }
    if (rc == 0 && auto_epochs)
        rc = biased_copy(r->hold_in, r->dim, bias, r->bv, &s->hold);
    if (rc == 0)
        rc = biased_copy(r->test_in, r->dim, bias, r->bv, &s->test);
    size_t n_margin = s->test.n_rows > 1 ? s->test.n_rows : 1;
    s->perm = rc == 0 ? malloc(FSGD_TRAIN_STREAM_CHUNK * sizeof *s->perm) : NULL;
    s->margin = s->perm ? malloc(n_margin * sizeof *s->margin) : NULL;
    if (rc == 0 && (!s->margin || (auto_epochs && fsgd_best_open(&s->best, (size_t)model_dim) < 0)))
        rc = FSGD_E_NOMEM;
    if (rc < 0) {
        stream_free(s);
        return fsgd_err_fmt(err, errsz, rc, "out of memory setting up training (model dim %llu)",
                            (unsigned long long)model_dim);
    }
    if (W == 1)
        s->backend = fsgd_backend_new("cpu", model_dim, s->adam.theta, err, errsz);
    if (W == 1 && !s->backend) {
        stream_free(s);
        return FSGD_E_ARG;
    }
    snprintf(stats->backend, sizeof stats->backend, "cpu (streaming from %s)", r->cache_path);
    if (job->threads > 1) {
        s->pf.rd = s->rd;
        pthread_mutex_init(&s->pf.mu, NULL);
        pthread_cond_init(&s->pf.cv, NULL);
        s->pf.running = pthread_create(&s->pf.thread, NULL, prefetch_main, &s->pf) == 0;
        if (!s->pf.running) { /* read on this thread instead */
            pthread_mutex_destroy(&s->pf.mu);
            pthread_cond_destroy(&s->pf.cv);
        }
    }
    return 0;
}

/* epochs auto: the holdout's mean loss after step step_in_epoch, at the
 * looks' evenly spread steps (as in memory); keeps θ at a new best, stops
 * early after the patience's looks without one. */
static int stream_look_holdout(stream_run_t *r, int epoch, size_t step_in_epoch, int last_step)
{
    fsgd_train_stats_t *stats = r->stats;
    const uint64_t E = fsgd_train_looks((size_t)r->n_fit, r->steps_per_epoch), nb = r->steps_per_epoch;
    if (!(r->auto_epochs &&
          (last_step || ((uint64_t)step_in_epoch * E) / nb != ((uint64_t)(step_in_epoch - 1) * E) / nb)))
        return 0;
    double h0 = fsgd_clock_s();
    double hl = mean_loss(r->job->model, r->adam->theta, r->model_dim, &r->s.hold);
    int rc = fsgd_early_look(&r->early, &r->s.best, r->adam->theta, hl,
                             (double)(epoch - 1) + (double)step_in_epoch / (double)nb, stats, r->err, r->errsz);
    double h1 = fsgd_clock_s();
    stats->t_holdout += h1 - h0;
    r->train_time += h1 - h0;
    return rc;
}

/* The test metrics at the epoch's end or an early stop, when someone
 * looks; the time --target-auc was first reached; and a progress line then
 * and at most once a second otherwise. */
static void stream_report(stream_run_t *r, int last_step)
{
    const fsgd_train_params_t *job = r->job;
    fsgd_train_stats_t *stats = r->stats;
    stats->seconds = r->train_time;
    if (r->s.test.n_rows && r->test_live && (last_step || r->early.stop)) {
        stats->test = metrics(job->model, r->adam->theta, r->model_dim, &r->s.test, r->s.margin);
        if (job->target_auc > 0 && stats->time_to_target < 0 && stats->test.auc >= job->target_auc) {
            stats->time_to_target = r->train_time;
            stats->target_clock = fsgd_clock_s();
        }
    }
    double tnow = fsgd_clock_s();
    if (r->progress && (last_step || r->early.stop || tnow - r->last_report >= 1.0)) {
        stats->last_loss = r->loss_rows ? r->loss_acc / (double)r->loss_rows : NAN;
        stats->nnz_per_step = (double)stats->nnz / (double)stats->steps;
        if (r->s.pool)
            fsgd_train_pool_stats(r->s.pool, stats);
        r->progress(r->ctx, stats, last_step || r->early.stop);
        r->last_report = tnow;
        r->loss_acc = 0;
        r->loss_rows = 0;
    }
}

/* The steps on a chunk of got rows, in a new random order. */
static int stream_chunk(stream_run_t *r, int epoch, size_t got, size_t *step_in_epoch)
{
    stream_t *s = &r->s;
    fsgd_train_stats_t *stats = r->stats;
    int rc = 0;
    for (size_t i = 0; i < got; i++)
        s->perm[i] = (uint32_t)i;
    for (size_t i = got; i > 1; i--) {
        size_t j = (size_t)(splitmix(&r->rng) % i);
        uint32_t tmp = s->perm[i - 1];
        s->perm[i - 1] = s->perm[j];
        s->perm[j] = tmp;
    }
    for (size_t lo = 0; lo < got && rc == 0 && !r->early.stop; lo += r->B) {
        double s0 = fsgd_clock_s();
        size_t cnt = got - lo < r->B ? got - lo : r->B;
        double loss = 0;
        size_t nnz = 0;
        rc = s->pool ? step_threads(r, lo, cnt, &loss, &nnz) : step_serial(r, lo, cnt, &loss, &nnz);
        if (rc < 0)
            break;
        r->train_time += fsgd_clock_s() - s0;
        r->loss_acc += loss;
        r->loss_rows += cnt;
        stats->steps++;
        stats->rows += cnt;
        stats->nnz += nnz;
        (*step_in_epoch)++;
        int last_step = *step_in_epoch == r->steps_per_epoch;
        rc = stream_look_holdout(r, epoch, *step_in_epoch, last_step);
        stream_report(r, last_step);
    }
    return rc;
}

/* The epochs: each reads the cache from its first train row. */
static int stream_epochs(stream_run_t *r)
{
    const fsgd_train_params_t *job = r->job;
    int rc = 0;
    r->rng = job->seed;
    r->max_epochs = r->auto_epochs ? job->max_epochs : job->epochs;
    r->test_live = !job->quiet || job->target_auc > 0 || job->eval_every > 0;
    r->early.best_loss = r->early.kept_loss = INFINITY;
    r->last_report = fsgd_clock_s();
    {
        uint64_t looks = fsgd_train_looks((size_t)r->n_fit, r->steps_per_epoch);
        r->early.patience = fsgd_train_patience(looks);
        r->stats->patience_epochs = (double)r->early.patience / (double)looks;
    }
    for (int epoch = 1; epoch <= r->max_epochs && !r->early.stop && rc == 0; epoch++) {
        r->stats->epoch = epoch;
        rc = epoch_start(&r->s, r->err, r->errsz);
        size_t step_in_epoch = 0;
        long got;
        while (rc == 0 && !r->early.stop && (got = next_chunk(&r->s, r->err, r->errsz)) != 0) {
            if (got < 0) {
                rc = (int)got;
                break;
            }
            rc = stream_chunk(r, epoch, (size_t)got, &step_in_epoch);
        }
    }
    return rc;
}

/* The run's end: its stats, the final weights' test metrics and the model.
 * epochs auto keeps the weights of the best holdout loss, not the last. */
static int stream_finish(stream_run_t *r, fsgd_model_t *model, int rc)
{
    const fsgd_train_params_t *job = r->job;
    fsgd_train_stats_t *stats = r->stats;
    stream_t *s = &r->s;
    const uint64_t dim = r->dim;
    if (s->pool)
        fsgd_train_pool_stats(s->pool, stats);
    stats->stopped_early = r->early.stop;
    stats->epochs_run = (double)stats->steps / (double)r->steps_per_epoch;
    /* θ is not trained on again: the best look's weights come back into it */
    if (rc == 0 && r->auto_epochs && r->early.best_loss < INFINITY)
        rc = fsgd_best_load(&s->best, r->adam->theta, r->err, r->errsz);
    const float *final_w = r->adam->theta;
    /* features only: the intercept (key dim) is not one */
    stats->weights_touched = s->ftrl_on ? fsgd_ftrl_touched(&s->ftrl, dim)
                             : s->pool  ? fsgd_train_pool_touched(s->pool, dim)
                                        : fsgd_adam_touched(r->adam, dim);
    for (uint64_t k = 0; k < dim; k++)
        stats->weights_nonzero += final_w[k] != 0;
    if (rc == 0 && s->test.n_rows) {
        stats->test = metrics(job->model, final_w, r->model_dim, &s->test, s->margin);
        stats->best_test_auc = stats->test.auc;
    }
    if (rc == 0) {
        rc = fsgd_model_init(model, job->model, dim, r->bias, r->bv);
        if (rc == 0)
            memcpy(model->w, final_w, r->model_dim * sizeof *model->w);
        else
            fsgd_err_fmt(r->err, r->errsz, rc, "out of memory for the model");
    }
    stream_free(s);
    return rc;
}

int fsgd_train_stream(const fsgd_train_params_t *job, const fsgd_train_input_t *in, fsgd_model_t *model,
                      fsgd_train_stats_t *stats, const fsgd_train_hooks_t *hooks, char *err, size_t errsz)
{
    const uint64_t dim = in->dim;
    fsgd_train_progress_fn progress = hooks ? hooks->progress : NULL;
    void *ctx = hooks ? hooks->ctx : NULL;
    memset(stats, 0, sizeof *stats);
    stats->time_to_target = -1;
    stats->alpha = NAN;
    stats->best_test_auc = NAN;
    stream_run_t r = {.job = job, .cache_path = in->cache, .hold_in = in->hold, .test_in = in->test, .dim = dim,
                      .model_dim = dim + (job->bias ? 1 : 0), .bias = job->bias, .bv = (float)job->bias_value,
                      .stats = stats, .progress = progress, .ctx = ctx, .err = err, .errsz = errsz};
    int rc;
    if ((rc = stream_open(&r)) < 0 || (rc = stream_setup(&r)) < 0)
        return rc;
    if (progress)
        progress(ctx, stats, -1);
    rc = stream_epochs(&r);
    return stream_finish(&r, model, rc);
}
