/* A following shard's view of shard 0 (agg_shard.c): the leader's step
 * states it has read, by step; what it reads of the aggregator
 * (agg_lead_ctx_t); and the functions the step loop (aggregator.c) and the
 * gradients' checks (agg_gradients.c) call. A following shard (shard > 0)
 * reads shard 0's step states (open, poll: takes the open step's held
 * gradients once its state is in); it takes a gradient only when its ranges
 * are ones the leader applied (applied), and applies the step when its
 * ranges cover the leader's (complete). Private to
 * trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_LEAD_H
#define FSGD_DIST_AGG_LEAD_H

#include <signal.h>
#include <stdint.h>

#include "agg_data.h"
#include "agg_env.h"
#include "agg_open.h"
#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "wire.h"

typedef struct agg_lead agg_lead_t;

/* The aggregator as the tracking of shard 0 sees it, made by the caller
 * (agg_lead_ctx): valid while the aggregator is and its step stays. */
typedef struct agg_lead_ctx {
    const fsgd_auth_t *auth;              /* the bus's: shard 0's frames are checked with it */
    const char *model_topic, *data_topic; /* NAME.model (shard 0's messages: partition 0), NAME.data */
    uint32_t shard, shards;
    uint32_t *gen;                /* this shard's generation: shard 0's once wait_start returns */
    uint64_t step;                /* last applied step */
    uint64_t mdim, gweights;      /* weights this shard holds, the whole model's (said at the start) */
    const fsgd_wire_state_t *st;  /* each partition's range and position */
    agg_open_step_t *open;        /* the gathered step: check_alive claims the parts that never came */
    const agg_data_t *data;       /* each partition's rows by offset (rows_at) */
    const volatile sig_atomic_t *crash; /* the caller's (tests): stop as a killed process would */
    int *stopped;                       /* set when *crash stopped it */
} agg_lead_ctx_t;

/* *l: shard 0's partition of NAME.model read from its start; NULL (nothing
 * to follow) for shard 0 and an unsharded job. */
int agg_lead_open(agg_lead_t **l, fsgd_bus_t *bus, const agg_lead_ctx_t *c, const agg_env_t *e);
/* Frees l (NULL: nothing). */
void agg_lead_free(agg_lead_t *l);
/* Reads what shard 0 sent since (l NULL: nothing). *open_decided: shard
 * 0's decision for the open step just arrived (its held gradients can be
 * taken now). */
int agg_lead_poll(agg_lead_t *l, const agg_lead_ctx_t *c, const agg_env_t *e, int *open_decided);
/* Before its opening snapshot: shard 0's, whose generation it takes
 * (*c->gen, e->s). on_idle(idle_arg) runs after each wait in which nothing
 * came (aggregator.c: reads NAME.ctl). */
int agg_lead_wait_start(agg_lead_t *l, const agg_lead_ctx_t *c, const agg_env_t *e, void (*on_idle)(void *),
                        void *idle_arg);
/* Fails when shard 0 stays silent past max(60 s, 3 step timeouts); a step
 * it decided whose gradient parts do not all come here within a step
 * timeout goes on without the missing ones (c->open; counted in e->s:
 * parts_missing). */
int agg_lead_check_alive(agg_lead_t *l, const agg_lead_ctx_t *c, const agg_env_t *e, double step_timeout);
/* 1 when shard 0's state of step `step` is in (l NULL: none is). */
int agg_lead_decided(const agg_lead_t *l, uint64_t step);
/* 1 when ranges r[0, n) end where shard 0's state of step `step` (the open
 * one) says for the positions of st: shard 0 applied them in that step. */
int agg_lead_applied(const agg_lead_t *l, const fsgd_wire_state_t *st, uint64_t step, const fsgd_wire_range_t *r,
                     uint32_t n);
/* 1 when the open step o (step `step`) claims up to where shard 0's state
 * of it ends every partition of st: the step can be applied. */
int agg_lead_complete(const agg_lead_t *l, const fsgd_wire_state_t *st, const agg_open_step_t *o, uint64_t step);

#endif
