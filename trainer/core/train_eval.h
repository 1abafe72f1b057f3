/* Scoring rows during training (private to core). */
#ifndef FSGD_TRAIN_EVAL_H
#define FSGD_TRAIN_EVAL_H

#include <stdint.h>

#include "fsgd/csr.h"

/* out[r] = θ·x_r for every row of rows (columns >= model_dim count 0), on
 * up to `threads` threads (fewer for few rows). Each row's sum is the same
 * on any thread. */
void fsgd_train_margins(int threads, const float *theta, uint64_t model_dim, const fsgd_csr_t *rows, double *out);

#endif
