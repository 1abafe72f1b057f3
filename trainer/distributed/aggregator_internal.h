/* Private to the aggregator (trainer/distributed/agg_*.c, aggregator.c):
 * its state and the functions its files share. */
#ifndef FSGD_AGGREGATOR_INTERNAL_H
#define FSGD_AGGREGATOR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "fsgd/adam.h"
#include "fsgd/holdout.h"
#include "fsgd/bus.h"
#include "fsgd/ftrl.h"
#include "fsgd/codec.h"
#include "fsgd/crc32c.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/libsvm.h"
#include "fsgd/rowfmt.h"
#include "fsgd/loss.h"
#include "fsgd/outfile.h"
#include "fsgd/replay.h"
#include "fsgd/reduce.h"
#include "fsgd/strategy.h"
#include "agg_ckpt.h"
#include "agg_clock.h"
#include "agg_data.h"
#include "agg_early.h"
#include "agg_env.h"
#include "agg_eval.h"
#include "agg_follow.h"
#include "agg_intake.h"
#include "agg_lead.h"
#include "agg_members.h"
#include "agg_model.h"
#include "agg_open.h"
#include "agg_pull.h"
#include "agg_shard.h"
#include "agg_tune.h"
#include "agg_twin.h"
#include "ctl.h"
#include "job_topics.h"
#include "pull_cache.h"
#include "wire.h"

/* The aggregator's state, by part. Each part has its own struct and header
 * (agg_members.h, agg_open.h, agg_early.h, agg_model.h, agg_tune.h,
 * agg_clock.h, agg_ckpt.h, agg_lead.h, agg_pull.h, agg_twin.h, agg_data.h,
 * agg_follow.h, agg_intake.h), and its functions take that struct and, to
 * report, an agg_env_t (agg_env.h); one that keeps no state takes only
 * what it reads (agg_eval.h, agg_shard.h); one that reads and writes
 * several parts takes a context of pointers to them (agg_ckpt.h: agg_ckpt_ctx_t, made by
 * agg_ckpt_ctx; agg_follow.h: agg_follow_ctx_t, by agg_follow_ctx;
 * agg_members.h: agg_ctl_ctx_t, NAME.ctl's events and reports, by
 * agg_ctl_ctx; agg_lead.h: agg_lead_ctx_t, by agg_lead_ctx; agg_intake.h:
 * agg_intake_ctx_t, NAME.grads' intake, by agg_intake_ctx; agg_model.h:
 * agg_publish_ctx_t, a model message, by agg_publish_ctx, and
 * agg_init_ctx_t, --init's load; agg_tune.h: agg_auto_ctx_t, the auto
 * defaults; agg_shard.h: agg_shard_final_ctx_t); a function that
 * orchestrates several parts (the step loop, agg_apply_step) takes agg_t. */

