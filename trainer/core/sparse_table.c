/* The optimizer over touched keys (fsgd/sparse_table.h). */
#include "fsgd/sparse_table.h"

#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"

int fsgd_sparse_table_init(fsgd_sparse_table_t *t, size_t expect)
{
    memset(t, 0, sizeof *t);
    return fsgd_keyslots_init(&t->map, expect);
}

void fsgd_sparse_table_free(fsgd_sparse_table_t *t)
{
    if (!t)
        return;
    fsgd_keyslots_free(&t->map);
    free(t->at);
    memset(t, 0, sizeof *t);
}

int fsgd_sparse_table_slots(fsgd_sparse_table_t *t, fsgd_adam_t *a, const uint32_t *keys, size_t n,
                            const uint32_t **at)
{
    if (n > t->cap_at) {
        uint32_t *p = realloc(t->at, n * sizeof *p);
        if (!p)
            return FSGD_E_NOMEM;
        t->at = p;
        t->cap_at = n;
    }
    FSGD_TRY(fsgd_keyslots_map(&t->map, keys, n, t->at));
    if (t->map.n > a->dim) {
        uint64_t dim = a->dim ? a->dim : 1024;
        while (dim < t->map.n)
            dim *= 2;
        FSGD_TRY(fsgd_adam_grow(a, dim));
    }
    *at = t->at;
    return 0;
}
