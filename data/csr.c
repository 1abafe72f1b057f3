#include "fsgd/csr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"

void fsgd_csr_clear(fsgd_csr_t *m)
{
    m->n_rows = 0;
    m->nnz = 0;
    m->max_col = 0;
    if (m->row_ptr)
        m->row_ptr[0] = 0;
}

static size_t grown(size_t cap, size_t need)
{
    size_t n = cap ? cap : 256;
    while (n < need)
        n *= 2;
    return n;
}

int fsgd_csr_reserve(fsgd_csr_t *m, size_t rows, size_t nnz)
{
    size_t need_rows = m->n_rows + rows;
    if (need_rows > m->cap_rows || !m->row_ptr) {
        size_t n = grown(m->cap_rows, need_rows);
        double *label = realloc(m->label, n * sizeof *label);
        if (!label)
            return FSGD_E_NOMEM;
        m->label = label;
        uint64_t *row_ptr = realloc(m->row_ptr, (n + 1) * sizeof *row_ptr);
        if (!row_ptr)
            return FSGD_E_NOMEM;
        if (!m->row_ptr)
            row_ptr[0] = 0;
        m->row_ptr = row_ptr;
        m->cap_rows = n;
    }
    size_t need_nnz = m->nnz + nnz;
    if (need_nnz > m->cap_nnz || !m->col) {
        size_t n = grown(m->cap_nnz, need_nnz);
        uint32_t *col = realloc(m->col, n * sizeof *col);
        if (!col)
            return FSGD_E_NOMEM;
        int binary = m->col && !m->val;
        m->col = col;
        if (!binary) {
            float *val = realloc(m->val, n * sizeof *val);
            if (!val)
                return FSGD_E_NOMEM;
            m->val = val;
        }
        m->cap_nnz = n;
    }
    return FSGD_E_OK;
}

int fsgd_csr_init_binary(fsgd_csr_t *m, size_t rows, size_t nnz)
{
    memset(m, 0, sizeof *m);
    m->row_ptr = malloc((rows + 1) * sizeof *m->row_ptr);
    m->label = malloc((rows ? rows : 1) * sizeof *m->label);
    m->col = malloc((nnz ? nnz : 1) * sizeof *m->col); /* non-NULL: what marks it binary */
    if (!m->row_ptr || !m->label || !m->col) {
        fsgd_csr_free(m);
        return FSGD_E_NOMEM;
    }
    m->row_ptr[0] = 0;
    m->cap_rows = rows;
    m->cap_nnz = nnz ? nnz : 1;
    return FSGD_E_OK;
}

int fsgd_csr_all_ones(const fsgd_csr_t *m)
{
    if (!m->val)
        return 1;
    for (size_t i = 0; i < m->nnz; i++)
        if (m->val[i] != 1.0f)
            return 0;
    return 1;
}

double fsgd_csr_abs_sum(const fsgd_csr_t *m)
{
    if (!m->val)
        return (double)m->nnz;
    double s = 0;
    for (size_t i = 0; i < m->nnz; i++)
        s += fabs((double)m->val[i]);
    return s;
}

int fsgd_csr_append_row(fsgd_csr_t *m, double label, const uint32_t *col, const float *val, size_t n)
{
    FSGD_TRY(fsgd_csr_reserve(m, 1, n));
    if (n) {
        memcpy(m->col + m->nnz, col, n * sizeof *col);
        memcpy(m->val + m->nnz, val, n * sizeof *val);
        for (size_t i = 0; i < n; i++)
            if ((uint64_t)col[i] + 1 > m->max_col)
                m->max_col = (uint64_t)col[i] + 1;
    }
    m->label[m->n_rows] = label;
    m->nnz += n;
    m->n_rows++;
    m->row_ptr[m->n_rows] = m->nnz;
    return FSGD_E_OK;
}

int fsgd_csr_give_values(fsgd_csr_t *m)
{
    if (m->val || !m->col)
        return FSGD_E_OK;
    float *val = malloc((m->cap_nnz ? m->cap_nnz : 1) * sizeof *val);
    if (!val)
        return FSGD_E_NOMEM;
    for (size_t i = 0; i < m->nnz; i++)
        val[i] = 1.0f;
    m->val = val;
    return FSGD_E_OK;
}

int fsgd_csr_append_rows(fsgd_csr_t *dst, const fsgd_csr_t *src, size_t first, size_t count)
{
    if (count == 0)
        return FSGD_E_OK;
    uint64_t lo = src->row_ptr[first], hi = src->row_ptr[first + count];
    FSGD_TRY(fsgd_csr_reserve(dst, count, (size_t)(hi - lo)));
    /* a binary dst stays binary while the rows' values are all 1 */
    if (!dst->val && src->val)
        for (uint64_t i = lo; i < hi; i++)
            if (src->val[i] != 1.0f) {
                FSGD_TRY(fsgd_csr_give_values(dst));
                break;
            }
    memcpy(dst->col + dst->nnz, src->col + lo, (size_t)(hi - lo) * sizeof *src->col);
    if (dst->val && src->val)
        memcpy(dst->val + dst->nnz, src->val + lo, (size_t)(hi - lo) * sizeof *src->val);
    else if (dst->val)
        for (uint64_t i = lo; i < hi; i++)
            dst->val[dst->nnz + (i - lo)] = 1.0f;
    for (size_t r = 0; r < count; r++) {
        dst->label[dst->n_rows + r] = src->label[first + r];
        dst->row_ptr[dst->n_rows + r + 1] = dst->nnz + (src->row_ptr[first + r + 1] - lo);
    }
    for (uint64_t i = lo; i < hi; i++)
        if ((uint64_t)src->col[i] + 1 > dst->max_col)
            dst->max_col = (uint64_t)src->col[i] + 1;
    dst->n_rows += count;
    dst->nnz += (size_t)(hi - lo);
    return FSGD_E_OK;
}

void fsgd_csr_free(fsgd_csr_t *m)
{
    if (!m)
        return;
    free(m->row_ptr);
    free(m->col);
    free(m->val);
    free(m->label);
    memset(m, 0, sizeof *m);
}
