/* Who is in the job: NAME.ctl events, the members' partition reports, and
 * the wait for a settled consumer-group assignment before step 1. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agg_clock.h"
#include "agg_members.h"
#include "agg_twin.h"
#include "fsgd/error.h"

/* --- NAME.ctl status events (best effort: a lost event never stops the job) --- */

void agg_ctl_begin(const agg_ctl_ctx_t *c, const char *event)
{
    fsgd_cj_begin(c->cj, event, c->job->dist->name);
    fsgd_cj_u64(c->cj, "gen", c->gen);
}

void agg_ctl_emit(const agg_ctl_ctx_t *c, const char *event)
{
    /* A following shard's events would repeat shard 0's (the job's
     * members, epochs and end are decided there); only its failure is news */
    if (c->following && strcmp(event, "job_end"))
        return;
    if (fsgd_cj_end(c->cj) == 0)
        fsgd_ctl_send(c->prod, c->ctl_topic, c->job->dist->name, event, c->cj);
}

void agg_ctl_member(const agg_ctl_ctx_t *c, const agg_members_t *m, const char *event, uint32_t worker)
{
    agg_ctl_begin(c, event);
    fsgd_cj_u64(c->cj, "step", c->step);
    fsgd_cj_u64(c->cj, "worker", worker);
    fsgd_cj_u32s(c->cj, "live", m->live, m->nlive);
    if (!strcmp(event, "worker_dropped"))
        fsgd_cj_u64(c->cj, "timeout_ms", (uint64_t)c->job->dist->step_timeout_ms);
    agg_ctl_emit(c, event);
}

/* --- start-up: wait for a settled consumer-group assignment --- */

/* Why: workers answer step 1 as soon as they hold any assignment. When the
 * group is still forming (a worker joins after the first members got their
 * partitions, or the leader assigned before it saw the topic's partitions),
 * step 1 completes and the group then revokes and reassigns everything: for
 * the ~3 s of that rebalance every worker answers with no partitions and the
 * steps carry no rows (empty_steps). So the aggregator opens the job only
 * once the workers' own reports on NAME.ctl (worker_assignment, sent from
 * their rebalance callbacks) show at least expected_workers workers whose
 * latest partition sets are disjoint and cover every partition that still
 * has rows: a group in mid-rebalance has overlapping sets (the old owners
 * have not been told yet) or holes (revoked, not yet reassigned). */
member_t *agg_member_find(agg_members_t *m, uint32_t id)
{
    for (size_t i = 0; i < m->nmem; i++)
        if (m->mem[i].id == id)
            return &m->mem[i];
    return NULL;
}

void agg_members_report(agg_members_t *m, uint32_t nparts, uint32_t id, int leave, const uint32_t *parts, size_t np)
{
    uint32_t P = nparts;
    member_t *w = agg_member_find(m, id);
    if (leave) {
        if (w) {
            m->changes++;
            free(w->own);
            *w = m->mem[--m->nmem];
        }
        return;
    }
    int fresh = !w;
    if (!w) {
        uint8_t *own = m->nmem < MAX_MEMBERS ? calloc(P ? P : 1, 1) : NULL;
        member_t *nm = own ? realloc(m->mem, (m->nmem + 1) * sizeof *nm) : NULL;
        if (!own || !nm) {
            /* (a flood of made-up workers must not grow memory without end) */
            free(own);
            if (nm)
                m->mem = nm;
            return;
        }
        m->mem = nm;
        w = &m->mem[m->nmem++];
        w->id = id;
        w->own = own;
    }
    /* a worker repeats its report until the first model: a copy of what it
     * said is no change (the wait for a settled group goes on counting) */
    uint8_t *was = malloc(P ? P : 1);
    if (was)
        memcpy(was, w->own, P);
    memset(w->own, 0, P);
    for (size_t i = 0; i < np; i++)
        if (parts[i] < P)
            w->own[parts[i]] = 1;
    if (!was || fresh || memcmp(was, w->own, P) != 0) {
        m->changes++;
        w->seq = ++m->ctl_seq;
    }
    free(was);
}

int agg_members_all_answered(const agg_members_t *m)
{
    int complete = m->ngot > 0;
    for (size_t i = 0; i < m->nlive && complete; i++)
        complete = agg_in_set(m->got, m->ngot, m->live[i]);
    return complete;
}

size_t agg_members_silent(const agg_members_t *m, char *out, size_t cap)
{
    size_t used = 0, n = 0;
    for (size_t i = 0; i < m->nlive && used < cap; i++)
        if (!agg_in_set(m->got, m->ngot, m->live[i]))
            used += (size_t)snprintf(out + used, cap - used, "%s%u", n++ ? ", " : "", m->live[i]);
    return n;
}

size_t agg_members_drop_silent(agg_members_t *m, uint32_t *dropped, size_t cap)
{
    size_t k = 0, nd = 0;
    for (size_t i = 0; i < m->nlive; i++)
        if (agg_in_set(m->got, m->ngot, m->live[i]))
            m->live[k++] = m->live[i];
        else if (nd++ < cap)
            dropped[nd - 1] = m->live[i];
    m->nlive = k;
    return nd;
}

