/* Private to trainer/core: `fsgd train --shards S` simulates S aggregator
 * shards in one process (issue 25), as the distributed shards run them.
 *
 * Shard I of S owns the keys k with k mod S = I as its local keys k / S
 * (fsgd/shard.h): its own strategy aggregator and optimizer state over its
 * local dim, and the one step function (fsgd/step.h) on its part. Each
 * worker thread splits its gradient (global keys) into S parts and encodes
 * part I with its own strategy state for shard I; shard I reduces the
 * parts in worker order, steps, and its feedback section goes back to
 * every worker's state for it. The trainer's θ stays the global replica the
 * gradients and the scoring read: key k = θ_{k mod S}[k / S]. Step count,
 * rows and loss stay global. */
#ifndef FSGD_TRAIN_SHARDS_H
#define FSGD_TRAIN_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/adam.h"
#include "fsgd/ftrl.h"
#include "fsgd/sparse.h"
#include "fsgd/strategy.h"

typedef struct fsgd_shards fsgd_shards_t;

typedef struct fsgd_shards_opt {
    const char *spec;        /* the run's strategy spec; each shard runs fsgd_strategy_shard_spec of it */
    uint32_t shards;         /* S, 2 .. FSGD_SHARDS_MAX */
    int workers;             /* worker threads, each with one strategy state per shard */
    uint64_t seed;
    fsgd_adam_t *adam;       /* the global optimizer: θ and its state at the start; its per-key state
                              * moves into the shards (freed here, made again by fsgd_shards_store) */
    fsgd_ftrl_t *ftrl;       /* non-NULL: FTRL-Proximal's state instead of Adam's (moves the same way) */
    double l2;               /* λ on the mean loss */
    const float *l2_scale;   /* per-key factor of λ (NULL: 1), fsgd train's key_l2_scale */
} fsgd_shards_opt_t;

/* NULL with *rc and err: a strategy refused at S shards (FSGD_E_ARG,
 * fsgd_strategy_check_shards), a bad spec, out of memory (FSGD_E_NOMEM);
 * then o's state is as it was. */
fsgd_shards_t *fsgd_shards_new(const fsgd_shards_opt_t *o, int *rc, char *err, size_t errsz);
void fsgd_shards_destroy(fsgd_shards_t *s);

/* Worker `worker`'s gradient (global keys, the sum over `rows` rows) split
 * and encoded for every shard. Adds 8 bytes a sent entry to *raw_bytes and
 * the S messages' lengths to *wire_bytes. Thread safe across workers. */
int fsgd_shards_encode(fsgd_shards_t *s, int worker, const fsgd_sparse_t *grad, uint64_t rows,
                       uint64_t *raw_bytes, uint64_t *wire_bytes, char *err, size_t errsz);

/* A step is closed (after every worker's encode) by
 * fsgd_shards_step_shard on every shard, then fsgd_shards_step_close. */

/* Shard `shard`'s part of the step, θ of its keys into global->theta. Thread
 * safe across distinct shards (each owns its state, its keys of θ and its
 * column of the workers' strategy states); keep_before: keep θ before the
 * update for fsgd_shards_step_close's before. */
int fsgd_shards_step_shard(fsgd_shards_t *s, uint32_t shard, fsgd_adam_t *global, const fsgd_step_info_t *info,
                           int keep_before, char *err, size_t errsz);

/* After every shard's fsgd_shards_step_shard: global->t, upd and before
 * (NULL: not wanted) with global keys, and the busy shares. */
int fsgd_shards_step_close(fsgd_shards_t *s, fsgd_adam_t *global, fsgd_sparse_t *before, fsgd_sparse_t *upd,
                           char *err, size_t errsz);

/* S. */
uint32_t fsgd_shards_count(const fsgd_shards_t *s);

/* Writes the shards' optimizer state back into the global one (θ, m, v or
 * the counted keys, FTRL's z and n, the step count), allocating what
 * fsgd_shards_new freed. 0 or FSGD_E_NOMEM. */
int fsgd_shards_store(const fsgd_shards_t *s, fsgd_adam_t *adam, fsgd_ftrl_t *ftrl);

/* The busiest shard's share of a step's keys, max_i keys_i / mean keys,
 * over the steps so far: its mean and max. range_*: the same for S
 * contiguous key ranges of the same steps' keys, for comparison. */
void fsgd_shards_busy(const fsgd_shards_t *s, double *mean, double *max, double *range_mean, double *range_max);

#endif
