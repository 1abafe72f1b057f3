/* The step engine of fsgd train: W threads (the caller is thread 0) take
 * each step in two parallel rounds, the gradient of their slice of the rows
 * (through the job's codec, as on the wire), then the reduction and the
 * optimizer's update of one key range each; or the step goes through the
 * strategy's aggregator side, or the simulated aggregator shards, as the
 * aggregator process takes it. The driver (train.c) and the streaming pool
 * (train_pool.c) fill in a trainer_t and run its rounds; private to core. */
#ifndef FSGD_TRAIN_ENGINE_H
#define FSGD_TRAIN_ENGINE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fsgd/adam.h"
#include "fsgd/backend.h"
#include "fsgd/barrier.h"
#include "fsgd/csr.h"
#include "fsgd/ftrl.h"
#include "fsgd/train_params.h"
#include "fsgd/sparse.h"
#include "fsgd/step.h"
#include "fsgd/strategy.h"
#include "fsgd/train.h"
#include "train_best.h"
#include "train_pool.h"
#include "train_shards.h"
#include "train_spill.h"
#include "train_stale.h"

typedef struct trainer trainer_t;

/* Each step is two parallel rounds: every thread computes and round-trips
 * the gradient of its rows, then every thread reduces one key range of all
 * threads' gradients and applies Adam there, so neither phase is serial. */
enum { PHASE_GRADIENT, PHASE_UPDATE, PHASE_SHARDS };

typedef struct worker {
    trainer_t *t;
    pthread_t thread;
    fsgd_backend_t *backend;
    fsgd_sworker_t *strat; /* the compression strategy's worker side */
    const fsgd_csr_t *batch; /* this step's rows (one of the trainer's slices) */
    int64_t batch_id;
    fsgd_sparse_t grad, decoded;
    uint8_t *wire;
    size_t wire_cap, wire_len;
    double loss;
    int rc;
    char err[512];
    double t_grad, t_encode, t_decode;
    uint64_t raw_bytes, wire_bytes;
    /* update phase: this thread's key range [key_lo, key_hi) of the step */
    uint64_t key_lo, key_hi;
    fsgd_sparse_t upd; /* the reduced gradient on that range */
    fsgd_csr_t own;    /* the slice this thread builds when the trainer has a fill hook */
    fsgd_csr_t spilled; /* the slice read back when the batches are in a file (train_spill.h) */
} worker_t;

struct trainer {
    const fsgd_train_params_t *job;
    uint32_t *perm;
    /* The data is shuffled once and cut into fixed per-thread batch slices,
     * like cached RDD partitions: no copying per step, and a device backend
     * can keep each slice resident across epochs (batch_id). Each epoch
     * visits the batches in a new random order. */
    fsgd_csr_t *slices;      /* n_batches * n_workers */
    fsgd_spill_t spill;      /* where the slices are kept in a temporary file */
    size_t *batch_rows;      /* rows of each batch */
    uint32_t *order;         /* batch order of the current epoch */
    size_t n_batches;
    fsgd_adam_t adam;   /* θ and the step count; Adam's state unless ftrl */
    /* optimizer ftrl: FTRL-Proximal's z and n; its weights are adam.theta */
    int ftrl_on;
    fsgd_ftrl_t ftrl;
    fsgd_barrier_t start, done; /* the calling thread is worker 0 and a party of both */
    int stop;
    int phase;          /* PHASE_GRADIENT or PHASE_UPDATE: what the next round does */
    double inv_rows;    /* 1 / rows in the current step */
    double l2;          /* λ in use: job->l2, or 1/n_train when it is auto */
    double row_l1;      /* a training row's mean Σ|x|, intercept included (lr auto under a delay) */
    int delay;          /* --staleness τ simulated (0: none): lr and β1 auto under it */
    /* λ's factor for each key (NULL: 1), see key_l2_scale */
    float *l2_scale;
    worker_t *workers;
    int n_workers;
    /* The strategy's aggregator side. When it only decodes and sums a codec
     * message (plain), the threads do that in parallel themselves; else one
     * thread feeds it every message, as the aggregator process does. */
    fsgd_sagg_t *agg;
    int plain;
    /* codec "none" with a plain sum: the message would decode to the
     * gradient itself, so each thread hands its gradient straight to the
     * reduction, skipping encode, CRC and decode (~5% of a CTR step). */
    int direct;
    /* fsgd_train_pool_step: each thread builds its own slice of the step
     * first (NULL in fsgd_train, whose slices are cut once). */
    fsgd_train_pool_fill_fn fill;
    void *fill_ctx;
    fsgd_csr_t hold;    /* epochs auto: held-out rows for early stopping */
    fsgd_best_t best;   /* epochs auto: θ at the lowest holdout loss so far */
    double *hold_margin;
    fsgd_stale_t stale;   /* --staleness τ: gradients on the model of τ steps before */
    fsgd_sparse_t before; /* θ before the step's update on its keys (stale) */
    fsgd_shards_t *shards; /* --shards S > 1: the aggregator shards (train_shards.h) */
    fsgd_step_info_t shard_info; /* the step PHASE_SHARDS closes */
};

/* One round of `phase` on every worker; the calling thread does worker 0's
 * share. Each worker's rc and err say how its share went. */
void fsgd_trainer_round(trainer_t *t, int phase);

/* Splits the key space into one range per thread with about equal numbers
 * of gradient entries (before a PHASE_UPDATE round). */
void fsgd_trainer_split_keys(trainer_t *t, uint64_t model_dim);

/* Sets stats' bytes and gradient/encode/decode times: the threads' sums. */
void fsgd_trainer_sum_stats(const trainer_t *t, fsgd_train_stats_t *stats);

/* The step's update through a strategy that is more than decode-and-sum,
 * as the aggregator takes it; lands in workers[0].upd. 0 or an error. */
int fsgd_trainer_strategy_step(trainer_t *t, size_t rows, double loss_sum, double seconds, char *err, size_t errsz);

/* The step closed by the aggregator shards (--shards S > 1); the update's
 * keys land in workers[0].upd. 0 or an error. */
int fsgd_trainer_shards_step(trainer_t *t, size_t rows, double seconds, char *err, size_t errsz);

/* Starts worker threads 1..W-1 (*started: the threads running, the caller
 * included). When one cannot start, the barriers count only those that
 * did, so that fsgd_trainer_stop releases them: FSGD_E_NOMEM. */
int fsgd_trainer_start(trainer_t *t, int *started);

/* Releases the started threads from their wait for a round and joins them. */
void fsgd_trainer_stop(trainer_t *t, int started);

/* Frees everything t holds (not t itself). */
void fsgd_trainer_free(trainer_t *t);

#endif
