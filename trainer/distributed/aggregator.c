/* `fsgd aggregator`: the barrier, the reduction, sparse Adam, and the model
 * topic (KAFKA_FORMAT.md).
 *
 * Step t+1 starts when the aggregator publishes the model message of step t:
 * it carries the new values of the touched keys and the step state (for each
 * data partition the epoch's offsets, the next position and the rows to
 * take). Each gradient names the offset ranges it consumed; a range is
 * accepted only if it starts at the partition's current position and no
 * other gradient of the step claimed the partition, so every row is applied
 * exactly once per epoch whatever the consumer group does. The count of
 * rows applied per epoch is checked against the scan of the data topic. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/adam.h"
#include "fsgd/codec.h"
#include "fsgd/downlink.h"
#include "fsgd/crc32c.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "fsgd/outfile.h"
#include "fsgd/reduce.h"
#include "agg_ckpt.h"
#include "ctl.h"
#include "wire.h"

typedef struct agg {
    const fsgd_job_t *job;
    fsgd_agg_stats_t *s;
    char tdata[128], tgrads[128], tmodel[128], tctl[128];
    rd_kafka_t *prod, *grads_c, *scan_c, *ctl_c;
    fsgd_ctl_json_t cj;
    int expected;
    uint32_t gen;
    uint64_t step; /* last applied step */
    fsgd_wire_state_t st;
    uint64_t **rows_at; /* per partition: rows before offset (start + i) */
    uint64_t dim, mdim;
    fsgd_adam_t adam;
    fsgd_reducer_t *red;
    fsgd_sparse_t dec, g;
    fsgd_kasm_t *as;
    uint32_t *live, *got;
    size_t nlive, ngot, cap_live, cap_got;
    uint8_t *claimed;
    uint64_t *newpos;
    uint64_t rows_step, rows_epoch;
    double loss_step, loss_epoch;
    double step_start, step_wait;
    int first_step;
    double first_deadline;
    fsgd_csr_t test;
    int have_test;
    fsgd_wire_buf_t buf;
    /* Compressed downlink (NULL: touched keys' float32 values, kind 4). */
    fsgd_downlink_t *down;
    uint8_t *dmsg;
    size_t dmsg_cap;
    uint32_t *applied; /* senders whose gradients this step applied */
    size_t napplied, cap_applied;
    uint64_t up_entries_step; /* entries in this step's applied messages */
    double *step_ms;
    size_t n_step_ms, cap_step_ms;
    double t0, seconds_before; /* training time before a restart */
    double t_step1;            /* when this process applied its first step (0: not yet) */
    double win_loss[FSGD_AGG_LOSS_WINDOW];
    uint64_t win_rows[FSGD_AGG_LOSS_WINDOW];
    unsigned win_i;
    /* NAME.ctl, followed for the whole run: who the members of the job are */
    struct member *mem;
    size_t nmem;
    uint64_t ctl_seq;
    double xmax, ymax; /* largest |feature value| (intercept included) and |label| in NAME.data */
    fsgd_label_set_t labels;
    fsgd_dist_log_fn log;
    void *log_ctx;
    uint8_t logged[FSGD_AGG_REJ_COUNT];
    int kerr_seen[32], n_kerr;
    double last_wait_log;
    char *err;
    size_t errsz;
    fsgd_klat_t lat_grads; /* produce-to-consume latency of NAME.grads frames */
} agg_t;

/* A worker that reported its partitions on NAME.ctl. */
typedef struct member {
    uint32_t id;
    uint64_t seq; /* order of its latest report */
    uint8_t *own; /* nparts bytes: the partitions of that report */
} member_t;

#define MAX_MEMBERS 1024

static void agg_log(agg_t *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void agg_log(agg_t *a, const char *fmt, ...)
{
    if (!a->log)
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    a->log(a->log_ctx, line);
}

#define FSGD_AGG_REJ_NAME_(name, text) text,
static const char *const reject_names[] = {FSGD_AGG_REJECT_LIST(FSGD_AGG_REJ_NAME_)};
#undef FSGD_AGG_REJ_NAME_

const char *fsgd_agg_reject_name(int reason)
{
    return reason >= 0 && reason < FSGD_AGG_REJ_COUNT ? reject_names[reason] : "unknown";
}

/* Counts a dropped message; the first of each reason is logged with its
 * detail (the rest only counted: a flood must not flood the log too). */
static void reject(agg_t *a, int reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void reject(agg_t *a, int reason, const char *fmt, ...)
{
    a->s->rejected[reason]++;
    if (a->logged[reason])
        return;
    a->logged[reason] = 1;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    agg_log(a, "rejected a message on %s: %s: %s (further %s messages are only counted: metrics "
               "messages.rejected.%s)",
            a->tgrads, reject_names[reason], why, reject_names[reason], reject_names[reason]);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --- data scan --- */

typedef struct scan_ctx {
    agg_t *a;
    uint32_t p;
    fsgd_csr_t tmp;
    uint64_t rows, max_col;
} scan_ctx_t;

static int scan_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                    size_t errsz)
{
    scan_ctx_t *c = ctx;
    char src[200];
    snprintf(src, sizeof src, "topic %s partition %d offset %lld", c->a->tdata, (int)partition, (long long)offset);
    fsgd_csr_clear(&c->tmp);
    fsgd_libsvm_opts_t o = {.skip_bad = c->a->job->skip_bad};
    long n = fsgd_libsvm_parse(val, len, src, 1, &o, &c->tmp, NULL, err, errsz);
    if (n < 0)
        return (int)n;
    c->rows += (uint64_t)n;
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

static int scan_data(agg_t *a)
{
    int P = fsgd_kbus_partitions(a->scan_c, a->tdata, 15000, a->err, a->errsz);
    if (P < 0)
        return P;
    FSGD_TRY(fsgd_wire_state_alloc(&a->st, (uint32_t)P));
    a->rows_at = calloc((size_t)P, sizeof *a->rows_at);
    if (!a->rows_at)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    scan_ctx_t c = {.a = a};
    uint64_t total = 0, max_col = 0;
    int rc = 0;
    for (int p = 0; p < P && !rc; p++) {
        int64_t lo, hi;
        FSGD_TRY(fsgd_kbus_watermarks(a->scan_c, a->tdata, p, &lo, &hi, 10000, a->err, a->errsz));
        if (lo != 0)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_LOST,
                                "data lost: %s [%d] starts at offset %lld, not 0: rows were dropped before "
                                "training (retention, or the embedded cluster's 5 MiB per partition)",
                                a->tdata, p, (long long)lo);
        a->st.start[p] = a->st.pos[p] = (uint64_t)lo;
        a->st.end[p] = (uint64_t)hi;
        a->rows_at[p] = calloc((size_t)(hi - lo) + 1, sizeof **a->rows_at);
        if (!a->rows_at[p])
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        c.p = (uint32_t)p;
        c.rows = 0;
        rc = fsgd_kbus_read_range(a->scan_c, a->tdata, p, lo, hi, 30000, scan_msg, &c, a->err, a->errsz);
        total += c.rows;
    }
    max_col = c.max_col;
    fsgd_csr_free(&c.tmp);
    if (rc)
        return rc;
    if (total == 0)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "topic %s holds no rows: produce data first", a->tdata);
    char why[300];
    if ((rc = fsgd_loss_check_labels(a->job->model, &a->labels, why, sizeof why)) < 0)
        return fsgd_err_fmt(a->err, a->errsz, rc, "topic %s: %s", a->tdata, why);
    if (a->job->bias && fabs(a->job->bias_value) > a->xmax)
        a->xmax = fabs(a->job->bias_value);
    if (a->job->dim && max_col > a->job->dim)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_RANGE, "topic %s has feature %llu > dim %llu", a->tdata,
                            (unsigned long long)max_col, (unsigned long long)a->job->dim);
    a->s->dataset_rows = total;
    a->s->partitions = P;
    a->dim = a->job->dim ? a->job->dim : max_col;
    a->mdim = a->dim + (a->job->bias ? 1 : 0);
    if (a->job->max_model_weights && a->mdim > a->job->max_model_weights)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, FSGD_EMBEDDED_MODEL_LIMIT_MSG, (unsigned long long)a->mdim,
                            a->mdim * 4.0 / 1048576.0, (unsigned long long)a->job->max_model_weights);
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
    if (fsgd_kframe_parse(val, len, &f, NULL, NULL, 0) == 0 && (f.flags & FSGD_KFLAG_FINAL)) {
        fsgd_kframe_t *out = ctx;
        *out = f;
        out->body = NULL;
    }
    return 0;
}

static int check_model_topic(agg_t *a)
{
    int64_t lo, hi;
    if (fsgd_kbus_watermarks(a->scan_c, a->tmodel, 0, &lo, &hi, 10000, NULL, 0) < 0 || hi <= lo)
        return 0;
    fsgd_kframe_t f = {0};
    if (fsgd_kbus_read_range(a->scan_c, a->tmodel, 0, hi - 1, hi, 5000, last_final, &f, NULL, 0) < 0 || !f.flags)
        return 0;
    return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG,
                        "job name '%s' is taken: %s ends with the final model of a finished job (generation %u, "
                        "step %llu, %lld messages); pick another --name, or delete the job's topics",
                        a->job->name, a->tmodel, f.gen, (unsigned long long)f.step, (long long)(hi - lo));
}

static void set_quota(agg_t *a)
{
    /* B rows per step split over the partitions that still have rows, so a
     * step holds B rows however partitions are spread over workers. */
    uint64_t B = a->job->batch >= 1 ? (uint64_t)a->job->batch
                                    : (uint64_t)ceil(a->job->batch * (double)a->s->dataset_rows);
    if (B < 1)
        B = 1;
    uint32_t active = 0;
    for (uint32_t p = 0; p < a->st.nparts; p++)
        active += a->st.pos[p] < a->st.end[p];
    uint32_t i = 0;
    for (uint32_t p = 0; p < a->st.nparts; p++) {
        if (a->st.pos[p] >= a->st.end[p]) {
            a->st.quota[p] = 0;
            continue;
        }
        uint64_t q = B / active + (i < B % active);
        a->st.quota[p] = (uint32_t)(q ? q : 0);
        i++;
    }
}

