/* The distributed roles of a job over Kafka (trainer/KAFKA_FORMAT.md):
 * the producer that loads rows (LIBSVM or the job's delimited format) into <job>.data, the workers, the
 * aggregator, and model reassembly from <job>.model.
 *
 * Every function blocks until its role is done and never prints; progress
 * goes through callbacks. Errors are negative fsgd_err_t with err set. */
#ifndef FSGD_DIST_H
#define FSGD_DIST_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "fsgd/auth.h"
#include "fsgd/kbus.h"
#include "fsgd/libsvm.h"
#include "fsgd/metrics.h"
#include "fsgd/model.h"
#include "fsgd/strategy.h"
#include "fsgd/train_params.h"

/* What a worker of fsgd run holds (job key "replica"): the whole model,
 * kept current by every step's delta on NAME.model, or only the values of
 * the keys its next batch uses, pulled from the aggregator before each step
 * (a downlink that does not grow with the number of workers). */
typedef enum fsgd_job_replica {
    FSGD_REPLICA_FULL = 0,
    FSGD_REPLICA_WORKING_SET = 1,
    FSGD_REPLICA_AUTO = 2 /* the default: fsgd_dist_replica decides */
} fsgd_job_replica_t;

/* How an aggregator shard holds its part of the model (job key "table"):
 * every weight of its key range, or only the keys the data touched
 * (fsgd/adam.h, a sparse table). Zero is auto, so a job made in C gets it. */
typedef enum fsgd_job_table {
    FSGD_TABLE_AUTO = 0, /* fsgd_agg_table_sparse decides */
    FSGD_TABLE_DENSE = 1,
    FSGD_TABLE_SPARSE = 2
} fsgd_job_table_t;

/* Models of at least this many weights get working-set workers under
 * replica auto (docs/performance.md: the measured crossover). */
#define FSGD_REPLICA_AUTO_MIN_WEIGHTS ((uint64_t)1 << 25)

/* A distributed job's own settings (fsgd run, worker, aggregator, produce):
 * the job keys that only distributed/ reads, and what the CLI sets for a
 * role. trainer/job/ fills them from YAML and flags. */
typedef struct fsgd_dist_params {
    char name[64];                   /* job name: topics are <name>.data/.grads/.model/.ctl */
    int workers;                     /* worker processes (default 2) */
    int partitions;                  /* data topic partitions (default 0 = auto) */
    int block_rows;                  /* rows per NAME.data message from fsgd's producer (0 = auto) */
    int step_timeout_ms;             /* drop a worker that misses a step by this long */
    int snapshot_every;              /* full model snapshot every N steps (0: auto, agg_auto.c) */
    fsgd_job_replica_t replica;      /* auto (default) | full | working_set: read it through fsgd_dist_replica */
    fsgd_job_table_t table;          /* auto (default) | dense | sparse: an aggregator shard's table */
    char checkpoint[FSGD_JOB_PATH_MAX]; /* aggregator checkpoint file ("" -> none) */
    int follow;                      /* continuous training: consume NAME.data as rows arrive, until SIGTERM */
    double version_seconds;          /* follow: a model version at least this often (seconds, default 60) */
    double target_loss;              /* aggregator: time from step 1 until the moving-average training loss reaches this (0: off) */
    /* Not a job key: this aggregator's shard, 0 to shards - 1 (fsgd
     * aggregator --shard I/S; fsgd run gives each its own). */
    uint32_t shard;
    /* Not a job key: the most weights the cluster can carry in one snapshot
     * (set by fsgd run for its embedded cluster; 0: no limit). */
    uint64_t max_model_weights;
} fsgd_dist_params_t;

/* What the roles read of a job (fsgd_job_dist, fsgd/job.h, makes one): its
 * training parameters, its distributed settings and its cluster's. Pointers into the caller's job, which outlives every call
 * given it. */
typedef struct fsgd_dist_job {
    const fsgd_train_params_t *train;
    const fsgd_dist_params_t *dist;
    const fsgd_cluster_conf_t *cluster;
} fsgd_dist_job_t;

