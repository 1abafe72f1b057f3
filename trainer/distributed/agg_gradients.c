/* One message from NAME.grads: taken into the step, or dropped with a
 * counted reason (fsgd_agg_reject_name). */
#include <stdio.h>
#include <stdlib.h>

#include "agg_clock.h"
#include "agg_early.h"
#include "agg_env.h"
#include "agg_intake.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/loss.h"
#include "fsgd/replay.h"
#include "fsgd/strategy.h"
#include "wire.h"

static int consumer_error(const agg_intake_ctx_t *c, const agg_env_t *env, const fsgd_bus_msg_t *m)
{
    int e = m->code;
    if (m->err == FSGD_BUS_EOF)
        return 0;
    char fatal[256];
    if (fsgd_bus_fatal(c->grads_c, fatal, sizeof fatal))
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_KAFKA, "%s consumer: fatal: %s", env->grads_topic, fatal);
    switch (m->err) {
    case FSGD_BUS_FATAL:
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_KAFKA, "%s consumer: %s", env->grads_topic, m->errstr);
    case FSGD_BUS_LOST: {
        /* Gradients were dropped by the broker before they were read (a
         * burst pushed them past retention or the embedded cluster's 5 MiB).
         * Nothing applied is lost: read on from what is left, and workers
         * send a gradient again when its step is not answered. */
        /* The partition's fetcher stopped (auto.offset.reset=error): assign
         * again, that partition from its log start, the others from where
         * they are. */
        char re[256];
        if (fsgd_bus_restart(c->grads_c, env->grads_topic, m->partition, FSGD_BUS_OFFSET_BEGINNING, re, sizeof re))
            return fsgd_err_fmt(env->err, env->errsz, FSGD_E_KAFKA, "%s consumer: %s, and reading on from the log "
                                "start failed: %s", env->grads_topic, m->errstr, re);
        env->s->consumer_errors++;
        agg_env_log(env, "%s [%d]: messages were dropped by the broker before they were read (%s): reading on from the "
                       "log start; workers send unanswered gradients again",
                    env->grads_topic, (int)m->partition, m->errstr);
        return 0;
    }
    default:
        break;
    }
    env->s->consumer_errors++;
    agg_intake_t *in = c->intake;
    for (int i = 0; i < in->n_kerr; i++)
        if (in->kerr_seen[i] == e)
            return 0;
    if (in->n_kerr < AGG_INTAKE_KERR_MAX)
        in->kerr_seen[in->n_kerr++] = (int)e;
    agg_env_log(env, "%s consumer: %s (%s; librdkafka retries; counted in metrics messages.consumer_errors, this kind "
                   "logged once)",
                env->grads_topic, m->errstr, m->errname);
    return 0;
}

/* The largest value a genuine gradient of `rows` rows can hold
 * (FSGD_AGG_GRAD_SLACK in fsgd/dist.h). */
static double value_bound(const agg_intake_ctx_t *c, uint64_t rows)
{
    /* a weighted row's label is ±weight (fsgd/rowlabel.h): its gradient scales by it */
    double l = c->job->train->model == FSGD_LOSS_SQUARED ? 1 + c->data->ymax : c->data->ymax > 1 ? c->data->ymax : 1;
    return (double)rows * c->data->xmax * l * FSGD_AGG_GRAD_SLACK;
}

/* Takes one message from NAME.grads, or drops it with a reason. The order of
 * the checks is the order of trust: a frame at all, from a member, for the
 * step in progress (before anything is stored), then what it claims. */
int agg_handle_grad(const agg_intake_ctx_t *c, const agg_env_t *env, const fsgd_bus_msg_t *m)
{
    if (m->err)
        return consumer_error(c, env, m);
    fsgd_bus_lat_add(&c->clock->lat_grads, m);
    env->s->bytes_up += m->len;
    return agg_take_frame(c, env, m->val, m->len, m->partition, m->offset);
}

