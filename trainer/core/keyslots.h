/* A key -> slot table: every new key gets the next slot (0, 1, 2, ...), so
 * arrays indexed by slot hold only the keys ever seen. An aggregator shard's
 * sparse table keeps its θ and optimizer state so, for a key space far
 * larger than the keys its data touches (a 2^30-weight model of a few
 * million distinct features).
 *
 * Open addressing with linear probing, at most half full, doubled as it
 * fills. Plain data, owned by the caller through init/free; not thread safe.
 * Private to trainer/core (the sparse table, fsgd/adam.h, is its user). */
#ifndef FSGD_CORE_KEYSLOTS_H
#define FSGD_CORE_KEYSLOTS_H

#include <stddef.h>
#include <stdint.h>

/* No slot: the key was never seen. */
#define FSGD_KEYSLOT_NONE UINT32_MAX

typedef struct fsgd_keyslots {
    uint64_t *tab;  /* key << 32 | (slot + 1); 0 is empty (so any key may be used) */
    unsigned bits;  /* tab has 2^bits entries */
    uint32_t n;     /* slots given: 0 to n - 1 */
    uint32_t *keys; /* keys[slot]: the key of each slot, in the order they came */
    size_t cap_keys;
} fsgd_keyslots_t;

/* An empty table with room for about expect keys before it grows. Returns 0
 * or FSGD_E_NOMEM. */
int fsgd_keyslots_init(fsgd_keyslots_t *t, size_t expect);

/* Frees the table and zeroes it. NULL is a no-op. */
void fsgd_keyslots_free(fsgd_keyslots_t *t);

/* The slot of key, or FSGD_KEYSLOT_NONE. */
uint32_t fsgd_keyslots_find(const fsgd_keyslots_t *t, uint32_t key);

/* slots[i] = the slot of keys[i], a new one (the next, in input order) for
 * each key not seen before. Returns 0, FSGD_E_NOMEM or FSGD_E_RANGE (more
 * than 2^31 slots); on error the keys before the failing one are in. */
int fsgd_keyslots_map(fsgd_keyslots_t *t, const uint32_t *keys, size_t n, uint32_t *slots);

/* Every key in increasing order into keys_out and its slot into slots_out
 * (t->n of each, caller's arrays). Returns 0 or FSGD_E_NOMEM. */
int fsgd_keyslots_sorted(const fsgd_keyslots_t *t, uint32_t *keys_out, uint32_t *slots_out);

#endif
