/* Sorting uint32 keys (gradient key sets) in place. */
#ifndef FSGD_KEYSORT_H
#define FSGD_KEYSORT_H

#include <stddef.h>
#include <stdint.h>

/* Sorts keys ascending. LSD radix sort for large n (O(n), allocates a scratch
 * buffer and falls back to insertion/qsort if that fails), insertion sort for
 * small n. */
void fsgd_keysort(uint32_t *keys, size_t n);

#endif
