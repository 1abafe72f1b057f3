/* The aggregator reads the data topic once: rows per offset (for exactly-once
 * accounting), the dimension, labels and value bounds (agg_data.h); and
 * refuses a job name whose model topic ends with a finished job. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>
#include <poll.h>

#include "agg_clock.h"
#include "agg_data.h"
#include "agg_env.h"
#include "data_summary.h"
#include "fsgd/auth.h"
#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/libsvm.h"

/* --- data scan --- */

/* One read of the scan: what it fills, what it reads by. */
typedef struct scan_read {
    agg_data_t *d;
    const agg_scan_ctx_t *scan;
    const agg_env_t *e;
    const fsgd_wire_state_t *st;
    uint32_t p;
    fsgd_csr_t tmp;
    uint64_t rows, max_col, nnz;
    fsgd_libsvm_stats_t bad; /* skip_bad: the malformed rows skipped */
    uint64_t dim;            /* the job's fixed dimension (0: the data's) */
    uint64_t past_dim;       /* skip_bad: messages with a feature past dim, read as no rows */
    char first_past[256];
} scan_read_t;

int agg_row_replayed(agg_data_t *d, const char *data_topic, const agg_env_t *e, int32_t partition, int64_t offset,
                     char *err, size_t errsz)
{
    uint64_t before = fsgd_replay_count(d->replay_rows, NULL, 0);
    int rp = fsgd_replay_row(d->replay_rows, partition, offset);
    if (rp < 0)
        return fsgd_err_fmt(err, errsz, rp, "aggregator: out of memory");
    if (fsgd_replay_count(d->replay_rows, NULL, 0) > before) /* a new verdict (not an offset read again) */
        agg_env_reject_on(e, data_topic, FSGD_AGG_REJ_REPLAYED,
                          "partition %d offset %lld: a copy of a row message its producer wrote before: read as no "
                          "rows, by every worker too", (int)partition, (long long)offset);
    return rp;
}

static int scan_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                    size_t errsz)
{
    scan_read_t *c = ctx;
    agg_data_t *d = c->d;
    int rp = agg_row_replayed(d, c->scan->data_topic, c->e, partition, offset, err, errsz);
    if (rp < 0)
        return rp;
    if (rp)
        len = 0; /* no rows at this offset */
    char src[200];
    snprintf(src, sizeof src, "topic %s partition %d offset %lld", c->scan->data_topic, (int)partition,
             (long long)offset);
    fsgd_csr_clear(&c->tmp);
    long n = fsgd_rowfmt_parse_msg(c->scan->fmt, val, len, src, &c->tmp, &c->bad, err, errsz);
    if (n < 0)
        return (int)n;
    if (c->dim && c->tmp.max_col > c->dim && c->scan->job->train->skip_bad) {
        /* no rows here, as the workers (worker_cache.c) and follow's windows
         * (agg_follow.c) read it: a follow job stopped by such a row goes on
         * with --resume --skip-bad */
        if (!c->past_dim++)
            snprintf(c->first_past, sizeof c->first_past, "%s: feature %llu", src,
                     (unsigned long long)c->tmp.max_col);
        fsgd_csr_clear(&c->tmp);
        n = 0;
    }
    c->rows += (uint64_t)n;
    c->nnz += c->tmp.nnz;
    if (c->tmp.max_col > c->max_col)
        c->max_col = c->tmp.max_col;
    /* what bounds a genuine gradient (FSGD_AGG_GRAD_SLACK) and the labels */
    double sum = 0; /* Σ|x| too (lr auto under a delay), in the same pass */
    for (size_t i = 0; i < c->tmp.nnz; i++) {
        double x = fabs((double)c->tmp.val[i]);
        sum += x;
        if (x > d->xmax)
            d->xmax = x;
    }
    d->xsum += sum;
    for (size_t r = 0; r < c->tmp.n_rows; r++)
        if (fabs(c->tmp.label[r]) > d->ymax)
            d->ymax = fabs(c->tmp.label[r]);
    fsgd_label_set_add(&d->labels, c->tmp.label, c->tmp.n_rows);
    d->rows_at[c->p][offset - (int64_t)c->st->start[c->p] + 1] = c->rows;
    return 0;
}

/* The producer's summary (data_summary.h) in place of the scan, when it
 * describes exactly what the topic holds now: 1 used, 0 not (scan), < 0
 * error. */
/* What a summary counts of the rows: their number, largest column, nonzeros. */
typedef struct summary_counts {
    uint64_t rows, max_col, nnz;
} summary_counts_t;

