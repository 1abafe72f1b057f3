/* A bounded trace of a run for plots (fsgd plot): (time, step, loss,
 * bytes) points, thinned as it grows so a run of any length keeps at most
 * FSGD_TRACE_MAX evenly spaced points plus its last one. Plain data, no
 * allocation: it lives inside the aggregator's stats. */
#ifndef FSGD_TRACE_H
#define FSGD_TRACE_H

#include <stdint.h>
#include <stdio.h>

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

/* Offers a point: kept when it falls on the stride; when the trace is full
 * every other point is dropped and the stride doubles. */
void fsgd_trace_add(fsgd_trace_t *t, const fsgd_trace_point_t *pt);

/* Writes `"trace": {...}` (no trailing comma or newline) into a JSON
 * object being written to f: column arrays seconds_from_step1 (seconds
 * minus t0), step, rows, loss, bytes_up, bytes_down, bits, energy, the
 * kept points then the last one when it was not kept. Non-finite values are
 * written as null. */
void fsgd_trace_write_json(FILE *f, const fsgd_trace_t *t, double t0);

#endif
