/* Assembling a sharded job's model as pairs (assemble.c), for shard 0's
 * end of a job with sparse tables (agg_shard.c). Private to
 * trainer/distributed; the dense assembly is public (fsgd/dist.h). */
#ifndef FSGD_DIST_ASSEMBLE_H
#define FSGD_DIST_ASSEMBLE_H

#include <stdint.h>

#include "fsgd/dist.h"
#include "fsgd/model.h"
#include "fsgd/sparse.h"

/* fsgd_model_assemble_topic for a sharded job's model too large to hold
 * dense (shards with sparse tables, job key table): its shape into *m
 * (kind, dim, intercept, input; m->w NULL) and its weights that are not +0
 * as pairs into *w (global keys increasing, dim the intercept's; w grown as
 * needed): memory for the keys held, not the dim. Reads snapshots only: a
 * shard whose last snapshot was followed by values is FSGD_E_STATE. For
 * fsgd_model_save_pairs and fsgd_train_evaluate_pairs. */
int fsgd_model_assemble_topic_pairs(struct fsgd_bus *bus, const char *job, int require_final, fsgd_model_t *m,
                                    fsgd_sparse_t *w, uint64_t *step, char *err, size_t errsz);

#endif