static int from_summary(agg_data_t *d, fsgd_wire_state_t *st, const agg_scan_ctx_t *c, const agg_env_t *e, int P,
                        uint64_t dim, summary_counts_t *out)
{
    fsgd_data_summary_t *s = malloc(sizeof *s);
    if (!s)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    int rc = fsgd_data_summary_read(c->scan_c, c->job, s, e->err, e->errsz);
    if (rc == 1 && s->nparts != (uint32_t)P)
        rc = 0;
    if (rc == 1 && c->job->train->skip_bad && dim && s->max_col > dim)
        rc = 0; /* it counts rows that skip_bad reads as none: the scan finds them */
    int64_t *lo = rc == 1 ? calloc((size_t)P, sizeof *lo) : NULL, *hi = lo ? calloc((size_t)P, sizeof *hi) : NULL;
    if (rc == 1 && (!lo || !hi))
        rc = fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    if (rc == 1 && (rc = fsgd_bus_watermarks_all(c->scan_c, c->data_topic, P, lo, hi, 10000, e->err, e->errsz)) == 0)
        rc = 1;
    for (int p = 0; rc == 1 && p < P; p++)
        rc = lo[p] == 0 && hi[p] == (int64_t)s->ends[p] ? 1 : 0;
    free(lo);
    free(hi);
    for (int p = 0; rc == 1 && p < P; p++) {
        st->start[p] = st->pos[p] = 0;
        st->end[p] = s->ends[p];
        d->rows_at[p] = malloc(((size_t)s->ends[p] + 1) * sizeof **d->rows_at);
        if (!d->rows_at[p])
            rc = fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        /* full blocks of block_rows, the last one of a partition the rest */
        for (uint64_t o = 0; rc == 1 && o <= s->ends[p]; o++) {
            uint64_t r = o * s->block_rows;
            d->rows_at[p][o] = r < s->part_rows[p] ? r : s->part_rows[p];
        }
    }
    if (rc == 1) {
        *out = (summary_counts_t){s->rows, s->max_col, s->nnz};
        d->labels = s->labels;
        d->labels.classes = fsgd_rowfmt_weighs(c->fmt); /* the summary's are classes already */
        d->xmax = s->xmax;
        d->ymax = s->ymax;
        d->xsum = s->xsum;
        e->s->data_from_summary = 1;
    }
    free(s);
    return rc;
}

int agg_await_producer(const char *data_topic, const agg_env_t *e)
{
    const char *v = getenv("FSGD_AGG_AWAIT_FD");
    char *end = NULL;
    long fd = v ? strtol(v, &end, 10) : -1;
    if (!v || !*v || *end || fd < 0 || fd > INT_MAX)
        return 0;
    double t0 = agg_now();
    char go = 0;
    ssize_t n;
    for (;;) {
        struct pollfd pfd = {.fd = (int)fd, .events = POLLIN};
        int r = poll(&pfd, 1, 10000);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            agg_env_log(e, "waiting for fsgd run's producer to finish writing %s (%.0f s)", data_topic, agg_now() - t0);
            continue;
        }
        n = read((int)fd, &go, 1);
        if (n < 0 && errno == EINTR)
            continue;
        break;
    }
    close((int)fd);
    unsetenv("FSGD_AGG_AWAIT_FD");
    if (n != 1 || go != '1')
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_STATE,
                            "aggregator: fsgd run stopped before its producer had written %s", data_topic);
    return 0;
}