/* What a worker of the job holds, replica auto resolved from what every
 * role knows before the data: working_set when the model's size is given
 * (dim, or hash_bits) and at least FSGD_REPLICA_AUTO_MIN_WEIGHTS, and the
 * codec's workers do not run the optimizer on a whole replica; full
 * otherwise. */
fsgd_job_replica_t fsgd_dist_replica(const fsgd_train_params_t *train, const fsgd_dist_params_t *dist);

/* A bounded trace of a run for plots (fsgd plot): (time, step, loss,
 * bytes) points, thinned as it grows so a run of any length keeps at most
 * FSGD_TRACE_MAX evenly spaced points plus its last one. Plain data, no
 * allocation: it lives inside the aggregator's stats. */
#define FSGD_TRACE_MAX 512

typedef struct fsgd_trace_point {
    double seconds;      /* since the role started */
    double loss;         /* training loss (moving average over a few steps) */
    uint64_t step, rows; /* applied so far */
    uint64_t bytes_up, bytes_down;
    double bits;   /* the strategy's live "bits" (MQGrad's choice), NaN when it has none */
    double energy; /* the strategy's live "energy" (GradiVeQ's kept share), NaN when none */
} fsgd_trace_point_t;

typedef struct fsgd_trace {
    uint32_t n;      /* points kept in p */
    uint32_t stride; /* every stride-th point offered is kept (0 before the first) */
    uint64_t seen;   /* points offered */
    fsgd_trace_point_t p[FSGD_TRACE_MAX];
    fsgd_trace_point_t last; /* the newest point offered (valid when seen > 0) */
} fsgd_trace_t;

struct fsgd_bus;        /* fsgd/bus.h */
struct fsgd_bus_client; /* fsgd/bus.h */
/* A line of news from a role, for the CLI to print: the first rejection of
 * each reason, what a step is waiting for, a consumer error. Roles call it
 * rarely (each reason once, waits every few seconds). */
typedef void (*fsgd_dist_log_fn)(void *ctx, const char *line);

/* What a role runs with besides its job: the cluster it speaks over, the
 * caller's flags, where its news goes. The caller owns all of it (a signal
 * handler sets *stop), so roles of one process — the in-memory role tests,
 * fsgd run's shards — never share a flag or a transport they did not ask
 * to share. */
typedef struct fsgd_role_env {
    struct fsgd_bus *bus; /* fsgd/bus.h (fsgd_bus_kafka_new, fsgd_bus_mem_new): outlives the call */
    /* May be NULL. Nonzero: a worker leaves; a following aggregator
     * publishes a final version, writes its checkpoint and returns 0; a
     * produce stops before its next chunk of rows with an error. */
    volatile sig_atomic_t *stop;
    /* Tests, may be NULL. Nonzero: an aggregator stops where it is as a
     * killed process would (no job_end, no model, no checkpoint) and
     * returns FSGD_E_STATE ("stopped as if killed"). */
    volatile sig_atomic_t *crash;
    fsgd_dist_log_fn log; /* may be NULL: the first rejection of each reason, waits, consumer errors */
    void *ctx;            /* for log and the role's own callbacks */
} fsgd_role_env_t;

/* --- producer --- */

typedef struct fsgd_produce_stats {
    uint64_t rows, bytes;
    uint64_t messages; /* rows go out in blocks of fsgd_produce_block_rows */
    int partitions;
    double seconds;
    uint64_t bad_rows;          /* malformed rows left out (skip_bad) */
    char first_bad[FSGD_LIBSVM_BAD_KEPT][160]; /* "file:line:col: why" of the first of them */
} fsgd_produce_stats_t;

typedef void (*fsgd_produce_progress_fn)(void *ctx, const fsgd_produce_stats_t *s, int done);

/* Rows a NAME.data message of fsgd's producer holds at most: the job's
 * block_rows, or (0: auto) batch / partitions, so that a step takes one
 * message of each partition; between 1 and FSGD_PRODUCE_BLOCK_MAX_ROWS. A
 * block also stays under FSGD_PRODUCE_BLOCK_BYTES (the broker's 1 MB). */
