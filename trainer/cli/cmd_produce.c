/* fsgd produce: load the rows of a file (the job's format) into its data topic. */
#include <stdio.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/dist.h"
#include "fsgd/kbus.h"

static const char usage[] =
    "usage: fsgd produce [JOB.yaml] --brokers HOST:PORT --name JOB [--format F] [--partitions N]\n"
    "                    [--batch B] [--block-rows K] FILE\n"
    "Writes every row of FILE to JOB.data, parsed once with the job's format (libsvm,\n"
    "criteo, tsv:/csv: specs), in binary blocks of K rows a message (trainer/KAFKA_FORMAT.md),\n"
    "round-robin over the partitions (created when missing), by an idempotent producer.\n"
    "K is batch / partitions by default, so that a step takes one message of each partition:\n"
    "give the job's --batch (a step takes whole messages), or --block-rows 1 for one text\n"
    "row a message as any other client writes. A spec's header line (header=1) is never sent.";

static void on_progress(void *ctx, const fsgd_produce_stats_t *s, int done)
{
    const fsgd_job_t *job = ctx;
    if (!job->quiet)
        fprintf(stderr, "fsgd: produce %s%llu rows, %.1f MB, %d partitions, %.1f s\n", done ? "done: " : "",
                (unsigned long long)s->rows, s->bytes / 1e6, s->partitions, s->seconds);
}

int fsgd_cmd_produce(int argc, char **argv)
{
    fsgd_job_t job;
    int rc = dcli_job(argc, argv, usage, &job);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!job.brokers[0] || !job.data[0]) {
        fsgd_cli_error("produce: --brokers and a data file are required");
        return FSGD_EXIT_USAGE;
    }
    fsgd_produce_stats_t st;
    char err[512];
    if (fsgd_kbus_set_options(job.kafka, err, sizeof err) < 0) {
        fsgd_cli_error("produce: %s", err);
        return FSGD_EXIT_USAGE;
    }
    if ((rc = dcli_auth(&job, "produce")) != 0) /* rows are tagged with the job key */
        return rc;
    if ((rc = dcli_connect(&job, "produce")) != 0)
        return rc;
    rc = fsgd_produce_file(&job, job.brokers, job.data, job.partitions, &st, on_progress, &job, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("produce: %s", err);
        return fsgd_cli_status(rc);
    }
    dcli_bad_rows(job.data, st.bad_rows, st.first_bad);
    return 0;
}
