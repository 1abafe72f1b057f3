/* fsgd_train from a row cache (FSGD_TRAIN_CACHE, fsgd/train.h): private to
 * core; fsgd_train calls it. */
#ifndef FSGD_TRAIN_STREAM_H
#define FSGD_TRAIN_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/train_params.h"
#include "fsgd/model.h"
#include "fsgd/train.h"

/* fsgd_train with in->source FSGD_TRAIN_CACHE: trains on the rows of the
 * cache at in->cache; in->hold (may be NULL; required for epochs auto) are
 * held-out rows kept in memory for early stopping, in->test may be NULL.
 * The same defaults and statistics as in memory. hooks may be NULL. 0 or
 * an fsgd error with err set. */
int fsgd_train_stream(const fsgd_train_params_t *job, const fsgd_train_input_t *in, fsgd_model_t *model,
                      fsgd_train_stats_t *stats, const fsgd_train_hooks_t *hooks, char *err, size_t errsz);

#endif
