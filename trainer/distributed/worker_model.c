/* The model and control topics: snapshots, deltas (whole or a shard's part),
 * the step state each carries, and NAME.ctl's announcements (worker_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/auth.h"
#include "fsgd/clock.h"
#include "worker_internal.h"
#include "snapshot_every.h"

/* Why: a snapshot of another shape than the one this worker holds is not
 * obeyed: in a job without a key anyone can write one, and it made every
 * worker exit (issue 42, item 15). It is rejected (counted, logged once)
 * and the job's own snapshots go on. Returns 1 when m was rejected so. */
static int shape_refused(worker_t *w, const fsgd_wire_model_t *m, const fsgd_kframe_t *f)
{
    if (!w->theta || (w->mdim == m->n && w->kind == m->kind))
        return 0;
    worker_reject(w, 1, "generation %u step %llu: a snapshot of a model of %llu weights (loss %u); this job's has "
                  "%llu (loss %u): not taken", f->gen, (unsigned long long)f->step, (unsigned long long)m->n, m->kind,
                  (unsigned long long)w->mdim, w->kind);
    return 1;
}

static int setup_model(worker_t *w, const fsgd_wire_model_t *m)
{
    if (w->theta)
        return 0; /* the same shape (shape_refused) */
    w->dim = m->dim;
    w->has_bias = (int)m->has_bias;
    w->bias = m->bias;
    w->kind = m->kind;
    w->mdim = m->n;
    /* a working-set worker holds its steps' values only: θ starts small
     * and grows with the largest step (worker_theta_reserve) */
    FSGD_TRY(worker_theta_reserve(w, w->pull.on ? (w->mdim < WORKER_WS_THETA_FIRST ? w->mdim : WORKER_WS_THETA_FIRST) : w->mdim));
    /* each shard's part of a gradient has its own strategy; the unsharded
     * job's one runs the job's spec as given */
    const uint32_t S = w->shards;
    for (uint32_t i = 0; i < S; i++) {
        char spec[sizeof w->job->train->codec + 32];
        if (S > 1 && fsgd_strategy_shard_spec(w->job->train->codec, w->mdim, i, S, spec, sizeof spec, w->err,
                                              w->errsz) < 0)
            return FSGD_E_ARG;
        if (!(w->strat[i] = fsgd_sworker_new(S > 1 ? spec : w->job->train->codec, fsgd_shard_dim(w->mdim, i, S),
                                             w->job->train->seed + w->id + i, w->err, w->errsz)))
            return FSGD_E_ARG;
    }
    return 0;
}

/* A model message with values, to a working-set worker: its θ holds only
 * pulled values at local columns, and the job's shards send none. */
static int ws_takes_no_values(const worker_t *w, char *e, size_t esz)
{
    return fsgd_err_fmt(e, esz, FSGD_E_FORMAT, "a delta with values on %s: job %s's workers pull their values "
                        "(replica working_set) and take none from the model topic", w->topic.model, w->job->dist->name);
}

/* NAME.ctl, read from where it ended when the worker started: the
 * aggregator's job_end of our generation (or a later one) ends the worker:
 * "failed" with the aggregator's error, "done" like the final model. */
static int unannounced(const worker_t *w, const fsgd_kframe_t *f);

/* A snapshot's model: whole, or (a working-set worker, whose values are
 * pulled) its header only. */
static int model_get(const worker_t *w, const uint8_t *p, size_t len, size_t *off, fsgd_wire_model_t *m, char *e,
                     size_t esz)
{
    return w->pull.on ? fsgd_wire_model_head_get(p, len, off, m, e, esz) : fsgd_wire_model_get(p, len, off, m, e, esz);
}
static int apply_model(worker_t *w, const fsgd_kframe_t *fp, const uint8_t *body, size_t len, int64_t offset);
static int take_message(worker_t *w, const fsgd_kframe_t *f, const uint8_t *body, size_t len, int64_t offset);
static int snapshot_head(worker_t *w, const fsgd_kframe_t *f, int64_t offset, int *rc);
static int adopt_state(worker_t *w, fsgd_wire_state_t s, uint32_t gen, uint64_t step, int final, int64_t offset);

