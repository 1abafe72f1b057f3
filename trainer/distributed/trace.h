/* Private to trainer/distributed/ and its tests (the Makefile's
 * PRIVATE_trainer/distributed): filling and writing a run's trace; the
 * trace itself (fsgd_trace_t, inside the aggregator's stats) is in
 * fsgd/dist.h. */
#ifndef FSGD_DIST_TRACE_H
#define FSGD_DIST_TRACE_H

#include <stdio.h>

#include "fsgd/dist.h"

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
