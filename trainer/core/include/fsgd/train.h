/* The local data-parallel trainer behind `fsgd train`.
 *
 * W threads play the distributed roles on one machine: each step the batch
 * of B rows is split over the threads, every thread computes the raw
 * gradient sum of its part with its backend and passes it through the job's
 * codec (encode + decode, as on the wire; codec "none", lossless, hands
 * the gradient over as it is, its message length still counted), then one
 * reduction takes the mean
 * over B, adds λθ on the touched keys and applies one sparse Adam step —
 * the same math as the workers and the aggregator. */
#ifndef FSGD_TRAIN_H
#define FSGD_TRAIN_H

#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/train_params.h"
#include "fsgd/metrics.h"
#include "fsgd/model.h"

/* Threads are only used when each gets at least this many nonzeros per step:
 * smaller shares cost more in synchronisation than they save. Measured on
 * 2 idle cores (2^24-key CTR rows, 40 nonzeros): 2 threads lose at 640
 * nonzeros a thread and win 1.4x from 1,280 up; 4096 leaves room for a busy
 * machine, where a barrier crossing can cost a time slice (with both cores
 * taken by other work, 2 threads at 5,250 a thread were ~7% slower). */
#define FSGD_TRAIN_MIN_NNZ_PER_THREAD 4096

/* epochs auto: the holdout loss is computed at evenly spread steps,
 * FSGD_TRAIN_HOLDOUT_EVALS times an epoch or once every
 * FSGD_TRAIN_LOOK_ROWS training rows, whichever is more often
 * (fsgd_train_looks), and training stops after fsgd_train_patience looks
 * without a new best: FSGD_TRAIN_PATIENCE looks, or a quarter epoch when
 * that is more. So one epoch on small data, 200k rows on 1M rows, a quarter
 * epoch on bigger files: an epoch there is long and the holdout large, but
 * a slow steady gain over 200k rows must not stop it. */
#define FSGD_TRAIN_HOLDOUT_EVALS 4
#define FSGD_TRAIN_LOOK_ROWS 50000
#define FSGD_TRAIN_PATIENCE 4

/* epochs auto holds out job->holdout of the rows, at most this many. */
#define FSGD_TRAIN_HOLDOUT_MAX 50000

/* epochs auto on labels of two classes: a holdout expected to hold fewer
 * rows of the rarer class than this is too noisy a judge (its loss is
 * mostly those few rows'), so no rows are held out and the run trains
 * fsgd_train_noisy_epochs epochs on all of them instead. */
#define FSGD_TRAIN_HOLDOUT_MIN_CLASS 200
/* ... that many epochs: enough for this many rows, at least
 * FSGD_TRAIN_NOISY_MIN_EPOCHS, at most max_epochs. */
#define FSGD_TRAIN_NOISY_ROWS 250000
#define FSGD_TRAIN_NOISY_MIN_EPOCHS 10

/* lr auto (job->lr < 0): FSGD_TRAIN_LR_AUTO_C / sqrt(steps per epoch),
 * clamped to [MIN, MAX]; see fsgd_train. */
#define FSGD_TRAIN_LR_AUTO_C 0.15
/* batch auto: rows a worker, and the fewest steps an epoch above that */
#define FSGD_TRAIN_BATCH_AUTO 256
#define FSGD_TRAIN_BATCH_MIN_STEPS 2000.0
#define FSGD_TRAIN_LR_AUTO_MIN 0.001
#define FSGD_TRAIN_LR_AUTO_MAX 0.02
/* β1 auto without a delay (Adam's own) */
#define FSGD_TRAIN_BETA1 0.9
/* lr auto under a bounded delay τ: (τ + 1)·lr·(a row's mean Σ|x|), how far
 * a row's margin can move in the updates a gradient does not see, at most
 * this (fsgd_train_auto_lr). */
#define FSGD_TRAIN_DELAY_MARGIN 0.8
/* lr auto, per key: lr·sqrt(steps an epoch / steps touching the key), the
 * same rule with the key's own steps, at most this. */
#define FSGD_TRAIN_KEY_LR_MAX 0.1

/* alpha auto (optimizer ftrl): FSGD_TRAIN_ALPHA_AUTO_C / sqrt(steps per
 * epoch), clamped to [MIN, MAX]; see fsgd_train_auto_alpha. */
