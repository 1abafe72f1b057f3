/* Private to the worker: the gradients it sent whose steps the model has not
 * closed yet, oldest first (bounded staleness: at most τ + 1 of them). Each
 * keeps its body for a resend and its ranges, which say where the worker's
 * next step starts before the model says so. */
#ifndef FSGD_INFLIGHT_H
#define FSGD_INFLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

typedef struct inflight {
    uint64_t step;
    uint32_t gen;
    uint16_t flags; /* the frame's flags (its lag) */
    int doomed;     /* an earlier gradient was not applied: this one is not counted on */
    uint64_t rows;
    fsgd_wire_range_t *ranges;
    uint32_t nranges;
    fsgd_wire_buf_t body;
} inflight_t;

typedef struct inflight_queue {
    inflight_t *e;
    size_t n, cap;
} inflight_queue_t;

/* Appends a copy of ranges and body; FSGD_E_NOMEM (queue unchanged) or 0. */
int inflight_push(inflight_queue_t *q, uint64_t step, uint32_t gen, uint16_t flags, uint64_t rows,
                  const fsgd_wire_range_t *ranges, uint32_t nranges, const uint8_t *body, size_t len);
/* Removes the oldest entry. */
void inflight_pop(inflight_queue_t *q);
void inflight_clear(inflight_queue_t *q);
void inflight_free(inflight_queue_t *q);

/* Steps sent past `step` in generation gen (they are consecutive). */
uint64_t inflight_ahead(const inflight_queue_t *q, uint32_t gen, uint64_t step);

/* pos[0..nparts) becomes base advanced by the ranges of the entries of gen
 * past step that are not doomed: where the worker's next step starts.
 * An entry with a range that starts off that chain is doomed, with every
 * later one: the model's positions (base) show that an earlier gradient of
 * the worker was refused, though no message said so (a snapshot or a plain
 * delta names no refused gradient; a resync skips steps), and the
 * aggregator refuses every gradient that starts off its positions. Returns
 * the number of entries doomed now. */
size_t inflight_project(inflight_queue_t *q, uint32_t gen, uint64_t step, const uint64_t *base, uint32_t nparts,
                        uint64_t *pos);

#endif