static int handle_ctl(worker_t *w, const fsgd_bus_msg_t *m)
{
    char ev[32], status[16], msg[400];
    double gen = -1;
    const char *j = m->val;
    if (fsgd_ctl_verify(w->auth, m, msg, sizeof msg) < 0) {
        worker_reject(w, REJECT_UNAUTH, "%s %s", w->topic.ctl, msg);
        return 0;
    }
    /* read from where NAME.ctl ended at start: a copy of an event after it */
    if (fsgd_auth_enabled(w->auth) && fsgd_replay_ctl(w->replay_ctl, m->offset, m->mac, m->mac_len) == 1) {
        worker_reject(w, REJECT_REPLAY, "%s offset %lld: a copy of an event its sender wrote before", w->topic.ctl,
                      (long long)m->offset);
        return 0;
    }
    if (m->mac && !fsgd_auth_enabled(w->auth)) /* the job's events are tagged: see worker_handle_model */
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_AUTH,
                            "%s offset %lld: the job's messages are authenticated and this worker was started "
                            "without its key (--job-key-file): it cannot read the model; leaving the group",
                            w->topic.ctl, (long long)m->offset);
    double step = 0;
    if (j && fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) && !strcmp(ev, "aggregator_waiting")) {
        /* a follow job without rows: its aggregator is there, holding its step */
        w->model_seen = w->agg_idle_seen = fsgd_clock_s();
        return 0;
    }
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
    const char *topic = m->topic && m->topic[0] ? m->topic : w->topic.model;
    if (m->err == FSGD_BUS_LOST)
        /* the fetcher stopped: the model again from its log start, NAME.ctl
         * from its end */
        fsgd_bus_restart(w->model_c, topic, m->partition,
                         strcmp(topic, w->topic.ctl) ? FSGD_BUS_OFFSET_BEGINNING : FSGD_BUS_OFFSET_END, NULL, 0);
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
void worker_unpark(worker_t *w, int count)
{
    if (w->parked && count)
        worker_reject(w, 1, "generation %u step %llu: a snapshot of a generation %s.ctl never announced (newest announced "
                     "%u, this worker's %u): not from this job's run",
               w->parked_f.gen, (unsigned long long)w->parked_f.step, w->job->dist->name, w->ctl_gen, w->gen);
    free(w->parked);
    w->parked = NULL;
}

static void park(worker_t *w, const fsgd_kframe_t *f, const uint8_t *body, size_t len, int64_t offset)
{
    worker_unpark(w, 1); /* an older one: its job_start did not come before this one */
    if (!(w->parked = malloc(len ? len : 1)))
        return;
    memcpy(w->parked, body, len);
    w->parked_f = *f;
    w->parked_len = len;
    w->parked_off = offset;
    fsgd_kasm_forget(w->as, f); /* a copy after its job_start is taken as new */
}

int worker_handle_model(worker_t *w, const fsgd_bus_msg_t *m)
{
    if (m->err) {
        consumer_error(w, m);
        return 0;
    }
    fsgd_bus_lat_add(&w->lat_model, m);
    if (!strcmp(m->topic, w->topic.ctl))
        return handle_ctl(w, m);
    if (w->pull.on && !strcmp(m->topic, w->topic.pull))
        return worker_take_values(w, m);
    fsgd_kframe_t f;
    char e[256];
    int prc = fsgd_kframe_parse(m->val, m->len, &f, NULL, w->auth, e, sizeof e);
    if (prc == FSGD_E_AUTH && !fsgd_auth_enabled(w->auth) && (f.flags & FSGD_KFLAG_AUTH))
        /* the job is authenticated and this worker has no key: it can never
         * apply a model, so it leaves (its partitions go to the others)
         * instead of holding them (issue 42, item 12) */
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_AUTH,
                            "%s offset %lld: the job's messages are authenticated and this worker was started "
                            "without its key (--job-key-file): it cannot read the model; leaving the group",
                            w->topic.model, (long long)m->offset);
    if (prc < 0) {
        worker_reject(w, prc == FSGD_E_AUTH ? REJECT_UNAUTH : 1, "offset %lld: %s", (long long)m->offset, e);
        return 0;
    }
    /* a copy of a model message its shard wrote before (an old snapshot
     * copied to the topic's end must not take the model back) */
    int rp = fsgd_replay_frame(w->replay_model, m->partition, m->offset, m->val, m->len);
    if (rp < 0)
        return fsgd_err_fmt(w->err, w->errsz, rp, "worker: out of memory");
    if (rp) {
        worker_reject(w, REJECT_REPLAY, "%s partition %d offset %lld: generation %u step %llu: a copy of a message "
                      "its sender wrote before", w->topic.model, (int)m->partition, (long long)m->offset, f.gen,
                      (unsigned long long)f.step);
        return 0;
    }
    if (f.kind == FSGD_KMSG_GRAD) {
        worker_reject(w, 1, "offset %lld: a gradient frame on the model topic", (long long)m->offset);
        return 0;
    }
    w->stats->bytes_down += m->len;
    int rc = 0;
    if (w->pull.on && f.kind == FSGD_KMSG_SNAPSHOT && f.nchunks > 1 && snapshot_head(w, &f, m->offset, &rc))
        return rc;
    const uint8_t *body;
    size_t len;
    int r = fsgd_kasm_feed(w->as, &f, &body, &len, e, sizeof e);
    if (r == FSGD_KASM_DUP)
        worker_reject(w, 0, "generation %u step %llu chunk %u/%u seen before", f.gen, (unsigned long long)f.step, f.chunk,
               f.nchunks);
    if (r < 0)
        worker_reject(w, 1, "offset %lld: %s", (long long)m->offset, e);
    if (r != FSGD_KASM_DONE)
        return 0;
    return take_message(w, &f, body, len, m->offset);
}

