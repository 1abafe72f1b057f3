/* Job key replica working_set (pull.h): before it computes a step, the
 * worker asks the aggregator shards that own its rows' keys for their
 * values, and computes on them when every shard has answered; the model
 * messages carry only the step state. What it receives is its own keys'
 * values, whatever the number of workers, where a full replica receives the
 * union of every worker's keys.
 *
 * τ permitting, the step after the one awaited is planned and pulled at
 * once, so its round trip overlaps this step's gradient: its rows start
 * where this step's end, which is where the model's state will say they
 * start unless a step is dropped (then the plan no longer holds and is made
 * again). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/clock.h"
#include "fsgd/crc32c.h"
#include "fsgd/keysort.h"
#include "pull.h"
#include "worker_internal.h"

typedef struct pull_plan plan_t;

int worker_pull_open(worker_t *w)
{
    struct worker_pull *p = &w->pull;
    p->on = 1;
    if (!(p->as = fsgd_kasm_new()) || !(p->replay = fsgd_replay_new()))
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    /* NAME.pull may not be there yet (an aggregator makes it too) */
    return fsgd_dist_topics_create(w->prod, w->job, 0, w->err, w->errsz);
}

void worker_pull_free(worker_t *w)
{
    fsgd_kasm_destroy(w->pull.as);
    fsgd_replay_destroy(w->pull.replay);
    for (int k = 0; k < 2; k++) {
        plan_t *pl = &w->pull.plan[k];
        fsgd_csr_free(&pl->batch);
        free(pl->rg);
        free(pl->keys);
        free(pl->vals);
        free(pl->slots);
        for (uint32_t i = 0; i < FSGD_SHARDS_MAX; i++) {
            free(pl->part[i].keys);
            free(pl->part[i].at);
            free(pl->part[i].body.p);
            free(pl->part[i].ref.p);
        }
    }
    for (uint32_t i = 0; i < FSGD_SHARDS_MAX; i++)
        pull_known_free(&w->pull.known[i]);
    memset(&w->pull, 0, sizeof w->pull);
}

static int grow(worker_t *w, uint32_t **keys, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    uint32_t *k = realloc(*keys, n * sizeof *k);
    if (!k)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory for a pull");
    *keys = k;
    *cap = n;
    return 0;
}

static int grow_part(worker_t *w, struct pull_part *pp, size_t n)
{
    size_t cap = pp->cap;
    FSGD_TRY(grow(w, &pp->keys, &cap, n));
    return grow(w, &pp->at, &pp->cap, n);
}

static inline uint32_t slot_of(uint32_t key, unsigned bits)
{
    return (uint32_t)(key * 2654435769u) >> (32 - bits);
}

/* The batch's columns become local ones, each its key's index in the
 * plan's keys: θ then holds the step's values only, and as the keys are
 * increasing, so is the gradient's local order (worker_send_step maps it
 * back). */
static int remap_columns(worker_t *w, plan_t *pl)
{
    unsigned bits = 4;
    while (((size_t)1 << bits) < 2 * pl->n)
        bits++;
    const size_t size = (size_t)1 << bits, mask = size - 1;
    if (size > pl->cap_slots) {
        uint64_t *t = realloc(pl->slots, size * sizeof *t);
        if (!t)
            return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory for a pull");
        pl->slots = t;
        pl->cap_slots = size;
    }
    /* a slot: key << 32 | (index + 1); 0 is empty (any key may be used) */
    memset(pl->slots, 0, size * sizeof *pl->slots);
    for (size_t i = 0; i < pl->n; i++) {
        size_t h = slot_of(pl->keys[i], bits);
        while (pl->slots[h])
            h = (h + 1) & mask;
        pl->slots[h] = (uint64_t)pl->keys[i] << 32 | (uint32_t)(i + 1);
    }
    fsgd_csr_t *b = &pl->batch;
    for (size_t j = 0; j < b->nnz; j++) {
        size_t h = slot_of(b->col[j], bits);
        while (!pl->slots[h] || (uint32_t)(pl->slots[h] >> 32) != b->col[j]) /* every column is there */
            h = (h + 1) & mask;
        b->col[j] = (uint32_t)pl->slots[h] - 1;
    }
    b->max_col = pl->n;
    return 0;
}

/* The plan's keys (its rows' columns, the intercept's among them), strictly
 * increasing, each shard's part as local keys with their places among the
 * plan's, room for their values, and the batch on local columns. */