/* --- checkpoints --- */

/* A magic of its own: version 1 began with "FSGC", the codec messages' magic,
 * so a checkpoint and a gradient could not be told apart by their first
 * bytes. Version 1 files are refused with a message that says so. */
#define CKPT_MAGIC "FSGDCKPT"
#define CKPT_VERSION 2
#define CKPT_HEADER 40 /* magic, version, gen, step, rows, weights */

/* The checkpoint bytes of a's state (seconds: training time so far) into *b. */
static int ckpt_encode(agg_t *a, double seconds, fsgd_wire_buf_t *b)
{
    int rc = fsgd_wire_put(b, CKPT_MAGIC, 8) | fsgd_wire_u32(b, CKPT_VERSION) | fsgd_wire_u32(b, a->gen) | fsgd_wire_u64(b, a->step) |
             fsgd_wire_u64(b, a->s->dataset_rows) | fsgd_wire_u64(b, a->mdim) | fsgd_wire_state_put(b, &a->st) |
             fsgd_wire_u64(b, a->adam.t) | fsgd_wire_u64(b, a->rows_epoch) | fsgd_wire_f64(b, a->loss_epoch) |
             fsgd_wire_u64(b, a->s->rows_total) | fsgd_wire_f64(b, seconds) | fsgd_wire_u32(b, (uint32_t)a->s->n_epochs);
    for (int i = 0; i < a->s->n_epochs; i++) {
        const fsgd_agg_epoch_t *e = &a->s->epochs[i];
        rc |= fsgd_wire_u32(b, (uint32_t)e->epoch) | fsgd_wire_f64(b, e->seconds) | fsgd_wire_f64(b, e->train_loss) |
              fsgd_wire_u64(b, e->rows) | fsgd_wire_u64(b, e->test.n) | fsgd_wire_f64(b, e->test.auc) |
              fsgd_wire_f64(b, e->test.logloss) | fsgd_wire_f64(b, e->test.loss) | fsgd_wire_f64(b, e->test.accuracy);
    }
    rc |= fsgd_wire_put(b, a->adam.theta, a->mdim * 4) | fsgd_wire_put(b, a->adam.m, a->mdim * 4) |
          fsgd_wire_put(b, a->adam.v, a->mdim * 4);
    rc |= fsgd_wire_u32(b, fsgd_crc32c(0, b->p, b->n));
    return rc ? FSGD_E_NOMEM : 0;
}

static int ckpt_write(agg_t *a)
{
    const char *path = a->job->checkpoint;
    if (!*path)
        return 0;
    fsgd_wire_buf_t b = {0};
    if (ckpt_encode(a, a->seconds_before + now_s() - a->t0, &b) < 0) {
        free(b.p);
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
    }
    /* Through fsgd/outfile.h: a temporary file renamed into place, never over
     * a device or through a link; removed on any error. */
    fsgd_outfile_t o;
    char e[FSGD_OUTFILE_PATH_MAX + 256];
    int rc = fsgd_outfile_open(&o, path, e, sizeof e);
    if (rc == 0) {
        size_t off = 0;
        while (off < b.n && rc == 0) {
            ssize_t w = write(o.fd, b.p + off, b.n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                rc = fsgd_err_fmt(e, sizeof e, FSGD_E_IO, "write failed: %s", strerror(errno));
            else
                off += (size_t)w;
        }
        if (rc == 0)
            rc = fsgd_outfile_commit(&o, e, sizeof e);
        else
            fsgd_outfile_abort(&o);
    }
    free(b.p);
    if (rc < 0)
        return fsgd_err_fmt(a->err, a->errsz, rc, "checkpoint: %s", e);
    return 0;
}

/* Restores a checkpoint written for the same data from its bytes p[0, len)
 * (path names it in messages); returns 1 when resumed. The state of a is
 * changed only as far as the bytes were read. */
static int ckpt_parse(agg_t *a, const char *path, const uint8_t *p, size_t len)
{
    char e[256];
    int rc = 0;
    size_t off = 0;
    fsgd_wire_state_t s = {0};
    if (p && len >= 8 && !memcmp(p, "FSGC", 4) && fsgd_le_get32(p + 4) == 1) {
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_VERSION,
                          "checkpoint '%s' is in the version 1 format (magic FSGC) of an older fsgd; this one reads "
                          "version %d (magic %s): finish that job with the fsgd that wrote it, or remove the file "
                          "to start over (fsgd run --fresh)",
                          path, CKPT_VERSION, CKPT_MAGIC);
        goto out;
    }
    if (!p || len < CKPT_HEADER + 4 || memcmp(p, CKPT_MAGIC, 8) || fsgd_le_get32(p + 8) != CKPT_VERSION) {
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_FORMAT, "checkpoint '%s': not an fsgd checkpoint (v%d)", path,
                          CKPT_VERSION);
        goto out;
    }
    if (fsgd_le_get32(p + len - 4) != fsgd_crc32c(0, p, len - 4)) {
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_CRC, "checkpoint '%s': crc32c mismatch at byte %zu", path,
                          len - 4);
        goto out;
    }
    len -= 4;
    uint32_t gen = fsgd_le_get32(p + 12);
    uint64_t step = fsgd_le_get64(p + 16), rows = fsgd_le_get64(p + 24), mdim = fsgd_le_get64(p + 32);
    off = CKPT_HEADER;
    if (rows != a->s->dataset_rows || mdim != a->mdim) {
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE,
                          "checkpoint '%s' is for other data (%llu rows, %llu weights; topic has %llu rows, %llu "
                          "weights): remove it to start over",
                          path, (unsigned long long)rows, (unsigned long long)mdim,
                          (unsigned long long)a->s->dataset_rows, (unsigned long long)a->mdim);
        goto out;
    }
    if ((rc = fsgd_wire_state_get(p, len, &off, &s, e, sizeof e)) < 0) {
        rc = fsgd_err_fmt(a->err, a->errsz, rc, "checkpoint '%s': %s", path, e);
        goto out;
    }
    if (s.nparts != a->st.nparts) {
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE, "checkpoint '%s': %u partitions, topic has %u", path,
                          s.nparts, a->st.nparts);
        goto out;
    }
    for (uint32_t i = 0; i < s.nparts; i++)
        if (s.start[i] != a->st.start[i] || s.end[i] != a->st.end[i]) {
            rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE, "checkpoint '%s': partition %u range differs", path, i);
            goto out;
        }
    if (len - off < 8 + 8 + 8 + 8 + 8 + 4) {
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_TRUNCATED, "checkpoint '%s': truncated at byte %zu", path, off);
        goto out;
    }
    uint64_t t = fsgd_le_get64(p + off);
    a->rows_epoch = fsgd_le_get64(p + off + 8);
    a->loss_epoch = fsgd_le_getf64(p + off + 16);
    a->s->rows_total = fsgd_le_get64(p + off + 24);
    a->seconds_before = fsgd_le_getf64(p + off + 32);
    uint32_t ne = fsgd_le_get32(p + off + 40);
    off += 44;
    if (ne > 64 || len - off < (size_t)ne * 68 + a->mdim * 12) {
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_TRUNCATED, "checkpoint '%s': truncated at byte %zu", path, off);
        goto out;
    }
    a->s->n_epochs = (int)ne;
    for (uint32_t i = 0; i < ne; i++) {
        fsgd_agg_epoch_t *ep = &a->s->epochs[i];
        memset(ep, 0, sizeof *ep);
        ep->epoch = (int)fsgd_le_get32(p + off);
        ep->seconds = fsgd_le_getf64(p + off + 4);
        ep->train_loss = fsgd_le_getf64(p + off + 12);
        ep->rows = fsgd_le_get64(p + off + 20);
        ep->test.n = (size_t)fsgd_le_get64(p + off + 28);
        ep->test.auc = fsgd_le_getf64(p + off + 36);
        ep->test.logloss = fsgd_le_getf64(p + off + 44);
        ep->test.loss = fsgd_le_getf64(p + off + 52);
        ep->test.accuracy = fsgd_le_getf64(p + off + 60);
        ep->seconds_from_step1 = -1; /* measured by the aggregator before the restart */
        off += 68;
    }
    for (int arr = 0; arr < 3; arr++) {
        float *dst = arr == 0 ? a->adam.theta : arr == 1 ? a->adam.m : a->adam.v;
        for (uint64_t i = 0; i < a->mdim; i++) {
            dst[i] = fsgd_le_getf32(p + off);
            off += 4;
        }
    }
    if (off != len) { /* the layout is exact: anything more is another format */
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_FORMAT, "checkpoint '%s': %zu bytes past the end at byte %zu",
                          path, len - off, off);
        goto out;
    }
    a->adam.t = t;
    fsgd_wire_state_copy(&a->st, &s);
    a->step = step;
    a->gen = gen;
    a->s->resumed_from_step = (int)step;
    rc = 1;
out:
    fsgd_wire_state_free(&s);
    return rc;
}

/* Restores a checkpoint written for the same data; returns 1 when resumed,
 * 0 when there is none. */
