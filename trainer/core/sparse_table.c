/* The optimizer over touched keys (fsgd/adam.h, "A sparse table"). */
#include "sparse_table.h"

#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"

fsgd_sparse_table_t *fsgd_sparse_table_new(size_t expect)
{
    fsgd_sparse_table_t *t = calloc(1, sizeof *t);
    if (t && fsgd_keyslots_init(&t->map, expect) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

void fsgd_sparse_table_destroy(fsgd_sparse_table_t *t)
{
    if (!t)
        return;
    fsgd_keyslots_free(&t->map);
    free(t->at);
    free(t);
}

size_t fsgd_sparse_table_size(const fsgd_sparse_table_t *t)
{
    return t->map.n;
}

float fsgd_sparse_table_theta(const fsgd_sparse_table_t *t, const fsgd_adam_t *a, uint32_t key)
{
    uint32_t s = fsgd_keyslots_find(&t->map, key);
    return s == FSGD_KEYSLOT_NONE ? 0.0f : a->theta[s];
}

const uint32_t *fsgd_sparse_table_keys(const fsgd_sparse_table_t *t)
{
    return t->map.keys;
}

int fsgd_sparse_table_sorted(const fsgd_sparse_table_t *t, uint32_t *keys, uint32_t *slots)
{
    return fsgd_keyslots_sorted(&t->map, keys, slots);
}

/* Room for the arrays of a's optimizer up to the slots t holds: doubling. */
static int grow_to_slots(const fsgd_sparse_table_t *t, fsgd_adam_t *a)
{
    if (t->map.n <= a->dim)
        return 0;
    uint64_t dim = a->dim ? a->dim : 1024;
    while (dim < t->map.n)
        dim *= 2;
    return fsgd_adam_grow(a, dim);
}

int sparse_table_slots(fsgd_sparse_table_t *t, fsgd_adam_t *a, const uint32_t *keys, size_t n, const uint32_t **at)
{
    if (n > t->cap_at) {
        uint32_t *p = realloc(t->at, n * sizeof *p);
        if (!p)
            return FSGD_E_NOMEM;
        t->at = p;
        t->cap_at = n;
    }
    FSGD_TRY(fsgd_keyslots_map(&t->map, keys, n, t->at));
    FSGD_TRY(grow_to_slots(t, a));
    *at = t->at;
    return 0;
}

int fsgd_sparse_table_load(fsgd_sparse_table_t *t, fsgd_adam_t *a, const uint32_t *keys, size_t n, size_t *bad)
{
    fsgd_keyslots_free(&t->map);
    FSGD_TRY(fsgd_keyslots_init(&t->map, n));
    for (size_t i = 0; i < n; i++) {
        uint32_t slot;
        FSGD_TRY(fsgd_keyslots_map(&t->map, &keys[i], 1, &slot));
        if (slot != i) {
            *bad = i;
            return FSGD_E_FORMAT;
        }
    }
    return grow_to_slots(t, a);
}