static int plan_keys(worker_t *w, plan_t *pl)
{
    const fsgd_csr_t *b = &pl->batch;
    FSGD_TRY(grow(w, &pl->keys, &pl->cap, b->nnz));
    memcpy(pl->keys, b->col, b->nnz * sizeof *pl->keys);
    fsgd_keysort(pl->keys, b->nnz);
    size_t n = 0;
    for (size_t i = 0; i < b->nnz; i++)
        if (n == 0 || pl->keys[i] != pl->keys[n - 1])
            pl->keys[n++] = pl->keys[i];
    pl->n = n;
    const uint32_t S = w->shards;
    for (uint32_t s = 0; s < S; s++) {
        FSGD_TRY(grow_part(w, &pl->part[s], n / S + 1));
        pl->part[s].n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        struct pull_part *pp = &pl->part[fsgd_shard_of(pl->keys[i], S)];
        if (pp->n == pp->cap)
            FSGD_TRY(grow_part(w, pp, 2 * pp->cap));
        pp->at[pp->n] = (uint32_t)i;
        pp->keys[pp->n++] = (uint32_t)fsgd_shard_local(pl->keys[i], S);
    }
    if (n > pl->cap_vals) {
        float *v = realloc(pl->vals, n * sizeof *v);
        if (!v)
            return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory for a pull");
        pl->vals = v;
        pl->cap_vals = n;
    }
    return remap_columns(w, pl);
}

/* The plan's values into θ (local columns), for the step's gradient. */
static int bind_values(worker_t *w, const plan_t *pl)
{
    FSGD_TRY(worker_theta_reserve(w, pl->n));
    memcpy(w->theta, pl->vals, pl->n * sizeof *w->theta);
    FSGD_TRY(fsgd_backend_load(w->be, w->theta, pl->n, w->err, w->errsz)); /* a device's copy */
    w->local_keys = pl->keys;
    return 0;
}

/* Shard s's part: the list's name where the shard keeps it, else its keys. */
static int send_part(worker_t *w, const plan_t *pl, uint32_t s)
{
    const struct pull_part *pp = &pl->part[s];
    fsgd_kframe_t h = {.kind = FSGD_KMSG_PULL, .flags = pp->by_id ? FSGD_KFLAG_BY_ID : 0, .gen = pl->gen,
                       .sender = w->id, .step = pl->step};
    const fsgd_wire_buf_t *body = pp->by_id ? &pp->ref : &pp->body;
    const fsgd_bus_out_t out = {.topic = w->topic.grads,
                                .partition = w->shards > 1 ? (int32_t)s : FSGD_BUS_PARTITION_ANY,
                                .job = w->job->dist->name, .hdr = &h, .val = body->p, .len = body->n};
    return fsgd_bus_send(w->prod, &out, &w->stats->bytes_up, w->err, w->errsz);
}

/* Every shard's part, or (a resend) those not answered yet. */
static int send_parts(worker_t *w, plan_t *pl, int unanswered_only)
{
    pl->sent_at = fsgd_clock_s();
    for (uint32_t s = 0; s < w->shards; s++)
        if (!(unanswered_only && pl->part[s].answered))
            FSGD_TRY(send_part(w, pl, s));
    return 0;
}

/* The plan is still step s: same generation, and every range starts where
 * the worker's position in its partition is (a model message may have
 * moved the positions meanwhile: a dropped step). */
static int plan_holds(const worker_t *w, const plan_t *pl, uint64_t s)
{
    if (pl->gen != w->gen || pl->step != s)
        return 0;
    for (uint32_t i = 0; i < pl->nr; i++)
        if (pl->rg[i].part >= w->st.nparts || w->next_pos[pl->rg[i].part] != pl->rg[i].start)
            return 0;
    return 1;
}

/* Rows for step s into pl (from the worker's positions, or, after, past
 * the ranges of that earlier plan), and its pulls sent when it has rows.
 * *rows gets its row count. */