#define FSGD_PRODUCE_BLOCK_MAX_ROWS 1024
#define FSGD_PRODUCE_BLOCK_BYTES (768u * 1024u)
uint32_t fsgd_produce_block_rows(const fsgd_dist_job_t *job, int partitions);

/* Partitions needed for a file of `bytes` on the embedded cluster so no
 * partition passes its 5 MiB limit (uncompressed, with headroom). */
int fsgd_produce_partitions_needed(uint64_t bytes);

/* Loads the file `path` into <job>.data on env->bus, one row per
 * message, round-robin over the topic's partitions (created with
 * `partitions`, 0 = 12, when missing, with the job's other topics:
 * fsgd_dist_topics_create; FSGD_E_STATE when <job>.model holds a job). Lines are checked with the
 * job's format first (fsgd/rowfmt.h: LIBSVM, or a criteo/tsv:/csv: spec whose header line is
 * skipped, never sent) and sent as they are; a bad row is an error naming file:line:column unless
 * job->train->skip_bad (then left out and counted in st). After delivery every partition's log is checked: data the
 * broker dropped is FSGD_E_LOST with the reason. */
int fsgd_produce_file(const fsgd_role_env_t *env, const fsgd_dist_job_t *job, const char *path, int partitions,
                      fsgd_produce_stats_t *st, fsgd_produce_progress_fn progress, char *err, size_t errsz);

/* --- topics on a real cluster --- */

/* The replication factor and min.insync.replicas of a job's topics on a
 * cluster of `brokers` brokers: the job's values, or min(3, brokers) and 2
 * (1 with fewer than 3 replicas). FSGD_E_ARG when the cluster cannot hold
 * them. */
int fsgd_dist_replication(const fsgd_dist_job_t *job, int brokers, int *rf, int *min_isr, char *err, size_t errsz);

/* Creates <job>.grads, .model, .ctl and, when data_partitions > 0, <job>.data
 * with that many partitions, each with the job's replication and the
 * retention/compaction settings of KAFKA_FORMAT.md, and waits until every
 * partition has a leader. Existing topics are kept as they are. c: any
 * client of the cluster's bus (fsgd/bus.h). */
int fsgd_dist_topics_create(struct fsgd_bus_client *c, const fsgd_dist_job_t *job, int data_partitions, char *err,
                            size_t errsz);

/* FSGD_E_STATE ("job name 'x' was used before ...") when <job>.model (and,
 * with data_too, <job>.data) already holds messages: a finished or running
 * job of the same name would mix with this one. */
int fsgd_dist_topics_unused(struct fsgd_bus_client *c, const fsgd_dist_job_t *job, int data_too, char *err,
                            size_t errsz);

/* Partitions of NAME.pull (job key replica working_set): the answers to
 * a worker's pulls come on partition id mod this. */
#define FSGD_DIST_PULL_PARTITIONS 32

/* --- worker --- */

typedef struct fsgd_worker_stats {
    uint64_t steps_sent, rows, bytes_up, bytes_down, corrupt, duplicates, resyncs;
    uint64_t prefetched; /* partitions read before the first model message (fsgd run: while the aggregator sets up) */
    uint64_t resends; /* gradients (and pulls) sent again because their step stayed unanswered */
    /* replica working_set: steps whose keys' values were pulled and taken,
     * and the keys (a full replica: 0) */
    uint64_t pulls, pulled_keys;
    /* key caching: pull parts that named a list their shard keeps, and
     * those the shard no longer held (sent again with the keys) */
    uint64_t pulls_by_id, pull_misses;
    uint64_t snapshot_heads; /* working set: snapshots taken from their first chunk, their weights left unread */
    uint64_t unauthenticated; /* NAME.model and NAME.ctl messages without a valid tag (a job with a key) */
    uint64_t replayed; /* copies of a message its sender wrote before (fsgd/replay.h): NAME.model, NAME.ctl, and
                          NAME.data row messages (read as no rows) */
    /* Compressed downlink: replica checks that failed (then a resync), uplink
     * messages the aggregator did not apply (residual put back), residuals
     * dropped because the aggregator restarted from a checkpoint. */
    uint64_t replica_mismatch, ef_undone, ef_discarded;
    /* times the model's positions showed a gradient of this worker refused
     * though no message said so (a snapshot closed its step): the ones sent
     * on top of it were dropped and the worker started again there */
    uint64_t chain_restarts;
    double t_grad, t_encode, t_wait;
    double hop_model_ms_p50, hop_model_ms_p99; /* NAME.model produce-to-consume latency (-1: none) */
} fsgd_worker_stats_t;

