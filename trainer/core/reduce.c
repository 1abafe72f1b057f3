#include "fsgd/adam.h"
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

int fsgd_reducer_take_step(fsgd_reducer_t *r, double scale, double l2, const float *theta, fsgd_sparse_t *out)
{
    FSGD_TRY(fsgd_sparse_reserve(out, r->n_touched));
    fsgd_keysort(r->touched, r->n_touched);
    for (size_t i = 0; i < r->n_touched; i++) {
        uint32_t k = r->touched[i];
        out->keys[i] = k;
        out->vals[i] = fsgd_adam_step_grad(r->acc[k], scale, l2, theta ? theta[k] : 0.0f);
        r->acc[k] = 0;
        r->seen[k] = 0;
    }
    out->n = r->n_touched;
    r->n_touched = 0;
    return FSGD_E_OK;
}

int fsgd_reducer_take(fsgd_reducer_t *r, double scale, fsgd_sparse_t *out)
{
    return fsgd_reducer_take_step(r, scale, 0, NULL, out);
}
