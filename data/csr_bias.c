/* Copies of CSR rows for training: columns past the model's dim dropped and
 * the intercept's constant feature appended (fsgd/csr_bias.h). */
#include "fsgd/csr_bias.h"

#include "fsgd/error.h"

/* The rows' copies can be binary batches (fsgd/csr.h: no values, half the
 * memory) when every value, the intercept's included, is 1. */
int fsgd_csr_ones_with_bias(const fsgd_csr_t *rows, int bias, float bias_value)
{
    return (!bias || bias_value == 1.0f) && fsgd_csr_all_ones(rows);
}

/* An empty dst with room for rows rows and nnz nonzeros, binary when
 * binary. */
int fsgd_csr_room(fsgd_csr_t *dst, size_t rows, size_t nnz, int binary)
{
    return binary ? fsgd_csr_init_binary(dst, rows, nnz) : fsgd_csr_reserve(dst, rows, nnz);
}

/* Copies src into dst (empty) with columns >= dim dropped and, when bias,
 * the constant feature (dim, bias_value) appended to every row; dst is a
 * binary batch when every value of src and bias_value are 1. */
int fsgd_csr_copy_biased(const fsgd_csr_t *src, uint64_t dim, int bias, float bias_value, fsgd_csr_t *dst)
{
    FSGD_TRY(fsgd_csr_room(dst, src->n_rows, src->nnz + (bias ? src->n_rows : 0),
                           fsgd_csr_ones_with_bias(src, bias, bias_value)));
    for (size_t r = 0; r < src->n_rows; r++) {
        uint64_t lo = src->row_ptr[r], hi = src->row_ptr[r + 1];
        for (uint64_t i = lo; i < hi; i++) {
            if (src->col[i] >= dim)
                continue;
            if (dst->val)
                dst->val[dst->nnz] = src->val ? src->val[i] : 1.0f;
            dst->col[dst->nnz++] = src->col[i];
        }
        if (bias) {
            if (dst->val)
                dst->val[dst->nnz] = bias_value;
            dst->col[dst->nnz++] = (uint32_t)dim;
        }
        dst->label[r] = src->label[r];
        dst->row_ptr[r + 1] = dst->nnz;
    }
    dst->n_rows = src->n_rows;
    dst->max_col = dim + (bias ? 1 : 0);
    return FSGD_E_OK;
}

/* Appends row r of src to dst as fsgd_csr_copy_biased would copy it:
 * columns >= dim dropped, the constant feature (dim, bias_value) added when
 * bias; no values when dst is a binary batch (src's are 1 then, and need
 * not be there). Building the batches straight from the caller's rows
 * saves a whole copy of the data. */
int fsgd_csr_append_biased(fsgd_csr_t *dst, const fsgd_csr_t *src, size_t r, uint64_t dim, int bias,
                           float bias_value)
{
    uint64_t lo = src->row_ptr[r], hi = src->row_ptr[r + 1];
    FSGD_TRY(fsgd_csr_reserve(dst, 1, (size_t)(hi - lo) + (bias ? 1 : 0)));
    size_t n = dst->nnz;
    for (uint64_t i = lo; i < hi; i++) {
        if (src->col[i] >= dim)
            continue;
        if (dst->val)
            dst->val[n] = src->val ? src->val[i] : 1.0f;
        dst->col[n++] = src->col[i];
    }
    if (bias) {
        if (dst->val)
            dst->val[n] = bias_value;
        dst->col[n++] = (uint32_t)dim;
    }
    dst->label[dst->n_rows] = src->label[r];
    dst->row_ptr[++dst->n_rows] = n;
    dst->nnz = n;
    if (n > (size_t)dst->row_ptr[dst->n_rows - 1] && (uint64_t)dst->col[n - 1] + 1 > dst->max_col)
        dst->max_col = (uint64_t)dst->col[n - 1] + 1;
    return FSGD_E_OK;
}
