/* The step engine of fsgd train (train_engine.h): the worker threads and
 * the phases of a step. */
#include "train_engine.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/clock.h"
#include "fsgd/codec.h"
#include "fsgd/error.h"

static void worker_step(worker_t *w)
{
    trainer_t *t = w->t;
    w->loss = 0;
    w->rc = 0;
    if (t->fill) {
        w->rc = t->fill(t->fill_ctx, (int)(w - t->workers), &w->own, w->err, sizeof w->err);
        if (w->rc < 0)
            return;
        w->batch = &w->own;
    } else if (t->spill.file) {
        w->rc = fsgd_spill_get(&t->spill, (size_t)w->batch_id, w->batch, &w->spilled, &w->batch, w->err,
                               sizeof w->err);
        if (w->rc < 0)
            return;
    }
    double t0 = fsgd_clock_s();
    /* Raw sums (scale 1, no λ): the reduction divides by the whole step's rows
     * and adds λθ once, exactly as the aggregator does. */
    fsgd_grad_request_t req = {.batch = w->batch, .batch_id = w->batch_id, .loss = t->job->model, .scale = 1.0, .l2 = 0};
    /* A strategy whose workers run the optimizer (efsign: the aggregator only
     * averages their steps) gets λθ per row in its gradient sum instead. */
    if (fsgd_sworker_optimizer(w->strat) == FSGD_OPT_APPLY)
        req.l2 = t->l2 * (double)w->batch->n_rows;
    /* A device encoder returns only the message; gradient and encoding are
     * then one call and their time counts as gradient time. */
    fsgd_codec_t *dc = fsgd_sworker_device_codec(w->strat);
    int fused = !t->shards && dc && fsgd_backend_encodes_on_device(w->backend, dc);
    size_t bound;
    if (fused) {
        bound = fsgd_backend_encoded_bound(dc, w->batch);
    } else {
        w->rc = fsgd_backend_gradient(w->backend, &req, &w->grad, &w->loss, w->err, sizeof w->err);
        if (w->rc < 0)
            return;
        bound = fsgd_sworker_bound(w->strat, w->grad.n);
    }
    double t1 = fsgd_clock_s();
    w->t_grad += t1 - t0;
    if (t->shards) {
        w->rc = fsgd_shards_encode(t->shards, (int)(w - t->workers), &w->grad, w->batch->n_rows, &w->raw_bytes,
                                   &w->wire_bytes, w->err, sizeof w->err);
        w->t_encode += fsgd_clock_s() - t1;
        return;
    }
    if (t->direct && !fused) {
        /* what decode would have refused: a non-finite value */
        for (size_t i = 0; i < w->grad.n; i++)
            if (!isfinite(w->grad.vals[i])) {
                w->rc = fsgd_err_fmt(w->err, sizeof w->err, FSGD_E_NONFINITE, "non-finite gradient of key %u",
                                     w->grad.keys[i]);
                return;
            }
        fsgd_sparse_t tmp = w->decoded;
        w->decoded = w->grad;
        w->grad = tmp;
        w->wire_len = bound; /* codec none's message length, exactly */
        w->raw_bytes += 8 * (uint64_t)w->decoded.n;
        w->wire_bytes += bound;
        return;
    }
    if (bound > w->wire_cap) {
        uint8_t *p = realloc(w->wire, bound);
        if (!p) {
            w->rc = fsgd_err_fmt(w->err, sizeof w->err, FSGD_E_NOMEM, "out of memory for a %zu-byte message", bound);
            return;
        }
        w->wire = p;
        w->wire_cap = bound;
    }
    fsgd_outbuf_t msg = {w->wire, w->wire_cap, 0};
    uint64_t entries;
    if (fused) {
        w->rc = fsgd_backend_gradient_encoded(w->backend, &req, dc, &msg, &w->loss, w->err, sizeof w->err);
        fsgd_codec_stats_t cst;
        fsgd_codec_last_stats(dc, &cst);
        entries = cst.n_in;
        w->t_grad += fsgd_clock_s() - t1;
        t1 = fsgd_clock_s();
    } else {
        w->rc = fsgd_sworker_encode(w->strat, w->grad.keys, w->grad.vals, w->grad.n, w->batch->n_rows, &msg, w->err,
                                    sizeof w->err);
        entries = w->grad.n;
    }
    double t2 = fsgd_clock_s();
    w->t_encode += t2 - t1;
    if (w->rc < 0)
        return;
    size_t len = msg.len;
    w->wire_len = len;
    w->decoded.n = 0;
    if (t->plain)
        w->rc = fsgd_codec_decode(w->wire, len, t->adam.dim, &w->decoded, w->err, sizeof w->err);
    w->t_decode += fsgd_clock_s() - t2;
    w->raw_bytes += 8 * entries;
    w->wire_bytes += len;
}

