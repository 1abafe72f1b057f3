/* The distributed job's data-dependent defaults, as fsgd train's
 * (trainer/core/train_auto.c): l2 auto (λ = 1/n_train), lr auto (0.15 /
 * sqrt(steps per epoch)), and epochs auto: the aggregator holds out the last
 * rows of every data partition (a temporal split: the newest rows, as a CTR
 * team validates), scores their mean loss at fsgd train's looks, keeps the
 * best weights and stops after fsgd train's patience without a new best.
 * The held-out rows are cut from the epoch's offsets (the state's end), so
 * the workers never load them and exactly-once still counts every training
 * row. The best look's weights are never copied: every step's θ before its
 * update goes into an undo log, emptied at each new best, and written back
 * newest first when the last weights score worse (a 2^24 model is 64 MiB; a
 * step moves a few thousand keys). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_data.h"
#include "agg_env.h"
#include "agg_tune.h"
#include "snapshot_every.h"
#include "fsgd/bus.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/holdout.h"
#include "fsgd/rowfmt.h"
#include "fsgd/sparse.h"
#include "fsgd/strategy.h"
#include "fsgd/train.h"
#include "wire.h"

/* The held-out messages as read, kept per partition so that they are
 * parsed in partition and offset order whatever order the partitions'
 * fetches interleave in (the holdout's rows, and so its loss, stay the same
 * bit for bit). */
typedef struct hold_msg {
    int64_t offset;
    uint8_t *bytes;
    size_t len;
} hold_msg_t;

typedef struct hold_ctx {
    const agg_auto_ctx_t *c;
    const agg_env_t *e;
    hold_msg_t **msgs; /* per partition */
    size_t *n, *cap;
} hold_ctx_t;

static int hold_keep(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                     size_t errsz)
{
    hold_ctx_t *h = ctx;
    uint32_t p = (uint32_t)partition;
    if (partition < 0 || p >= h->c->st->nparts)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "held-out rows: a message of partition %d", (int)partition);
    if (h->n[p] == h->cap[p]) {
        size_t nc = h->cap[p] ? 2 * h->cap[p] : 256;
        hold_msg_t *nm = realloc(h->msgs[p], nc * sizeof *nm);
        if (!nm)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "aggregator: out of memory for the held-out rows");
        h->msgs[p] = nm;
        h->cap[p] = nc;
    }
    /* the scan decided (or, its summary used, there are none) */
    int rp = agg_row_replayed(h->c->data, h->c->data_topic, h->e, partition, offset, err, errsz);
    if (rp < 0)
        return rp;
    if (rp)
        len = 0;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "aggregator: out of memory for the held-out rows");
    if (len)
        memcpy(copy, val, len);
    h->msgs[p][h->n[p]++] = (hold_msg_t){offset, copy, len};
    return 0;
}

/* Parses the kept messages into hold, partition by partition. */
static int hold_parse(fsgd_csr_t *hold, const hold_ctx_t *h)
{
    for (uint32_t p = 0; p < h->c->st->nparts; p++)
        for (size_t i = 0; i < h->n[p]; i++) {
            const hold_msg_t *m = &h->msgs[p][i];
            char src[200];
            snprintf(src, sizeof src, "topic %s partition %u offset %lld", h->c->data_topic, p, (long long)m->offset);
            long n = fsgd_rowfmt_parse_msg(h->c->fmt, m->bytes, m->len, src, hold, NULL, h->e->err, h->e->errsz);
            if (n < 0)
                return (int)n;
        }
    return 0;
}

/* Moves the end of each partition back over its newest offsets until the
 * tail holds its share of H rows, and reads those rows into t->hold
 * (every partition's tail in one read where the bus can). */
static int cut_holdout(agg_tune_t *t, const agg_auto_ctx_t *c, const agg_env_t *e, uint64_t H)
{
    fsgd_wire_state_t *st = c->st;
    uint64_t total = e->s->dataset_rows, held = 0;
    uint32_t P = st->nparts, nr = 0;
    int32_t *parts = calloc(P ? P : 1, sizeof *parts);
    int64_t *starts = calloc(P ? P : 1, sizeof *starts), *ends = calloc(P ? P : 1, sizeof *ends);
    hold_ctx_t h = {c, e, calloc(P ? P : 1, sizeof *h.msgs), calloc(P ? P : 1, sizeof *h.n),
                    calloc(P ? P : 1, sizeof *h.cap)};
    int rc = parts && starts && ends && h.msgs && h.n && h.cap
                 ? 0
                 : fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory for the held-out rows");
    for (uint32_t p = 0; !rc && p < P; p++) {
        uint64_t s0 = st->start[p], end = st->end[p];
        uint64_t rows_p = c->data->rows_at[p][end - s0];
        uint64_t share = (uint64_t)ceil((double)H * (double)rows_p / (double)total);
        uint64_t o = end;
        while (o > s0 && rows_p - c->data->rows_at[p][o - s0] < share)
            o--;
        if (o == s0 && o < end)
            o++; /* a partition keeps a training row */
        if (o >= end)
            continue;
        parts[nr] = (int32_t)p;
        starts[nr] = (int64_t)o;
        ends[nr++] = (int64_t)end;
        held += rows_p - c->data->rows_at[p][o - s0];
        st->end[p] = o;
    }
    if (!rc && nr)
        rc = fsgd_bus_read_rows_parts(c->scan_c,
                                      &(fsgd_bus_ranges_t){.topic = c->data_topic, .n = (int)nr, .parts = parts,
                                                           .starts = starts, .ends = ends, .timeout_ms = 30000,
                                                           .fn = hold_keep, .ctx = &h},
                                      e->err, e->errsz);
    if (!rc)
        rc = hold_parse(&t->hold, &h);
    for (uint32_t p = 0; h.msgs && h.n && p < P; p++) {
        for (size_t i = 0; i < h.n[p]; i++)
            free(h.msgs[p][i].bytes);
        free(h.msgs[p]);
    }
    free(h.msgs);
    free(h.n);
    free(h.cap);
    free(parts);
    free(starts);
    free(ends);
    if (rc)
        return rc;
    e->s->dataset_rows = total - held;
    e->s->holdout_rows = held;
    return 0;
}

