/* follow (fsgd run --follow): continuous training from NAME.data.
 *
 * The step state already names, per data partition, a window of offsets
 * [start, end) and the next position. In follow mode the window of a
 * partition whose rows are all applied moves on to what arrived since:
 * start = pos = the old end, end = the partition's end now (at most
 * FOLLOW_WINDOW_MAX offsets further). Workers need nothing new: they load a
 * window whenever the state names another one, and every row is still
 * accepted exactly once because a range must start at the partition's
 * position. Epochs never end; a version (a snapshot on NAME.model, the
 * checkpoint and a model_version event on NAME.ctl) goes out every
 * snapshot_every steps or version_seconds. Each step's rows are scored by θ
 * before the step trains on them: progressive validation, VW's progressive
 * loss, which a stream needs instead of a holdout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_clock.h"
#include "agg_eval.h"
#include "agg_follow.h"
#include "fsgd/error.h"
#include "fsgd/le.h"
#include "fsgd/metrics.h"
#include "fsgd/model.h"

/* Offsets a moved window takes at most: what one partition's rows cost the
 * aggregator's and a worker's memory between two moves. */
#define FOLLOW_WINDOW_MAX 65536
/* Rows of the windowed progressive AUC and logloss (a running figure: the
 * cumulative one would hide how good the model is now). */
#define FOLLOW_PV_WINDOW 20000
/* How often a job with no rows left looks for new ones, and how often a job
 * still training looks for partitions that ran dry. */
#define FOLLOW_POLL_IDLE_S 0.05
#define FOLLOW_POLL_BUSY_S 0.5

typedef struct follow_part {
    int loaded;
    uint64_t start, end; /* the window cached below */
    fsgd_csr_t rows;     /* its parsed rows (no intercept column) */
    uint64_t *row_of;    /* end - start + 1 entries: first row of each offset */
} follow_part_t;

struct agg_follow {
    uint32_t nparts;
    follow_part_t *part;
    uint64_t *trained; /* rows trained per partition since the job began (in the checkpoint) */
    uint64_t version;
    double last_version_t;
    uint64_t rows_at_version; /* rows_total when the last version went out */
    double last_poll;
    double pv_loss_sum; /* progressive loss over pv_rows rows (in the checkpoint) */
    uint64_t pv_rows;
    double *win_m, *win_y; /* the newest FOLLOW_PV_WINDOW scored rows: margin, label */
    size_t win_n, win_i;
    uint64_t dim_skipped; /* skip_bad: messages with a feature past the model's dim, read as empty */
    double last_idle_said;  /* when aggregator_waiting last went out on NAME.ctl */
};

static int follow_alloc(agg_follow_t **out, uint32_t nparts, const agg_env_t *e)
{
    agg_follow_t *f = calloc(1, sizeof *f);
    if (f) {
        f->nparts = nparts;
        f->part = calloc(nparts ? nparts : 1, sizeof *f->part);
        f->trained = calloc(nparts ? nparts : 1, sizeof *f->trained);
        f->win_m = malloc(FOLLOW_PV_WINDOW * sizeof *f->win_m);
        f->win_y = malloc(FOLLOW_PV_WINDOW * sizeof *f->win_y);
    }
    *out = f;
    if (!f || !f->part || !f->trained || !f->win_m || !f->win_y)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "follow: out of memory");
    return 0;
}

int agg_follow_setup(agg_follow_t **f, uint32_t nparts, const char *data_topic, uint64_t snap_every,
                     double version_seconds, const agg_env_t *e)
{
    FSGD_TRY(follow_alloc(f, nparts, e));
    (*f)->last_version_t = agg_now();
    e->s->follow = 1;
    agg_env_log(e, "follow: training on %s as rows arrive; a model version every %llu steps or %g s; progressive "
                   "validation over the newest %d rows",
                data_topic, (unsigned long long)snap_every, version_seconds, FOLLOW_PV_WINDOW);
    return 0;
}