void agg_members_live_from_got(agg_members_t *m)
{
    m->nlive = 0;
    for (size_t i = 0; i < m->ngot; i++)
        agg_add_set(&m->live, &m->nlive, &m->cap_live, m->got[i]);
}

void agg_members_free(agg_members_t *m)
{
    free(m->live);
    free(m->got);
    for (size_t i = 0; i < m->nmem; i++)
        free(m->mem[i].own);
    free(m->mem);
    m->live = m->got = NULL;
    m->mem = NULL;
    m->nlive = m->ngot = m->nmem = m->cap_live = m->cap_got = 0;
}

/* Applies one NAME.ctl event: worker_assignment makes (or updates) a
 * member, worker_leave forgets one. Anything else is ignored. */
static void ctl_apply(agg_members_t *mem, const agg_ctl_ctx_t *c, const agg_env_t *e, const fsgd_bus_msg_t *m)
{
    char ev[32];
    double wid;
    size_t np = 0;
    uint32_t P = c->st->nparts;
    const char *j = m->val;
    char why[256];
    if (!m->err && fsgd_ctl_verify(c->auth, m, why, sizeof why) < 0) {
        agg_env_reject(e, FSGD_AGG_REJ_UNAUTH, "%s %s", c->ctl_topic, why);
        return;
    }
    /* a copy of an event its sender wrote before: a worker_leave copied
     * back into the topic drops no live worker (read from the start, this
     * reader has seen every original) */
    if (!m->err && fsgd_auth_enabled(c->auth) && fsgd_replay_ctl(c->replay, m->offset, m->mac, m->mac_len) == 1) {
        agg_env_reject_on(e, c->ctl_topic, FSGD_AGG_REJ_REPLAYED, "offset %lld: a copy of an event its sender wrote before",
                      (long long)m->offset);
        return;
    }
    if (!m->err && j && fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) && !strcmp(ev, "aggregator_probe")) {
        const agg_twin_ctx_t tc = {.prod = c->prod, .cj = c->cj, .ctl_topic = c->ctl_topic,
                                   .job = c->job->dist->name, .shard = c->shard, .shards = c->shards, .gen = c->gen,
                                   .step = c->step};
        agg_twin_answer(&tc, e, j, m->len);
        return;
    }
    if (m->err || !j || !fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) ||
        (strcmp(ev, "worker_assignment") && strcmp(ev, "worker_leave")) ||
        !fsgd_ctl_get_num(j, m->len, "worker", &wid) || !(wid >= 0 && wid <= UINT32_MAX))
        return;
    uint32_t *tmp = malloc((P + 1) * sizeof *tmp);
    if (!tmp || !fsgd_ctl_get_u32s(j, m->len, "partitions", tmp, P + 1, &np)) {
        free(tmp);
        return;
    }
    mem->ctl_used++;
    agg_members_report(mem, P, (uint32_t)wid, !strcmp(ev, "worker_leave"), tmp, np);
    free(tmp);
}

/* Why: a NAME.ctl consumer that fails quietly leaves the job waiting for
 * members that did report (CI once waited 30 s with "0 of 3"): say so, and
 * read again from the start when the partition's fetcher stopped. */
static void ctl_consumer_error(agg_members_t *mem, const agg_ctl_ctx_t *c, const agg_env_t *e, const fsgd_bus_msg_t *m)
{
    char re[256] = "";
    int restarted = m->err == FSGD_BUS_LOST &&
                    fsgd_bus_restart(c->ctl_c, c->ctl_topic, m->partition, FSGD_BUS_OFFSET_BEGINNING, re, sizeof re) == 0;
    if (mem->ctl_errs_logged >= 8)
        return;
    mem->ctl_errs_logged++;
    agg_env_log(e, "%s consumer: %s (%s)%s%s", c->ctl_topic, m->errstr ? m->errstr : "error",
                m->errname ? m->errname : "?",
                restarted ? ": reading it again from its start" : re[0] ? ": reading it again failed: " : "", re);
}

int agg_ctl_drain(agg_members_t *mem, const agg_ctl_ctx_t *c, const agg_env_t *e, int timeout_ms)
{
    int n = 0;
    fsgd_bus_msg_t *m;
    while (c->ctl_c && (m = fsgd_bus_poll(c->ctl_c, n ? 0 : timeout_ms))) {
        if (!m->err)
            mem->ctl_read++;
        else if (m->err != FSGD_BUS_EOF)
            ctl_consumer_error(mem, c, e, m);
        ctl_apply(mem, c, e, m);
        fsgd_bus_msg_destroy(m);
        n++;
    }
    return n;
}

/* 1 when w is the latest reporter of at least one partition: it still holds
 * rows. A worker that died keeps its last report, but once the group has
 * moved its partitions the new owners' later reports supersede it. */