/* Sums every thread's decoded gradient over [key_lo, key_hi) (a W-way merge of
 * sorted lists), takes the mean over the step's rows, adds λθ and applies the
 * Adam update of step t on those keys. */
static void worker_update(worker_t *w)
{
    trainer_t *t = w->t;
    const int W = t->n_workers;
    size_t pos[64], end[64];
    size_t total = 0;
    w->rc = 0;
    w->upd.n = 0;
    for (int j = 0; j < W; j++) {
        const fsgd_sparse_t *d = &t->workers[j].decoded;
        pos[j] = fsgd_keys_lower_bound(d->keys, d->n, w->key_lo);
        end[j] = fsgd_keys_lower_bound(d->keys, d->n, w->key_hi);
        total += end[j] - pos[j];
    }
    if (fsgd_sparse_reserve(&w->upd, total) < 0) {
        w->rc = fsgd_err_fmt(w->err, sizeof w->err, FSGD_E_NOMEM, "out of memory reducing %zu entries", total);
        return;
    }
    const double l2 = t->l2;
    const float *const l2_scale = t->l2_scale;
    for (;;) {
        uint64_t k = UINT64_MAX;
        for (int j = 0; j < W; j++)
            if (pos[j] < end[j] && t->workers[j].decoded.keys[pos[j]] < k)
                k = t->workers[j].decoded.keys[pos[j]];
        if (k == UINT64_MAX)
            break;
        double sum = 0;
        for (int j = 0; j < W; j++)
            if (pos[j] < end[j] && t->workers[j].decoded.keys[pos[j]] == k) {
                /* θ of a key 16 ahead: another thread's gradient may have
                 * been the last to read it, so it is not in this core's cache */
                if (W > 1 && pos[j] + 16 < end[j])
                    __builtin_prefetch(&t->adam.theta[t->workers[j].decoded.keys[pos[j] + 16]], 0, 3);
                sum += t->workers[j].decoded.vals[pos[j]++];
            }
        w->upd.keys[w->upd.n] = (uint32_t)k;
        /* ftrl: the round's gradient is the sum over its rows; L2 is in
         * FTRL's closed form (fsgd/ftrl.h), not in the gradient */
        w->upd.vals[w->upd.n++] =
            t->ftrl_on ? (float)sum
                       : fsgd_adam_step_grad(sum, t->inv_rows, l2_scale ? l2 * l2_scale[k] : l2, t->adam.theta[k]);
    }
    if (t->ftrl_on)
        fsgd_ftrl_apply(&t->ftrl, t->adam.theta, w->upd.keys, w->upd.vals, w->upd.n);
    else
        fsgd_adam_apply(&t->adam, w->upd.keys, w->upd.vals, w->upd.n);
}

/* --shards S: thread i closes the step on shards i, i + W, ... (each shard
 * owns its state and its keys of θ). */
static void worker_shards(worker_t *w)
{
    trainer_t *t = w->t;
    w->rc = 0;
    uint32_t S = fsgd_shards_count(t->shards);
    for (uint32_t I = (uint32_t)(w - t->workers); I < S && w->rc == 0; I += (uint32_t)t->n_workers)
        w->rc = fsgd_shards_step_shard(t->shards, I, &t->adam, &t->shard_info, t->stale.tau > 0, w->err,
                                       sizeof w->err);
}

