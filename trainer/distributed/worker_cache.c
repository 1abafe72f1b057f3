/* NAME.data's partitions this worker reads: by offset through the fetch
 * consumer, parsed once and cached (like RDD.cache), read ahead of the first
 * model while the producer writes (worker_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/clock.h"
#include "worker_internal.h"

typedef struct load_ctx {
    worker_t *w;
    pcache_t *c;
    int raw; /* rows as they are (prefetch): the model's shape is not known yet */
} load_ctx_t;

/* 1 when the row message being read is a copy of one its producer wrote
 * before (fsgd/replay.h): read as no rows, as the aggregator reads it. */
static int row_replayed(worker_t *w, int32_t partition, int64_t offset, char *err, size_t errsz)
{
    uint64_t before = fsgd_replay_count(w->replay_rows, NULL, 0);
    int rp = fsgd_replay_row(w->replay_rows, partition, offset);
    if (rp < 0)
        return fsgd_err_fmt(err, errsz, rp, "worker: out of memory");
    if (fsgd_replay_count(w->replay_rows, NULL, 0) > before)
        worker_reject(w, REJECT_REPLAY, "%s partition %d offset %lld: a copy of a row message its producer wrote "
                      "before: read as no rows", w->topic.data, (int)partition, (long long)offset);
    return rp;
}

static int catch_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                     size_t errsz)
{
    (void)val;
    (void)len;
    int rp = row_replayed(ctx, partition, offset, err, errsz);
    return rp < 0 ? rp : 0;
}

static int data_watermarks(worker_t *w, uint32_t p, uint64_t need, int64_t *lo, int64_t *hi);

/* Whether a row message is a replay depends on every message before it
 * (fsgd/replay.h): a partition first read from a window that starts past
 * what this worker has read of it (follow: a window after a rebalance, or
 * a resumed job's) is read from there to the window's start first, as the
 * aggregator, which reads the whole topic, has. */
static int catch_up(worker_t *w, uint32_t p, uint64_t start)
{
    int64_t next = fsgd_replay_next(w->replay_rows, (int32_t)p);
    if (next >= (int64_t)start)
        return 0;
    int64_t lo = 0, hi = 0;
    FSGD_TRY(data_watermarks(w, p, start, &lo, &hi));
    int64_t from = next > lo ? next : lo;
    if (from >= (int64_t)start)
        return 0;
    const fsgd_bus_range_t r = {.topic = w->topic.data, .partition = (int32_t)p, .start = from,
                                .end = (int64_t)start, .timeout_ms = 30000, .mode = FSGD_BUS_READ_ROWS,
                                .fn = catch_msg, .ctx = w};
    return fsgd_bus_read_range(w->fetch, &r, w->err, w->errsz);
}

