/* Private to strategy/ and its tests (the Makefile's PRIVATE_strategy):
 * what tests check of a worker's error-feedback state. */
#ifndef FSGD_STRATEGY_TESTING_H
#define FSGD_STRATEGY_TESTING_H

#include <stddef.h>

#include "fsgd/strategy.h"

/* Entries held in error-feedback state (residual). */
size_t fsgd_sworker_residual_entries(const fsgd_sworker_t *w);

#endif