/* A worker's step statistics, emitted after each gradient it sends, on the
 * worker's thread: the caller shows them (the CLI wires them to /metrics,
 * fsgd_observe_worker_step). s is valid during the call only. */
typedef void (*fsgd_worker_step_fn)(void *ctx, const fsgd_worker_stats_t *s);

/* Runs one worker on env->bus until the aggregator publishes the final
 * model, *env->stop becomes nonzero, or an error. id 0 picks a random id.
 * on_step (may be NULL) gets the stats after each gradient sent, with
 * env->ctx. */
int fsgd_worker_run(const fsgd_role_env_t *env, const fsgd_dist_job_t *job, uint32_t id, fsgd_worker_stats_t *st,
                    fsgd_worker_step_fn on_step, char *err, size_t errsz);

/* The embedded (mock) cluster keeps 5 MiB per partition and NAME.model has
 * one partition: a snapshot and the deltas after it must fit. */
#define FSGD_EMBEDDED_MAX_MODEL_WEIGHTS (1100u * 1000u)
#define FSGD_EMBEDDED_MODEL_LIMIT_MSG                                                                          \
    "a model of %llu weights needs %.1f MiB snapshots on the single-partition model topic; the embedded "    \
    "cluster keeps 5 MiB per partition, so it holds at most %llu weights (about 2^20): run against a real "  \
    "Kafka with --brokers HOST:PORT (docker compose up, or your cluster), or lower --dim (--hash-bits for a hashed format)"

/* --- aggregator --- */

typedef struct fsgd_agg_epoch {
    int epoch;
    double seconds;      /* since training started */
    double seconds_from_step1; /* since step 1 was applied (excludes the group join and startup) */
    double train_loss;   /* mean over the epoch's rows */
    uint64_t rows;       /* rows applied in the epoch */
    fsgd_metrics_t test; /* n == 0 without test data */
    /* the stats' t_grad, t_encode, t_decode, t_wait, t_update at the epoch's
     * end (before its last step's publish): an epoch's parts are the
     * differences, without the first epoch's load or the final snapshot */
    double t_at_end[5];
} fsgd_agg_epoch_t;

/* Why the aggregator dropped a message from NAME.grads; counted in
 * fsgd_agg_stats_t.rejected and in the metrics JSON as
 * messages.rejected.<name>; the first of each reason is logged with detail. */
#define FSGD_AGG_REJECT_LIST(X)                                                                               \
    X(CORRUPT, "corrupt")     /* not a valid frame or body: magic, CRC, lengths, codec message */          \
    X(FORGED, "forged")       /* well formed, but not from a member doing its step: unknown sender, a     \
                                 newer generation, rows or epoch that do not match, values out of bound */   \
    X(STALE, "stale")         /* for a step or generation already over */                                  \
    X(FUTURE, "future")       /* for a step after the one in progress */                                   \
    X(OVERSIZE, "oversize")   /* chunk or message larger than this job's can be, or reassembly full */     \
    X(DUPLICATE, "duplicate") /* a copy of a chunk or message already taken */                              \
    X(CONFLICT, "conflict")   /* rows another gradient of the step took, or not from the position */      \
    X(UNAUTH, "unauthenticated") /* the job has a key and the message (grads or ctl) has no valid tag */   \
    X(REPLAYED, "replayed") /* a copy of a message its sender wrote before (fsgd/replay.h): on NAME.grads,  \
                               NAME.ctl, or a row message of NAME.data (read as empty) */