void agg_follow_free(agg_follow_t **fp)
{
    agg_follow_t *f = *fp;
    if (!f)
        return;
    for (uint32_t p = 0; f->part && p < f->nparts; p++) {
        fsgd_csr_free(&f->part[p].rows);
        free(f->part[p].row_of);
    }
    free(f->part);
    free(f->trained);
    free(f->win_m);
    free(f->win_y);
    free(f);
    *fp = NULL;
}

/* --- windows --- */

typedef struct load_ctx {
    agg_follow_t *f; /* counts the messages skip_bad skipped */
    const agg_follow_ctx_t *fc;
    agg_data_t *d;
    const agg_env_t *e;
    uint32_t p;
    follow_part_t *fp;
    int64_t next; /* the next offset expected: offsets without a row (a gap) keep the count */
} load_ctx_t;

static void mark_upto(load_ctx_t *c, int64_t offset)
{
    uint64_t *ra = c->d->rows_at[c->p];
    for (; c->next < offset; c->next++) {
        uint64_t i = (uint64_t)(c->next - (int64_t)c->fp->start) + 1;
        c->fp->row_of[i] = ra[i] = c->fp->rows.n_rows;
    }
}

static int load_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                    size_t errsz)
{
    load_ctx_t *c = ctx;
    const agg_follow_ctx_t *fc = c->fc;
    agg_data_t *d = c->d;
    fsgd_csr_t *rows = &c->fp->rows;
    char src[200];
    snprintf(src, sizeof src, "topic %s partition %d offset %lld", fc->data_topic, (int)partition, (long long)offset);
    if (offset < c->next || (uint64_t)offset >= c->fp->end)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "%s: outside the window read [%lld, %llu)", src,
                            (long long)c->next, (unsigned long long)c->fp->end);
    mark_upto(c, offset);
    size_t first = rows->n_rows, nnz0 = rows->nnz;
    int rp = agg_row_replayed(d, fc->data_topic, c->e, partition, offset, err, errsz);
    if (rp < 0)
        return rp;
    long n = rp ? 0 : fsgd_rowfmt_parse_msg(fc->fmt, val, len, src, rows, NULL, err, errsz);
    if (n < 0)
        return (int)n;
    /* the rows that came since the model's shape was fixed must fit it */
    for (size_t i = nnz0; i < rows->nnz; i++) {
        if (rows->col[i] >= fc->dim && fc->job->train->skip_bad) {
            /* read as a message without rows, as the workers read it
             * (worker_cache.c): a job stopped here goes on with --resume
             * --skip-bad */
            if (!c->f->dim_skipped++)
                agg_env_log(c->e, "%s: feature %u > dim %llu of the model being trained: the message is skipped "
                                  "(skip_bad; further ones are only counted)",
                            src, rows->col[i] + 1, (unsigned long long)fc->dim);
            rows->n_rows = first;
            rows->nnz = nnz0;
            break;
        }
        if (rows->col[i] >= fc->dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                                "%s: feature %u > dim %llu of the model being trained (follow fixes the dimension "
                                "when it starts: give --dim, or use a hashed --format; --resume --skip-bad goes on "
                                "past it)",
                                src, rows->col[i] + 1, (unsigned long long)fc->dim);
        if (fabs((double)rows->val[i]) > d->xmax)
            d->xmax = fabs((double)rows->val[i]);
    }
    for (size_t r = first; r < rows->n_rows; r++)
        if (fabs(rows->label[r]) > d->ymax)
            d->ymax = fabs(rows->label[r]);
    fsgd_label_set_add(&d->labels, rows->label + first, rows->n_rows - first);
    char why[300];
    int rc = fsgd_loss_check_labels(fc->job->train->model, &d->labels, why, sizeof why);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s: %s", src, why);
    c->next = offset + 1;
    uint64_t i = (uint64_t)(offset - (int64_t)c->fp->start) + 1;
    c->fp->row_of[i] = d->rows_at[c->p][i] = rows->n_rows;
    return 0;
}

/* Reads offsets [s, end) of partition p: the rows for scoring, and the
 * aggregator's row counts per offset (d->rows_at) for the window. */
