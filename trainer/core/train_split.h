/* Private to trainer/core: the test rows split off the training rows. */
#ifndef FSGD_TRAIN_SPLIT_H
#define FSGD_TRAIN_SPLIT_H

#include <stdint.h>

#include "fsgd/csr.h"

/* fsgd train's test set when no --test is given: moves a pseudo-random
 * fraction of data's rows (drawn from seed, in row order) into test, which
 * is empty or NULL-initialised ({0}); binary rows stay binary. Returns 0 or
 * FSGD_E_NOMEM. */
int fsgd_train_split_test(fsgd_csr_t *data, double fraction, uint64_t seed, fsgd_csr_t *test);

#endif
