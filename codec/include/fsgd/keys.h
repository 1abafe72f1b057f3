/* A lossless, compact coding of a strictly increasing list of uint32 keys
 * (a sparse vector's index set), after FastSGD's GK-Encoder: bit-level
 * delta keys with 2^l length classes chosen per block to minimise the total
 * bits exactly (fsgd_fastsgd_optimal_lengths). Used by the model deltas of
 * the Kafka pipeline (trainer/KAFKA_FORMAT.md); no dependency on Kafka.
 *
 * Block layout (all integers little-endian):
 *   0   u32  count n (<= dim)
 *   4   u32  stream_bytes
 *   8   u8   l (0..5): 2^l length classes
 *   9   3    reserved, 0
 *   12  2^l  lens[i], nondecreasing, each <= 32
 *   12+2^l   stream_bytes of bit stream, LSB-first within each byte
 * Key i is coded as the l-bit class index c, then d_i in lens[c] bits, where
 * d_0 = k_0 and d_i = k_i - k_{i-1} - 1 (so a run of consecutive keys costs
 * l bits per key). stream_bytes = ceil(total bits / 8); the padding bits of
 * the last byte are zero.
 *
 * Pure functions, thread safe, never allocate. */
#ifndef FSGD_KEYS_H
#define FSGD_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define FSGD_KEYS_HEADER 12

/* Largest block for n keys. */
size_t fsgd_keys_bound(size_t n);

/* Encodes keys[0..n) (strictly increasing; checked) into out (cap bytes,
 * fsgd_keys_bound(n) always suffices). *len gets the block size.
 * Returns 0, FSGD_E_ARG (keys not increasing) or FSGD_E_NOSPACE. */
int fsgd_keys_encode(const uint32_t *keys, size_t n, uint8_t *out, size_t cap, size_t *len, char *err,
                     size_t errsz);

/* Reads a block's header at buf: *n gets the key count and *size the block
 * size, both checked against len, dim and each other (so a caller may
 * allocate *n keys safely: n <= dim). Returns 0 or FSGD_E_TRUNCATED/FORMAT/RANGE. */
int fsgd_keys_peek(const uint8_t *buf, size_t len, uint64_t dim, uint32_t *n, size_t *size, char *err,
                   size_t errsz);

/* Decodes the block at buf into keys (room for the peeked count, cap
 * entries); *n gets the count. Every key is checked < dim and strictly
 * increasing; padding bits must be zero and the stream must be used exactly.
 * The block's size is fsgd_keys_peek's. Errors name the byte offset. */
int fsgd_keys_decode(const uint8_t *buf, size_t len, uint64_t dim, uint32_t *keys, size_t cap, uint32_t *n,
                     char *err, size_t errsz);

#endif
