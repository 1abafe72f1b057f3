/* Helpers shared by the distributed subcommands (run, produce, worker,
 * aggregator, model). */
#ifndef FSGD_DIST_CLI_H
#define FSGD_DIST_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "fsgd/bus.h"
#include "fsgd/job.h"

/* Removes every "--name VALUE" / "--name=VALUE" (has_value) or "--name"
 * (flag) from argv in place. Returns the last value (copied into a static
 * slot), "1" for a present flag, or NULL when absent. Up to 16 values of a
 * repeated option are kept in *all / *n_all when all is not NULL. */
const char *dcli_take(int *argc, char **argv, const char *name, int has_value, const char **all, int *n_all);

/* Parses the job flags and checks the row format (format, hash_bits, dim:
 * fsgd/rowfmt.h; a hashed job's dim becomes 2^bits); prints errors. 0 ok, 1 help printed (exit 0),
 * FSGD_EXIT_USAGE on a usage error. */
int dcli_job(int argc, char **argv, const char *usage, fsgd_job_t *job);
/* The same, with --help listing only the options in only ("--flag " each,
 * NULL-ended): those the command reads. */
int dcli_job_only(int argc, char **argv, const char *usage, const char *const *only, fsgd_job_t *job);

/* A job option a short --help shows, with a short text (NULL: the full
 * help's line); lists end with {NULL}. */
typedef struct dcli_brief {
    const char *flag; /* "--data" */
    const char *text;
} dcli_brief_t;
/* The same as dcli_job, but --help prints usage_brief and only the options
 * of brief; "--help all" prints usage and every option. */
int dcli_job_brief(int argc, char **argv, const char *usage, const char *usage_brief, const dcli_brief_t *brief,
                   fsgd_job_t *job);
/* fsgd run --help's usage and options (--help all: cmd_run.c's usage). */
extern const char dcli_run_usage_brief[];
extern const dcli_brief_t dcli_run_help_options[];
/* 1 when argv asks for "--help all" (or "-h all"): every option. */
int dcli_help_all(int argc, char **argv);
/* The job options' help with defaults' values: all of them (brief NULL),
 * or the options of brief, each on one short line with its default. */
void dcli_print_job_help(const char *usage, const fsgd_job_t *defaults, const dcli_brief_t *brief, FILE *out);

/* Prints "fsgd: WHERE: skipped N malformed rows (skip_bad); first:" and the
 * first rows' errors (first: FSGD_LIBSVM_BAD_KEPT of them) when n > 0. */
/* A derived output name and the words that say whose it is. */
typedef struct dcli_name {
    char path[FSGD_JOB_PATH_MAX + 32];
    char opt[96];
} dcli_name_t;
/* The outputs of aggregator shards first..last of a job with S shards for
 * fsgd_cli_check_distinct: --out (shard 0's), METRICS[.shardI],
 * CKPT[.shardI] and, with S > 1, CKPT[.shardI].prev. 0, or -1 out of
 * memory. dcli_outputs_free frees it. */
typedef struct dcli_outputs {
    fsgd_cli_path_t *p;
    dcli_name_t *names;
    int n, cap;
} dcli_outputs_t;
int dcli_outputs(const fsgd_job_t *job, const char *ckpt, int S, int first, int last, dcli_outputs_t *o);
void dcli_outputs_free(dcli_outputs_t *o);

void dcli_bad_rows(const char *where, uint64_t n, const char (*first)[160]);

/* Takes --metrics-port PORT and --metrics-addr ADDR (fsgd/observe.h) out
 * of argv. *port = -1 when no port was given (no metrics), 0 = any free
 * port; max_offset: the largest number fsgd run adds to the port (its
 * workers' ports). *addr defaults to 127.0.0.1. 0, or FSGD_EXIT_USAGE
 * (printed). */
int dcli_metrics(int *argc, char **argv, const char *who, int max_offset, const char **addr, int *port);

/* The command's job security (fsgd/auth.h), which every bus it makes
 * with dcli_bus carries: job->cluster.job_key_file's key when set, and the job's
 * name. Prints one line saying which topics are authenticated, or that
 * none are. 0, or FSGD_EXIT_USAGE with the key file's error printed. The
 * process (main) owns it, as it owns its signal flags: the library keeps
 * none; it is wiped at exit. */
int dcli_auth(const fsgd_job_t *job, const char *who);
/* That security (NULL before dcli_auth: no key, no job). */
fsgd_auth_t *dcli_auth_of(void);

/* The command's Kafka settings (job->cluster.kafka, fsgd_kbus_options_resolve:
 * KEY_file lines read, each setting checked by librdkafka), for every bus
 * and client it makes. Main owns them, as dcli_auth's key; wiped at exit.
 * 0, or FSGD_EXIT_USAGE with the error printed. */
int dcli_kafka(const fsgd_job_t *job, const char *who);

/* A Kafka bus on brokers with dcli_kafka's settings, whose clients tag and
 * check under dcli_auth's security. NULL after printing why. */
fsgd_bus_t *dcli_bus(const char *brokers, const char *who);

/* A client of kind on a bus of brokers with dcli_kafka's settings, for a
 * command's look at a job's topics before it acts (*bus: destroy it after
 * the client). NULL with err set. */
fsgd_bus_client_t *dcli_client(const char *brokers, fsgd_kclient_t kind, fsgd_bus_t **bus, char *err, size_t errsz);

/* Partitions of topic on brokers (fsgd_bus_partitions), or a negative
 * error in err. */
int dcli_partitions(const char *brokers, const char *topic, int timeout_ms, char *err, size_t errsz);

/* Says which brokers the role waits for, then waits at most
 * job->cluster.connect_timeout_ms for them to answer (TLS and SASL included). 0, or
 * FSGD_EXIT_BROKER with the brokers and the cause printed. */
int dcli_connect(const fsgd_job_t *job, const char *who);

/* The help lines of those options. */
#define DCLI_METRICS_HELP                                                                                      \
    "  --metrics-port PORT  serve Prometheus metrics on http://ADDR:PORT/metrics (0: any free port, printed)\n" \
    "  --metrics-addr ADDR  address to serve them on (default 127.0.0.1; 0.0.0.0 for every interface)"

#endif
