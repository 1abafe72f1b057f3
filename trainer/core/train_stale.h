/* Private to trainer/core: `fsgd train --staleness τ` simulates the bounded
 * delay of a distributed run in one process. Each step's gradient is
 * computed on the model of τ steps before (the most a worker of `fsgd run`
 * may lag): θ is rewound over the last τ updates for the gradient round and
 * replayed after it. A ring of the last τ updates: the touched keys, θ
 * before and after each. */
#ifndef FSGD_TRAIN_STALE_H
#define FSGD_TRAIN_STALE_H

#include <stddef.h>

#include "fsgd/sparse.h"

typedef struct fsgd_stale {
    int tau;             /* 0: off */
    size_t n, head;      /* updates held, the slot of the next one */
    fsgd_sparse_t *before, *after;
} fsgd_stale_t;

/* tau > 0; FSGD_E_NOMEM or 0. */
int fsgd_stale_init(fsgd_stale_t *s, int tau);
/* Holds one update: before (keys and θ before it), θ after it read from theta. */
int fsgd_stale_push(fsgd_stale_t *s, const fsgd_sparse_t *before, const float *theta);
/* θ as it was τ updates ago (newest undone first). */
void fsgd_stale_rewind(const fsgd_stale_t *s, float *theta);
/* θ as it is now again (oldest redone first). */
void fsgd_stale_replay(const fsgd_stale_t *s, float *theta);
void fsgd_stale_free(fsgd_stale_t *s);

#endif
