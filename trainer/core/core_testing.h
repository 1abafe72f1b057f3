/* Private to trainer/core/ and its tests (the Makefile's PRIVATE_trainer/core):
 * pieces tests reach directly; other modules read FTRL's weights from the
 * model. */
#ifndef FSGD_CORE_TESTING_H
#define FSGD_CORE_TESTING_H

#include <stddef.h>

#include "fsgd/ftrl.h"

/* w_k from z_k and n_k (the closed form in fsgd/ftrl.h). */
float fsgd_ftrl_weight(const fsgd_ftrl_params_t *p, float z, float n);

#endif
