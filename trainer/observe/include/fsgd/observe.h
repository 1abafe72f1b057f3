/* What a distributed role shows while it runs: its metrics on /metrics
 * (fsgd/prom.h) for Prometheus, read from the role's own stats struct.
 *
 * The roles know nothing of this: they emit their stats through their step
 * hooks (fsgd_agg_step_fn, fsgd_worker_step_fn in fsgd/dist.h), and the
 * caller (the CLI) passes them on to the functions below. One role per
 * process (fsgd aggregator, fsgd worker), so the state is process-wide:
 * fsgd_observe_start before the role runs, one call per step from the
 * role's hook, fsgd_observe_stop at the end. Without a start the step
 * functions do nothing. Start, stop and the step functions run on the
 * role's thread; the HTTP thread only renders the registry, under its lock. */
#ifndef FSGD_OBSERVE_H
#define FSGD_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/dist.h"
#include "fsgd/strategy.h"

/* Serves this process's metrics on addr:port (addr NULL or "": 127.0.0.1;
 * port 0: any free port). role is "aggregator" or "worker"; worker is the
 * worker's id (0 for the aggregator). Labels: every series of a role
 * carries none but its own (direction, phase, reason ...); who and what
 * the process is goes in fsgd_job_info{job, role, worker, strategy}. The
 * strategy's parameters (the codec spec's numeric values) are
 * fsgd_strategy_param{strategy, param}. *bound gets the port (may be
 * NULL). 0, or FSGD_E_ARG/IO/STATE (started twice) with err set. */
int fsgd_observe_start(const fsgd_dist_job_t *job, const char *role, uint32_t worker, const char *addr, int port,
                       int *bound, char *err, size_t errsz);

/* Stops the server and frees the registry; a no-op when not started. */
void fsgd_observe_stop(void);

/* An aggregator's step (what its fsgd_agg_step_fn gets): when started,
 * copies s into the metrics, observes step_seconds (< 0: an empty step, not
 * observed) in fsgd_step_duration_seconds and sets fsgd_strategy_param from
 * the parameters strat uses now (fsgd_sagg_param: "bits", ...; strat may be
 * NULL). A no-op when not started. */
void fsgd_observe_agg_step(const fsgd_agg_stats_t *s, const fsgd_sagg_t *strat, double step_seconds);

/* A worker's step (what its fsgd_worker_step_fn gets, after a gradient is
 * sent): copies s into the metrics and observes the time since the previous
 * call as the step's duration. A no-op when not started. */
void fsgd_observe_worker_step(const fsgd_worker_stats_t *s);

#endif
