/* `fsgd worker`: one member of the job's consumer group on <job>.data.
 *
 * The worker is a function of the model topic: every model message carries
 * the step state (epoch, and per data partition the epoch's offsets, the
 * next position and the rows to take), so after applying step t's message
 * the worker knows exactly which rows step t+1 needs from the partitions
 * the consumer group gave it. It never keeps positions of its own; when a
 * gradient is dropped or a partition moves, the next state says where to
 * resume (exactly once per epoch, KAFKA_FORMAT.md). Parsed partitions stay
 * cached (like RDD.cache), so later epochs do not read Kafka again. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/backend.h"
#include "fsgd/bus.h"
#include "fsgd/codec.h"
#include "fsgd/strategy.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/downlink.h"
#include "fsgd/error.h"
#include "fsgd/hugepages.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/rowfmt.h"
#include "fsgd/shard.h"
#include "fsgd/train.h"
#include "ctl.h"
#include "inflight.h"
#include "wire.h"

typedef struct pcache {
    int loaded;
    int raw; /* read before the model's shape was known: no intercept, dimension unchecked */
    int bias_slot; /* raw rows end with a slot for the intercept (col 0 until the model's dim is known) */
    uint64_t start, end;
    fsgd_csr_t rows;  /* parsed rows, bias column appended */
    uint64_t *row_of; /* end - start + 1 entries: first row of each offset */
} pcache_t;

typedef struct worker {
    const fsgd_job_t *job;
    fsgd_rowfmt_t fmt; /* how message values parse: the job's format */
    uint32_t id;
    char tdata[128], tgrads[128], tmodel[128], tctl[128];
    fsgd_bus_client_t *group, *fetch, *model_c, *prod;
    int32_t *assigned;
    int nassigned, have_assignment;
    int assign_dirty; /* report the assignment on NAME.ctl */
    fsgd_ctl_json_t cj;
    int valid, final;
    uint32_t gen;
    uint64_t step;
    fsgd_wire_state_t st;
    uint64_t dim, mdim;
    int has_bias;
    float bias;
    uint32_t kind;
    float *theta;
    fsgd_backend_t *be;
    fsgd_sworker_t *strat; /* the compression strategy (fsgd/strategy.h) */
    pcache_t *cache;
    uint32_t ncache;
    int64_t *wm_lo, *wm_hi; /* NAME.data's watermarks as last asked (ncache of each), NULL before */
    fsgd_kasm_t *as;
    fsgd_csr_t batch, tmp;
    fsgd_sparse_t g, delta;
    fsgd_wire_buf_t buf;
    uint8_t *enc;
    size_t enc_cap;
    uint32_t sent_gen;
    uint64_t sent_step;
    double sent_at, last_send; /* w->buf keeps the body sent last, for a resend */
    int kerr_seen[16], n_kerr;
    fsgd_worker_stats_t *stats;
    fsgd_dist_log_fn log;
    fsgd_worker_step_fn on_step; /* the caller's step hook (may be NULL), with log_ctx */
    void *log_ctx;
    uint8_t logged_corrupt, logged_dup, logged_unauth;
    int rc;
    char *err;
    size_t errsz;
    fsgd_klat_t lat_model; /* produce-to-consume latency of NAME.model frames */
    int tau;                   /* bounded delay: steps this worker may run past its model */
    int hold;                  /* the assignment changed: no step ahead until the model catches up */
    inflight_queue_t fl;       /* gradients sent whose steps are not closed yet */
    uint64_t *next_pos;        /* per partition: where this worker's next step starts */
    /* Generations NAME.ctl announced (job_start): a model message of a newer
     * one could not come from this job's run. ctl_read: NAME.ctl is followed */
    int ctl_read;
    uint32_t ctl_gen;
    uint64_t ctl_step;
    /* the newest snapshot of a generation not announced yet, kept until its
     * job_start comes (the two topics are not ordered against each other) */
    fsgd_kframe_t parked_f;
    uint8_t *parked;
    size_t parked_len;
    int64_t parked_off;
    int prefetch_due;       /* the producer's data_summary came: read partitions before the first model */
    int prefetch_done;      /* ... and they were read to the end */
    int prefetch_on;        /* a real broker: read ahead (the embedded cluster reads partitions slowly) */
    double prefetch_last;   /* when the assigned partitions were last read on (while the producer writes) */
    int prefetch_parts;     /* partitions read ahead */
    /* A sharded job (job key shards S > 1): shard I's model messages come
     * with sender I on partition I of NAME.model and hold its keys as local
     * keys (fsgd/shard.h); each has its own step, and the worker's model is
     * at the oldest of them, with shard 0's (the leader's) step state of
     * that step. Each shard's part of a gradient has its own strategy. */
    uint32_t shards;
    uint64_t sh_step[FSGD_SHARDS_MAX];
    int sh_valid[FSGD_SHARDS_MAX];
    fsgd_sworker_t *sh_strat[FSGD_SHARDS_MAX];
    fsgd_sparse_t sh_part[FSGD_SHARDS_MAX];
    struct lead_state {      /* shard 0's states of the steps the others have not reached */
        uint64_t step;
        int final;
        fsgd_wire_state_t st;
    } *lead;
    size_t nlead, cap_lead;
    /* Waiting: wait_kind 0 not, 1 for a model (none yet, or a resync), 2
     * on the model with gradients unanswered; since when, when it was last
     * said, and when a message last came on the model topic. */
    int wait_kind;
    double wait_since, wait_logged, model_seen;
} worker_t;

/* A worker waiting on the model says so every 3 step timeouts (1 to 30 s),
 * and gives up after WAIT_GIVE_UP_STEPS step timeouts (10 min by default)
 * without a single message on the model topic: the aggregator (or a shard)
 * is gone, and nothing else would end the wait (fsgd run restarts a dead
 * shard in seconds; an aggregator that ends says so on NAME.ctl). */
#define WAIT_SAY_STEPS 3
#define WAIT_SAY_MAX_S 30.0
#define WAIT_GIVE_UP_STEPS 60

/* How often the partitions are read on while the producer writes them. */
#define PREFETCH_EVERY_S 0.05

/* Counts a dropped model message; the first of each reason is logged. */
static void reject(worker_t *w, int corrupt, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* corrupt: 1 corrupt, 0 duplicate, REJECT_UNAUTH without a valid tag */
#define REJECT_UNAUTH 2
static void reject(worker_t *w, int corrupt, const char *fmt, ...)
{
    uint8_t *logged = corrupt == REJECT_UNAUTH ? &w->logged_unauth : corrupt ? &w->logged_corrupt : &w->logged_dup;
    if (corrupt == REJECT_UNAUTH)
        w->stats->unauthenticated++;
    else if (corrupt)
        w->stats->corrupt++;
    else
        w->stats->duplicates++;
    if (*logged || !w->log)
        return;
    *logged = 1;
    char why[400], line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "rejected a message on %s: %s: %s (further ones are only counted)", w->tmodel,
             corrupt == REJECT_UNAUTH ? "unauthenticated" : corrupt ? "corrupt" : "duplicate", why);
    w->log(w->log_ctx, line);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The group consumer only tracks ownership; rows are read by offset
 * through the fetch consumer. parts are sorted. */
static void on_rebalance(void *opaque, int assigned, const int32_t *parts, int n)
{
    worker_t *w = opaque;
    if (assigned) {
        int32_t *a = realloc(w->assigned, (n ? n : 1) * sizeof *a);
        if (!a)
            return;
        w->assigned = a;
        memcpy(w->assigned, parts, (size_t)n * sizeof *a);
        w->nassigned = n;
        w->have_assignment = 1;
    } else {
        w->nassigned = 0;
    }
    w->assign_dirty = 1;
    w->hold = 1;
}

typedef struct load_ctx {
    worker_t *w;
    pcache_t *c;
    int raw; /* rows as they are (prefetch): the model's shape is not known yet */
} load_ctx_t;

static int load_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                    size_t errsz)
{
    load_ctx_t *l = ctx;
    worker_t *w = l->w;
    pcache_t *c = l->c ? l->c : &w->cache[partition]; /* NULL: several partitions at once */
    char src[200];
    snprintf(src, sizeof src, "topic %s partition %d offset %lld", w->tdata, (int)partition, (long long)offset);
    fsgd_csr_clear(&w->tmp);
    /* a bad row fails here as in the aggregator's scan, or (skip_bad) is
     * skipped as the scan skipped and reported it */
    long n = fsgd_rowfmt_parse_msg(&w->fmt, val, len, src, &w->tmp, NULL, err, errsz);
    if (n < 0)
        return (int)n;
    for (size_t r = 0; r < w->tmp.n_rows; r++) {
        uint64_t lo = w->tmp.row_ptr[r], hi = w->tmp.row_ptr[r + 1];
        if (l->raw) {
            FSGD_TRY(fsgd_csr_append_row(&c->rows, w->tmp.label[r], w->tmp.col + lo, w->tmp.val + lo, hi - lo));
            if (w->job->bias) {
                /* the intercept's place, so that finish_raw need not copy
                 * the rows to make room for it */
                uint32_t zero = 0;
                float bv = (float)w->job->bias_value;
                FSGD_TRY(fsgd_csr_reserve(&c->rows, 0, 1));
                c->rows.col[c->rows.nnz] = zero;
                c->rows.val[c->rows.nnz++] = bv;
                c->rows.row_ptr[c->rows.n_rows] = c->rows.nnz;
                c->bias_slot = 1;
            }
            continue;
        }
        if (hi > lo && w->tmp.col[hi - 1] >= w->dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "%s: feature %u >= model dim %llu", src,
                                w->tmp.col[hi - 1] + 1, (unsigned long long)w->dim);
        size_t k = hi - lo;
        FSGD_TRY(fsgd_csr_append_row(&c->rows, w->tmp.label[r], w->tmp.col + lo, w->tmp.val + lo, k));
        if (w->has_bias) {
            /* append the constant feature (dim, bias) to the row just added */
            FSGD_TRY(fsgd_csr_reserve(&c->rows, 0, 1));
            c->rows.col[c->rows.nnz] = (uint32_t)w->dim;
            c->rows.val[c->rows.nnz] = w->bias;
            c->rows.nnz++;
            c->rows.row_ptr[c->rows.n_rows] = c->rows.nnz;
            if (w->dim + 1 > c->rows.max_col)
                c->rows.max_col = w->dim + 1;
        }
    }
    c->row_of[offset - (int64_t)c->start + 1] = c->rows.n_rows;
    return 0;
}