int agg_scan_data(agg_data_t *d, fsgd_wire_state_t *st, const agg_scan_ctx_t *c, const agg_env_t *e, uint64_t *dim)
{
    int P = fsgd_bus_partitions(c->scan_c, c->data_topic, 15000, e->err, e->errsz);
    if (P < 0)
        return P;
    FSGD_TRY(fsgd_wire_state_alloc(st, (uint32_t)P));
    d->rows_at = calloc((size_t)P, sizeof *d->rows_at);
    if (!d->rows_at)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    scan_read_t r = {.d = d, .scan = c, .e = e, .st = st};
    /* a hashed format's 2^bits, else the job's (0: the data's) */
    FSGD_TRY(fsgd_rowfmt_dim(c->fmt, c->job->train->dim, &r.dim, e->err, e->errsz));
    summary_counts_t sum = {0};
    int rc = from_summary(d, st, c, e, P, r.dim, &sum);
    if (rc < 0)
        return rc;
    uint64_t total = sum.rows, max_col = 0;
    int to_read = P;
    if (rc == 1) {
        r.max_col = sum.max_col;
        r.nnz = sum.nnz;
        to_read = 0;
    }
    rc = 0;
    int64_t *los = to_read ? calloc((size_t)to_read, sizeof *los) : NULL;
    int64_t *his = to_read ? calloc((size_t)to_read, sizeof *his) : NULL;
    if (to_read && (!los || !his))
        rc = fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    if (!rc && to_read)
        rc = fsgd_bus_watermarks_all(c->scan_c, c->data_topic, to_read, los, his, 10000, e->err, e->errsz);
    for (int p = 0; p < to_read && !rc; p++) {
        int64_t lo = los[p], hi = his[p];
        if (lo != 0) {
            rc = fsgd_err_fmt(e->err, e->errsz, FSGD_E_LOST,
                              "data lost: %s [%d] starts at offset %lld, not 0: rows were dropped before "
                              "training (retention, or the embedded cluster's 5 MiB per partition)",
                              c->data_topic, p, (long long)lo);
            break;
        }
        st->start[p] = st->pos[p] = (uint64_t)lo;
        st->end[p] = (uint64_t)hi;
        d->rows_at[p] = calloc((size_t)(hi - lo) + 1, sizeof **d->rows_at);
        if (!d->rows_at[p]) {
            rc = fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
            break;
        }
        r.p = (uint32_t)p;
        r.rows = 0;
        rc = fsgd_bus_read_range(c->scan_c,
                                 &(fsgd_bus_range_t){.topic = c->data_topic, .partition = p, .start = lo, .end = hi,
                                                     .timeout_ms = 30000, .mode = FSGD_BUS_READ_ROWS,
                                                     .fn = scan_msg, .ctx = &r},
                                 e->err, e->errsz);
        total += r.rows;
    }
    free(los);
    free(his);
    max_col = r.max_col;
    fsgd_csr_free(&r.tmp);
    if (rc)
        return rc;
    /* Rows an outside client wrote that do not parse: skipped (skip_bad)
     * by the workers as here, never silently. */
    if (r.bad.bad_rows) {
        agg_env_log(e, "topic %s: skipped %llu malformed rows (skip_bad); first: %s", c->data_topic,
                    (unsigned long long)r.bad.bad_rows, r.bad.first_bad[0]);
        for (uint64_t i = 1; i < r.bad.bad_rows && i < FSGD_LIBSVM_BAD_KEPT; i++)
            agg_env_log(e, "topic %s: skipped %s", c->data_topic, r.bad.first_bad[i]);
    }
    if (r.past_dim)
        agg_env_log(e, "topic %s: skipped %llu row messages with a feature past dim %llu (skip_bad); first: %s",
                    c->data_topic, (unsigned long long)r.past_dim, (unsigned long long)r.dim, r.first_past);
    char first[256];
    uint64_t unauth = fsgd_auth_skipped_rows(c->auth, first, sizeof first);
    if (unauth) /* skip_bad: rows without the job key's tag, read as empty by every role */
        agg_env_log(e, "topic %s: skipped %llu row messages without this job key's tag (skip_bad); first: %s",
                    c->data_topic, (unsigned long long)unauth, first);
    if (total == 0)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_ARG, "topic %s holds no rows: produce data first", c->data_topic);
    char why[300];
    if ((rc = fsgd_loss_check_labels(c->job->train->model, &d->labels, why, sizeof why)) < 0)
        return fsgd_err_fmt(e->err, e->errsz, rc, "topic %s: %s", c->data_topic, why);
    if (c->job->train->bias && fabs(c->job->train->bias_value) > d->xmax)
        d->xmax = fabs(c->job->train->bias_value);
    if (r.dim && max_col > r.dim)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_RANGE, "topic %s has feature %llu > dim %llu", c->data_topic,
                            (unsigned long long)max_col, (unsigned long long)r.dim);
    e->s->dataset_rows = total;
    e->s->dataset_nnz = r.nnz;
    e->s->partitions = P;
    *dim = r.dim ? r.dim : max_col;
    return 0;
}

/* NAME.model that ends with the FINAL model of a job: the job name is used
 * by a job that has finished, and a new one under it would be mixed with
 * it (its workers would take that FINAL message for their own end). */
static int last_final(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                      size_t errsz)
{
    fsgd_kframe_t f;
    if (fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) == 0 && (f.flags & FSGD_KFLAG_FINAL)) {
        fsgd_kframe_t *out = ctx;
        *out = f;
        out->body = NULL;
    }
    return 0;
}

int agg_check_model_topic(const agg_scan_ctx_t *c, const agg_env_t *e)
{
    int64_t lo, hi;
    if (fsgd_bus_watermarks(c->scan_c, c->model_topic, 0, &lo, &hi, 10000, NULL, 0) < 0 || hi <= lo)
        return 0;
    fsgd_kframe_t f = {0};
    const fsgd_bus_range_t last = {.topic = c->model_topic, .partition = 0, .start = hi - 1, .end = hi,
                                   .timeout_ms = 5000, .fn = last_final, .ctx = &f};
    if (fsgd_bus_read_range(c->scan_c, &last, NULL, 0) < 0 || !f.flags)
        return 0;
    return fsgd_err_fmt(e->err, e->errsz, FSGD_E_ARG,
                        "job name '%s' is taken: %s ends with the final model of a finished job (generation %u, "
                        "step %llu, %lld messages); pick another --name, or delete the job's topics",
                        c->job->dist->name, c->model_topic, f.gen, (unsigned long long)f.step, (long long)(hi - lo));
}

void agg_data_free(agg_data_t *d, uint32_t nparts)
{
    for (uint32_t p = 0; d->rows_at && p < nparts; p++)
        free(d->rows_at[p]);
    free(d->rows_at);
    d->rows_at = NULL;
    fsgd_replay_destroy(d->replay_rows);
    d->replay_rows = NULL;
}
