/* Key shards: how a model of D weights is split over S aggregator shards.
 *
 * Key k belongs to shard k mod S, where it is local key k / S (interleaved,
 * not contiguous ranges). Why: CTR features are Zipf-popular with the hot
 * ones at low indices (fsgd gen, frequency-ordered vocabularies), so
 * contiguous ranges would give shard 0 most of every step's keys;
 * interleaving spreads any run of hot keys evenly. A shard's local keys keep
 * the global order and the same density (a step's keys of one shard are
 * about 1/S of its keys in a space 1/S as large), so delta-coded keys cost
 * about the same bits per key at every S.
 *
 * S = 1 is the unsharded model: local key = key. */
#ifndef FSGD_SHARD_H
#define FSGD_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/sparse.h"

#define FSGD_SHARDS_MAX 64

static inline uint32_t fsgd_shard_of(uint64_t key, uint32_t shards)
{
    return (uint32_t)(key % shards);
}

static inline uint64_t fsgd_shard_local(uint64_t key, uint32_t shards)
{
    return key / shards;
}

static inline uint64_t fsgd_shard_global(uint64_t local, uint32_t shard, uint32_t shards)
{
    return local * shards + shard;
}

/* Weights of a D-weight model that shard `shard` of S owns: ceil((D - shard) / S). */
uint64_t fsgd_shard_dim(uint64_t dim, uint32_t shard, uint32_t shards);

/* Splits in (keys strictly increasing) into parts[0..S-1] with local keys,
 * each strictly increasing; parts grow as needed and are overwritten.
 * Returns 0 or FSGD_E_NOMEM. */
int fsgd_shard_split(const fsgd_sparse_t *in, uint32_t shards, fsgd_sparse_t *parts);

/* Merges parts[0..S-1] (local keys, each strictly increasing) into out with
 * global keys, strictly increasing (out is overwritten). Returns 0 or
 * FSGD_E_NOMEM. */
int fsgd_shard_merge(const fsgd_sparse_t *parts, uint32_t shards, fsgd_sparse_t *out);

#endif
