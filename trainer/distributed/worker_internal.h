/* Private to the worker (trainer/distributed/worker*.c): its state and the
 * functions its files share. The files, each below the ones that call it:
 *   worker.c        the loop: waiting, stepping, resending, fsgd_worker_run
 *   worker_setup.c  the clients and what they read; the end (group left, memory freed)
 *   worker_model.c  NAME.model and NAME.ctl: snapshots, deltas, shards' parts
 *   worker_send.c   a step: rows, gradient, its parts, the sends
 *   worker_pull.c   replica working_set: a step's keys asked for, their values taken
 *   worker_cache.c  NAME.data's partitions, read once and cached
 *   worker_util.c   the rejection count and log, what a waiting worker says */
#ifndef FSGD_WORKER_INTERNAL_H
#define FSGD_WORKER_INTERNAL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/backend.h"
#include "fsgd/bus.h"
#include "fsgd/codec.h"
#include "fsgd/strategy.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/downlink.h"
#include "fsgd/error.h"
#include "fsgd/hugepages.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/replay.h"
#include "fsgd/rowfmt.h"
#include "fsgd/shard.h"
#include "fsgd/train.h"
#include "ctl.h"
#include "inflight.h"
#include "job_topics.h"
#include "pull_cache.h"
#include "wire.h"

typedef struct pcache {
    int loaded;
    int raw; /* read before the model's shape was known: no intercept, dimension unchecked */
    int bias_slot; /* raw rows end with a slot for the intercept (col 0 until the model's dim is known) */
    uint64_t start, end;
    fsgd_csr_t rows;  /* parsed rows, bias column appended */
    uint64_t *row_of; /* end - start + 1 entries: first row of each offset */
} pcache_t;

