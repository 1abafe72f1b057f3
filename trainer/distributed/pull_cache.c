/* Key caching for working-set pulls (pull_cache.h). */
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL /* header-only use, as data/delim.c */
#include <xxhash.h>

#include "fsgd/error.h"
#include "pull_cache.h"

uint64_t pull_list_id(const uint8_t *block, size_t len)
{
    uint64_t id = XXH64(block, len, 0);
    return id ? id : 1;
}

static size_t home(uint64_t id, size_t cap)
{
    return (size_t)(id * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
}

const pull_cache_slot_t *pull_cache_find(const pull_cache_t *c, uint64_t id)
{
    if (!c->cap || !id)
        return NULL;
    for (size_t h = home(id, c->cap);; h = (h + 1) & (c->cap - 1)) {
        if (c->slots[h].id == id)
            return &c->slots[h];
        if (!c->slots[h].id)
            return NULL;
    }
}

/* Twice the slots, every list moved to its new home. */
static int cache_grow(pull_cache_t *c)
{
    size_t cap = c->cap ? 2 * c->cap : 256;
    pull_cache_slot_t *s = calloc(cap, sizeof *s);
    if (!s)
        return FSGD_E_NOMEM;
    for (size_t i = 0; i < c->cap; i++) {
        if (!c->slots[i].id)
            continue;
        size_t h = home(c->slots[i].id, cap);
        while (s[h].id)
            h = (h + 1) & (cap - 1);
        s[h] = c->slots[i];
    }
    free(c->slots);
    c->slots = s;
    c->cap = cap;
    return 0;
}

int pull_cache_put(pull_cache_t *c, uint64_t id, uint32_t n, uint32_t crc, const uint8_t *block, size_t len)
{
    if (!id)
        return 0;
    const pull_cache_slot_t *have = pull_cache_find(c, id);
    if (have)
        return have->n == n && have->crc == crc; /* another list under the same id: this one is not kept */
    if (c->bytes + len + sizeof(pull_cache_slot_t) > c->budget || len > UINT32_MAX)
        return 0;
    if (2 * (c->used + 1) > c->cap && cache_grow(c) < 0)
        return FSGD_E_NOMEM;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return FSGD_E_NOMEM;
    memcpy(copy, block, len);
    size_t h = home(id, c->cap);
    while (c->slots[h].id)
        h = (h + 1) & (c->cap - 1);
    c->slots[h] = (pull_cache_slot_t){id, n, crc, (uint32_t)len, copy};
    c->used++;
    c->bytes += len + sizeof(pull_cache_slot_t);
    return 1;
}

void pull_cache_free(pull_cache_t *c)
{
    for (size_t i = 0; i < c->cap; i++)
        free(c->slots[i].block);
    free(c->slots);
    c->slots = NULL;
    c->cap = c->used = c->bytes = 0;
}

int pull_known_has(const pull_known_t *k, uint64_t id)
{
    if (!k->cap || !id)
        return 0;
    for (size_t h = home(id, k->cap);; h = (h + 1) & (k->cap - 1)) {
        if (k->slots[h] == id)
            return 1;
        if (!k->slots[h])
            return 0;
    }
}

static void known_place(uint64_t *slots, size_t cap, uint64_t id)
{
    size_t h = home(id, cap);
    while (slots[h])
        h = (h + 1) & (cap - 1);
    slots[h] = id;
}

int pull_known_add(pull_known_t *k, uint64_t id)
{
    if (!id || k->n >= PULL_KNOWN_MAX || pull_known_has(k, id))
        return 0;
    if (2 * (k->n + 1) > k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 256;
        uint64_t *s = calloc(cap, sizeof *s);
        if (!s)
            return FSGD_E_NOMEM;
        for (size_t i = 0; i < k->cap; i++)
            if (k->slots[i])
                known_place(s, cap, k->slots[i]);
        free(k->slots);
        k->slots = s;
        k->cap = cap;
    }
    known_place(k->slots, k->cap, id);
    k->n++;
    return 0;
}

void pull_known_remove(pull_known_t *k, uint64_t id)
{
    if (!pull_known_has(k, id))
        return;
    size_t m = k->cap - 1, h = home(id, k->cap);
    while (k->slots[h] != id)
        h = (h + 1) & m;
    /* backward shift: every later member of the run that may move up does */
    for (size_t j = (h + 1) & m; k->slots[j]; j = (j + 1) & m) {
        size_t want = home(k->slots[j], k->cap);
        /* j's entry may fill h when h lies cyclically in [want, j) */
        if (((j - want) & m) >= ((j - h) & m)) {
            k->slots[h] = k->slots[j];
            h = j;
        }
    }
    k->slots[h] = 0;
    k->n--;
}

void pull_known_free(pull_known_t *k)
{
    free(k->slots);
    k->slots = NULL;
    k->cap = k->n = 0;
}