static int ckpt_load(agg_t *a)
{
    const char *path = a->job->checkpoint;
    if (!*path)
        return 0;
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return 0;
    if (!S_ISREG(sb.st_mode)) /* never read a FIFO or device, never follow a link */
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "checkpoint '%s' exists and is not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_IO, "checkpoint '%s': %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = n > 0 ? malloc((size_t)n) : NULL;
    int ok = p && fread(p, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    int rc = ckpt_parse(a, path, ok ? p : NULL, ok ? (size_t)n : 0);
    free(p);
    return rc;
}

int fsgd_agg_ckpt_check(const uint8_t *p, size_t len, uint64_t dataset_rows, uint64_t mdim, const fsgd_wire_state_t *expect,
                   uint8_t **reenc, size_t *reenc_len, char *err, size_t errsz)
{
    if (mdim > ((uint64_t)1 << 32))
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "checkpoint: %llu weights", (unsigned long long)mdim);
    fsgd_agg_stats_t *st = calloc(1, sizeof *st);
    agg_t *a = calloc(1, sizeof *a);
    float *w = calloc(mdim ? 3 * (size_t)mdim : 1, sizeof *w);
    int rc = st && a && w ? 0 : fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
    if (!rc) {
        a->s = st;
        a->err = err;
        a->errsz = errsz;
        a->mdim = mdim;
        st->dataset_rows = dataset_rows;
        a->adam.dim = mdim;
        a->adam.theta = w;
        a->adam.m = w + mdim;
        a->adam.v = w + 2 * mdim;
        rc = fsgd_wire_state_copy(&a->st, expect);
        if (rc < 0)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
    }
    if (!rc)
        rc = ckpt_parse(a, "<memory>", p, len);
    if (rc == 1 && reenc) {
        fsgd_wire_buf_t b = {0};
        if (ckpt_encode(a, a->seconds_before, &b) < 0) {
            free(b.p);
            rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
        } else {
            *reenc = b.p;
            *reenc_len = b.n;
        }
    }
    if (a)
        fsgd_wire_state_free(&a->st);
    free(a);
    free(st);
    free(w);
    return rc;
}

/* --- model topic --- */

/* How often a coded delta carries the replica's checksum (steps). */
#define FSGD_AGG_REPLICA_CHECK_EVERY 64

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* The step's update as a coded delta (kind 5): Δ = θ − ρ over the touched
 * keys, at most as many entries as the mean applied gradient message held,
 * so a worker never receives more than it sends. */
static int put_coded_delta(agg_t *a, const uint32_t *keys, size_t n)
{
    double t0 = now_s();
    size_t budget = a->napplied ? (size_t)(a->up_entries_step / a->napplied) : 0;
    size_t cap = fsgd_downlink_bound(a->down, n);
    if (cap > a->dmsg_cap) {
        uint8_t *nm = realloc(a->dmsg, cap);
        if (!nm)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory for the downlink");
        a->dmsg = nm;
        a->dmsg_cap = cap;
    }
    size_t len = 0;
    FSGD_TRY(fsgd_downlink_encode(a->down, a->adam.theta, keys, n, budget ? budget : 1, a->dmsg, cap, &len, a->err,
                                  a->errsz));
    uint32_t flags = 0, check = 0;
    if ((a->step % FSGD_AGG_REPLICA_CHECK_EVERY) == 0) {
        flags |= FSGD_WIRE_CDELTA_CHECK;
        check = fsgd_downlink_checksum(fsgd_downlink_replica(a->down), a->mdim);
        a->s->replica_checks++;
    }
    qsort(a->applied, a->napplied, sizeof *a->applied, cmp_u32);
    a->s->t_down_encode += now_s() - t0;
    return fsgd_wire_cdelta_put(&a->buf, flags, check, a->applied, (uint32_t)a->napplied, a->dmsg, (uint32_t)len);
}

/* job->downlink: "full" sends float32 values; "auto" compresses with the
 * uplink codec when that is lossy (a lossless codec gets the exact values it
 * promises); anything else is a lossy codec spec of its own. */
static int downlink_setup(agg_t *a)
{
    const char *spec = a->job->downlink;
    if (!strcmp(spec, "full"))
        spec = NULL;
    else if (!strcmp(spec, "auto") || !spec[0]) {
        char e[256];
        fsgd_codec_t *c = fsgd_codec_new(a->job->codec, a->mdim, e, sizeof e);
        if (!c)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "codec: %s", e);
        spec = fsgd_codec_is_lossless(c) ? NULL : a->job->codec;
        fsgd_codec_destroy(c);
    }
    snprintf(a->s->downlink, sizeof a->s->downlink, "%s", spec ? spec : "full");
    if (!spec)
        return 0;
    char e[256];
    a->down = fsgd_downlink_new(spec, a->mdim, a->adam.theta, e, sizeof e);
    if (!a->down)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "downlink '%s': %s", spec, e);
    return 0;
}

static int publish(agg_t *a, int snapshot, int final, const uint32_t *keys, size_t n)
{
    a->buf.n = 0;
    int rc = fsgd_wire_state_put(&a->buf, &a->st);
    if (snapshot) {
        rc = rc ? rc
                : fsgd_wire_model_put(&a->buf, (uint32_t)a->job->model, a->job->bias ? 1 : 0, (float)a->job->bias_value,
                                 a->dim, a->adam.theta, a->mdim);
        if (a->down)
            fsgd_downlink_sync(a->down, a->adam.theta); /* every worker now holds θ exactly */
    } else if (a->down) {
        if (!rc)
            FSGD_TRY(put_coded_delta(a, keys, n));
    } else {
        if (fsgd_sparse_reserve(&a->dec, n) < 0)
            rc = FSGD_E_NOMEM;
        for (size_t i = 0; !rc && i < n; i++)
            a->dec.vals[i] = a->adam.theta[keys[i]];
        if (!rc)
            FSGD_TRY(fsgd_wire_pdelta_put(&a->buf, keys, a->dec.vals, n, a->err, a->errsz));
    }
    if (rc)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory for the model message");
    fsgd_kframe_t h = {.kind = snapshot ? FSGD_KMSG_SNAPSHOT : a->down ? FSGD_KMSG_DELTA_CODED : FSGD_KMSG_DELTA_PACKED,
                       .flags = final ? FSGD_KFLAG_FINAL : 0, .gen = a->gen, .sender = 0, .step = a->step};
    uint64_t before = a->s->bytes_model;
    /* keys for the compacted model topic (fsgd_dist_topics_create) */
    char key[32];
    snprintf(key, sizeof key, snapshot ? "snapshot" : "delta.%llu",
             (unsigned long long)(a->step % (uint64_t)(a->job->snapshot_every > 0 ? a->job->snapshot_every : 1)));
    FSGD_TRY(fsgd_kbus_send_keyed(a->prod, a->tmodel, 0, a->job->name, &h, key, a->buf.p, a->buf.n, 0,
                                  &a->s->bytes_model, a->err, a->errsz));
    a->s->bytes_down += (a->s->bytes_model - before) * (a->nlive ? a->nlive : 1);
    if (!snapshot) {
        a->s->down_msgs++;
        a->s->down_bytes_msg += a->s->bytes_model - before;
    }
    rd_kafka_poll(a->prod, 0);
    return 0;
}

/* --- NAME.ctl status events (best effort: a lost event never stops the job) --- */

static void fsgd_ctl_begin(agg_t *a, const char *event)
{
    fsgd_cj_begin(&a->cj, event, a->job->name);
    fsgd_cj_u64(&a->cj, "gen", a->gen);
}

static void fsgd_ctl_emit(agg_t *a, const char *event)
{
    if (fsgd_cj_end(&a->cj) == 0)
        fsgd_ctl_send(a->prod, a->tctl, a->job->name, event, &a->cj);
}

static void fsgd_ctl_member(agg_t *a, const char *event, uint32_t worker)
{
    fsgd_ctl_begin(a, event);
    fsgd_cj_u64(&a->cj, "step", a->step);
    fsgd_cj_u64(&a->cj, "worker", worker);
    fsgd_cj_u32s(&a->cj, "live", a->live, a->nlive);
    if (!strcmp(event, "worker_dropped"))
        fsgd_cj_u64(&a->cj, "timeout_ms", (uint64_t)a->job->step_timeout_ms);
    fsgd_ctl_emit(a, event);
}

/* --- start-up: wait for a settled consumer-group assignment --- */

/* Why: workers answer step 1 as soon as they hold any assignment. When the
 * group is still forming (a worker joins after the first members got their
 * partitions, or the leader assigned before it saw the topic's partitions),
 * step 1 completes and the group then revokes and reassigns everything: for
 * the ~3 s of that rebalance every worker answers with no partitions and the
 * steps carry no rows (empty_steps). So the aggregator opens the job only
 * once the workers' own reports on NAME.ctl (worker_assignment, sent from
 * their rebalance callbacks) show at least expected_workers workers whose
 * latest partition sets are disjoint and cover every partition that still
 * has rows: a group in mid-rebalance has overlapping sets (the old owners
 * have not been told yet) or holes (revoked, not yet reassigned). */
static member_t *member_find(agg_t *a, uint32_t id)
{
    for (size_t i = 0; i < a->nmem; i++)
        if (a->mem[i].id == id)
            return &a->mem[i];
    return NULL;
}

/* Applies one NAME.ctl event: worker_assignment makes (or updates) a
 * member, worker_leave forgets one. Anything else is ignored. */
static void ctl_apply(agg_t *a, const rd_kafka_message_t *m)
{
    char ev[32];
    double wid;
    size_t np = 0;
    uint32_t P = a->st.nparts;
    const char *j = m->payload;
    if (m->err || !j || !fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) ||
        (strcmp(ev, "worker_assignment") && strcmp(ev, "worker_leave")) ||
        !fsgd_ctl_get_num(j, m->len, "worker", &wid) || !(wid >= 0 && wid <= UINT32_MAX))
        return;
    uint32_t *tmp = malloc((P + 1) * sizeof *tmp);
    if (!tmp || !fsgd_ctl_get_u32s(j, m->len, "partitions", tmp, P + 1, &np)) {
        free(tmp);
        return;
    }
    uint32_t id = (uint32_t)wid;
    member_t *w = member_find(a, id);
    if (!strcmp(ev, "worker_leave")) {
        if (w) {
            free(w->own);
            *w = a->mem[--a->nmem];
        }
        free(tmp);
        return;
    }
    if (!w) {
        uint8_t *own = a->nmem < MAX_MEMBERS ? calloc(P ? P : 1, 1) : NULL;
        member_t *nm = own ? realloc(a->mem, (a->nmem + 1) * sizeof *nm) : NULL;
        if (!own || !nm) {
            /* (a flood of made-up workers must not grow memory without end) */
            free(own);
            if (nm)
                a->mem = nm;
            free(tmp);
            return;
        }
        a->mem = nm;
        w = &a->mem[a->nmem++];
        w->id = id;
        w->own = own;
    }
    memset(w->own, 0, P);
    for (size_t i = 0; i < np; i++)
        if (tmp[i] < P)
            w->own[tmp[i]] = 1;
    w->seq = ++a->ctl_seq;
    free(tmp);
}

