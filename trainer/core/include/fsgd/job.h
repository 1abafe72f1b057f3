/* A job: everything a training run needs, from a YAML file, --set key=value
 * overrides and command-line flags. One table of fields (trainer/core/job.c)
 * drives all three, so a key means the same thing everywhere and unknown keys
 * or bad values are errors that name the key. */
#ifndef FSGD_JOB_H
#define FSGD_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/loss.h"

#define FSGD_JOB_PATH_MAX 1024

/* The value "auto" stores in a double key that accepts it (l2); integer
 * keys that accept "auto" (epochs) store 0. */
#define FSGD_JOB_AUTO (-1.0)

/* The optimizer of fsgd train (job key "optimizer"). */
typedef enum fsgd_job_optimizer { FSGD_OPTIMIZER_ADAM = 0, FSGD_OPTIMIZER_FTRL = 1 } fsgd_job_optimizer_t;

/* What a worker of fsgd run holds (job key "replica"): the whole model,
 * kept current by every step's delta on NAME.model, or only the values of
 * the keys its next batch uses, pulled from the aggregator before each step
 * (a downlink that does not grow with the number of workers). */
typedef enum fsgd_job_replica {
    FSGD_REPLICA_FULL = 0,
    FSGD_REPLICA_WORKING_SET = 1,
    FSGD_REPLICA_AUTO = 2 /* the default: fsgd_job_replica decides */
} fsgd_job_replica_t;

/* Models of at least this many weights get working-set workers under
 * replica auto (docs/performance.md: the measured crossover). */
#define FSGD_REPLICA_AUTO_MIN_WEIGHTS ((uint64_t)1 << 25)

/* The default bounded delay τ (job key staleness; why this value: README,
 * "fsgd run defaults"). */
#define FSGD_JOB_STALENESS_DEFAULT 4

typedef struct fsgd_job {
    /* data */
    char data[FSGD_JOB_PATH_MAX];    /* training LIBSVM file (or "" when fed by Kafka) */
    char test[FSGD_JOB_PATH_MAX];    /* test file; "" -> split test_fraction off data */
    double test_fraction;            /* used when test is "" (default 0.2) */
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
    /* Not a job key: the most weights the cluster can carry in one snapshot
     * (set by fsgd run for its embedded cluster; 0: no limit). */
    uint64_t max_model_weights;
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
    fsgd_job_optimizer_t optimizer;     /* adam (default) | ftrl (fsgd train) */
    double alpha, beta;              /* FTRL's α and β (defaults auto, 1) */
    char init[FSGD_JOB_PATH_MAX];    /* fsgd train: start from this model file ("" -> zeros) */
    double lr, beta1, beta2, eps;    /* Adam (defaults 0.01, 0.9, 0.999, 1e-8) */
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
    /* distributed (fsgd run / worker / aggregator) */
    char name[64];                   /* job name: topics are <name>.data/.grads/.model/.ctl */
    char brokers[512];               /* "" -> embedded mock cluster */
    int workers;                     /* worker processes (default 2) */
    int partitions;                  /* data topic partitions (default 0 = auto) */
    int block_rows;                  /* rows per NAME.data message from fsgd's producer (0 = auto) */
    int replication_factor;          /* replicas of each topic on a real cluster (0 = min(3, brokers); 1 embedded) */
    int min_insync_replicas;         /* topics' min.insync.replicas (0 = 2 with 3+ replicas, else 1) */
    int step_timeout_ms;             /* drop a worker that misses a step by this long */
    int connect_timeout_ms;          /* a role gives up (exit 4) on brokers that do not answer by then */
    int snapshot_every;              /* full model snapshot every N steps (0: auto, agg_auto.c) */
    int staleness;                   /* τ: a gradient may be computed on a model up to τ steps old (0: BSP) */
    fsgd_job_replica_t replica;      /* auto (default) | full | working_set: read it through fsgd_job_replica */
    int shards;                      /* aggregator shards S: key k belongs to shard k mod S (fsgd/shard.h) */
    char checkpoint[FSGD_JOB_PATH_MAX]; /* aggregator checkpoint file ("" -> none) */
    int follow;                      /* continuous training: consume NAME.data as rows arrive, until SIGTERM */
    double version_seconds;          /* follow: a model version at least this often (seconds, default 60) */
    double target_loss;              /* aggregator: time from step 1 until the moving-average training loss reaches this (0: off) */
    char kafka[4096];                /* librdkafka security settings, "key=value\n" lines (--kafka-opt, YAML kafka:) */
    char job_key_file[FSGD_JOB_PATH_MAX]; /* key that authenticates every message on the job's topics (fsgd/auth.h) */
    int unsigned_rows;               /* with a key: NAME.data may hold rows without its tag (outside producers) */
    /* Not a job key: this aggregator's shard, 0 to shards - 1 (fsgd
     * aggregator --shard I/S; fsgd run gives each its own). */
    uint32_t shard;
    /* Not a job key: the last job file loaded ("" -> none), an input that
     * no output of the command may name. */
    char job_file[FSGD_JOB_PATH_MAX];
    /* Not a job key: bit i set when field i of the key table was given (flag,
     * --set or YAML), so a check can refuse an option that the chosen
     * optimizer would ignore (fsgd_job_given). */
    uint64_t given[2];
} fsgd_job_t;

/* Fills every field with its default. */
void fsgd_job_defaults(fsgd_job_t *job);