static int make_plan(worker_t *w, plan_t *pl, uint64_t s, uint64_t ahead, const plan_t *after, size_t *rows)
{
    if ((uint32_t)w->nassigned > pl->cap_rg) {
        fsgd_wire_range_t *r = realloc(pl->rg, (size_t)w->nassigned * sizeof *r);
        if (!r)
            return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
        pl->rg = r;
        pl->cap_rg = (uint32_t)w->nassigned;
    }
    uint64_t saved[1024];
    uint32_t nsaved = after && after->nr <= 1024 ? after->nr : 0;
    if (after && !nsaved)
        return 0; /* too many ranges to look past: plan it when its turn comes */
    for (uint32_t i = 0; i < nsaved; i++) {
        saved[i] = w->next_pos[after->rg[i].part];
        w->next_pos[after->rg[i].part] = after->rg[i].end;
    }
    fsgd_csr_t keep = w->batch; /* worker_select_rows fills w->batch: lend it the plan's */
    w->batch = pl->batch;
    int rc = worker_select_rows(w, pl->rg, &pl->nr);
    pl->batch = w->batch;
    w->batch = keep;
    for (uint32_t i = nsaved; i-- > 0;)
        w->next_pos[after->rg[i].part] = saved[i];
    FSGD_TRY(rc);
    *rows = pl->batch.n_rows;
    pl->gen = w->gen;
    pl->step = s;
    pl->ahead = ahead;
    pl->answered = 0;
    pl->nanswered = 0;
    pl->pending = *rows > 0;
    if (!pl->pending)
        return 0;
    FSGD_TRY(plan_keys(w, pl));
    /* need: the newest model step the worker has from every shard */
    for (uint32_t i = 0; i < w->shards; i++) {
        struct pull_part *pp = &pl->part[i];
        pp->body.n = 0;
        FSGD_TRY(fsgd_pull_put(&pp->body, w->step, pp->keys, pp->n, w->err, w->errsz));
        const uint8_t *block = pp->body.p + FSGD_PULL_HEADER;
        const size_t blen = pp->body.n - FSGD_PULL_HEADER;
        pp->crc = fsgd_crc32c(0, block, blen);
        pp->id = pull_list_id(block, blen);
        pp->by_id = pull_known_has(&w->pull.known[i], pp->id);
        pp->ref.n = 0;
        if (pp->by_id &&
            fsgd_pull_ref_put(&pp->ref, &(fsgd_pull_ref_t){w->step, pp->id, (uint32_t)pp->n, pp->crc}) < 0)
            return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory for a pull");
        w->stats->pulls_by_id += (uint64_t)pp->by_id;
        pp->answered = 0;
    }
    return send_parts(w, pl, 0);
}

/* The step after plan[0], pulled now when the staleness bound allows it. */
static int plan_ahead(worker_t *w)
{
    plan_t *cur = &w->pull.plan[0], *nxt = &w->pull.plan[1];
    if (!cur->pending || nxt->pending || w->hold || cur->step + 1 > w->step + 1 + (uint64_t)w->tau)
        return 0;
    size_t rows = 0;
    return make_plan(w, nxt, cur->step + 1, cur->step - w->step, cur, &rows);
}

int worker_pull_step(worker_t *w)
{
    struct worker_pull *p = &w->pull;
    plan_t *cur = &p->plan[0];
    uint64_t ahead = inflight_ahead(&w->fl, w->gen, w->step);
    uint64_t s = w->step + 1 + ahead;
    if (cur->pending) {
        if (!cur->answered)
            return 0;
        int rc = 0;
        cur->pending = 0;
        if (plan_holds(w, cur, s)) {
            FSGD_TRY(plan_ahead(w)); /* its round trip overlaps this gradient */
            /* computed on the model of step cur->at (>= s - 1 - ahead: at most τ old) */
            uint64_t lag = cur->at + 1 < s ? s - 1 - cur->at : 0;
            FSGD_TRY(bind_values(w, cur));
            fsgd_csr_t keep = w->batch;
            w->batch = cur->batch;
            rc = worker_send_step(w, s, lag, cur->rg, cur->nr);
            cur->batch = w->batch;
            w->batch = keep;
            w->local_keys = NULL;
        } else {
            p->plan[1].pending = 0; /* it started where this one ends */
        }
        plan_t t = p->plan[0];
        p->plan[0] = p->plan[1];
        p->plan[1] = t;
        return rc;
    }
    size_t rows = 0;
    FSGD_TRY(make_plan(w, cur, s, ahead, NULL, &rows));
    if (rows == 0) { /* nothing to compute: no values needed */
        fsgd_csr_t keep = w->batch;
        w->batch = cur->batch;
        int rc = worker_send_step(w, s, ahead, cur->rg, cur->nr);
        cur->batch = w->batch;
        w->batch = keep;
        return rc;
    }
    return plan_ahead(w);
}

int worker_pull_resend(worker_t *w, double resend_s)
{
    for (int k = 0; k < 2; k++) {
        plan_t *pl = &w->pull.plan[k];
        if (!pl->pending || pl->answered)
            continue;
        if (pl->gen != w->gen) { /* a new generation: the plan is void */
            pl->pending = 0;
            continue;
        }
        if (fsgd_clock_s() - pl->sent_at <= resend_s)
            continue;
        /* a pull or its answer was lost: a shard answers a copy too */
        w->stats->resends++;
        FSGD_TRY(send_parts(w, pl, 1));
    }
    return 0;
}