static int load_window(agg_follow_t *f, const agg_follow_ctx_t *c, agg_data_t *d, const agg_env_t *e, uint32_t p,
                       uint64_t s, uint64_t end)
{
    follow_part_t *fp = &f->part[p];
    fsgd_csr_clear(&fp->rows);
    free(fp->row_of);
    fp->loaded = 0;
    fp->row_of = calloc(end - s + 1, sizeof *fp->row_of);
    uint64_t *ra = realloc(d->rows_at[p], (end - s + 1) * sizeof *ra);
    if (!fp->row_of || !ra)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "follow: out of memory for partition %u", p);
    d->rows_at[p] = ra;
    ra[0] = 0;
    fp->start = s;
    fp->end = end;
    load_ctx_t lc = {f, c, d, e, p, fp, (int64_t)s};
    if (end > s)
        FSGD_TRY(fsgd_bus_read_range(c->scan_c,
                                     &(fsgd_bus_range_t){.topic = c->data_topic, .partition = (int32_t)p,
                                                         .start = (int64_t)s, .end = (int64_t)end, .timeout_ms = 30000,
                                                         .mode = FSGD_BUS_READ_ROWS, .fn = load_msg, .ctx = &lc},
                                     e->err, e->errsz));
    mark_upto(&lc, (int64_t)end);
    fp->loaded = 1;
    return 0;
}

/* Moves the window of every partition whose rows are all applied on to the
 * rows that arrived since; returns how many moved. idle: nothing is left to
 * train (look often), else look now and then. */
static int refill(agg_follow_t *f, const agg_follow_ctx_t *c, fsgd_wire_state_t *st, agg_open_step_t *open,
                  agg_data_t *d, const agg_env_t *e, int idle)
{
    double now = agg_now();
    if (now - f->last_poll < (idle ? FOLLOW_POLL_IDLE_S : FOLLOW_POLL_BUSY_S))
        return 0;
    f->last_poll = now;
    int moved = 0;
    for (uint32_t p = 0; p < st->nparts; p++) {
        uint64_t end = st->end[p];
        if (st->pos[p] < end)
            continue;
        int64_t lo, hi;
        FSGD_TRY(fsgd_bus_watermarks(c->scan_c, c->data_topic, (int32_t)p, &lo, &hi, 10000, e->err, e->errsz));
        if (lo > (int64_t)end)
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_LOST,
                                "data lost: %s [%u] now starts at offset %lld, but offset %llu is the next to train: "
                                "rows were dropped before training (retention too short for the job's pace)",
                                c->data_topic, p, (long long)lo, (unsigned long long)end);
        if (hi <= (int64_t)end)
            continue;
        uint64_t next_end = (uint64_t)hi - end > FOLLOW_WINDOW_MAX ? end + FOLLOW_WINDOW_MAX : (uint64_t)hi;
        FSGD_TRY(load_window(f, c, d, e, p, end, next_end));
        st->start[p] = st->pos[p] = open->newpos[p] = end;
        st->end[p] = next_end;
        e->s->dataset_rows += d->rows_at[p][next_end - end];
        moved++;
    }
    return moved;
}

/* --- NAME.ctl events --- */

/* The follow events' own sender, as agg_members.c's agg_ctl_begin and
 * agg_ctl_emit send the aggregator's: a follow job is never sharded
 * (agg_shard.c refuses it), so no following shard's events are muted. */
static void ctl_begin(const agg_follow_ctx_t *c, const char *event)
{
    fsgd_cj_begin(c->cj, event, c->job->dist->name);
    fsgd_cj_u64(c->cj, "gen", c->gen);
}

static void ctl_emit(const agg_follow_ctx_t *c, const char *event)
{
    if (fsgd_cj_end(c->cj) == 0)
        fsgd_ctl_send(c->prod, c->ctl_topic, c->job->dist->name, event, c->cj);
}

/* Why: a follow job with no new rows holds its step open, and its workers,
 * hearing nothing on NAME.model, gave up after 60 step timeouts (10 min by
 * default: a quiet night ended a stream's job). Once a step timeout, the
 * held step is said on NAME.ctl, which the workers take as a sign of life. */