/* A whole model message (reassembled, or a snapshot's head). */
static int take_message(worker_t *w, const fsgd_kframe_t *f, const uint8_t *body, size_t len, int64_t offset)
{
    if (f->gen < w->gen)
        return 0; /* a message of an aggregator that has since restarted */
    /* shards' snapshots of a new generation come on S partitions, in any
     * order against NAME.ctl's job_start: not parked (one slot) */
    if (w->shards == 1 && unannounced(w, f)) {
        if (f->kind == FSGD_KMSG_SNAPSHOT)
            park(w, f, body, len, offset);
        return 0; /* a delta of a generation this worker does not hold is of no use anyway */
    }
    return apply_model(w, f, body, len, offset);
}

/* Why: a working-set worker pulls its values, so of a snapshot it needs the
 * state and the model's header, which its first chunk holds; the chunks
 * of weights after it are dropped unassembled (a dense shard of 2^28
 * weights is 1 GiB a snapshot). Returns 1 when f was dealt with here (*rc:
 * its outcome), 0 when it goes the usual way (a first chunk that does not
 * hold the whole head: the message is reassembled). */
static int snapshot_head(worker_t *w, const fsgd_kframe_t *f, int64_t offset, int *rc)
{
    struct head_taken *h = &w->head_taken[f->sender % FSGD_SHARDS_MAX];
    const int taken = h->valid && h->gen == f->gen && h->step == f->step;
    if (f->chunk != 0 || taken)
        return taken; /* its weights, or a copy of a head taken */
    char e[256];
    size_t off = 0;
    fsgd_wire_state_t s = {0};
    fsgd_wire_model_t mm;
    int ok = fsgd_wire_state_get(f->body, f->body_len, &off, &s, e, sizeof e) == 0;
    fsgd_wire_state_free(&s);
    if (ok && (f->flags & FSGD_KFLAG_SECTION)) {
        const uint8_t *sec;
        size_t slen;
        ok = fsgd_wire_section_get(f->body, f->body_len, &off, &sec, &slen, e, sizeof e) == 0;
    }
    if (!ok || fsgd_wire_model_head_get(f->body, f->body_len, &off, &mm, e, sizeof e) < 0)
        return 0;
    *h = (struct head_taken){1, f->gen, f->step};
    w->stats->snapshot_heads++;
    *rc = take_message(w, f, f->body, f->body_len, offset);
    return 1;
}

/* --- a message of shard I of S (the unsharded job: shard 0 of 1) --- */

/* A model message's head: the step state it carries and (flag SECTION) the
 * strategy's feedback for the step it closes. < 0 with e set when malformed. */