/* Reads what NAME.ctl has now (waiting up to timeout_ms for the first
 * message); returns how many events were read. */
static int ctl_drain(agg_t *a, int timeout_ms)
{
    int n = 0;
    rd_kafka_message_t *m;
    while (a->ctl_c && (m = rd_kafka_consumer_poll(a->ctl_c, n ? 0 : timeout_ms))) {
        ctl_apply(a, m);
        rd_kafka_message_destroy(m);
        n++;
    }
    return n;
}

/* 1 when w is the latest reporter of at least one partition: it still holds
 * rows. A worker that died keeps its last report, but once the group has
 * moved its partitions the new owners' later reports supersede it. */
static int member_holds(const agg_t *a, const member_t *w)
{
    for (uint32_t p = 0; p < a->st.nparts; p++) {
        if (!w->own[p])
            continue;
        int newer = 0;
        for (size_t k = 0; k < a->nmem && !newer; k++)
            newer = a->mem[k].seq > w->seq && a->mem[k].own[p];
        if (!newer)
            return 1;
    }
    return 0;
}

/* The ids of the members that hold partitions and have not answered this
 * step, as text ("2, 5"); returns how many. */
static size_t awaited(const agg_t *a, char *out, size_t cap)
{
    size_t n = 0, used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < a->nmem; i++) {
        const member_t *w = &a->mem[i];
        int answered = 0;
        for (size_t k = 0; k < a->ngot && !answered; k++)
            answered = a->got[k] == w->id;
        if (answered || !member_holds(a, w))
            continue;
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%u", n ? ", " : "", w->id);
        n++;
    }
    return n;
}

/* Why: workers answer step 1 as soon as they hold any assignment. When the
 * group is still forming (a worker joins after the first members got their
 * partitions, or the leader assigned before it saw the topic's partitions),
 * step 1 completes and the group then revokes and reassigns everything: for
 * the ~3 s of that rebalance every worker answers with no partitions and the
 * steps carry no rows (empty_steps). So the aggregator opens the job only
 * once the workers' own reports on NAME.ctl (worker_assignment, sent from
 * their rebalance callbacks) show at least expected_workers workers whose
 * latest partition sets are disjoint and cover every partition that still
 * has rows: a group in mid-rebalance has overlapping sets (the old owners
 * have not been told yet) or holes (revoked, not yet reassigned). The same
 * reports make the membership that gradients are checked against. */
/* Seconds a group that covers every partition must stay unchanged before
 * the job starts with fewer workers than expected: longer than the
 * consumers' session timeout (6 s, KAFKA_FORMAT.md), after which a member
 * that died is out of the group and its partitions have moved. */
#define SETTLE_WITHOUT_S 8.0

static int wait_assignment(agg_t *a, double timeout_s)
{
    double t0 = now_s(), last_log = t0;
    a->s->assignment_settled = 0;
    uint32_t P = a->st.nparts;
    uint32_t *owners = calloc(P + 1, sizeof *owners);
    if (!owners)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    double last_change = t0;
    int covered = 0; /* the latest reports are disjoint and cover every partition with rows */
    while (now_s() - t0 < timeout_s) {
        int n = ctl_drain(a, 20);
        rd_kafka_poll(a->prod, 0);
        double t = now_s();
        if (t - last_log >= 10) {
            last_log = t;
            agg_log(a, "waiting for workers: %zu of %d expected have reported their partitions on %s (%.0f s; "
                       "starting anyway after %.0f s)",
                    a->nmem, a->expected, a->tctl, t - t0, timeout_s);
        }
        if (!n) {
            /* Fewer workers than expected, but the group has been stable
             * longer than a session timeout: the others died or never came
             * (a consumer that left is out of the group by then). */
            if (covered && a->nmem < (size_t)a->expected && t - last_change >= SETTLE_WITHOUT_S) {
                agg_log(a, "starting with %zu of %d expected workers: the group has held every partition for "
                           "%.0f s without the others",
                        a->nmem, a->expected, t - last_change);
                a->s->assignment_settled = 1;
                break;
            }
            continue;
        }
        last_change = t;
        uint32_t holders = 0;
        memset(owners, 0, P * sizeof *owners);
        for (size_t k = 0; k < a->nmem; k++) {
            int any = 0;
            for (uint32_t p = 0; p < P; p++)
                if (a->mem[k].own[p]) {
                    owners[p]++;
                    any = 1;
                }
            holders += any;
        }
        covered = holders > 0;
        for (uint32_t p = 0; p < P && covered; p++)
            covered = a->st.pos[p] >= a->st.end[p] ? owners[p] <= 1 : owners[p] == 1;
        if (covered && a->nmem >= (size_t)a->expected) {
            a->s->assignment_settled = 1;
            break;
        }
    }
    a->s->assignment_wait_s = now_s() - t0;
    free(owners);
    return 0;
}

/* --- the barrier --- */

static int in_set(const uint32_t *s, size_t n, uint32_t v)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == v)
            return 1;
    return 0;
}

static int add_set(uint32_t **s, size_t *n, size_t *cap, uint32_t v)
{
    if (in_set(*s, *n, v))
        return 0;
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        uint32_t *ns = realloc(*s, nc * sizeof *ns);
        if (!ns)
            return FSGD_E_NOMEM;
        *s = ns;
        *cap = nc;
    }
    (*s)[(*n)++] = v;
    return 0;
}

static void begin_step(agg_t *a)
{
    a->ngot = 0;
    a->napplied = 0;
    a->up_entries_step = 0;
    memset(a->claimed, 0, a->st.nparts);
    memcpy(a->newpos, a->st.pos, a->st.nparts * sizeof *a->newpos);
    a->rows_step = 0;
    a->loss_step = 0;
    a->step_start = now_s();
    fsgd_kasm_prune(a->as, a->step + 1);
}

/* A consumer error on NAME.grads: fatal ones (librdkafka's fatal state, a
 * topic or authorization that is gone) end the job with FSGD_E_KAFKA;
 * transient ones (a broker down, a timeout) are retried by librdkafka,
 * counted, and each kind logged once. */
static int consumer_error(agg_t *a, const rd_kafka_message_t *m)
{
    rd_kafka_resp_err_t e = m->err;
    if (e == RD_KAFKA_RESP_ERR__PARTITION_EOF)
        return 0;
    char fatal[256];
    if (rd_kafka_fatal_error(a->grads_c, fatal, sizeof fatal))
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_KAFKA, "%s consumer: fatal: %s", a->tgrads, fatal);
    switch (e) {
    case RD_KAFKA_RESP_ERR__FATAL:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_KAFKA, "%s consumer: %s", a->tgrads,
                            rd_kafka_message_errstr(m));
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
    case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET: {
        /* Gradients were dropped by the broker before they were read (a
         * burst pushed them past retention or the embedded cluster's 5 MiB).
         * Nothing applied is lost: read on from what is left, and workers
         * send a gradient again when its step is not answered. */
        /* The partition's fetcher stopped (auto.offset.reset=error): assign
         * again, that partition from its log start, the others from where
         * they are. */
        rd_kafka_topic_partition_list_t *l = NULL;
        rd_kafka_resp_err_t ae = rd_kafka_assignment(a->grads_c, &l);
        if (!ae)
            ae = rd_kafka_position(a->grads_c, l);
        for (int i = 0; !ae && i < l->cnt; i++)
            if (l->elems[i].partition == m->partition || l->elems[i].offset < 0)
                l->elems[i].offset = l->elems[i].partition == m->partition ? RD_KAFKA_OFFSET_BEGINNING
                                                                            : RD_KAFKA_OFFSET_END;
        if (!ae)
            ae = rd_kafka_assign(a->grads_c, l);
        if (l)
            rd_kafka_topic_partition_list_destroy(l);
        if (ae)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_KAFKA, "%s consumer: %s, and reading on from the log "
                                "start failed: %s", a->tgrads, rd_kafka_message_errstr(m), rd_kafka_err2str(ae));
        a->s->consumer_errors++;
        agg_log(a, "%s [%d]: messages were dropped by the broker before they were read (%s): reading on from the "
                   "log start; workers send unanswered gradients again",
                a->tgrads, (int)m->partition, rd_kafka_message_errstr(m));
        return 0;
    }
    default:
        break;
    }
    a->s->consumer_errors++;
    for (int i = 0; i < a->n_kerr; i++)
        if (a->kerr_seen[i] == (int)e)
            return 0;
    if (a->n_kerr < 32)
        a->kerr_seen[a->n_kerr++] = (int)e;
    agg_log(a, "%s consumer: %s (%s; librdkafka retries; counted in metrics messages.consumer_errors, this kind "
               "logged once)",
            a->tgrads, rd_kafka_message_errstr(m), rd_kafka_err2name(e));
    return 0;
}

/* The largest value a genuine gradient of `rows` rows can hold
 * (FSGD_AGG_GRAD_SLACK in fsgd/dist.h). */
static double value_bound(const agg_t *a, uint64_t rows)
{
    double l = a->job->model == FSGD_LOSS_SQUARED ? 1 + a->ymax : 1;
    return (double)rows * a->xmax * l * FSGD_AGG_GRAD_SLACK;
}

/* Takes one message from NAME.grads, or drops it with a reason. The order of
 * the checks is the order of trust: a frame at all, from a member, for the
 * step in progress (before anything is stored), then what it claims. */