static void say_idle(agg_follow_t *f, const agg_follow_ctx_t *c, uint64_t step)
{
    double now = agg_now(), every = c->job->dist->step_timeout_ms / 1000.0;
    if (now - f->last_idle_said < (every < 1 ? 1 : every))
        return;
    f->last_idle_said = now;
    ctl_begin(c, "aggregator_waiting");
    fsgd_cj_u64(c->cj, "step", step);
    fsgd_cj_u64(c->cj, "gen", c->gen);
    ctl_emit(c, "aggregator_waiting");
}

int agg_follow_hold(agg_follow_t *f, const agg_follow_ctx_t *c, fsgd_wire_state_t *st, agg_open_step_t *open,
                    agg_data_t *d, uint64_t step, const agg_env_t *e)
{
    if ((c->stop && *c->stop) || open->rows_step > 0)
        return 0;
    for (uint32_t p = 0; p < st->nparts; p++)
        if (st->pos[p] < st->end[p])
            return 0; /* rows are left: whether they come is the workers' business */
    if (agg_follow_version_due(f, e->s->rows_total, c->job->dist->version_seconds))
        return 0; /* the empty step carries the version out */
    int moved = refill(f, c, st, open, d, e, 1);
    if (moved == 0)
        say_idle(f, c, step);
    return moved < 0 ? moved : moved == 0;
}

/* --- progressive validation --- */

int agg_follow_score(agg_follow_t *f, const agg_follow_ctx_t *c, const fsgd_wire_state_t *st,
                     const agg_open_step_t *open, agg_data_t *d, const float *theta, const agg_env_t *e)
{
    const fsgd_train_params_t *tp = c->job->train;
    fsgd_model_t m = {.kind = tp->model, .dim = c->dim, .has_bias = tp->bias, .bias = (float)tp->bias_value,
                      .w = (float *)theta};
    for (uint32_t p = 0; p < st->nparts; p++) {
        if (open->newpos[p] == st->pos[p])
            continue;
        follow_part_t *fp = &f->part[p];
        if (!fp->loaded || fp->start != st->start[p] || fp->end != st->end[p])
            FSGD_TRY(load_window(f, c, d, e, p, st->start[p], st->end[p]));
        uint64_t r0 = fp->row_of[st->pos[p] - fp->start], r1 = fp->row_of[open->newpos[p] - fp->start];
        const fsgd_csr_t *x = &fp->rows;
        for (uint64_t r = r0; r < r1; r++) {
            uint64_t lo = x->row_ptr[r];
            double mg = fsgd_model_margin(&m, x->col + lo, x->val + lo, x->row_ptr[r + 1] - lo);
            f->pv_loss_sum += fsgd_loss_value(tp->model, mg, fsgd_loss_label(tp->model, x->label[r]));
            f->win_m[f->win_i] = mg;
            f->win_y[f->win_i] = x->label[r];
            f->win_i = (f->win_i + 1) % FOLLOW_PV_WINDOW;
            if (f->win_n < FOLLOW_PV_WINDOW)
                f->win_n++;
        }
        f->pv_rows += r1 - r0;
        f->trained[p] += r1 - r0;
    }
    return 0;
}

/* The progressive figures into the stats (the window's AUC sorts it: at a
 * version and at most once a second for the progress line). */
void agg_follow_stats(const agg_follow_t *f, fsgd_loss_kind_t model, fsgd_agg_stats_t *s)
{
    s->version = f->version;
    s->pv_rows = f->pv_rows;
    s->pv_logloss = f->pv_rows ? f->pv_loss_sum / (double)f->pv_rows : NAN;
    s->pv_window_rows = f->win_n;
    fsgd_metrics_t mt = fsgd_metrics_compute(model, f->win_m, f->win_y, f->win_n);
    s->pv_auc = f->win_n ? mt.auc : NAN;
    s->pv_window_logloss = f->win_n ? mt.loss : NAN;
}

/* --- versions --- */

