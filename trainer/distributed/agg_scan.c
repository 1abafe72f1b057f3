/* The aggregator reads the data topic once: rows per offset (for exactly-once
 * accounting), the dimension, labels and value bounds; and refuses a job
 * name whose model topic ends with a finished job. */
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

#include "aggregator_internal.h"
#include "data_summary.h"
#include "fsgd/auth.h"

/* --- data scan --- */

typedef struct scan_ctx {
    agg_t *a;
    uint32_t p;
    fsgd_csr_t tmp;
    uint64_t rows, max_col, nnz;
    fsgd_libsvm_stats_t bad; /* skip_bad: the malformed rows skipped */
    uint64_t dim;            /* the job's fixed dimension (0: the data's) */
    uint64_t past_dim;       /* skip_bad: messages with a feature past dim, read as no rows */
    char first_past[256];
} scan_ctx_t;

int agg_row_replayed(agg_t *a, int32_t partition, int64_t offset, char *err, size_t errsz)
{
    uint64_t before = fsgd_replay_count(a->replay_rows, NULL, 0);
    int rp = fsgd_replay_row(a->replay_rows, partition, offset);
    if (rp < 0)
        return fsgd_err_fmt(err, errsz, rp, "aggregator: out of memory");
    if (fsgd_replay_count(a->replay_rows, NULL, 0) > before) /* a new verdict (not an offset read again) */
        agg_reject_on(a, a->topic.data, FSGD_AGG_REJ_REPLAYED,
                      "partition %d offset %lld: a copy of a row message its producer wrote before: read as no rows, "
                      "by every worker too", (int)partition, (long long)offset);
    return rp;
}

static int scan_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                    size_t errsz)
{
    scan_ctx_t *c = ctx;
    int rp = agg_row_replayed(c->a, partition, offset, err, errsz);
    if (rp < 0)
        return rp;
    if (rp)
        len = 0; /* no rows at this offset */
    char src[200];
    snprintf(src, sizeof src, "topic %s partition %d offset %lld", c->a->topic.data, (int)partition, (long long)offset);
    fsgd_csr_clear(&c->tmp);
    long n = fsgd_rowfmt_parse_msg(&c->a->fmt, val, len, src, &c->tmp, &c->bad, err, errsz);
    if (n < 0)
        return (int)n;
    if (c->dim && c->tmp.max_col > c->dim && c->a->job->train->skip_bad) {
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
    for (size_t i = 0; i < c->tmp.nnz; i++)
        if (fabs((double)c->tmp.val[i]) > c->a->xmax)
            c->a->xmax = fabs((double)c->tmp.val[i]);
    for (size_t r = 0; r < c->tmp.n_rows; r++)
        if (fabs(c->tmp.label[r]) > c->a->ymax)
            c->a->ymax = fabs(c->tmp.label[r]);
    fsgd_label_set_add(&c->a->labels, c->tmp.label, c->tmp.n_rows);
    c->a->rows_at[c->p][offset - (int64_t)c->a->st.start[c->p] + 1] = c->rows;
    return 0;
}

/* The producer's summary (data_summary.h) in place of the scan, when it
 * describes exactly what the topic holds now: 1 used, 0 not (scan), < 0
 * error. */
static int from_summary(agg_t *a, int P, uint64_t dim, uint64_t *total, uint64_t *max_col, uint64_t *nnz)
{
    fsgd_data_summary_t *s = malloc(sizeof *s);
    if (!s)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    int rc = fsgd_data_summary_read(a->scan_c, a->job, s, a->err, a->errsz);
    if (rc == 1 && s->nparts != (uint32_t)P)
        rc = 0;
    if (rc == 1 && a->job->train->skip_bad && dim && s->max_col > dim)
        rc = 0; /* it counts rows that skip_bad reads as none: the scan finds them */
    int64_t *lo = rc == 1 ? calloc((size_t)P, sizeof *lo) : NULL, *hi = lo ? calloc((size_t)P, sizeof *hi) : NULL;
    if (rc == 1 && (!lo || !hi))
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    if (rc == 1 && (rc = fsgd_bus_watermarks_all(a->scan_c, a->topic.data, P, lo, hi, 10000, a->err, a->errsz)) == 0)
        rc = 1;
    for (int p = 0; rc == 1 && p < P; p++)
        rc = lo[p] == 0 && hi[p] == (int64_t)s->ends[p] ? 1 : 0;
    free(lo);
    free(hi);
    for (int p = 0; rc == 1 && p < P; p++) {
        a->st.start[p] = a->st.pos[p] = 0;
        a->st.end[p] = s->ends[p];
        a->rows_at[p] = malloc(((size_t)s->ends[p] + 1) * sizeof **a->rows_at);
        if (!a->rows_at[p])
            rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        /* full blocks of block_rows, the last one of a partition the rest */
        for (uint64_t o = 0; rc == 1 && o <= s->ends[p]; o++) {
            uint64_t r = o * s->block_rows;
            a->rows_at[p][o] = r < s->part_rows[p] ? r : s->part_rows[p];
        }
    }
    if (rc == 1) {
        *total = s->rows;
        *max_col = s->max_col;
        *nnz = s->nnz;
        a->labels = s->labels;
        a->labels.classes = fsgd_rowfmt_weighs(&a->fmt); /* the summary's are classes already */
        a->xmax = s->xmax;
        a->ymax = s->ymax;
        a->s->data_from_summary = 1;
    }
    free(s);
    return rc;
}

int agg_await_producer(agg_t *a)
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
            agg_log(a, "waiting for fsgd run's producer to finish writing %s (%.0f s)", a->topic.data, agg_now() - t0);
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
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE,
                            "aggregator: fsgd run stopped before its producer had written %s", a->topic.data);
    return 0;
}

