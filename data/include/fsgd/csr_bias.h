/* The rows a trainer sees: a copy of the data's rows with the columns past
 * the model's dim dropped and, when the model has an intercept, its constant
 * feature (column dim, value bias_value) appended to every row. A copy is a
 * binary batch (fsgd/csr.h: no values, half the memory) when every value,
 * the intercept's included, is 1. */
#ifndef FSGD_CSR_BIAS_H
#define FSGD_CSR_BIAS_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"

/* 1 when the copies of rows can be binary batches: every value of rows is
 * 1, and so is bias_value when bias. */
int fsgd_csr_ones_with_bias(const fsgd_csr_t *rows, int bias, float bias_value);

/* Makes dst, empty, a batch with room for rows rows and nnz nonzeros,
 * binary (no values) when binary. Returns 0 or FSGD_E_NOMEM. */
int fsgd_csr_room(fsgd_csr_t *dst, size_t rows, size_t nnz, int binary);

/* Copies src into dst (empty) as the trainer sees it (above); dst is binary
 * when fsgd_csr_ones_with_bias. Returns 0 or FSGD_E_NOMEM. */
int fsgd_csr_copy_biased(const fsgd_csr_t *src, uint64_t dim, int bias, float bias_value, fsgd_csr_t *dst);

/* Appends row r of src to dst as fsgd_csr_copy_biased copies it; no values
 * when dst is a binary batch (src's are then 1 and need not be there).
 * Returns 0 or FSGD_E_NOMEM. */
int fsgd_csr_append_biased(fsgd_csr_t *dst, const fsgd_csr_t *src, size_t r, uint64_t dim, int bias,
                           float bias_value);

#endif
