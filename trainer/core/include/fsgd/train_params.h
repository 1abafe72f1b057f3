/* What fsgd_train and the other trainers of core/ read: the input options,
 * the model, the optimizer and its schedule, compute, the outputs the
 * trainers write, and fsgd train's simulation of a cluster. A plain struct:
 * trainer/job/ fills it from YAML, --set and flags (fsgd/job.h); a binding
 * or test may fill it itself (fsgd_job_train_defaults gives the defaults).
 * A field lives here when core is the lowest module that reads it. */
#ifndef FSGD_TRAIN_PARAMS_H
#define FSGD_TRAIN_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/loss.h"

#define FSGD_JOB_PATH_MAX 1024

/* The value "auto" stores in a double key that accepts it (l2); integer
 * keys that accept "auto" (epochs) store 0. */
#define FSGD_JOB_AUTO (-1.0)

/* The default bounded delay τ (job key staleness; why this value:
 * docs/defaults.md). */
#define FSGD_JOB_STALENESS_DEFAULT 2

/* The optimizer of fsgd train (job key "optimizer"). */
typedef enum fsgd_job_optimizer { FSGD_OPTIMIZER_ADAM = 0, FSGD_OPTIMIZER_FTRL = 1 } fsgd_job_optimizer_t;

typedef struct fsgd_train_params {
    /* input */
    char data[FSGD_JOB_PATH_MAX];    /* training file in the job's format ("" when fed by Kafka) */
    char test[FSGD_JOB_PATH_MAX];    /* test file; "" -> fsgd train holds test_fraction of data out */
    double test_fraction;            /* fsgd train: used when the job has no test file (default 0.2) */
    int skip_bad;                    /* skip malformed rows (default 0: strict) */
    int row_weights;                 /* libsvm: a label may be "label:weight" (a row's importance weight) */
    char format[512];                /* libsvm | criteo | tsv:COLUMNS[:opts] | csv:COLUMNS[:opts] (fsgd/delim.h) */
    int hash_bits;                   /* hashed formats: 2^hash_bits columns (0: the spec's, default 24) */
    char fields[512];                /* libsvm: fields of index ranges for crosses, "a:1-14,b:15-100" */
    char interactions[256];          /* vw: crosses of namespace letters "ab,abc,::" (-q, --cubic, --interactions) */
    char ignore[96];                 /* vw: namespace letters dropped (--ignore) */
    char keep[96];                   /* vw: the only namespace letters read (--keep) */
    char class_weight[64];           /* "POS,NEG": each row's loss weighted by its class ("" none) */
    char cache[FSGD_JOB_PATH_MAX];   /* fsgd train: stream epochs from this binary row cache ("" -> in memory) */
    uint64_t dim;                    /* feature dimension; 0 -> from the data */
    /* Not a job key: the share of the training rows' entries that are their
     * own features rather than crosses (set by fsgd train after reading;
     * 0 or 1: no crosses). lr auto is scaled by it (fsgd_train_auto_lr). */
    double lr_auto_share;
    /* model */
    fsgd_loss_kind_t model;          /* logistic | linear | svm (default logistic) */
    int bias;                        /* intercept on (default 1) */
    double bias_value;               /* value of the constant feature (default 1) */
    double l2;                       /* λ on touched keys (default 0; fsgd train: auto = 1/n_train) */
    double l1;                       /* L1 strength on the mean loss (ftrl only; default 0) */
    /* optimizer */
    fsgd_job_optimizer_t optimizer;  /* adam (default) | ftrl (fsgd train) */
    double alpha, beta;              /* FTRL's α and β (defaults auto, 1) */
    char init[FSGD_JOB_PATH_MAX];    /* fsgd train: start from this model file ("" -> zeros) */
    double lr, beta1, beta2, eps;    /* Adam (defaults 0.01, auto, 0.999, 1e-8; fsgd_train_auto_beta1) */
    double batch;                    /* rows per step if >= 1, else fraction of training rows */
    int epochs;                      /* passes over the data (fsgd train: 0 = auto, early stopping) */
    int max_epochs;                  /* cap when epochs is auto (default 50) */
    double holdout;                  /* rows held out for early stopping when epochs is auto (default 0.1) */
    uint64_t seed;
    /* compute */
    int threads;                     /* local workers in `fsgd train` (default: cores) */
    char backend[32];                /* cpu | cuda | auto */
    char codec[256];                 /* codec spec, "none" by default */
    char downlink[256];              /* auto | full | a lossy codec spec (fsgd/downlink.h) */
    /* output */
    char out[FSGD_JOB_PATH_MAX];          /* model file ("" -> none) */
    char metrics_json[FSGD_JOB_PATH_MAX]; /* metrics JSON ("" -> none) */
    int save_state;                  /* fsgd train: write the optimizer state into the model file (version 3) */
    double target_auc;               /* record time when test AUC first reaches this (0: off) */
    int eval_every;                  /* evaluate on test every N steps as well as at epoch ends (0: epochs only) */
    int quiet;                       /* no progress lines */
    /* fsgd train's simulation of fsgd run's cluster (and fsgd run's own) */
    int staleness;                   /* τ: a gradient may be computed on a model up to τ steps old (0: BSP) */
    /* Not a job key: the last job file loaded ("" -> none), an input that
     * no output of the command may name (fsgd_train_files checks --cache). */
    char job_file[FSGD_JOB_PATH_MAX];
    /* Not a job key: staleness was given (flag, --set or YAML); fsgd train
     * simulates τ only then. */
    int staleness_given;
    int shards;                      /* aggregator shards S: key k belongs to shard k mod S (fsgd/shard.h) */
} fsgd_train_params_t;

