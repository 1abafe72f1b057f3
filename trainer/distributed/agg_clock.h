/* The aggregator's time and the step statistics kept over it (agg_clock.c).
 * Private to trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_CLOCK_H
#define FSGD_DIST_AGG_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/dist.h"
#include "fsgd/kbus.h"

typedef struct agg_clock {
    double t0, seconds_before; /* training time before a restart */
    double t_step1;            /* when this process applied its first step (0: not yet) */
    double step_start, step_wait;
    double *step_ms;
    size_t n_step_ms, cap_step_ms;
    double win_loss[FSGD_AGG_LOSS_WINDOW];
    uint64_t win_rows[FSGD_AGG_LOSS_WINDOW];
    unsigned win_i;
    fsgd_klat_t lat_grads; /* produce-to-consume latency of NAME.grads frames */
} agg_clock_t;

/* Seconds on the monotonic clock (fsgd/clock.h). */
double agg_now(void);
/* The step that began at c->step_start took until now: one more sample of
 * the step latency (dropped when out of memory). */
void agg_clock_step_done(agg_clock_t *c);
/* Into s: the NAME.grads hop's and the steps' latency quantiles. */
void agg_clock_latency_stats(const agg_clock_t *c, fsgd_agg_stats_t *s);
/* After step `step` applied `rows` rows of loss sum `loss`: the first step's
 * time, the loss moving average over FSGD_AGG_LOSS_WINDOW steps with rows,
 * and when it first reached target_loss (> 0), into s. */
void agg_clock_track_loss(agg_clock_t *c, fsgd_agg_stats_t *s, double loss, uint64_t rows, uint64_t step,
                          double target_loss);
void agg_clock_free(agg_clock_t *c);

#endif