/* The watermarks of NAME.data partition p, asked for every partition at
 * once (one request per leader: one by one, the first step spent 20 ms a
 * partition on them) and asked again when `need` is past the high one. */
static int data_watermarks(worker_t *w, uint32_t p, uint64_t need, int64_t *lo, int64_t *hi)
{
    if (!w->wm_lo || need > (uint64_t)w->wm_hi[p]) {
        if (!w->wm_lo) {
            w->wm_lo = calloc(w->ncache, sizeof *w->wm_lo);
            w->wm_hi = calloc(w->ncache, sizeof *w->wm_hi);
            if (!w->wm_lo || !w->wm_hi) {
                free(w->wm_lo);
                free(w->wm_hi);
                w->wm_lo = w->wm_hi = NULL;
                return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
            }
        }
        int rc = fsgd_bus_watermarks_all(w->fetch, w->tdata, (int)w->ncache, w->wm_lo, w->wm_hi, 10000, w->err,
                                         w->errsz);
        if (rc) {
            free(w->wm_lo);
            free(w->wm_hi);
            w->wm_lo = w->wm_hi = NULL;
            return rc;
        }
    }
    *lo = w->wm_lo[p];
    *hi = w->wm_hi[p];
    return 0;
}

/* Rows read ahead (prefetch_one), made what load_msg makes: cut at the
 * epoch's end, checked against the model's dimension, the intercept
 * appended. 0 done; 1 not usable (read again). */
static int finish_raw(worker_t *w, pcache_t *c, uint64_t end)
{
    if (end < c->start || end > c->end)
        return 1;
    size_t n = (size_t)c->row_of[end - c->start];
    if (c->bias_slot && w->has_bias && w->bias == (float)w->job->bias_value) {
        /* in place: the slots get the intercept's column; every other
         * column (the slots' are 0) must be below the model's dim */
        if (c->rows.max_col > w->dim)
            return 1; /* read again: load_msg names the offset */
        for (size_t r = 0; r < n; r++)
            c->rows.col[c->rows.row_ptr[r + 1] - 1] = (uint32_t)w->dim;
        c->rows.n_rows = n;
        c->rows.nnz = (size_t)c->rows.row_ptr[n];
        c->rows.max_col = w->dim + 1;
        c->end = end;
        c->raw = c->bias_slot = 0;
        return 0;
    }
    size_t slot = c->bias_slot ? 1 : 0; /* an intercept's slot the model has no use for */
    fsgd_csr_t rows = {0};
    if (fsgd_csr_reserve(&rows, n, (size_t)c->rows.row_ptr[n] + (w->has_bias ? n : 0)) < 0)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    for (size_t r = 0; r < n; r++) {
        uint64_t lo = c->rows.row_ptr[r], hi = c->rows.row_ptr[r + 1] - slot;
        if (hi > lo && c->rows.col[hi - 1] >= w->dim) {
            fsgd_csr_free(&rows);
            return 1; /* read again: load_msg names the offset */
        }
        memcpy(rows.col + rows.nnz, c->rows.col + lo, (hi - lo) * sizeof *rows.col);
        memcpy(rows.val + rows.nnz, c->rows.val + lo, (hi - lo) * sizeof *rows.val);
        rows.nnz += hi - lo;
        if (w->has_bias) {
            rows.col[rows.nnz] = (uint32_t)w->dim;
            rows.val[rows.nnz++] = w->bias;
        }
        rows.label[r] = c->rows.label[r];
        rows.row_ptr[r + 1] = rows.nnz;
    }
    rows.n_rows = n;
    rows.max_col = w->has_bias ? w->dim + 1 : c->rows.max_col;
    fsgd_csr_free(&c->rows);
    c->rows = rows;
    c->end = end;
    c->raw = c->bias_slot = 0;
    return 0;
}

/* Partition p's cache for the model's positions: 0 ready; 1 emptied and
 * sized for [start, end), to be read; < 0 an error. */
static int prepare_partition(worker_t *w, uint32_t p)
{
    pcache_t *c = &w->cache[p];
    if (c->loaded && !c->raw && c->start == w->st.start[p] && c->end == w->st.end[p])
        return 0;
    if (c->loaded && c->raw && c->start == w->st.start[p]) {
        int rc = finish_raw(w, c, w->st.end[p]);
        if (rc <= 0)
            return rc;
    }
    fsgd_csr_free(&c->rows);
    free(c->row_of);
    memset(c, 0, sizeof *c);
    c->start = w->st.start[p];
    c->end = w->st.end[p];
    /* The positions come from a model message: the table below is one slot
     * per offset, so they must name offsets the data topic really holds
     * before anything is allocated for them. */
    int64_t lo = 0, hi = 0;
    FSGD_TRY(data_watermarks(w, p, c->end, &lo, &hi));
    if (c->start < (uint64_t)lo || c->end > (uint64_t)hi || c->start > c->end)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_FORMAT,
                            "model message of step %llu says %s [%u] holds offsets [%llu, %llu), but the topic holds "
                            "[%lld, %lld): refusing it (a model of another job on %s, or a forged one)",
                            (unsigned long long)w->step, w->tdata, p, (unsigned long long)c->start,
                            (unsigned long long)c->end, (long long)lo, (long long)hi, w->tmodel);
    c->row_of = calloc(c->end - c->start + 1, sizeof *c->row_of);
    if (!c->row_of)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory caching partition %u", p);
    return 1;
}

/* The partitions this step will read that are not cached for the model's
 * positions, read at once: one fetch serves them all (a partition at a
 * time, each paid its own start: 70 ms a partition on the embedded
 * cluster, whose 1M rows of 2^20 come in 170 partitions). */
static int load_pending(worker_t *w)
{
    int32_t *parts = malloc((size_t)(w->nassigned ? w->nassigned : 1) * sizeof *parts);
    int64_t *lo = malloc((size_t)(w->nassigned ? w->nassigned : 1) * sizeof *lo);
    int64_t *hi = malloc((size_t)(w->nassigned ? w->nassigned : 1) * sizeof *hi);
    int rc = parts && lo && hi ? 0 : fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    int n = 0;
    for (int i = 0; i < w->nassigned && !rc; i++) {
        int32_t p = w->assigned[i];
        if (p < 0 || (uint32_t)p >= w->st.nparts || w->next_pos[p] >= w->st.end[p] || w->st.quota[p] == 0)
            continue;
        int r = prepare_partition(w, (uint32_t)p);
        if (r < 0)
            rc = r;
        else if (r == 1) {
            parts[n] = p;
            lo[n] = (int64_t)w->cache[p].start;
            hi[n++] = (int64_t)w->cache[p].end;
        }
    }
    load_ctx_t l = {w, NULL, 0};
    if (!rc && n > 0)
        rc = fsgd_bus_read_rows_parts(w->fetch, w->tdata, n, parts, lo, hi, 30000, load_msg, &l, w->err, w->errsz);
    for (int i = 0; !rc && i < n; i++)
        w->cache[parts[i]].loaded = 1;
    free(parts);
    free(lo);
    free(hi);
    return rc;
}

static int load_partition(worker_t *w, uint32_t p)
{
    int r = prepare_partition(w, p);
    if (r <= 0)
        return r;
    pcache_t *c = &w->cache[p];
    load_ctx_t l = {w, c, 0};
    FSGD_TRY(fsgd_bus_read_range(w->fetch, w->tdata, (int32_t)p, (int64_t)c->start, (int64_t)c->end, 30000,
                                 FSGD_BUS_READ_ROWS, load_msg, &l, w->err, w->errsz));
    c->loaded = 1;
    return 0;
}

/* Before the first model message, the assigned partitions are read ahead
 * as they are (no intercept, no dimension: the model's shape is not known
 * yet) while fsgd run's producer still writes them and the aggregator sets
 * up, so that step 1 finds them (prepare_partition cuts them at the epoch's
 * end): each call reads on from what is cached to the partitions' high
 * watermarks. Once the producer's data_summary has come (the topic is
 * complete), a last call reads to the end. Best effort: a failure leaves
 * the partitions to step 1, which reports it. */
