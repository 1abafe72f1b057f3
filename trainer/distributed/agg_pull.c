/* Working-set workers' pulls (job key replica working_set; pull.h): the
 * keys a worker's next step uses come on NAME.grads, their values go back
 * on the worker's partition of NAME.pull. A pull is answered at once with
 * the values now: the worker asks for the model of a step it has seen, so
 * this aggregator has it, and anything newer is only fresher (a value is
 * still at most τ steps old). Answering is idempotent, so a resent pull is
 * answered again rather than dropped as a duplicate. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/half.h"
#include "fsgd/keys.h"
#include "aggregator_internal.h"
#include "pull.h"

/* Bytes of key lists a shard keeps for key caching: the lists of ~8M CTR
 * rows of 40 keys a row (a list holds ~1.6 bytes a key); a longer epoch
 * names the lists of its first 8M rows by id. */
#define PULL_CACHE_BUDGET ((size_t)512 << 20)

static int pull_open(agg_t *a)
{
    if (a->pull.as)
        return 0;
    if (!(a->pull.as = fsgd_kasm_new()))
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    /* a pull holds at most every key of the model, delta-coded (<= 5 B a key) */
    size_t msg = 65536 + (size_t)a->mdim * 5;
    fsgd_kasm_set_limits(a->pull.as, msg, msg * 4 < ((size_t)64 << 20) ? (size_t)64 << 20 : msg * 4);
    a->pull.cache.budget = PULL_CACHE_BUDGET;
    return 0;
}

/* A VALUES body for the request of f (its key list keys_crc), sent to its
 * worker's partition of NAME.pull. */
static int send_values(agg_t *a, const fsgd_kframe_t *f, uint32_t keys_crc, uint32_t n, unsigned flags)
{
    a->pull.buf.n = 0;
    /* a lossy downlink (the strategy's, or the job's downlink key): halves,
     * unless a value is past the largest half */
    const int half = a->pull.halves && fsgd_half_fits(a->pull.vals, n);
    if (fsgd_values_put(&a->pull.buf, f->sender, a->step, keys_crc, a->pull.vals, n, half, flags) < 0)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory for a pull's answer");
    fsgd_kframe_t h = {.kind = FSGD_KMSG_VALUES, .gen = a->gen, .sender = a->shard, .step = f->step};
    uint64_t before = a->pull.bytes;
    const fsgd_bus_out_t out = {.topic = a->topic.pull, .partition = fsgd_pull_partition(f->sender),
                                .job = a->job->dist->name, .hdr = &h, .val = a->pull.buf.p, .len = a->pull.buf.n};
    FSGD_TRY(fsgd_bus_send(a->prod, &out, &a->pull.bytes, a->err, a->errsz));
    a->s->bytes_down += a->pull.bytes - before;
    a->s->bytes_values += a->pull.bytes - before;
    a->pull.answered++;
    a->s->pulls_answered++;
    fsgd_bus_serve(a->prod);
    return 0;
}

/* The worker saw no model message of step need from this process. */
static int need_forged(agg_t *a, const fsgd_kframe_t *f, uint64_t need)
{
    if (need <= a->step)
        return 0;
    agg_reject(a, FSGD_AGG_REJ_FORGED, "sender %u pull for step %llu asks for the model of step %llu, this "
               "aggregator's is %llu", f->sender, (unsigned long long)f->step, (unsigned long long)need,
               (unsigned long long)a->step);
    return 1;
}

/* The key block a pull sends or names: *block NULL when the pull was
 * rejected or answered (a named list not held: a miss). */
static int pull_block(agg_t *a, const fsgd_kframe_t *f, const uint8_t *body, size_t len, const uint8_t **block,
                      size_t *blen, uint32_t *crc)
{
    char e[256];
    *block = NULL;
    const int by_id = (f->flags & FSGD_KFLAG_BY_ID) != 0;
    fsgd_pull_t pl;
    fsgd_pull_ref_t ref;
    if ((by_id ? fsgd_pull_ref_get(body, len, a->mdim, &ref, e, sizeof e)
               : fsgd_pull_get(body, len, a->mdim, &pl, e, sizeof e)) < 0) {
        agg_reject(a, FSGD_AGG_REJ_CORRUPT, "sender %u pull for step %llu: %s", f->sender,
                   (unsigned long long)f->step, e);
        return 0;
    }
    if (need_forged(a, f, by_id ? ref.need : pl.need))
        return 0;
    if (!by_id) {
        *block = pl.block;
        *blen = pl.block_len;
        *crc = fsgd_crc32c(0, pl.block, pl.block_len);
        return 0;
    }
    const pull_cache_slot_t *kept = pull_cache_find(&a->pull.cache, ref.id);
    if (!kept || kept->n != ref.n || kept->crc != ref.keys_crc) {
        /* restarted, or full when the list came: the worker sends the keys */
        a->s->pull_misses++;
        return send_values(a, f, ref.keys_crc, 0, FSGD_VALUES_MISS);
    }
    a->s->pulls_by_id++;
    *block = kept->block;
    *blen = kept->len;
    *crc = kept->crc;
    return 0;
}