static int handle_grad(agg_t *a, const rd_kafka_message_t *m)
{
    if (m->err)
        return consumer_error(a, m);
    fsgd_klat_add(&a->lat_grads, m);
    fsgd_kframe_t f;
    char e[256];
    a->s->bytes_up += m->len;
    if (fsgd_kframe_parse(m->payload, m->len, &f, NULL, e, sizeof e) < 0) {
        reject(a, FSGD_AGG_REJ_CORRUPT, "offset %lld: %s", (long long)m->offset, e);
        return 0;
    }
    if (f.kind != FSGD_KMSG_GRAD) {
        reject(a, FSGD_AGG_REJ_CORRUPT, "offset %lld: a frame of kind %u, not a gradient", (long long)m->offset,
               f.kind);
        return 0;
    }
    if (f.body_len > FSGD_KBUS_CHUNK_MAX) {
        reject(a, FSGD_AGG_REJ_OVERSIZE, "offset %lld: sender %u: a chunk of %u bytes; fsgd writes at most %u",
               (long long)m->offset, f.sender, f.body_len, FSGD_KBUS_CHUNK_MAX);
        return 0;
    }
    if (!member_find(a, f.sender)) {
        /* its worker_assignment may be on its way: read NAME.ctl first */
        ctl_drain(a, 0);
        if (!member_find(a, f.sender)) {
            reject(a, FSGD_AGG_REJ_FORGED,
                   "sender %u is not a member of job %s (no worker_assignment from it on %s; %zu members)", f.sender,
                   a->job->name, a->tctl, a->nmem);
            return 0;
        }
    }
    if (f.gen != a->gen) {
        if (f.gen < a->gen)
            reject(a, FSGD_AGG_REJ_STALE, "sender %u: generation %u, this aggregator's is %u", f.sender, f.gen,
                   a->gen);
        else
            reject(a, FSGD_AGG_REJ_FORGED, "sender %u: generation %u is newer than this aggregator's %u", f.sender,
                   f.gen, a->gen);
        return 0;
    }
    if (f.step != a->step + 1) {
        /* workers answer exactly the step after the last model message, so
         * nothing else is ever kept (reassembly holds one step at most) */
        if (f.step <= a->step && fsgd_kasm_completed(a->as, &f)) /* e.g. a produce retried by the client */
            reject(a, FSGD_AGG_REJ_DUPLICATE, "sender %u step %llu chunk %u/%u: a copy of a message taken before",
                   f.sender, (unsigned long long)f.step, f.chunk, f.nchunks);
        else if (f.step <= a->step)
            reject(a, FSGD_AGG_REJ_STALE, "sender %u: step %llu, already applied up to step %llu", f.sender,
                   (unsigned long long)f.step, (unsigned long long)a->step);
        else
            reject(a, FSGD_AGG_REJ_FUTURE, "sender %u: step %llu while step %llu is in progress", f.sender,
                   (unsigned long long)f.step, (unsigned long long)a->step + 1);
        return 0;
    }
    const uint8_t *body;
    size_t len;
    int r = fsgd_kasm_feed(a->as, &f, &body, &len, e, sizeof e);
    if (r == FSGD_KASM_DUP) {
        reject(a, FSGD_AGG_REJ_DUPLICATE, "sender %u step %llu chunk %u/%u seen before", f.sender,
               (unsigned long long)f.step, f.chunk, f.nchunks);
        return 0;
    }
    if (r == FSGD_E_FORMAT) {
        /* Its chunks disagree with what is pending under the same key: the
         * newest frame wins, so junk left by someone else cannot block the
         * genuine message when it comes. */
        reject(a, FSGD_AGG_REJ_CORRUPT, "%s (the pending chunks are dropped)", e);
        fsgd_kasm_forget(a->as, &f);
        r = fsgd_kasm_feed(a->as, &f, &body, &len, e, sizeof e);
    }
    if (r == FSGD_E_NOMEM)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: %s", e);
    if (r < 0) {
        reject(a, r == FSGD_E_RANGE ? FSGD_AGG_REJ_OVERSIZE : FSGD_AGG_REJ_CORRUPT, "%s", e);
        return 0;
    }
    a->s->held_bytes_max = fsgd_kasm_held_max(a->as);
    if (r != FSGD_KASM_DONE)
        return 0;
    if (in_set(a->got, a->ngot, f.sender)) {
        reject(a, FSGD_AGG_REJ_DUPLICATE, "sender %u already answered step %llu", f.sender,
               (unsigned long long)f.step);
        return 0;
    }
    fsgd_wire_grad_t g;
    if (fsgd_wire_grad_get(body, len, a->st.nparts, &g, e, sizeof e) < 0) {
        free(g.ranges);
        fsgd_kasm_forget(a->as, &f); /* the genuine message may still come */
        reject(a, FSGD_AGG_REJ_CORRUPT, "sender %u step %llu: %s", f.sender, (unsigned long long)f.step, e);
        return 0;
    }
    int reason = -1;
    char why[300] = "";
    if (g.epoch != a->st.epoch) {
        reason = FSGD_AGG_REJ_FORGED;
        snprintf(why, sizeof why, "claims epoch %u, the job is in epoch %u", g.epoch, a->st.epoch);
    } else if (g.rows == 0 && g.codec_len) {
        reason = FSGD_AGG_REJ_FORGED;
        snprintf(why, sizeof why, "0 rows but a gradient of %u bytes", g.codec_len);
    } else if (g.loss_sum < 0 || g.t_grad < 0 || g.t_encode < 0 || g.raw_entries > a->mdim) {
        reason = FSGD_AGG_REJ_FORGED;
        snprintf(why, sizeof why, "loss %g, times %g/%g s or %llu raw entries (of %llu weights) are impossible",
                 g.loss_sum, g.t_grad, g.t_encode, (unsigned long long)g.raw_entries, (unsigned long long)a->mdim);
    }
    if (reason >= 0) {
        free(g.ranges);
        fsgd_kasm_forget(a->as, &f);
        reject(a, reason, "sender %u step %llu: %s", f.sender, (unsigned long long)f.step, why);
        return 0;
    }
    /* A member that sent a well-formed gradient for the step has answered it,
     * whether its ranges are taken or not (a rebalance can make them stale). */
    int ok = 1;
    uint64_t rows = 0;
    for (uint32_t i = 0; i < g.nranges && ok; i++) {
        const fsgd_wire_range_t *rg = &g.ranges[i];
        if (a->claimed[rg->part] || rg->start != a->st.pos[rg->part] || rg->end > a->st.end[rg->part])
            ok = 0;
        else {
            uint64_t s0 = a->st.start[rg->part];
            rows += a->rows_at[rg->part][rg->end - s0] - a->rows_at[rg->part][rg->start - s0];
        }
        for (uint32_t j = 0; j < i && ok; j++)
            if (g.ranges[j].part == rg->part)
                ok = 0;
    }
    if (ok && rows != g.rows) {
        free(g.ranges);
        fsgd_kasm_forget(a->as, &f);
        reject(a, FSGD_AGG_REJ_FORGED, "sender %u step %llu: claims %llu rows, its ranges hold %llu", f.sender,
               (unsigned long long)f.step, (unsigned long long)g.rows, (unsigned long long)rows);
        return 0;
    }
    if (ok && g.rows && !g.codec_len) {
        free(g.ranges);
        fsgd_kasm_forget(a->as, &f);
        reject(a, FSGD_AGG_REJ_FORGED, "sender %u step %llu: %llu rows but no gradient", f.sender,
               (unsigned long long)f.step, (unsigned long long)g.rows);
        return 0;
    }
    if (ok && g.codec_len) {
        double t0 = now_s();
        int rc = fsgd_codec_decode(g.codec, g.codec_len, a->mdim, &a->dec, e, sizeof e);
        a->s->t_decode += now_s() - t0;
        if (rc < 0) {
            free(g.ranges);
            fsgd_kasm_forget(a->as, &f);
            reject(a, FSGD_AGG_REJ_CORRUPT, "sender %u step %llu: gradient: %s", f.sender, (unsigned long long)f.step,
                   e);
            return 0;
        }
        double bound = value_bound(a, g.rows);
        for (size_t i = 0; i < a->dec.n; i++)
            if (!isfinite(a->dec.vals[i]) || fabs((double)a->dec.vals[i]) > bound) {
                free(g.ranges);
                fsgd_kasm_forget(a->as, &f);
                reject(a, FSGD_AGG_REJ_FORGED,
                       "sender %u step %llu: value %g of key %u is beyond the bound %g for %llu rows (rows x max|x| "
                       "%g x %g, FSGD_AGG_GRAD_SLACK)",
                       f.sender, (unsigned long long)f.step, (double)a->dec.vals[i], a->dec.keys[i], bound,
                       (unsigned long long)g.rows, a->xmax, FSGD_AGG_GRAD_SLACK);
                return 0;
            }
    }
    add_set(&a->got, &a->ngot, &a->cap_got, f.sender);
    if (!in_set(a->live, a->nlive, f.sender) && add_set(&a->live, &a->nlive, &a->cap_live, f.sender) == 0)
        fsgd_ctl_member(a, "worker_joined", f.sender);
    if (!ok) {
        /* a partition claimed twice (a rebalance) or from a stale position */
        reject(a, FSGD_AGG_REJ_CONFLICT, "sender %u step %llu: a range starts off its partition's position or "
                                          "another gradient of the step took the partition",
               f.sender, (unsigned long long)f.step);
        free(g.ranges);
        return 0;
    }
    if (g.codec_len && fsgd_reducer_add(a->red, a->dec.keys, a->dec.vals, a->dec.n) < 0) {
        free(g.ranges);
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory reducing a gradient");
    }
    for (uint32_t i = 0; i < g.nranges; i++) {
        a->claimed[g.ranges[i].part] = 1;
        a->newpos[g.ranges[i].part] = g.ranges[i].end;
    }
    a->rows_step += g.rows;
    a->loss_step += g.loss_sum;
    a->s->t_grad += g.t_grad;
    a->s->t_encode += g.t_encode;
    a->s->raw_bytes += 8 * g.raw_entries;
    a->s->codec_bytes += g.codec_len;
    a->s->grads_accepted++;
    a->s->up_msgs++;
    if (g.codec_len >= 20)
        a->up_entries_step += fsgd_le_get32(g.codec + 16); /* entries in the message (FORMAT.md header) */
    add_set(&a->applied, &a->napplied, &a->cap_applied, f.sender);
    free(g.ranges);
    return 0;
}

