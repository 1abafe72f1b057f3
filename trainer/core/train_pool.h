/* The parallel step of fsgd_train (trainer/core/train.c) on its own, for a
 * caller that brings its own rows each step (fsgd_train_stream): W threads
 * (the caller is thread 0) each take the CPU backend's gradient of one slice
 * of the step's rows, then each reduces one key range of all the threads'
 * gradients and applies sparse Adam there; spin-then-futex barriers between
 * the rounds, exactly as fsgd_train with codec none. */
#ifndef FSGD_TRAIN_POOL_H
#define FSGD_TRAIN_POOL_H

#include "fsgd/adam.h"
#include "fsgd/ftrl.h"
#include "fsgd/csr.h"
#include "fsgd/train_params.h"
#include "fsgd/train.h"

typedef struct fsgd_train_pool fsgd_train_pool_t;

/* Builds thread `worker`'s slice of the step's rows into slice (cleared
 * first by the callee), on that thread, concurrently with the other threads'
 * calls. 0 or an error with err set. */
typedef int (*fsgd_train_pool_fill_fn)(void *ctx, int worker, fsgd_csr_t *slice, char *err, size_t errsz);

/* Starts threads - 1 worker threads (1..64) over a new Adam state of
 * model_dim keys (per-key counts when count_keys; λ = l2), or, when ftrl is
 * not NULL, an FTRL-Proximal state with those parameters (fsgd/ftrl.h; ap,
 * count_keys and l2 unused). NULL with err set. */
fsgd_train_pool_t *fsgd_train_pool_new(const fsgd_train_params_t *job, uint64_t model_dim, const fsgd_adam_params_t *ap,
                                       int count_keys, const fsgd_ftrl_params_t *ftrl, double l2, int threads,
                                       char *err, size_t errsz);

/* Keys below n_keys the pool's optimizer updated at least once. */
uint64_t fsgd_train_pool_touched(const fsgd_train_pool_t *p, uint64_t n_keys);

/* The pool's Adam state (θ is the model). */
fsgd_adam_t *fsgd_train_pool_adam(fsgd_train_pool_t *p);

/* One step: every thread fills its slice (fill(ctx, i, ...)) and takes its
 * gradient, then the mean gradient over rows (> 0, all slices together)
 * plus λθ goes into Adam. *loss gets the summed loss of the rows, *nnz their
 * nonzeros, *t_round the wall time of the fill-and-gradient round. 0 or an
 * error with err set. */
int fsgd_train_pool_step(fsgd_train_pool_t *p, fsgd_train_pool_fill_fn fill, void *ctx, size_t rows,
                         double *loss, size_t *nnz, double *t_round, char *err, size_t errsz);

/* Adds nothing, sets: the threads' summed gradient/encode/decode times and bytes. */
void fsgd_train_pool_stats(const fsgd_train_pool_t *p, fsgd_train_stats_t *stats);

/* Stops the threads and frees p. NULL is a no-op. */
void fsgd_train_pool_free(fsgd_train_pool_t *p);

#endif
