/* Job key replica working_set (pull.h): before it computes a step, the
 * worker asks the aggregator shards that own its rows' keys for their
 * values, and computes on them when every shard has answered; the model
 * messages carry only the step state. What it receives is its own keys'
 * values, whatever the number of workers, where a full replica receives the
 * union of every worker's keys. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/clock.h"
#include "fsgd/crc32c.h"
#include "fsgd/keysort.h"
#include "pull.h"
#include "worker_internal.h"

int worker_pull_open(worker_t *w)
{
    struct worker_pull *p = &w->pull;
    p->on = 1;
    fsgd_kbus_topic(p->topic, sizeof p->topic, w->job->name, "pull");
    if (!(p->as = fsgd_kasm_new()))
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    return 0;
}

void worker_pull_free(worker_t *w)
{
    fsgd_kasm_destroy(w->pull.as);
    free(w->pull.keys);
    for (uint32_t i = 0; i < FSGD_SHARDS_MAX; i++) {
        free(w->pull.part[i].keys);
        free(w->pull.part[i].body.p);
    }
    free(w->pull.rg);
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

/* The batch's keys (its columns, the intercept's among them), strictly
 * increasing, into p->keys, and each shard's as its local keys. */
static int batch_keys(worker_t *w)
{
    struct worker_pull *p = &w->pull;
    const fsgd_csr_t *b = &w->batch;
    FSGD_TRY(grow(w, &p->keys, &p->cap, b->nnz));
    memcpy(p->keys, b->col, b->nnz * sizeof *p->keys);
    fsgd_keysort(p->keys, b->nnz);
    size_t n = 0;
    for (size_t i = 0; i < b->nnz; i++)
        if (n == 0 || p->keys[i] != p->keys[n - 1])
            p->keys[n++] = p->keys[i];
    p->n = n;
    const uint32_t S = w->shards;
    for (uint32_t s = 0; s < S; s++) {
        FSGD_TRY(grow(w, &p->part[s].keys, &p->part[s].cap, n / S + 1));
        p->part[s].n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        struct pull_part *pp = &p->part[fsgd_shard_of(p->keys[i], S)];
        if (pp->n == pp->cap)
            FSGD_TRY(grow(w, &pp->keys, &pp->cap, 2 * pp->cap));
        pp->keys[pp->n++] = (uint32_t)fsgd_shard_local(p->keys[i], S);
    }
    return 0;
}

static int send_part(worker_t *w, uint32_t shard)
{
    struct worker_pull *p = &w->pull;
    const fsgd_wire_buf_t *body = &p->part[shard].body;
    fsgd_kframe_t h = {.kind = FSGD_KMSG_PULL, .gen = p->gen, .sender = w->id, .step = p->step};
    return fsgd_bus_send(w->prod, w->tgrads, w->shards > 1 ? (int32_t)shard : FSGD_BUS_PARTITION_ANY, w->job->name,
                         &h, NULL, body->p, body->n, &w->stats->bytes_up, w->err, w->errsz);
}

/* Every shard's part, or (resend) those not answered yet. */
static int send_parts(worker_t *w, int unanswered_only)
{
    w->pull.sent_at = fsgd_clock_s();
    for (uint32_t s = 0; s < w->shards; s++)
        if (!unanswered_only || !w->pull.part[s].answered)
            FSGD_TRY(send_part(w, s));
    return 0;
}

/* The answered plan is still the next step: same generation and step, and
 * every range starts where the worker's position in its partition is (a
 * model message may have moved the positions meanwhile: a dropped step). */
static int plan_holds(const worker_t *w, uint64_t s)
{
    const struct worker_pull *p = &w->pull;
    if (p->gen != w->gen || p->step != s)
        return 0;
    for (uint32_t i = 0; i < p->nr; i++)
        if (p->rg[i].part >= w->st.nparts || w->next_pos[p->rg[i].part] != p->rg[i].start)
            return 0;
    return 1;
}

int worker_pull_step(worker_t *w)
{
    struct worker_pull *p = &w->pull;
    uint64_t ahead = inflight_ahead(&w->fl, w->gen, w->step);
    uint64_t s = w->step + 1 + ahead;
    if (p->pending) {
        if (!p->answered)
            return 0;
        p->pending = 0;
        if (plan_holds(w, s)) {
            /* computed on the model of step p->at (>= s - 1 - ahead: at most τ old) */
            uint64_t lag = p->at + 1 < s ? s - 1 - p->at : 0;
            return worker_send_step(w, s, lag, p->rg, p->nr);
        }
        /* planned again below */
    }
    if ((uint32_t)w->nassigned > p->cap_rg) {
        fsgd_wire_range_t *r = realloc(p->rg, (size_t)w->nassigned * sizeof *r);
        if (!r)
            return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
        p->rg = r;
        p->cap_rg = (uint32_t)w->nassigned;
    }
    FSGD_TRY(worker_select_rows(w, p->rg, &p->nr));
    if (w->batch.n_rows == 0)
        return worker_send_step(w, s, ahead, p->rg, p->nr); /* nothing to compute: no values needed */
    FSGD_TRY(batch_keys(w));
    /* need: the newest model step the worker has from every shard */
    for (uint32_t i = 0; i < w->shards; i++) {
        struct pull_part *pp = &p->part[i];
        pp->body.n = 0;
        FSGD_TRY(fsgd_pull_put(&pp->body, w->step, pp->keys, pp->n, w->err, w->errsz));
        pp->crc = fsgd_crc32c(0, pp->body.p + FSGD_PULL_HEADER, pp->body.n - FSGD_PULL_HEADER);
        pp->answered = 0;
    }
    p->gen = w->gen;
    p->step = s;
    p->ahead = ahead;
    p->pending = 1;
    p->answered = 0;
    p->nanswered = 0;
    return send_parts(w, 0);
}

