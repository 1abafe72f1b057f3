/* The model topic: snapshots, and the per-step update (float32 values, or
 * the strategy's coded downlink Δ = θ − ρ, fsgd_sagg_downlink_encode). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_clock.h"
#include "agg_env.h"
#include "agg_model.h"
#include "agg_open.h"
#include "fsgd/adam.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/sparse.h"
#include "fsgd/strategy.h"
#include "wire.h"

/* --- model topic --- */

/* How often a coded delta carries the replica's checksum (steps). */
#define FSGD_AGG_REPLICA_CHECK_EVERY 64

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* Down bytes are steered to this share of the mean uplink message: the rest
 * is room for the model frame's step state and applied list. */
#define DOWN_BYTES_SHARE 0.97

/* The step's update as a coded delta (kind 5): Δ = θ − ρ over the touched
 * keys, at most the mean applied gradient message's entries times
 * down_scale, so that a worker never receives more bytes than it sends.
 * down_scale follows the byte ratio of the last step (a feedback loop, no
 * second encode): a little under 1 when an entry costs the same both ways
 * (the keys of a union of messages are sparser), above 1 when the downlink
 * codec is cheaper per entry. */
static int put_coded_delta(agg_model_state_t *m, agg_open_step_t *o, const agg_env_t *e, uint64_t step,
                           const uint32_t *keys, size_t n)
{
    double t0 = agg_now();
    if (m->down_scale <= 0)
        m->down_scale = 1.0;
    size_t budget = o->napplied
                        ? (size_t)(m->down_scale * (double)o->up_entries_step / (double)o->napplied)
                        : 0;
    size_t cap = fsgd_sagg_downlink_bound(m->strat, n);
    if (cap > m->dmsg_cap) {
        uint8_t *nm = realloc(m->dmsg, cap);
        if (!nm)
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory for the downlink");
        m->dmsg = nm;
        m->dmsg_cap = cap;
    }
    fsgd_outbuf_t msg = {m->dmsg, cap, 0};
    FSGD_TRY(fsgd_sagg_downlink_encode(m->strat, m->adam.theta, keys, n, budget ? budget : 1, &msg, e->err,
                                       e->errsz));
    size_t len = msg.len;
    if (o->napplied && len > 0 && o->up_bytes_step > 0) {
        double target = DOWN_BYTES_SHARE * (double)o->up_bytes_step / (double)o->napplied;
        /* up to the union of the step's messages: a downlink codec that spends
         * fewer bits an entry than the uplink's carries more keys */
        double s = m->down_scale * target / (double)len, most = (double)o->napplied;
        m->down_scale = s < 0.25 ? 0.25 : s > most ? most : s;
    }
    uint32_t flags = 0, check = 0;
    if ((step % FSGD_AGG_REPLICA_CHECK_EVERY) == 0) {
        flags |= FSGD_WIRE_CDELTA_CHECK;
        check = fsgd_sagg_downlink_check(m->strat);
        e->s->replica_checks++;
    }
    qsort(o->applied, o->napplied, sizeof *o->applied, cmp_u32);
    e->s->t_down_encode += agg_now() - t0;
    return fsgd_wire_cdelta_put(&m->buf, flags, check, o->applied, (uint32_t)o->napplied, m->dmsg,
                                (uint32_t)len);
}

int agg_downlink_setup(agg_model_state_t *m, const fsgd_dist_job_t *job, int *pull_halves, const agg_env_t *e)
{
    /* working-set workers pull their values: no downlink to code, and none
     * of its model-sized replica (5 B a weight) */
    if (fsgd_dist_replica(job->train, job->dist) == FSGD_REPLICA_WORKING_SET) {
        /* the downlink full replicas would get, lossy or not, says how exact
         * the pulled values must be */
        const char *d = job->train->downlink;
        const int own_spec = strcmp(d, "auto") && d[0];
        *pull_halves = strcmp(d, "full") && (own_spec || fsgd_sagg_downlink_spec(m->strat) != NULL);
        snprintf(e->s->downlink, sizeof e->s->downlink, "none: workers pull their values (replica working_set%s)",
                 *pull_halves ? ", as halves" : "");
        return 0;
    }
    return fsgd_sagg_downlink_open(m->strat, job->train->downlink, m->adam.theta, e->s->downlink,
                                   sizeof e->s->downlink, e->err, e->errsz);
}

