/* One NAME.ctl event read as a version record (ctl_versions.c; the reader
 * is public in fsgd/dist.h). Private to trainer/distributed/ and its tests. */
#ifndef FSGD_DIST_CTL_VERSIONS_H
#define FSGD_DIST_CTL_VERSIONS_H

#include <stddef.h>

#include "fsgd/dist.h"

/* What fsgd_ctl_version_parse found in one event. */
enum { FSGD_CTL_VERSION_NONE = 0, FSGD_CTL_VERSION_RECORD = 1, FSGD_CTL_VERSION_RESTART = 2 };

/* One NAME.ctl event (json, len bytes) of job: RECORD with *out filled
 * (a model_version, epoch_end or done job_end of job with a step),
 * RESTART with out->gen and out->step (a job_start: its generation and
 * the step it resumes from), NONE for anything else (another job, another
 * event, a field missing or mistyped). Never reads past len. */
int fsgd_ctl_version_parse(const char *json, size_t len, const char *job, fsgd_ctl_version_t *out);

#endif