fsgd_bus_tp_t worker_pull_partition(worker_t *w)
{
    int32_t pp = fsgd_pull_partition(w->id);
    int64_t lo = 0, hi = 0;
    int ok = fsgd_bus_watermarks(w->model_c, w->topic.pull, pp, &lo, &hi, 5000, NULL, 0) == 0;
    return (fsgd_bus_tp_t){w->topic.pull, pp, ok ? hi : FSGD_BUS_OFFSET_END};
}

int worker_take_values(worker_t *w, const fsgd_bus_msg_t *m)
{
    struct worker_pull *p = &w->pull;
    w->stats->bytes_down += m->len;
    fsgd_kframe_t f;
    char e[256];
    int prc = fsgd_kframe_parse(m->val, m->len, &f, NULL, w->auth, e, sizeof e);
    if (prc < 0) {
        worker_reject(w, prc == FSGD_E_AUTH ? REJECT_UNAUTH : 1, "%s offset %lld: %s", w->topic.pull, (long long)m->offset, e);
        return 0;
    }
    /* a copy of an answer its shard wrote before (the values of an older
     * model under the same step) is not taken */
    int rp = fsgd_replay_frame(p->replay, m->partition, m->offset, m->val, m->len);
    if (rp < 0)
        return fsgd_err_fmt(w->err, w->errsz, rp, "worker: out of memory");
    if (rp) {
        worker_reject(w, REJECT_REPLAY, "%s partition %d offset %lld: step %llu: a copy of an answer its shard wrote "
                      "before", w->topic.pull, (int)m->partition, (long long)m->offset, (unsigned long long)f.step);
        return 0;
    }
    if (f.kind != FSGD_KMSG_VALUES || f.sender >= w->shards) {
        worker_reject(w, 1, "%s offset %lld: a frame of kind %u from sender %u, not values from one of %u shards",
                      w->topic.pull, (long long)m->offset, f.kind, f.sender, w->shards);
        return 0;
    }
    const uint8_t *body;
    size_t len;
    int r = fsgd_kasm_feed(p->as, &f, &body, &len, e, sizeof e);
    if (r < 0)
        worker_reject(w, 1, "%s offset %lld: %s", w->topic.pull, (long long)m->offset, e);
    if (r != FSGD_KASM_DONE)
        return 0;
    fsgd_kasm_forget(p->as, &f); /* the answer to a resent pull has the same key */
    fsgd_values_t v;
    if (fsgd_values_get(body, len, &v, e, sizeof e) < 0) {
        worker_reject(w, 1, "%s offset %lld: %s", w->topic.pull, (long long)m->offset, e);
        return 0;
    }
    /* another worker's answer (workers share partitions), or one this
     * worker no longer waits for (a copy, an older plan) */
    plan_t *pl = NULL;
    for (int k = 0; k < 2 && v.worker == w->id; k++)
        if (p->plan[k].pending && p->plan[k].gen == f.gen && p->plan[k].step == f.step)
            pl = &p->plan[k];
    const uint32_t shard = f.sender, S = w->shards;
    if (!pl || pl->part[shard].answered)
        return 0;
    struct pull_part *pp = &pl->part[shard];
    if (v.flags & FSGD_VALUES_MISS) {
        if (!pp->by_id || v.keys_crc != pp->crc)
            return 0; /* a copy, or a miss the keys were sent after already */
        /* the shard does not hold the list it was named (restarted, or
         * full): the keys go now */
        pp->by_id = 0;
        pull_known_remove(&w->pull.known[shard], pp->id);
        w->stats->pull_misses++;
        pl->sent_at = fsgd_clock_s();
        return send_part(w, pl, shard);
    }
    const uint64_t need = pl->step - 1 - pl->ahead;
    if (v.n != pp->n || v.keys_crc != pp->crc || v.at < need) {
        worker_reject(w, 1, "%s offset %lld: shard %u's values for step %llu answer %u keys (crc 0x%08x) at the "
                      "model of step %llu; this worker asked for %zu keys (crc 0x%08x) at step %llu or later",
                      w->topic.pull, (long long)m->offset, shard, (unsigned long long)f.step, v.n, v.keys_crc,
                      (unsigned long long)v.at, pp->n, pp->crc, (unsigned long long)need);
        return 0;
    }
    const uint32_t n = v.n;
    for (uint32_t i = 0; i < n; i++)
        pl->vals[pp->at[i]] = fsgd_values_at(&v, i);
    pp->answered = 1;
    if ((v.flags & FSGD_VALUES_KEPT) && pull_known_add(&w->pull.known[shard], pp->id) < 0)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    if (pl->nanswered == 0 || v.at < pl->at)
        pl->at = v.at;
    w->stats->pulled_keys += n;
    if (++pl->nanswered == S) {
        pl->answered = 1;
        w->stats->pulls++;
    }
    return 0;
}
