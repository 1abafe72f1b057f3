#include "fsgd/bigalloc.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_SZ ((size_t)2 << 20)

/* The mapping behind an array, in the 64 bytes just before it, so that
 * fsgd_big_free needs no size. */
typedef struct big_head {
    void *base;
    size_t len;
} big_head_t;

void *fsgd_big_calloc(size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - 2 * HUGE_SZ) / size)
        return NULL;
    size_t bytes = n * size;
    if (bytes == 0)
        bytes = 1;
    /* one huge page extra: room to align and for the head, which then sits
     * in the 4 KiB page before the aligned start */
    size_t len = (bytes + HUGE_SZ - 1) / HUGE_SZ * HUGE_SZ + HUGE_SZ;
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    uintptr_t p = ((uintptr_t)base + 64 + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1);
#ifdef MADV_HUGEPAGE
    /* advice only: without THP the pages are ordinary ones */
    (void)madvise((void *)p, len - (p - (uintptr_t)base), MADV_HUGEPAGE);
#endif
    big_head_t *h = (big_head_t *)(p - 64);
    h->base = base;
    h->len = len;
    return (void *)p;
}

void fsgd_big_free(void *p)
{
    if (!p)
        return;
    const big_head_t *h = (const big_head_t *)((uintptr_t)p - 64);
    munmap(h->base, h->len);
}
