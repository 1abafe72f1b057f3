/* fsgd/holdout.h: held-out rows over their own keys. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/holdout.h"

void fsgd_holdout_free(fsgd_holdout_t *h)
{
    if (!h)
        return;
    free(h->row_ptr);
    free(h->slot);
    free(h->val);
    free(h->label);
    free(h->keys);
    free(h->w);
    memset(h, 0, sizeof *h);
}

/* The distinct columns < dim, ascending, and each entry's index among them.
 * A bit a key marks the keys used; an entry's index is the number of marked
 * keys below it (a running count a 64-key word, plus the word's bits below):
 * 2 + 1 MiB at 2^24, where a key -> index map would be 64 MiB. */
static int collect_keys(fsgd_holdout_t *h, const fsgd_csr_t *rows, uint64_t *used, uint32_t *below)
{
    for (size_t j = 0; j < rows->nnz; j++) {
        uint32_t c = rows->col[j];
        if (c < h->dim)
            used[c >> 6] |= (uint64_t)1 << (c & 63);
    }
    size_t words = (size_t)(h->dim + 63) / 64, n = 0;
    for (size_t wi = 0; wi < words; wi++) {
        below[wi] = (uint32_t)n;
        for (uint64_t b = used[wi]; b; b &= b - 1)
            h->keys[n++] = (uint32_t)(wi * 64 + (size_t)__builtin_ctzll(b));
    }
    h->n_keys = n;
    size_t at = 0;
    h->row_ptr[0] = 0;
    for (size_t r = 0; r < rows->n_rows; r++) {
        for (uint64_t j = rows->row_ptr[r]; j < rows->row_ptr[r + 1]; j++) {
            uint32_t c = rows->col[j];
            if (c >= h->dim)
                continue;
            uint64_t lower = used[c >> 6] & (((uint64_t)1 << (c & 63)) - 1);
            h->slot[at] = below[c >> 6] + (uint32_t)__builtin_popcountll(lower);
            if (h->val)
                h->val[at] = rows->val[j];
            at++;
        }
        h->row_ptr[r + 1] = at;
    }
    return 0;
}

int fsgd_holdout_init(fsgd_holdout_t *h, const fsgd_csr_t *rows, uint64_t dim)
{
    memset(h, 0, sizeof *h);
    h->dim = dim;
    h->n_rows = rows->n_rows;
    size_t nnz = rows->nnz ? rows->nnz : 1;
    h->row_ptr = malloc((rows->n_rows + 1) * sizeof *h->row_ptr);
    h->slot = malloc(nnz * sizeof *h->slot);
    h->val = rows->val ? malloc(nnz * sizeof *h->val) : NULL;
    h->label = malloc((rows->n_rows ? rows->n_rows : 1) * sizeof *h->label);
    h->keys = malloc(nnz * sizeof *h->keys);
    size_t words = (size_t)(dim + 63) / 64 + 1;
    uint64_t *used = calloc(words, sizeof *used);
    uint32_t *below = malloc(words * sizeof *below);
    if (!h->row_ptr || !h->slot || (rows->val && !h->val) || !h->label || !h->keys || !used || !below) {
        free(used);
        free(below);
        fsgd_holdout_free(h);
        return FSGD_E_NOMEM;
    }
    if (rows->n_rows)
        memcpy(h->label, rows->label, rows->n_rows * sizeof *h->label);
    collect_keys(h, rows, used, below);
    free(used);
    free(below);
    h->w = malloc((h->n_keys ? h->n_keys : 1) * sizeof *h->w);
    if (!h->w) {
        fsgd_holdout_free(h);
        return FSGD_E_NOMEM;
    }
    return 0;
}

double fsgd_holdout_loss(fsgd_holdout_t *h, fsgd_loss_kind_t kind, const float *theta, int has_bias, float bias)
{
    for (size_t i = 0; i < h->n_keys; i++)
        h->w[i] = theta[h->keys[i]];
    double sum = 0;
    for (size_t r = 0; r < h->n_rows; r++) {
        double s = 0;
        uint64_t lo = h->row_ptr[r], hi = h->row_ptr[r + 1];
        if (h->val)
            for (uint64_t j = lo; j < hi; j++)
                s += (double)h->w[h->slot[j]] * h->val[j];
        else
            for (uint64_t j = lo; j < hi; j++)
                s += (double)h->w[h->slot[j]] * 1.0f;
        if (has_bias)
            s += (double)bias * theta[h->dim];
        sum += fsgd_loss_value(kind, s, h->label[r]);
    }
    return sum / (double)(h->n_rows ? h->n_rows : 1);
}
