/* The sparse table's insides (fsgd/adam.h declares it opaque): its key ->
 * slot map and the slots of the keys it mapped last. Private to
 * trainer/core: sparse_table.c, and step.c, which maps a step's keys. */
#ifndef FSGD_CORE_SPARSE_TABLE_H
#define FSGD_CORE_SPARSE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/adam.h"
#include "keyslots.h"

struct fsgd_sparse_table {
    fsgd_keyslots_t map;
    uint32_t *at; /* the slots of the keys last mapped */
    size_t cap_at;
};

/* Grows θ and the optimizer state to dim keys, the new ones zero (adam.c:
 * the table's arrays as keys come). Returns 0 or FSGD_E_NOMEM (the arrays
 * keep their values then). */
int fsgd_adam_grow(fsgd_adam_t *a, uint64_t dim);

/* The slots of keys[0, n) into *at (owned by t, valid until the next call),
 * new keys given new slots, a grown to hold them. Returns 0, FSGD_E_NOMEM
 * or FSGD_E_RANGE (2^31 keys). */
int sparse_table_slots(fsgd_sparse_table_t *t, fsgd_adam_t *a, const uint32_t *keys, size_t n, const uint32_t **at);

#endif
