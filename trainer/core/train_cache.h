/* Private to trainer/core. fsgd train --cache: the first pass over the training text, written to a
 * binary row cache (fsgd/rowcache.h) with the holdout and test rows set
 * aside in memory and stored in the cache's own sections; or, when the
 * cache is already there and was made from the same input, those rows read
 * back from it without reading the text. */
#ifndef FSGD_TRAIN_CACHE_H
#define FSGD_TRAIN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"
#include "fsgd/train_params.h"

/* At most this many rows are kept in memory for the test split (no --test),
 * and FSGD_TRAIN_HOLDOUT_MAX for the holdout (epochs auto): memory stays
 * bounded. */
#define FSGD_TRAIN_CACHE_SET_ASIDE_MAX 100000

/* What fsgd_train_cache_prepare did, for the caller to report. */
typedef struct fsgd_train_cache_result {
    uint64_t rows;          /* rows in the cache's training section */
    uint64_t max_col;       /* 1 + their largest column */
    int reused;             /* 1: the cache was there and matched; the text was not read */
    uint64_t skipped_rows;  /* malformed LIBSVM rows skipped (job->skip_bad) on the first pass */
    double feature_share;   /* VW rows with crosses: features / (features + crosses), for lr auto; else 0 */
    char rewritten[6144];   /* why a cache found there was rewritten ("" when none was) */
} fsgd_train_cache_result_t;

/* Reads job->data (LIBSVM, or delimited with spec) in chunks and writes the
 * rows to job->cache, except a random job->holdout fraction (epochs auto)
 * into hold (at most FSGD_TRAIN_HOLDOUT_MAX rows) and, when test_fraction >
 * 0, a random test_fraction into test (at most FSGD_TRAIN_CACHE_SET_ASIDE_MAX);
 * those go into the cache's holdout and test sections too. Checks the labels
 * against the model kind. out->rows gets the cached rows, out->max_col 1 +
 * their largest column.
 *
 * When job->cache already holds a finished cache whose metadata matches this
 * input (the source's real path, size, mtime and inode; the row format spec
 * and hash bits; skip_bad; the test and holdout fractions and, when either
 * is used, the seed; the set-aside limits), nothing is read from job->data:
 * hold and test come from the cache's sections and out->reused is set to 1.
 * A cache that differs, is of another version, unfinished, cut short or
 * corrupt is rewritten, and out->rewritten says why; a file there that is
 * not a row cache at all is an error (it is not overwritten). Prints
 * nothing. Returns 0 or an fsgd error with err set. */
int fsgd_train_cache_prepare(const fsgd_train_params_t *job, const fsgd_delim_spec_t *spec, double test_fraction,
                             fsgd_csr_t *hold, fsgd_csr_t *test, fsgd_train_cache_result_t *out, char *err,
                             size_t errsz);

#endif