/* fsgd_job_defaults, then the single-machine trainer's own: l2 auto (1/n,
 * LIBLINEAR's C=1) and epochs auto (early stopping on held-out rows). The
 * Kafka roles keep fsgd_job_defaults' fixed values. */
void fsgd_job_train_defaults(fsgd_job_t *job);

/* fsgd_job_train_defaults, then batch auto (fsgd_train_auto_batch): the
 * distributed roles (fsgd run, aggregator, worker, produce). */
void fsgd_job_dist_defaults(fsgd_job_t *job);

/* Sets one field by its key ("lr", "model", "codec", ...) from text.
 * Unknown key or bad value -> FSGD_E_ARG with "key 'lr': expected a number
 * > 0, got 'abc'". */
int fsgd_job_set(fsgd_job_t *job, const char *key, const char *value, char *err, size_t errsz);

/* Applies a YAML job file: a mapping of keys to scalars (nested mappings
 * flatten with '.': "optimizer: {lr: 0.1}" is key "optimizer.lr", accepted
 * as an alias of "lr"; "kafka: {sasl.mechanism: PLAIN}" adds a Kafka client
 * setting, see kafka_opt). A key given twice (aliases included) is an
 * error. Errors name path:line:column and the key. */
int fsgd_job_load_yaml(fsgd_job_t *job, const char *path, char *err, size_t errsz);

/* Parses command-line flags: "--key value" or "--key=value" for every field
 * (dashes and underscores interchangeable), "--set key=value", "--job FILE"
 * or a positional .yaml or .yml file (loaded first, flags override). A positional
 * non-YAML argument is taken as --data. Returns 0, 1 when --help was given
 * (usage printed by the caller), or an error naming the flag. */
int fsgd_job_parse_args(fsgd_job_t *job, int argc, char **argv, char *err, size_t errsz);

/* The help text with the given defaults (fsgd_job_train_defaults for fsgd train). */
void fsgd_job_print_help_with(const char *usage_line, const fsgd_job_t *defaults, void *file /* FILE* */);

/* Rows of a step each process must get (a worker of fsgd run, a thread of
 * fsgd train) before backend auto takes the GPU: on an H100 the device lost
 * to one CPU core at 256 rows a step and won twice over at 4096
 * (trainer/backend/CUDA.md). */
#define FSGD_AUTO_CUDA_MIN_ROWS 2048
/* The backend to create for job: job->backend, except that auto is cpu when
 * each process's share of a step, rows_per_process, is below
 * FSGD_AUTO_CUDA_MIN_ROWS (<= 0: unknown, auto stays auto). */
const char *fsgd_job_backend(const fsgd_job_t *job, double rows_per_process);

/* Validates cross-field constraints (data given, batch > 0, ...). */
int fsgd_job_check(const fsgd_job_t *job, char *err, size_t errsz);

/* fsgd_job_check plus what fsgd train needs (epochs auto needs holdout > 0,
 * the options of the optimizer in use and none of the other's). */
int fsgd_job_check_train(const fsgd_job_t *job, char *err, size_t errsz);

/* The optimizer options of a distributed role (fsgd run, worker,
 * aggregator): as fsgd train's (alpha auto is the aggregator's, from the
 * rows it trains on), but init and save_state are fsgd train's only so far. */
int fsgd_job_check_dist(const fsgd_job_t *job, char *err, size_t errsz);

/* 1 when the key (as in the table: "lr", "alpha") was set explicitly. */
int fsgd_job_given(const fsgd_job_t *job, const char *key);

/* Folds the input keys (interactions, ignore, keep, hash_bits) into a vw
 * format ("vw:bits=18:seed=0:ignore=c:interactions=ab"), the one string
 * every role and the model file read; idempotent (a term already there is
 * not added again). Returns 0, or FSGD_E_ARG naming the key (crosses or
 * namespaces asked of a format that has no namespaces). */
int fsgd_job_fold_input(fsgd_job_t *job, char *err, size_t errsz);

/* fsgd run's roles weigh the rows they parse (fsgd_rowfmt_parse): folds
 * into a classification job's format what its rows' labels carry, VW's
 * importance (":row_weights=1") and class_weight (":class_weight=P,N"),
 * right after the format's name; idempotent; fsgd_job_fold_input first.
 * Returns 0, or FSGD_E_ARG for weights a job cannot weigh (class_weight or
 * row_weights with --model linear or a backend other than cpu) or a
 * class_weight that is not POS,NEG. */
int fsgd_job_fold_weights(fsgd_job_t *job, char *err, size_t errsz);

/* Reads class_weight "POS,NEG" (two finite numbers > 0) into *pos and *neg;
 * both 1 when it is "". Returns 0 or FSGD_E_ARG. */
int fsgd_job_class_weight(const fsgd_job_t *job, double *pos, double *neg, char *err, size_t errsz);

/* "adam" or "ftrl". */
const char *fsgd_optimizer_name(fsgd_job_optimizer_t o);

/* What a worker of the job holds, replica auto resolved from what every
 * role knows before the data: working_set when the model's size is given
 * (dim, or hash_bits) and at least FSGD_REPLICA_AUTO_MIN_WEIGHTS, and the
 * codec's workers do not run the optimizer on a whole replica; full
 * otherwise. */
fsgd_job_replica_t fsgd_job_replica(const fsgd_job_t *job);

#endif
