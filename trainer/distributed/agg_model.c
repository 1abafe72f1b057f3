/* The model topic: snapshots, and the per-step update (float32 values, or
 * the strategy's coded downlink Δ = θ − ρ, fsgd_sagg_downlink_encode). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aggregator_internal.h"

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
static int put_coded_delta(agg_t *a, const uint32_t *keys, size_t n)
{
    double t0 = agg_now();
    if (a->down_scale <= 0)
        a->down_scale = 1.0;
    size_t budget = a->napplied ? (size_t)(a->down_scale * (double)a->up_entries_step / (double)a->napplied) : 0;
    size_t cap = fsgd_sagg_downlink_bound(a->strat, n);
    if (cap > a->dmsg_cap) {
        uint8_t *nm = realloc(a->dmsg, cap);
        if (!nm)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory for the downlink");
        a->dmsg = nm;
        a->dmsg_cap = cap;
    }
    size_t len = 0;
    FSGD_TRY(fsgd_sagg_downlink_encode(a->strat, a->adam.theta, keys, n, budget ? budget : 1, a->dmsg, cap, &len,
                                       a->err, a->errsz));
    if (a->napplied && len > 0 && a->up_bytes_step > 0) {
        double target = DOWN_BYTES_SHARE * (double)a->up_bytes_step / (double)a->napplied;
        /* up to the union of the step's messages: a downlink codec that spends
         * fewer bits an entry than the uplink's carries more keys */
        double s = a->down_scale * target / (double)len, most = (double)a->napplied;
        a->down_scale = s < 0.25 ? 0.25 : s > most ? most : s;
    }
    uint32_t flags = 0, check = 0;
    if ((a->step % FSGD_AGG_REPLICA_CHECK_EVERY) == 0) {
        flags |= FSGD_WIRE_CDELTA_CHECK;
        check = fsgd_sagg_downlink_check(a->strat);
        a->s->replica_checks++;
    }
    qsort(a->applied, a->napplied, sizeof *a->applied, cmp_u32);
    a->s->t_down_encode += agg_now() - t0;
    return fsgd_wire_cdelta_put(&a->buf, flags, check, a->applied, (uint32_t)a->napplied, a->dmsg, (uint32_t)len);
}

/* job->downlink: "full" sends float32 values; "auto" compresses with what
 * the strategy says (its uplink codec when that is lossy; a lossless one
 * gets the exact values it promises); anything else is a lossy codec spec
 * of its own. */
int agg_downlink_setup(agg_t *a)
{
    return fsgd_sagg_downlink_open(a->strat, a->job->downlink, a->adam.theta, a->s->downlink, sizeof a->s->downlink,
                                   a->err, a->errsz);
}

int agg_publish(agg_t *a, int snapshot, int final, const uint32_t *keys, size_t n)
{
    a->buf.n = 0;
    int coded = fsgd_sagg_downlink_coded(a->strat);
    int rc = fsgd_wire_state_put(&a->buf, &a->st);
    /* The strategy's feedback for the step this message closes (a snapshot
     * closes one too), before the payload: trainer/KAFKA_FORMAT.md. */
    size_t slen = 0;
    const uint8_t *sec = snapshot && !a->step ? NULL : fsgd_sagg_section(a->strat, &slen);
    if (slen)
        rc = rc ? rc : fsgd_wire_u32(&a->buf, (uint32_t)slen) | fsgd_wire_put(&a->buf, sec, slen);
    if (snapshot) {
        rc = rc ? rc
                : fsgd_wire_model_put(&a->buf, (uint32_t)a->job->model, a->job->bias ? 1 : 0, (float)a->job->bias_value,
                                 a->dim, a->adam.theta, a->mdim);
        if (coded)
            fsgd_sagg_downlink_sync(a->strat, a->adam.theta); /* every worker now holds θ exactly */
    } else if (coded) {
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
    fsgd_kframe_t h = {.kind = snapshot ? FSGD_KMSG_SNAPSHOT : coded ? FSGD_KMSG_DELTA_CODED : FSGD_KMSG_DELTA_PACKED,
                       .flags = (final ? FSGD_KFLAG_FINAL : 0) | (slen ? FSGD_KFLAG_SECTION : 0), .gen = a->gen, .sender = 0, .step = a->step};
    uint64_t before = a->s->bytes_model;
    /* keys for the compacted model topic (fsgd_dist_topics_create) */
    char key[32];
    snprintf(key, sizeof key, snapshot ? "snapshot" : "delta.%llu",
             (unsigned long long)(a->step % a->snap_every));
    FSGD_TRY(fsgd_bus_send(a->prod, a->tmodel, 0, a->job->name, &h, key, a->buf.p, a->buf.n, &a->s->bytes_model,
                           a->err, a->errsz));
    a->s->bytes_down += (a->s->bytes_model - before) * (a->nlive ? a->nlive : 1);
    if (!snapshot) {
        a->s->down_msgs++;
        a->s->down_bytes_msg += a->s->bytes_model - before;
    }
    fsgd_bus_serve(a->prod);
    return 0;
}