static int evaluate(agg_t *a, fsgd_metrics_t *out)
{
    memset(out, 0, sizeof *out);
    if (!a->have_test)
        return 0;
    fsgd_model_t m = {.kind = a->job->model, .dim = a->dim, .has_bias = a->job->bias,
                      .bias = (float)a->job->bias_value, .w = a->adam.theta};
    size_t n = a->test.n_rows;
    double *margin = malloc((n ? n : 1) * sizeof *margin);
    if (!margin)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "evaluate: out of memory");
    for (size_t r = 0; r < n; r++) {
        uint64_t lo = a->test.row_ptr[r];
        margin[r] = fsgd_model_margin(&m, a->test.col + lo, a->test.val + lo, a->test.row_ptr[r + 1] - lo);
    }
    *out = fsgd_metrics_compute(a->job->model, margin, a->test.label, n);
    free(margin);
    return 0;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void latency_stats(agg_t *a)
{
    a->s->hop_grads_ms_p50 = fsgd_klat_quantile(&a->lat_grads, 0.5);
    a->s->hop_grads_ms_p99 = fsgd_klat_quantile(&a->lat_grads, 0.99);
    if (!a->n_step_ms)
        return;
    double *c = malloc(a->n_step_ms * sizeof *c);
    if (!c)
        return;
    memcpy(c, a->step_ms, a->n_step_ms * sizeof *c);
    qsort(c, a->n_step_ms, sizeof *c, cmp_d);
    double sum = 0;
    for (size_t i = 0; i < a->n_step_ms; i++)
        sum += c[i];
    a->s->step_ms_mean = sum / a->n_step_ms;
    a->s->step_ms_p50 = c[a->n_step_ms / 2];
    a->s->step_ms_p99 = c[(size_t)(0.99 * (a->n_step_ms - 1))];
    free(c);
}

/* Applies the gathered step; sets *done at the end of the last epoch. */
static int apply_step(agg_t *a, int *done, fsgd_agg_progress_fn progress, void *ctx)
{
    double t0 = now_s();
    a->s->t_wait += a->step_wait;
    uint64_t R = a->rows_step;
    size_t nt = 0;
    if (R > 0) {
        FSGD_TRY(fsgd_reducer_take_step(a->red, 1.0 / (double)R, a->job->l2, a->adam.theta, &a->g));
        fsgd_adam_step(&a->adam, a->g.keys, a->g.vals, a->g.n);
        nt = a->g.n;
        a->s->adam_steps++;
        a->s->last_loss = a->loss_step / (double)R;
    } else {
        FSGD_TRY(fsgd_reducer_take(a->red, 1.0, &a->g));
        a->g.n = 0;
        a->s->empty_steps++;
    }
    memcpy(a->st.pos, a->newpos, a->st.nparts * sizeof *a->newpos);
    a->rows_epoch += R;
    a->loss_epoch += a->loss_step;
    a->s->rows_total += R;
    a->step++;
    a->s->steps = a->step;
    /* Time from step 1, and the moving-average training loss that
     * time-to-target is measured on (the group join and data loading before
     * step 1 are left out). */
    double tnow = now_s();
    if (a->t_step1 == 0) {
        a->t_step1 = tnow;
        a->s->step1_at = tnow - a->t0;
    }
    if (R > 0) {
        a->win_loss[a->win_i % FSGD_AGG_LOSS_WINDOW] = a->loss_step;
        a->win_rows[a->win_i % FSGD_AGG_LOSS_WINDOW] = R;
        a->win_i++;
        double ls = 0;
        uint64_t rs = 0;
        for (unsigned i = 0; i < FSGD_AGG_LOSS_WINDOW && i < a->win_i; i++) {
            ls += a->win_loss[i];
            rs += a->win_rows[i];
        }
        a->s->loss_ma = ls / (double)rs;
        if (a->job->target_loss > 0 && a->s->time_to_target < 0 && a->s->loss_ma <= a->job->target_loss) {
            a->s->time_to_target = tnow - a->t_step1;
            a->s->target_step = a->step;
        }
    }
    a->s->rows_epoch = a->rows_epoch;
    int epoch_end = 1;
    for (uint32_t p = 0; p < a->st.nparts; p++)
        epoch_end &= a->st.pos[p] == a->st.end[p];
    int final = 0;
    if (epoch_end) {
        if (a->rows_epoch != a->s->dataset_rows)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE,
                                "epoch %u applied %llu rows but the data has %llu: exactly-once violated",
                                a->st.epoch, (unsigned long long)a->rows_epoch,
                                (unsigned long long)a->s->dataset_rows);
        fsgd_agg_epoch_t *ep = &a->s->epochs[a->s->n_epochs < 64 ? a->s->n_epochs : 63];
        ep->epoch = (int)a->st.epoch;
        ep->seconds = a->seconds_before + now_s() - a->t0;
        ep->seconds_from_step1 = now_s() - a->t_step1;
        ep->train_loss = a->loss_epoch / (double)a->rows_epoch;
        ep->rows = a->rows_epoch;
        FSGD_TRY(evaluate(a, &ep->test));
        a->s->test = ep->test;
        fsgd_ctl_begin(a, "epoch_end");
        fsgd_cj_u64(&a->cj, "epoch", a->st.epoch);
        fsgd_cj_u64(&a->cj, "step", a->step);
        fsgd_cj_u64(&a->cj, "rows", a->rows_epoch);
        fsgd_cj_u64(&a->cj, "dataset_rows", a->s->dataset_rows);
        fsgd_cj_f64(&a->cj, "train_loss", ep->train_loss);
        fsgd_cj_u64(&a->cj, "test_rows", ep->test.n);
        fsgd_cj_f64(&a->cj, "test_auc", ep->test.n ? ep->test.auc : NAN);
        fsgd_cj_f64(&a->cj, "test_logloss", ep->test.n ? ep->test.logloss : NAN);
        fsgd_cj_f64(&a->cj, "seconds", ep->seconds);
        fsgd_cj_f64(&a->cj, "seconds_from_step1", ep->seconds_from_step1);
        fsgd_cj_u64(&a->cj, "workers_live", a->nlive);
        fsgd_ctl_emit(a, "epoch_end");
        if (a->s->n_epochs < 64)
            a->s->n_epochs++;
        final = (int)a->st.epoch >= a->job->epochs;
        if (!final) {
            a->st.epoch++;
            memcpy(a->st.pos, a->st.start, a->st.nparts * sizeof *a->st.pos);
            a->rows_epoch = 0;
            a->loss_epoch = 0;
        }
    }
    a->s->epoch = (int)a->st.epoch;
    a->st.adam_t = a->adam.t;
    set_quota(a);
    int snap = final || (a->job->snapshot_every > 0 && a->step % (uint64_t)a->job->snapshot_every == 0);
    FSGD_TRY(publish(a, snap, final, a->g.keys, nt));
    if (!final && (snap || epoch_end))
        FSGD_TRY(ckpt_write(a));
    a->s->t_update += now_s() - t0;
    if (a->n_step_ms == a->cap_step_ms) {
        size_t nc = a->cap_step_ms ? 2 * a->cap_step_ms : 1024;
        double *ns = realloc(a->step_ms, nc * sizeof *ns);
        if (ns) {
            a->step_ms = ns;
            a->cap_step_ms = nc;
        }
    }
    if (a->n_step_ms < a->cap_step_ms && R > 0)
        a->step_ms[a->n_step_ms++] = (now_s() - a->step_start) * 1e3;
    a->s->seconds = a->seconds_before + now_s() - a->t0;
    a->s->workers_live = a->nlive;
    if (epoch_end && progress) {
        latency_stats(a);
        progress(ctx, a->s, 1);
    }
    *done = final;
    begin_step(a);
    return 0;
}

