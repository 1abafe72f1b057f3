/* An optimizer over the keys ever touched, in a key space far larger: θ and
 * Adam's state (fsgd/adam.h) indexed by slot, a key's slot given the first
 * time a step touches it (fsgd/keyslots.h), the arrays grown by doubling.
 * An aggregator shard of a 2^30-weight model whose data touches a few
 * million keys holds those keys, not 2^28 of them (trainer/distributed,
 * job key table). Keys are mapped at the edges: a step's reduced keys
 * before the update (fsgd/step.h), a pull's keys, a snapshot's and a
 * checkpoint's lists. Adam only (FTRL's and efsign's updates index θ by
 * key). Not thread safe. */
#ifndef FSGD_SPARSE_TABLE_H
#define FSGD_SPARSE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/adam.h"
#include "fsgd/keyslots.h"

typedef struct fsgd_sparse_table {
    fsgd_keyslots_t map;
    uint32_t *at; /* the slots of the keys last mapped */
    size_t cap_at;
} fsgd_sparse_table_t;

/* An empty table with room for about expect keys before it grows. The
 * caller makes the optimizer it indexes (fsgd_adam_init or
 * fsgd_adam_init_counted, dim = expect): its dim is the slots it has room
 * for. Returns 0 or FSGD_E_NOMEM. */
int fsgd_sparse_table_init(fsgd_sparse_table_t *t, size_t expect);

void fsgd_sparse_table_free(fsgd_sparse_table_t *t);

/* The slots of keys[0, n) into *at (owned by t, valid until the next call),
 * new keys given new slots, a grown to hold them. Returns 0, FSGD_E_NOMEM
 * or FSGD_E_RANGE (2^31 keys). */
int fsgd_sparse_table_slots(fsgd_sparse_table_t *t, fsgd_adam_t *a, const uint32_t *keys, size_t n,
                            const uint32_t **at);

/* θ of key: 0 for a key never touched (every weight starts at 0). */
static inline float fsgd_sparse_table_theta(const fsgd_sparse_table_t *t, const fsgd_adam_t *a, uint32_t key)
{
    uint32_t s = fsgd_keyslots_find(&t->map, key);
    return s == FSGD_KEYSLOT_NONE ? 0.0f : a->theta[s];
}

#endif