#define FSGD_TRAIN_ALPHA_AUTO_C 2.0
#define FSGD_TRAIN_ALPHA_AUTO_MIN 0.01
#define FSGD_TRAIN_ALPHA_AUTO_MAX 0.5

typedef struct fsgd_train_stats {
    uint64_t steps, rows, nnz;      /* processed so far (rows/nnz count each visit) */
    int staleness;                  /* --staleness τ simulated (0: none) */
    int epoch;                      /* 1-based current epoch */
    double seconds;                 /* training time so far, evaluation excluded */
    double last_loss;               /* mean training loss over the recent steps */
    uint64_t raw_bytes;             /* 8 bytes per sent (key, value) pair */
    uint64_t wire_bytes;            /* encoded bytes of every thread's gradient */
    double t_grad, t_encode, t_decode, t_update; /* seconds in each phase (summed over threads for grad/codec) */
    double t_grad_round;            /* wall seconds of the gradient rounds (all threads at once) */
    uint64_t batch_bytes;           /* the step batches' size, binary (no values) or not */
    int batches_binary;             /* 1: every value was 1, the batches hold none */
    uint64_t batch_bytes_on_disk;   /* of batch_bytes, those kept in a temporary file, not memory */
    fsgd_metrics_t test;            /* last evaluation (n == 0 before the first) */
    double time_to_target;          /* seconds when test AUC first reached job->target_auc, -1 if not */
    double target_clock;            /* CLOCK_MONOTONIC seconds at that moment (whole-process timing), 0 if not */
    double best_test_auc;
    char backend[128];              /* the backend in use and its device ("auto" resolved) */
    int threads_used;               /* job->threads, or fewer when steps are too small to split */
    double nnz_per_step;            /* mean nonzeros in one step's batch */
    double lr;                      /* Adam learning rate used (job->lr, or the auto value) */
    double l2;                      /* λ used (job->l2, or 1/n_train when auto) */
    double alpha;                   /* FTRL's α used (job->alpha, or the auto value); NAN with Adam */
    size_t holdout_rows;            /* rows held out for early stopping (epochs auto), else 0 */
    double codec_lr;                /* efsign's η set by fsgd_train_auto_efsign_lr, else 0 */
    double holdout_rare;            /* epochs auto, none held out: the rows of the rarer class a holdout would
                                     * have had (< FSGD_TRAIN_HOLDOUT_MIN_CLASS); else 0 */
    double holdout_loss;            /* best mean loss on them */
    double best_epoch;              /* epochs (fractional) done when that best was reached */
    double epochs_run;              /* epochs (fractional) trained */
    int stopped_early;              /* 1 when the holdout loss stopped improving before max_epochs */
    double patience_epochs;         /* epochs of looks without a new best that stop it */
    double t_holdout;               /* seconds scoring the holdout rows (counted in seconds) */
    uint64_t weights_touched;       /* feature weights the optimizer updated at least once */
    uint64_t weights_nonzero;       /* nonzero feature weights of the final model (intercept not counted) */
    int init_state;                 /* warm start: 1 the init model's optimizer state was resumed, 0 not */
    int shards;                     /* --shards S simulated (1: one aggregator) */
    double shard_busy_mean, shard_busy_max; /* busiest shard's keys / mean keys a step (NAN at S = 1) */
    double shard_range_busy_mean, shard_range_busy_max; /* the same for S contiguous key ranges */
} fsgd_train_stats_t;

/* Called once before the first step (end_of_epoch = -1: setup done, stats->backend set),
 * about once a second and at every epoch end (end_of_epoch = 1); in memory
 * (not FSGD_TRAIN_CACHE) and without job->save_state, once more with
 * FSGD_TRAIN_MODEL_READY when the model's weights and shape are final, before
 * the test rows are scored: from then on the trainer only reads the model,
 * so the caller may start writing it (model->input is the caller's to set). */
typedef void (*fsgd_train_progress_fn)(void *ctx, const fsgd_train_stats_t *s, int end_of_epoch);
#define FSGD_TRAIN_MODEL_READY (-2)