/* A checked frame's sender and place: 1 to go on, 0 dropped (counted), < 0
 * an error. A copy of a frame its sender wrote before (the tag, verified,
 * covers its incarnation and sequence) was taken or refused when it first
 * came, whatever it claims. */
static int admit(const agg_intake_ctx_t *c, const agg_env_t *env, const fsgd_kframe_t *f, const void *payload,
                 size_t plen, int32_t partition, int64_t offset)
{
    int rp = partition >= 0 ? fsgd_replay_frame(c->replay, partition, offset, payload, plen) : 0;
    if (rp < 0)
        return fsgd_err_fmt(env->err, env->errsz, rp, "aggregator: out of memory");
    if (rp) {
        agg_env_reject(env, FSGD_AGG_REJ_REPLAYED,
                       "partition %d offset %lld: sender %u generation %u step %llu chunk %u: a copy of a frame its "
                       "sender wrote before", (int)partition, (long long)offset, f->sender, f->gen,
                       (unsigned long long)f->step, f->chunk);
        return 0;
    }
    const int ws = fsgd_dist_replica(c->job->train, c->job->dist) == FSGD_REPLICA_WORKING_SET;
    if (f->kind != FSGD_KMSG_GRAD && !(f->kind == FSGD_KMSG_PULL && ws)) {
        agg_env_reject(env, FSGD_AGG_REJ_CORRUPT, "offset %lld: a frame of kind %u, not a gradient%s",
                       (long long)offset, f->kind, ws ? " or a pull" : "");
        return 0;
    }
    if (f->body_len > FSGD_KBUS_CHUNK_MAX) {
        agg_env_reject(env, FSGD_AGG_REJ_OVERSIZE,
                       "offset %lld: sender %u: a chunk of %u bytes; fsgd writes at most %u", (long long)offset,
                       f->sender, f->body_len, FSGD_KBUS_CHUNK_MAX);
        return 0;
    }
    /* A following shard takes only ranges shard 0 applied (its membership
     * decides): rejecting a sender whose worker_assignment this shard has
     * not read yet would lose that part for good. */
    if (!c->lead && !agg_member_find(c->members, f->sender)) {
        /* its worker_assignment may be on its way: read NAME.ctl first */
        agg_ctl_drain(c->members, &c->ctl, env, 0);
        if (!agg_member_find(c->members, f->sender)) {
            agg_env_reject(env, FSGD_AGG_REJ_FORGED,
                           "sender %u is not a member of job %s (no worker_assignment from it on %s; %zu members)",
                           f->sender, c->job->dist->name, c->ctl.ctl_topic, c->members->nmem);
            return 0;
        }
    }
    if (f->gen != c->gen) {
        if (f->gen < c->gen)
            agg_env_reject(env, FSGD_AGG_REJ_STALE, "sender %u: generation %u, this aggregator's is %u", f->sender,
                           f->gen, c->gen);
        else
            agg_env_reject(env, FSGD_AGG_REJ_FORGED, "sender %u: generation %u is newer than this aggregator's %u",
                           f->sender, f->gen, c->gen);
        return 0;
    }
    return 1;
}

/* A gradient frame's step against the step in progress: 1 when it is this
 * step's (reassemble it), else what happened to it (held for its step, or
 * dropped and counted: 0; an error < 0). */
