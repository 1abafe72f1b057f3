/* Held-out rows scored against a large model, fast: the rows' distinct keys
 * are gathered from θ into a small dense array at each look, and the rows
 * read that array through remapped columns. A look at a 2^24 model reads
 * θ once in key order (the held-out rows of CTR data touch a few percent of
 * it) instead of missing the cache on most of the rows' nonzeros. The loss
 * is the same, bit for bit, as scoring the rows with fsgd_model_margin. */
#ifndef FSGD_HOLDOUT_H
#define FSGD_HOLDOUT_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/loss.h"

typedef struct fsgd_holdout {
    size_t n_rows;
    uint64_t *row_ptr; /* n_rows + 1: the rows' entries with a column < dim */
    uint32_t *slot;    /* an entry's key, as an index into keys */
    float *val;        /* NULL: every value 1 */
    double *label;
    uint32_t *keys; /* the distinct columns < dim, ascending */
    size_t n_keys;
    float *w; /* θ at keys, gathered by a look */
    uint64_t dim;
} fsgd_holdout_t;

/* Builds h from rows for a model of dim features (columns >= dim are
 * unseen features: left out, as fsgd_model_margin does). rows is not kept.
 * Returns 0 or FSGD_E_NOMEM (h then empty). */
int fsgd_holdout_init(fsgd_holdout_t *h, const fsgd_csr_t *rows, uint64_t dim);

/* Mean loss of the rows under θ (dim weights, then the intercept's at
 * theta[dim] when has_bias, times bias), summed in row order as
 * fsgd_model_margin and fsgd_loss_value do. 0 for no rows. */
double fsgd_holdout_loss(fsgd_holdout_t *h, fsgd_loss_kind_t kind, const float *theta, int has_bias, float bias);

void fsgd_holdout_free(fsgd_holdout_t *h);

#endif