/* What fsgd_train trains on. */
typedef enum fsgd_train_source {
    FSGD_TRAIN_ROWS = 0, /* rows in memory, only read */
    /* rows in memory that training frees as it goes: test once copied (it
     * is then empty, n_rows 0), and once the rows are cut into the step
     * batches (which hold their own copy), all of the rows but the first
     * keep_rows, so a big file is not held twice through training (1M
     * CTR rows: ~320 MB). On an error before that they may be whole;
     * n_rows says which. Test is freed in any case. */
    FSGD_TRAIN_ROWS_OWNED,
    /* a row cache (fsgd/rowcache.h) instead of rows in memory: each epoch
     * reads it in chunks of FSGD_TRAIN_STREAM_CHUNK rows, shuffles the rows
     * within a chunk and trains on them in steps of B, so memory is the
     * model's state plus one chunk. CPU backend, codec none; job->threads
     * as in memory (each step's rows cut into one slice a thread). No init. */
    FSGD_TRAIN_CACHE,
} fsgd_train_source_t;

typedef struct fsgd_train_input {
    fsgd_train_source_t source;
    const fsgd_csr_t *rows;  /* ROWS: the training rows */
    const fsgd_csr_t *test;  /* ROWS, CACHE: test rows, NULL or empty for none; columns >= dim are ignored */
    fsgd_csr_t *owned_rows;  /* ROWS_OWNED: the training rows, which training frees as it goes */
    fsgd_csr_t *owned_test;  /* ROWS_OWNED: the test rows (NULL: none), freed once copied */
    size_t keep_rows;        /* ROWS_OWNED: rows of owned_rows kept */
    const char *cache;       /* CACHE: the row cache's path */
    const fsgd_csr_t *hold;  /* CACHE: held-out rows kept in memory for early stopping (required for epochs
                              * auto; NULL otherwise) */
    uint64_t dim;            /* the feature dimension: every training column is < dim */
} fsgd_train_input_t;

/* What fsgd_train calls while it runs (fsgd_train_progress_fn). */
typedef struct fsgd_train_hooks {
    fsgd_train_progress_fn progress; /* NULL: none */
    void *ctx;                       /* its first argument */
} fsgd_train_hooks_t;

/* Trains on `in` with the job's settings, starting from init's weights
 * (NULL: zeros; it must have in->dim, the job's loss, intercept and bias
 * value: fsgd_train_check_init; Adam's state starts at zero unless init
 * holds this run's (fsgd_train_state_kind), FTRL's z is set so that its
 * weights are init's, fsgd_ftrl_start_from). On success *model holds the
 * weights (caller frees with fsgd_model_free) and *stats the final figures.
 * With job->epochs 0 (auto) a job->holdout fraction of the rows is held out
 * (with a cache: in->hold), training stops when its loss stops improving,
 * and the model is the best one seen; job->l2 < 0 (auto) means
 * λ = 1/n_train, job->lr < 0 (auto) 0.15/sqrt(steps per epoch). Adam runs
 * with per-key bias corrections (fsgd_adam_count_keys). hooks may be NULL.
 * Returns 0 or an fsgd error with err set. */
int fsgd_train(const fsgd_train_params_t *job, const fsgd_train_input_t *in, const fsgd_model_t *init, fsgd_model_t *model,
               fsgd_train_stats_t *stats, const fsgd_train_hooks_t *hooks, char *err, size_t errsz);


/* The optimizer state this job trains with and --save-state writes:
 * ftrl, Adam with per-key counts (lr auto) or plain Adam (an explicit lr).
 * fsgd_train resumes an init model's state only when it is of this kind. */
fsgd_model_state_kind_t fsgd_train_state_kind(const fsgd_train_params_t *job);

/* Can a job over dim features start from init? 0, or FSGD_E_ARG with err
 * naming what differs: dim, loss, intercept or bias value. */
int fsgd_train_check_init(const fsgd_train_params_t *job, uint64_t dim, const fsgd_model_t *init, char *err, size_t errsz);

/* fsgd_train's settings from the data: lr auto and l2 auto for n_fit
 * training rows in steps of B (the job's values when not auto). lr and β1
 * also for a bounded delay of tau updates (0: none; fsgd run's staleness,
 * or fsgd train --staleness) over rows whose mean Σ|x|, intercept
 * included, is row_l1 (0: not known). */