int fsgd_agg_write_metrics(const fsgd_job_t *job, const fsgd_agg_stats_t *s, const char *path, char *err,
                           size_t errsz)
{
    fsgd_outfile_t o;
    char why[FSGD_OUTFILE_PATH_MAX + 256];
    int rc = fsgd_outfile_open(&o, path, why, sizeof why);
    FILE *f = rc == 0 ? fsgd_outfile_stream(&o, why, sizeof why) : NULL;
    if (rc == 0 && !f) {
        fsgd_outfile_abort(&o);
        rc = FSGD_E_IO;
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "metrics: %s", why);
    double steps = s->adam_steps ? (double)s->adam_steps : 1;
#define J(x) (isfinite(x) ? (x) : -1.0)
    fprintf(f, "{\n  \"mode\": \"distributed\",\n  \"job\": \"%s\",\n  \"codec\": \"%s\",\n", job->name, job->codec);
    fprintf(f, "  \"test\": {\"n\": %zu, \"auc\": %.6f, \"logloss\": %.6f, \"loss\": %.6f, \"accuracy\": %.6f},\n",
            s->test.n, J(s->test.auc), J(s->test.logloss), J(s->test.loss), J(s->test.accuracy));
    fprintf(f, "  \"train_seconds\": %.3f,\n  \"epochs\": %d,\n  \"steps\": %llu,\n  \"empty_steps\": %llu,\n",
            s->seconds, s->n_epochs, (unsigned long long)s->adam_steps, (unsigned long long)s->empty_steps);
    fprintf(f, "  \"dataset_rows\": %llu,\n  \"dim\": %llu,\n  \"partitions\": %d,\n",
            (unsigned long long)s->dataset_rows, (unsigned long long)s->dim, s->partitions);
    fprintf(f, "  \"rows_applied\": %llu,\n  \"rows_per_second\": %.1f,\n", (unsigned long long)s->rows_total,
            s->seconds > 0 ? s->rows_total / s->seconds : 0);
    fprintf(f, "  \"rows_per_epoch\": [");
    for (int i = 0; i < s->n_epochs; i++)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)s->epochs[i].rows);
    fprintf(f, "],\n  \"per_epoch\": [\n");
    for (int i = 0; i < s->n_epochs; i++) {
        const fsgd_agg_epoch_t *e = &s->epochs[i];
        fprintf(f, "    {\"epoch\": %d, \"seconds\": %.3f, \"seconds_from_step1\": %.3f, \"train_loss\": %.6f, "
                   "\"rows\": %llu, \"test_auc\": %.6f, \"test_logloss\": %.6f}%s\n",
                e->epoch, e->seconds, e->seconds_from_step1, J(e->train_loss), (unsigned long long)e->rows,
                J(e->test.auc), J(e->test.logloss), i + 1 < s->n_epochs ? "," : "");
    }
    fprintf(f, "  ],\n");
    fprintf(f, "  \"assignment_wait_seconds\": %.3f,\n  \"assignment_settled\": %d,\n", s->assignment_wait_s,
            s->assignment_settled);
    fprintf(f, "  \"step1_at_seconds\": %.3f,\n  \"loss_window_steps\": %d,\n  \"loss_moving_average\": %.6f,\n",
            s->step1_at, FSGD_AGG_LOSS_WINDOW, J(s->loss_ma));
    fprintf(f, "  \"target_loss\": %.6f,\n  \"time_to_target_loss_s\": %.3f,\n  \"target_loss_step\": %llu,\n",
            job->target_loss, s->time_to_target, (unsigned long long)s->target_step);
    fprintf(f, "  \"per_step_seconds\": {\"gradient\": %.6g, \"encode\": %.6g, \"decode\": %.6g, \"comm_wait\": %.6g, "
               "\"update\": %.6g},\n",
            s->t_grad / steps, s->t_encode / steps, s->t_decode / steps, s->t_wait / steps, s->t_update / steps);
    fprintf(f, "  \"total_seconds\": {\"gradient\": %.6g, \"encode\": %.6g, \"decode\": %.6g, \"comm_wait\": %.6g, "
               "\"update\": %.6g},\n",
            s->t_grad, s->t_encode, s->t_decode, s->t_wait, s->t_update);
    fprintf(f, "  \"step_latency_ms\": {\"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f},\n", s->step_ms_mean,
            s->step_ms_p50, s->step_ms_p99);
    fprintf(f, "  \"hop_latency_ms\": {\"grads_p50\": %.3f, \"grads_p99\": %.3f},\n", s->hop_grads_ms_p50,
            s->hop_grads_ms_p99);
    fprintf(f, "  \"bytes\": {\"up\": %llu, \"down\": %llu, \"model_published\": %llu, \"gradient_raw\": %llu, "
               "\"gradient_encoded\": %llu},\n",
            (unsigned long long)s->bytes_up, (unsigned long long)s->bytes_down, (unsigned long long)s->bytes_model,
            (unsigned long long)s->raw_bytes, (unsigned long long)s->codec_bytes);
    fprintf(f, "  \"compression_ratio\": %.4f,\n",
            s->codec_bytes ? (double)s->raw_bytes / (double)s->codec_bytes : 0.0);
    /* Per worker per step: what one worker sends (a gradient message, the
     * mean over applied ones) and receives (the model delta message). */
    fprintf(f, "  \"downlink\": {\"spec\": \"%s\", \"up_bytes_per_worker_step\": %.1f, "
               "\"down_bytes_per_worker_step\": %.1f, \"replica_checks\": %llu, \"encode_seconds\": %.6g},\n",
            s->downlink, s->up_msgs ? (double)s->bytes_up / (double)s->up_msgs : 0.0,
            s->down_msgs ? (double)s->down_bytes_msg / (double)s->down_msgs : 0.0,
            (unsigned long long)s->replica_checks, s->t_down_encode);
    /* the first four counters are the version-1 names, kept for readers of them */
    fprintf(f, "  \"messages\": {\"accepted\": %llu, \"duplicates_dropped\": %llu, \"corrupt_rejected\": %llu, "
               "\"stale\": %llu, \"conflicts\": %llu, \"consumer_errors\": %llu, \"rejected\": {",
            (unsigned long long)s->grads_accepted, (unsigned long long)s->rejected[FSGD_AGG_REJ_DUPLICATE],
            (unsigned long long)s->rejected[FSGD_AGG_REJ_CORRUPT], (unsigned long long)s->rejected[FSGD_AGG_REJ_STALE],
            (unsigned long long)s->rejected[FSGD_AGG_REJ_CONFLICT], (unsigned long long)s->consumer_errors);
    for (int r = 0; r < FSGD_AGG_REJ_COUNT; r++)
        fprintf(f, "%s\"%s\": %llu", r ? ", " : "", fsgd_agg_reject_name(r), (unsigned long long)s->rejected[r]);
    fprintf(f, "}},\n");
    fprintf(f, "  \"reassembly\": {\"held_bytes_max\": %llu, \"limit_bytes\": %llu},\n",
            (unsigned long long)s->held_bytes_max, (unsigned long long)s->held_limit);
    fprintf(f, "  \"workers\": {\"live\": %llu, \"dropped\": %llu},\n  \"generation\": %u,\n  \"resumed_from_step\": %d\n}\n",
            (unsigned long long)s->workers_live, (unsigned long long)s->workers_dropped, s->gen,
            s->resumed_from_step);
#undef J
    if ((rc = fsgd_outfile_commit(&o, why, sizeof why)) < 0)
        return fsgd_err_fmt(err, errsz, rc, "metrics: %s", why);
    return 0;
}