typedef struct agg {
    /* the job, its topics and data (agg_scan.c) */
    const fsgd_dist_job_t *job;
    fsgd_rowfmt_t fmt; /* the job's row format: NAME.data, the test file, the model's input spec */
    fsgd_agg_stats_t *s;
    job_topics_t topic;
    fsgd_bus_client_t *prod, *grads_c, *scan_c, *ctl_c;
    /* replayed copies (fsgd/replay.h) of NAME.grads and NAME.ctl; of
     * NAME.data's rows: data.replay_rows */
    fsgd_replay_t *replay_grads, *replay_ctl;
    fsgd_ctl_json_t cj;
    uint32_t gen;
    uint64_t step; /* last applied step */
    fsgd_wire_state_t st;
    uint64_t dim, mdim; /* features; weights this process holds (its shard's part) */
    uint64_t gweights;  /* the whole model's weights (= mdim unsharded) */
    uint32_t shard, shards; /* agg_shard.c: which keys this process owns */
    struct agg_lead *lead;  /* a following shard: shard 0's step states (agg_shard.c) */
    int stopped;            /* *crash: ended as a killed process, publishing nothing */
    volatile sig_atomic_t *stop;  /* the caller's (fsgd_role_env_t): a following aggregator finishes */
    volatile sig_atomic_t *crash; /* the caller's (tests): stop as a killed process would */
    fsgd_bus_t *bus;        /* the bus the clients come from (shard 0 assembles the model on it) */
    fsgd_auth_t *auth;      /* the bus's: the job's key and name (fsgd_bus_set_auth) */
    fsgd_csr_t test;
    int have_test;
    agg_follow_t *follow; /* job key follow: continuous training (agg_follow.h); NULL otherwise */

    agg_members_t members;
    agg_open_step_t open;
    agg_model_state_t model;
    agg_tune_t tune;
    agg_clock_t clock;
    agg_ckpt_state_t ckpt;
    agg_pull_t pull;
    agg_twin_t twin;
    agg_data_t data; /* what the scan of NAME.data found (agg_scan.c) */

    /* what the aggregator says, and to whom: agg_env(a) is the view of
     * these (and of s) that the parts take */
    fsgd_dist_log_fn log;
    fsgd_agg_step_fn on_step; /* the caller's step hook (may be NULL), with log_ctx */
    void *log_ctx;
    uint8_t logged[FSGD_AGG_REJ_COUNT];
    agg_intake_t intake; /* NAME.grads consumer errors logged (agg_intake.h) */
    double last_wait_log;
    char *err;
    size_t errsz;
} agg_t;

/* aggregator.c: the main loop and what every part uses */
/* The part of a that every part reports through (agg_env.h): a view, valid
 * while a is. */
agg_env_t agg_env(agg_t *a);
/* The part of a that continuous training reads (agg_follow.h): a view,
 * valid while a is and its generation stays. */
agg_follow_ctx_t agg_follow_ctx(agg_t *a);
/* The part of a that a following shard's tracking of shard 0 reads and
 * sets (agg_lead.h): a view, valid while a is and its step stays. */
agg_lead_ctx_t agg_lead_ctx(agg_t *a);
/* FSGD_E_STATE (and a->stopped) once *a->crash is set. */
int agg_crashed(agg_t *a);
void agg_log(agg_t *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Counts a dropped message; the first of each reason is logged with its
 * detail (the rest only counted: a flood must not flood the log too). */
void agg_reject(agg_t *a, int reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The same for a message of topic (NAME.ctl, NAME.data) rather than NAME.grads. */
void agg_reject_on(agg_t *a, const char *topic, int reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The parts of a that a checkpoint writes and restores (agg_ckpt.h): a
 * view, valid while a is. */
agg_ckpt_ctx_t agg_ckpt_ctx(agg_t *a);
/* NAME.ctl as a's events and membership use it (agg_members.h): made where
 * it is used, its gen and step being a's then. */
agg_ctl_ctx_t agg_ctl_ctx(agg_t *a);
/* The parts of a that NAME.grads' intake reads and writes (agg_intake.h):
 * made where a message or the held frames are taken, its gen and step
 * being a's then. */
agg_intake_ctx_t agg_intake_ctx(agg_t *a);
/* What a's model message reads and writes (agg_model.h): made where it
 * publishes, its gen, step and live workers being a's then. */
agg_publish_ctx_t agg_publish_ctx(agg_t *a);

/* agg_step.c: closing a step */
/* B rows a step split over the partitions of st that still have rows
 * (st->quota). */
void agg_set_quota(fsgd_wire_state_t *st, uint64_t B);
void agg_begin_step(agg_t *a);
int agg_apply_step(agg_t *a, int *done, fsgd_agg_progress_fn progress, void *ctx);

/* agg_metrics.c: a closed step's point in the trace, then the caller's step
 * hook (step_seconds < 0: an empty step) */
void agg_step_emit(const agg_env_t *e, const fsgd_sagg_t *strat, double step_seconds);

#endif
