/* Transparent huge pages (fsgd/hugepages.h). */
#include "fsgd/hugepages.h"

#include <stdint.h>
#include <sys/mman.h>

void fsgd_hugepages_advise(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (!p || bytes < FSGD_HUGEPAGES_MIN)
        return;
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#else
    (void)p;
    (void)bytes;
#endif
}
