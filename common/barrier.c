#include "fsgd/barrier.h"

#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

void fsgd_barrier_init(fsgd_barrier_t *b, unsigned parties)
{
    atomic_init(&b->arrived, 0);
    atomic_init(&b->gen, 0);
    atomic_init(&b->parties, parties);
    atomic_init(&b->sleepers, 0);
}

void fsgd_barrier_set_parties(fsgd_barrier_t *b, unsigned parties)
{
    atomic_store(&b->parties, parties);
}

void fsgd_barrier_wait(fsgd_barrier_t *b)
{
    unsigned gen = atomic_load_explicit(&b->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) + 1 ==
        atomic_load_explicit(&b->parties, memory_order_acquire)) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->gen, 1, memory_order_acq_rel);
        if (atomic_load_explicit(&b->sleepers, memory_order_acquire))
            syscall(SYS_futex, &b->gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
        return;
    }
    for (int spins = 0; spins < 1000; spins++) {
        if (atomic_load_explicit(&b->gen, memory_order_acquire) != gen)
            return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_acq_rel);
    /* FUTEX_WAIT returns at once if gen already moved on, so no wake is lost. */
    while (atomic_load_explicit(&b->gen, memory_order_acquire) == gen)
        syscall(SYS_futex, &b->gen, FUTEX_WAIT_PRIVATE, gen, NULL, NULL, 0);
    atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_acq_rel);
}
