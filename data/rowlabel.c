/* Importance weights and two-value labels carried in a row's label (fsgd/rowlabel.h). */
#include "fsgd/rowlabel.h"

#include <stdlib.h>
#include <string.h>

size_t fsgd_rowlabel_weigh(fsgd_csr_t *m, size_t first, const double *weight, double pos, double neg)
{
    size_t w = first; /* rows kept so far (compacted in place) */
    uint64_t nnz = m->row_ptr[first];
    for (size_t r = first; r < m->n_rows; r++) {
        const int positive = m->label[r] > 0;
        const double x = (weight ? weight[r - first] : 1.0) * (positive ? pos : neg);
        const uint64_t lo = m->row_ptr[r], hi = m->row_ptr[r + 1];
        if (x == 0)
            continue;
        if (w != r) { /* move the row down over the dropped ones */
            memmove(m->col + nnz, m->col + lo, (size_t)(hi - lo) * sizeof *m->col);
            if (m->val)
                memmove(m->val + nnz, m->val + lo, (size_t)(hi - lo) * sizeof *m->val);
        }
        m->label[w] = positive ? x : -x;
        nnz += hi - lo;
        m->row_ptr[++w] = nnz;
    }
    size_t dropped = m->n_rows - w;
    m->n_rows = w;
    m->nnz = (size_t)nnz;
    if (dropped) { /* a dropped row may have held the largest column (rare: weight-0 rows) */
        uint64_t mc = 0;
        for (uint64_t j = 0; j < nnz; j++)
            if ((uint64_t)m->col[j] + 1 > mc)
                mc = (uint64_t)m->col[j] + 1;
        m->max_col = mc;
    }
    return dropped;
}

int fsgd_rowlabel_class_weight_parse(const char *s, size_t n, double *pos, double *neg)
{
    char t[64]; /* a copy ended by '\0', so strtod stops within s[0..n) */
    if (n >= sizeof t)
        return -1;
    memcpy(t, s, n);
    t[n] = '\0';
    char *end;
    double p = strtod(t, &end);
    if (end == t || *end != ',' || !isfinite(p) || p <= 0)
        return -1;
    const char *b = end + 1;
    double q = strtod(b, &end);
    if (end == b || *end || !isfinite(q) || q <= 0)
        return -1;
    *pos = p;
    *neg = q;
    return 0;
}

int fsgd_rowlabel_map_two(double *label, size_t n, double *lo, double *hi)
{
    double a = 0, b = 0;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        double y = label[i];
        if (k >= 1 && y == a)
            continue;
        if (k >= 2 && y == b)
            continue;
        if (k == 2)
            return 0; /* a third value */
        if (k++ == 0)
            a = y;
        else
            b = y;
    }
    if (k != 2)
        return 0;
    *lo = a < b ? a : b;
    *hi = a < b ? b : a;
    if (*hi == 1 && (*lo == 0 || *lo == -1))
        return 0; /* the classes already */
    for (size_t i = 0; i < n; i++)
        label[i] = label[i] == *hi ? 1.0 : -1.0;
    return 1;
}