static void prefetch_more(worker_t *w)
{
    int final = w->prefetch_due;
    w->prefetch_last = now_s();
    if (!w->ncache) {
        int P = fsgd_bus_partitions(w->fetch, w->tdata, 10000, w->err, w->errsz);
        w->cache = P > 0 ? calloc((size_t)P, sizeof *w->cache) : NULL;
        if (!w->cache)
            return;
        w->ncache = (uint32_t)P;
    }
    int64_t *wlo = calloc(w->ncache, sizeof *wlo), *whi = calloc(w->ncache, sizeof *whi);
    size_t na = (size_t)(w->nassigned ? w->nassigned : 1);
    int32_t *parts = malloc(na * sizeof *parts);
    int64_t *lo = malloc(na * sizeof *lo), *hi = malloc(na * sizeof *hi);
    int n = 0;
    int rc = wlo && whi && parts && lo && hi
                 ? fsgd_bus_watermarks_all(w->fetch, w->tdata, (int)w->ncache, wlo, whi, 10000, w->err, w->errsz)
                 : -1;
    /* while the group still spreads its partitions (a first member holds
     * them all), reading them would be reading another worker's share */
    int spread = final || w->job->workers < 1 ||
                 (uint32_t)w->nassigned <= (w->ncache + (uint32_t)w->job->workers - 1) / (uint32_t)w->job->workers;
    for (int i = 0; !rc && spread && i < w->nassigned; i++) {
        int32_t p = w->assigned[i];
        if (p < 0 || (uint32_t)p >= w->ncache)
            continue;
        pcache_t *c = &w->cache[p];
        if (c->loaded && !c->raw)
            continue;
        uint64_t from = c->loaded ? c->end : (uint64_t)wlo[p];
        if (whi[p] <= (int64_t)from || (c->loaded && c->start < (uint64_t)wlo[p]))
            continue;
        /* one slot an offset: the first row of each, for the epoch's cut */
        size_t slots = (size_t)((uint64_t)whi[p] - (c->loaded ? c->start : from)) + 1;
        uint64_t *ro = realloc(c->row_of, slots * sizeof *ro);
        if (!ro)
            continue;
        if (!c->loaded) {
            ro[0] = 0;
            c->start = c->end = from;
        }
        c->row_of = ro;
        parts[n] = p;
        lo[n] = (int64_t)from;
        hi[n++] = whi[p];
    }
    load_ctx_t l = {w, NULL, 1};
    if (!rc && n > 0)
        rc = fsgd_bus_read_rows_parts(w->fetch, w->tdata, n, parts, lo, hi, 30000, load_msg, &l, w->err, w->errsz);
    for (int i = 0; i < n; i++) {
        pcache_t *c = &w->cache[parts[i]];
        if (rc == 0) {
            w->prefetch_parts += !c->loaded;
            w->stats->prefetched += !c->loaded;
            c->end = (uint64_t)hi[i];
            c->loaded = c->raw = 1;
        } else {
            fsgd_csr_free(&c->rows);
            free(c->row_of);
            memset(c, 0, sizeof *c);
        }
    }
    if (final) {
        w->prefetch_due = 0;
        w->prefetch_done = 1;
        if (w->log && w->prefetch_parts) {
            char line[300];
            snprintf(line, sizeof line, "read %d partitions of %s ahead of the first model", w->prefetch_parts,
                     w->tdata);
            w->log(w->log_ctx, line);
        }
    }
    free(wlo);
    free(whi);
    free(parts);
    free(lo);
    free(hi);
}

static int setup_model(worker_t *w, const fsgd_wire_model_t *m)
{
    if (w->theta && w->mdim == m->n && w->kind == m->kind)
        return 0;
    if (w->theta)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_STATE, "worker: model shape changed (%llu -> %llu weights)",
                            (unsigned long long)w->mdim, (unsigned long long)m->n);
    w->dim = m->dim;
    w->has_bias = (int)m->has_bias;
    w->bias = m->bias;
    w->kind = m->kind;
    w->mdim = m->n;
    w->theta = calloc(w->mdim ? w->mdim : 1, sizeof *w->theta);
    /* the replica takes every step's update at random keys (fsgd/hugepages.h) */
    fsgd_hugepages_advise(w->theta, (w->mdim ? w->mdim : 1) * sizeof *w->theta);
    if (!w->theta)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory for %llu weights",
                            (unsigned long long)w->mdim);
    /* a worker's share of a step (a fraction of the data: unknown here) */
    double share = w->job->batch >= 1       ? w->job->batch / (w->job->workers > 0 ? w->job->workers : 1)
                   : w->job->batch == FSGD_JOB_AUTO ? FSGD_TRAIN_BATCH_AUTO
                                                    : 0;
    w->be = fsgd_backend_new(fsgd_job_backend(w->job, share), w->mdim, w->theta, w->err, w->errsz);
    if (!w->be)
        return FSGD_E_DEVICE;
    w->strat = fsgd_sworker_new(w->job->codec, w->mdim, w->job->seed + w->id, w->err, w->errsz);
    if (!w->strat)
        return FSGD_E_ARG;
    for (uint32_t i = 0; w->shards > 1 && i < w->shards; i++) {
        char spec[sizeof w->job->codec + 32];
        if (fsgd_strategy_shard_spec(w->job->codec, w->mdim, i, w->shards, spec, sizeof spec, w->err, w->errsz) < 0 ||
            !(w->sh_strat[i] = fsgd_sworker_new(spec, fsgd_shard_dim(w->mdim, i, w->shards), w->job->seed + w->id + i,
                                                w->err, w->errsz)))
            return FSGD_E_ARG;
    }
    return 0;
}

/* The model message f closes a step: when it is the step this worker sent
 * a gradient for, the strategy learns whether that gradient was applied (a
 * message that was not has its error-feedback mass restored: its rows come
 * round again) and reads the aggregator's feedback section. */
static void close_step(worker_t *w, const fsgd_kframe_t *f, int applied, const uint8_t *sec, size_t slen)
{
    /* steps closed without a word to us (a resync skipped them) go as before */
    while (w->fl.n && (w->fl.e[0].gen != f->gen || w->fl.e[0].step < f->step))
        inflight_pop(&w->fl);
    if (!w->fl.n || w->fl.e[0].step != f->step)
        return;
    int doomed = w->fl.e[0].doomed;
    inflight_pop(&w->fl);
    if (doomed)
        return; /* the strategy forgot it when it was doomed */
    if (!applied && w->fl.n) {
        /* Not applied, with later gradients encoded on top of it: a strategy
         * can restore only its last message, and those later ones started
         * where this one ended, so the aggregator refuses them too. Forget
         * the error-feedback state (counted) and start again from the
         * model's positions. */
        for (size_t i = 0; i < w->fl.n; i++)
            w->fl.e[i].doomed = 1;
        if (fsgd_sworker_reset(w->strat))
            w->stats->ef_discarded++;
        return;
    }
    char e[256];
    int rc = fsgd_sworker_after_step(w->strat, applied, sec, slen, e, sizeof e);
    if (rc == 1)
        w->stats->ef_undone++;
    else if (rc < 0)
        reject(w, 1, "generation %u step %llu: feedback section: %s", f->gen, (unsigned long long)f->step, e);
}

/* Reports this worker's data partitions on NAME.ctl (the aggregator waits
 * for a settled assignment before step 1). */
static void report_assignment(worker_t *w, const char *event)
{
    fsgd_cj_begin(&w->cj, event, w->job->name);
    fsgd_cj_u64(&w->cj, "worker", w->id);
    fsgd_cj_i32s(&w->cj, "partitions", w->assigned, (size_t)w->nassigned);
    fsgd_cj_u64(&w->cj, "assigned", (uint64_t)w->have_assignment);
    if (fsgd_cj_end(&w->cj) == 0)
        fsgd_ctl_send(w->prod, w->tctl, w->job->name, event, &w->cj);
}

/* NAME.ctl, read from where it ended when the worker started: the
 * aggregator's job_end of our generation (or a later one) ends the worker:
 * "failed" with the aggregator's error, "done" like the final model. */
static int unannounced(const worker_t *w, const fsgd_kframe_t *f);
static int apply_model(worker_t *w, const fsgd_kframe_t *fp, const uint8_t *body, size_t len, int64_t offset);
static int adopt_state(worker_t *w, fsgd_wire_state_t s, uint32_t gen, uint64_t step, int final, int64_t offset);
static int apply_model_shard(worker_t *w, const fsgd_kframe_t *fp, const uint8_t *body, size_t len, int64_t offset);

static int handle_ctl(worker_t *w, const fsgd_bus_msg_t *m)
{
    char ev[32], status[16], msg[400];
    double gen = -1;
    const char *j = m->val;
    if (fsgd_ctl_verify(m, msg, sizeof msg) < 0) {
        reject(w, REJECT_UNAUTH, "%s %s", w->tctl, msg);
        return 0;
    }
    double step = 0;
    if (j && !w->valid && fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) && !strcmp(ev, "data_summary")) {
        w->prefetch_due = w->prefetch_on; /* the topic is complete: read it to the end */
        return 0;
    }
    if (j && fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) && !strcmp(ev, "job_start") &&
        fsgd_ctl_get_num(j, m->len, "gen", &gen) && fsgd_ctl_get_num(j, m->len, "step", &step) && gen >= 1 &&
        gen <= 4294967295.0 && (uint32_t)gen > w->ctl_gen) {
        w->ctl_gen = (uint32_t)gen;
        w->ctl_step = step >= 0 ? (uint64_t)step : 0;
        if (w->parked && !unannounced(w, &w->parked_f)) {
            fsgd_kframe_t f = w->parked_f;
            uint8_t *body = w->parked;
            w->parked = NULL;
            int rc = f.gen < w->gen ? 0 : apply_model(w, &f, body, w->parked_len, w->parked_off);
            free(body);
            return rc;
        }
        return 0;
    }
    if (!j || !fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) || strcmp(ev, "job_end") ||
        !fsgd_ctl_get_num(j, m->len, "gen", &gen) || !fsgd_ctl_get_str(j, m->len, "status", status, sizeof status))
        return 0;
    if (gen < (double)w->gen)
        return 0; /* an aggregator generation we have since left behind */
    if (!strcmp(status, "failed")) {
        if (!fsgd_ctl_get_str(j, m->len, "error", msg, sizeof msg))
            snprintf(msg, sizeof msg, "no detail");
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_STATE, "the aggregator (generation %.0f) failed for good: %s",
                            gen, msg);
    }
    if (!strcmp(status, "done") && w->valid && (uint32_t)gen == w->gen)
        w->final = 1;
    return 0;
}