static int for_open_step(const agg_intake_ctx_t *c, const agg_env_t *env, const fsgd_kframe_t *f, const void *payload,
                         size_t plen, int64_t offset, unsigned lag)
{
    if (lag > (unsigned)c->open->tau || lag >= f->step) {
        agg_env_reject(env, FSGD_AGG_REJ_STALE,
                       "sender %u step %llu: computed on the model of step %lld, %u steps before; the job's staleness "
                       "bound is %d", f->sender, (unsigned long long)f->step, (long long)f->step - 1 - (long long)lag,
                       lag, c->open->tau);
        return 0;
    }
    if (c->lead && f->step == c->step + 1 && !agg_lead_decided(c->lead, f->step)) /* shard 0 has not decided it yet */
        return agg_early_hold(&c->open->early, env, f, payload, plen, offset);
    if (f->step > c->step + 1 && f->step <= c->step + 1 + (uint64_t)c->open->tau) {
        /* Bounded staleness: a worker runs up to τ steps ahead of the model
         * it has; its gradient waits here until its step opens, since steps
         * are applied in order whatever order they arrive in. */
        return agg_early_hold(&c->open->early, env, f, payload, plen, offset);
    }
    if (f->step == c->step + 1)
        return 1;
    /* Workers answer at most τ steps past the last model message, so
     * nothing else is ever kept (reassembly holds the open step; later
     * ones wait whole in agg_early.c) */
    if (f->step <= c->step && fsgd_kasm_completed(c->open->as, f)) /* e.g. a produce retried by the client */
        agg_env_reject(env, FSGD_AGG_REJ_DUPLICATE, "sender %u step %llu chunk %u/%u: a copy of a message taken before",
                       f->sender, (unsigned long long)f->step, f->chunk, f->nchunks);
    else if (f->step <= c->step)
        agg_env_reject(env, FSGD_AGG_REJ_STALE, "sender %u: step %llu, already applied up to step %llu", f->sender,
                       (unsigned long long)f->step, (unsigned long long)c->step);
    else
        agg_env_reject(env, FSGD_AGG_REJ_FUTURE, "sender %u: step %llu while step %llu is in progress", f->sender,
                       (unsigned long long)f->step, (unsigned long long)c->step + 1);
    return 0;
}

/* One chunk into the open step's reassembly: FSGD_KASM_DONE with the whole
 * body, another >= 0 (pending, or dropped and counted), or an error. */
static int reassemble(fsgd_kasm_t *as, const agg_env_t *env, const fsgd_kframe_t *f, const uint8_t **body, size_t *len)
{
    char e[256];
    int r = fsgd_kasm_feed(as, f, body, len, e, sizeof e);
    if (r == FSGD_KASM_DUP) {
        agg_env_reject(env, FSGD_AGG_REJ_DUPLICATE, "sender %u step %llu chunk %u/%u seen before", f->sender,
                       (unsigned long long)f->step, f->chunk, f->nchunks);
        return 0;
    }
    if (r == FSGD_E_FORMAT) {
        /* Its chunks disagree with what is pending under the same key: the
         * newest frame wins, so junk left by someone else cannot block the
         * genuine message when it comes. */
        agg_env_reject(env, FSGD_AGG_REJ_CORRUPT, "%s (the pending chunks are dropped)", e);
        fsgd_kasm_forget(as, f);
        r = fsgd_kasm_feed(as, f, body, len, e, sizeof e);
    }
    if (r == FSGD_E_NOMEM)
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_NOMEM, "aggregator: %s", e);
    if (r < 0) {
        agg_env_reject(env, r == FSGD_E_RANGE ? FSGD_AGG_REJ_OVERSIZE : FSGD_AGG_REJ_CORRUPT, "%s", e);
        return 0;
    }
    env->s->held_bytes_max = fsgd_kasm_held_max(as);
    return r;
}

/* What no worker can send for its rows: a reason (FSGD_AGG_REJ_FORGED) and
 * why, or -1. */
static int impossible(const fsgd_wire_state_t *st, uint64_t gweights, const fsgd_wire_grad_t *g, char *why, size_t cap)
{
    if (g->epoch != st->epoch)
        snprintf(why, cap, "claims epoch %u, the job is in epoch %u", g->epoch, st->epoch);
    else if (g->rows == 0 && g->codec_len)
        snprintf(why, cap, "0 rows but a gradient of %u bytes", g->codec_len);
    else if (g->loss_sum < 0 || g->t_grad < 0 || g->t_encode < 0 || g->raw_entries > gweights)
        snprintf(why, cap, "loss %g, times %g/%g s or %llu raw entries (of %llu weights) are impossible", g->loss_sum,
                 g->t_grad, g->t_encode, (unsigned long long)g->raw_entries, (unsigned long long)gweights);
    else
        return -1;
    return FSGD_AGG_REJ_FORGED;
}

