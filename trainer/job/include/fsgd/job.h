/* A job: everything a training run needs, from a YAML file, --set key=value
 * overrides and command-line flags. One table of fields (trainer/job/job.c)
 * drives all three, so a key means the same thing everywhere and unknown keys
 * or bad values are errors that name the key. */
#ifndef FSGD_JOB_H
#define FSGD_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/dist.h"
#include "fsgd/kbus.h"
#include "fsgd/train_params.h"

/* A job: the owners' settings side by side, and what only the job's front
 * ends read. */
typedef struct fsgd_job {
    fsgd_train_params_t train;     /* core's: input, model, optimizer, schedule, compute, outputs */
    fsgd_cluster_conf_t cluster;   /* kafka/'s: brokers, client settings, the job key */
    fsgd_dist_params_t dist;       /* distributed/'s: name, workers, partitions, checkpoint, follow, ... */
    /* Not a job key: bit i set when field i of the key table was given (flag,
     * --set or YAML), so a check can refuse an option that the chosen
     * optimizer would ignore (fsgd_job_given). */
    uint64_t given[2];
} fsgd_job_t;

/* What the roles read of job (fsgd/dist.h): pointers into *job, valid
 * while it lives. */
fsgd_dist_job_t fsgd_job_dist(const fsgd_job_t *job);
/* fsgd_job_dist(job) as a pointer, for a call: a temporary that lives to
 * the end of the enclosing block (fsgd_worker_run(env, FSGD_JOB_DIST(&job), ...)). */
#define FSGD_JOB_DIST(job) ((const fsgd_dist_job_t[1]){fsgd_job_dist(job)})

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

#endif