static int read_head(const fsgd_kframe_t *f, const uint8_t *body, size_t len, size_t *off, fsgd_wire_state_t *s,
                     const uint8_t **sec, size_t *slen, char *e, size_t esz)
{
    int rc = fsgd_wire_state_get(body, len, off, s, e, esz);
    if (rc == 0 && (f->flags & FSGD_KFLAG_SECTION))
        rc = fsgd_wire_section_get(body, len, off, sec, slen, e, esz);
    return rc;
}

/* A snapshot's weights into θ (of shard I of S: its strided part), and into
 * a device backend's copy. A working-set worker pulls the values it uses:
 * a snapshot gives it the step and the state only. */
static int load_weights(worker_t *w, const fsgd_wire_model_t *mm, int fresh, uint32_t S, uint32_t I)
{
    if (w->pull.on)
        return 0;
    if (fresh) /* setup_model's calloc: zeros no page holds yet */
        fsgd_wire_model_weights_into_zeros(mm, w->theta, S, I);
    else if (S == 1)
        fsgd_wire_model_weights(mm, w->theta);
    else
        fsgd_wire_model_weights_strided(mm, w->theta, S, I);
    return fsgd_backend_load(w->be, w->theta, w->mdim, w->err, w->errsz);
}

/* A delta's entries into w->delta, keys made global (shard I of S); a coded
 * delta's head into cd. < 0 with e set; θ is untouched. */
static int read_delta(worker_t *w, const fsgd_kframe_t *f, const uint8_t *body, size_t len, size_t *off, uint32_t S,
                      uint32_t I, fsgd_wire_cdelta_t *cd, char *e, size_t esz)
{
    const uint64_t nloc = S > 1 ? fsgd_shard_dim(w->mdim, I, S) : w->mdim;
    int rc;
    if (f->kind == FSGD_KMSG_DELTA_CODED) {
        rc = fsgd_wire_cdelta_get(body, len, off, cd, e, esz);
        if (rc == 0 && w->pull.on)
            rc = ws_takes_no_values(w, e, esz);
        if (rc == 0)
            rc = fsgd_sworker_downlink_decode(cd->msg, cd->msg_len, nloc, &w->delta, e, esz);
    } else {
        rc = f->kind == FSGD_KMSG_DELTA_PACKED ? fsgd_wire_pdelta_get(body, len, off, nloc, &w->delta, e, esz)
                                               : fsgd_wire_delta_get(body, len, off, nloc, &w->delta, e, esz);
        if (rc == 0 && w->pull.on && w->delta.n)
            rc = ws_takes_no_values(w, e, esz);
    }
    for (size_t i = 0; rc == 0 && S > 1 && i < w->delta.n; i++)
        w->delta.keys[i] = (uint32_t)fsgd_shard_global(w->delta.keys[i], I, S);
    return rc;
}

/* θ takes w->delta: a coded delta is an update every replica adds, the same
 * float additions as the aggregator's replica, so both stay bit-identical
 * (its entries then hold the new values, for the backend); a plain one
 * holds the new values. < 0 with e set: θ may be changed. */
static int apply_delta(worker_t *w, const fsgd_kframe_t *f, char *e, size_t esz)
{
    if (f->kind != FSGD_KMSG_DELTA_CODED) {
        for (size_t i = 0; i < w->delta.n; i++)
            w->theta[w->delta.keys[i]] = w->delta.vals[i];
        return 0;
    }
    FSGD_TRY(fsgd_sworker_downlink_apply(w->theta, w->mdim, &w->delta, e, esz));
    for (size_t i = 0; i < w->delta.n; i++)
        w->delta.vals[i] = w->theta[w->delta.keys[i]];
    return 0;
}

/* How a rejection names message f: its generation and step, or in a
 * sharded job its shard and step. */
static const char *msg_at(const worker_t *w, const fsgd_kframe_t *f, char *at, size_t atsz)
{
    if (w->shards > 1)
        snprintf(at, atsz, "shard %u step %llu", f->sender, (unsigned long long)f->step);
    else
        snprintf(at, atsz, "generation %u step %llu", f->gen, (unsigned long long)f->step);
    return at;
}

/* Every shard's strategy forgets its error-feedback state (counted): the
 * gradients in flight, encoded on top of it, are refused or of a past run. */