typedef struct worker {
    const fsgd_dist_job_t *job;
    fsgd_rowfmt_t fmt; /* how message values parse: the job's format */
    uint32_t id;
    job_topics_t topic;
    fsgd_bus_client_t *group, *fetch, *model_c, *prod;
    /* replayed copies (fsgd/replay.h): NAME.data rows (fetch), NAME.model, NAME.ctl */
    fsgd_replay_t *replay_rows, *replay_model, *replay_ctl;
    fsgd_auth_t *auth; /* the bus's: the job's key and name (fsgd_bus_set_auth) */
    int32_t *assigned;
    int nassigned, have_assignment;
    int assign_dirty; /* report the assignment on NAME.ctl */
    double reported_at; /* when it was last reported (again every few seconds until the first model) */
    fsgd_ctl_json_t cj;
    int valid, final;
    uint32_t gen;
    uint64_t step;
    fsgd_wire_state_t st;
    uint64_t dim, mdim;
    int has_bias;
    float bias;
    uint32_t kind;
    /* θ: the whole model (replica full), or (replica working_set) only
     * the step's pulled values, at its batch's local columns (theta_cap
     * of them; the backend is made for that many) */
    float *theta;
    uint64_t theta_cap;
    const uint32_t *local_keys; /* working set: the global key of each local column, during a step */
    struct head_taken {         /* working set: the last snapshot of each shard taken from its first chunk */
        int valid;
        uint32_t gen;
        uint64_t step;
    } head_taken[FSGD_SHARDS_MAX];
    fsgd_backend_t *be;
    fsgd_sworker_t *strat; /* the compression strategy (fsgd/strategy.h) */
    pcache_t *cache;
    uint32_t ncache;
    int64_t *wm_lo, *wm_hi; /* NAME.data's watermarks as last asked (ncache of each), NULL before */
    fsgd_kasm_t *as;
    fsgd_csr_t batch, tmp;
    fsgd_sparse_t g, delta;
    fsgd_wire_buf_t buf;
    uint8_t *enc;
    size_t enc_cap;
    uint32_t sent_gen;
    uint64_t sent_step;
    double sent_at, last_send; /* w->buf keeps the body sent last, for a resend */
    int kerr_seen[16], n_kerr;
    fsgd_worker_stats_t *stats;
    fsgd_dist_log_fn log;
    fsgd_worker_step_fn on_step; /* the caller's step hook (may be NULL), with log_ctx */
    void *log_ctx;
    uint8_t logged_corrupt, logged_dup, logged_unauth, logged_replay;
    int rc;
    char *err;
    size_t errsz;
    fsgd_klat_t lat_model; /* produce-to-consume latency of NAME.model frames */
    int tau;                   /* bounded delay: steps this worker may run past its model */
    int hold;                  /* the assignment changed: no step ahead until the model catches up */
    inflight_queue_t fl;       /* gradients sent whose steps are not closed yet */
    uint64_t *next_pos;        /* per partition: where this worker's next step starts */
    /* Generations NAME.ctl announced (job_start): a model message of a newer
     * one could not come from this job's run. ctl_read: NAME.ctl is followed */
    int ctl_read;
    uint32_t ctl_gen;
    uint64_t ctl_step;
    /* the newest snapshot of a generation not announced yet, kept until its
     * job_start comes (the two topics are not ordered against each other) */
    fsgd_kframe_t parked_f;
    uint8_t *parked;
    size_t parked_len;
    int64_t parked_off;
    int prefetch_due;       /* the producer's data_summary came: read partitions before the first model */
    int prefetch_done;      /* ... and they were read to the end */
    int prefetch_on;        /* a real broker: read ahead (the embedded cluster reads partitions slowly) */
    double prefetch_last;   /* when the assigned partitions were last read on (while the producer writes) */
    int prefetch_parts;     /* partitions read ahead */
    /* A sharded job (job key shards S > 1): shard I's model messages come
     * with sender I on partition I of NAME.model and hold its keys as local
     * keys (fsgd/shard.h); each has its own step, and the worker's model is
     * at the oldest of them, with shard 0's (the leader's) step state of
     * that step. Each shard's part of a gradient has its own strategy. */
    uint32_t shards;
    uint64_t sh_step[FSGD_SHARDS_MAX];
    int sh_valid[FSGD_SHARDS_MAX];
    fsgd_sworker_t *sh_strat[FSGD_SHARDS_MAX];
    fsgd_sparse_t sh_part[FSGD_SHARDS_MAX];
    struct lead_state {      /* shard 0's states of the steps the others have not reached */
        uint64_t step;
        int final;
        fsgd_wire_state_t st;
    } *lead;
    size_t nlead, cap_lead;
    /* Waiting: wait_kind 0 not, 1 for a model (none yet, or a resync), 2
     * on the model with gradients unanswered; since when, when it was last
     * said, and when a message last came on the model topic. */
    int wait_kind;
    double wait_since, wait_logged, model_seen;
    double agg_idle_seen; /* the aggregator's last aggregator_waiting: it holds its step for rows */
    /* Job key replica working_set (worker_pull.c): θ holds only the values
     * of the keys pulled for the steps being computed (the model messages
     * carry no values). Two plans: the next step's, and, τ permitting, the
     * one after it, pulled while the first is computed. */
    struct worker_pull {
        int on;
        fsgd_kasm_t *as;      /* reassembly of answers */
        fsgd_replay_t *replay; /* copies of answers their shard wrote before (fsgd/replay.h) */
        struct pull_plan {
            int pending, answered; /* answered: every shard's part */
            uint32_t gen;
            uint64_t step, ahead, at; /* the step, steps ahead of the model then, the oldest answer's model step */
            fsgd_csr_t batch;     /* its rows */
            fsgd_wire_range_t *rg;
            uint32_t nr, cap_rg;
            uint32_t *keys;       /* the rows' keys, strictly increasing */
            size_t n, cap;
            /* what each shard is asked for (one part unsharded): its keys
             * as local keys (fsgd/shard.h), the pull sent (for a resend) */
            float *vals;          /* the keys' pulled values, as they come */
            size_t cap_vals;
            uint64_t *slots;      /* col -> local column, an open-addressing table (plan_keys) */
            size_t cap_slots;
            struct pull_part {
                uint32_t *keys;
                uint32_t *at;     /* each key's index in the plan's keys */
                size_t n, cap;
                uint32_t crc; /* CRC32C of the key block */
                fsgd_wire_buf_t body;
                uint64_t id;          /* the key block's pull_list_id */
                int by_id;            /* the shard keeps the list: ref is sent, not body */
                fsgd_wire_buf_t ref;
                int answered;
            } part[FSGD_SHARDS_MAX];
            uint32_t nanswered;
            double sent_at;
        } plan[2];
        pull_known_t known[FSGD_SHARDS_MAX]; /* the key lists each shard said it keeps (pull_cache.h) */
    } pull;
} worker_t;