int agg_follow_version_due(const agg_follow_t *f, uint64_t rows_total, double version_seconds)
{
    return rows_total > f->rows_at_version && agg_now() - f->last_version_t >= version_seconds;
}

int agg_follow_after_step(agg_follow_t *f, const agg_follow_ctx_t *c, fsgd_wire_state_t *st, agg_open_step_t *open,
                          agg_data_t *d, const agg_env_t *e)
{
    int moved = refill(f, c, st, open, d, e, 0);
    return moved < 0 ? moved : 0;
}

int agg_follow_published(agg_follow_t *f, const agg_follow_ctx_t *c, const fsgd_wire_state_t *st, uint64_t step,
                         const float *theta, const agg_env_t *e)
{
    fsgd_agg_stats_t *s = e->s;
    double now = agg_now(), since = now - f->last_version_t;
    double rate = since > 0 ? (double)(s->rows_total - f->rows_at_version) / since : 0;
    f->version++;
    f->last_version_t = now;
    f->rows_at_version = s->rows_total;
    agg_follow_stats(f, c->job->train->model, s);
    /* the version's model on --test: the same rows every version, comparable */
    FSGD_TRY(agg_evaluate(c->job->train, c->dim, theta, c->test, &s->test, e));
    ctl_begin(c, "model_version");
    fsgd_cj_u64(c->cj, "version", f->version);
    fsgd_cj_u64(c->cj, "step", step);
    fsgd_cj_u64(c->cj, "rows", s->rows_total);
    fsgd_cj_u64(c->cj, "pv_rows", f->pv_rows);
    fsgd_cj_f64(c->cj, "pv_logloss", s->pv_logloss);
    fsgd_cj_u64(c->cj, "pv_window_rows", f->win_n);
    fsgd_cj_f64(c->cj, "pv_auc", s->pv_auc);
    fsgd_cj_f64(c->cj, "pv_window_logloss", s->pv_window_logloss);
    if (s->test.n) {
        fsgd_cj_u64(c->cj, "test_rows", s->test.n);
        fsgd_cj_f64(c->cj, "test_auc", s->test.auc);
        fsgd_cj_f64(c->cj, "test_logloss", s->test.logloss);
    }
    fsgd_cj_u64s(c->cj, "positions", st->pos, st->nparts);
    fsgd_cj_u64s(c->cj, "rows_by_partition", f->trained, st->nparts);
    ctl_emit(c, "model_version");
    /* one short line a version (~120 characters: issue 40); every
     * version's positions and rows per partition are in its model_version
     * event on NAME.ctl above */
    char test[64] = "";
    if (s->test.n)
        snprintf(test, sizeof test, "; test auc %.5f logloss %.5f", s->test.auc, s->test.logloss);
    agg_env_log(e, "version %llu (step %llu): %llu rows, %.0f rows/s; progressive logloss %.5f auc %.5f%s",
                (unsigned long long)f->version, (unsigned long long)step, (unsigned long long)s->rows_total, rate,
                s->pv_logloss, s->pv_auc, test);
    if (c->stop && *c->stop) {
        /* the final version (SIGTERM): where each partition stopped, so a
         * reader can check that every row up to its position was trained once */
        char parts[512];
        size_t used = 0;
        for (uint32_t p = 0; p < st->nparts && used < sizeof parts - 48; p++)
            used += (size_t)snprintf(parts + used, sizeof parts - used, "%s%u:%llu/%llu", p ? " " : "", p,
                                     (unsigned long long)st->pos[p], (unsigned long long)f->trained[p]);
        agg_env_log(e, "version %llu: partition:position/rows %s", (unsigned long long)f->version, parts);
    }
    return 0;
}

void agg_follow_stopped(const agg_follow_t *f, uint64_t step, const char *checkpoint, const agg_env_t *e)
{
    agg_env_log(e, "follow: stopped on request at step %llu with version %llu; the checkpoint%s%s continues it",
                (unsigned long long)step, (unsigned long long)f->version, checkpoint[0] ? " " : "", checkpoint);
}

