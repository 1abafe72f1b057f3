/* Steps between the full snapshots on NAME.model, for both roles: the
 * aggregator publishes by it, a worker bounds how far ahead a snapshot of
 * this run can be by it. Private to trainer/distributed. */
#ifndef FSGD_SNAPSHOT_EVERY_H
#define FSGD_SNAPSHOT_EVERY_H

#include <stdint.h>

/* snapshot_every (the job key; <= 0: auto) for a model of `weights`.
 * Auto: a snapshot is 4 bytes a weight; one every weights / 4096 steps
 * costs 16 KiB a step whatever the model's size, and at least 100 steps
 * apart. The embedded cluster (max_model_weights set) keeps 5 MiB a
 * partition: the snapshot and the deltas after it must fit, so 100. A
 * worker that does not know max_model_weights gets the larger gap: a
 * looser bound, never a false refusal. */
static inline uint64_t dist_snapshot_every(int snapshot_every, uint64_t max_model_weights, uint64_t weights)
{
    if (snapshot_every > 0)
        return (uint64_t)snapshot_every;
    if (max_model_weights)
        return 100;
    return weights / 4096 > 100 ? weights / 4096 : 100;
}

#endif
