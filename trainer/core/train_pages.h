/* Private to trainer/core: mapping a large array's pages on a thread of its
 * own. θ and Adam's key state (67 and 168 MB at 2^24 keys) are touched at
 * random keys by the first step, so all their pages are faulted in before
 * it can finish; on a busy machine that took 0.3 s for the key state and
 * 0.24 s for θ (0.02 and 0.01 s when the kernel has pages at hand). A
 * helper maps them while the calling thread does other work or maps the
 * other half itself. MADV_POPULATE_WRITE maps a page as a write would,
 * without changing a byte, so it may run while others read and write the
 * array. */
#ifndef FSGD_TRAIN_PAGES_H
#define FSGD_TRAIN_PAGES_H

#include <pthread.h>
#include <stddef.h>

typedef struct fsgd_pages {
    void *p;
    size_t bytes;
    int running;  /* a helper thread is mapping [p, p + bytes) */
    int mapped;   /* the mapping succeeded (else the pages fault at first use) */
    pthread_t tid;
} fsgd_pages_t;

/* Maps the whole pages inside [p, p + bytes) for writing, on this thread;
 * 1 when the system can (Linux 5.14), 0 when it cannot (nothing changed). */
int fsgd_pages_map(void *p, size_t bytes);
/* Starts mapping [p, p + bytes) on a helper thread; without one, nothing
 * is done (the pages fault at first use, as without this). */
void fsgd_pages_start(fsgd_pages_t *m, void *p, size_t bytes);
/* Waits for the helper, if any; then m is zeroed but for mapped. A zeroed m
 * is a no-op. Must come before the array is freed. */
void fsgd_pages_join(fsgd_pages_t *m);

#endif
