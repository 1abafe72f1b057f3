/* Prefetching for loops over sorted sparse keys into dim-sized arrays: at
 * 2^22 weights and more every key is a cache (and TLB) miss, and the loop
 * knows its next keys, so it asks for key i + FSGD_PREFETCH_AHEAD while it
 * works on key i and the misses overlap instead of queueing. */
#ifndef FSGD_PREFETCH_H
#define FSGD_PREFETCH_H

/* Far enough ahead to cover a memory latency at a few ns a key of work. */
#define FSGD_PREFETCH_AHEAD 16

/* p will be read (and maybe written) soon; a hint, never a fault. */
#define FSGD_PREFETCH(p) __builtin_prefetch((p), 1, 1)

#endif
