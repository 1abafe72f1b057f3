/* The intake of NAME.grads (agg_gradients.c): the consumer errors it has
 * logged, what it reads and writes of the aggregator (agg_intake_ctx_t),
 * and the functions the step loop (aggregator.c) calls for each message and
 * for the frames held for a step just opened. Its own header, not
 * agg_open.h: a frame is checked against the members, shard 0's decisions,
 * the data and the model too, and agg_open.h sits below agg_lead.h.
 * Private to trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_INTAKE_H
#define FSGD_DIST_AGG_INTAKE_H

#include <stddef.h>
#include <stdint.h>

#include "agg_clock.h"
#include "agg_data.h"
#include "agg_env.h"
#include "agg_lead.h"
#include "agg_members.h"
#include "agg_model.h"
#include "agg_open.h"
#include "agg_pull.h"
#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/replay.h"
#include "wire.h"

#define AGG_INTAKE_KERR_MAX 32

/* NAME.grads consumer errors already logged, by code: each kind once. */
typedef struct agg_intake {
    int kerr_seen[AGG_INTAKE_KERR_MAX], n_kerr;
} agg_intake_t;

/* The aggregator as the intake sees it, made by the caller (agg_intake_ctx)
 * where a message or the held frames are taken: valid while the aggregator
 * is and its step and generation stay (ctl and pull carry them as values). */
typedef struct agg_intake_ctx {
    const fsgd_dist_job_t *job;
    agg_intake_t *intake;
    fsgd_bus_client_t *grads_c;  /* reads NAME.grads: restarted where the broker dropped messages */
    const fsgd_auth_t *auth;     /* the bus's: checks each frame's tag */
    fsgd_replay_t *replay;       /* NAME.grads frames already read: a copy is refused */
    uint32_t gen;
    uint64_t step;               /* last applied step: step + 1 is open */
    uint64_t gweights;           /* the whole model's weights: bounds a gradient's raw entries */
    const fsgd_wire_state_t *st; /* each partition's range and position */
    const agg_lead_t *lead;      /* a following shard: shard 0's step states; NULL otherwise */
    const agg_data_t *data;      /* rows per offset, value bounds */
    agg_open_step_t *open;       /* the step gradients are added to, and frames held early */
    agg_members_t *members;      /* who is a member, live, and answered the step */
    agg_model_state_t *model;    /* its strategy reduces the step; pulls read the weights */
    agg_pull_t *pull;            /* working-set workers' pulls, on NAME.grads too */
    agg_clock_t *clock;          /* the NAME.grads hop's latency */
    agg_ctl_ctx_t ctl;           /* NAME.ctl: a sender not yet a member, a worker joined */
    agg_pull_ctx_t pull_job;     /* a pull's answer */
} agg_intake_ctx_t;

/* One message from NAME.grads, taken or dropped. */
int agg_handle_grad(const agg_intake_ctx_t *c, const agg_env_t *e, const fsgd_bus_msg_t *m);
/* The same for a frame's bytes (offset: for messages only). partition: of
 * NAME.grads, for the replay check; -1 for a frame held early, checked
 * when it came. */
int agg_take_frame(const agg_intake_ctx_t *c, const agg_env_t *e, const void *payload, size_t len, int32_t partition,
                   int64_t offset);
/* Takes the held frames of the step just opened (agg_early_due), in arrival order. */
int agg_take_held(const agg_intake_ctx_t *c, const agg_env_t *e);

#endif
