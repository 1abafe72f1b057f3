/* The job's members as NAME.ctl reports them, and who sent the open step;
 * the aggregator's NAME.ctl events, what they need from the job
 * (agg_ctl_ctx_t), and the wait for a settled consumer-group assignment
 * (agg_members.c). Private to trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_MEMBERS_H
#define FSGD_DIST_AGG_MEMBERS_H

#include <stddef.h>
#include <stdint.h>

#include "agg_env.h"
#include "ctl.h"
#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/replay.h"
#include "wire.h"

/* A worker that reported its partitions on NAME.ctl. */
typedef struct member {
    uint32_t id;
    uint64_t seq; /* order of its latest report */
    uint8_t *own; /* nparts bytes: the partitions of that report */
} member_t;

#define MAX_MEMBERS 1024

typedef struct agg_members {
    int expected;          /* workers the job waits for at its start */
    uint32_t *live, *got;  /* members in the job; senders of the open step */
    size_t nlive, ngot, cap_live, cap_got;
    struct member *mem;    /* NAME.ctl, followed for the whole run: who the members of the job are */
    size_t nmem;
    uint64_t ctl_seq;
    uint64_t changes;            /* members made, dropped or given other partitions */
    uint64_t ctl_read, ctl_used; /* NAME.ctl messages read, and the membership events among them (in the waiting log) */
    int ctl_errs_logged;         /* consumer errors logged (a few, then counted only) */
} agg_members_t;

/* Sets of worker ids (live, got, a step's senders): 1 when v is in s[0, n). */
int agg_in_set(const uint32_t *s, size_t n, uint32_t v);
/* Adds v unless it is there already; 0, or FSGD_E_NOMEM. */
int agg_add_set(uint32_t **s, size_t *n, size_t *cap, uint32_t v);

member_t *agg_member_find(agg_members_t *m, uint32_t id);
/* A worker's report of partitions parts[0, np) (those >= nparts ignored),
 * or its leave: makes, updates or forgets the member; counts changes. At
 * most MAX_MEMBERS members (a report past them is dropped), and out of
 * memory drops the report: membership is best effort. */
void agg_members_report(agg_members_t *m, uint32_t nparts, uint32_t id, int leave, const uint32_t *parts, size_t np);
/* The ids of the members that hold partitions and have not answered this
 * step, as text ("2, 5"); returns how many. */
size_t agg_awaited(const agg_members_t *m, uint32_t nparts, char *out, size_t cap);
/* 1 when the members' latest reports are disjoint, non-empty and cover
 * every partition of st that has rows left (owners: st->nparts + 1
 * counters, scratch). */
int agg_members_cover(const agg_members_t *m, const fsgd_wire_state_t *st, uint32_t *owners);
/* 1 when rows are left only in partitions whose latest reporter is not live
 * (or that nobody reports): the group has yet to move them. */
int agg_members_orphaned(const agg_members_t *m, const fsgd_wire_state_t *st);
/* 1 when the open step has an answer and every live member sent one. */
int agg_members_all_answered(const agg_members_t *m);
/* The live members that have not answered the open step, as text ("2, 5",
 * cut at cap); returns how many were written. */
size_t agg_members_silent(const agg_members_t *m, char *out, size_t cap);
/* Past the step timeout: the live set keeps only those that answered.
 * Returns how many were dropped; the first cap of them go to dropped. */
size_t agg_members_drop_silent(agg_members_t *m, uint32_t *dropped, size_t cap);
/* Step 1 complete: the live set is exactly who answered. */
void agg_members_live_from_got(agg_members_t *m);
void agg_members_free(agg_members_t *m);

/* NAME.ctl as the aggregator reads and writes it, made by the caller where
 * it is used (agg_ctl_ctx): gen and step are the values then. */
typedef struct agg_ctl_ctx {
    const fsgd_dist_job_t *job;
    fsgd_bus_client_t *prod;     /* sends the events (and serves its callbacks while waiting) */
    fsgd_bus_client_t *ctl_c;    /* reads NAME.ctl (NULL: nothing is read) */
    fsgd_ctl_json_t *cj;         /* the event being written */
    const char *ctl_topic;       /* NAME.ctl */
    const fsgd_auth_t *auth;     /* checks each event's tag */
    fsgd_replay_t *replay;       /* events already read: a copy is refused */
    const fsgd_wire_state_t *st; /* the partitions, and which still have rows */
    uint32_t shard, shards, gen;
    uint64_t step;  /* last applied step */
    int following;  /* a following shard (shard > 0): shard 0 says the job's events */
} agg_ctl_ctx_t;

/* An event of the aggregator on NAME.ctl (best effort: a lost event never
 * stops the job): begin writes its head into c->cj, the caller its fields,
 * emit sends it. A following shard sends only job_end. */
void agg_ctl_begin(const agg_ctl_ctx_t *c, const char *event);
void agg_ctl_emit(const agg_ctl_ctx_t *c, const char *event);
/* A membership event (worker_joined, worker_dropped) of worker, with m's
 * live members. */
void agg_ctl_member(const agg_ctl_ctx_t *c, const agg_members_t *m, const char *event, uint32_t worker);
/* Reads what NAME.ctl has now into mem (waiting up to timeout_ms for the
 * first message) and answers other aggregators' probes; returns how many
 * messages were read. */
int agg_ctl_drain(agg_members_t *mem, const agg_ctl_ctx_t *c, const agg_env_t *e, int timeout_ms);
/* Before step 1: reads NAME.ctl until m's reports show a settled
 * consumer-group assignment (or timeout_s pass); e->s gets how long it
 * took and whether it settled. 0, or FSGD_E_NOMEM. */
int agg_wait_assignment(agg_members_t *m, const agg_ctl_ctx_t *c, const agg_env_t *e, double timeout_s);

#endif
