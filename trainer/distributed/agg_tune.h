/* The job's auto defaults and the held-out look of epochs auto (agg_auto.c).
 * Private to trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_TUNE_H
#define FSGD_DIST_AGG_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "agg_data.h"
#include "agg_env.h"
#include "fsgd/bus.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/holdout.h"
#include "fsgd/rowfmt.h"
#include "fsgd/sparse.h"
#include "fsgd/train_params.h"
#include "wire.h"

/* λ, lr (and β1) in force, and for epochs auto the held-out rows and the best
 * weights seen. */
typedef struct agg_tune {
    double l2, lr, alpha, beta1;
    uint64_t batch; /* rows a step (batch auto resolved) */
    fsgd_csr_t hold;          /* the held-out rows as read, until scored */
    fsgd_holdout_t holdout;   /* ... as scored (fsgd/holdout.h) */
    int track;           /* epochs auto: the best look's weights can be restored */
    fsgd_sparse_t before; /* θ at the step's keys before its update (fsgd/step.h) */
    /* θ's values before every update since the best look, oldest first:
     * written back newest first, they give the best look's θ */
    uint32_t *undo_k;
    float *undo_v;
    size_t n_undo, cap_undo;
    int looked, since_best, patience;
    double best_loss;
    uint64_t look_rows, rows_since_look;
} agg_tune_t;

/* What the auto defaults read and set besides t, made by the caller. */
typedef struct agg_auto_ctx {
    const fsgd_dist_job_t *job;
    const fsgd_rowfmt_t *fmt;  /* the held-out rows' format */
    fsgd_bus_client_t *scan_c; /* reads the held-out rows */
    const char *data_topic;
    fsgd_wire_state_t *st;     /* epochs auto: each partition's end moves back over its held-out rows */
    agg_data_t *data;          /* rows per offset; a replayed held-out message reads as empty */
    uint64_t dim;              /* the model's features: the holdout's */
    uint64_t gweights;         /* the whole model's weights: snapshot_every auto */
    int workers;               /* expected at the start: batch auto */
    uint64_t *snap_every;      /* set: snapshot_every in force */
} agg_auto_ctx_t;

/* l2, lr, batch, snapshot_every and epochs auto (after agg_scan_data):
 * fixed in t and said in e->s; epochs auto holds out the newest rows of
 * every partition. */
int agg_auto_setup(agg_tune_t *t, const agg_auto_ctx_t *c, const agg_env_t *e);

/* Rows a step (st quotas): a fraction of the data follows it (continuous
 * training: it grows); otherwise t->batch, fixed with lr at the start. */
uint64_t agg_tune_batch(const agg_tune_t *t, const fsgd_train_params_t *train, uint64_t dataset_rows);
/* Epochs done when rows_epoch rows of epoch (1-based) are applied. */
double agg_auto_epochs(uint32_t epoch, uint64_t rows_epoch, uint64_t dataset_rows);
/* 1 when agg_auto_look after a step of `rows` rows will look (and may stop the job). */
int agg_auto_look_due(const agg_tune_t *t, uint64_t rows);
/* After a step of rows (t->before: θ before its update, at its keys): a
 * holdout look of theta (mdim weights of train's model) when one is due,
 * counted in e->s at epochs_done; *stop when the holdout loss has not
 * improved for the patience. 0, or FSGD_E_NOMEM. */
int agg_auto_look(agg_tune_t *t, const agg_env_t *e, const fsgd_train_params_t *train, const float *theta, uint64_t mdim,
                  double epochs_done, uint64_t rows, int *stop);
/* The job ends (at rows_epoch rows of epoch): the best weights seen replace
 * theta when they are better; s gets the epochs run. */
void agg_auto_finish(agg_tune_t *t, fsgd_agg_stats_t *s, const fsgd_train_params_t *train, float *theta, uint32_t epoch,
                     uint64_t rows_epoch);
void agg_auto_free(agg_tune_t *t);

#endif
