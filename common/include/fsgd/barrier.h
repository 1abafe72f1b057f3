/* A spin-then-futex barrier for threads that meet many times a second: a
 * step's rounds last tens of microseconds, where a pthread barrier's
 * sleep/wake costs as much as the work; waiters spin briefly and only then
 * sleep on a futex, so an oversubscribed or idle machine neither burns a
 * core nor oversleeps. Linux only (futex). */
#ifndef FSGD_BARRIER_H
#define FSGD_BARRIER_H

#include <stdatomic.h>

/* Transparent so that it can sit inside its owner's struct; a zeroed one
 * with parties set (fsgd_barrier_init) is ready. No destroy: it owns nothing. */
typedef struct fsgd_barrier {
    atomic_uint arrived;
    atomic_uint gen;
    atomic_uint parties;
    atomic_uint sleepers;
} fsgd_barrier_t;

/* Sets the number of threads that must arrive before any leaves (>= 1).
 * Before the threads start only. */
void fsgd_barrier_init(fsgd_barrier_t *b, unsigned parties);

/* Lowers the parties to the threads that did start (some failed to), so
 * that those can be released; before any of them waits. */
void fsgd_barrier_set_parties(fsgd_barrier_t *b, unsigned parties);

/* Waits until all parties have called it; then all return and the barrier
 * is ready for the next round. Thread safe (that is its use). */
void fsgd_barrier_wait(fsgd_barrier_t *b);

#endif
