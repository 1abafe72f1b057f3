/* CSR mini-batches: rows of (0-based uint32 feature index, float value) with
 * a label per row. Plain data; the struct owns its arrays (malloc'd).
 * Row r's entries are col[row_ptr[r] .. row_ptr[r+1]), strictly increasing
 * within a row unless the reader was told otherwise. */
#ifndef FSGD_CSR_H
#define FSGD_CSR_H

#include <stddef.h>
#include <stdint.h>

typedef struct fsgd_csr {
    size_t n_rows;
    size_t nnz;
    uint64_t *row_ptr; /* n_rows + 1 entries, row_ptr[0] == 0 */
    uint32_t *col;     /* nnz entries, 0-based */
    float *val;        /* nnz entries; NULL in a binary batch (fsgd_csr_init_binary): every value 1 */
    double *label;     /* n_rows entries */
    uint64_t max_col;  /* 1 + largest col seen (0 when empty): the dimension the rows need */
    size_t cap_rows;
    size_t cap_nnz;
} fsgd_csr_t;

/* Empties the batch, keeping its memory. */
void fsgd_csr_clear(fsgd_csr_t *m);

/* Makes room for rows / nnz more entries. Returns 0 or FSGD_E_NOMEM. */
int fsgd_csr_reserve(fsgd_csr_t *m, size_t rows, size_t nnz);

/* Makes m, empty, a binary batch with room for rows rows and nnz nonzeros:
 * it holds no values (val stays NULL, every value is 1), 4 bytes a nonzero
 * instead of 8 for rows such as CTR data's. fsgd_csr_reserve keeps it
 * binary, fsgd_csr_append_rows while the rows it appends are (a value
 * other than 1 gives it values); fsgd_csr_append_row needs a batch with
 * values. Only the readers that say so accept one (the cpu backend, fsgd
 * train).
 * Returns 0 or FSGD_E_NOMEM (m then empty, without arrays). */
int fsgd_csr_init_binary(fsgd_csr_t *m, size_t rows, size_t nnz);

/* Gives a binary batch values (1 for every nonzero so far): it takes any
 * value after. A batch with values is left as it is. Returns 0 or
 * FSGD_E_NOMEM (m unchanged). */
int fsgd_csr_give_values(fsgd_csr_t *m);

/* 1 when every value of m is 1 (a binary batch is). */
int fsgd_csr_all_ones(const fsgd_csr_t *m);

/* Σ|value| over m's nonzeros (nnz for a binary batch). */
double fsgd_csr_abs_sum(const fsgd_csr_t *m);

/* Appends one row (copies). Returns 0 or FSGD_E_NOMEM. */
int fsgd_csr_append_row(fsgd_csr_t *m, double label, const uint32_t *col, const float *val, size_t n);

/* Appends rows [first, first+count) of src to dst; either may be binary.
 * Returns 0 or FSGD_E_NOMEM. */
int fsgd_csr_append_rows(fsgd_csr_t *dst, const fsgd_csr_t *src, size_t first, size_t count);

/* Frees the arrays and zeroes the struct. NULL is a no-op. */
void fsgd_csr_free(fsgd_csr_t *m);

#endif
