/* The aggregator's checkpoints (agg_checkpoint.c): the state of the one
 * read and of those written, its pacing, the parts of the aggregator a
 * checkpoint holds (agg_ckpt_ctx_t), writing and restoring it, and the
 * decoder (KAFKA_FORMAT.md, "Checkpoint"), exposed for tests and the fuzz
 * target. Private to trainer/distributed/. */
#ifndef FSGD_DIST_AGG_CKPT_H
#define FSGD_DIST_AGG_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "agg_clock.h"
#include "agg_env.h"
#include "agg_model.h"
#include "agg_open.h"
#include "fsgd/dist.h"
#include "wire.h"

struct agg_follow;

/* The checkpoint read, and those written by this process: when the last
 * one ended and what it took (agg_ckpt_due). */
typedef struct agg_ckpt_state {
    uint32_t version, model, bias; /* of the checkpoint read */
    uint32_t shard, shards;        /* its identity (version 8 and later) */
    char job[64];
    uint64_t n;
    double at, cost;
} agg_ckpt_state_t;

/* 1 when a snapshot step should also write the checkpoint: the first one of
 * this process (started at t0, holding mdim weights), then once the time
 * since the last is at least FSGD_AGG_CKPT_COST_RATIO times what writing it
 * took. Always 1 in a sharded job (shards > 1). */
int agg_ckpt_due(const agg_ckpt_state_t *c, double t0, uint64_t mdim, uint32_t shards);

/* What a checkpoint writes and restores: the aggregator's parts it holds,
 * by pointer, made by the caller (agg_ckpt_ctx) or, for a file read without
 * a job, by fsgd_agg_ckpt_check. */
typedef struct agg_ckpt_ctx {
    /* NULL: a file read without a job (fsgd_agg_ckpt_check), written back
     * with the version, identity and model kind it had (in ckpt) */
    const fsgd_dist_job_t *job;
    agg_ckpt_state_t *ckpt;
    agg_model_state_t *model; /* θ, the optimizer's state and step count, the sparse table */
    fsgd_wire_state_t *st;    /* the step state: each partition's range and position */
    uint32_t *gen;
    uint64_t *step;         /* last applied step */
    agg_open_step_t *open;  /* the epoch's rows and loss so far */
    agg_clock_t *clock;     /* training time before this process, and when it began */
    /* job key follow: its state (agg_follow.c), the file's last section;
     * *follow NULL without. A read without a job allocates it. */
    struct agg_follow **follow;
    uint32_t shard, shards;
    uint64_t mdim;     /* weights this process holds */
    uint64_t gweights; /* the whole model's: a file of another shard count is named as one */
} agg_ckpt_ctx_t;

/* This process's checkpoint file: the job's checkpoint, PATH.shardI for
 * shard I > 0 (each shard keeps the one before as PATH[.shardI].prev). */
void agg_ckpt_path(const fsgd_dist_job_t *job, uint32_t shard, char *out, size_t cap);
/* Writes the checkpoint of c's state (nothing without job key checkpoint);
 * counted in c->ckpt and e->s. */
int agg_ckpt_write(const agg_ckpt_ctx_t *c, const agg_env_t *e);
/* Restores a checkpoint written for the same data; returns 1 when resumed,
 * 0 when there is none. */
int agg_ckpt_load(const agg_ckpt_ctx_t *c, const agg_env_t *e);

/* Decodes checkpoint bytes p[0, len) exactly as a restarting aggregator
 * does, against the data it would have found: dataset_rows rows, mdim
 * weights, and expect's partitions (count, start and end offsets). Returns 1
 * when the checkpoint would be restored, or a negative error with err set.
 * When restored and reenc is not NULL, *reenc gets the checkpoint the
 * restored state writes (malloc'd, *reenc_len bytes; the caller frees). */
int fsgd_agg_ckpt_check(const uint8_t *p, size_t len, uint64_t dataset_rows, uint64_t mdim, const fsgd_wire_state_t *expect,
                   uint8_t **reenc, size_t *reenc_len, char *err, size_t errsz);

#endif
