/* Continuous training, job key follow (agg_follow.c): the follow state
 * (each partition's window of rows, the model versions, the progressive
 * validation figures), what it needs from the job, and the functions the
 * step loop (aggregator.c, agg_step.c) and the checkpoint (agg_checkpoint.c)
 * call. Private to trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_FOLLOW_H
#define FSGD_DIST_AGG_FOLLOW_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "agg_data.h"
#include "agg_env.h"
#include "agg_open.h"
#include "ctl.h"
#include "fsgd/bus.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/loss.h"
#include "fsgd/rowfmt.h"
#include "wire.h"

/* The follow state (agg_follow.c). An aggregator holds one only in a
 * follow job: NULL says the job is not one. */
typedef struct agg_follow agg_follow_t;

/* The job as follow sees it, made by the caller (agg_follow_ctx). */
typedef struct agg_follow_ctx {
    const fsgd_dist_job_t *job;
    const fsgd_rowfmt_t *fmt;           /* NAME.data's row format */
    fsgd_bus_client_t *scan_c;          /* reads NAME.data */
    fsgd_bus_client_t *prod;            /* sends the NAME.ctl events */
    fsgd_ctl_json_t *cj;                /* the event being written */
    const char *data_topic, *ctl_topic; /* NAME.data, NAME.ctl */
    uint32_t gen;
    uint64_t dim;                       /* the model's features, fixed when the job starts */
    const fsgd_csr_t *test;             /* the job's test rows, scored at each version (NULL: none) */
    const volatile sig_atomic_t *stop;  /* the caller's stop flag (may be NULL): set, a version is the last */
} agg_follow_ctx_t;

/* *f for nparts partitions, its first version due version_seconds from
 * now or after snap_every steps (said in e's log); e->s marks the job a
 * follow one. */
int agg_follow_setup(agg_follow_t **f, uint32_t nparts, const char *data_topic, uint64_t snap_every,
                     double version_seconds, const agg_env_t *e);
/* Frees *f (NULL: nothing) and sets it NULL. */
void agg_follow_free(agg_follow_t **f);
/* 1 while the gathered step (open) is empty, every window of st has its
 * rows applied and no new rows (nor a version) are due: the step waits
 * for data, and once a step timeout says so on NAME.ctl (step: the last
 * applied). Windows that got rows move on (st, open, d). */
int agg_follow_hold(agg_follow_t *f, const agg_follow_ctx_t *c, fsgd_wire_state_t *st, agg_open_step_t *open,
                    agg_data_t *d, uint64_t step, const agg_env_t *e);
/* Progressive validation: scores the gathered step's rows (st's positions
 * to open's) with theta before the step trains on them. */
int agg_follow_score(agg_follow_t *f, const agg_follow_ctx_t *c, const fsgd_wire_state_t *st,
                     const agg_open_step_t *open, agg_data_t *d, const float *theta, const agg_env_t *e);
/* The progressive figures into s (model: the job's loss). */
void agg_follow_stats(const agg_follow_t *f, fsgd_loss_kind_t model, fsgd_agg_stats_t *s);
/* 1 when rows were trained (rows_total so far) since the last version and
 * version_seconds have passed. */
int agg_follow_version_due(const agg_follow_t *f, uint64_t rows_total, double version_seconds);
/* After a step: windows of st's partitions that ran dry move on to new rows. */
int agg_follow_after_step(agg_follow_t *f, const agg_follow_ctx_t *c, fsgd_wire_state_t *st, agg_open_step_t *open,
                          agg_data_t *d, const agg_env_t *e);
/* A snapshot of step `step` (theta) just went out as a version: number it,
 * score it on the test rows, announce it on NAME.ctl and in the log. */
int agg_follow_published(agg_follow_t *f, const agg_follow_ctx_t *c, const fsgd_wire_state_t *st, uint64_t step,
                         const float *theta, const agg_env_t *e);
/* SIGTERM: the final version and the checkpoint are out (aggregator.c); the
 * stop at step `step` is said, with the checkpoint that continues it. */
void agg_follow_stopped(const agg_follow_t *f, uint64_t step, const char *checkpoint, const agg_env_t *e);
/* The checkpoint's follow section (agg_checkpoint.c): written into b, or
 * read from p[*off, len) (path names it in errors) into *f, made for
 * nparts partitions when NULL (a checkpoint read without a job); the
 * header's dataset rows go to e->s. */
int agg_follow_ckpt_put(const agg_follow_t *f, fsgd_wire_buf_t *b);
int agg_follow_ckpt_get(agg_follow_t **f, uint32_t nparts, const char *path, const uint8_t *p, size_t len,
                        size_t *off, const agg_env_t *e);
/* After a checkpoint was restored at step `step`: st's windows are checked
 * against the topic and read again from it. */
int agg_follow_resumed(agg_follow_t *f, const agg_follow_ctx_t *c, fsgd_wire_state_t *st, agg_data_t *d,
                       uint64_t step, const agg_env_t *e);

#endif
