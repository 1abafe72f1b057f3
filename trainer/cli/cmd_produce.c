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
    if (!job->quiet)
        fprintf(stderr, "fsgd: produce %s%llu rows, %.1f MB, %d partitions, %.1f s\n", done ? "done: " : "",
                (unsigned long long)s->rows, s->bytes / 1e6, s->partitions, s->seconds);
}

/* 1 when the oldest row message of the first non-empty partition of
 * NAME.data carries a tag (the job's own producer signs its rows), 0 when
 * it does not or there are no rows yet (nothing to go by: no refusal). */
static int data_rows_signed(const fsgd_job_t *job)
{
    char err[512], topic[160];
    fsgd_kbus_topic(topic, sizeof topic, job->name, "data");
    fsgd_kconf_t kc = dcli_kconf(job->brokers);
    rd_kafka_t *rk = fsgd_kbus_client(FSGD_KCLIENT_READER, &kc, NULL, err, sizeof err);
    if (!rk)
        return 0;
    int P = fsgd_kbus_partitions(rk, topic, 5000, err, sizeof err), signed_rows = 0;
    for (int p = 0; p < P; p++) {
        int64_t lo, hi;
        if (fsgd_kbus_watermarks(rk, topic, p, &lo, &hi, 5000, err, sizeof err) < 0 || hi <= lo)
            continue;
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = lo;
        rd_kafka_assign(rk, l);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 5000);
        if (m && !m->err) {
            rd_kafka_headers_t *h;
            const void *v;
            size_t n;
            signed_rows = rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR &&
                          rd_kafka_header_get_last(h, FSGD_KBUS_MAC_HEADER, &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR;
        }
        if (m)
            rd_kafka_message_destroy(m);
        rd_kafka_assign(rk, NULL);
        break;
    }
    rd_kafka_destroy(rk);
    return signed_rows;
}

/* Rows without the job key's tag stop a job whose rows are authenticated
 * (its aggregator exits 3 on "a row without a tag", its workers after it):
 * before writing anything into a running job, a producer without a key
 * looks at the job's rows, and tagged rows mean the job has a key. Issue 40
 * item 2. 0 to go on, or the exit status (said why). */
static int refuse_unsigned_rows(const fsgd_job_t *job)
{
    if (job->job_key_file[0] || job->unsigned_rows || !job->follow || !data_rows_signed(job))
        return 0;
    fsgd_cli_error("produce: job %s authenticates its rows, and rows without its key's tag would stop it: give "
                   "--job-key-file FILE (fsgd run --follow keeps it in .fsgd/%s.key and prints where), or "
                   "--unsigned-rows if the job was started with it. Nothing was written",
                   job->name, job->name);
    return FSGD_EXIT_USAGE;
}

/* --follow writes into a running job: a name without its data topic is a
 * mistyped one, not a new job (it used to make new topics silently, which
 * no job reads; issue 42 item 16). 0 to go on, or the exit status (said
 * why). A metadata request that fails says nothing: the produce says why. */
static int refuse_unknown_job(const fsgd_job_t *job)
{
    if (!job->follow)
        return 0;
    char err[512], topic[160];
    fsgd_kbus_topic(topic, sizeof topic, job->name, "data");
    fsgd_kconf_t kc = dcli_kconf(job->brokers);
    rd_kafka_t *rk = fsgd_kbus_client(FSGD_KCLIENT_READER, &kc, NULL, err, sizeof err);
    if (!rk)
        return 0;
    /* every topic's metadata: asking for the one topic makes a broker (the
     * embedded cluster) that creates topics on demand create it */
    const struct rd_kafka_metadata *md = NULL;
    int unknown = 0;
    if (rd_kafka_metadata(rk, 1, NULL, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        unknown = 1;
        for (int i = 0; i < md->topic_cnt && unknown; i++)
            unknown = strcmp(md->topics[i].topic, topic) != 0;
        rd_kafka_metadata_destroy(md);
    }
    rd_kafka_destroy(rk);
    if (!unknown)
        return 0;
    fsgd_cli_error("produce: --follow writes into a running job, and %s has no topic %s: check --name (fsgd run "
                   "--follow --name %s makes it), or leave --follow out to start a new job's data. Nothing was "
                   "written", job->brokers, topic, job->name);
    return FSGD_EXIT_USAGE;
}

int fsgd_cmd_produce(int argc, char **argv)
{
    fsgd_job_t job;
    int rc = dcli_job_only(argc, argv, usage, produce_options, &job);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!job.brokers[0] || !job.data[0]) {
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
    if (!(env.bus = dcli_bus(job.brokers, "produce")))
        return FSGD_EXIT_BROKER;
    rc = fsgd_produce_file(&env, &job, job.data, job.partitions, &st, on_progress, err, sizeof err);
    fsgd_bus_destroy(env.bus);
    if (rc < 0) {
        fsgd_cli_error("produce: %s", err);
        return fsgd_cli_status(rc);
    }
    dcli_bad_rows(job.data, st.bad_rows, st.first_bad);
    return 0;
}
