/* The aggregator's checkpoints (agg_checkpoint.c): the state of the one
 * read and of those written, its pacing, and the decoder (KAFKA_FORMAT.md,
 * "Checkpoint"), exposed for tests and the fuzz target. Private to
 * trainer/distributed/. */
#ifndef FSGD_DIST_AGG_CKPT_H
#define FSGD_DIST_AGG_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

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

/* Decodes checkpoint bytes p[0, len) exactly as a restarting aggregator
 * does, against the data it would have found: dataset_rows rows, mdim
 * weights, and expect's partitions (count, start and end offsets). Returns 1
 * when the checkpoint would be restored, or a negative error with err set.
 * When restored and reenc is not NULL, *reenc gets the checkpoint the
 * restored state writes (malloc'd, *reenc_len bytes; the caller frees). */
int fsgd_agg_ckpt_check(const uint8_t *p, size_t len, uint64_t dataset_rows, uint64_t mdim, const fsgd_wire_state_t *expect,
                   uint8_t **reenc, size_t *reenc_len, char *err, size_t errsz);

#endif
