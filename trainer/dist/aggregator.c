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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
    char *err;
    size_t errsz;
    fsgd_klat_t lat_grads; /* produce-to-consume latency of NAME.grads frames */
} agg_t;

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

#define CKPT_MAGIC "FSGC"
#define CKPT_VERSION 1

/* The checkpoint bytes of a's state (seconds: training time so far) into *b. */
static int ckpt_encode(agg_t *a, double seconds, fsgd_wire_buf_t *b)
{
    int rc = fsgd_wire_put(b, CKPT_MAGIC, 4) | fsgd_wire_u32(b, CKPT_VERSION) | fsgd_wire_u32(b, a->gen) | fsgd_wire_u64(b, a->step) |
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
    char tmp[FSGD_JOB_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(b.p, 1, b.n, f) == b.n;
    if (f && fflush(f) == 0)
        fsync(fileno(f));
    if (f && fclose(f) != 0)
        ok = 0;
    free(b.p);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_IO, "checkpoint '%s': %m", path);
    }
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
    if (!p || len < 44 || memcmp(p, CKPT_MAGIC, 4) || fsgd_le_get32(p + 4) != CKPT_VERSION) {
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
    uint32_t gen = fsgd_le_get32(p + 8);
    uint64_t step = fsgd_le_get64(p + 12), rows = fsgd_le_get64(p + 20), mdim = fsgd_le_get64(p + 28);
    off = 36;
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
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
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
#define GATE_MAX_WORKERS 1024
static int wait_assignment(agg_t *a, double timeout_s)
{
    double t0 = now_s();
    a->s->assignment_settled = 0;
    rd_kafka_t *c = fsgd_kbus_client(FSGD_KCLIENT_CONSUMER, a->job->brokers, NULL, a->err, a->errsz);
    if (!c)
        return FSGD_E_KAFKA;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, a->tctl, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(c, l);
    rd_kafka_topic_partition_list_destroy(l);
    uint32_t P = a->st.nparts, nw = 0;
    uint32_t *ids = calloc(GATE_MAX_WORKERS, sizeof *ids), *tmp = calloc(P + 1, sizeof *tmp);
    uint8_t *own = calloc((size_t)GATE_MAX_WORKERS * P, 1); /* own[w * P + p] */
    uint32_t *owners = calloc(P + 1, sizeof *owners);
    int rc = 0, dirty = 0;
    if (!ids || !tmp || !own || !owners)
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    while (!rc && now_s() - t0 < timeout_s) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 20);
        if (m) {
            char ev[32];
            double wid;
            size_t np = 0;
            const char *j = m->payload;
            if (!m->err && j && fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) &&
                (!strcmp(ev, "worker_assignment") || !strcmp(ev, "worker_leave")) &&
                fsgd_ctl_get_num(j, m->len, "worker", &wid) && wid >= 0 && wid <= UINT32_MAX &&
                fsgd_ctl_get_u32s(j, m->len, "partitions", tmp, P + 1, &np)) {
                uint32_t id = (uint32_t)wid, k = 0;
                while (k < nw && ids[k] != id)
                    k++;
                if (k == nw && nw < GATE_MAX_WORKERS && strcmp(ev, "worker_leave"))
                    ids[nw++] = id;
                if (k < nw) {
                    memset(own + (size_t)k * P, 0, P);
                    for (size_t i = 0; i < np; i++)
                        if (tmp[i] < P)
                            own[(size_t)k * P + tmp[i]] = 1;
                    if (!strcmp(ev, "worker_leave")) { /* forget it: move the last one here */
                        nw--;
                        ids[k] = ids[nw];
                        memcpy(own + (size_t)k * P, own + (size_t)nw * P, P);
                    }
                }
                dirty = 1;
            }
            rd_kafka_message_destroy(m);
            continue; /* read everything already there before judging */
        }
        rd_kafka_poll(a->prod, 0);
        if (!dirty)
            continue;
        dirty = 0;
        uint32_t holders = 0;
        memset(owners, 0, P * sizeof *owners);
        for (uint32_t k = 0; k < nw; k++) {
            int any = 0;
            for (uint32_t p = 0; p < P; p++)
                if (own[(size_t)k * P + p]) {
                    owners[p]++;
                    any = 1;
                }
            holders += any;
        }
        int ok = nw >= (uint32_t)a->expected && holders > 0;
        for (uint32_t p = 0; p < P && ok; p++)
            ok = a->st.pos[p] >= a->st.end[p] ? owners[p] <= 1 : owners[p] == 1;
        if (ok) {
            a->s->assignment_settled = 1;
            break;
        }
    }
    a->s->assignment_wait_s = now_s() - t0;
    free(ids);
    free(tmp);
    free(own);
    free(owners);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    return rc;
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