/* --- checkpoint --- */

/* u64 version, u64 pv_rows, f64 pv_loss_sum, u32 nparts, u64 trained[nparts]
 * (the rows seen so far are the header's dataset rows) */
#define FOLLOW_CKPT_FIXED 28
int agg_follow_ckpt_put(const agg_follow_t *f, fsgd_wire_buf_t *b)
{
    int rc = fsgd_wire_u64(b, f->version) | fsgd_wire_u64(b, f->pv_rows) | fsgd_wire_f64(b, f->pv_loss_sum) |
             fsgd_wire_u32(b, f->nparts);
    for (uint32_t p = 0; p < f->nparts; p++)
        rc |= fsgd_wire_u64(b, f->trained[p]);
    return rc ? FSGD_E_NOMEM : 0;
}

int agg_follow_ckpt_get(agg_follow_t **fp, uint32_t nparts, const char *path, const uint8_t *p, size_t len,
                        size_t *off, const agg_env_t *e)
{
    if (len - *off < FOLLOW_CKPT_FIXED)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_TRUNCATED, "checkpoint '%s': truncated at byte %zu", path, *off);
    uint32_t n = fsgd_le_get32(p + *off + 24);
    if (n != nparts)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_FORMAT,
                            "checkpoint '%s': follow section of %u partitions, the state has %u (byte %zu)", path, n,
                            nparts, *off + 24);
    if ((len - *off - FOLLOW_CKPT_FIXED) / 8 < n)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_TRUNCATED, "checkpoint '%s': truncated at byte %zu", path,
                            *off + FOLLOW_CKPT_FIXED);
    if (!*fp)
        FSGD_TRY(follow_alloc(fp, n, e)); /* a checkpoint read without a job (fsgd_agg_ckpt_check) */
    agg_follow_t *f = *fp;
    f->version = fsgd_le_get64(p + *off);
    f->pv_rows = fsgd_le_get64(p + *off + 8);
    f->pv_loss_sum = fsgd_le_getf64(p + *off + 16);
    e->s->dataset_rows = fsgd_le_get64(p + 24); /* the header's: the rows the job has seen */
    *off += FOLLOW_CKPT_FIXED;
    for (uint32_t i = 0; i < n; i++, *off += 8)
        f->trained[i] = fsgd_le_get64(p + *off);
    return 0;
}

int agg_follow_resumed(agg_follow_t *f, const agg_follow_ctx_t *c, fsgd_wire_state_t *st, agg_data_t *d,
                       uint64_t step, const agg_env_t *e)
{
    for (uint32_t p = 0; p < st->nparts; p++) {
        int64_t lo, hi;
        FSGD_TRY(fsgd_bus_watermarks(c->scan_c, c->data_topic, (int32_t)p, &lo, &hi, 10000, e->err, e->errsz));
        if (st->start[p] > st->pos[p] || st->pos[p] > st->end[p] || (int64_t)st->pos[p] < lo ||
            (int64_t)st->end[p] > hi)
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_ARG,
                                "checkpoint '%s': %s [%u] window [%llu, %llu) at %llu, but the topic holds [%lld, "
                                "%lld): another job's checkpoint, or rows were dropped; start over (fsgd run --fresh)",
                                c->job->dist->checkpoint, c->data_topic, p, (unsigned long long)st->start[p],
                                (unsigned long long)st->end[p], (unsigned long long)st->pos[p], (long long)lo,
                                (long long)hi);
        /* rows before the position were trained: read from there on */
        if ((int64_t)st->start[p] < lo)
            st->start[p] = st->pos[p];
        FSGD_TRY(load_window(f, c, d, e, p, st->start[p], st->end[p]));
    }
    f->rows_at_version = e->s->rows_total;
    f->last_version_t = agg_now();
    agg_follow_stats(f, c->job->train->model, e->s);
    agg_env_log(e, "follow: resumed at version %llu, step %llu, %llu rows trained", (unsigned long long)f->version,
                (unsigned long long)step, (unsigned long long)e->s->rows_total);
    return 0;
}