static int member_holds(const agg_members_t *m, uint32_t nparts, const member_t *w)
{
    for (uint32_t p = 0; p < nparts; p++) {
        if (!w->own[p])
            continue;
        int newer = 0;
        for (size_t k = 0; k < m->nmem && !newer; k++)
            newer = m->mem[k].seq > w->seq && m->mem[k].own[p];
        if (!newer)
            return 1;
    }
    return 0;
}

size_t agg_awaited(const agg_members_t *m, uint32_t nparts, char *out, size_t cap)
{
    size_t n = 0, used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < m->nmem; i++) {
        const member_t *w = &m->mem[i];
        int answered = 0;
        for (size_t k = 0; k < m->ngot && !answered; k++)
            answered = m->got[k] == w->id;
        if (answered || !member_holds(m, nparts, w))
            continue;
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%u", n ? ", " : "", w->id);
        n++;
    }
    return n;
}

int agg_members_cover(const agg_members_t *m, const fsgd_wire_state_t *st, uint32_t *owners)
{
    uint32_t P = st->nparts;
    uint32_t holders = 0;
    memset(owners, 0, P * sizeof *owners);
    for (size_t k = 0; k < m->nmem; k++) {
        int any = 0;
        for (uint32_t p = 0; p < P; p++)
            if (m->mem[k].own[p]) {
                owners[p]++;
                any = 1;
            }
        holders += any;
    }
    int covered = holders > 0;
    for (uint32_t p = 0; p < P && covered; p++)
        covered = st->pos[p] >= st->end[p] ? owners[p] <= 1 : owners[p] == 1;
    return covered;
}

int agg_members_orphaned(const agg_members_t *m, const fsgd_wire_state_t *st)
{
    int left = 0;
    for (uint32_t p = 0; p < st->nparts; p++) {
        if (st->pos[p] >= st->end[p])
            continue;
        left = 1;
        const member_t *owner = NULL;
        for (size_t k = 0; k < m->nmem; k++)
            if (m->mem[k].own[p] && (!owner || m->mem[k].seq > owner->seq))
                owner = &m->mem[k];
        if (owner && agg_in_set(m->live, m->nlive, owner->id))
            return 0;
    }
    return left;
}

/* Why: workers answer step 1 as soon as they hold any assignment. When the
 * group is still forming (a worker joins after the first members got their
 * partitions, or the leader assigned before it saw the topic's partitions),
 * step 1 completes and the group then revokes and reassigns everything: for
 * the ~3 s of that rebalance every worker answers with no partitions and the
 * steps carry no rows (empty_steps). So the aggregator opens the job only
 * once the workers' own reports on NAME.ctl (worker_assignment, sent from
 * their rebalance callbacks) show at least expected_workers workers whose
 * latest partition sets are disjoint and cover every partition that still
 * has rows: a group in mid-rebalance has overlapping sets (the old owners
 * have not been told yet) or holes (revoked, not yet reassigned). The same
 * reports make the membership that gradients are checked against. */
/* Seconds a group that covers every partition must stay unchanged before
 * the job starts with fewer workers than expected: longer than the
 * consumers' session timeout (6 s, KAFKA_FORMAT.md), after which a member
 * that died is out of the group and its partitions have moved. */
#define SETTLE_WITHOUT_S 8.0

int agg_wait_assignment(agg_members_t *m, const agg_ctl_ctx_t *c, const agg_env_t *e, double timeout_s)
{
    double t0 = agg_now(), last_log = t0;
    e->s->assignment_settled = 0;
    uint32_t P = c->st->nparts;
    uint32_t *owners = calloc(P + 1, sizeof *owners);
    if (!owners)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    double last_change = t0;
    int covered = 0; /* the latest reports are disjoint and cover every partition with rows */
    while (agg_now() - t0 < timeout_s) {
        uint64_t changes = m->changes;
        agg_ctl_drain(m, c, e, 20);
        int n = m->changes != changes;
        fsgd_bus_serve(c->prod);
        double t = agg_now();
        if (t - last_log >= 10) {
            last_log = t;
            agg_env_log(e, "waiting for workers: %zu of %d expected have reported their partitions on %s (%.0f s; "
                           "%llu messages read there, %llu of them reports; starting anyway after %.0f s)",
                        m->nmem, m->expected, c->ctl_topic, t - t0, (unsigned long long)m->ctl_read,
                        (unsigned long long)m->ctl_used, timeout_s);
        }
        if (!n) {
            /* Fewer workers than expected, but the group has been stable
             * longer than a session timeout: the others died or never came
             * (a consumer that left is out of the group by then). */
            if (covered && m->nmem < (size_t)m->expected && t - last_change >= SETTLE_WITHOUT_S) {
                agg_env_log(e, "starting with %zu of %d expected workers: the group has held every partition for "
                               "%.0f s without the others",
                            m->nmem, m->expected, t - last_change);
                e->s->assignment_settled = 1;
                break;
            }
            continue;
        }
        last_change = t;
        covered = agg_members_cover(m, c->st, owners);
        if (covered && m->nmem >= (size_t)m->expected) {
            e->s->assignment_settled = 1;
            break;
        }
    }
    e->s->assignment_wait_s = agg_now() - t0;
    free(owners);
    return 0;
}