/* A step takes whole messages, at least one of each partition with rows
 * left: blocks written for a larger batch (fsgd produce with another
 * --batch, or --block-rows) make the steps larger than the job's batch. */
static void warn_big_blocks(const agg_auto_ctx_t *c, const agg_env_t *e, uint64_t B)
{
    const fsgd_wire_state_t *st = c->st;
    uint64_t msgs = 0, rows = 0;
    for (uint32_t p = 0; p < st->nparts; p++) {
        msgs += st->end[p] - st->start[p];
        rows += c->data->rows_at[p][st->end[p] - st->start[p]];
    }
    double per_msg = msgs ? (double)rows / (double)msgs : 0, share = (double)B / (st->nparts ? st->nparts : 1);
    if (per_msg > 1.5 * share && per_msg > 1.5)
        agg_env_log(e, "%s holds %.0f rows a message, and a step takes whole messages: a step of batch %llu over %u "
                    "partitions takes about %.0f rows, not %llu (produce the rows with the job's batch, or "
                    "--block-rows %.0f)", c->data_topic, per_msg, (unsigned long long)B, st->nparts,
                    per_msg * st->nparts, (unsigned long long)B, share < 1 ? 1 : floor(share));
}

int agg_auto_setup(agg_tune_t *t, const agg_auto_ctx_t *c, const agg_env_t *e)
{
    const fsgd_dist_job_t *job = c->job;
    fsgd_agg_stats_t *s = e->s;
    uint64_t total = s->dataset_rows;
    if (job->train->epochs == 0) {
        uint64_t H = (uint64_t)(job->train->holdout * (double)total);
        if (H > FSGD_TRAIN_HOLDOUT_MAX)
            H = FSGD_TRAIN_HOLDOUT_MAX;
        if (H == 0 || H >= total)
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_ARG,
                                "epochs auto holds out %.0f%% of %llu rows: too few to stop on; give --epochs N",
                                100 * job->train->holdout, (unsigned long long)total);
        FSGD_TRY(cut_holdout(t, c, e, H));
        /* scored over the rows' own keys (fsgd/holdout.h); the rows go */
        int hrc = fsgd_holdout_init(&t->holdout, &t->hold, c->dim);
        fsgd_csr_free(&t->hold);
        if (hrc)
            return fsgd_err_fmt(e->err, e->errsz, hrc, "aggregator: out of memory for the held-out rows");
        t->track = 1;
        t->best_loss = INFINITY;
    }
    uint64_t n = s->dataset_rows;
    uint64_t B = fsgd_train_auto_batch(job->train, n, c->workers);
    t->batch = B;
    s->batch = B;
    warn_big_blocks(c, e, B);
    t->l2 = fsgd_train_auto_l2(job->train, n);
    /* the delay the optimizer's auto values are for: the job's, as the strategy runs it */
    const int tau = fsgd_strategy_max_lag(job->train->codec, job->train->staleness);
    /* xsum is of every row, the held-out ones too */
    t->lr = fsgd_train_auto_lr(job->train, n, B, tau, fsgd_train_row_l1(job->train, c->data->xsum, total));
    t->alpha = fsgd_train_auto_alpha(job->train, n, B);
    t->beta1 = fsgd_train_auto_beta1(job->train, tau);
    uint64_t steps = (n + B - 1) / B;
    uint64_t looks = fsgd_train_looks(n, steps);
    t->look_rows = (n + looks - 1) / looks;
    t->patience = fsgd_train_patience(looks);
    *c->snap_every = dist_snapshot_every(job->dist->snapshot_every, job->dist->max_model_weights, c->gweights);
    s->snapshot_every = *c->snap_every;
    s->lr = t->lr;
    s->l2 = t->l2;
    return 0;
}

static double holdout_loss(agg_tune_t *t, const fsgd_train_params_t *train, const float *theta)
{
    return fsgd_holdout_loss(&t->holdout, train->model, theta, train->bias, (float)train->bias_value);
}

