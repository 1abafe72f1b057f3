/* Topics on a cluster: replication defaults and their refusals, topic
 * creation that keeps existing topics and waits for leaders, metadata and
 * offset errors that name what failed, the model topic's compaction keys,
 * reads of a compacted range, and the per-hop latency stamp. Runs on the
 * embedded cluster (the real broker's side: tests/integration/kafka_*.sh with
 * FSGD_KAFKA=real). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/kbus.h"
#include "kbus_raw.h"
#include "testlib.h"

static void test_replication_defaults(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[256];
    int rf, m;
    /* min(3, brokers) replicas; 2 in sync with 3 or more, else 1 */
    static const int want[][3] = {{1, 1, 1}, {2, 2, 1}, {3, 3, 2}, {5, 3, 2}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        CU_ASSERT_EQUAL(fsgd_dist_replication(FSGD_JOB_DIST(&job), want[i][0], &rf, &m, err, sizeof err), 0);
        CU_ASSERT_EQUAL(rf, want[i][1]);
        CU_ASSERT_EQUAL(m, want[i][2]);
    }
    CU_ASSERT_EQUAL(fsgd_job_set(&job, "replication_factor", "2", err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_job_set(&job, "cluster.min_insync_replicas", "2", err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_dist_replication(FSGD_JOB_DIST(&job), 5, &rf, &m, err, sizeof err), 0);
    CU_ASSERT_EQUAL(rf, 2);
    CU_ASSERT_EQUAL(m, 2);
    /* more replicas than brokers, or more in sync than replicas: refused */
    CU_ASSERT_EQUAL(fsgd_dist_replication(FSGD_JOB_DIST(&job), 1, &rf, &m, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "replication_factor 2 needs at least 2 brokers; the cluster has 1");
    CU_ASSERT_EQUAL(fsgd_job_set(&job, "min_insync_replicas", "3", err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_dist_replication(FSGD_JOB_DIST(&job), 5, &rf, &m, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "min_insync_replicas 3 is more than replication_factor 2");
    CU_ASSERT_NOT_EQUAL(fsgd_job_set(&job, "replication_factor", "-1", err, sizeof err), 0);
}

typedef struct keys {
    int n;
    char key[16][32];
    fsgd_klat_t lat;
    int64_t offsets[16];
} keys_t;

static int on_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err, size_t errsz)
{
    (void)partition, (void)val, (void)len, (void)err, (void)errsz;
    keys_t *k = ctx;
    if (k->n < 16)
        k->offsets[k->n++] = offset;
    return 0;
}

static void test_topics_on_embedded_cluster(void)
{
    char err[512];
    fsgd_kmock_t *mc = fsgd_kmock_new(3, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mc);
    const char *b = fsgd_kmock_bootstraps(mc);
    static const char *sfx[] = {"data", "grads", "model", "ctl"};
    for (int i = 0; i < 4; i++) {
        char t[64];
        fsgd_kbus_topic(t, sizeof t, "tt", sfx[i]);
        CU_ASSERT_EQUAL(fsgd_kmock_topic(mc, t, i == 0 ? 4 : 1, 0, err, sizeof err), 0);
    }
    fsgd_kconf_t kc = {b, NULL};
    rd_kafka_t *p = fsgd_kbus_client(FSGD_KCLIENT_PRODUCER, &kc, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    fsgd_bus_t *bus = fsgd_bus_kafka_new(b, NULL, err, sizeof err);
    fsgd_bus_client_t *bc = bus ? fsgd_bus_client_new(bus, FSGD_KCLIENT_PRODUCER, err, sizeof err) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(bc);
    CU_ASSERT_EQUAL(fsgd_kbus_broker_count(p, 5000, err, sizeof err), 3);
    /* existing topics are kept (no CreateTopics, which the embedded cluster
     * cannot answer), and their leaders are there */
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    snprintf(job.dist.name, sizeof job.dist.name, "tt");
    CU_ASSERT_EQUAL(fsgd_dist_topics_create(bc, FSGD_JOB_DIST(&job), 4, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_kbus_partitions(p, "tt.data", 5000, err, sizeof err), 4);
    CU_ASSERT_EQUAL(fsgd_dist_topics_unused(bc, FSGD_JOB_DIST(&job), 1, err, sizeof err), 0);
    /* (a missing topic is not testable here: the embedded cluster creates
     * any topic a client asks about; on real Kafka fsgd's lookups never do,
     * allow.auto.create.topics=false) */

    /* model messages: compaction keys; the frames carry the latency stamp */
    uint8_t body[64] = {1, 2, 3};
    fsgd_kframe_t h = {.kind = FSGD_KMSG_SNAPSHOT, .gen = 9, .sender = 0, .step = 0};
    const fsgd_bus_out_t out = {.topic = "tt.model", .partition = 0, .job = "tt", .hdr = &h, .key = "snapshot",
                                .val = body, .len = sizeof body};
    CU_ASSERT_EQUAL(fsgd_kbus_send(p, NULL, &out, 16, NULL, err, sizeof err), 0);
    h.kind = FSGD_KMSG_DELTA_PACKED;
    h.step = 1;
    CU_ASSERT_EQUAL(
        fsgd_kbus_send(p, NULL, &(fsgd_bus_out_t){.topic = "tt.model", .partition = 0, .job = "tt", .hdr = &h,
                                                  .key = "delta.1", .val = body, .len = 8},
                       0, NULL, err, sizeof err),
        0);
    CU_ASSERT_EQUAL(fsgd_kbus_flush(p, 10000, err, sizeof err), 0);
    /* the name is now used: a second job of that name is refused */
    CU_ASSERT_EQUAL(fsgd_dist_topics_unused(bc, FSGD_JOB_DIST(&job), 0, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "job name 'tt' was used before on these brokers: tt.model holds 5 messages");

    rd_kafka_t *c = fsgd_kbus_client(FSGD_KCLIENT_CONSUMER, &kc, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, "tt.model", 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    CU_ASSERT_EQUAL(rd_kafka_assign(c, l), 0);
    rd_kafka_topic_partition_list_destroy(l);
    keys_t *k = calloc(1, sizeof *k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    for (int tries = 0; tries < 100 && k->n < 5; tries++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
        if (!m)
            continue;
        if (!m->err) {
            snprintf(k->key[k->n], sizeof k->key[k->n], "%.*s", (int)m->key_len, (const char *)m->key);
            fsgd_klat_add(&k->lat, m);
            k->n++;
        }
        rd_kafka_message_destroy(m);
    }
    CU_ASSERT_EQUAL_FATAL(k->n, 5);
    CU_ASSERT_STRING_EQUAL(k->key[0], "snapshot.0");
    CU_ASSERT_STRING_EQUAL(k->key[3], "snapshot.3");
    CU_ASSERT_STRING_EQUAL(k->key[4], "delta.1.0");
    CU_ASSERT_EQUAL(k->lat.n, 5);
    double p50 = fsgd_klat_quantile(&k->lat, 0.5);
    CU_ASSERT(p50 >= 0 && p50 < 60000);
    fsgd_klat_t *none = calloc(1, sizeof *none);
    CU_ASSERT_EQUAL(fsgd_klat_quantile(none, 0.5), -1);
    free(none);
    rd_kafka_assign(c, NULL);

    /* a compacted range reader takes increasing offsets; the strict one too
     * when nothing is missing */
    memset(k, 0, sizeof *k);
    const fsgd_bus_range_t r = {.topic = "tt.model", .partition = 0, .start = 0, .end = 5, .timeout_ms = 5000,
                                .mode = FSGD_BUS_READ_COMPACTED, .fn = on_msg, .ctx = k};
    CU_ASSERT_EQUAL(fsgd_kbus_read_range(c, NULL, &r, err, sizeof err), 0);
    CU_ASSERT_EQUAL(k->n, 5);
    CU_ASSERT_EQUAL(k->offsets[4], 4);
    free(k);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    rd_kafka_destroy(p);
    fsgd_bus_client_destroy(bc);
    fsgd_bus_destroy(bus);
    fsgd_kmock_destroy(mc);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"replication and min.insync.replicas: defaults and refusals", test_replication_defaults},
        {"topics, keys and hop latency on the embedded cluster", test_topics_on_embedded_cluster},
        {NULL, NULL},
    };
    fsgd_test_suite("kafka topics", cases);
}
