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
#include "fsgd/error.h"
#include "fsgd/half.h"
#include "fsgd/keys.h"
#include "agg_env.h"
#include "agg_model.h"
#include "agg_pull.h"
#include "pull.h"

/* Bytes of key lists a shard keeps for key caching: the lists of ~8M CTR
 * rows of 40 keys a row (a list holds ~1.6 bytes a key); a longer epoch
 * names the lists of its first 8M rows by id. */
#define PULL_CACHE_BUDGET ((size_t)512 << 20)

static int pull_open(agg_pull_t *p, const agg_pull_ctx_t *c, const agg_env_t *e)
{
    if (p->as)
        return 0;
    if (!(p->as = fsgd_kasm_new()))
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    /* a pull holds at most every key of the model, delta-coded (<= 5 B a key) */
    size_t msg = 65536 + (size_t)c->mdim * 5;
    fsgd_kasm_set_limits(p->as, msg, msg * 4 < ((size_t)64 << 20) ? (size_t)64 << 20 : msg * 4);
    p->cache.budget = PULL_CACHE_BUDGET;
    return 0;
}

/* A VALUES body for the request of f (its key list keys_crc), sent to its
 * worker's partition of NAME.pull. */
static int send_values(agg_pull_t *p, const agg_pull_ctx_t *c, const agg_env_t *e, const fsgd_kframe_t *f,
                       uint32_t keys_crc, uint32_t n, unsigned flags)
{
    p->buf.n = 0;
    /* a lossy downlink (the strategy's, or the job's downlink key): halves,
     * unless a value is past the largest half */
    const int half = p->halves && fsgd_half_fits(p->vals, n);
    if (fsgd_values_put(&p->buf, f->sender, c->step, keys_crc, p->vals, n, half, flags) < 0)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory for a pull's answer");
    fsgd_kframe_t h = {.kind = FSGD_KMSG_VALUES, .gen = c->gen, .sender = c->shard, .step = f->step};
    uint64_t before = p->bytes;
    const fsgd_bus_out_t out = {.topic = c->pull_topic, .partition = fsgd_pull_partition(f->sender),
                                .job = c->job, .hdr = &h, .val = p->buf.p, .len = p->buf.n};
    FSGD_TRY(fsgd_bus_send(c->prod, &out, &p->bytes, e->err, e->errsz));
    e->s->bytes_down += p->bytes - before;
    e->s->bytes_values += p->bytes - before;
    p->answered++;
    e->s->pulls_answered++;
    fsgd_bus_serve(c->prod);
    return 0;
}

/* The worker saw no model message of step need from this process. */
static int need_forged(const agg_pull_ctx_t *c, const agg_env_t *e, const fsgd_kframe_t *f, uint64_t need)
{
    if (need <= c->step)
        return 0;
    agg_env_reject(e, FSGD_AGG_REJ_FORGED, "sender %u pull for step %llu asks for the model of step %llu, this "
                   "aggregator's is %llu", f->sender, (unsigned long long)f->step, (unsigned long long)need,
                   (unsigned long long)c->step);
    return 1;
}

/* A pull's key block: its bytes and their CRC32C. */
typedef struct key_block {
    const uint8_t *p;
    size_t len;
    uint32_t crc;
} key_block_t;

/* The key block a pull sends or names: kb->p NULL when the pull was
 * rejected or answered (a named list not held: a miss). */
static int pull_block(agg_pull_t *p, const agg_pull_ctx_t *c, const agg_env_t *e, const fsgd_kframe_t *f,
                      const uint8_t *body, size_t len, key_block_t *kb)
{
    char why[256];
    kb->p = NULL;
    const int by_id = (f->flags & FSGD_KFLAG_BY_ID) != 0;
    fsgd_pull_t pl;
    fsgd_pull_ref_t ref;
    if ((by_id ? fsgd_pull_ref_get(body, len, c->mdim, &ref, why, sizeof why)
               : fsgd_pull_get(body, len, c->mdim, &pl, why, sizeof why)) < 0) {
        agg_env_reject(e, FSGD_AGG_REJ_CORRUPT, "sender %u pull for step %llu: %s", f->sender,
                       (unsigned long long)f->step, why);
        return 0;
    }
    if (need_forged(c, e, f, by_id ? ref.need : pl.need))
        return 0;
    if (!by_id) {
        *kb = (key_block_t){pl.block, pl.block_len, fsgd_crc32c(0, pl.block, pl.block_len)};
        return 0;
    }
    const pull_cache_slot_t *kept = pull_cache_find(&p->cache, ref.id);
    if (!kept || kept->n != ref.n || kept->crc != ref.keys_crc) {
        /* restarted, or full when the list came: the worker sends the keys */
        e->s->pull_misses++;
        return send_values(p, c, e, f, ref.keys_crc, 0, FSGD_VALUES_MISS);
    }
    e->s->pulls_by_id++;
    *kb = (key_block_t){kept->block, kept->len, kept->crc};
    return 0;
}

