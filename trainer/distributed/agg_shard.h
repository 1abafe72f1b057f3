/* A sharded aggregator (job key shards; agg_shard.c): the shard's identity
 * and what a sharded job refuses, the model's shape it holds, and shard 0's
 * final model (agg_shard_final_ctx_t: what it reads and frees). Following
 * shard 0's steps: agg_lead.h. Private to trainer/distributed/agg_*.c and
 * aggregator.c. */
#ifndef FSGD_DIST_AGG_SHARD_H
#define FSGD_DIST_AGG_SHARD_H

#include <stdint.h>

#include "agg_env.h"
#include "agg_model.h"
#include "fsgd/bus.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/rowfmt.h"

/* *shard and *shards (1: unsharded) from the job, checked: a sharded job
 * refuses what is not sharded yet (fsgd_agg_shards_check). */
int agg_shard_setup(const fsgd_dist_job_t *job, uint32_t *shard, uint32_t *shards, const agg_env_t *e);
/* After the scan, the model's shape from the data's dimension dim:
 * *gweights the whole model's weights, *mdim the shard's part (refused past
 * the job's max_model_weights); said in e->s. */
int agg_shard_dims(const fsgd_dist_job_t *job, uint32_t shard, uint32_t shards, uint64_t dim, uint64_t *mdim,
                   uint64_t *gweights, const agg_env_t *e);

/* What shard 0's final model reads, and the state it frees first, made by
 * the caller. */
typedef struct agg_shard_final_ctx {
    const fsgd_dist_job_t *job;
    fsgd_bus_t *bus;          /* every shard's partition of NAME.model is read on it */
    const char *model_topic;  /* NAME.model */
    const fsgd_rowfmt_t *fmt; /* the job's row format: the model's input spec */
    agg_model_state_t *model; /* this shard's θ and optimizer: freed before the whole model is read */
    const fsgd_csr_t *test;   /* the test rows (none: n_rows 0) */
} agg_shard_final_ctx_t;

/* Shard 0 of a sharded job, after its final step: the whole model from
 * every shard's partition of NAME.model once all of them have published
 * their final snapshot (at most max(60 s, 3 step timeouts)), written to
 * out and scored on the test set (e->s). Followers write no model; their
 * metrics JSON goes to PATH.shardI. */
int agg_shard_final(const agg_shard_final_ctx_t *c, const agg_env_t *e);

#endif
