/* A sparse vector: strictly increasing uint32 keys with float values.
 * This is what a gradient, a model delta and a decoded message are.
 * Plain data: the struct owns keys/vals (malloc'd), n <= cap. */
#ifndef FSGD_SPARSE_H
#define FSGD_SPARSE_H

#include <stddef.h>
#include <stdint.h>

typedef struct fsgd_sparse {
    uint32_t *keys;
    float *vals;
    size_t n;
    size_t cap;
} fsgd_sparse_t;

/* Makes room for at least cap entries, keeping the first n. Returns 0 or
 * FSGD_E_NOMEM (the vector is unchanged then). */
int fsgd_sparse_reserve(fsgd_sparse_t *s, size_t cap);

/* Frees keys and vals and zeroes the struct. NULL is a no-op. */
void fsgd_sparse_free(fsgd_sparse_t *s);

/* Copies src into dst (growing dst). Returns 0 or FSGD_E_NOMEM. */
int fsgd_sparse_copy(fsgd_sparse_t *dst, const fsgd_sparse_t *src);

/* The first index i of keys[0, n) (increasing) with keys[i] >= key; n when
 * none (binary search). */
size_t fsgd_keys_lower_bound(const uint32_t *keys, size_t n, uint64_t key);

#endif
