/* A second aggregator for a place that is taken (agg_shard_twin.c): the
 * newcomer's probe on NAME.ctl and the live one's answer, what they need
 * from the job, and what the refusal leaves. Private to
 * trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_TWIN_H
#define FSGD_DIST_AGG_TWIN_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/bus.h"
#include "agg_env.h"
#include "ctl.h"

typedef struct agg_twin {
    int refused; /* this place's aggregator is running: the newcomer publishes nothing, not even its end */
} agg_twin_t;

/* The job as the probe and the answer see it, made by the caller for each
 * (the answer reads no bus, scan_c nor model_topic). */
typedef struct agg_twin_ctx {
    fsgd_bus_t *bus;                      /* the probe's own consumer comes from it */
    fsgd_bus_client_t *prod;              /* sends the probe and the answer */
    fsgd_bus_client_t *scan_c;            /* reads the model partition's last message */
    fsgd_ctl_json_t *cj;                  /* the event being written */
    const char *ctl_topic, *model_topic;  /* NAME.ctl, NAME.model */
    const char *job;                      /* the job's name */
    uint32_t shard, shards, gen;
    uint64_t step; /* last applied step */
} agg_twin_ctx_t;

/* Started by hand for a place whose model partition is open: asks on
 * NAME.ctl whether a live aggregator holds it; one that answers makes this
 * FSGD_E_ARG naming it (t->refused set). */
int agg_twin_check(agg_twin_t *t, const agg_twin_ctx_t *c, const agg_env_t *e);
/* A probe (json, len) read on NAME.ctl: a fresh one for this place is
 * answered with this process's generation, step and pid. */
void agg_twin_answer(const agg_twin_ctx_t *c, const agg_env_t *e, const char *json, size_t len);

#endif
