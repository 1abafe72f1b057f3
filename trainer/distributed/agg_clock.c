/* The aggregator's clock and the step statistics kept over it: step
 * latencies, the loss moving average and the time to a target loss. */
#include <stdlib.h>
#include <string.h>

#include "agg_clock.h"
#include "fsgd/clock.h"

double agg_now(void)
{
    return fsgd_clock_s();
}

void agg_clock_step_done(agg_clock_t *c)
{
    if (c->n_step_ms == c->cap_step_ms) {
        size_t nc = c->cap_step_ms ? 2 * c->cap_step_ms : 1024;
        double *ns = realloc(c->step_ms, nc * sizeof *ns);
        if (ns) {
            c->step_ms = ns;
            c->cap_step_ms = nc;
        }
    }
    if (c->n_step_ms < c->cap_step_ms)
        c->step_ms[c->n_step_ms++] = (agg_now() - c->step_start) * 1e3;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

void agg_clock_latency_stats(const agg_clock_t *c, fsgd_agg_stats_t *s)
{
    s->hop_grads_ms_p50 = fsgd_klat_quantile(&c->lat_grads, 0.5);
    s->hop_grads_ms_p99 = fsgd_klat_quantile(&c->lat_grads, 0.99);
    if (!c->n_step_ms)
        return;
    double *v = malloc(c->n_step_ms * sizeof *v);
    if (!v)
        return;
    memcpy(v, c->step_ms, c->n_step_ms * sizeof *v);
    qsort(v, c->n_step_ms, sizeof *v, cmp_d);
    double sum = 0;
    for (size_t i = 0; i < c->n_step_ms; i++)
        sum += v[i];
    s->step_ms_mean = sum / c->n_step_ms;
    s->step_ms_p50 = v[c->n_step_ms / 2];
    s->step_ms_p99 = v[(size_t)(0.99 * (c->n_step_ms - 1))];
    free(v);
}

/* Why: time from step 1, and the moving-average training loss that
 * time-to-target is measured on (the group join and data loading before
 * step 1 are left out). */
void agg_clock_track_loss(agg_clock_t *c, fsgd_agg_stats_t *s, double loss, uint64_t rows, uint64_t step,
                          double target_loss)
{
    double tnow = agg_now();
    if (c->t_step1 == 0) {
        c->t_step1 = tnow;
        s->step1_at = tnow - c->t0;
        s->step1_clock = tnow;
    }
    if (rows == 0)
        return;
    c->win_loss[c->win_i % FSGD_AGG_LOSS_WINDOW] = loss;
    c->win_rows[c->win_i % FSGD_AGG_LOSS_WINDOW] = rows;
    c->win_i++;
    double ls = 0;
    uint64_t rs = 0;
    for (unsigned i = 0; i < FSGD_AGG_LOSS_WINDOW && i < c->win_i; i++) {
        ls += c->win_loss[i];
        rs += c->win_rows[i];
    }
    s->loss_ma = ls / (double)rs;
    if (target_loss > 0 && s->time_to_target < 0 && s->loss_ma <= target_loss) {
        s->time_to_target = tnow - c->t_step1;
        s->target_step = step;
    }
}

void agg_clock_free(agg_clock_t *c)
{
    free(c->step_ms);
    c->step_ms = NULL;
    c->n_step_ms = c->cap_step_ms = 0;
}