static int answer(agg_pull_t *p, const agg_pull_ctx_t *c, const agg_model_state_t *m, const agg_env_t *e,
                  const fsgd_kframe_t *f, const uint8_t *body, size_t len)
{
    key_block_t kb;
    char why[256];
    FSGD_TRY(pull_block(p, c, e, f, body, len, &kb));
    if (!kb.p)
        return 0;
    const uint8_t *block = kb.p;
    const size_t blen = kb.len;
    uint32_t n = 0;
    if (fsgd_keys_peek(block, blen, c->mdim, &n, &(size_t){0}, why, sizeof why) < 0) {
        agg_env_reject(e, FSGD_AGG_REJ_CORRUPT, "sender %u pull for step %llu: keys: %s", f->sender,
                       (unsigned long long)f->step, why);
        return 0;
    }
    if (n > p->cap_keys) {
        uint32_t *k = realloc(p->keys, n * sizeof *k);
        float *v = realloc(p->vals, n * sizeof *v);
        if (k)
            p->keys = k;
        if (v)
            p->vals = v;
        if (!k || !v)
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory for a pull");
        p->cap_keys = n;
    }
    if (fsgd_keys_decode(block, blen, c->mdim, p->keys, n, &n, why, sizeof why) < 0) {
        agg_env_reject(e, FSGD_AGG_REJ_CORRUPT, "sender %u pull for step %llu: keys: %s", f->sender,
                       (unsigned long long)f->step, why);
        return 0;
    }
    const fsgd_adam_t *adam = &m->adam;
    if (m->table) /* a key never touched answers its initial 0 */
        for (uint32_t i = 0; i < n; i++)
            p->vals[i] = fsgd_sparse_table_theta(m->table, adam, p->keys[i]);
    else
        for (uint32_t i = 0; i < n; i++)
            p->vals[i] = adam->theta[p->keys[i]];
    int kept = 1; /* a named list is held */
    if (!(f->flags & FSGD_KFLAG_BY_ID)) {
        kept = pull_cache_put(&p->cache, pull_list_id(block, blen), n, kb.crc, block, blen);
        if (kept == FSGD_E_NOMEM)
            kept = 0; /* the answer goes without: the list is sent again next time */
        e->s->pull_lists_kept = p->cache.used;
        e->s->pull_bytes_kept = p->cache.bytes;
    }
    return send_values(p, c, e, f, kb.crc, n, kept > 0 ? FSGD_VALUES_KEPT : 0);
}

int agg_take_pull(agg_pull_t *p, const agg_pull_ctx_t *c, const agg_model_state_t *m, const agg_env_t *e,
                  const fsgd_kframe_t *f, int64_t offset)
{
    FSGD_TRY(pull_open(p, c, e));
    const uint8_t *body;
    size_t len;
    char why[256];
    int r = fsgd_kasm_feed(p->as, f, &body, &len, why, sizeof why);
    if (r == FSGD_E_FORMAT) { /* chunks that disagree with pending ones: the newest wins */
        fsgd_kasm_forget(p->as, f);
        r = fsgd_kasm_feed(p->as, f, &body, &len, why, sizeof why);
    }
    if (r == FSGD_E_NOMEM)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: %s", why);
    if (r < 0) {
        agg_env_reject(e, r == FSGD_E_RANGE ? FSGD_AGG_REJ_OVERSIZE : FSGD_AGG_REJ_CORRUPT, "offset %lld: pull: %s",
                       (long long)offset, why);
        return 0;
    }
    if (r != FSGD_KASM_DONE) /* chunks to come, or a copy of a chunk pending */
        return 0;
    int rc = answer(p, c, m, e, f, body, len);
    fsgd_kasm_forget(p->as, f); /* a resend is answered again */
    fsgd_kasm_prune(p->as, c->step > 64 ? c->step - 64 : 0);
    return rc;
}

void agg_pull_free(agg_pull_t *p)
{
    fsgd_kasm_destroy(p->as);
    free(p->keys);
    free(p->vals);
    free(p->buf.p);
    pull_cache_free(&p->cache);
    memset(p, 0, sizeof *p);
}
