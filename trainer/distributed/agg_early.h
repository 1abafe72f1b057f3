/* Gradient frames of steps after the open one, held until their step opens
 * (bounded staleness; agg_early.c). Private to trainer/distributed/agg_*.c
 * and aggregator.c. */
#ifndef FSGD_DIST_AGG_EARLY_H
#define FSGD_DIST_AGG_EARLY_H

#include <stddef.h>
#include <stdint.h>

#include "agg_env.h"
#include "wire.h"

typedef struct agg_early {
    uint64_t step;
    uint32_t sender, chunk;
    int64_t offset;
    uint8_t *bytes;
    size_t len;
} agg_early_t;

/* The held frames, in arrival order, and their bytes. */
typedef struct agg_early_set {
    agg_early_t *held;
    size_t n, cap, bytes;
} agg_early_set_t;

/* Holds a copy of frame f (payload[0, len), NAME.grads offset) until its
 * step opens; a repeat of a held frame, or one past the bytes allowed, is
 * rejected through e (counted, the first logged). 0, or FSGD_E_NOMEM. */
int agg_early_hold(agg_early_set_t *h, const agg_env_t *e, const fsgd_kframe_t *f, const void *payload, size_t len,
                   int64_t offset);
/* Moves the held frames of step open_step (and any of older steps) out, in
 * arrival order, into *take (malloc'd; the caller frees each bytes and the
 * array). */
int agg_early_due(agg_early_set_t *h, const agg_env_t *e, uint64_t open_step, agg_early_t **take, size_t *ntake);
void agg_early_free(agg_early_set_t *h);

#endif