static void agg_free(agg_t *a)
{
    if (a->grads_c) {
        rd_kafka_consumer_close(a->grads_c);
        rd_kafka_destroy(a->grads_c);
    }
    if (a->scan_c) {
        rd_kafka_consumer_close(a->scan_c);
        rd_kafka_destroy(a->scan_c);
    }
    if (a->prod) {
        rd_kafka_purge(a->prod, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_destroy(a->prod);
    }
    for (uint32_t p = 0; a->rows_at && p < a->st.nparts; p++)
        free(a->rows_at[p]);
    free(a->rows_at);
    fsgd_wire_state_free(&a->st);
    fsgd_adam_free(&a->adam);
    fsgd_reducer_destroy(a->red);
    fsgd_sparse_free(&a->dec);
    fsgd_sparse_free(&a->g);
    fsgd_kasm_destroy(a->as);
    free(a->live);
    free(a->got);
    free(a->applied);
    free(a->dmsg);
    fsgd_downlink_destroy(a->down);
    free(a->claimed);
    free(a->newpos);
    fsgd_csr_free(&a->test);
    free(a->buf.p);
    free(a->step_ms);
    fsgd_cj_free(&a->cj);
    if (a->ctl_c) {
        rd_kafka_consumer_close(a->ctl_c);
        rd_kafka_destroy(a->ctl_c);
    }
    for (size_t i = 0; i < a->nmem; i++)
        free(a->mem[i].own);
    free(a->mem);
}

int fsgd_aggregator_run(const fsgd_job_t *job, int expected_workers, fsgd_agg_stats_t *st,
                        fsgd_agg_progress_fn progress, fsgd_dist_log_fn log, void *ctx, char *err, size_t errsz)
{
    memset(st, 0, sizeof *st);
    st->resumed_from_step = -1;
    st->time_to_target = -1;
    agg_t a = {.job = job, .s = st, .err = err, .errsz = errsz, .log = log, .log_ctx = ctx};
    fsgd_kbus_topic(a.tdata, sizeof a.tdata, job->name, "data");
    fsgd_kbus_topic(a.tgrads, sizeof a.tgrads, job->name, "grads");
    fsgd_kbus_topic(a.tmodel, sizeof a.tmodel, job->name, "model");
    fsgd_kbus_topic(a.tctl, sizeof a.tctl, job->name, "ctl");
    a.expected = expected_workers > 0 ? expected_workers : 1;
    int rc = 0;
    if (!(a.prod = fsgd_kbus_client(FSGD_KCLIENT_PRODUCER, job->brokers, NULL, err, errsz)) ||
        !(a.scan_c = fsgd_kbus_client(FSGD_KCLIENT_CONSUMER, job->brokers, NULL, err, errsz)) ||
        !(a.grads_c = fsgd_kbus_client(FSGD_KCLIENT_CONSUMER, job->brokers, NULL, err, errsz)))
        rc = FSGD_E_KAFKA;
    /* The job's grads, model and ctl topics (fsgd produce or fsgd run made
     * them; kept as they are when they exist), with leaders elected. */
    if (!rc)
        rc = fsgd_dist_topics_create(job, a.prod, 0, err, errsz);
    if (!rc)
        rc = check_model_topic(&a);
    if (!rc)
        rc = scan_data(&a);
    if (!rc && job->test[0]) {
        fsgd_libsvm_opts_t o = {.skip_bad = job->skip_bad};
        rc = fsgd_libsvm_load(job->test, &o, &a.test, NULL, err, errsz);
        a.have_test = rc == 0;
    }
    fsgd_adam_params_t ap = {job->lr, job->beta1, job->beta2, job->eps};
    if (!rc && fsgd_adam_init(&a.adam, a.mdim, &ap) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "aggregator: out of memory for %llu weights",
                          (unsigned long long)a.mdim);
    if (!rc) {
        a.red = fsgd_reducer_new(a.mdim);
        a.as = fsgd_kasm_new();
        a.claimed = calloc(a.st.nparts, 1);
        a.newpos = calloc(a.st.nparts, sizeof *a.newpos);
        if (!a.red || !a.as || !a.claimed || !a.newpos)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    }
    if (!rc) {
        /* Reassembly holds only the step in progress, from members: at most
         * a gradient's worth per member. A gradient is its header, ranges and
         * a codec message of at most 8 bytes per weight plus framing. */
        size_t msg = 65536 + (size_t)a.st.nparts * 20 + (size_t)a.mdim * 16;
        size_t total = msg * (size_t)(a.expected + 2);
        if (total < (size_t)64 << 20)
            total = (size_t)64 << 20;
        fsgd_kasm_set_limits(a.as, msg, total);
        st->held_limit = total;
    }
    /* NAME.ctl from its start, for the whole run: the members of the job */
    if (!rc && !(a.ctl_c = fsgd_kbus_client(FSGD_KCLIENT_CONSUMER, job->brokers, NULL, err, errsz)))
        rc = FSGD_E_KAFKA;
    if (!rc) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, a.tctl, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
        if (rd_kafka_assign(a.ctl_c, l))
            rc = fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "assign %s failed", a.tctl);
        rd_kafka_topic_partition_list_destroy(l);
    }
    a.st.epoch = 1;
    int resumed = 0;
    if (!rc && (resumed = ckpt_load(&a)) < 0)
        rc = resumed;
    if (!rc)
        rc = downlink_setup(&a);
    if (!rc) {
        uint32_t now_gen = (uint32_t)time(NULL);
        a.gen = resumed ? (a.gen + 1 > now_gen ? a.gen + 1 : now_gen) : now_gen;
        st->gen = a.gen;
        set_quota(&a);
        a.st.adam_t = a.adam.t;
        /* Gradients of earlier generations are ignored anyway; start at the end. */
        int P = fsgd_kbus_partitions(a.grads_c, a.tgrads, 15000, err, errsz);
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(P > 0 ? P : 1);
        for (int p = 0; p < P && !rc; p++) {
            int64_t lo, hi;
            rc = fsgd_kbus_watermarks(a.grads_c, a.tgrads, p, &lo, &hi, 10000, err, errsz);
            rd_kafka_topic_partition_list_add(l, a.tgrads, p)->offset = hi;
        }
        if (P < 0)
            rc = P;
        if (!rc && rd_kafka_assign(a.grads_c, l))
            rc = fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "assign %s failed", a.tgrads);
        rd_kafka_topic_partition_list_destroy(l);
    }
    /* the opening snapshot waits until the consumer group has settled */
    if (!rc)
        rc = wait_assignment(&a, 60);
    a.t0 = now_s();
    if (!rc) {
        fsgd_ctl_begin(&a, "job_start");
        fsgd_cj_str(&a.cj, "codec", job->codec);
        fsgd_cj_u64(&a.cj, "dataset_rows", st->dataset_rows);
        fsgd_cj_u64(&a.cj, "dim", a.dim);
        fsgd_cj_u64(&a.cj, "weights", a.mdim);
        fsgd_cj_i64(&a.cj, "partitions", st->partitions);
        fsgd_cj_i64(&a.cj, "expected_workers", a.expected);
        fsgd_cj_i64(&a.cj, "epochs", job->epochs);
        fsgd_cj_f64(&a.cj, "batch", job->batch);
        fsgd_cj_u64(&a.cj, "step", a.step);
        fsgd_cj_i64(&a.cj, "resumed_from_step", st->resumed_from_step);
        fsgd_cj_f64(&a.cj, "assignment_wait_seconds", st->assignment_wait_s);
        fsgd_cj_i64(&a.cj, "assignment_settled", st->assignment_settled);
        fsgd_ctl_emit(&a, "job_start");
        rc = publish(&a, 1, 0, NULL, 0);
    }
    if (!rc)
        begin_step(&a);
    a.first_step = 1;
    a.first_deadline = now_s() + 60;
    int done = 0;
    double last_progress = now_s();
    const double timeout = job->step_timeout_ms / 1e3;
    while (!rc && !done) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(a.grads_c, 2);
        if (m) {
            rc = handle_grad(&a, m);
            rd_kafka_message_destroy(m);
            /* drain what is already here before deciding */
            continue;
        }
        rd_kafka_poll(a.prod, 0);
        ctl_drain(&a, 0);
        double t = now_s();
        int complete = 0;
        char wait_for[256];
        if (a.first_step) {
            /* Everyone expected, or everyone who still holds partitions: a
             * worker that died before step 1 stops holding any once the
             * group has moved them (KAFKA_FORMAT.md, "Start-up"). */
            size_t missing = awaited(&a, wait_for, sizeof wait_for);
            complete = a.ngot >= (size_t)a.expected || (a.ngot > 0 && (t > a.first_deadline || missing == 0));
            if (!complete && t - a.step_start > 5 && t - a.last_wait_log >= 10) {
                a.last_wait_log = t;
                agg_log(&a, "step %llu: %zu of %d expected workers answered; waiting for %s (starting with those "
                            "that answered after %.0f s more, or once the group moves the partitions of workers "
                            "that are gone)",
                        (unsigned long long)a.step + 1, a.ngot, a.expected,
                        missing ? wait_for : "any worker", a.first_deadline - t);
            }
            if (complete) {
                /* the live set is exactly who answered */
                a.nlive = 0;
                for (size_t i = 0; i < a.ngot; i++)
                    add_set(&a.live, &a.nlive, &a.cap_live, a.got[i]);
            }
        } else {
            complete = a.ngot > 0;
            for (size_t i = 0; i < a.nlive && complete; i++)
                complete = in_set(a.got, a.ngot, a.live[i]);
            /* once per step after 5 s, then every 30 s */
            if (!complete && t - a.step_start > 5 && t - a.last_wait_log >= 30 &&
                (a.nlive || t - a.step_start <= timeout)) {
                a.last_wait_log = t;
                size_t used = 0, n = 0;
                for (size_t i = 0; i < a.nlive && used < sizeof wait_for; i++)
                    if (!in_set(a.got, a.ngot, a.live[i]))
                        used += (size_t)snprintf(wait_for + used, sizeof wait_for - used, "%s%u", n++ ? ", " : "",
                                                 a.live[i]);
                if (n)
                    agg_log(&a, "step %llu: waiting %.0f s for worker(s) %s; dropped after %.1f s",
                            (unsigned long long)a.step + 1, t - a.step_start, wait_for, timeout);
                else
                    agg_log(&a, "step %llu: no live worker; waiting for any member's gradient",
                            (unsigned long long)a.step + 1);
            }
            if (!complete && t - a.step_start > timeout) {
                /* Drop who did not answer; the consumer group moves their
                 * partitions, and the positions say where to resume. */
                size_t k = 0, nd = 0;
                uint32_t dropped[64];
                for (size_t i = 0; i < a.nlive; i++)
                    if (in_set(a.got, a.ngot, a.live[i]))
                        a.live[k++] = a.live[i];
                    else {
                        st->workers_dropped++;
                        if (nd < 64)
                            dropped[nd++] = a.live[i];
                    }
                a.nlive = k;
                for (size_t i = 0; i < nd; i++) {
                    fsgd_ctl_member(&a, "worker_dropped", dropped[i]);
                    agg_log(&a, "step %llu: dropped worker %u (no gradient for %.1f s); the group moves its "
                                "partitions to the others",
                            (unsigned long long)a.step + 1, dropped[i], timeout);
                }
                complete = a.ngot > 0;
                if (!complete)
                    a.step_start = t; /* nobody alive: keep waiting for anyone */
            }
        }
        if (!complete)
            continue;
        a.last_wait_log = 0;
        a.first_step = 0;
        a.step_wait = t - a.step_start;
        rc = apply_step(&a, &done, progress, ctx);
        if (progress && now_s() - last_progress >= 1.0) {
            last_progress = now_s();
            latency_stats(&a);
            progress(ctx, st, 0);
        }
    }
    if (!rc && done) {
        latency_stats(&a);
        if (job->out[0]) {
            fsgd_model_t mo = {.kind = job->model, .dim = a.dim, .has_bias = job->bias,
                               .bias = (float)job->bias_value, .w = a.adam.theta};
            rc = fsgd_model_save(&mo, job->out, err, errsz);
        }
        if (!rc)
            rc = fsgd_kbus_flush(a.prod, 30000, err, errsz);
        if (!rc && job->checkpoint[0])
            unlink(job->checkpoint); /* finished: a new run starts fresh */
    }
    st->seconds = a.seconds_before + now_s() - a.t0;
    if (a.prod && (done || rc)) {
        /* the job's last word on NAME.ctl: workers stop on a failure */
        fsgd_ctl_begin(&a, "job_end");
        fsgd_cj_str(&a.cj, "status", rc ? "failed" : "done");
        fsgd_cj_str(&a.cj, "error", rc ? err : NULL);
        fsgd_cj_str(&a.cj, "error_code", rc ? fsgd_err_name(rc) : NULL);
        fsgd_cj_u64(&a.cj, "steps", st->steps);
        fsgd_cj_i64(&a.cj, "epochs", st->n_epochs);
        fsgd_cj_u64(&a.cj, "rows_applied", st->rows_total);
        fsgd_cj_u64(&a.cj, "dataset_rows", st->dataset_rows);
        fsgd_cj_f64(&a.cj, "train_loss", st->n_epochs ? st->epochs[st->n_epochs - 1].train_loss : NAN);
        fsgd_cj_u64(&a.cj, "test_rows", st->test.n);
        fsgd_cj_f64(&a.cj, "test_auc", st->test.n ? st->test.auc : NAN);
        fsgd_cj_f64(&a.cj, "test_logloss", st->test.n ? st->test.logloss : NAN);
        fsgd_cj_f64(&a.cj, "seconds", st->seconds);
        fsgd_cj_u64(&a.cj, "bytes_up", st->bytes_up);
        fsgd_cj_u64(&a.cj, "bytes_down", st->bytes_down);
        fsgd_cj_u64(&a.cj, "workers_dropped", st->workers_dropped);
        fsgd_cj_u64(&a.cj, "empty_steps", st->empty_steps);
        fsgd_ctl_emit(&a, "job_end");
        rd_kafka_flush(a.prod, 5000);
    }
    if (job->metrics_json[0] && (done || rc)) {
        char e2[FSGD_OUTFILE_PATH_MAX + 300];
        int mrc = fsgd_agg_write_metrics(job, st, job->metrics_json, e2, sizeof e2);
        if (mrc < 0 && !rc) /* a finished job whose metrics are lost has failed */
            rc = fsgd_err_fmt(err, errsz, mrc, "%s", e2);
        else if (mrc < 0)
            agg_log(&a, "%s", e2);
    }
    agg_free(&a);
    return rc;
}