/* Keeps, of the undo log, each key's oldest entry (the value at the best
 * look): the log then holds at most one entry a key. */
static int undo_compact(agg_tune_t *t, uint64_t mdim)
{
    uint64_t *seen = calloc(mdim / 64 + 1, sizeof *seen);
    if (!seen)
        return FSGD_E_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < t->n_undo; i++) {
        uint32_t key = t->undo_k[i];
        uint64_t bit = (uint64_t)1 << (key & 63);
        if (seen[key >> 6] & bit)
            continue;
        seen[key >> 6] |= bit;
        t->undo_k[k] = key;
        t->undo_v[k++] = t->undo_v[i];
    }
    t->n_undo = k;
    free(seen);
    return 0;
}

/* Appends the step's θ-before to the undo log: sequential writes, no lookup
 * a key (the keys' θ was just read by the update). A log past the model's
 * own size keeps one entry a key; it grows when that is not enough. */
static int undo_push(agg_tune_t *t, const agg_env_t *e, uint64_t mdim, const fsgd_sparse_t *before)
{
    if (t->n_undo + before->n > t->cap_undo) {
        if (t->cap_undo >= mdim && undo_compact(t, mdim) < 0)
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory for the undo log");
        size_t nc = t->cap_undo ? t->cap_undo : mdim < 65536 ? (size_t)mdim + 1 : 65536;
        while (t->n_undo + before->n > nc)
            nc *= 2;
        if (nc > t->cap_undo) {
            uint32_t *nk = realloc(t->undo_k, nc * sizeof *nk);
            if (nk)
                t->undo_k = nk;
            float *nv = nk ? realloc(t->undo_v, nc * sizeof *nv) : NULL;
            if (!nk || !nv)
                return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory for the undo log");
            t->undo_v = nv;
            t->cap_undo = nc;
        }
    }
    memcpy(t->undo_k + t->n_undo, before->keys, before->n * sizeof *before->keys);
    memcpy(t->undo_v + t->n_undo, before->vals, before->n * sizeof *before->vals);
    t->n_undo += before->n;
    return 0;
}

uint64_t agg_tune_batch(const agg_tune_t *t, const fsgd_train_params_t *train, uint64_t dataset_rows)
{
    return train->batch > 0 && train->batch < 1 ? fsgd_train_auto_batch(train, dataset_rows, 1) : t->batch;
}

double agg_auto_epochs(uint32_t epoch, uint64_t rows_epoch, uint64_t dataset_rows)
{
    return (double)(epoch - 1) + (double)rows_epoch / (double)dataset_rows;
}

int agg_auto_look_due(const agg_tune_t *t, uint64_t rows)
{
    return t->track && t->rows_since_look + rows >= t->look_rows;
}

int agg_auto_look(agg_tune_t *t, const agg_env_t *e, const fsgd_train_params_t *train, const float *theta, uint64_t mdim,
                  double epochs_done, uint64_t rows, int *stop)
{
    *stop = 0;
    if (!t->track)
        return 0;
    FSGD_TRY(undo_push(t, e, mdim, &t->before));
    t->rows_since_look += rows;
    if (t->rows_since_look < t->look_rows)
        return 0;
    t->rows_since_look = 0;
    double loss = holdout_loss(t, train, theta);
    e->s->looks++;
    if (loss < t->best_loss) {
        t->best_loss = loss;
        t->since_best = 0;
        e->s->best_epoch = epochs_done;
        e->s->holdout_loss = loss;
        t->n_undo = 0; /* θ is the best now */
        t->looked = 1;
    } else if (++t->since_best >= t->patience) {
        e->s->stopped_early = 1;
        *stop = 1;
    }
    e->s->epochs_run = epochs_done;
    return 0;
}

void agg_auto_finish(agg_tune_t *t, fsgd_agg_stats_t *s, const fsgd_train_params_t *train, float *theta, uint32_t epoch,
                     uint64_t rows_epoch)
{
    if (!t->track)
        return;
    s->epochs_run = agg_auto_epochs(epoch, rows_epoch, s->dataset_rows);
    if (rows_epoch == 0 || rows_epoch == s->dataset_rows)
        s->epochs_run = (double)s->n_epochs;
    if (!t->looked) /* no look yet: the weights as they are */
        return;
    double loss = holdout_loss(t, train, theta);
    if (loss > t->best_loss) /* the last look's weights may be past the best: undo, newest first */
        for (size_t i = t->n_undo; i-- > 0;)
            theta[t->undo_k[i]] = t->undo_v[i];
    t->n_undo = 0;
}

void agg_auto_free(agg_tune_t *t)
{
    free(t->undo_k);
    free(t->undo_v);
    t->undo_k = NULL;
    t->undo_v = NULL;
    t->n_undo = t->cap_undo = 0;
    fsgd_sparse_free(&t->before);
    fsgd_csr_free(&t->hold);
    fsgd_holdout_free(&t->holdout);
}