/* An error from the model/ctl consumer. Messages the broker dropped before
 * they were read (retention, the embedded cluster's 5 MiB) are skipped:
 * deltas that went missing make the worker wait for a snapshot. Anything
 * else is retried by librdkafka; each kind is logged once. */
static void consumer_error(worker_t *w, const fsgd_bus_msg_t *m)
{
    if (m->err == FSGD_BUS_EOF)
        return;
    int seen = 0;
    for (int i = 0; i < w->n_kerr && !seen; i++)
        seen = w->kerr_seen[i] == m->code;
    if (!seen && w->n_kerr < 16)
        w->kerr_seen[w->n_kerr++] = m->code;
    const char *topic = m->topic && m->topic[0] ? m->topic : w->tmodel;
    if (m->err == FSGD_BUS_LOST)
        /* the fetcher stopped: the model again from its log start, NAME.ctl
         * from its end */
        fsgd_bus_restart(w->model_c, topic, m->partition,
                         strcmp(topic, w->tctl) ? FSGD_BUS_OFFSET_BEGINNING : FSGD_BUS_OFFSET_END, NULL, 0);
    if (!seen && w->log) {
        char line[512];
        snprintf(line, sizeof line, "%s consumer: %s (%s; %s)", topic, m->errstr, m->errname,
                 m->err == FSGD_BUS_LOST ? "messages dropped by the broker are skipped"
                                         : "librdkafka retries; this kind is logged once");
        w->log(w->log_ctx, line);
    }
}

/* Generation check, independent of keys (issue 27): once the worker holds
 * a model or NAME.ctl announced a run, a model message of a generation
 * beyond the newest announced one is not this job's (a restarted
 * aggregator announces its generation before its first snapshot). */
static int unannounced(const worker_t *w, const fsgd_kframe_t *f)
{
    return w->ctl_read && f->gen > w->gen && f->gen > w->ctl_gen && (w->gen || w->ctl_gen);
}

/* A parked snapshot that was never announced: dropped and counted. */
static void unpark(worker_t *w, int count)
{
    if (w->parked && count)
        reject(w, 1, "generation %u step %llu: a snapshot of a generation %s.ctl never announced (newest announced "
                     "%u, this worker's %u): not from this job's run",
               w->parked_f.gen, (unsigned long long)w->parked_f.step, w->job->name, w->ctl_gen, w->gen);
    free(w->parked);
    w->parked = NULL;
}

static void park(worker_t *w, const fsgd_kframe_t *f, const uint8_t *body, size_t len, int64_t offset)
{
    unpark(w, 1); /* an older one: its job_start did not come before this one */
    if (!(w->parked = malloc(len ? len : 1)))
        return;
    memcpy(w->parked, body, len);
    w->parked_f = *f;
    w->parked_len = len;
    w->parked_off = offset;
    fsgd_kasm_forget(w->as, f); /* a copy after its job_start is taken as new */
}

static int handle_model(worker_t *w, const fsgd_bus_msg_t *m)
{
    if (m->err) {
        consumer_error(w, m);
        return 0;
    }
    fsgd_bus_lat_add(&w->lat_model, m);
    if (!strcmp(m->topic, w->tctl))
        return handle_ctl(w, m);
    fsgd_kframe_t f;
    char e[256];
    int prc = fsgd_kframe_parse(m->val, m->len, &f, NULL, e, sizeof e);
    if (prc < 0) {
        reject(w, prc == FSGD_E_AUTH ? REJECT_UNAUTH : 1, "offset %lld: %s", (long long)m->offset, e);
        return 0;
    }
    if (f.kind == FSGD_KMSG_GRAD) {
        reject(w, 1, "offset %lld: a gradient frame on the model topic", (long long)m->offset);
        return 0;
    }
    w->stats->bytes_down += m->len;
    const uint8_t *body;
    size_t len;
    int r = fsgd_kasm_feed(w->as, &f, &body, &len, e, sizeof e);
    if (r == FSGD_KASM_DUP)
        reject(w, 0, "generation %u step %llu chunk %u/%u seen before", f.gen, (unsigned long long)f.step, f.chunk,
               f.nchunks);
    if (r < 0)
        reject(w, 1, "offset %lld: %s", (long long)m->offset, e);
    if (r != FSGD_KASM_DONE)
        return 0;
    if (f.gen < w->gen)
        return 0; /* a message of an aggregator that has since restarted */
    /* shards' snapshots of a new generation come on S partitions, in any
     * order against NAME.ctl's job_start: not parked (one slot) */
    if (w->shards > 1)
        return apply_model_shard(w, &f, body, len, m->offset);
    if (unannounced(w, &f)) {
        if (f.kind == FSGD_KMSG_SNAPSHOT)
            park(w, &f, body, len, m->offset);
        return 0; /* a delta of a generation this worker does not hold is of no use anyway */
    }
    return apply_model(w, &f, body, len, m->offset);
}

static int apply_model(worker_t *w, const fsgd_kframe_t *fp, const uint8_t *body, size_t len, int64_t offset)
{
    const fsgd_kframe_t f = *fp;
    char e[256];
    fsgd_wire_state_t s = {0};
    size_t off = 0;
    int rc = fsgd_wire_state_get(body, len, &off, &s, e, sizeof e);
    const uint8_t *sec = NULL; /* the strategy's feedback for the step this message closes */
    size_t slen = 0;
    if (rc == 0 && (f.flags & FSGD_KFLAG_SECTION))
        rc = fsgd_wire_section_get(body, len, &off, &sec, &slen, e, sizeof e);
    if (rc < 0) {
        fsgd_kasm_forget(w->as, &f); /* the genuine message of this step may still come */
        reject(w, 1, "generation %u step %llu: %s", f.gen, (unsigned long long)f.step, e);
        fsgd_wire_state_free(&s);
        return 0;
    }
    if (f.kind == FSGD_KMSG_SNAPSHOT) {
        fsgd_wire_model_t mm;
        if (fsgd_wire_model_get(body, len, &off, &mm, e, sizeof e) < 0) {
            fsgd_kasm_forget(w->as, &f);
            reject(w, 1, "generation %u step %llu: %s", f.gen, (unsigned long long)f.step, e);
            fsgd_wire_state_free(&s);
            return 0;
        }
        if (mm.shards > 1) { /* a sharded job's shard 0: its part only */
            fsgd_wire_state_free(&s);
            return fsgd_err_fmt(w->err, w->errsz, FSGD_E_ARG,
                                "worker: job %s runs %u aggregator shards (a snapshot of shard %u of %u on %s): give "
                                "the worker --shards %u", w->job->name, mm.shards, mm.shard, mm.shards, w->tmodel,
                                mm.shards);
        }
        if (w->valid && f.gen == w->gen && f.step < w->step) {
            fsgd_wire_state_free(&s);
            return 0;
        }
        /* Every step publishes one model message and every snapshot_every-th
         * is a snapshot: a reader in step cannot meet a snapshot of its own
         * generation further ahead. One that is could not come from this run
         * (a forged one, issue 27): taking it would stall the job. */
        /* snapshot_every auto is max(100, weights / 4096) (agg_auto.c);
         * twice the gap leaves room to spare */
        const uint64_t every = w->job->snapshot_every > 0 ? (uint64_t)w->job->snapshot_every
                               : w->mdim / 4096 > 100       ? w->mdim / 4096
                                                            : 100;
        if (w->valid && f.gen == w->gen && f.step > w->step + 2 * every) {
            reject(w, 1, "generation %u: a snapshot of step %llu, %llu steps past this worker's model (step %llu; "
                         "snapshots come every %llu steps): not from this run",
                   f.gen, (unsigned long long)f.step, (unsigned long long)(f.step - w->step),
                   (unsigned long long)w->step, (unsigned long long)every);
            fsgd_wire_state_free(&s);
            return 0;
        }
        /* the first snapshot of an announced generation is at the step its
         * job_start named */
        if (w->ctl_read && f.gen != w->gen && f.gen == w->ctl_gen && f.step > w->ctl_step + 2 * every) {
            reject(w, 1, "generation %u: a snapshot of step %llu, %llu steps past the step %s.ctl announced (%llu): "
                         "not from this run",
                   f.gen, (unsigned long long)f.step, (unsigned long long)(f.step - w->ctl_step), w->job->name,
                   (unsigned long long)w->ctl_step);
            fsgd_wire_state_free(&s);
            return 0;
        }
        rc = setup_model(w, &mm);
        if (rc < 0) {
            fsgd_wire_state_free(&s);
            return rc;
        }
        fsgd_wire_model_weights(&mm, w->theta);
        /* A device backend holds its own copy of θ: load all of it. */
        rc = fsgd_backend_load(w->be, w->theta, w->mdim, w->err, w->errsz);
        if (rc < 0) {
            fsgd_wire_state_free(&s);
            return rc;
        }
        if (w->valid && f.gen != w->gen) {
            w->stats->resyncs++;
            inflight_clear(&w->fl);
            /* A restarted aggregator replays the rows since its checkpoint:
             * mass in the residual from those rows would be applied twice. */
            if (fsgd_sworker_reset(w->strat))
                w->stats->ef_discarded++;
        } else {
            close_step(w, &f, 1, sec, slen);
        }
        w->valid = 1;
    } else {
        if (!w->valid || f.gen != w->gen || f.step <= w->step) {
            fsgd_wire_state_free(&s);
            return 0;
        }
        if (f.step != w->step + 1) {
            /* A delta is missing (evicted or skipped): wait for a snapshot. */
            w->valid = 0;
            w->stats->resyncs++;
            fsgd_wire_state_free(&s);
            return 0;
        }
        fsgd_wire_cdelta_t cd = {0};
        int applied = 0; /* θ was changed before the error: only a snapshot can repair it */
        if (f.kind == FSGD_KMSG_DELTA_CODED) {
            rc = fsgd_wire_cdelta_get(body, len, &off, &cd, e, sizeof e);
            if (rc == 0)
                rc = fsgd_sworker_downlink_decode(cd.msg, cd.msg_len, w->mdim, &w->delta, e, sizeof e);
            /* Additive: θ += update, the same float additions as the
             * aggregator's replica, so both stay bit-identical. */
            if (rc == 0) {
                applied = 1;
                rc = fsgd_sworker_downlink_apply(w->theta, w->mdim, &w->delta, e, sizeof e);
            }
            for (size_t i = 0; rc == 0 && i < w->delta.n; i++)
                w->delta.vals[i] = w->theta[w->delta.keys[i]];
        } else {
            rc = f.kind == FSGD_KMSG_DELTA_PACKED ? fsgd_wire_pdelta_get(body, len, &off, w->mdim, &w->delta, e, sizeof e)
                                                  : fsgd_wire_delta_get(body, len, &off, w->mdim, &w->delta, e, sizeof e);
            for (size_t i = 0; rc == 0 && i < w->delta.n; i++)
                w->theta[w->delta.keys[i]] = w->delta.vals[i];
        }
        if (rc < 0) {
            if (applied) {
                w->valid = 0;
            } else {
                /* θ is untouched: a later delta tells a missing step apart
                 * (resync from a snapshot); until then the genuine message
                 * may still come. */
                fsgd_kasm_forget(w->as, &f);
            }
            reject(w, 1, "generation %u step %llu: %s", f.gen, (unsigned long long)f.step, e);
            fsgd_wire_state_free(&s);
            return 0;
        }
        rc = fsgd_backend_apply(w->be, w->delta.keys, w->delta.vals, w->delta.n, w->err, w->errsz);
        if (rc < 0) {
            fsgd_wire_state_free(&s);
            return rc;
        }
        /* Plain deltas carry no applied list: the step closed, ours was taken. */
        close_step(w, &f, f.kind == FSGD_KMSG_DELTA_CODED ? fsgd_wire_cdelta_applied(&cd, w->id) : 1, sec, slen);
        if (f.kind == FSGD_KMSG_DELTA_CODED) {
            if ((cd.flags & FSGD_WIRE_CDELTA_CHECK) && !fsgd_sworker_downlink_verify(w->theta, w->mdim, cd.check)) {
                /* Not the aggregator's replica: compute on nothing until the
                 * next snapshot replaces θ. */
                w->stats->replica_mismatch++;
                w->stats->resyncs++;
                w->valid = 0;
                fsgd_wire_state_free(&s);
                return 0;
            }
        }
    }
    return adopt_state(w, s, f.gen, f.step, (f.flags & FSGD_KFLAG_FINAL) != 0, offset);
}