/* Rows of a step each process must get (a worker of fsgd run, a thread of
 * fsgd train) before backend auto takes the GPU: on an H100 the device lost
 * to one CPU core at 256 rows a step and won twice over at 4096
 * (trainer/backend/CUDA.md). */
#define FSGD_AUTO_CUDA_MIN_ROWS 2048
/* The backend to create for p: p->backend, except that auto is cpu when
 * each process's share of a step, rows_per_process, is below
 * FSGD_AUTO_CUDA_MIN_ROWS (<= 0: unknown, auto stays auto). */
const char *fsgd_train_backend(const fsgd_train_params_t *p, double rows_per_process);

/* Reads class_weight "POS,NEG" (two finite numbers > 0) into *pos and *neg;
 * both 1 when it is "". Returns 0 or FSGD_E_ARG. */
int fsgd_train_class_weight(const fsgd_train_params_t *p, double *pos, double *neg, char *err, size_t errsz);

/* Folds the input keys (interactions, ignore, keep, hash_bits) into a vw
 * format ("vw:bits=18:seed=0:ignore=c:interactions=ab"), the one string
 * every role and the model file read; idempotent (a term already there is
 * not added again). Returns 0, or FSGD_E_ARG naming the key (crosses or
 * namespaces asked of a format that has no namespaces). */
int fsgd_train_fold_input(fsgd_train_params_t *p, char *err, size_t errsz);

/* fsgd run's roles weigh the rows they parse (fsgd_rowfmt_parse): folds
 * into a classification job's format what its rows' labels carry, VW's
 * importance (":row_weights=1") and class_weight (":class_weight=P,N"),
 * right after the format's name; idempotent; fsgd_train_fold_input first.
 * Returns 0, or FSGD_E_ARG for weights a job cannot weigh (class_weight or
 * row_weights with --model linear or a backend other than cpu) or a
 * class_weight that is not POS,NEG. */
int fsgd_train_fold_weights(fsgd_train_params_t *p, char *err, size_t errsz);

/* "adam" or "ftrl". */
const char *fsgd_optimizer_name(fsgd_job_optimizer_t o);

#endif