static int answer(agg_t *a, const fsgd_kframe_t *f, const uint8_t *body, size_t len)
{
    const uint8_t *block;
    size_t blen = 0;
    uint32_t crc = 0;
    char e[256];
    FSGD_TRY(pull_block(a, f, body, len, &block, &blen, &crc));
    if (!block)
        return 0;
    uint32_t n = 0;
    if (fsgd_keys_peek(block, blen, a->mdim, &n, &(size_t){0}, e, sizeof e) < 0) {
        agg_reject(a, FSGD_AGG_REJ_CORRUPT, "sender %u pull for step %llu: keys: %s", f->sender,
                   (unsigned long long)f->step, e);
        return 0;
    }
    if (n > a->pull.cap_keys) {
        uint32_t *k = realloc(a->pull.keys, n * sizeof *k);
        float *v = realloc(a->pull.vals, n * sizeof *v);
        if (k)
            a->pull.keys = k;
        if (v)
            a->pull.vals = v;
        if (!k || !v)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory for a pull");
        a->pull.cap_keys = n;
    }
    if (fsgd_keys_decode(block, blen, a->mdim, a->pull.keys, n, &n, e, sizeof e) < 0) {
        agg_reject(a, FSGD_AGG_REJ_CORRUPT, "sender %u pull for step %llu: keys: %s", f->sender,
                   (unsigned long long)f->step, e);
        return 0;
    }
    const fsgd_adam_t *adam = &a->model.adam;
    if (a->model.table) /* a key never touched answers its initial 0 */
        for (uint32_t i = 0; i < n; i++)
            a->pull.vals[i] = fsgd_sparse_table_theta(a->model.table, adam, a->pull.keys[i]);
    else
        for (uint32_t i = 0; i < n; i++)
            a->pull.vals[i] = adam->theta[a->pull.keys[i]];
    int kept = 1; /* a named list is held */
    if (!(f->flags & FSGD_KFLAG_BY_ID)) {
        kept = pull_cache_put(&a->pull.cache, pull_list_id(block, blen), n, crc, block, blen);
        if (kept == FSGD_E_NOMEM)
            kept = 0; /* the answer goes without: the list is sent again next time */
        a->s->pull_lists_kept = a->pull.cache.used;
        a->s->pull_bytes_kept = a->pull.cache.bytes;
    }
    return send_values(a, f, crc, n, kept > 0 ? FSGD_VALUES_KEPT : 0);
}

int agg_take_pull(agg_t *a, const fsgd_kframe_t *f, int64_t offset)
{
    FSGD_TRY(pull_open(a));
    const uint8_t *body;
    size_t len;
    char e[256];
    int r = fsgd_kasm_feed(a->pull.as, f, &body, &len, e, sizeof e);
    if (r == FSGD_E_FORMAT) { /* chunks that disagree with pending ones: the newest wins */
        fsgd_kasm_forget(a->pull.as, f);
        r = fsgd_kasm_feed(a->pull.as, f, &body, &len, e, sizeof e);
    }
    if (r == FSGD_E_NOMEM)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: %s", e);
    if (r < 0) {
        agg_reject(a, r == FSGD_E_RANGE ? FSGD_AGG_REJ_OVERSIZE : FSGD_AGG_REJ_CORRUPT, "offset %lld: pull: %s",
                   (long long)offset, e);
        return 0;
    }
    if (r != FSGD_KASM_DONE) /* chunks to come, or a copy of a chunk pending */
        return 0;
    int rc = answer(a, f, body, len);
    fsgd_kasm_forget(a->pull.as, f); /* a resend is answered again */
    fsgd_kasm_prune(a->pull.as, a->step > 64 ? a->step - 64 : 0);
    return rc;
}

void agg_pull_free(agg_t *a)
{
    fsgd_kasm_destroy(a->pull.as);
    free(a->pull.keys);
    free(a->pull.vals);
    free(a->pull.buf.p);
    pull_cache_free(&a->pull.cache);
    memset(&a->pull, 0, sizeof a->pull);
}