static int load_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                    size_t errsz)
{
    load_ctx_t *l = ctx;
    worker_t *w = l->w;
    pcache_t *c = l->c ? l->c : &w->cache[partition]; /* NULL: several partitions at once */
    char src[200];
    snprintf(src, sizeof src, "topic %s partition %d offset %lld", w->topic.data, (int)partition, (long long)offset);
    fsgd_csr_clear(&w->tmp);
    int rp = row_replayed(w, partition, offset, err, errsz);
    if (rp < 0)
        return rp;
    /* a bad row fails here as in the aggregator's scan, or (skip_bad) is
     * skipped as the scan skipped and reported it */
    long n = rp ? 0 : fsgd_rowfmt_parse_msg(&w->fmt, val, len, src, &w->tmp, NULL, err, errsz);
    if (n < 0)
        return (int)n;
    if (!l->raw && w->job->train->skip_bad && w->tmp.max_col > w->dim) {
        /* a feature past the model's dim: with skip_bad the message holds
         * no rows, as the aggregator reads it (agg_follow.c) */
        fsgd_csr_clear(&w->tmp);
    }
    for (size_t r = 0; r < w->tmp.n_rows; r++) {
        uint64_t lo = w->tmp.row_ptr[r], hi = w->tmp.row_ptr[r + 1];
        if (l->raw) {
            FSGD_TRY(fsgd_csr_append_row(&c->rows, w->tmp.label[r], w->tmp.col + lo, w->tmp.val + lo, hi - lo));
            if (w->job->train->bias) {
                /* the intercept's place, so that finish_raw need not copy
                 * the rows to make room for it */
                uint32_t zero = 0;
                float bv = (float)w->job->train->bias_value;
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
        int rc = fsgd_bus_watermarks_all(w->fetch, w->topic.data, (int)w->ncache, w->wm_lo, w->wm_hi, 10000, w->err,
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
    if (c->bias_slot && w->has_bias && w->bias == (float)w->job->train->bias_value) {
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
                            (unsigned long long)w->step, w->topic.data, p, (unsigned long long)c->start,
                            (unsigned long long)c->end, (long long)lo, (long long)hi, w->topic.model);
    c->row_of = calloc(c->end - c->start + 1, sizeof *c->row_of);
    if (!c->row_of)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory caching partition %u", p);
    return 1;
}

/* The partitions this step will read that are not cached for the model's
 * positions, read at once: one fetch serves them all (a partition at a
 * time, each paid its own start: 70 ms a partition on the embedded
 * cluster, whose 1M rows of 2^20 come in 170 partitions). */
int worker_load_pending(worker_t *w)
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
        if (r == 1) {
            int cu = catch_up(w, (uint32_t)p, w->cache[p].start);
            if (cu < 0)
                r = cu;
        }
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
        rc = fsgd_bus_read_rows_parts(w->fetch,
                                      &(fsgd_bus_ranges_t){.topic = w->topic.data, .n = n, .parts = parts,
                                                           .starts = lo, .ends = hi, .timeout_ms = 30000,
                                                           .fn = load_msg, .ctx = &l},
                                      w->err, w->errsz);
    for (int i = 0; !rc && i < n; i++)
        w->cache[parts[i]].loaded = 1;
    free(parts);
    free(lo);
    free(hi);
    return rc;
}

int worker_load_partition(worker_t *w, uint32_t p)
{
    int r = prepare_partition(w, p);
    if (r <= 0)
        return r;
    pcache_t *c = &w->cache[p];
    FSGD_TRY(catch_up(w, p, c->start));
    load_ctx_t l = {w, c, 0};
    const fsgd_bus_range_t range = {.topic = w->topic.data, .partition = (int32_t)p, .start = (int64_t)c->start,
                                    .end = (int64_t)c->end, .timeout_ms = 30000, .mode = FSGD_BUS_READ_ROWS,
                                    .fn = load_msg, .ctx = &l};
    FSGD_TRY(fsgd_bus_read_range(w->fetch, &range, w->err, w->errsz));
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
void worker_prefetch_more(worker_t *w)
{
    int final = w->prefetch_due;
    w->prefetch_last = fsgd_clock_s();
    if (!w->ncache) {
        int P = fsgd_bus_partitions(w->fetch, w->topic.data, 10000, w->err, w->errsz);
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
                 ? fsgd_bus_watermarks_all(w->fetch, w->topic.data, (int)w->ncache, wlo, whi, 10000, w->err, w->errsz)
                 : -1;
    /* while the group still spreads its partitions (a first member holds
     * them all), reading them would be reading another worker's share */
    int spread = final || w->job->dist->workers < 1 ||
                 (uint32_t)w->nassigned <= (w->ncache + (uint32_t)w->job->dist->workers - 1) / (uint32_t)w->job->dist->workers;
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
        rc = fsgd_bus_read_rows_parts(w->fetch,
                                      &(fsgd_bus_ranges_t){.topic = w->topic.data, .n = n, .parts = parts,
                                                           .starts = lo, .ends = hi, .timeout_ms = 30000,
                                                           .fn = load_msg, .ctx = &l},
                                      w->err, w->errsz);
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
                     w->topic.data);
            w->log(w->log_ctx, line);
        }
    }
    free(wlo);
    free(whi);
    free(parts);
    free(lo);
    free(hi);
}