#define FSGD_AGG_REJ_ENUM_(name, text) FSGD_AGG_REJ_##name,
typedef enum fsgd_agg_reject { FSGD_AGG_REJECT_LIST(FSGD_AGG_REJ_ENUM_) FSGD_AGG_REJ_COUNT } fsgd_agg_reject_t;
#undef FSGD_AGG_REJ_ENUM_

/* "corrupt", "forged", ... (static string). */
const char *fsgd_agg_reject_name(int reason);

/* A decoded gradient value may be at most rows * max|x| * L * this, where
 * max|x| is the largest feature value in NAME.data (or the intercept's
 * constant) and L is 1 for logistic and svm (|loss'| <= 1) and 1 + max|y|
 * for linear: no worker can send more for its rows. The slack leaves room
 * for error-feedback codecs, which carry unsent residuals across steps. */
#define FSGD_AGG_GRAD_SLACK 1024.0

typedef struct fsgd_agg_stats {
    uint64_t dataset_rows, dim;
    int partitions;
    uint32_t gen;
    uint64_t steps, empty_steps, adam_steps, rows_total;
    uint64_t rows_epoch;  /* rows applied in the current epoch */
    int epoch;
    uint64_t grads_accepted, workers_dropped, workers_live;
    /* Bounded staleness: frames that arrived before their step opened (held,
     * then taken), gradients applied that were computed on an older model
     * than the step before theirs, and the largest such lag. */
    uint64_t grads_early, grads_stale;
    unsigned lag_max;
    int tau; /* the bound in force */
    /* What the job's auto defaults chose (agg_auto.c): the values in force,
     * rows held out for early stopping (epochs auto), holdout looks, the
     * epoch (fractional) of the best look and its mean loss, whether the
     * run stopped on patience, and the epochs trained (fractional). */
    double lr, l2;
    uint64_t holdout_rows, looks, snapshot_every, batch;
    double best_epoch, holdout_loss, epochs_run;
    int stopped_early;
    uint64_t rejected[FSGD_AGG_REJ_COUNT]; /* by fsgd_agg_reject_t */
    uint64_t consumer_errors;              /* transient errors from the NAME.grads consumer */
    uint64_t held_bytes_max, held_limit;   /* reassembly: most bytes of incomplete messages held, and the bound */
    uint64_t bytes_up, bytes_model, bytes_down, raw_bytes, codec_bytes;
    /* Per step, for the benchmark: bytes a worker sent (mean over applied
     * gradient messages) and bytes each worker received (the model message). */
    uint64_t up_msgs, down_msgs, down_bytes_msg, replica_checks;
    uint64_t bytes_values; /* replica working_set: the answers to pulls (each to one worker) */
    /* key caching: pulls answered, pulls that named a kept key list, named
     * lists not held (the worker sent the keys), lists kept and their bytes */
    uint64_t pulls_answered, pulls_by_id, pull_misses, pull_lists_kept, pull_bytes_kept;
    double t_down_encode;
    char downlink[256]; /* "full" or the downlink codec spec */
    double t_grad, t_encode, t_decode, t_wait, t_update, seconds;
    /* where t_update went: the step function (fsgd/step.h), the model's
     * publish, the holdout looks, the epochs' ends (test evaluation), the
     * checkpoints; the rest is bookkeeping */
    double t_update_step, t_update_publish, t_update_look, t_update_epoch, t_update_ckpt;
    double step_ms_p50, step_ms_p99, step_ms_mean;
    double hop_grads_ms_p50, hop_grads_ms_p99; /* NAME.grads produce-to-consume latency (-1: none) */
    double last_loss;
    int resumed_from_step; /* -1: fresh start */
    uint32_t shard, shards;  /* which aggregator shard this is (0 of 1 unsharded) */
    uint64_t weights_held;   /* the shard's part of the model's weights */
    uint64_t dataset_nnz;    /* the data's nonzeros (0: not known) */
    int table_sparse;        /* the shard's table is sparse (job key table) */
    uint64_t table_keys;     /* sparse: the keys it holds (touched so far) */
    uint64_t parts_missing;  /* a following shard: ranges shard 0 applied whose gradient part never came here */
    uint64_t up_entries;     /* gradient entries decoded from applied messages: a shard's load */
    int n_epochs;              /* epochs finished, every one of them */
    fsgd_agg_epoch_t *epochs;  /* n_epochs entries (fsgd_agg_epoch_next grows it; fsgd_agg_stats_free) */
    int epochs_cap;
    fsgd_metrics_t test;
    /* Timing from step 1 (this aggregator process; restarted on a resume):
     * step1_at is seconds from the aggregator's start until step 1 was
     * applied (the consumer-group join, data loading, first exchange);
     * loss_ma is the row-weighted mean training loss of the last
     * FSGD_AGG_LOSS_WINDOW applied steps; time_to_target is seconds from step
     * 1 until loss_ma first was <= job->dist->target_loss (-1: not reached or off),
     * target_step the step at which it was; step1_clock the CLOCK_MONOTONIC
     * seconds (one origin for every process of the machine) at step 1, which
     * lines the trace up with what another process sampled meanwhile. */
    double step1_at, step1_clock, loss_ma, time_to_target;
    uint64_t target_step;
    /* Start-up: seconds waited for a settled consumer-group assignment
     * (every data partition with rows owned by exactly one of at least
     * expected_workers workers, as reported on NAME.ctl) before step 1;
     * assignment_settled 0 when the wait timed out and stepping started anyway. */
    double assignment_wait_s;
    int assignment_settled;
    /* 1: what the data topic holds came from its producer's data_summary on
     * NAME.ctl, not from reading the whole topic */
    int data_from_summary;
    /* checkpoints written by this process and the seconds they took: after
     * the first, one is written when the time since the last is at least
     * FSGD_AGG_CKPT_COST_RATIO times what that one took */
    uint64_t checkpoints;
    double checkpoint_s;
    fsgd_trace_t trace; /* loss and bytes over time, for fsgd plot (this process, from its start) */
    /* follow (continuous training, agg_follow.c): the model versions
     * published (the newest's number, kept across restarts), and progressive
     * validation: each step's rows scored by the model before that step trains
     * on them (VW's progressive loss). pv_rows and pv_logloss count every row
     * since the job began; pv_auc and pv_window_logloss the newest
     * pv_window_rows of them. */
    int init_state; /* --init: the model's optimizer state was taken too */
    int follow;
    uint64_t version;
    uint64_t pv_rows, pv_window_rows;
    double pv_logloss, pv_auc, pv_window_logloss;
} fsgd_agg_stats_t;

