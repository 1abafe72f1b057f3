/* Private to common/ and its tests (the Makefile's PRIVATE_common): what
 * tests check of the reducer that no other module reads. */
#ifndef FSGD_COMMON_TESTING_H
#define FSGD_COMMON_TESTING_H

#include <stddef.h>

#include "fsgd/reduce.h"

/* The number of keys touched since the last take or clear. */
size_t fsgd_reducer_count(fsgd_reducer_t *r);

#endif