/* The model of step `step` is in θ: its state s (taken) says what comes next. */
static int adopt_state(worker_t *w, fsgd_wire_state_t s, uint32_t gen, uint64_t step, int final, int64_t offset)
{
    if (w->ncache && s.nparts != w->ncache) {
        fsgd_wire_state_free(&s);
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_STATE, "worker: data partitions changed from %u to %u",
                            w->ncache, s.nparts);
    }
    if (!w->ncache) {
        w->cache = calloc(s.nparts ? s.nparts : 1, sizeof *w->cache);
        if (!w->cache) {
            fsgd_wire_state_free(&s);
            return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
        }
        w->ncache = s.nparts;
    }
    fsgd_wire_state_free(&w->st);
    w->st = s;
    w->gen = gen;
    w->step = step;
    uint64_t *np = realloc(w->next_pos, (s.nparts ? s.nparts : 1) * sizeof *np);
    if (!np)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    w->next_pos = np;
    inflight_project(&w->fl, w->gen, w->step, w->st.pos, w->st.nparts, w->next_pos);
    w->final = final;
    if (w->final && !(w->sent_gen == gen)) {
        /* The final model of an earlier job on the same topics: only the end
         * of the log counts for a worker that took no part. */
        int64_t lo, hi;
        if (fsgd_bus_watermarks(w->model_c, w->tmodel, 0, &lo, &hi, 5000, NULL, 0) == 0 && offset + 1 < hi)
            w->final = 0;
    }
    return 0;
}

/* Shard I's message closed step `step`: its strategy learns whether this
 * worker's part was applied (as close_step does for the whole model). */
static void close_shard_step(worker_t *w, uint32_t shard, uint32_t gen, uint64_t step, int applied,
                             const uint8_t *sec, size_t slen)
{
    for (size_t i = 0; i < w->fl.n; i++) {
        inflight_t *e = &w->fl.e[i];
        if (e->gen != gen || e->step != step)
            continue;
        if (e->doomed)
            return;
        if (!applied && i + 1 < w->fl.n) {
            /* later parts started where this one ended: the shards refuse them too */
            for (size_t j = i + 1; j < w->fl.n; j++)
                w->fl.e[j].doomed = 1;
            for (uint32_t s = 0; s < w->shards; s++)
                if (fsgd_sworker_reset(w->sh_strat[s]))
                    w->stats->ef_discarded++;
            return;
        }
        char e2[256];
        int rc = fsgd_sworker_after_step(w->sh_strat[shard], applied, sec, slen, e2, sizeof e2);
        if (rc == 1)
            w->stats->ef_undone++;
        else if (rc < 0)
            reject(w, 1, "shard %u step %llu: feedback: %s", shard, (unsigned long long)step, e2);
        return;
    }
}

/* After shard messages: the model is at the oldest shard's step, with the
 * leader's state of that step; nothing to compute on while a shard waits
 * for a snapshot or the leader's state is not in. */
static int combine_shards(worker_t *w, uint32_t gen, int64_t offset)
{
    uint64_t step = UINT64_MAX;
    int valid = w->theta != NULL;
    for (uint32_t i = 0; i < w->shards; i++) {
        valid &= w->sh_valid[i];
        if (w->sh_step[i] < step)
            step = w->sh_step[i];
    }
    size_t at = w->nlead;
    for (size_t i = 0; valid && i < w->nlead; i++)
        if (w->lead[i].step == step)
            at = i;
    if (!valid || at == w->nlead) {
        w->valid = 0;
        return 0;
    }
    if (w->valid && w->gen == gen && w->step == step)
        return 0;
    fsgd_wire_state_t s = {0};
    if (fsgd_wire_state_copy(&s, &w->lead[at].st) < 0)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    int final = w->lead[at].final;
    /* states before this step are spent */
    size_t k = 0;
    for (size_t i = 0; i < w->nlead; i++)
        if (w->lead[i].step >= step)
            w->lead[k++] = w->lead[i];
        else
            fsgd_wire_state_free(&w->lead[i].st);
    w->nlead = k;
    while (w->fl.n && (w->fl.e[0].gen != gen || w->fl.e[0].step <= step))
        inflight_pop(&w->fl);
    w->valid = 1;
    return adopt_state(w, s, gen, step, final, offset);
}