#define FSGD_AGG_LOSS_WINDOW 8

/* The aggregator's checkpoint pacing: 1 when a snapshot step should also
 * write the checkpoint, given the seconds since the last one ended and what
 * it took (before the first: since training began, and the cost estimated
 * from its size at FSGD_AGG_CKPT_EST_BYTES_S): once the time since is at
 * least FSGD_AGG_CKPT_COST_RATIO times the cost, so checkpoints take at most
 * about 1/FSGD_AGG_CKPT_COST_RATIO of the run. */
#define FSGD_AGG_CKPT_COST_RATIO 20
#define FSGD_AGG_CKPT_EST_BYTES_S 200e6
int fsgd_agg_ckpt_due(double since_last_s, double last_cost_s);

typedef void (*fsgd_agg_progress_fn)(void *ctx, const fsgd_agg_stats_t *s, int end_of_epoch);

/* The aggregator's step statistics, emitted after each step (empty ones
 * too) on the aggregator's thread, once the step is in s (and in s->trace,
 * which the aggregator keeps itself): the caller shows them (the CLI wires
 * them to /metrics, fsgd_observe_agg_step). strat is the strategy in force,
 * for its live parameters (fsgd_sagg_param); step_seconds the step's
 * duration, < 0 for an empty step. s and strat are valid during the call only. */
typedef void (*fsgd_agg_step_fn)(void *ctx, const fsgd_agg_stats_t *s, const fsgd_sagg_t *strat,
                                 double step_seconds);

