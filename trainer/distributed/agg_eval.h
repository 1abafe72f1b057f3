/* The model's metrics on the job's test rows (agg_eval.c): what a score
 * reads, not the whole agg_t. Private to trainer/distributed/agg_*.c and
 * aggregator.c. */
#ifndef FSGD_DIST_AGG_EVAL_H
#define FSGD_DIST_AGG_EVAL_H

#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/metrics.h"
#include "fsgd/train_params.h"
#include "agg_env.h"

/* *out: θ (dim weights, then the intercept's) scored on test with tp's
 * model kind and intercept; zeroed when test is NULL (no test rows in this
 * process). 0, or FSGD_E_NOMEM in e's error buffer. */
int agg_evaluate(const fsgd_train_params_t *tp, uint64_t dim, const float *theta, const fsgd_csr_t *test,
                 fsgd_metrics_t *out, const agg_env_t *e);

#endif
