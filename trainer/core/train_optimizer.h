/* fsgd train's optimizer set-up and saved state (private to core). */
#ifndef FSGD_TRAIN_OPTIMIZER_H
#define FSGD_TRAIN_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/model.h"
#include "fsgd/train.h"
#include "train_engine.h"

/* The optimizer of fsgd train: λ and lr for n_fit rows in steps of B (auto
 * or the job's), Adam with per-key counts (lr auto) or FTRL-Proximal, and a
 * warm start from init (its optimizer state too when it is this run's
 * kind). t->adam is allocated. FSGD_E_ARG with err for FTRL parameters
 * that make no sense; other errors without a message. */
int fsgd_train_setup_optimizer(trainer_t *t, uint64_t model_dim, size_t n_fit, size_t B, const fsgd_model_t *init,
                               fsgd_train_stats_t *stats, char *err, size_t errsz);

/* --save-state: the optimizer's per-key state of every key that has any,
 * into the model (fsgd/model.h). 0 or FSGD_E_NOMEM. */
int fsgd_train_save_state(const trainer_t *t, fsgd_model_state_kind_t kind, uint64_t model_dim, fsgd_model_t *model);

#endif