/* Runs the aggregator: scans <job>.data (rows, dimension, offsets, labels),
 * resumes from job->dist->checkpoint when present, waits for expected_workers on
 * the first step, then steps until job->train->epochs are done; writes job->train->out and
 * job->train->metrics_json. Gradients are taken only from members of the job (a
 * worker_assignment on NAME.ctl) for the step in progress, and checked
 * (rows against the ranges they claim, values finite and within
 * FSGD_AGG_GRAD_SLACK's bound); what is dropped is counted by reason and
 * the first of each reason goes to env->log. progress (every second and at
 * each epoch end) and on_step (after each step) may be NULL; each gets
 * env->ctx. A following aggregator runs until *env->stop. */
int fsgd_aggregator_run(const fsgd_role_env_t *env, const fsgd_dist_job_t *job, int expected_workers,
                        fsgd_agg_stats_t *st, fsgd_agg_progress_fn progress, fsgd_agg_step_fn on_step, char *err,
                        size_t errsz);

/* The entry for epoch n_epochs + 1 (zeroed; the caller counts it in by
 * incrementing n_epochs), growing s->epochs; NULL when out of memory. */
fsgd_agg_epoch_t *fsgd_agg_epoch_next(fsgd_agg_stats_t *s);

/* Frees what s owns (its epochs); s stays valid and empty. NULL: no-op. */
void fsgd_agg_stats_free(fsgd_agg_stats_t *s);

/* Writes the metrics JSON of a finished (or failed) run through
 * fsgd/outfile.h (0, or FSGD_E_ARG/IO naming the path). */
int fsgd_agg_write_metrics(const fsgd_dist_job_t *job, const fsgd_agg_stats_t *st, const char *path, char *err,
                           size_t errsz);

/* What a sharded job (job->train->shards > 1) cannot do yet: epochs auto, follow,
 * init, ftrl, a codec without a sharded form. 0, or FSGD_E_ARG naming it:
 * fsgd run asks before anything starts; each aggregator shard again. */
int fsgd_agg_shards_check(const fsgd_dist_job_t *job, char *err, size_t errsz);

/* What is at a checkpoint path, by its header (lstat; never follows a
 * link): 0 nothing, 1 an fsgd checkpoint (magic FSGDCKPT), 2 a version 1
 * checkpoint of an older fsgd (FSGC, version 1), -1 anything else (another
 * kind of file, a link, a directory, unreadable). fsgd deletes a file at a
 * checkpoint path only when this says 1 or 2. */
int fsgd_ckpt_probe(const char *path);
/* The step a checkpoint file was written at (its header), or -1 when there
 * is no such file or it is not a checkpoint. */
long long fsgd_ckpt_step(const char *path);

/* A checkpoint's header: the step, generation and format version, and for
 * version 8 and later (has_ident) the shard that wrote it, the job's shard
 * count and the job's name. */
typedef struct fsgd_ckpt_info {
    long long step; /* -1: unknown */
    uint32_t gen, version;
    int has_ident;
    uint32_t shard, shards;
    char job[64];
} fsgd_ckpt_info_t;
/* Reads path's header into info: fsgd_ckpt_probe's answer (1 when info is
 * filled; the header is not checked beyond its fields: the aggregator that
 * loads the file checks all of it). */
int fsgd_ckpt_info(const char *path, fsgd_ckpt_info_t *info);

/* --- model topic --- */

/* Rebuilds the model from concatenated model-topic frames (what
 * `kcat -C -t <job>.model -e -f '%s'` prints): the last complete snapshot
 * plus every later delta. require_final: fail unless the job's final
 * snapshot was seen. On success *m owns fresh weights. With a job key
 * (auth enabled, fsgd/auth.h), frames without its tag are skipped, and on
 * success err then says how many (it is left as it was otherwise). */
int fsgd_model_assemble_stream(const uint8_t *buf, size_t len, const fsgd_auth_t *auth, int require_final,
                               fsgd_model_t *m, uint64_t *step, char *err, size_t errsz);

/* Reads <job>.model on bus from the log start to its end and assembles it
 * as above, under the bus's auth (fsgd_bus_set_auth). */
int fsgd_model_assemble_topic(struct fsgd_bus *bus, const char *job, int require_final, fsgd_model_t *m,
                              uint64_t *step, char *err, size_t errsz);