double fsgd_train_auto_lr(const fsgd_train_params_t *job, size_t n_fit, size_t B, int tau, double row_l1);
double fsgd_train_auto_l2(const fsgd_train_params_t *job, size_t n_fit);
double fsgd_train_auto_alpha(const fsgd_train_params_t *job, size_t n_fit, size_t B);
double fsgd_train_auto_beta1(const fsgd_train_params_t *job, int tau);
/* row_l1 of n rows whose values sum (in absolute value) to abs_sum, with
 * the job's intercept (0 when n is 0). */
double fsgd_train_row_l1(const fsgd_train_params_t *job, double abs_sum, uint64_t n);

/* Rows a step for n_fit training rows over `workers` processes: the job's
 * batch (rows, or a fraction of n_fit), or batch auto: FSGD_TRAIN_BATCH_AUTO
 * rows a worker (one process: fsgd train's 256), at most n_fit /
 * FSGD_TRAIN_BATCH_MIN_STEPS when that is above 256. At least 1. */
uint64_t fsgd_train_auto_batch(const fsgd_train_params_t *job, uint64_t n_fit, int workers);

/* Holdout looks an epoch of n_fit rows: max(FSGD_TRAIN_HOLDOUT_EVALS,
 * ceil(n_fit / FSGD_TRAIN_LOOK_ROWS)), at most the steps an epoch. */
uint64_t fsgd_train_looks(size_t n_fit, size_t steps_per_epoch);

/* Epochs of an epochs-auto run whose holdout would be too noisy
 * (FSGD_TRAIN_HOLDOUT_MIN_CLASS): max(FSGD_TRAIN_NOISY_MIN_EPOCHS,
 * ceil(FSGD_TRAIN_NOISY_ROWS / n_rows)), at most max_epochs. */
int fsgd_train_noisy_epochs(size_t n_rows, int max_epochs);

/* The intercept's start for a logistic model: the log-odds of the share of
 * positive labels (with half a row of each class added, so never infinite),
 * divided by the intercept feature's value. */
float fsgd_train_start_intercept(const double *label, size_t n, double bias_value);

/* efsign's stepsize η when its spec has none and the job's lr is auto:
 * FSGD_TRAIN_EFSIGN_LR_C / sqrt(steps per epoch), within [MIN, MAX] (the
 * 1/sqrt(T) stepsize of the paper's Corollary 3, T about an epoch). */
#define FSGD_TRAIN_EFSIGN_LR_C 2.0
#define FSGD_TRAIN_EFSIGN_LR_MIN 0.01
#define FSGD_TRAIN_EFSIGN_LR_MAX 1.0
double fsgd_train_auto_efsign_lr(size_t n_fit, size_t B);

/* Looks without a new best before stopping: max(FSGD_TRAIN_PATIENCE, looks / 4). */
int fsgd_train_patience(uint64_t looks);

/* Rows read from the cache at a time (FSGD_TRAIN_CACHE): with B rows a
 * step, the memory for data is this chunk, whatever the file's size. */
#define FSGD_TRAIN_STREAM_CHUNK 65536

/* Evaluates a model on rows: margins then fsgd_metrics_compute. */
int fsgd_train_evaluate(const fsgd_model_t *model, const fsgd_csr_t *rows, fsgd_metrics_t *out);

/* The same for a model given as pairs (fsgd_model_save_pairs: shape's
 * kind, dim, intercept; w's keys increasing, dim the intercept's), the
 * same metrics bit for bit, in memory for the rows' columns only. Returns 0
 * or FSGD_E_NOMEM. */
int fsgd_train_evaluate_pairs(const fsgd_model_t *shape, const fsgd_sparse_t *w, const fsgd_csr_t *rows,
                              fsgd_metrics_t *out);

/* fsgd train's test set when no --test is given: moves a pseudo-random
 * fraction of data's rows (drawn from seed, in row order) into test, which
 * is empty or NULL-initialised ({0}); binary rows stay binary. Returns 0 or
 * FSGD_E_NOMEM. */
int fsgd_train_split_test(fsgd_csr_t *data, double fraction, uint64_t seed, fsgd_csr_t *test);

#endif