int worker_pull_resend(worker_t *w, double resend_s)
{
    struct worker_pull *p = &w->pull;
    if (!p->pending || p->answered)
        return 0;
    if (p->gen != w->gen) { /* a new generation: the plan is void */
        p->pending = 0;
        return 0;
    }
    if (fsgd_clock_s() - p->sent_at <= resend_s)
        return 0;
    /* a pull or its answer was lost: a shard answers a copy too */
    w->stats->resends++;
    return send_parts(w, 1);
}

fsgd_bus_tp_t worker_pull_partition(worker_t *w)
{
    int32_t pp = fsgd_pull_partition(w->id);
    int64_t lo = 0, hi = 0;
    int ok = fsgd_bus_watermarks(w->model_c, w->pull.topic, pp, &lo, &hi, 5000, NULL, 0) == 0;
    return (fsgd_bus_tp_t){w->pull.topic, pp, ok ? hi : FSGD_BUS_OFFSET_END};
}

int worker_take_values(worker_t *w, const fsgd_bus_msg_t *m)
{
    struct worker_pull *p = &w->pull;
    w->stats->bytes_down += m->len;
    fsgd_kframe_t f;
    char e[256];
    int prc = fsgd_kframe_parse(m->val, m->len, &f, NULL, e, sizeof e);
    if (prc < 0) {
        worker_reject(w, prc == FSGD_E_AUTH ? REJECT_UNAUTH : 1, "%s offset %lld: %s", p->topic, (long long)m->offset, e);
        return 0;
    }
    if (f.kind != FSGD_KMSG_VALUES || f.sender >= w->shards) {
        worker_reject(w, 1, "%s offset %lld: a frame of kind %u from sender %u, not values from one of %u shards",
                      p->topic, (long long)m->offset, f.kind, f.sender, w->shards);
        return 0;
    }
    const uint8_t *body;
    size_t len;
    int r = fsgd_kasm_feed(p->as, &f, &body, &len, e, sizeof e);
    if (r < 0)
        worker_reject(w, 1, "%s offset %lld: %s", p->topic, (long long)m->offset, e);
    if (r != FSGD_KASM_DONE)
        return 0;
    fsgd_kasm_forget(p->as, &f); /* the answer to a resent pull has the same key */
    fsgd_values_t v;
    if (fsgd_values_get(body, len, &v, e, sizeof e) < 0) {
        worker_reject(w, 1, "%s offset %lld: %s", p->topic, (long long)m->offset, e);
        return 0;
    }
    const uint32_t shard = f.sender, S = w->shards;
    struct pull_part *pp = &p->part[shard];
    /* another worker's answer (workers share partitions), or one this
     * worker no longer waits for (a copy, an older plan) */
    if (v.worker != w->id || !p->pending || pp->answered || f.gen != p->gen || f.step != p->step)
        return 0;
    const uint64_t need = p->step - 1 - p->ahead;
    if (v.n != pp->n || v.keys_crc != pp->crc || v.at < need) {
        worker_reject(w, 1, "%s offset %lld: shard %u's values for step %llu answer %u keys (crc 0x%08x) at the "
                      "model of step %llu; this worker asked for %zu keys (crc 0x%08x) at step %llu or later",
                      p->topic, (long long)m->offset, shard, (unsigned long long)f.step, v.n, v.keys_crc,
                      (unsigned long long)v.at, pp->n, pp->crc, (unsigned long long)need);
        return 0;
    }
    const uint32_t n = v.n;
    if (fsgd_sparse_reserve(&w->delta, n) < 0)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        uint32_t key = (uint32_t)fsgd_shard_global(pp->keys[i], shard, S);
        float x = fsgd_values_at(&v, i);
        w->theta[key] = x;
        w->delta.keys[i] = key;
        w->delta.vals[i] = x;
    }
    w->delta.n = n;
    FSGD_TRY(fsgd_backend_apply(w->be, w->delta.keys, w->delta.vals, n, w->err, w->errsz));
    pp->answered = 1;
    pp->at = v.at;
    if (p->nanswered == 0 || v.at < p->at)
        p->at = v.at;
    w->stats->pulled_keys += n;
    if (++p->nanswered == S) {
        p->answered = 1;
        w->stats->pulls++;
    }
    return 0;
}