/* A worker waiting on the model says so every 3 step timeouts (1 to 30 s),
 * and gives up after WAIT_GIVE_UP_STEPS step timeouts (10 min by default)
 * without a single message on the model topic: the aggregator (or a shard)
 * is gone, and nothing else would end the wait (fsgd run restarts a dead
 * shard in seconds; an aggregator that ends says so on NAME.ctl). */
#define WAIT_SAY_STEPS 3
#define WAIT_SAY_MAX_S 30.0
#define WAIT_GIVE_UP_STEPS 60

/* How often the partitions are read on while the producer writes them. */
#define PREFETCH_EVERY_S 0.05

/* worker_setup.c: 0, or an error in w->err (worker_close frees what was
 * made); worker_close also frees w */
int worker_open(worker_t *w, fsgd_bus_t *bus);
void worker_close(worker_t *w);

/* worker_util.c */
/* Each turn of the loop (ready: worker_may_send's answer): a worker
 * waiting on the model says so now and then, and gives up (FSGD_E_TIMEOUT)
 * when nothing has come for the give-up time. */
int worker_check_model_wait(worker_t *w, int ready);
/* Reports this worker's data partitions on NAME.ctl (the aggregator waits
 * for a settled assignment before step 1): event worker_assignment or
 * worker_leave. */
void worker_report_assignment(worker_t *w, const char *event);
/* The assignment's report when it changed, or again before the first model. */
void worker_report_if_due(worker_t *w);
/* Counts a dropped model message; the first of each reason is logged. */
void worker_reject(worker_t *w, int corrupt, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* corrupt: 1 corrupt, 0 duplicate, REJECT_UNAUTH without a valid tag,
 * REJECT_REPLAY a copy of a message its sender wrote before */
#define REJECT_UNAUTH 2
#define REJECT_REPLAY 3

/* worker_cache.c: the partitions of NAME.data this worker reads */
int worker_load_pending(worker_t *w);
int worker_load_partition(worker_t *w, uint32_t p);
void worker_prefetch_more(worker_t *w);

/* worker_model.c: a message of NAME.model or NAME.ctl, applied or dropped */
int worker_handle_model(worker_t *w, const fsgd_bus_msg_t *m);
void worker_unpark(worker_t *w, int count);

/* worker_send.c: the next step's gradient */
int worker_may_send(worker_t *w);
/* The rows of the next step into w->batch, and their offset ranges (room
 * for w->nassigned) */
int worker_select_rows(worker_t *w, fsgd_wire_range_t *rg, uint32_t *nranges);
/* The gradient of w->batch for step s, computed on the model of step
 * s - 1 - lag, encoded and sent; the ranges become the next positions. */
int worker_send_step(worker_t *w, uint64_t s, uint64_t lag, const fsgd_wire_range_t *rg, uint32_t nr);
/* worker_theta.c: room in θ (and the backend) for n weights (a working-set
 * worker's θ grows with its steps' keys, never to the model's size; it
 * starts at WORKER_WS_THETA_FIRST). */
#define WORKER_WS_THETA_FIRST 65536
int worker_theta_reserve(worker_t *w, uint64_t n);
int worker_resend_body(worker_t *w, const inflight_t *e);
int worker_do_step(worker_t *w);

/* worker_pull.c: replica working_set */
/* After w->prod: NAME.pull made if missing. */
int worker_pull_open(worker_t *w);
void worker_pull_free(worker_t *w);
/* The next step: its keys asked for, or, once answered, its gradient sent. */
int worker_pull_step(worker_t *w);
/* A message of this worker's partition of NAME.pull. */
int worker_take_values(worker_t *w, const fsgd_bus_msg_t *m);
/* 1 while the next step's values are on their way. */
static inline int worker_pull_waiting(const worker_t *w)
{
    return w->pull.plan[0].pending && !w->pull.plan[0].answered;
}
/* The pulls sent again whose answers are resend_s late. Returns 0 or an error. */
int worker_pull_resend(worker_t *w, double resend_s);
/* This worker's partition of NAME.pull, from its end (answers to come). */
fsgd_bus_tp_t worker_pull_partition(worker_t *w);

#endif
