/* Reducing sparse gradients: sum any number of sparse vectors over a model
 * dimension, then take the (scaled) sum as one sparse vector with strictly
 * increasing keys. Sorted inputs are kept and merged when the sum is first
 * read (so the readers below take a non-const reducer); others go through
 * a dense accumulator reset only on touched keys (reduce.c). Not thread
 * safe: one reducer per reducing thread. */
#ifndef FSGD_REDUCE_H
#define FSGD_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/sparse.h"

typedef struct fsgd_reducer fsgd_reducer_t;

/* NULL on allocation failure. */
fsgd_reducer_t *fsgd_reducer_new(uint64_t dim);
void fsgd_reducer_destroy(fsgd_reducer_t *r);

/* Adds g (keys < dim) into the running sum. Returns 0 or FSGD_E_RANGE/NOMEM. */
int fsgd_reducer_add(fsgd_reducer_t *r, const uint32_t *keys, const float *vals, size_t n);

/* Writes scale * sum into out (replaced, keys increasing) and resets the reducer. */
int fsgd_reducer_take(fsgd_reducer_t *r, double scale, fsgd_sparse_t *out);

/* The touched keys, sorted increasing (n of them; owned by r, valid until
 * the next add/take/clear), and the running sum of one key. With
 * fsgd_reducer_clear these let a caller drain the sums in double precision
 * (the optimizer step, fsgd_reducer_take_step in fsgd/adam.h). */
const uint32_t *fsgd_reducer_sorted_keys(fsgd_reducer_t *r, size_t *n);
double fsgd_reducer_sum(fsgd_reducer_t *r, uint32_t key);
/* The touched keys, sorted, and their sums beside them (owned by r, valid
 * until the next add/take/clear): draining a step in key order without a
 * lookup a key. Returns 0 or FSGD_E_NOMEM. */
int fsgd_reducer_sorted(fsgd_reducer_t *r, const uint32_t **keys, const double **sums, size_t *n);

/* Empties the reducer (only the touched keys are reset). */
void fsgd_reducer_clear(fsgd_reducer_t *r);

#endif
