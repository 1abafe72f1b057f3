/* fsgd_train from a row cache (FSGD_TRAIN_CACHE, fsgd/train.h): private to
 * core; fsgd_train calls it. */
#ifndef FSGD_TRAIN_STREAM_H
#define FSGD_TRAIN_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/job.h"
#include "fsgd/model.h"
#include "fsgd/train.h"

/* Trains on the rows of the cache at cache_path (see FSGD_TRAIN_CACHE); hold
 * (may be NULL; required for epochs auto) are held-out rows kept in memory
 * for early stopping, test may be NULL. The same defaults and statistics as
 * in memory. 0 or an fsgd error with err set. */
int fsgd_train_stream(const fsgd_job_t *job, const char *cache_path, const fsgd_csr_t *hold,
                      const fsgd_csr_t *test, uint64_t dim, fsgd_model_t *model, fsgd_train_stats_t *stats,
                      fsgd_train_progress_fn progress, void *ctx, char *err, size_t errsz);

#endif
