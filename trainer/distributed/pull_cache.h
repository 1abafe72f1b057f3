/* Private to trainer/distributed: key caching for working-set pulls (the
 * Parameter Server, OSDI'14, "key caching"). A worker's batch is named by
 * its ranges of NAME.data, which come round again every epoch, so its pull
 * to a shard repeats the same key list each epoch. A shard keeps the key
 * lists it was sent (pull_cache_t) and says so in its answer; the worker
 * remembers which lists each shard keeps (pull_known_t) and names such a
 * list by its id, 24 bytes in place of ~1.6 bytes a key. A shard that does
 * not hold the list (restarted, or full) answers "miss" and the worker
 * sends the keys (trainer/KAFKA_FORMAT.md, "Working-set workers"). */
#ifndef FSGD_DIST_PULL_CACHE_H
#define FSGD_DIST_PULL_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* A key list's id: XXH64 of its key block (fsgd/keys.h), never 0. Lists
 * are told apart by id, count and CRC32C together. */
uint64_t pull_list_id(const uint8_t *block, size_t len);

typedef struct pull_cache_slot {
    uint64_t id; /* 0: empty */
    uint32_t n, crc, len;
    uint8_t *block;
} pull_cache_slot_t;

/* The shard's lists: an open-addressing table of key blocks, up to budget
 * bytes. Once full it keeps what it has: each list comes round once an
 * epoch, so making room by evicting the oldest would evict every list
 * before it is named again. */
typedef struct pull_cache {
    pull_cache_slot_t *slots;
    size_t cap, used; /* slots (a power of two), lists held */
    size_t bytes, budget;
} pull_cache_t;

/* Keeps a copy of block (n keys, CRC32C crc) under id. 1 when the cache
 * holds it (now or before), 0 when full, FSGD_E_NOMEM. */
int pull_cache_put(pull_cache_t *c, uint64_t id, uint32_t n, uint32_t crc, const uint8_t *block, size_t len);
/* The list under id, or NULL. */
const pull_cache_slot_t *pull_cache_find(const pull_cache_t *c, uint64_t id);
void pull_cache_free(pull_cache_t *c);

/* The worker's side: the ids of the lists one shard said it keeps, at
 * most PULL_KNOWN_MAX (past that a list is sent as keys; a shard keeps
 * fewer: 512 MiB of lists of thousands of keys). */
#define PULL_KNOWN_MAX ((size_t)1 << 20)
typedef struct pull_known {
    uint64_t *slots; /* 0: empty */
    size_t cap, n;
} pull_known_t;

/* 0, or FSGD_E_NOMEM (the set unchanged). */
int pull_known_add(pull_known_t *k, uint64_t id);
int pull_known_has(const pull_known_t *k, uint64_t id);
void pull_known_remove(pull_known_t *k, uint64_t id);
void pull_known_free(pull_known_t *k);

#endif