/* A reader that follows <job>.model: each read applies only the frames
 * appended since the last one to the assembler's state it keeps, and
 * copies the model out (*whole 0); the first read, and one after frames
 * not read yet were deleted or compacted away, a failed read, or any read
 * of a sharded job, read the topic from its log start (*whole 1). Same
 * model and step as fsgd_model_assemble_topic at the same ends. */
typedef struct fsgd_model_follow fsgd_model_follow_t;
fsgd_model_follow_t *fsgd_model_follow_new(struct fsgd_bus *bus, const char *job, char *err, size_t errsz);
int fsgd_model_follow_read(fsgd_model_follow_t *f, fsgd_model_t *m, uint64_t *step, int *whole, char *err,
                           size_t errsz);
void fsgd_model_follow_free(fsgd_model_follow_t *f);
/* As fsgd_model_assemble_topic, from the frames of steps up to max_step only: the model
 * at max_step (or at the newest step before it that the topic holds: see
 * *step), as a reader that saw it then assembled it. */
int fsgd_model_assemble_topic_upto(struct fsgd_bus *bus, const char *job, uint64_t max_step, fsgd_model_t *m,
                                   uint64_t *step, char *err, size_t errsz);

/* --- a job's records of its versions (NAME.ctl) ---
 *
 * What a job recorded on NAME.ctl about its model at a step: the rows it
 * had trained and its held-out metrics, from the aggregator's events
 * (KAFKA_FORMAT.md, "NAME.ctl"): `model_version` (each version of a follow
 * job), `epoch_end` and a `job_end` that is `done` (a batch job's model at
 * an epoch's end, and its final one). A reader of the model topic (fsgd
 * serve) pairs the model it assembled at step S with the record of S.
 *
 * A restarted aggregator (a `job_start` of a newer generation, resuming at
 * step C) re-runs the steps after C, and their models differ: records of
 * steps after C from older generations are dropped, and events of a
 * generation older than the newest `job_start`'s are ignored. */
typedef struct fsgd_ctl_version {
    uint64_t step;         /* the model's step */
    uint32_t gen;          /* the aggregator's generation */
    uint64_t rows;         /* rows trained by that step */
    uint64_t test_rows;    /* 0: the job had no --test set */
    double test_auc, test_logloss; /* NAN without test rows (logloss: also for SVM) */
    int64_t offset;        /* of the event on NAME.ctl; -1 when parsed from bytes */
    char event[16];        /* model_version, epoch_end or job_end */
} fsgd_ctl_version_t;

typedef struct fsgd_ctl_versions fsgd_ctl_versions_t;

/* A reader of job's NAME.ctl on bus (a consumer of its own); reads nothing
 * yet. NULL when out of memory or the client cannot be made (err set). */
fsgd_ctl_versions_t *fsgd_ctl_versions_new(struct fsgd_bus *bus, const char *job, char *err, size_t errsz);
void fsgd_ctl_versions_free(fsgd_ctl_versions_t *r);

/* Reads the events appended since the last poll (the first: from the log
 * start), each checked with fsgd_ctl_verify (the job key's tag when the
 * job has a key; unverified ones are skipped). 1 when
 * anything was read, 0 when nothing was new, FSGD_E_KAFKA (no such topic,
 * a broker down) or FSGD_E_TIMEOUT (the events up to the end seen did not
 * all arrive within timeout_ms; those read are kept) with err set. */
int fsgd_ctl_versions_poll(fsgd_ctl_versions_t *r, int timeout_ms, char *err, size_t errsz);

/* The record of step (1), or 0 when the job recorded none for it. */
int fsgd_ctl_versions_at(const fsgd_ctl_versions_t *r, uint64_t step, fsgd_ctl_version_t *out);
/* The record of the newest step (1), or 0 when there is none. */
int fsgd_ctl_versions_newest(const fsgd_ctl_versions_t *r, fsgd_ctl_version_t *out);

/* Records kept at most (the newest steps): a follow job's reader stays bounded. */
#define FSGD_CTL_VERSIONS_MAX 4096

#endif
