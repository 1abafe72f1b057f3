#ifndef FSGD_BIGALLOC_H
#define FSGD_BIGALLOC_H
/* Zeroed arrays of model size (θ, optimizer state, gradient accumulators),
 * read and written at random keys. They are 2 MiB aligned and advised as
 * transparent huge pages (MADV_HUGEPAGE, for THP mode "madvise"): at 2^24
 * keys a 4 KiB page per random access misses the TLB almost every time, and
 * faulting the array in costs one fault per 2 MiB instead of per 4 KiB.
 * Where huge pages are not available the memory is plain zeroed pages. */
#include <stddef.h>

/* n zeroed elements of size bytes (at least one byte), or NULL. */
void *fsgd_big_calloc(size_t n, size_t size);

/* Frees what fsgd_big_calloc returned; NULL is a no-op. */
void fsgd_big_free(void *p);

#endif