static void reset_strategies(worker_t *w)
{
    for (uint32_t i = 0; i < w->shards; i++)
        if (fsgd_sworker_reset(w->strat[i]))
            w->stats->ef_discarded++;
}

/* Shard I's message closed step `step`: when it is a step this worker sent
 * a gradient for, shard I's strategy learns whether its part was applied
 * (a message that was not has its error-feedback mass restored: its rows
 * come round again) and reads the shard's feedback section. The step's
 * entry stays in flight until every shard closed it (combine_shards). */
static void close_step(worker_t *w, uint32_t shard, uint32_t gen, uint64_t step, int applied, const uint8_t *sec,
                       size_t slen)
{
    for (size_t i = 0; i < w->fl.n; i++) {
        inflight_t *e = &w->fl.e[i];
        if (e->gen != gen || e->step != step)
            continue;
        if (e->doomed)
            return; /* the strategies forgot it when it was doomed */
        if (!applied && i + 1 < w->fl.n) {
            /* Not applied, with later gradients encoded on top of it: a
             * strategy can restore only its last message, and those later
             * ones started where this one ended, so the aggregator refuses
             * them too. Forget the error-feedback state and start again
             * from the model's positions. */
            for (size_t j = i + 1; j < w->fl.n; j++)
                w->fl.e[j].doomed = 1;
            reset_strategies(w);
            return;
        }
        char e2[256];
        int rc = fsgd_sworker_after_step(w->strat[shard], applied, sec, slen, e2, sizeof e2);
        if (rc == 1)
            w->stats->ef_undone++;
        else if (rc < 0)
            worker_reject(w, 1, "generation %u step %llu: feedback section of shard %u: %s", gen,
                          (unsigned long long)step, shard, e2);
        return;
    }
}

/* Whether θ's part of shard I (the whole model unsharded) is the
 * aggregator's replica that a coded delta's check value names. */
static int replica_matches(const worker_t *w, uint32_t I, uint32_t check)
{
    const uint32_t S = w->shards;
    if (S == 1)
        return fsgd_sworker_downlink_verify(w->theta, w->mdim, check);
    return fsgd_downlink_checksum_strided(w->theta, fsgd_shard_dim(w->mdim, I, S), S, I) == check;
}

/* Steps between snapshots, as the aggregator chose them (every shard by
 * the whole model's weights). */
static uint64_t snapshot_gap(const worker_t *w)
{
    return dist_snapshot_every(w->job->dist->snapshot_every, w->job->dist->max_model_weights, w->mdim);
}

/* Every step publishes one model message on each shard's stream and every
 * snapshot_every-th is a snapshot: a reader in step cannot meet a snapshot
 * of its own generation further ahead, and the first snapshot of an
 * announced generation is at the step its job_start named. One that is not
 * could not come from this run (a forged one, issue 27): taking it would
 * stall the job. Twice the gap leaves room to spare. 1 when f was refused so. */
static int snapshot_too_far(worker_t *w, const fsgd_kframe_t *f, uint32_t I)
{
    const uint64_t every = snapshot_gap(w);
    if (w->sh_valid[I] && f->gen == w->gen && f->step > w->sh_step[I] + 2 * every) {
        worker_reject(w, 1, "generation %u: a snapshot of step %llu, %llu steps past this worker's model (step %llu; "
                      "snapshots come every %llu steps): not from this run",
                      f->gen, (unsigned long long)f->step, (unsigned long long)(f->step - w->sh_step[I]),
                      (unsigned long long)w->sh_step[I], (unsigned long long)every);
        return 1;
    }
    if (w->ctl_read && f->gen != w->gen && f->gen == w->ctl_gen && f->step > w->ctl_step + 2 * every) {
        worker_reject(w, 1, "generation %u: a snapshot of step %llu, %llu steps past the step %s.ctl announced (%llu): "
                      "not from this run",
                      f->gen, (unsigned long long)f->step, (unsigned long long)(f->step - w->ctl_step), w->job->dist->name,
                      (unsigned long long)w->ctl_step);
        return 1;
    }
    return 0;
}

/* A snapshot of a generation after the one this worker held: a restarted
 * aggregator (every shard restarts with it) replays the rows since its
 * checkpoint, so mass in the residuals from those rows would be applied
 * twice, and the gradients in flight were of the old run. Every shard
 * starts again from its snapshot of the new generation. */