int agg_scan_data(agg_t *a)
{
    int P = fsgd_bus_partitions(a->scan_c, a->topic.data, 15000, a->err, a->errsz);
    if (P < 0)
        return P;
    FSGD_TRY(fsgd_wire_state_alloc(&a->st, (uint32_t)P));
    a->rows_at = calloc((size_t)P, sizeof *a->rows_at);
    if (!a->rows_at)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    scan_ctx_t c = {.a = a};
    /* a hashed format's 2^bits, else the job's (0: the data's) */
    FSGD_TRY(fsgd_rowfmt_dim(&a->fmt, a->job->train->dim, &c.dim, a->err, a->errsz));
    uint64_t total = 0, max_col = 0, nnz = 0;
    int rc = from_summary(a, P, c.dim, &total, &max_col, &nnz);
    if (rc < 0)
        return rc;
    int to_read = P;
    if (rc == 1) {
        c.max_col = max_col;
        c.nnz = nnz;
        to_read = 0;
    }
    rc = 0;
    int64_t *los = to_read ? calloc((size_t)to_read, sizeof *los) : NULL;
    int64_t *his = to_read ? calloc((size_t)to_read, sizeof *his) : NULL;
    if (to_read && (!los || !his))
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    if (!rc && to_read)
        rc = fsgd_bus_watermarks_all(a->scan_c, a->topic.data, to_read, los, his, 10000, a->err, a->errsz);
    for (int p = 0; p < to_read && !rc; p++) {
        int64_t lo = los[p], hi = his[p];
        if (lo != 0) {
            rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_LOST,
                              "data lost: %s [%d] starts at offset %lld, not 0: rows were dropped before "
                              "training (retention, or the embedded cluster's 5 MiB per partition)",
                              a->topic.data, p, (long long)lo);
            break;
        }
        a->st.start[p] = a->st.pos[p] = (uint64_t)lo;
        a->st.end[p] = (uint64_t)hi;
        a->rows_at[p] = calloc((size_t)(hi - lo) + 1, sizeof **a->rows_at);
        if (!a->rows_at[p]) {
            rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
            break;
        }
        c.p = (uint32_t)p;
        c.rows = 0;
        rc = fsgd_bus_read_range(a->scan_c,
                                 &(fsgd_bus_range_t){.topic = a->topic.data, .partition = p, .start = lo, .end = hi,
                                                     .timeout_ms = 30000, .mode = FSGD_BUS_READ_ROWS,
                                                     .fn = scan_msg, .ctx = &c},
                                 a->err, a->errsz);
        total += c.rows;
    }
    free(los);
    free(his);
    max_col = c.max_col;
    fsgd_csr_free(&c.tmp);
    if (rc)
        return rc;
    /* Rows an outside client wrote that do not parse: skipped (skip_bad)
     * by the workers as here, never silently. */
    if (c.bad.bad_rows) {
        agg_log(a, "topic %s: skipped %llu malformed rows (skip_bad); first: %s", a->topic.data,
                (unsigned long long)c.bad.bad_rows, c.bad.first_bad[0]);
        for (uint64_t i = 1; i < c.bad.bad_rows && i < FSGD_LIBSVM_BAD_KEPT; i++)
            agg_log(a, "topic %s: skipped %s", a->topic.data, c.bad.first_bad[i]);
    }
    if (c.past_dim)
        agg_log(a, "topic %s: skipped %llu row messages with a feature past dim %llu (skip_bad); first: %s", a->topic.data,
                (unsigned long long)c.past_dim, (unsigned long long)c.dim, c.first_past);
    char first[256];
    uint64_t unauth = fsgd_auth_skipped_rows(a->auth, first, sizeof first);
    if (unauth) /* skip_bad: rows without the job key's tag, read as empty by every role */
        agg_log(a, "topic %s: skipped %llu row messages without this job key's tag (skip_bad); first: %s", a->topic.data,
                (unsigned long long)unauth, first);
    if (total == 0)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "topic %s holds no rows: produce data first", a->topic.data);
    char why[300];
    if ((rc = fsgd_loss_check_labels(a->job->train->model, &a->labels, why, sizeof why)) < 0)
        return fsgd_err_fmt(a->err, a->errsz, rc, "topic %s: %s", a->topic.data, why);
    if (a->job->train->bias && fabs(a->job->train->bias_value) > a->xmax)
        a->xmax = fabs(a->job->train->bias_value);
    uint64_t dim = c.dim;
    if (dim && max_col > dim)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_RANGE, "topic %s has feature %llu > dim %llu", a->topic.data,
                            (unsigned long long)max_col, (unsigned long long)dim);
    a->s->dataset_rows = total;
    a->s->dataset_nnz = c.nnz;
    a->s->partitions = P;
    a->dim = dim ? dim : max_col;
    a->mdim = a->dim + (a->job->train->bias ? 1 : 0);
    agg_shard_dims(a);
    if (a->job->dist->max_model_weights && a->mdim > a->job->dist->max_model_weights)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, FSGD_EMBEDDED_MODEL_LIMIT_MSG, (unsigned long long)a->mdim,
                            a->mdim * 4.0 / 1048576.0, (unsigned long long)a->job->dist->max_model_weights);
    a->s->dim = a->dim;
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

int agg_check_model_topic(agg_t *a)
{
    int64_t lo, hi;
    if (fsgd_bus_watermarks(a->scan_c, a->topic.model, 0, &lo, &hi, 10000, NULL, 0) < 0 || hi <= lo)
        return 0;
    fsgd_kframe_t f = {0};
    const fsgd_bus_range_t last = {.topic = a->topic.model, .partition = 0, .start = hi - 1, .end = hi,
                                   .timeout_ms = 5000, .fn = last_final, .ctx = &f};
    if (fsgd_bus_read_range(a->scan_c, &last, NULL, 0) < 0 || !f.flags)
        return 0;
    return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG,
                        "job name '%s' is taken: %s ends with the final model of a finished job (generation %u, "
                        "step %llu, %lld messages); pick another --name, or delete the job's topics",
                        a->job->dist->name, a->topic.model, f.gen, (unsigned long long)f.step, (long long)(hi - lo));
}

