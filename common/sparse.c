#include "fsgd/sparse.h"

#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"

int fsgd_sparse_reserve(fsgd_sparse_t *s, size_t cap)
{
    if (cap <= s->cap)
        return FSGD_E_OK;
    size_t grow = s->cap ? s->cap * 2 : 64;
    if (grow < cap)
        grow = cap;
    uint32_t *k = realloc(s->keys, grow * sizeof *k);
    if (!k)
        return FSGD_E_NOMEM;
    s->keys = k;
    float *v = realloc(s->vals, grow * sizeof *v);
    if (!v)
        return FSGD_E_NOMEM;
    s->vals = v;
    s->cap = grow;
    return FSGD_E_OK;
}

void fsgd_sparse_free(fsgd_sparse_t *s)
{
    if (!s)
        return;
    free(s->keys);
    free(s->vals);
    memset(s, 0, sizeof *s);
}

int fsgd_sparse_copy(fsgd_sparse_t *dst, const fsgd_sparse_t *src)
{
    FSGD_TRY(fsgd_sparse_reserve(dst, src->n));
    if (src->n) {
        memcpy(dst->keys, src->keys, src->n * sizeof *src->keys);
        memcpy(dst->vals, src->vals, src->n * sizeof *src->vals);
    }
    dst->n = src->n;
    return FSGD_E_OK;
}

size_t fsgd_keys_lower_bound(const uint32_t *keys, size_t n, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
