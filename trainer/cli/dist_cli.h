/* Helpers shared by the distributed subcommands (run, produce, worker,
 * aggregator, model). */
#ifndef FSGD_DIST_CLI_H
#define FSGD_DIST_CLI_H

#include "fsgd/job.h"

/* Removes every "--name VALUE" / "--name=VALUE" (has_value) or "--name"
 * (flag) from argv in place. Returns the last value (copied into a static
 * slot), "1" for a present flag, or NULL when absent. Up to 16 values of a
 * repeated option are kept in *all / *n_all when all is not NULL. */
const char *dcli_take(int *argc, char **argv, const char *name, int has_value, const char **all, int *n_all);

/* Parses the job flags; prints errors. 0 ok, 1 help printed (exit 0),
 * FSGD_EXIT_USAGE on a usage error. */
int dcli_job(int argc, char **argv, const char *usage, fsgd_job_t *job);

#endif