int agg_publish(const agg_publish_ctx_t *c, const agg_env_t *e, int snapshot, int final, const uint32_t *keys,
                size_t n)
{
    const fsgd_dist_job_t *job = c->job;
    agg_model_state_t *m = c->model;
    m->buf.n = 0;
    /* working-set workers pull the values they use (agg_pull.c): a step's
     * message carries its state and no values */
    const int ws = fsgd_dist_replica(job->train, job->dist) == FSGD_REPLICA_WORKING_SET;
    if (ws)
        n = 0;
    int coded = !ws && fsgd_sagg_downlink_coded(m->strat);
    int rc = fsgd_wire_state_put(&m->buf, c->st);
    /* The strategy's feedback for the step this message closes (a snapshot
     * closes one too), before the payload: trainer/KAFKA_FORMAT.md. */
    size_t slen = 0;
    const uint8_t *sec = snapshot && !c->step ? NULL : fsgd_sagg_section(m->strat, &slen);
    if (slen)
        rc = rc ? rc : fsgd_wire_u32(&m->buf, (uint32_t)slen) | fsgd_wire_put(&m->buf, sec, slen);
    if (snapshot && m->table) {
        const fsgd_wire_model_t head = {.kind = (uint32_t)job->train->model, .has_bias = job->train->bias ? 1 : 0,
                                        .bias = (float)job->train->bias_value, .dim = c->dim, .n = c->gweights,
                                        .shard = c->shard, .shards = c->shards};
        rc = rc ? rc : agg_table_snapshot(m, &head, &m->buf);
    } else if (snapshot) {
        rc = rc ? rc
                : fsgd_wire_model_put_shard(&m->buf, (uint32_t)job->train->model, job->train->bias ? 1 : 0,
                                            (float)job->train->bias_value, c->dim, m->adam.theta, c->gweights,
                                            c->shard, c->shards);
        if (coded)
            fsgd_sagg_downlink_sync(m->strat, m->adam.theta); /* every worker now holds θ exactly */
    } else if (coded) {
        if (!rc)
            FSGD_TRY(put_coded_delta(m, c->open, e, c->step, keys, n));
    } else {
        if (fsgd_sparse_reserve(&m->dec, n) < 0)
            rc = FSGD_E_NOMEM;
        for (size_t i = 0; !rc && i < n; i++)
            m->dec.vals[i] = m->adam.theta[keys[i]];
        if (!rc)
            FSGD_TRY(fsgd_wire_pdelta_put(&m->buf, keys, m->dec.vals, n, e->err, e->errsz));
    }
    if (rc)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory for the model message");
    fsgd_kframe_t h = {.kind = snapshot ? FSGD_KMSG_SNAPSHOT : coded ? FSGD_KMSG_DELTA_CODED : FSGD_KMSG_DELTA_PACKED,
                       .flags = (final ? FSGD_KFLAG_FINAL : 0) | (slen ? FSGD_KFLAG_SECTION : 0), .gen = c->gen, .sender = c->shard, .step = c->step};
    fsgd_agg_stats_t *s = e->s;
    uint64_t before = s->bytes_model;
    /* keys for the compacted model topic (fsgd_dist_topics_create) */
    char key[32];
    snprintf(key, sizeof key, snapshot ? "snapshot" : "delta.%llu",
             (unsigned long long)(c->step % m->snap_every));
    const fsgd_bus_out_t out = {.topic = c->model_topic, .partition = (int32_t)c->shard, .job = job->dist->name,
                                .hdr = &h, .key = key, .val = m->buf.p, .len = m->buf.n};
    FSGD_TRY(fsgd_bus_send(c->prod, &out, &s->bytes_model, e->err, e->errsz));
    s->bytes_down += (s->bytes_model - before) * (c->nlive ? c->nlive : 1);
    if (!snapshot) {
        s->down_msgs++;
        s->down_bytes_msg += s->bytes_model - before;
    }
    fsgd_bus_serve(c->prod);
    return 0;
}


static void *pages_main(void *arg)
{
    (void)fsgd_adam_map_pages(arg); /* a hint: unmapped pages fault at first use */
    return NULL;
}

void agg_pages_start(agg_model_state_t *m)
{
    if (m->table)
        return; /* its arrays grow (realloc) under the steps: nothing to map ahead */
    m->pages_running = pthread_create(&m->pages_tid, NULL, pages_main, &m->adam) == 0;
}

void agg_pages_join(agg_model_state_t *m)
{
    if (m->pages_running)
        pthread_join(m->pages_tid, NULL);
    m->pages_running = 0;
}

void agg_model_free(agg_model_state_t *m)
{
    agg_pages_join(m);
    fsgd_adam_free(&m->adam);
    fsgd_sparse_table_destroy(m->table);
    m->table = NULL;
    fsgd_sagg_destroy(m->strat);
    m->strat = NULL;
    fsgd_sparse_free(&m->dec);
    agg_init_free(m);
    free(m->dmsg);
    m->dmsg = NULL;
    m->dmsg_cap = 0;
    free(m->buf.p);
    m->buf.p = NULL;
    m->buf.n = m->buf.cap = 0;
}