static void run_phase(worker_t *w)
{
    if (w->t->phase == PHASE_GRADIENT)
        worker_step(w);
    else if (w->t->phase == PHASE_SHARDS)
        worker_shards(w);
    else
        worker_update(w);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    for (;;) {
        fsgd_barrier_wait(&w->t->start);
        if (w->t->stop)
            break;
        run_phase(w);
        fsgd_barrier_wait(&w->t->done);
    }
    return NULL;
}

/* Splits the key space into one range per thread with about equal numbers of
 * gradient entries, using the largest decoded gradient as the sample. */
void fsgd_trainer_split_keys(trainer_t *t, uint64_t model_dim)
{
    const int W = t->n_workers;
    const fsgd_sparse_t *sample = &t->workers[0].decoded;
    for (int j = 1; j < W; j++)
        if (t->workers[j].decoded.n > sample->n)
            sample = &t->workers[j].decoded;
    for (int i = 0; i < W; i++) {
        t->workers[i].key_lo = i == 0 ? 0 : t->workers[i - 1].key_hi;
        t->workers[i].key_hi = i == W - 1 || sample->n == 0 ? model_dim
                                                             : sample->keys[sample->n * (size_t)(i + 1) / (size_t)W];
        if (t->workers[i].key_hi < t->workers[i].key_lo)
            t->workers[i].key_hi = t->workers[i].key_lo;
    }
}

void fsgd_trainer_sum_stats(const trainer_t *t, fsgd_train_stats_t *stats)
{
    stats->raw_bytes = stats->wire_bytes = 0;
    stats->t_grad = stats->t_encode = stats->t_decode = 0;
    for (int i = 0; i < t->n_workers; i++) {
        stats->raw_bytes += t->workers[i].raw_bytes;
        stats->wire_bytes += t->workers[i].wire_bytes;
        stats->t_grad += t->workers[i].t_grad;
        stats->t_encode += t->workers[i].t_encode;
        stats->t_decode += t->workers[i].t_decode;
    }
}

/* One step through a strategy that is more than decode-and-sum, exactly as
 * the aggregator process runs it (trainer/distributed/agg_step.c): every
 * thread's message into the strategy, its sum into the optimizer, and its
 * feedback back to every thread's worker side. The update lands in
 * workers[0].upd (for device backends). */
int fsgd_trainer_strategy_step(trainer_t *t, size_t rows, double loss_sum, double seconds, char *err, size_t errsz)
{
    char e[256];
    for (int i = 0; i < t->n_workers; i++) {
        worker_t *w = &t->workers[i];
        w->upd.n = 0;
        int rc = fsgd_sagg_add(t->agg, (uint32_t)i, w->wire, w->wire_len, INFINITY, NULL, e, sizeof e);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "worker %d: codec %s: %s", i, t->job->codec, e);
    }
    fsgd_step_info_t info = {.step = t->adam.t + 1, .rows = rows, .loss_sum = loss_sum, .seconds = seconds,
                             .n_senders = (uint32_t)t->n_workers};
    /* the aggregator's own step function (fsgd/step.h) */
    fsgd_step_opt_t opt = {.adam = &t->adam, .ftrl = t->ftrl_on ? &t->ftrl : NULL, .l2 = t->l2,
                           .before = t->stale.tau ? &t->before : NULL};
    int src = fsgd_step_apply(&opt, t->agg, &info, &t->workers[0].upd, e, sizeof e);
    if (src < 0)
        return fsgd_err_fmt(err, errsz, src, "codec %s: %s", t->job->codec, e);
    if (t->stale.tau && fsgd_stale_push(&t->stale, &t->before, t->adam.theta) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    size_t slen;
    const uint8_t *sec = fsgd_sagg_section(t->agg, &slen);
    for (int i = 0; i < t->n_workers; i++) {
        int rc = fsgd_sworker_after_step(t->workers[i].strat, 1, sec, slen, e, sizeof e);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "worker %d: feedback: %s", i, e);
    }
    return 0;
}

