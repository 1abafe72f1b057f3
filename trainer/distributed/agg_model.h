/* The model, its optimizer and strategy, and what goes down the model topic
 * (agg_model.c, agg_init.c). Private to trainer/distributed/agg_*.c and
 * aggregator.c. */
#ifndef FSGD_DIST_AGG_MODEL_H
#define FSGD_DIST_AGG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "fsgd/adam.h"
#include "fsgd/bus.h"
#include "fsgd/ftrl.h"
#include "fsgd/dist.h"
#include "fsgd/rowfmt.h"
#include "fsgd/strategy.h"
#include "fsgd/train_params.h"
#include "agg_env.h"
#include "agg_open.h"
#include "wire.h"

typedef struct agg_model_state {
    fsgd_adam_t adam;
    /* non-NULL: a sparse table (job key table): adam holds the keys ever
     * touched, at their slots (fsgd/adam.h); NULL: dense, at the keys */
    fsgd_sparse_table_t *table;
    /* a thread mapping adam's pages before the steps need them (agg_model.c) */
    pthread_t pages_tid;
    int pages_running;
    /* optimizer ftrl: FTRL-Proximal's z and n live in adam.m and adam.v
     * (unused then), so checkpoints carry them unchanged */
    int ftrl_on;
    fsgd_ftrl_t ftrl;
    fsgd_sagg_t *strat;      /* the strategy: decodes and reduces the step, codes the downlink (fsgd/strategy.h) */
    struct fsgd_model *init; /* job key init: the model to start from, until applied (agg_init.c) */
    fsgd_wire_buf_t buf;     /* the model message being built */
    fsgd_sparse_t dec;       /* the touched keys' values of a float32 delta */
    /* The coded downlink's message (the strategy holds the downlink itself:
     * fsgd_sagg_downlink_coded; without one, touched keys' float32 values
     * go down, kind 4). */
    uint8_t *dmsg;
    size_t dmsg_cap;
    double down_scale;   /* downlink budget / mean uplink entries, steered so down bytes <= up bytes */
    uint64_t snap_every; /* snapshot_every in force (auto resolved) */
} agg_model_state_t;

/* What a model message reads and writes besides the model, made by the
 * caller (agg_publish_ctx) where it publishes: valid while the aggregator
 * is and its step stays. */
typedef struct agg_publish_ctx {
    const fsgd_dist_job_t *job;
    agg_model_state_t *model;    /* θ, the strategy, the message buffer */
    agg_open_step_t *open;       /* the step's applied senders (sorted here) and uplink: a coded delta's budget */
    const fsgd_wire_state_t *st; /* the step state the message carries */
    fsgd_bus_client_t *prod;
    const char *model_topic;
    uint32_t gen, shard, shards;
    uint64_t step;          /* last applied: the step the message closes */
    uint64_t dim, gweights; /* a snapshot's features and whole-model weights */
    size_t nlive;           /* live workers: the down bytes count once each */
} agg_publish_ctx_t;

/* job->downlink: "full" sends float32 values; "auto" compresses with what
 * the strategy says (its uplink codec when that is lossy; a lossless one
 * gets the exact values it promises); anything else is a lossy codec spec
 * of its own. Working-set workers pull their values instead: *pull_halves
 * says whether those go as binary16. Said in e->s. */
int agg_downlink_setup(agg_model_state_t *m, const fsgd_dist_job_t *job, int *pull_halves, const agg_env_t *e);
/* The step's model message (a snapshot, or the touched keys' update) on
 * the model topic; final marks the job's last. */
int agg_publish(const agg_publish_ctx_t *c, const agg_env_t *e, int snapshot, int final, const uint32_t *keys,
                size_t n);

/* agg_table.c: the shard's table, dense or sparse (job key table), for a
 * shard of mdim weights of a job of shards whose data has nnz nonzeros (0:
 * unknown): 1 sparse, 0 dense, FSGD_E_ARG when sparse was asked where it
 * cannot be; why says which and why, for the log or the error. */
int agg_table_choose(const fsgd_dist_job_t *job, uint32_t shards, uint64_t mdim, uint64_t nnz, char *why,
                     size_t whysz);
/* The keys a new sparse table has room for before it first grows. */
uint64_t agg_table_start_keys(uint64_t mdim, uint64_t nnz, uint32_t shards);
/* The sparse table's weights as a snapshot of head's model (the pairs
 * form, keys increasing) into b. Returns 0 or FSGD_E_NOMEM. */
int agg_table_snapshot(const agg_model_state_t *m, const fsgd_wire_model_t *head, fsgd_wire_buf_t *b);

/* Maps the optimizer's pages on a thread of their own (fsgd_adam_map_pages),
 * while the job starts; agg_pages_join waits for it and must come before
 * the optimizer is freed. Without a thread the pages fault at first use. */
void agg_pages_start(agg_model_state_t *m);
void agg_pages_join(agg_model_state_t *m);
/* Joins the pages thread, then frees the optimizer, the strategy, the
 * message buffers and a model to start from still held. */
void agg_model_free(agg_model_state_t *m);
/* What --init's load reads and sets, made by the caller. */
typedef struct agg_init_ctx {
    const fsgd_dist_job_t *job;
    const fsgd_rowfmt_t *fmt; /* the job's input spec: the model's must match */
    uint64_t *dim;            /* the data's; the model's when larger and the job fixes none */
    uint64_t *mdim, *gweights; /* set from *dim */
} agg_init_ctx_t;

/* agg_init.c: --init MODEL into m->init (after agg_scan_data: checks it
 * against the job and the data, may take its dim); agg_init_apply once the
 * optimizer is allocated. */
int agg_init_load(agg_model_state_t *m, const agg_init_ctx_t *c, const agg_env_t *e);
/* --init's model (m->init) into the optimizer allocated for mdim weights
 * of train's model: its weights and, when of train's kind, its optimizer
 * state (said through e); m->init is freed. */
int agg_init_apply(agg_model_state_t *m, const agg_env_t *e, const fsgd_train_params_t *train, uint64_t mdim);
/* The model to start from (job key init), if still held. */
void agg_init_free(agg_model_state_t *m);

#endif
