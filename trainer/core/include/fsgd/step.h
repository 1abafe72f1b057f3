/* One step's update from a compression strategy's reduction: the one step
 * function of fsgd train (trainer/core/train.c, codec runs) and the Kafka
 * aggregator (trainer/distributed/agg_step.c), so the two cannot drift apart.
 *
 *   the strategy's reduction (fsgd_sagg_take)
 *     FSGD_OPT_APPLY (efsign): the workers ran the optimizer; θ += the mean
 *                              of the steps the senders sent
 *     FTRL-Proximal:           the summed gradient, λ in its closed form
 *     Adam:                    the mean gradient + λθ on the touched keys
 *
 * Not thread safe: one caller per θ. */
#ifndef FSGD_STEP_H
#define FSGD_STEP_H

#include <stddef.h>

#include "fsgd/adam.h"
#include "fsgd/ftrl.h"
#include "fsgd/sparse.h"
#include "fsgd/strategy.h"

typedef struct fsgd_step_opt {
    fsgd_adam_t *adam; /* θ, Adam's state and the step count t */
    fsgd_ftrl_t *ftrl; /* non-NULL: FTRL-Proximal (its z, n) instead of Adam */
    double l2;         /* λ on the mean loss (Adam; FTRL has it in its params) */
    fsgd_sparse_t *before; /* non-NULL: receives θ before the update on out's keys */
    /* non-NULL: θ and Adam's state are indexed by this table's slots
     * (fsgd/adam.h; Adam only: FSGD_E_ARG with FTRL or efsign) */
    fsgd_sparse_table_t *table;
} fsgd_step_opt_t;

/* Takes the step's reduction from agg (fsgd_sagg_take with *info) and
 * applies it to o's θ; a step of 0 rows applies nothing (t unchanged). out
 * receives the touched keys and the values the optimizer took (the
 * downlink's keys). Returns 0, or an error code with err. */
int fsgd_step_apply(const fsgd_step_opt_t *o, fsgd_sagg_t *agg, const fsgd_step_info_t *info, fsgd_sparse_t *out,
                    char *err, size_t errsz);

#endif
