/* Lower-level pieces of the FastSGD codec, exported for tests, benchmarks
 * and anyone who wants to check the codec's arithmetic independently.
 * See codec/FORMAT.md for how a message uses them. */
#ifndef FSGD_FASTSGD_H
#define FSGD_FASTSGD_H

#include <stdint.h>

/* The paper's 2^l key lengths for a largest delta of M bits:
 * lens[i] = ceil((i+1)*M/2^l), i < 2^l. */
void fsgd_fastsgd_paper_lengths(int M, int l, uint8_t *lens);

/* Chooses 2^l lengths (nondecreasing, last = the largest bit length present)
 * minimising sum_j hist[j]*(l + smallest lens[i] >= j) exactly by dynamic
 * programming over hist[0..32] (count of deltas with bit length j). Returns
 * the key bits, l included. */
uint64_t fsgd_fastsgd_optimal_lengths(const uint64_t hist[33], int l, uint8_t *lens);

/* Key bits for a histogram under given lengths (l + length per key). */
uint64_t fsgd_fastsgd_key_bits(const uint64_t hist[33], int l, const uint8_t *lens);

#endif
