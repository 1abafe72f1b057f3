/* Mapping a large array's pages on a helper thread (train_pages.h). */
#include "train_pages.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

int fsgd_pages_map(void *p, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (hi <= lo)
        return 1;
    return madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) == 0;
#else
    (void)p;
    (void)bytes;
    return 0;
#endif
}

static void *map_main(void *arg)
{
    fsgd_pages_t *m = arg;
    m->mapped = fsgd_pages_map(m->p, m->bytes);
    return NULL;
}

void fsgd_pages_start(fsgd_pages_t *m, void *p, size_t bytes)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    m->bytes = bytes;
    m->running = p && bytes && pthread_create(&m->tid, NULL, map_main, m) == 0;
}

void fsgd_pages_join(fsgd_pages_t *m)
{
    if (m->running)
        pthread_join(m->tid, NULL);
    int mapped = m->mapped;
    memset(m, 0, sizeof *m);
    m->mapped = mapped;
}
