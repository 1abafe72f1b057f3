/* The key -> slot table (keyslots.h, private to trainer/core). */
#include "keyslots.h"

#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/keysort.h"
#include "fsgd/prefetch.h"

/* Fibonacci hashing: a shard's local keys are dense runs and strides, which
 * the multiply spreads over the table's top bits. */
static inline size_t home(uint32_t key, unsigned bits)
{
    return (size_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> (64 - bits));
}

/* The entry of key, or the empty one where it would go. */
static inline size_t probe(const fsgd_keyslots_t *t, uint32_t key)
{
    const size_t mask = ((size_t)1 << t->bits) - 1;
    size_t h = home(key, t->bits);
    while (t->tab[h] && (uint32_t)(t->tab[h] >> 32) != key)
        h = (h + 1) & mask;
    return h;
}

static int resize(fsgd_keyslots_t *t, unsigned bits)
{
    uint64_t *tab = calloc((size_t)1 << bits, sizeof *tab);
    if (!tab)
        return FSGD_E_NOMEM;
    fsgd_keyslots_t grown = *t;
    grown.tab = tab;
    grown.bits = bits;
    for (uint32_t s = 0; s < t->n; s++)
        tab[probe(&grown, t->keys[s])] = (uint64_t)t->keys[s] << 32 | (s + 1u);
    free(t->tab);
    t->tab = tab;
    t->bits = bits;
    return 0;
}

int fsgd_keyslots_init(fsgd_keyslots_t *t, size_t expect)
{
    memset(t, 0, sizeof *t);
    unsigned bits = 4;
    while (bits < 32 && ((size_t)1 << bits) < 2 * expect)
        bits++;
    t->keys = malloc((expect ? expect : 1) * sizeof *t->keys);
    t->cap_keys = expect ? expect : 1;
    if (!t->keys || resize(t, bits) < 0) {
        fsgd_keyslots_free(t);
        return FSGD_E_NOMEM;
    }
    return 0;
}

void fsgd_keyslots_free(fsgd_keyslots_t *t)
{
    if (!t)
        return;
    free(t->tab);
    free(t->keys);
    memset(t, 0, sizeof *t);
}

uint32_t fsgd_keyslots_find(const fsgd_keyslots_t *t, uint32_t key)
{
    if (!t->tab)
        return FSGD_KEYSLOT_NONE;
    uint64_t e = t->tab[probe(t, key)];
    return e ? (uint32_t)e - 1 : FSGD_KEYSLOT_NONE;
}

/* Room for one more key: the slot list and a table at most half full. */
static int room_for_one(fsgd_keyslots_t *t)
{
    if (t->n >= (UINT32_C(1) << 31))
        return FSGD_E_RANGE;
    if (t->n == t->cap_keys) {
        size_t cap = 2 * t->cap_keys;
        uint32_t *k = realloc(t->keys, cap * sizeof *k);
        if (!k)
            return FSGD_E_NOMEM;
        t->keys = k;
        t->cap_keys = cap;
    }
    if (2 * ((size_t)t->n + 1) > ((size_t)1 << t->bits))
        FSGD_TRY(resize(t, t->bits + 1));
    return 0;
}

int fsgd_keyslots_map(fsgd_keyslots_t *t, const uint32_t *keys, size_t n, uint32_t *slots)
{
    for (size_t i = 0; i < n; i++) {
        if (i + FSGD_PREFETCH_AHEAD < n) /* every key a miss in a big table: overlap them */
            FSGD_PREFETCH(&t->tab[home(keys[i + FSGD_PREFETCH_AHEAD], t->bits)]);
        size_t h = probe(t, keys[i]);
        if (t->tab[h]) {
            slots[i] = (uint32_t)t->tab[h] - 1;
            continue;
        }
        const unsigned bits = t->bits;
        FSGD_TRY(room_for_one(t));
        if (t->bits != bits)
            h = probe(t, keys[i]); /* the table grew */
        uint32_t s = t->n++;
        t->keys[s] = keys[i];
        t->tab[h] = (uint64_t)keys[i] << 32 | (s + 1u);
        slots[i] = s;
    }
    return 0;
}

int fsgd_keyslots_sorted(const fsgd_keyslots_t *t, uint32_t *keys_out, uint32_t *slots_out)
{
    memcpy(keys_out, t->keys, (size_t)t->n * sizeof *keys_out);
    fsgd_keysort(keys_out, t->n);
    for (uint32_t i = 0; i < t->n; i++) {
        if (i + FSGD_PREFETCH_AHEAD < t->n)
            FSGD_PREFETCH(&t->tab[home(keys_out[i + FSGD_PREFETCH_AHEAD], t->bits)]);
        slots_out[i] = (uint32_t)t->tab[probe(t, keys_out[i])] - 1;
    }
    return 0;
}
