/* What the aggregator's start-up read of the data topic NAME.data finds
 * (agg_scan.c) and the rest of the job reads: the rows per offset, the
 * labels, the value bounds, and the verdicts on replayed row messages.
 * Private to trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_DATA_H
#define FSGD_DIST_AGG_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "agg_env.h"
#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/loss.h"
#include "fsgd/replay.h"
#include "fsgd/rowfmt.h"
#include "wire.h"

typedef struct agg_data {
    uint64_t **rows_at; /* per partition: rows before offset (start + i) */
    fsgd_label_set_t labels;
    double xmax, ymax; /* largest |feature value| (intercept included) and |label| in NAME.data */
    double xsum;       /* Σ|feature value| over its nonzeros, intercept not (lr auto; 0: not known) */
    /* replayed copies of NAME.data's rows (fsgd/replay.h), for every read of
     * the scan's client: one verdict per offset, whoever reads it */
    fsgd_replay_t *replay_rows;
} agg_data_t;

/* The job as the scan sees it, made by the caller. */
typedef struct agg_scan_ctx {
    const fsgd_dist_job_t *job;
    const fsgd_rowfmt_t *fmt; /* the job's row format */
    fsgd_bus_client_t *scan_c;
    fsgd_auth_t *auth; /* the bus's: counts the rows it skipped without the job key's tag */
    const char *data_topic, *model_topic;
} agg_scan_ctx_t;

/* 1 when the NAME.data row message (partition, offset) a read_range
 * callback of the scan's client has is a replayed copy (fsgd/replay.h),
 * counted as a rejection on data_topic; the reader reads it as an empty
 * message, as every worker does. 0 fresh, < 0 an error in err. */
int agg_row_replayed(agg_data_t *d, const char *data_topic, const agg_env_t *e, int32_t partition, int64_t offset,
                     char *err, size_t errsz);

/* Started by fsgd run while its producer still writes NAME.data
 * (environment FSGD_AGG_AWAIT_FD: a pipe from fsgd run), the aggregator
 * opens its clients and reads the test set meanwhile, then waits here for
 * the pipe's "1" (the data is written), saying every 10 s what it waits
 * for; the pipe closed without it is an error. Without the variable it
 * returns at once. */
int agg_await_producer(const char *data_topic, const agg_env_t *e);

/* The data topic's rows into d and the epoch's offsets into st (allocated
 * here), from the producer's summary or a scan of every partition; the
 * dataset statistics into e->s. *dim: the data's dimension (a hashed
 * format's 2^bits, the job's, else the largest feature), which the caller
 * gives the model (agg_shard_dims). */
int agg_scan_data(agg_data_t *d, fsgd_wire_state_t *st, const agg_scan_ctx_t *c, const agg_env_t *e, uint64_t *dim);

/* FSGD_E_ARG when NAME.model ends with the final model of a finished job. */
int agg_check_model_topic(const agg_scan_ctx_t *c, const agg_env_t *e);

/* nparts: the partitions of the step state rows_at was made for. */
void agg_data_free(agg_data_t *d, uint32_t nparts);

#endif
