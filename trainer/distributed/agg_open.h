/* The open step: the gradients gathered for it, the partitions they claim,
 * its rows and loss, and the epoch so far (agg_open.c). Private to
 * trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_OPEN_H
#define FSGD_DIST_AGG_OPEN_H

#include <stddef.h>
#include <stdint.h>

#include "agg_early.h"
#include "fsgd/dist.h"
#include "fsgd/kbus.h"
#include "fsgd/sparse.h"
#include "wire.h"

/* The step gathered (agg_gradients.c) until it is applied (agg_step.c),
 * and the epoch so far. */
typedef struct agg_open_step {
    fsgd_kasm_t *as;    /* reassembly of the step's gradient frames */
    uint8_t *claimed;   /* per partition: the step has rows of it */
    uint64_t *newpos;
    uint64_t rows_step, rows_epoch;
    double loss_step, loss_epoch;
    int first_step;
    double first_deadline;
    fsgd_sparse_t g;    /* the step's reduced gradient */
    uint32_t *applied;  /* senders whose gradients this step applied */
    size_t napplied, cap_applied;
    uint64_t up_entries_step; /* entries in this step's applied messages */
    uint64_t up_bytes_step;   /* their codec bytes */
    int tau;                  /* the staleness bound (job key staleness, strategy permitting) */
    agg_early_set_t early;    /* frames of steps after the open one, up to τ ahead (agg_early.h) */
} agg_open_step_t;

/* Opens step `step`: nothing claimed or applied yet, positions where st
 * has them; reassembly forgets frames of steps before it. */
void agg_open_begin(agg_open_step_t *o, const fsgd_wire_state_t *st, uint64_t step);
/* A gradient g of sender, `entries` entries, computed `lag` steps behind,
 * taken into the step: its ranges claimed, its rows, loss and bytes
 * counted (in s too). */
void agg_open_take(agg_open_step_t *o, fsgd_agg_stats_t *s, uint32_t sender, const fsgd_wire_grad_t *g, size_t entries,
                   unsigned lag);
void agg_open_free(agg_open_step_t *o);

#endif