static int apply_model_shard(worker_t *w, const fsgd_kframe_t *fp, const uint8_t *body, size_t len, int64_t offset)
{
    const fsgd_kframe_t f = *fp;
    const uint32_t S = w->shards, I = f.sender;
    char e[256];
    if (I >= S) {
        reject(w, 1, "generation %u step %llu: a model message from shard %u; the job has %u", f.gen,
               (unsigned long long)f.step, I, S);
        return 0;
    }
    fsgd_wire_state_t s = {0};
    size_t off = 0;
    const uint8_t *sec = NULL; /* the shard's strategy feedback for the step this message closes */
    size_t slen = 0;
    int rc = fsgd_wire_state_get(body, len, &off, &s, e, sizeof e);
    if (rc == 0 && (f.flags & FSGD_KFLAG_SECTION))
        rc = fsgd_wire_section_get(body, len, &off, &sec, &slen, e, sizeof e);
    if (rc < 0) {
        fsgd_kasm_forget(w->as, &f);
        reject(w, 1, "shard %u step %llu: %s", I, (unsigned long long)f.step, e);
        fsgd_wire_state_free(&s);
        return 0;
    }
    if (f.gen != w->gen && w->theta) { /* a new generation: every shard starts again from a snapshot */
        if (f.kind != FSGD_KMSG_SNAPSHOT) {
            fsgd_wire_state_free(&s);
            return 0;
        }
        if (w->gen) {
            w->stats->resyncs++;
            inflight_clear(&w->fl);
            for (uint32_t i = 0; i < S; i++) {
                w->sh_valid[i] = 0;
                if (fsgd_sworker_reset(w->sh_strat[i]))
                    w->stats->ef_discarded++;
            }
        }
        w->gen = f.gen;
        w->valid = 0;
    }
    if (f.kind == FSGD_KMSG_SNAPSHOT) {
        fsgd_wire_model_t mm;
        if (fsgd_wire_model_get(body, len, &off, &mm, e, sizeof e) < 0 || mm.shards != S || mm.shard != I) {
            if (mm.shards != S || mm.shard != I)
                snprintf(e, sizeof e, "a snapshot of shard %u of %u on shard %u's stream of %u", mm.shard,
                         mm.shards, I, S);
            fsgd_kasm_forget(w->as, &f);
            reject(w, 1, "shard %u step %llu: %s", I, (unsigned long long)f.step, e);
            fsgd_wire_state_free(&s);
            return 0;
        }
        if (w->sh_valid[I] && f.step < w->sh_step[I]) {
            fsgd_wire_state_free(&s);
            return 0;
        }
        if ((rc = setup_model(w, &mm)) < 0) {
            fsgd_wire_state_free(&s);
            return rc;
        }
        if (!w->gen)
            w->gen = f.gen;
        fsgd_wire_model_weights_strided(&mm, w->theta, S, I);
        if ((rc = fsgd_backend_load(w->be, w->theta, w->mdim, w->err, w->errsz)) < 0) {
            fsgd_wire_state_free(&s);
            return rc;
        }
        close_shard_step(w, I, f.gen, f.step, 1, sec, slen);
        w->sh_valid[I] = 1;
        w->sh_step[I] = f.step;
    } else {
        if (!w->sh_valid[I] || f.step <= w->sh_step[I]) {
            fsgd_wire_state_free(&s);
            return 0;
        }
        if (f.step != w->sh_step[I] + 1) { /* a delta is missing: wait for this shard's snapshot */
            w->sh_valid[I] = 0;
            w->valid = 0;
            w->stats->resyncs++;
            fsgd_wire_state_free(&s);
            return 0;
        }
        const uint64_t nloc = fsgd_shard_dim(w->mdim, I, S);
        fsgd_wire_cdelta_t cd = {0};
        if (f.kind == FSGD_KMSG_DELTA_CODED) {
            rc = fsgd_wire_cdelta_get(body, len, &off, &cd, e, sizeof e);
            if (rc == 0)
                rc = fsgd_sworker_downlink_decode(cd.msg, cd.msg_len, nloc, &w->delta, e, sizeof e);
        } else if (f.kind == FSGD_KMSG_DELTA_PACKED) {
            rc = fsgd_wire_pdelta_get(body, len, &off, nloc, &w->delta, e, sizeof e);
        } else {
            rc = fsgd_wire_delta_get(body, len, &off, nloc, &w->delta, e, sizeof e);
        }
        if (rc < 0) {
            fsgd_kasm_forget(w->as, &f);
            reject(w, 1, "shard %u step %llu: %s", I, (unsigned long long)f.step, e);
            fsgd_wire_state_free(&s);
            return 0;
        }
        for (size_t i = 0; i < w->delta.n; i++)
            w->delta.keys[i] = (uint32_t)fsgd_shard_global(w->delta.keys[i], I, S);
        if (f.kind == FSGD_KMSG_DELTA_CODED) {
            /* additive, the same float additions as the shard's replica */
            rc = fsgd_sworker_downlink_apply(w->theta, w->mdim, &w->delta, e, sizeof e);
            if (rc < 0) {
                w->sh_valid[I] = 0;
                w->valid = 0;
                reject(w, 1, "shard %u step %llu: %s", I, (unsigned long long)f.step, e);
                fsgd_wire_state_free(&s);
                return 0;
            }
            for (size_t i = 0; i < w->delta.n; i++)
                w->delta.vals[i] = w->theta[w->delta.keys[i]];
        } else {
            for (size_t i = 0; i < w->delta.n; i++)
                w->theta[w->delta.keys[i]] = w->delta.vals[i];
        }
        if ((rc = fsgd_backend_apply(w->be, w->delta.keys, w->delta.vals, w->delta.n, w->err, w->errsz)) < 0) {
            fsgd_wire_state_free(&s);
            return rc;
        }
        close_shard_step(w, I, f.gen, f.step,
                         f.kind == FSGD_KMSG_DELTA_CODED ? fsgd_wire_cdelta_applied(&cd, w->id) : 1, sec, slen);
        w->sh_step[I] = f.step;
        if (f.kind == FSGD_KMSG_DELTA_CODED && (cd.flags & FSGD_WIRE_CDELTA_CHECK)) {
            if (fsgd_downlink_checksum_strided(w->theta, nloc, S, I) != cd.check) {
                w->stats->replica_mismatch++;
                w->stats->resyncs++;
                w->sh_valid[I] = 0;
            }
        }
    }
    if (I == 0) { /* the leader's state: what the step after it takes */
        if (w->nlead == w->cap_lead) {
            size_t nc = w->cap_lead ? 2 * w->cap_lead : 16;
            struct lead_state *nl = realloc(w->lead, nc * sizeof *nl);
            if (!nl) {
                fsgd_wire_state_free(&s);
                return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
            }
            w->lead = nl;
            w->cap_lead = nc;
        }
        w->lead[w->nlead++] = (struct lead_state){f.step, (f.flags & FSGD_KFLAG_FINAL) != 0, s};
    } else {
        fsgd_wire_state_free(&s);
    }
    return combine_shards(w, f.gen, offset);
}

/* Whether this worker's next step, ahead of the model, has rows to take
 * (a worker with none answers each step only when it opens). */
static int rows_ahead(const worker_t *w)
{
    for (int i = 0; i < w->nassigned; i++) {
        int32_t p = w->assigned[i];
        if (p >= 0 && (uint32_t)p < w->st.nparts && w->next_pos[p] < w->st.end[p] && w->st.quota[p] > 0)
            return 1;
    }
    return 0;
}

/* May the worker send its next gradient now? Always once the model has
 * answered all it sent; up to τ steps ahead of the model when it has rows
 * for them (bounded staleness). */
static int may_send(worker_t *w)
{
    if (!w->valid || !w->have_assignment)
        return 0;
    uint64_t ahead = inflight_ahead(&w->fl, w->gen, w->step);
    if (ahead == 0) {
        w->hold = 0;
        return 1;
    }
    return ahead <= (uint64_t)w->tau && !w->hold && rows_ahead(w);
}

/* Sends one gradient body framed for step s to partition `shard` of NAME.grads. */
static int send_grad(worker_t *w, uint32_t shard, uint32_t gen, uint64_t s, uint16_t flags, const uint8_t *body,
                     size_t len)
{
    fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .flags = flags, .gen = gen, .sender = w->id, .step = s};
    return fsgd_bus_send(w->prod, w->tgrads, w->shards > 1 ? (int32_t)shard : FSGD_BUS_PARTITION_ANY, w->job->name,
                         &h, NULL, body, len, &w->stats->bytes_up, w->err, w->errsz);
}

/* A sharded job: the step's gradient (w->g, global keys) split by shard,
 * each part encoded by its shard's strategy and sent to its partition with
 * the same header (ranges, rows, loss). w->buf keeps the parts for a
 * resend: per shard u32 length, then the body. */
static int send_shard_parts(worker_t *w, fsgd_wire_grad_t *gm, uint64_t s, uint16_t flags)
{
    fsgd_wire_buf_t one = {0};
    double t0 = now_s();
    int rc = gm->rows ? fsgd_shard_split(&w->g, w->shards, w->sh_part) : 0;
    if (rc < 0)
        return fsgd_err_fmt(w->err, w->errsz, rc, "worker: out of memory");
    w->buf.n = 0;
    double t_part = t0; /* each part's message carries its own encode time (the split with part 0's) */
    /* every shard runs the same spec: the whole's scale once for all parts */
    double whole = gm->rows ? fsgd_sworker_whole_scale(w->sh_strat[0], w->g.vals, w->g.n) : NAN;
    for (uint32_t i = 0; i < w->shards && !rc; i++) {
        size_t elen = 0;
        if (gm->rows) {
            const fsgd_sparse_t *part = &w->sh_part[i];
            size_t cap = fsgd_sworker_bound(w->sh_strat[i], part->n);
            if (cap > w->enc_cap) {
                uint8_t *ne = realloc(w->enc, cap);
                if (!ne) {
                    rc = fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
                    break;
                }
                w->enc = ne;
                w->enc_cap = cap;
            }
            fsgd_sworker_set_whole(w->sh_strat[i], whole);
            rc = fsgd_sworker_encode(w->sh_strat[i], part->keys, part->vals, part->n, gm->rows, w->enc, w->enc_cap,
                                     &elen, w->err, w->errsz);
        }
        gm->codec = w->enc;
        gm->codec_len = (uint32_t)elen;
        double t_done = now_s();
        gm->t_encode = t_done - t_part;
        t_part = t_done;
        one.n = 0;
        if (!rc)
            rc = fsgd_wire_grad_put(&one, gm);
        if (!rc)
            rc = fsgd_wire_u32(&w->buf, (uint32_t)one.n) | fsgd_wire_put(&w->buf, one.p, one.n) ? FSGD_E_NOMEM : 0;
        if (!rc)
            rc = send_grad(w, i, w->gen, s, flags, one.p, one.n);
    }
    w->stats->t_encode += now_s() - t0;
    free(one.p);
    return rc;
}

/* Sends again an inflight body (a sharded one: each part to its shard). */
static int resend_body(worker_t *w, const inflight_t *e)
{
    if (w->shards == 1)
        return send_grad(w, 0, e->gen, e->step, e->flags, e->body.p, e->body.n);
    size_t off = 0;
    for (uint32_t i = 0; i < w->shards && off + 4 <= e->body.n; i++) {
        uint32_t n = fsgd_le_get32(e->body.p + off);
        off += 4;
        if (n > e->body.n - off)
            break;
        FSGD_TRY(send_grad(w, i, e->gen, e->step, e->flags, e->body.p + off, n));
        off += n;
    }
    return 0;
}

