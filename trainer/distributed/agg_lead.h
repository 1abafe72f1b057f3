/* A following shard's view of shard 0 (agg_shard.c): the leader's step
 * states it has read, by step. Private to trainer/distributed/agg_*.c and
 * aggregator.c. */
#ifndef FSGD_DIST_AGG_LEAD_H
#define FSGD_DIST_AGG_LEAD_H

#include <stdint.h>

#include "agg_open.h"
#include "wire.h"

typedef struct agg_lead agg_lead_t;

/* Frees l (NULL: nothing). */
void agg_lead_free(agg_lead_t *l);
/* 1 when shard 0's state of step `step` is in (l NULL: none is). */
int agg_lead_decided(const agg_lead_t *l, uint64_t step);
/* 1 when ranges r[0, n) end where shard 0's state of step `step` (the open
 * one) says for the positions of st: shard 0 applied them in that step. */
int agg_lead_applied(const agg_lead_t *l, const fsgd_wire_state_t *st, uint64_t step, const fsgd_wire_range_t *r,
                     uint32_t n);
/* 1 when the open step o (step `step`) claims up to where shard 0's state
 * of it ends every partition of st: the step can be applied. */
int agg_lead_complete(const agg_lead_t *l, const fsgd_wire_state_t *st, const agg_open_step_t *o, uint64_t step);

#endif