/* 1 when g's ranges start at their partitions' positions, within their
 * ends, each partition once and none claimed by another gradient of the
 * step (and, a following shard, applied by shard 0); *rows: the rows they
 * hold. */
static int ranges_fit(const agg_intake_ctx_t *c, const fsgd_wire_grad_t *g, uint64_t *rows)
{
    *rows = 0;
    for (uint32_t i = 0; i < g->nranges; i++) {
        const fsgd_wire_range_t *rg = &g->ranges[i];
        if (c->open->claimed[rg->part] || rg->start != c->st->pos[rg->part] || rg->end > c->st->end[rg->part])
            return 0;
        uint64_t s0 = c->st->start[rg->part];
        *rows += c->data->rows_at[rg->part][rg->end - s0] - c->data->rows_at[rg->part][rg->start - s0];
        for (uint32_t j = 0; j < i; j++)
            if (g->ranges[j].part == rg->part)
                return 0;
    }
    /* a following shard: shard 0 applied these ranges in this step */
    return !c->lead || agg_lead_applied(c->lead, c->st, c->step + 1, g->ranges, g->nranges);
}

/* A whole gradient message of the open step from f->sender: checked, its
 * values added to the step's reduction, or dropped (counted). */
static int take_gradient(const agg_intake_ctx_t *c, const agg_env_t *env, const fsgd_kframe_t *f, const uint8_t *body,
                         size_t len, unsigned lag)
{
    char e[256];
    fsgd_wire_grad_t g;
    if (fsgd_wire_grad_get(body, len, c->st->nparts, &g, e, sizeof e) < 0) {
        free(g.ranges);
        fsgd_kasm_forget(c->open->as, f); /* the genuine message may still come */
        agg_env_reject(env, FSGD_AGG_REJ_CORRUPT, "sender %u step %llu: %s", f->sender, (unsigned long long)f->step, e);
        return 0;
    }
    char why[300] = "";
    int reason = impossible(c->st, c->gweights, &g, why, sizeof why);
    /* A member that sent a well-formed gradient for the step has answered it,
     * whether its ranges are taken or not (a rebalance can make them stale). */
    uint64_t rows = 0;
    int ok = reason < 0 && ranges_fit(c, &g, &rows);
    if (ok && rows != g.rows) {
        reason = FSGD_AGG_REJ_FORGED;
        snprintf(why, sizeof why, "claims %llu rows, its ranges hold %llu", (unsigned long long)g.rows,
                 (unsigned long long)rows);
    } else if (ok && g.rows && !g.codec_len) {
        reason = FSGD_AGG_REJ_FORGED;
        snprintf(why, sizeof why, "%llu rows but no gradient", (unsigned long long)g.rows);
    }
    if (reason >= 0) {
        free(g.ranges);
        fsgd_kasm_forget(c->open->as, f);
        agg_env_reject(env, reason, "sender %u step %llu: %s", f->sender, (unsigned long long)f->step, why);
        return 0;
    }
    size_t entries = 0;
    if (ok && g.codec_len) {
        double t0 = agg_now();
        int rc = fsgd_sagg_add(c->model->strat, f->sender, g.codec, g.codec_len, value_bound(c, g.rows), &entries, e,
                               sizeof e);
        env->s->t_decode += agg_now() - t0;
        if (rc == FSGD_E_NOMEM) {
            free(g.ranges);
            return fsgd_err_fmt(env->err, env->errsz, FSGD_E_NOMEM, "aggregator: %s", e);
        }
        if (rc < 0) {
            free(g.ranges);
            fsgd_kasm_forget(c->open->as, f);
            if (rc == FSGD_E_RANGE)
                agg_env_reject(env, FSGD_AGG_REJ_FORGED,
                               "sender %u step %llu: %s for %llu rows (rows x max|x| %g x %g, FSGD_AGG_GRAD_SLACK)",
                               f->sender, (unsigned long long)f->step, e, (unsigned long long)g.rows, c->data->xmax,
                               FSGD_AGG_GRAD_SLACK);
            else
                agg_env_reject(env, FSGD_AGG_REJ_CORRUPT, "sender %u step %llu: gradient: %s", f->sender,
                               (unsigned long long)f->step, e);
            return 0;
        }
    }
    agg_members_t *mb = c->members;
    agg_add_set(&mb->got, &mb->ngot, &mb->cap_got, f->sender);
    if (!agg_in_set(mb->live, mb->nlive, f->sender) &&
        agg_add_set(&mb->live, &mb->nlive, &mb->cap_live, f->sender) == 0)
        agg_ctl_member(&c->ctl, mb, "worker_joined", f->sender);
    if (!ok)
        /* a partition claimed twice (a rebalance) or from a stale position */
        agg_env_reject(env, FSGD_AGG_REJ_CONFLICT,
                       "sender %u step %llu: a range starts off its partition's position or another gradient of the "
                       "step took the partition", f->sender, (unsigned long long)f->step);
    else
        agg_open_take(c->open, env->s, f->sender, &g, entries, lag);
    free(g.ranges);
    return 0;
}

