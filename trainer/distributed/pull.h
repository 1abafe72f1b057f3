/* Private to trainer/distributed: the messages of working-set workers (job
 * key replica working_set; trainer/KAFKA_FORMAT.md, "Working-set pulls").
 *
 * Before it computes step s, a worker sends the keys its batch uses (kind
 * FSGD_KMSG_PULL on NAME.grads, framed with its id and step s) and the
 * aggregator answers with their values (kind FSGD_KMSG_VALUES on NAME.pull,
 * partition fsgd_pull_partition(worker)). A worker's downlink is then its
 * own keys' values, not the union of every worker's keys.
 *
 * PULL body (little-endian):
 *   0   u64  need: the oldest model step the values may come from (s - 1 - lag)
 *   8        the keys, strictly increasing, as a fsgd/keys.h block
 * or, with frame flag FSGD_KFLAG_BY_ID, a list the shard keeps named
 * (pull_cache.h: key caching):
 *   0   u64  need
 *   8   u64  id: pull_list_id of the key block
 *   16  u32  n: its keys
 *   20  u32  keys_crc: CRC32C of the key block
 * VALUES body:
 *   0   u32  worker: the id of the worker that asked
 *   4   u64  at: the model step the values were read at (>= need)
 *   12  u32  n: keys answered (the request's count)
 *   16  u32  keys_crc: CRC32C of the request's key block, binding the
 *            answer to the keys it answers
 *   20  u8   encoding: 0 float32, 1 binary16 (fsgd/half.h: a lossy downlink)
 *   21  u8   flags: FSGD_VALUES_KEPT, FSGD_VALUES_MISS
 *   22  2    reserved, 0
 *   24  n values (4 or 2 bytes each), in the request's key order */
#ifndef FSGD_DIST_PULL_H
#define FSGD_DIST_PULL_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/dist.h"
#include "wire.h"

/* Partitions of NAME.pull: workers share one when there are more of them
 * (each drops answers to others by the worker field). */
#define FSGD_PULL_PARTITIONS FSGD_DIST_PULL_PARTITIONS

#define FSGD_PULL_HEADER 8
#define FSGD_PULL_BY_ID_LEN 24
#define FSGD_VALUES_HEADER 24
/* VALUES flags: the shard keeps the request's key list (name it by id from
 * now on); the request named a list the shard does not hold (n is 0, no
 * values: send the keys). */
#define FSGD_VALUES_KEPT 1u
#define FSGD_VALUES_MISS 2u

static inline int32_t fsgd_pull_partition(uint32_t worker)
{
    return (int32_t)(worker % FSGD_PULL_PARTITIONS);
}

/* Appends a PULL body for keys[0..n) (strictly increasing, < dim). */
int fsgd_pull_put(fsgd_wire_buf_t *b, uint64_t need, const uint32_t *keys, size_t n, char *err, size_t errsz);

/* A PULL body as read: the key block is decoded by fsgd_keys_decode into
 * room for n keys. */
typedef struct fsgd_pull {
    uint64_t need;
    const uint8_t *block; /* borrowed from the body */
    size_t block_len;
    uint32_t n;
} fsgd_pull_t;

/* Reads a PULL body, its key block's count checked against dim.
 * FSGD_E_TRUNCATED/FORMAT/RANGE name the byte. */
int fsgd_pull_get(const uint8_t *body, size_t len, uint64_t dim, fsgd_pull_t *out, char *err, size_t errsz);

/* A PULL body that names its key list (frame flag FSGD_KFLAG_BY_ID). */
typedef struct fsgd_pull_ref {
    uint64_t need, id;
    uint32_t n, keys_crc;
} fsgd_pull_ref_t;

/* Appends one. FSGD_E_NOMEM or 0. */
int fsgd_pull_ref_put(fsgd_wire_buf_t *b, const fsgd_pull_ref_t *r);
/* Reads one: exactly FSGD_PULL_BY_ID_LEN bytes, n <= dim, id not 0. */
int fsgd_pull_ref_get(const uint8_t *body, size_t len, uint64_t dim, fsgd_pull_ref_t *out, char *err, size_t errsz);

/* Appends a VALUES body answering keys_crc's request with vals[0..n), as
 * halves when half is set (every value must fit: fsgd_half_fits), with
 * flags (FSGD_VALUES_*; a miss has n 0). */
int fsgd_values_put(fsgd_wire_buf_t *b, uint32_t worker, uint64_t at, uint32_t keys_crc, const float *vals,
                    uint32_t n, int half, unsigned flags);

/* A VALUES body as read: vals points at its n values (read them with
 * fsgd_values_at). */
typedef struct fsgd_values {
    uint32_t worker;
    uint64_t at;
    uint32_t n, keys_crc;
    int half;
    unsigned flags; /* FSGD_VALUES_* */
    const uint8_t *vals; /* borrowed from the body */
} fsgd_values_t;

/* Value i of an answer read by fsgd_values_get. */
float fsgd_values_at(const fsgd_values_t *v, uint32_t i);

/* Reads a VALUES body; the length must be exact and every value finite; a
 * miss holds no values and is not also kept. */
int fsgd_values_get(const uint8_t *body, size_t len, fsgd_values_t *out, char *err, size_t errsz);

#endif
