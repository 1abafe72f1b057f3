/* Reducing sparse gradients: sum any number of sparse vectors over a model
 * dimension, then take the (scaled) sum as one sparse vector with strictly
 * increasing keys. Dense accumulator reset only on touched keys. Not thread
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

/* As fsgd_reducer_take, with out->vals[i] = fsgd_adam_step_grad(sum, scale,
 * l2, theta[key]) (fsgd/adam.h): the step gradient Adam takes. */
int fsgd_reducer_take_step(fsgd_reducer_t *r, double scale, double l2, const float *theta, fsgd_sparse_t *out);

#endif
