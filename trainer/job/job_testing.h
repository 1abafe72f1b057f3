/* Private to trainer/job/ and its tests (the Makefile's PRIVATE_trainer/job):
 * pieces tests reach directly; other modules load job files by path. */
#ifndef FSGD_JOB_TESTING_H
#define FSGD_JOB_TESTING_H

#include <stddef.h>

#include "fsgd/job.h"

/* fsgd_job_load_yaml over len bytes of YAML text in memory; name stands
 * for the path in error messages. */
int fsgd_job_load_yaml_text(fsgd_job_t *job, const char *name, const char *text, size_t len, char *err,
                            size_t errsz);

#endif
