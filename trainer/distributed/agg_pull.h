/* Working-set workers' pulls (agg_pull.c; job key replica working_set):
 * the reassembly, buffers and key lists kept for them, and what an answer
 * needs from the job. Private to trainer/distributed/agg_*.c and
 * aggregator.c. */
#ifndef FSGD_DIST_AGG_PULL_H
#define FSGD_DIST_AGG_PULL_H

#include <stddef.h>
#include <stdint.h>

#include "agg_env.h"
#include "agg_model.h"
#include "fsgd/bus.h"
#include "fsgd/kbus.h"
#include "pull_cache.h"
#include "wire.h"

typedef struct agg_pull {
    fsgd_kasm_t *as;   /* reassembly of pull frames (apart from the step's gradients) */
    uint32_t *keys;
    size_t cap_keys;
    float *vals;
    fsgd_wire_buf_t buf;
    uint64_t answered, bytes; /* answers sent, their bytes */
    int halves;               /* the job's downlink is lossy: values go as binary16 where they fit */
    pull_cache_t cache;       /* the key lists workers sent, named by id in later pulls (pull_cache.h) */
} agg_pull_t;

/* The job as a pull's answer sees it, made by the caller for each pull. */
typedef struct agg_pull_ctx {
    fsgd_bus_client_t *prod;
    const char *pull_topic; /* NAME.pull */
    const char *job;        /* the job's name */
    uint32_t shard, gen;
    uint64_t step; /* last applied step */
    uint64_t mdim; /* weights this process holds */
} agg_pull_ctx_t;

/* A working-set worker's pull (a frame of kind FSGD_KMSG_PULL on
 * NAME.grads), answered with the keys' values in m now on NAME.pull; or
 * dropped with a reason. */
int agg_take_pull(agg_pull_t *p, const agg_pull_ctx_t *c, const agg_model_state_t *m, const agg_env_t *e,
                  const fsgd_kframe_t *f, int64_t offset);
void agg_pull_free(agg_pull_t *p);

#endif
