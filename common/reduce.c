#include "fsgd/reduce.h"

#include <stdlib.h>

#include "fsgd/error.h"
#include "fsgd/keysort.h"

struct fsgd_reducer {
    uint64_t dim;
    double *acc;     /* dim entries; zero except on touched keys */
    uint8_t *seen;   /* dim entries */
    uint32_t *touched;
    size_t n_touched, cap;
};

fsgd_reducer_t *fsgd_reducer_new(uint64_t dim)
{
    fsgd_reducer_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->dim = dim;
    r->acc = calloc(dim ? dim : 1, sizeof *r->acc);
    r->seen = calloc(dim ? dim : 1, 1);
    if (!r->acc || !r->seen) {
        fsgd_reducer_destroy(r);
        return NULL;
    }
    return r;
}

void fsgd_reducer_destroy(fsgd_reducer_t *r)
{
    if (!r)
        return;
    free(r->acc);
    free(r->seen);
    free(r->touched);
    free(r);
}

int fsgd_reducer_add(fsgd_reducer_t *r, const uint32_t *keys, const float *vals, size_t n)
{
    if (r->n_touched + n > r->cap) {
        size_t cap = r->cap ? r->cap : 1024;
        while (cap < r->n_touched + n)
            cap *= 2;
        uint32_t *t = realloc(r->touched, cap * sizeof *t);
        if (!t)
            return FSGD_E_NOMEM;
        r->touched = t;
        r->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        if (k >= r->dim)
            return FSGD_E_RANGE;
        if (!r->seen[k]) {
            r->seen[k] = 1;
            r->touched[r->n_touched++] = k;
        }
        r->acc[k] += vals[i];
    }
    return FSGD_E_OK;
}

const uint32_t *fsgd_reducer_sorted_keys(fsgd_reducer_t *r, size_t *n)
{
    fsgd_keysort(r->touched, r->n_touched);
    *n = r->n_touched;
    return r->touched;
}

double fsgd_reducer_sum(const fsgd_reducer_t *r, uint32_t key) { return key < r->dim ? r->acc[key] : 0.0; }

void fsgd_reducer_clear(fsgd_reducer_t *r)
{
    for (size_t i = 0; i < r->n_touched; i++) {
        r->acc[r->touched[i]] = 0;
        r->seen[r->touched[i]] = 0;
    }
    r->n_touched = 0;
}

size_t fsgd_reducer_count(const fsgd_reducer_t *r) { return r->n_touched; }

int fsgd_reducer_take(fsgd_reducer_t *r, double scale, fsgd_sparse_t *out)
{
    FSGD_TRY(fsgd_sparse_reserve(out, r->n_touched));
    fsgd_keysort(r->touched, r->n_touched);
    for (size_t i = 0; i < r->n_touched; i++) {
        uint32_t k = r->touched[i];
        out->keys[i] = k;
        out->vals[i] = (float)(r->acc[k] * scale);
        r->acc[k] = 0;
        r->seen[k] = 0;
    }
    out->n = r->n_touched;
    r->n_touched = 0;
    return FSGD_E_OK;
}
