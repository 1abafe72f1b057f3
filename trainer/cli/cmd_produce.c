/* fsgd produce: load the rows of a file (the job's format) into its data topic. */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"

static const char usage[] =
    "usage: fsgd produce [JOB.yaml] --brokers HOST:PORT --name JOB [--format F] [--partitions N]\n"
    "                    [--batch B] [--block-rows K] FILE\n"
    "Writes every row of FILE to JOB.data, parsed once with the job's format (libsvm,\n"
    "criteo, tsv:/csv: specs), in binary blocks of K rows a message (trainer/KAFKA_FORMAT.md),\n"
    "round-robin over the partitions (created when missing), by an idempotent producer.\n"
    "K is batch / partitions by default, so that a step takes one message of each partition:\n"
    "give the job's --batch (a step takes whole messages), or --block-rows 1 for one text\n"
    "row a message as any other client writes. A spec's header line (header=1) is never sent.\n"
    "--follow writes into a running fsgd run --follow job (a plain produce refuses a job name in\n"
    "use, --follow a name without topics); a job with a key needs it: --job-key-file (fsgd run\n"
    "--follow keeps it in .fsgd/NAME.key).";

/* The job options fsgd produce reads; --help lists these alone. */
static const char *const produce_options[] = {
    "--data ",  "--skip-bad ", "--format ", "--hash-bits ", "--dim ", "--batch ", "--name ", "--brokers ",
    "--partitions ", "--block-rows ", "--replication-factor ", "--min-insync-replicas ", "--connect-timeout-ms ",
    "--shards ", "--job-key-file ", "--unsigned-rows ", "--kafka-opt ", "--quiet ", NULL};

static void on_progress(void *ctx, const fsgd_produce_stats_t *s, int done)
{
    const fsgd_job_t *job = ctx;
    if (!job->train.quiet)
        fprintf(stderr, "fsgd: produce %s%llu rows, %.1f MB, %d partitions, %.1f s\n", done ? "done: " : "",
                (unsigned long long)s->rows, s->bytes / 1e6, s->partitions, s->seconds);
}

/* 1 when the oldest row message of the first non-empty partition of
 * NAME.data carries a tag (the job's own producer signs its rows), 0 when
 * it does not or there are no rows yet (nothing to go by: no refusal). */
static int data_rows_signed(const fsgd_job_t *job)
{
    char err[512], topic[160];
    fsgd_kbus_topic(topic, sizeof topic, job->dist.name, "data");
    fsgd_bus_t *bus;
    fsgd_bus_client_t *c = dcli_client(job->cluster.brokers, FSGD_KCLIENT_READER, &bus, err, sizeof err);
    if (!c)
        return 0;
    int P = fsgd_bus_partitions(c, topic, 5000, err, sizeof err), signed_rows = 0;
    for (int p = 0; p < P; p++) {
        int64_t lo, hi;
        if (fsgd_bus_watermarks(c, topic, p, &lo, &hi, 5000, err, sizeof err) < 0 || hi <= lo)
            continue;
        fsgd_bus_tp_t tp = {topic, p, lo};
        fsgd_bus_msg_t *m = fsgd_bus_assign(c, &tp, 1, err, sizeof err) == 0 ? fsgd_bus_poll(c, 5000) : NULL;
        signed_rows = m && !m->err && m->mac != NULL;
        fsgd_bus_msg_destroy(m);
        break;
    }
    fsgd_bus_client_destroy(c);
    fsgd_bus_destroy(bus);
    return signed_rows;
}

/* Rows without the job key's tag stop a job whose rows are authenticated
 * (its aggregator exits 3 on "a row without a tag", its workers after it):
 * before writing anything into a running job, a producer without a key
 * looks at the job's rows, and tagged rows mean the job has a key. Issue 40
 * item 2. 0 to go on, or the exit status (said why). */
static int refuse_unsigned_rows(const fsgd_job_t *job)
{
    if (job->cluster.job_key_file[0] || job->cluster.unsigned_rows || !job->dist.follow || !data_rows_signed(job))
        return 0;
    fsgd_cli_error("produce: job %s authenticates its rows, and rows without its key's tag would stop it: give "
                   "--job-key-file FILE (fsgd run --follow keeps it in .fsgd/%s.key and prints where), or "
                   "--unsigned-rows if the job was started with it. Nothing was written",
                   job->dist.name, job->dist.name);
    return FSGD_EXIT_USAGE;
}

/* --follow writes into a running job: a name without its data topic is a
 * mistyped one, not a new job (it used to make new topics silently, which
 * no job reads; issue 42 item 16). 0 to go on, or the exit status (said
 * why). A metadata request that fails says nothing: the produce says why. */
static int refuse_unknown_job(const fsgd_job_t *job)
{
    if (!job->dist.follow)
        return 0;
    char err[512], topic[160];
    fsgd_kbus_topic(topic, sizeof topic, job->dist.name, "data");
    fsgd_bus_t *bus;
    fsgd_bus_client_t *c = dcli_client(job->cluster.brokers, FSGD_KCLIENT_READER, &bus, err, sizeof err);
    int exists = c ? fsgd_bus_topic_exists(c, topic, 10000, err, sizeof err) : -1;
    fsgd_bus_client_destroy(c);
    fsgd_bus_destroy(bus);
    if (exists != 0)
        return 0;
    fsgd_cli_error("produce: --follow writes into a running job, and %s has no topic %s: check --name (fsgd run "
                   "--follow --name %s makes it), or leave --follow out to start a new job's data. Nothing was "
                   "written", job->cluster.brokers, topic, job->dist.name);
    return FSGD_EXIT_USAGE;
}

int fsgd_cmd_produce(int argc, char **argv)
{
    fsgd_job_t job;
    int rc = dcli_job_only(argc, argv, usage, produce_options, &job);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!job.cluster.brokers[0] || !job.train.data[0]) {
        fsgd_cli_error("produce: --brokers and a data file are required");
        return FSGD_EXIT_USAGE;
    }
    fsgd_produce_stats_t st = {0};
    char err[512];
    if ((rc = dcli_kafka(&job, "produce")) != 0)
        return rc;
    if ((rc = dcli_auth(&job, "produce")) != 0) /* rows are tagged with the job key */
        return rc;
    if ((rc = dcli_connect(&job, "produce")) != 0)
        return rc;
    if ((rc = refuse_unknown_job(&job)) != 0 || (rc = refuse_unsigned_rows(&job)) != 0)
        return rc;
    fsgd_role_env_t env = {.ctx = &job};
    if (!(env.bus = dcli_bus(job.cluster.brokers, "produce")))
        return FSGD_EXIT_BROKER;
    const fsgd_dist_job_t dj = fsgd_job_dist(&job);
    rc = fsgd_produce_file(&env, &dj, job.train.data, job.dist.partitions, &st, on_progress, err, sizeof err);
    fsgd_bus_destroy(env.bus);
    if (rc < 0) {
        fsgd_cli_error("produce: %s", err);
        return fsgd_cli_status(rc);
    }
    dcli_bad_rows(job.train.data, st.bad_rows, st.first_bad);
    return 0;
}