int agg_take_frame(const agg_intake_ctx_t *c, const agg_env_t *env, const void *payload, size_t plen,
                   int32_t partition, int64_t offset)
{
    fsgd_kframe_t f;
    char e[256];
    int prc = fsgd_kframe_parse(payload, plen, &f, NULL, c->auth, e, sizeof e);
    if (prc < 0) {
        agg_env_reject(env, prc == FSGD_E_AUTH ? FSGD_AGG_REJ_UNAUTH : FSGD_AGG_REJ_CORRUPT, "offset %lld: %s",
                       (long long)offset, e);
        return 0;
    }
    int rc = admit(c, env, &f, payload, plen, partition, offset);
    if (rc <= 0)
        return rc;
    if (f.kind == FSGD_KMSG_PULL)
        return agg_take_pull(c->pull, &c->pull_job, c->model, env, &f, offset);
    const unsigned lag = (f.flags & FSGD_KFLAG_LAG_MASK) >> FSGD_KFLAG_LAG_SHIFT;
    if ((rc = for_open_step(c, env, &f, payload, plen, offset, lag)) != 1)
        return rc;
    const uint8_t *body;
    size_t len;
    if ((rc = reassemble(c->open->as, env, &f, &body, &len)) != FSGD_KASM_DONE)
        return rc < 0 ? rc : 0;
    if (agg_in_set(c->members->got, c->members->ngot, f.sender)) {
        agg_env_reject(env, FSGD_AGG_REJ_DUPLICATE, "sender %u already answered step %llu", f.sender,
                       (unsigned long long)f.step);
        return 0;
    }
    return take_gradient(c, env, &f, body, len, lag);
}

int agg_take_held(const agg_intake_ctx_t *c, const agg_env_t *env)
{
    agg_early_t *take;
    size_t ntake;
    /* Split first: taking a frame may hold nothing new (its step is open),
     * but the held list stays consistent whatever agg_take_frame does. */
    FSGD_TRY(agg_early_due(&c->open->early, env, c->step + 1, &take, &ntake));
    int rc = 0;
    for (size_t i = 0; i < ntake; i++) {
        if (!rc)
            rc = agg_take_frame(c, env, take[i].bytes, take[i].len, -1, take[i].offset); /* checked when it came */
        free(take[i].bytes);
    }
    free(take);
    return rc;
}
