/* Private to trainer/core/ and its tests (the Makefile's PRIVATE_trainer/core):
 * pieces tests reach directly; other modules load job files by path and
 * read FTRL's weights from the model. */
#ifndef FSGD_CORE_TESTING_H
#define FSGD_CORE_TESTING_H

#include <stddef.h>

#include "fsgd/ftrl.h"
#include "fsgd/job.h"

/* w_k from z_k and n_k (the closed form in fsgd/ftrl.h). */
float fsgd_ftrl_weight(const fsgd_ftrl_params_t *p, float z, float n);

/* fsgd_job_load_yaml over len bytes of YAML text in memory; name stands
 * for the path in error messages. */
int fsgd_job_load_yaml_text(fsgd_job_t *job, const char *name, const char *text, size_t len, char *err,
                            size_t errsz);

#endif
