/* Private to trainer/observe/ and its tests (the Makefile's
 * PRIVATE_trainer/observe): what /metrics holds, read without a scrape. */
#ifndef FSGD_OBSERVE_TESTING_H
#define FSGD_OBSERVE_TESTING_H

#include "fsgd/prom.h"

/* The rendered metrics (malloc'ed, caller frees); NULL when not started. */
char *fsgd_observe_render(void);

/* The current value of a counter or gauge series (NaN for a bad id). */
double fsgd_prom_get(fsgd_prom_t *r, int id);

#endif
