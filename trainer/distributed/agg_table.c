/* A shard's table, dense or sparse (job key table): which one, by size,
 * and the sparse table's own snapshot. Dense holds every weight of the
 * shard's key range at its local key; sparse holds the keys the data
 * touched, at their slots (a sparse table, fsgd/adam.h), mapped at the shard's
 * edges: the step's reduced keys (fsgd/step.h), a pull's keys
 * (agg_pull.c), a snapshot's and a checkpoint's lists (here,
 * agg_checkpoint.c). */
#include <stdio.h>
#include <stdlib.h>

#include "aggregator_internal.h"

/* Bytes a weight of a dense table: θ and Adam's m and v (per-key counts: 14). */
#define TABLE_DENSE_BYTES 12.0
/* Bytes a key of a sparse one: θ, m, v, its key, the slot table's entries
 * (8 bytes at most half full: 16 to 32), the arrays up to twice the keys
 * between doublings: about 48 in all. */
#define TABLE_SPARSE_BYTES 48.0
/* A sparse table starts with room for this many keys at most, then doubles. */
#define TABLE_START_KEYS ((uint64_t)1 << 20)

int agg_table_choose(const fsgd_dist_job_t *job, uint32_t shards, uint64_t mdim, uint64_t nnz, char *why,
                     size_t whysz)
{
    const fsgd_job_table_t want = job->dist->table;
    const char *no = NULL, *fix = NULL;
    if (shards < 2) {
        no = "one aggregator holds the whole model (its test scoring and final model read θ by key)";
        fix = "give --shards 2 or more";
    } else if (fsgd_dist_replica(job->train, job->dist) != FSGD_REPLICA_WORKING_SET) {
        no = "full replicas take every step's values from θ by key";
        fix = "give --replica working_set";
    }
    if (no && want == FSGD_TABLE_SPARSE) {
        snprintf(why, whysz, "table sparse: %s: %s", no, fix);
        return FSGD_E_ARG;
    }
    if (no) {
        snprintf(why, whysz, "table dense: %s", no);
        return 0;
    }
    if (want != FSGD_TABLE_AUTO) {
        snprintf(why, whysz, "table %s (job key)", want == FSGD_TABLE_SPARSE ? "sparse" : "dense");
        return want == FSGD_TABLE_SPARSE;
    }
    /* The keys a shard can touch are at most the data's nonzeros over the
     * shards (keys interleave: fsgd/shard.h), and at most its weights: an
     * upper bound (Zipf data repeats its keys), so auto errs toward dense. */
    if (!nnz) {
        snprintf(why, whysz, "table dense: the data's nonzeros are not known");
        return 0;
    }
    uint64_t keys = nnz / shards + 1 < mdim ? nnz / shards + 1 : mdim;
    int sparse = (double)keys * TABLE_SPARSE_BYTES < (double)mdim * TABLE_DENSE_BYTES;
    snprintf(why, whysz, "table %s: %llu weights a shard, at most %llu keys touched (%llu nonzeros over %u shards)",
             sparse ? "sparse" : "dense", (unsigned long long)mdim, (unsigned long long)keys,
             (unsigned long long)nnz, shards);
    return sparse;
}

uint64_t agg_table_start_keys(uint64_t mdim, uint64_t nnz, uint32_t shards)
{
    uint64_t keys = nnz / (shards ? shards : 1) + 1;
    if (keys > mdim)
        keys = mdim;
    return keys < TABLE_START_KEYS ? keys : TABLE_START_KEYS;
}

int agg_table_snapshot(const agg_model_state_t *m, const fsgd_wire_model_t *head, fsgd_wire_buf_t *b)
{
    const size_t n = fsgd_sparse_table_size(m->table);
    uint32_t *keys = malloc((n ? n : 1) * sizeof *keys), *at = malloc((n ? n : 1) * sizeof *at);
    int rc = keys && at ? fsgd_sparse_table_sorted(m->table, keys, at) : FSGD_E_NOMEM;
    if (!rc)
        rc = fsgd_wire_model_put_pairs(b, head, keys, at, m->adam.theta, n);
    free(keys);
    free(at);
    return rc;
}