static int do_step(worker_t *w)
{
    uint64_t ahead = inflight_ahead(&w->fl, w->gen, w->step);
    uint64_t s = w->step + 1 + ahead; /* computed on the model of step s - 1 - ahead */
    const uint64_t *pos = w->next_pos;
    fsgd_csr_clear(&w->batch);
    fsgd_wire_range_t ranges[1024];
    fsgd_wire_range_t *rg = w->nassigned <= 1024 ? ranges : malloc(w->nassigned * sizeof *rg);
    if (!rg)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    uint32_t nr = 0;
    int rc = load_pending(w);
    for (int i = 0; i < w->nassigned && !rc; i++) {
        int32_t p = w->assigned[i];
        if (p < 0 || (uint32_t)p >= w->st.nparts)
            continue;
        if (pos[p] >= w->st.end[p] || w->st.quota[p] == 0)
            continue;
        rc = load_partition(w, (uint32_t)p);
        if (rc)
            break;
        pcache_t *c = &w->cache[p];
        /* Whole messages, as many as come nearest the quota (a row block
         * holds many rows), and one at least; messages of no rows (a bad
         * row skipped) go with the rows before them, never alone */
        uint64_t o = pos[p], first = c->row_of[o - c->start];
        while (o < c->end) {
            uint64_t taken = c->row_of[o - c->start] - first, next = c->row_of[o + 1 - c->start] - (first + taken);
            if (taken > 0 && next > 0 && 2 * taken + next >= 2 * (uint64_t)w->st.quota[p])
                break;
            o++;
        }
        uint64_t last = c->row_of[o - c->start];
        if (last > first)
            rc = fsgd_csr_append_rows(&w->batch, &c->rows, first, last - first);
        rg[nr++] = (fsgd_wire_range_t){(uint32_t)p, pos[p], o};
    }
    fsgd_wire_grad_t gm = {.epoch = w->st.epoch, .nranges = nr, .rows = w->batch.n_rows, .ranges = rg};
    double loss = 0;
    if (!rc && w->batch.n_rows > 0) {
        double t0 = now_s();
        /* The data topic never changes at an offset, so the ranges name the
         * batch's content: a device backend may keep it resident and reuse it
         * when the same ranges come round next epoch. FNV-1a, 62 bits. */
        uint64_t id = 1469598103934665603ull;
        for (uint32_t i = 0; i < nr; i++) {
            uint64_t parts[3] = {rg[i].part, rg[i].start, rg[i].end};
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 8; k++)
                    id = (id ^ ((parts[j] >> (8 * k)) & 0xFF)) * 1099511628211ull;
        }
        fsgd_grad_request_t req = {.batch = &w->batch, .batch_id = (int64_t)(id >> 2), .loss = (fsgd_loss_kind_t)w->kind,
                                   .scale = 1.0, .l2 = 0};
        /* Adam strategies: the aggregator adds λθ once (agg_step.c). A strategy
         * whose workers run the optimizer (efsign) gets λ in its gradient sum,
         * λθ per row on the replica's touched keys, so --l2 is the same
         * objective for every strategy. */
        if (fsgd_sworker_optimizer(w->strat) == FSGD_OPT_APPLY && w->job->l2 > 0)
            req.l2 = w->job->l2 * (double)w->batch.n_rows;
        /* A device that encodes on the card hands back only the message
         * (gradient and encoding fused; its time counts as gradient). */
        fsgd_codec_t *dc = fsgd_sworker_device_codec(w->strat);
        int fused = w->shards == 1 && dc && fsgd_backend_encodes_on_device(w->be, dc);
        size_t cap = 0, elen = 0, raw_entries = 0;
        if (fused) {
            cap = fsgd_backend_encoded_bound(dc, &w->batch);
        } else {
            rc = fsgd_backend_gradient(w->be, &req, &w->g, &loss, w->err, w->errsz);
            cap = fsgd_sworker_bound(w->strat, w->g.n);
            raw_entries = w->g.n;
        }
        double t1 = now_s();
        if (!rc && cap > w->enc_cap) {
            uint8_t *ne = realloc(w->enc, cap);
            if (!ne)
                rc = fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
            else {
                w->enc = ne;
                w->enc_cap = cap;
            }
        }
        if (!rc && fused) {
            rc = fsgd_backend_gradient_encoded(w->be, &req, dc, w->enc, w->enc_cap, &elen, &loss, w->err,
                                               w->errsz);
            fsgd_codec_stats_t cst;
            fsgd_codec_last_stats(dc, &cst);
            raw_entries = cst.n_in;
            t1 = now_s();
        } else if (!rc && w->shards == 1) {
            rc = fsgd_sworker_encode(w->strat, w->g.keys, w->g.vals, w->g.n, gm.rows, w->enc, w->enc_cap, &elen,
                                     w->err, w->errsz);
        }
        double t2 = now_s();
        gm.loss_sum = loss;
        gm.t_grad = t1 - t0;
        gm.t_encode = t2 - t1;
        gm.raw_entries = raw_entries;
        gm.codec = w->enc;
        gm.codec_len = (uint32_t)elen;
        w->stats->t_grad += gm.t_grad;
        w->stats->t_encode += gm.t_encode;
    } else if (!rc) {
        /* Nothing to contribute (no partitions, or ours are done for the
         * epoch): answer the barrier without spinning. */
        struct timespec ns = {0, 20 * 1000000};
        nanosleep(&ns, NULL);
    }
    uint16_t flags = (uint16_t)(ahead << FSGD_KFLAG_LAG_SHIFT);
    if (!rc && w->shards > 1) {
        rc = send_shard_parts(w, &gm, s, flags);
    } else if (!rc) {
        w->buf.n = 0;
        rc = fsgd_wire_grad_put(&w->buf, &gm);
        fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .flags = flags, .gen = w->gen, .sender = w->id, .step = s};
        if (!rc)
            rc = fsgd_bus_send(w->prod, w->tgrads, FSGD_BUS_PARTITION_ANY, w->job->name, &h, NULL, w->buf.p,
                               w->buf.n, &w->stats->bytes_up, w->err, w->errsz);
    }
    if (!rc && inflight_push(&w->fl, s, w->gen, flags, gm.rows, rg, nr, w->buf.p, w->buf.n) < 0)
        rc = fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    for (uint32_t i = 0; !rc && i < nr; i++)
        w->next_pos[rg[i].part] = rg[i].end;
    if (rg != ranges)
        free(rg);
    if (rc)
        return rc;
    w->sent_gen = w->gen;
    w->sent_step = s;
    w->sent_at = w->last_send = now_s();
    w->stats->steps_sent++;
    w->stats->rows += gm.rows;
    if (w->on_step) /* the caller's hook (/metrics) */
        w->on_step(w->log_ctx, w->stats);
    return 0;
}

/* The step the worker waits for and who owes it: "the aggregator", or the
 * shards whose model is behind the others' (a sharded job). */
static void owed_by(const worker_t *w, char *who, size_t cap)
{
    if (w->shards <= 1) {
        snprintf(who, cap, "the aggregator");
        return;
    }
    uint64_t newest = 0;
    for (uint32_t i = 0; i < w->shards; i++)
        if (w->sh_valid[i] && w->sh_step[i] > newest)
            newest = w->sh_step[i];
    size_t n = (size_t)snprintf(who, cap, "aggregator shard");
    int listed = 0;
    for (uint32_t i = 0; i < w->shards && n < cap; i++)
        if (!w->sh_valid[i] || w->sh_step[i] < newest) {
            n += (size_t)snprintf(who + n, cap - n, "%s %u (at step %llu)", listed++ ? "," : "", i,
                                  w->sh_valid[i] ? (unsigned long long)w->sh_step[i] : 0ULL);
        }
    if (!listed)
        snprintf(who, cap, "every aggregator shard (all at step %llu)", (unsigned long long)newest);
}

/* Called each turn of the loop (ready: may_send's answer). A worker
 * without a model (none yet, or resyncing) says what it waits for; one
 * whose gradients go unanswered says so too, and fails with FSGD_E_TIMEOUT
 * once no message has come on the model topic for the give-up time (one
 * without a model does not give up: a job's aggregator may take long to
 * scan its data before its first snapshot). */
static int check_model_wait(worker_t *w, int ready)
{
    int kind = !w->valid ? 1 : !ready && w->have_assignment && inflight_ahead(&w->fl, w->gen, w->step) > 0 ? 2 : 0;
    if (!kind && !w->wait_kind)
        return 0; /* the steady state: no clock read on the step loop */
    double t = now_s();
    if (kind != w->wait_kind) {
        w->wait_kind = kind;
        w->wait_since = w->wait_logged = t;
    }
    if (!kind)
        return 0;
    const double step_s = w->job->step_timeout_ms / 1000.0, give_up = step_s * WAIT_GIVE_UP_STEPS;
    double say_every = step_s * WAIT_SAY_STEPS;
    say_every = say_every < 1 ? 1 : say_every > WAIT_SAY_MAX_S ? WAIT_SAY_MAX_S : say_every;
    double since = w->model_seen > w->wait_since ? w->model_seen : w->wait_since;
    char who[256];
    if (kind == 2 && t - since >= give_up) {
        owed_by(w, who, sizeof who);
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_TIMEOUT,
                            "worker: no message on %s for %.0f s while waiting for the model after step %llu from "
                            "%s: giving up (is the aggregator running?)",
                            w->tmodel, t - since, (unsigned long long)w->step, who);
    }
    if (t - w->wait_logged < say_every || !w->log)
        return 0;
    w->wait_logged = t;
    owed_by(w, who, sizeof who);
    char line[512];
    if (kind == 2)
        snprintf(line, sizeof line,
                 "waiting %.0f s for the model after step %llu from %s (%llu gradients resent; gives up after "
                 "%.0f s without a message on %s)",
                 t - w->wait_since, (unsigned long long)w->step, who, (unsigned long long)w->stats->resends, give_up,
                 w->tmodel);
    else
        snprintf(line, sizeof line, "waiting %.0f s for a snapshot of the model on %s from %s%s", t - w->wait_since,
                 w->tmodel, who, w->have_assignment ? "" : ", and for data partitions from the consumer group");
    w->log(w->log_ctx, line);
    return 0;
}