/* One round on every worker; the calling thread does worker 0's share. */
void fsgd_trainer_round(trainer_t *t, int phase)
{
    t->phase = phase;
    if (t->n_workers > 1)
        fsgd_barrier_wait(&t->start);
    run_phase(&t->workers[0]);
    if (t->n_workers > 1)
        fsgd_barrier_wait(&t->done);
}

/* One step closed by the aggregator shards (--shards S > 1): the update's
 * global keys land in workers[0].upd (for device backends). */
int fsgd_trainer_shards_step(trainer_t *t, size_t rows, double seconds, char *err, size_t errsz)
{
    double lsum = 0;
    for (int i = 0; i < t->n_workers; i++) {
        lsum += t->workers[i].loss;
        t->workers[i].upd.n = 0;
    }
    t->shard_info = (fsgd_step_info_t){.step = t->adam.t + 1, .rows = rows, .loss_sum = lsum, .seconds = seconds,
                                       .n_senders = (uint32_t)t->n_workers};
    fsgd_trainer_round(t, PHASE_SHARDS);
    for (int i = 0; i < t->n_workers; i++)
        if (t->workers[i].rc < 0)
            return fsgd_err_fmt(err, errsz, t->workers[i].rc, "%s", t->workers[i].err);
    FSGD_TRY(fsgd_shards_step_close(t->shards, &t->adam, t->stale.tau ? &t->before : NULL, &t->workers[0].upd, err,
                                    errsz));
    if (t->stale.tau && fsgd_stale_push(&t->stale, &t->before, t->adam.theta) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    return 0;
}

void fsgd_trainer_free(trainer_t *t)
{
    if (t->workers) {
        for (int i = 0; i < t->n_workers; i++) {
            worker_t *w = &t->workers[i];
            fsgd_backend_destroy(w->backend);
            fsgd_sworker_destroy(w->strat);
            fsgd_sparse_free(&w->grad);
            fsgd_sparse_free(&w->decoded);
            fsgd_sparse_free(&w->upd);
            fsgd_csr_free(&w->own);
            fsgd_csr_free(&w->spilled);
            free(w->wire);
        }
        free(t->workers);
    }
    fsgd_sagg_destroy(t->agg);
    fsgd_shards_destroy(t->shards);
    free(t->perm);
    if (t->slices)
        for (size_t i = 0; i < t->n_batches * (size_t)t->n_workers; i++)
            fsgd_csr_free(&t->slices[i]);
    free(t->slices);
    fsgd_spill_close(&t->spill);
    free(t->batch_rows);
    free(t->order);
    free(t->l2_scale);
    fsgd_csr_free(&t->hold);
    fsgd_stale_free(&t->stale);
    fsgd_sparse_free(&t->before);
    fsgd_best_close(&t->best);
    free(t->hold_margin);
    fsgd_adam_free(&t->adam);
    fsgd_ftrl_free(&t->ftrl);
}

int fsgd_trainer_start(trainer_t *t, int *started)
{
    const int W = t->n_workers;
    fsgd_barrier_init(&t->start, (unsigned)W);
    fsgd_barrier_init(&t->done, (unsigned)W);
    *started = 1;
    for (; *started < W; (*started)++)
        if (pthread_create(&t->workers[*started].thread, NULL, worker_main, &t->workers[*started]) != 0)
            break;
    if (*started < W) {
        fsgd_barrier_set_parties(&t->start, (unsigned)*started);
        return FSGD_E_NOMEM;
    }
    return 0;
}

void fsgd_trainer_stop(trainer_t *t, int started)
{
    t->stop = 1;
    if (started > 1)
        fsgd_barrier_wait(&t->start);
    for (int i = 1; i < started; i++)
        pthread_join(t->workers[i].thread, NULL);
}
