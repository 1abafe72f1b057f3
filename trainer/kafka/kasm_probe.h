/* What the tests look at inside a reassembler (fsgd_kasm_t of fsgd/kbus.h),
 * private to trainer/kafka/ and the tests of the Makefile's
 * PRIVATE_trainer/kafka list: no role needs it. */
#ifndef FSGD_KASM_PROBE_H
#define FSGD_KASM_PROBE_H

#include <stddef.h>

#include "fsgd/kbus.h"

/* Body bytes held in incomplete messages now. */
size_t fsgd_kasm_held(const fsgd_kasm_t *a);

#endif
