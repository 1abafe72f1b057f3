/* What a worker holds, replica auto resolved (fsgd/dist.h). */
#include "fsgd/dist.h"

#include "fsgd/strategy.h"

fsgd_job_replica_t fsgd_dist_replica(const fsgd_train_params_t *train, const fsgd_dist_params_t *dist)
{
    if (dist->replica != FSGD_REPLICA_AUTO)
        return dist->replica;
    uint64_t weights = train->dim ? train->dim : train->hash_bits > 0 ? (uint64_t)1 << train->hash_bits : 0;
    return weights >= FSGD_REPLICA_AUTO_MIN_WEIGHTS && !fsgd_strategy_workers_optimize(train->codec)
               ? FSGD_REPLICA_WORKING_SET
               : FSGD_REPLICA_FULL;
}
