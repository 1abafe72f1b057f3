/* fsgd train --cache: the first pass over the training text, written to a
 * binary row cache with the holdout and test rows set aside in memory. */
#ifndef FSGD_CLI_TRAIN_CACHE_H
#define FSGD_CLI_TRAIN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"
#include "fsgd/job.h"

/* At most this many rows are kept in memory for the test split (no --test),
 * and FSGD_TRAIN_HOLDOUT_MAX for the holdout (epochs auto): memory stays
 * bounded. */
#define FSGD_TRAIN_CACHE_SET_ASIDE_MAX 100000

/* Reads job->data (LIBSVM, or delimited with spec) in chunks and writes the
 * rows to job->cache, except a random job->holdout fraction (epochs auto)
 * into hold (at most FSGD_TRAIN_HOLDOUT_MAX rows) and, when test_fraction >
 * 0, a random test_fraction into test (at most FSGD_TRAIN_CACHE_SET_ASIDE_MAX). Checks the labels
 * against the model kind. *rows gets the cached rows, *max_col 1 + their
 * largest column. Returns 0 or an fsgd error with err set. */
int fsgd_train_cache_write(const fsgd_job_t *job, const fsgd_delim_spec_t *spec, double test_fraction,
                           fsgd_csr_t *hold, fsgd_csr_t *test, uint64_t *rows, uint64_t *max_col, char *err,
                           size_t errsz);

#endif