static void handle_grad(agg_t *a, const rd_kafka_message_t *m)
{
    if (m->err)
        return;
    fsgd_klat_add(&a->lat_grads, m);
    fsgd_kframe_t f;
    char e[256];
    a->s->bytes_up += m->len;
    if (fsgd_kframe_parse(m->payload, m->len, &f, NULL, e, sizeof e) < 0 || f.kind != FSGD_KMSG_GRAD) {
        a->s->corrupt++;
        return;
    }
    const uint8_t *body;
    size_t len;
    int r = fsgd_kasm_feed(a->as, &f, &body, &len, e, sizeof e);
    if (r == FSGD_KASM_DUP) {
        a->s->duplicates++;
        return;
    }
    if (r < 0) {
        a->s->corrupt++;
        return;
    }
    if (r != FSGD_KASM_DONE)
        return;
    if (f.gen != a->gen || f.step != a->step + 1 || in_set(a->got, a->ngot, f.sender)) {
        a->s->stale++;
        return;
    }
    fsgd_wire_grad_t g;
    if (fsgd_wire_grad_get(body, len, a->st.nparts, &g, e, sizeof e) < 0) {
        free(g.ranges);
        a->s->corrupt++;
        return;
    }
    /* From here on the sender has answered the step, used or not. */
    add_set(&a->got, &a->ngot, &a->cap_got, f.sender);
    if (!in_set(a->live, a->nlive, f.sender) && add_set(&a->live, &a->nlive, &a->cap_live, f.sender) == 0)
        fsgd_ctl_member(a, "worker_joined", f.sender);
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
    if (!ok) {
        a->s->conflicts++; /* a partition claimed twice (a rebalance) or from a stale position */
        free(g.ranges);
        return;
    }
    if (rows != g.rows) {
        a->s->corrupt++;
        free(g.ranges);
        return;
    }
    if (g.codec_len) {
        double t0 = now_s();
        int rc = fsgd_codec_decode(g.codec, g.codec_len, a->mdim, &a->dec, e, sizeof e);
        a->s->t_decode += now_s() - t0;
        if (rc < 0 || fsgd_reducer_add(a->red, a->dec.keys, a->dec.vals, a->dec.n) < 0) {
            a->s->corrupt++;
            free(g.ranges);
            return;
        }
    } else if (g.rows) {
        a->s->corrupt++;
        free(g.ranges);
        return;
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
    char tmp[FSGD_JOB_PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "metrics '%s': %m", path);
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
    fprintf(f, "  \"messages\": {\"accepted\": %llu, \"duplicates_dropped\": %llu, \"corrupt_rejected\": %llu, "
               "\"stale\": %llu, \"conflicts\": %llu},\n",
            (unsigned long long)s->grads_accepted, (unsigned long long)s->duplicates, (unsigned long long)s->corrupt,
            (unsigned long long)s->stale, (unsigned long long)s->conflicts);
    fprintf(f, "  \"workers\": {\"live\": %llu, \"dropped\": %llu},\n  \"generation\": %u,\n  \"resumed_from_step\": %d\n}\n",
            (unsigned long long)s->workers_live, (unsigned long long)s->workers_dropped, s->gen,
            s->resumed_from_step);
#undef J
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "metrics '%s': %m", path);
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
}

int fsgd_aggregator_run(const fsgd_job_t *job, int expected_workers, fsgd_agg_stats_t *st,
                        fsgd_agg_progress_fn progress, void *ctx, char *err, size_t errsz)
{
    memset(st, 0, sizeof *st);
    st->resumed_from_step = -1;
    st->time_to_target = -1;
    agg_t a = {.job = job, .s = st, .err = err, .errsz = errsz};
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
            handle_grad(&a, m);
            rd_kafka_message_destroy(m);
            /* drain what is already here before deciding */
            continue;
        }
        rd_kafka_poll(a.prod, 0);
        double t = now_s();
        int complete = 0;
        if (a.first_step) {
            complete = a.ngot >= (size_t)(expected_workers > 0 ? expected_workers : 1) ||
                       (a.ngot > 0 && t > a.first_deadline);
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
                for (size_t i = 0; i < nd; i++)
                    fsgd_ctl_member(&a, "worker_dropped", dropped[i]);
                complete = a.ngot > 0;
                if (!complete)
                    a.step_start = t; /* nobody alive: keep waiting for anyone */
            }
        }
        if (!complete)
            continue;
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
        char e2[256];
        fsgd_agg_write_metrics(job, st, job->metrics_json, e2, sizeof e2);
    }
    agg_free(&a);
    return rc;
}
