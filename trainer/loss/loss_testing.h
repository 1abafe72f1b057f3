/* Private to trainer/loss/ and its tests (the Makefile's PRIVATE_trainer/loss):
 * the derivative as a function, for tests that check it against the value's
 * finite differences. The backends inline fsgd_loss_formula_deriv
 * (fsgd/loss_formulas.h) instead. */
#ifndef FSGD_LOSS_TESTING_H
#define FSGD_LOSS_TESTING_H

#include "fsgd/loss.h"

/* d loss / d m (a subgradient for hinge: 0 at the kink); y mapped by
 * fsgd_loss_label. */
double fsgd_loss_deriv(fsgd_loss_kind_t k, double m, double y);

#endif