static void leave_generation(worker_t *w)
{
    if (w->valid) /* a worker already waiting for a snapshot counted its resync */
        w->stats->resyncs++;
    inflight_clear(&w->fl);
    reset_strategies(w);
    w->valid = 0;
    for (uint32_t i = 0; i < w->shards; i++)
        w->sh_valid[i] = 0;
}

/* Shard I's snapshot: 1 when θ holds its part now, 0 when it was not taken
 * (rejected, or older than what this worker holds of the shard), < 0 on a
 * failure. */
static int take_snapshot(worker_t *w, const fsgd_kframe_t *f, uint32_t I, const uint8_t *body, size_t len, size_t off,
                         const uint8_t *sec, size_t slen)
{
    const uint32_t S = w->shards;
    char e[256], at[64];
    fsgd_wire_model_t mm;
    int bad = model_get(w, body, len, &off, &mm, e, sizeof e) < 0;
    if (!bad && S == 1 && mm.shards > 1) /* a sharded job's shard 0: its part only */
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_ARG,
                            "worker: job %s runs %u aggregator shards (a snapshot of shard %u of %u on %s): give "
                            "the worker --shards %u", w->job->dist->name, mm.shards, mm.shard, mm.shards, w->topic.model,
                            mm.shards);
    if (!bad && (mm.shards != S || mm.shard != I)) {
        snprintf(e, sizeof e, "a snapshot of shard %u of %u on shard %u's stream of %u", mm.shard, mm.shards, I, S);
        bad = 1;
    }
    if (bad) {
        fsgd_kasm_forget(w->as, f);
        worker_reject(w, 1, "%s: %s", msg_at(w, f, at, sizeof at), e);
        return 0;
    }
    if (w->sh_valid[I] && f->gen == w->gen && f->step < w->sh_step[I])
        return 0;
    if (snapshot_too_far(w, f, I) || shape_refused(w, &mm, f))
        return 0;
    const int fresh = !w->theta;
    FSGD_TRY(setup_model(w, &mm));
    FSGD_TRY(load_weights(w, &mm, fresh, S, I));
    if (w->gen && f->gen != w->gen)
        leave_generation(w);
    w->gen = f->gen;
    close_step(w, I, f->gen, f->step, 1, sec, slen);
    w->sh_valid[I] = 1;
    w->sh_step[I] = f->step;
    return 1;
}

/* Shard I's delta of the step after what this worker holds of the shard:
 * 1 when θ took it, 0 when not (another generation; a step missing: this
 * shard waits for its snapshot; a rejected one), < 0 on a failure. */
static int take_delta(worker_t *w, const fsgd_kframe_t *f, uint32_t I, const uint8_t *body, size_t len, size_t off,
                      const uint8_t *sec, size_t slen)
{
    if (!w->sh_valid[I] || f->gen != w->gen || f->step <= w->sh_step[I])
        return 0;
    if (f->step != w->sh_step[I] + 1) { /* a delta is missing (evicted or skipped): wait for a snapshot */
        w->sh_valid[I] = 0;
        w->valid = 0;
        w->stats->resyncs++;
        return 0;
    }
    char e[256], at[64];
    fsgd_wire_cdelta_t cd = {0};
    if (read_delta(w, f, body, len, &off, w->shards, I, &cd, e, sizeof e) < 0) {
        /* θ is untouched: a later delta tells a missing step apart (resync
         * from a snapshot); until then the genuine message may still come */
        fsgd_kasm_forget(w->as, f);
        worker_reject(w, 1, "%s: %s", msg_at(w, f, at, sizeof at), e);
        return 0;
    }
    if (apply_delta(w, f, e, sizeof e) < 0) { /* θ may have changed: only a snapshot repairs it */
        w->sh_valid[I] = 0;
        w->valid = 0;
        worker_reject(w, 1, "%s: %s", msg_at(w, f, at, sizeof at), e);
        return 0;
    }
    FSGD_TRY(fsgd_backend_apply(w->be, w->delta.keys, w->delta.vals, w->delta.n, w->err, w->errsz));
    /* Plain deltas carry no applied list: the step closed, ours was taken. */
    close_step(w, I, f->gen, f->step, f->kind == FSGD_KMSG_DELTA_CODED ? fsgd_wire_cdelta_applied(&cd, w->id) : 1, sec,
               slen);
    w->sh_step[I] = f->step;
    if (f->kind == FSGD_KMSG_DELTA_CODED && (cd.flags & FSGD_WIRE_CDELTA_CHECK) && !replica_matches(w, I, cd.check)) {
        /* Not the aggregator's replica: compute on nothing until this
         * shard's next snapshot replaces its part of θ. */
        w->stats->replica_mismatch++;
        w->stats->resyncs++;
        w->sh_valid[I] = 0;
    }
    return 1;
}