static uint32_t random_id(void)
{
    uint32_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&v, sizeof v, 1, f) != 1)
            v = 0;
        fclose(f);
    }
    v ^= (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
    return v ? v : 1;
}

int fsgd_worker_run(const fsgd_job_t *job, uint32_t id, volatile int *stop, fsgd_worker_stats_t *st,
                    fsgd_worker_step_fn on_step, fsgd_dist_log_fn log, void *log_ctx, char *err, size_t errsz)
{
    fsgd_bus_t *bus = fsgd_bus_kafka_new(job->brokers, err, errsz);
    if (!bus) {
        memset(st, 0, sizeof *st);
        return FSGD_E_NOMEM;
    }
    int rc = fsgd_worker_run_bus(bus, job, id, stop, st, on_step, log, log_ctx, err, errsz);
    fsgd_bus_destroy(bus);
    return rc;
}

int fsgd_worker_run_bus(fsgd_bus_t *bus, const fsgd_job_t *job, uint32_t id, volatile int *stop,
                        fsgd_worker_stats_t *st, fsgd_worker_step_fn on_step, fsgd_dist_log_fn log, void *log_ctx,
                        char *err, size_t errsz)
{
    memset(st, 0, sizeof *st);
    worker_t *w = calloc(1, sizeof *w);
    if (!w)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "worker: out of memory");
    w->job = job;
    w->id = id ? id : random_id();
    w->shards = job->shards > 1 ? (uint32_t)job->shards : 1;
    w->stats = st;
    w->log = log;
    w->on_step = on_step;
    w->log_ctx = log_ctx;
    w->err = err;
    w->errsz = errsz;
    fsgd_kbus_topic(w->tdata, sizeof w->tdata, job->name, "data");
    fsgd_kbus_topic(w->tgrads, sizeof w->tgrads, job->name, "grads");
    fsgd_kbus_topic(w->tmodel, sizeof w->tmodel, job->name, "model");
    fsgd_kbus_topic(w->tctl, sizeof w->tctl, job->name, "ctl");
    char group[128];
    fsgd_kbus_topic(group, sizeof group, job->name, "workers");
    int rc = fsgd_rowfmt_init(&w->fmt, job->format, job->hash_bits, job->skip_bad, err, errsz);
    if (!rc && !(w->as = fsgd_kasm_new()))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "worker: out of memory");
    if (!rc && !(w->prod = fsgd_bus_client_new(bus, FSGD_KCLIENT_PRODUCER, err, errsz)))
        rc = FSGD_E_KAFKA;
    /* The producer learns where NAME.grads and NAME.ctl live now, not at
     * their first message: an unknown topic's metadata came back only after
     * librdkafka's refresh backoff, and step 1 waited half a second for it
     * (the first worker_assignment on NAME.ctl reached the broker 0.9 s
     * after it was made, and the aggregator waited for it). */
    if (!rc) {
        fsgd_bus_partitions(w->prod, w->tgrads, 5000, NULL, 0);
        fsgd_bus_partitions(w->prod, w->tctl, 5000, NULL, 0);
    }
    if (!rc && !(w->fetch = fsgd_bus_client_new(bus, FSGD_KCLIENT_READER, err, errsz)))
        rc = FSGD_E_KAFKA;
    if (!rc && !(w->model_c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, errsz)))
        rc = FSGD_E_KAFKA;
    if (!rc && w->shards > 1) {
        int P = fsgd_bus_partitions(w->model_c, w->tmodel, 10000, err, errsz);
        if (P >= 0 && P < (int)w->shards)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                              "worker: %s has %d partition%s, and %u aggregator shards (--shards) need one each: is the "
                              "job sharded?", w->tmodel, P, P == 1 ? "" : "s", w->shards);
        else if (P < 0)
            rc = P;
    }
    if (!rc) {
        /* the model from its start; NAME.ctl from now on (job_end events);
         * a sharded job: every shard's partition */
        fsgd_bus_tp_t l[FSGD_SHARDS_MAX + 1];
        int n = 0;
        for (uint32_t i = 0; i < w->shards; i++)
            l[n++] = (fsgd_bus_tp_t){w->tmodel, (int32_t)i, FSGD_BUS_OFFSET_BEGINNING};
        int64_t lo = 0, hi = 0;
        if (fsgd_bus_watermarks(w->model_c, w->tctl, 0, &lo, &hi, 5000, NULL, 0) == 0)
            l[n++] = (fsgd_bus_tp_t){w->tctl, 0, hi};
        w->ctl_read = n == (int)w->shards + 1;
        rc = fsgd_bus_assign(w->model_c, l, n, err, errsz);
    }
    if (!rc && !(w->group = fsgd_bus_group_new(bus, group, w->tdata, on_rebalance, w, err, errsz)))
        rc = FSGD_E_KAFKA;
    /* a quarter of the aggregator's patience, so it sees a resend before it
     * drops this worker */
    double resend_s = job->step_timeout_ms / 4000.0;
    if (resend_s < 1)
        resend_s = 1;
    w->tau = fsgd_strategy_max_lag(job->codec, job->staleness);
    /* not on the embedded cluster, whose partitions are read slowly
     * (70-100 ms each: reading 87 ahead held the first model 9 s) */
    w->prefetch_on = job->brokers[0] && !fsgd_kbus_is_mock(job->brokers);
    while (!rc && !w->final && !(stop && *stop)) {
        int ready = may_send(w);
        /* blocked on the model: what the step's round trip costs this worker */
        double tw = !ready && w->valid && w->have_assignment ? now_s() : 0;
        fsgd_bus_msg_t *m = fsgd_bus_poll(w->model_c, ready ? 0 : 5);
        if (tw > 0)
            w->stats->t_wait += now_s() - tw;
        if (m) {
            if (m->topic && !strcmp(m->topic, w->tmodel)) /* NAME.ctl's events are other roles' */
                w->model_seen = now_s();
            rc = handle_model(w, m);
            fsgd_bus_msg_destroy(m);
            continue;
        }
        fsgd_bus_msg_destroy(fsgd_bus_poll(w->group, 0));
        if (!w->valid)
            fsgd_bus_group_nudge(w->group); /* before step 1: the group's join, now */
        if (w->assign_dirty) {
            w->assign_dirty = 0;
            report_assignment(w, "worker_assignment");
        }
        fsgd_bus_serve(w->prod);
        rc = check_model_wait(w, ready);
        if (rc)
            break;
        if (ready && !w->final)
            rc = do_step(w);
        else if (!w->valid && w->have_assignment && !w->prefetch_done &&
                 (w->prefetch_due || (w->prefetch_on && now_s() - w->prefetch_last >= PREFETCH_EVERY_S)))
            prefetch_more(w);
        else if (!ready && w->valid && inflight_ahead(&w->fl, w->gen, w->step) > 0 &&
                 now_s() - w->last_send > resend_s) {
            /* The steps are not answered: a gradient may have been dropped
             * by the broker (or the aggregator dropped us meanwhile). Send
             * the same messages again; a copy is dropped as a duplicate. */
            for (size_t i = 0; !rc && i < w->fl.n; i++) {
                const inflight_t *e = &w->fl.e[i];
                if (e->gen != w->gen || e->step <= w->step)
                    continue;
                rc = resend_body(w, e);
                w->stats->resends++;
            }
            w->last_send = now_s();
        }
    }
    unpark(w, 1);
    if (w->prod) {
        w->nassigned = 0;
        w->have_assignment = 0;
        report_assignment(w, "worker_leave");
    }
    if (w->prod)
        fsgd_bus_flush(w->prod, 5000, NULL, 0); /* what is left is dropped below */
    fsgd_bus_client_destroy(w->group);
    fsgd_bus_client_destroy(w->model_c);
    fsgd_bus_client_destroy(w->fetch);
    fsgd_bus_client_destroy(w->prod);
    for (uint32_t i = 0; i < w->ncache; i++) {
        fsgd_csr_free(&w->cache[i].rows);
        free(w->cache[i].row_of);
    }
    free(w->cache);
    free(w->wm_lo);
    free(w->wm_hi);
    fsgd_backend_destroy(w->be);
    fsgd_sworker_destroy(w->strat);
    for (uint32_t i = 0; i < w->shards; i++) {
        fsgd_sworker_destroy(w->sh_strat[i]);
        fsgd_sparse_free(&w->sh_part[i]);
    }
    for (size_t i = 0; i < w->nlead; i++)
        fsgd_wire_state_free(&w->lead[i].st);
    free(w->lead);
    free(w->theta);
    free(w->assigned);
    fsgd_kasm_destroy(w->as);
    fsgd_csr_free(&w->batch);
    fsgd_csr_free(&w->tmp);
    fsgd_sparse_free(&w->g);
    fsgd_sparse_free(&w->delta);
    free(w->buf.p);
    free(w->enc);
    fsgd_wire_state_free(&w->st);
    inflight_free(&w->fl);
    free(w->next_pos);
    fsgd_cj_free(&w->cj);
    st->hop_model_ms_p50 = fsgd_klat_quantile(&w->lat_model, 0.5);
    st->hop_model_ms_p99 = fsgd_klat_quantile(&w->lat_model, 0.99);
    free(w);
    return rc;
}
