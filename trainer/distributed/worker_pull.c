/* Job key replica working_set (pull.h): before it computes a step, the
 * worker asks the aggregator for the values of the keys its rows use and
 * computes on them when they come; the model messages carry only the step
 * state. What it receives is its own keys' values, whatever the number of
 * workers, where a full replica receives the union of every worker's keys. */
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
    free(w->pull.body.p);
    free(w->pull.rg);
    memset(&w->pull, 0, sizeof w->pull);
}

/* The batch's keys (its columns, the intercept's among them), strictly
 * increasing, into p->keys. */
static int batch_keys(worker_t *w)
{
    struct worker_pull *p = &w->pull;
    const fsgd_csr_t *b = &w->batch;
    if (b->nnz > p->cap) {
        uint32_t *k = realloc(p->keys, b->nnz * sizeof *k);
        if (!k)
            return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory for a pull");
        p->keys = k;
        p->cap = b->nnz;
    }
    memcpy(p->keys, b->col, b->nnz * sizeof *p->keys);
    fsgd_keysort(p->keys, b->nnz);
    size_t n = 0;
    for (size_t i = 0; i < b->nnz; i++)
        if (n == 0 || p->keys[i] != p->keys[n - 1])
            p->keys[n++] = p->keys[i];
    p->n = n;
    return 0;
}

static int send_pull(worker_t *w)
{
    struct worker_pull *p = &w->pull;
    fsgd_kframe_t h = {.kind = FSGD_KMSG_PULL, .gen = p->gen, .sender = w->id, .step = p->step};
    p->sent_at = fsgd_clock_s();
    return fsgd_bus_send(w->prod, w->tgrads, FSGD_BUS_PARTITION_ANY, w->job->name, &h, NULL, p->body.p, p->body.n,
                         &w->stats->bytes_up, w->err, w->errsz);
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
    p->body.n = 0;
    FSGD_TRY(fsgd_pull_put(&p->body, w->step, p->keys, p->n, w->err, w->errsz));
    p->crc = fsgd_crc32c(0, p->body.p + FSGD_PULL_HEADER, p->body.n - FSGD_PULL_HEADER);
    p->gen = w->gen;
    p->step = s;
    p->ahead = ahead;
    p->pending = 1;
    p->answered = 0;
    return send_pull(w);
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
    /* the pull or its answer was lost: the aggregator answers a copy too */
    w->stats->resends++;
    return send_pull(w);
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
    if (f.kind != FSGD_KMSG_VALUES) {
        worker_reject(w, 1, "%s offset %lld: a frame of kind %u, not values", p->topic, (long long)m->offset, f.kind);
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
    /* another worker's answer (workers share partitions), or one this
     * worker no longer waits for (a copy, an older plan) */
    if (v.worker != w->id || !p->pending || p->answered || f.gen != p->gen || f.step != p->step)
        return 0;
    const uint64_t need = p->step - 1 - p->ahead;
    if (v.n != p->n || v.keys_crc != p->crc || v.at < need) {
        worker_reject(w, 1, "%s offset %lld: values for step %llu answer %u keys (crc 0x%08x) at the model of step "
                      "%llu; this worker asked for %zu keys (crc 0x%08x) at step %llu or later",
                      p->topic, (long long)m->offset, (unsigned long long)f.step, v.n, v.keys_crc, (unsigned long long)v.at,
                      p->n, p->crc, (unsigned long long)need);
        return 0;
    }
    const uint32_t n = v.n;
    if (fsgd_sparse_reserve(&w->delta, n) < 0)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        float x = fsgd_values_at(&v, i);
        w->theta[p->keys[i]] = x;
        w->delta.keys[i] = p->keys[i];
        w->delta.vals[i] = x;
    }
    w->delta.n = n;
    FSGD_TRY(fsgd_backend_apply(w->be, w->delta.keys, w->delta.vals, n, w->err, w->errsz));
    p->answered = 1;
    p->at = v.at;
    w->stats->pulls++;
    w->stats->pulled_keys += n;
    return 0;
}