/* Shard 0's state of a step: what the step after it takes (combine_shards). */
static int keep_lead_state(worker_t *w, const fsgd_kframe_t *f, fsgd_wire_state_t s)
{
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
    w->lead[w->nlead++] = (struct lead_state){f->step, (f->flags & FSGD_KFLAG_FINAL) != 0, s};
    return 0;
}

/* After a shard's message: the model is at the oldest shard's step, with
 * the leader's state of that step; nothing to compute on while a shard
 * waits for a snapshot or the leader's state is not in. lead_new: the
 * message was the leader's, its state just kept: a state of the model's
 * step again (a snapshot the aggregator published again) is adopted
 * again, as the first. */
static int combine_shards(worker_t *w, uint32_t gen, int64_t offset, int lead_new)
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
    if (w->valid && w->gen == gen && w->step == step && !(lead_new && at + 1 == w->nlead))
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
    /* the steps every shard closed (and those closed without a word to us:
     * a resync skipped them) */
    while (w->fl.n && (w->fl.e[0].gen != gen || w->fl.e[0].step <= step))
        inflight_pop(&w->fl);
    w->valid = 1;
    return adopt_state(w, s, gen, step, final, offset);
}

/* A model message of shard I of S (the unsharded job: shard 0 of 1): taken
 * into θ, then the shards combined into the model the worker computes on. */
static int apply_model(worker_t *w, const fsgd_kframe_t *fp, const uint8_t *body, size_t len, int64_t offset)
{
    const fsgd_kframe_t f = *fp;
    const uint32_t S = w->shards, I = S > 1 ? f.sender : 0;
    char e[256], at[64];
    if (I >= S) {
        worker_reject(w, 1, "generation %u step %llu: a model message from shard %u; the job has %u", f.gen,
                      (unsigned long long)f.step, I, S);
        return 0;
    }
    fsgd_wire_state_t s = {0};
    size_t off = 0;
    const uint8_t *sec = NULL; /* the shard's strategy feedback for the step this message closes */
    size_t slen = 0;
    if (read_head(&f, body, len, &off, &s, &sec, &slen, e, sizeof e) < 0) {
        fsgd_kasm_forget(w->as, &f); /* the genuine message of this step may still come */
        worker_reject(w, 1, "%s: %s", msg_at(w, &f, at, sizeof at), e);
        fsgd_wire_state_free(&s);
        return 0;
    }
    int rc = f.kind == FSGD_KMSG_SNAPSHOT ? take_snapshot(w, &f, I, body, len, off, sec, slen)
                                          : take_delta(w, &f, I, body, len, off, sec, slen);
    if (rc != 1 || I != 0) {
        fsgd_wire_state_free(&s);
        if (rc != 1)
            return rc;
    } else if ((rc = keep_lead_state(w, &f, s)) < 0) { /* the leader's state: what the step after it takes */
        return rc;
    }
    return combine_shards(w, f.gen, offset, I == 0);
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
    if (inflight_project(&w->fl, w->gen, w->step, w->st.pos, w->st.nparts, w->next_pos)) {
        /* gradients on top of one refused without a word: the strategy
         * can restore only its last message (as close_step) */
        w->stats->chain_restarts++;
        reset_strategies(w);
    }
    w->final = final;
    if (w->final && !(w->sent_gen == gen)) {
        /* The final model of an earlier job on the same topics: only the end
         * of the log counts for a worker that took no part. */
        int64_t lo, hi;
        if (fsgd_bus_watermarks(w->model_c, w->topic.model, 0, &lo, &hi, 5000, NULL, 0) == 0 && offset + 1 < hi)
            w->final = 0;
    }
    return 0;
}
