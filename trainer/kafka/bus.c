/* Kafka clients, topics, chunked sends and range reads (fsgd/kbus.h). */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bus_impl.h"
#include "fsgd/auth.h"
#include "fsgd/clock.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "kbus_raw.h"

void fsgd_kbus_topic(char *out, size_t cap, const char *job, const char *suffix)
{
    snprintf(out, cap, "%s.%s", job, suffix);
}

static int set(rd_kafka_conf_t *c, const char *k, const char *v, char *err, size_t errsz)
{
    char e[256];
    if (rd_kafka_conf_set(c, k, v, e, sizeof e) != RD_KAFKA_CONF_OK)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "kafka config %s=%s: %s", k, v, e);
    return 0;
}

/* FSGD_RDKAFKA="key=value,key=value" applies to every client (tests use it
 * for timeouts; deployments for security settings). */
static int apply_env(rd_kafka_conf_t *c, char *err, size_t errsz)
{
    const char *env = getenv("FSGD_RDKAFKA");
    if (!env || !*env)
        return 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "FSGD_RDKAFKA: '%s' is not key=value", tok);
        *eq = '\0';
        FSGD_TRY(set(c, tok, eq + 1, err, errsz));
    }
    return 0;
}

/* The job's settings (fsgd_kconf_t.options): "key=value\n" lines, applied
 * to every client after fsgd's own and FSGD_RDKAFKA's. */
#define OPTIONS_MAX 4096

static int apply_lines(rd_kafka_conf_t *c, const char *lines, char *err, size_t errsz)
{
    if (!lines)
        return 0;
    char buf[OPTIONS_MAX];
    if (strlen(lines) >= sizeof buf)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka options: %zu bytes, at most %d", strlen(lines),
                            OPTIONS_MAX - 1);
    snprintf(buf, sizeof buf, "%s", lines);
    char *save = NULL;
    for (char *tok = strtok_r(buf, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option '%s' is not key=value", tok);
        *eq = '\0';
        char e[256];
        if (rd_kafka_conf_set(c, tok, eq + 1, e, sizeof e) != RD_KAFKA_CONF_OK)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s: %s", tok, e);
    }
    return 0;
}

int fsgd_kbus_options_resolve(const char *lines, char *out, size_t cap, char *err, size_t errsz)
{
    if (!lines)
        lines = "";
    if (cap > OPTIONS_MAX)
        cap = OPTIONS_MAX;
    /* KEY_file=PATH lines become KEY=the file's content: a secret never on
     * a command line (ps shows those) nor in a job file. */
    FSGD_TRY(fsgd_kbus_resolve_files(lines, out, cap, err, errsz));
    /* Validate every setting now, against librdkafka itself, so a typo or a
     * feature this librdkafka lacks (no SSL built in) fails before any work. */
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    int rc = apply_lines(c, out, err, errsz);
    rd_kafka_conf_destroy(c);
    if (rc)
        fsgd_kbus_wipe(out, cap);
    return rc;
}

/* Kafka settings fsgd passes to librdkafka: authentication and encryption
 * only, so a job file cannot quietly change the latency, delivery or
 * offset settings the exactly-once rules rely on (FSGD_RDKAFKA in the
 * environment still sets anything, for experiments). */
static int option_allowed(const char *k)
{
    return !strncmp(k, "security.", 9) || !strncmp(k, "sasl.", 5) || !strncmp(k, "ssl.", 4) ||
           !strcmp(k, "enable.ssl.certificate.verification");
}

int fsgd_kbus_options_add(char *lines, size_t cap, const char *key, const char *value, char *err, size_t errsz)
{
    if (!*key || strchr(key, '=') || strchr(key, '\n') || strchr(value, '\n'))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option '%s': expected KEY=VALUE", key);
    if (!option_allowed(key))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "kafka option '%s' is not passed to Kafka clients: only security.*, sasl.*, ssl.* and "
                            "enable.ssl.certificate.verification are (FSGD_RDKAFKA sets others)",
                            key);
    size_t used = strlen(lines);
    int n = snprintf(lines + used, cap - used, "%s=%s\n", key, value);
    if (n < 0 || (size_t)n >= cap - used) {
        lines[used] = '\0';
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka options: more than %zu characters", cap - 1);
    }
    return FSGD_E_OK;
}

void fsgd_kbus_options_wipe(char *out, size_t cap)
{
    fsgd_kbus_wipe(out, cap);
}

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    /* The library never prints; FSGD_KAFKA_DEBUG=1 shows librdkafka's log. */
    static int show = -1;
    if (show < 0)
        show = getenv("FSGD_KAFKA_DEBUG") != NULL;
    if (show)
        fprintf(stderr, "rdkafka %d %s: %s\n", level, fac, buf);
}

/* How long a consumer's fetch may wait at the broker for new records.
 * A real broker answers a waiting fetch as soon as a record arrives, so a
 * long wait costs no latency and saves the broker and every client a round
 * trip a millisecond: on a 2-core machine with a real broker, 4 workers and
 * an aggregator, that polling was half of one core in the broker alone.
 * librdkafka's mock cluster (the embedded one) answers only when the wait
 * is over, so there fetches must come back every millisecond. The cluster
 * id tells them apart: the mock's is "mockCluster..." (librdkafka
 * rdkafka_mock.c). Asked once per bootstrap list; unknown (no answer within
 * 3 s) counts as the mock, the choice that is right for both. */
#define FETCH_WAIT_REAL_MS "100"
#define FETCH_WAIT_MOCK_MS "1"
/* A reader reads a range up to the high watermark and moves to the next
 * partition: its fetch for the data past the end, left waiting, held the
 * next partition's first fetch back for the whole wait (100 ms a
 * partition: 1.2 s to read 12 partitions' tails). Readers are assigned
 * only while they read, so a short wait costs nothing when idle. */
#define FETCH_WAIT_READER_MS "2"
/* A member learns of a rebalance (a worker joining, one leaving) from its
 * next heartbeat's answer: at 1 s, each of a job's joins could hold the
 * group, and step 1, back that long. */
#define HEARTBEAT_MS "200"

/* A fact about a cluster, asked once per bootstrap list: a cache, not a
 * setting (the same answer for every job that reaches that list). */
static int cluster_is_mock(const fsgd_kconf_t *kc)
{
    const char *brokers = kc->brokers;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char cached_for[512];
    static int cached = -1;
    pthread_mutex_lock(&lock);
    if (cached >= 0 && !strcmp(cached_for, brokers)) {
        int v = cached;
        pthread_mutex_unlock(&lock);
        return v;
    }
    int mock = 1;
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char e[256];
    if (rd_kafka_conf_set(c, "bootstrap.servers", brokers, e, sizeof e) == RD_KAFKA_CONF_OK &&
        apply_env(c, NULL, 0) == 0 && apply_lines(c, kc->options, NULL, 0) == 0) {
        rd_kafka_conf_set_log_cb(c, quiet_log);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, e, sizeof e);
        c = NULL;
        if (rk) {
            char *id = rd_kafka_clusterid(rk, 3000);
            if (id && strncmp(id, "mockCluster", 11) != 0)
                mock = 0;
            if (id)
                rd_kafka_mem_free(rk, id);
            rd_kafka_destroy(rk);
        }
    }
    if (c)
        rd_kafka_conf_destroy(c);
    if (strlen(brokers) < sizeof cached_for) {
        snprintf(cached_for, sizeof cached_for, "%s", brokers);
        cached = mock;
    }
    pthread_mutex_unlock(&lock);
    return mock;
}

int fsgd_kbus_is_mock(const fsgd_kconf_t *kc)
{
    return cluster_is_mock(kc);
}

static const char *fetch_wait_ms(const fsgd_kconf_t *kc)
{
    return cluster_is_mock(kc) ? FETCH_WAIT_MOCK_MS : FETCH_WAIT_REAL_MS;
}

/* 1 when every bootstrap address is this machine's loopback. */
static int all_loopback(const char *brokers)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", brokers);
    char *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        while (*tok == ' ')
            tok++;
        char *colon = strrchr(tok, ':');
        if (colon && tok[0] != '[')
            *colon = '\0';
        if (strncmp(tok, "127.", 4) && strcmp(tok, "localhost") && strncmp(tok, "[::1]", 5))
            return 0;
    }
    return n > 0;
}

/* Rows are compressed for the network. The embedded cluster is this
 * machine's memory and a broker on loopback its page cache: there lz4 only
 * costs the producer a third of its CPU (1M CTR rows, 417 MB: 3.5 s of CPU
 * against 2.4 s without) and every reader the decompression. (The embedded
 * cluster's 5 MiB a partition is sized for uncompressed text:
 * fsgd_produce_partitions_needed.) */
static const char *data_compression(const fsgd_kconf_t *kc)
{
    return all_loopback(kc->brokers) || cluster_is_mock(kc) ? "none" : "lz4";
}

static rd_kafka_t *client(fsgd_kclient_t kind, const fsgd_kconf_t *kc, const char *group,
                          fsgd_kbus_rebalance_fn rebalance, void *opaque, fsgd_kwatch_t *watch, char *err,
                          size_t errsz)
{
    const char *brokers = kc->brokers;
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    if (rebalance) {
        rd_kafka_conf_set_rebalance_cb(c, rebalance);
        rd_kafka_conf_set_opaque(c, opaque);
        set(c, "partition.assignment.strategy", "roundrobin", NULL, 0);
    }
    int rc = set(c, "bootstrap.servers", brokers, err, errsz);
    rc = rc ? rc : set(c, "socket.nagle.disable", "true", err, errsz);
    rc = rc ? rc : set(c, "topic.metadata.refresh.interval.ms", "10000", err, errsz);
    /* A broker back after seconds is reconnected within a second. */
    rc = rc ? rc : set(c, "reconnect.backoff.max.ms", "1000", err, errsz);
    /* fsgd creates its topics with the job's settings (replication,
     * retention, compaction); a metadata lookup must never create one with
     * the broker's defaults instead. */
    rc = rc ? rc : set(c, "allow.auto.create.topics", "false", err, errsz);
    if (kind == FSGD_KCLIENT_PRODUCER) {
        /* Gradients and model messages: send at once; duplicates from retries
         * are dropped by the receivers (KAFKA_FORMAT.md), so no idempotence. */
        rc = rc ? rc : set(c, "linger.ms", "0", err, errsz);
        rc = rc ? rc : set(c, "acks", "all", err, errsz);
        rc = rc ? rc : set(c, "enable.idempotence", "false", err, errsz);
        rc = rc ? rc : set(c, "max.in.flight.requests.per.connection", "1", err, errsz);
        rc = rc ? rc : set(c, "message.max.bytes", "1000000", err, errsz);
        rc = rc ? rc : set(c, "message.timeout.ms", "60000", err, errsz);
    } else if (kind == FSGD_KCLIENT_DATA_PRODUCER) {
        rc = rc ? rc : set(c, "linger.ms", "5", err, errsz);
        rc = rc ? rc : set(c, "batch.num.messages", "10000", err, errsz);
        rc = rc ? rc : set(c, "batch.size", "262144", err, errsz);
        rc = rc ? rc : set(c, "compression.codec", data_compression(kc), err, errsz);
        rc = rc ? rc : set(c, "enable.idempotence", "true", err, errsz);
    } else {
        /* Measured on the mock: with the default 500 ms every hop costs half a
         * second; with 1 ms the produce-to-consume p50 is ~1.3 ms. A real
         * broker: fetch_wait_ms. */
        rc = rc ? rc
                : set(c, "fetch.wait.max.ms",
                      kind == FSGD_KCLIENT_READER && !cluster_is_mock(kc) ? FETCH_WAIT_READER_MS
                                                                           : fetch_wait_ms(kc),
                      err, errsz);
        rc = rc ? rc : set(c, "fetch.error.backoff.ms", "10", err, errsz);
        rc = rc ? rc : set(c, "enable.auto.commit", "false", err, errsz);
        rc = rc ? rc : set(c, "enable.auto.offset.store", "false", err, errsz);
        rc = rc ? rc : set(c, "auto.offset.reset", "error", err, errsz);
        rc = rc ? rc : set(c, "enable.partition.eof", "false", err, errsz);
        rc = rc ? rc : set(c, "session.timeout.ms", "6000", err, errsz);
        rc = rc ? rc : set(c, "heartbeat.interval.ms", HEARTBEAT_MS, err, errsz);
        char g[300];
        if (!group) {
            snprintf(g, sizeof g, "fsgd-assign-%ld-%d", (long)time(NULL), rand());
            group = g;
        }
        rc = rc ? rc : set(c, "group.id", group, err, errsz);
    }
    rc = rc ? rc : apply_env(c, err, errsz);
    rc = rc ? rc : apply_lines(c, kc->options, err, errsz);
    if (rc) {
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    if (watch)
        fsgd_kbus_conf_watch(c, watch); /* its own log callback: why a connection failed (connect.c) */
    else
        rd_kafka_conf_set_log_cb(c, quiet_log);
    char e[512];
    rd_kafka_t *rk =
        rd_kafka_new(FSGD_KCLIENT_IS_CONSUMER(kind) ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, c, e, sizeof e);
    if (!rk) {
        fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "kafka client: %s", e);
        return NULL;
    }
    if (FSGD_KCLIENT_IS_CONSUMER(kind))
        rd_kafka_poll_set_consumer(rk);
    return rk;
}

rd_kafka_t *fsgd_kbus_client(fsgd_kclient_t kind, const fsgd_kconf_t *kc, const char *group, char *err,
                             size_t errsz)
{
    return client(kind, kc, group, NULL, NULL, NULL, err, errsz);
}

rd_kafka_t *fsgd_kbus_client_watched(const fsgd_kconf_t *kc, fsgd_kwatch_t *w, char *err, size_t errsz)
{
    return client(FSGD_KCLIENT_PRODUCER, kc, NULL, NULL, NULL, w, err, errsz);
}

rd_kafka_t *fsgd_kbus_group_consumer(const fsgd_kconf_t *kc, const char *group, fsgd_kbus_rebalance_fn rebalance,
                                     void *opaque, char *err, size_t errsz)
{
    return client(FSGD_KCLIENT_CONSUMER, kc, group, rebalance, opaque, NULL, err, errsz);
}

static void sleep_ms(int ms)
{
    struct timespec ns = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ns, NULL);
}

/* Errors after which asking again is right: a topic just created whose
 * partitions have no leader yet, a leader that moved (a broker stopped or
 * restarted), a broker not answering for a moment. */
static int retriable(rd_kafka_resp_err_t e)
{
    switch (e) {
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
        return 1;
    default:
        return 0;
    }
}

static int topic_exists(rd_kafka_t *rk, const char *topic, int timeout_ms)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int yes = 0;
    if (t && rd_kafka_metadata(rk, 0, t, &md, timeout_ms) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        yes = md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt > 0;
        rd_kafka_metadata_destroy(md);
    }
    if (t)
        rd_kafka_topic_destroy(t);
    return yes;
}

int fsgd_kbus_create_topic(rd_kafka_t *rk, const char *topic, int partitions, int replication,
                           const char *const *configs, int timeout_ms, char *err, size_t errsz)
{
    /* An existing topic is kept as it is; asking first also spares clusters
     * that cannot create topics (the embedded one has no controller for
     * CreateTopics) a request that could only fail. */
    if (topic_exists(rk, topic, timeout_ms < 5000 ? timeout_ms : 5000)) {
        int P = fsgd_kbus_partitions(rk, topic, timeout_ms, err, errsz);
        return P < 0 ? P : 0;
    }
    char e[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, replication > 0 ? replication : -1, e, sizeof e);
    if (!nt)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "create topic %s: %s", topic, e);
    for (size_t i = 0; configs && configs[i] && configs[i + 1]; i += 2)
        if (rd_kafka_NewTopic_set_config(nt, configs[i], configs[i + 1])) {
            rd_kafka_NewTopic_destroy(nt);
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "create topic %s: bad config %s=%s", topic, configs[i],
                                configs[i + 1]);
        }
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    /* the controller answers once the topic is committed; leaders may still
     * be missing then, which fsgd_kbus_partitions below waits for */
    rd_kafka_AdminOptions_set_operation_timeout(opt, timeout_ms, NULL, 0);
    rd_kafka_AdminOptions_set_request_timeout(opt, timeout_ms, NULL, 0);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    int rc = 0;
    if (!ev) {
        rc = fsgd_err_fmt(err, errsz, FSGD_E_TIMEOUT, "create topic %s: no answer in %d ms", topic, timeout_ms);
    } else if (rd_kafka_event_error(ev)) {
        rc = fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "create topic %s: %s", topic, rd_kafka_event_error_string(ev));
    } else {
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
        size_t n = 0;
        const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(res, &n);
        for (size_t i = 0; i < n; i++) {
            rd_kafka_resp_err_t te = rd_kafka_topic_result_error(tr[i]);
            if (te && te != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "create topic %s (%d partitions, replication %d): %s",
                                  topic, partitions, replication, rd_kafka_topic_result_error_string(tr[i]));
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_NewTopic_destroy(nt);
    if (rc)
        return rc;
    /* CreateTopics returns before the partitions have leaders: a produce or
     * an offset query right after it fails with "Not leader for partition". */
    int P = fsgd_kbus_partitions(rk, topic, timeout_ms, err, errsz);
    return P < 0 ? P : 0;
}

int fsgd_kbus_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms, char *err, size_t errsz)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    int n = -1, leaderless = -1, wait_ms = 5;
    double t0 = fsgd_clock_ms();
    for (;;) {
        double left = timeout_ms - (fsgd_clock_ms() - t0);
        e = rd_kafka_metadata(rk, 0, t, &md, left > 100 ? (int)left : 100);
        if (!e && md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt > 0) {
            const rd_kafka_metadata_topic_t *mt = &md->topics[0];
            leaderless = -1;
            for (int p = 0; p < mt->partition_cnt && leaderless < 0; p++)
                if (mt->partitions[p].leader < 0 || mt->partitions[p].err) {
                    leaderless = mt->partitions[p].id;
                    e = mt->partitions[p].err ? mt->partitions[p].err : RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE;
                }
            if (leaderless < 0) {
                n = mt->partition_cnt;
                break;
            }
        } else if (!e && md->topic_cnt == 1) {
            e = md->topics[0].err;
        }
        if (md)
            rd_kafka_metadata_destroy(md);
        md = NULL;
        if (fsgd_clock_ms() - t0 > timeout_ms)
            break;
        /* a new topic's leaders come within tens of ms on a small cluster:
         * look again soon, then back off to 100 ms */
        sleep_ms(wait_ms);
        wait_ms = wait_ms < 50 ? 2 * wait_ms : 100;
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    if (n < 0 && leaderless >= 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_TIMEOUT, "topic %s: partition %d has no leader after %d ms: %s",
                            topic, leaderless, timeout_ms, rd_kafka_err2str(e));
    if (n < 0)
        return fsgd_err_fmt(err, errsz, e == RD_KAFKA_RESP_ERR__TIMED_OUT ? FSGD_E_TIMEOUT : FSGD_E_KAFKA,
                            "topic %s: no metadata after %d ms: %s", topic, timeout_ms,
                            e ? rd_kafka_err2str(e) : "no partitions");
    return n;
}

int fsgd_kbus_broker_count(rd_kafka_t *rk, int timeout_ms, char *err, size_t errsz)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, NULL, &md, timeout_ms);
    if (e)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "cluster metadata: %s", rd_kafka_err2str(e));
    int n = md->broker_cnt;
    rd_kafka_metadata_destroy(md);
    return n;
}

int fsgd_kbus_send(rd_kafka_t *rk, fsgd_auth_t *auth, const fsgd_bus_out_t *m, size_t chunk_max, uint64_t *wire,
                   char *err, size_t errsz)
{
    const char *topic = m->topic, *job = m->job, *key_prefix = m->key;
    const fsgd_kframe_t *hdr = m->hdr;
    const uint8_t *body = m->val;
    const size_t len = m->len;
    const int32_t partition = m->partition < 0 ? RD_KAFKA_PARTITION_UA : m->partition;
    if (chunk_max == 0 || chunk_max > FSGD_KBUS_CHUNK_MAX)
        chunk_max = FSGD_KBUS_CHUNK_MAX;
    size_t n = len ? (len + chunk_max - 1) / chunk_max : 1;
    if (n > FSGD_KBUS_MAX_CHUNKS)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "message of %zu bytes needs %zu chunks (max %u)", len, n,
                            FSGD_KBUS_MAX_CHUNKS);
    uint8_t *buf = malloc((len < chunk_max ? len : chunk_max) + FSGD_KFRAME_OVERHEAD + FSGD_KFRAME_TAG);
    if (!buf)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "send: out of memory");
    static const char *kinds[] = {"", "grad", "delta", "snapshot", "delta"};
    char key[48], step[24], sender[16], chunk[48], sent[24];
    snprintf(key, sizeof key, "%u", hdr->sender);
    snprintf(step, sizeof step, "%llu", (unsigned long long)hdr->step);
    snprintf(sender, sizeof sender, "%u", hdr->sender);
    for (size_t i = 0; i < n; i++) {
        fsgd_kframe_t f = *hdr;
        size_t off = i * chunk_max, bl = len - off < chunk_max ? len - off : chunk_max;
        f.chunk = (uint32_t)i;
        f.nchunks = (uint32_t)n;
        f.body = body + off;
        f.body_len = (uint32_t)bl;
        size_t fl = fsgd_kframe_write(buf, &f, auth);
        snprintf(chunk, sizeof chunk, "%zu/%zu", i, n);
        if (key_prefix)
            snprintf(key, sizeof key, "%.20s.%zu", key_prefix, i);
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(sent, sizeof sent, "%lld", (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000);
        rd_kafka_resp_err_t e;
        for (;;) {
            e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                                  RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(buf, fl),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADER("fsgd.job", job, -1),
                                  RD_KAFKA_V_HEADER("fsgd.kind", kinds[hdr->kind <= 4 ? hdr->kind : 0], -1),
                                  RD_KAFKA_V_HEADER("fsgd.step", step, -1),
                                  RD_KAFKA_V_HEADER("fsgd.sender", sender, -1),
                                  RD_KAFKA_V_HEADER("fsgd.chunk", chunk, -1),
                                  RD_KAFKA_V_HEADER("fsgd.sent_us", sent, -1), RD_KAFKA_V_END);
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                break;
            rd_kafka_poll(rk, 10);
        }
        if (e) {
            free(buf);
            return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "produce to %s: %s", topic, rd_kafka_err2str(e));
        }
        if (wire)
            *wire += fl;
    }
    free(buf);
    rd_kafka_poll(rk, 0);
    return 0;
}

int fsgd_kbus_flush(rd_kafka_t *rk, int timeout_ms, char *err, size_t errsz)
{
    rd_kafka_resp_err_t e = rd_kafka_flush(rk, timeout_ms);
    if (e)
        return fsgd_err_fmt(err, errsz, e == RD_KAFKA_RESP_ERR__TIMED_OUT ? FSGD_E_TIMEOUT : FSGD_E_KAFKA,
                            "flush: %d message(s) not delivered in %d ms: %s", rd_kafka_outq_len(rk), timeout_ms,
                            rd_kafka_err2str(e));
    return 0;
}

int fsgd_kbus_watermarks(rd_kafka_t *rk, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                         int timeout_ms, char *err, size_t errsz)
{
    double t0 = fsgd_clock_ms();
    int tries = 0;
    for (;;) {
        double left = timeout_ms - (fsgd_clock_ms() - t0);
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(rk, topic, partition, lo, hi, left > 1000 ? (int)left : 1000);
        tries++;
        if (!e)
            return 0;
        if (!retriable(e) || fsgd_clock_ms() - t0 + 200 > timeout_ms)
            return fsgd_err_fmt(err, errsz, e == RD_KAFKA_RESP_ERR__TIMED_OUT ? FSGD_E_TIMEOUT : FSGD_E_KAFKA,
                                "watermarks of %s [%d]: %s (%d tries in %.1f s)", topic, (int)partition,
                                rd_kafka_err2str(e), tries, (fsgd_clock_ms() - t0) / 1e3);
        /* a leader that moved: fetch fresh metadata before asking again */
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
        if (t && rd_kafka_metadata(rk, 0, t, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR)
            rd_kafka_metadata_destroy(md);
        if (t)
            rd_kafka_topic_destroy(t);
        sleep_ms(tries < 5 ? 50 * tries : 200);
    }
}

int fsgd_kbus_watermarks_all(rd_kafka_t *rk, const char *topic, int n, int64_t *lo, int64_t *hi, int timeout_ms,
                             char *err, size_t errsz)
{
    /* ListOffsets for every partition at once, one request per leader (for
     * the earliest, then the latest offsets), not two round trips for each
     * partition: 44 partitions took a second on the embedded cluster. Any
     * trouble falls back to the one-by-one query, which retries. */
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    for (int pass = 0; pass < 2 && !e && n > 0; pass++) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
        for (int p = 0; p < n; p++)
            rd_kafka_topic_partition_list_add(l, topic, p)->offset = pass ? RD_KAFKA_OFFSET_END
                                                                          : RD_KAFKA_OFFSET_BEGINNING;
        e = rd_kafka_offsets_for_times(rk, l, timeout_ms < 5000 ? timeout_ms : 5000);
        for (int i = 0; i < l->cnt && !e; i++) {
            const rd_kafka_topic_partition_t *tp = &l->elems[i];
            if (tp->err || tp->offset < 0 || tp->partition < 0 || tp->partition >= n)
                e = tp->err ? tp->err : RD_KAFKA_RESP_ERR__BAD_MSG;
            else
                (pass ? hi : lo)[tp->partition] = tp->offset;
        }
        if (!e && l->cnt != n)
            e = RD_KAFKA_RESP_ERR__BAD_MSG;
        rd_kafka_topic_partition_list_destroy(l);
    }
    for (int p = 0; e && p < n; p++)
        FSGD_TRY(fsgd_kbus_watermarks(rk, topic, p, &lo[p], &hi[p], timeout_ms, err, errsz));
    return 0;
}

/* A read of ranges [starts[i], ends[i]) of partitions parts[i] under way
 * (read_ranges). */
typedef struct ranges_read {
    rd_kafka_t *consumer;
    fsgd_auth_t *auth;
    const fsgd_bus_ranges_t *r;
    int gaps;      /* offsets may have holes (compaction) */
    int rows;      /* no holes, and every message a row whose tag is checked (fsgd_auth_row_ok) */
    int32_t maxp;  /* the highest partition read */
    int open;      /* ranges not read to their end */
    int64_t *next; /* [i]: the next offset of range i */
    int *slot;     /* [partition]: its range, or -1 */
} ranges_read_t;

static int read_ranges(rd_kafka_t *consumer, fsgd_auth_t *auth, const fsgd_bus_ranges_t *r, int mode, char *err,
                       size_t errsz);

int fsgd_kbus_read_range(rd_kafka_t *consumer, fsgd_auth_t *auth, const fsgd_bus_range_t *r, char *err, size_t errsz)
{
    const fsgd_bus_ranges_t one = {.topic = r->topic, .n = 1, .parts = &r->partition, .starts = &r->start,
                                   .ends = &r->end, .timeout_ms = r->timeout_ms, .fn = r->fn, .ctx = r->ctx};
    return read_ranges(consumer, r->mode == FSGD_BUS_READ_ROWS ? auth : NULL, &one, r->mode, err, errsz);
}

int fsgd_kbus_read_rows_parts(rd_kafka_t *consumer, fsgd_auth_t *auth, const fsgd_bus_ranges_t *r, char *err,
                              size_t errsz)
{
    return read_ranges(consumer, auth, r, FSGD_BUS_READ_ROWS, err, errsz);
}

/* Counts the open ranges and assigns them all to the consumer at once.
 * 0 with rr->open == 0 when there is nothing to read (nothing assigned). */
static int ranges_assign(ranges_read_t *rr, char *err, size_t errsz)
{
    const fsgd_bus_ranges_t *r = rr->r;
    rr->maxp = -1;
    rr->open = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->parts[i] > rr->maxp)
            rr->maxp = r->parts[i];
        rr->open += r->starts[i] < r->ends[i];
    }
    if (!rr->open)
        return 0;
    rr->next = malloc((size_t)r->n * sizeof *rr->next);
    rr->slot = malloc(((size_t)rr->maxp + 1) * sizeof *rr->slot);
    rd_kafka_topic_partition_list_t *l = rr->next && rr->slot ? rd_kafka_topic_partition_list_new(rr->open) : NULL;
    if (!l)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "reading %s: out of memory", r->topic);
    for (int32_t p = 0; p <= rr->maxp; p++)
        rr->slot[p] = -1;
    for (int i = 0; i < r->n; i++) {
        rr->next[i] = r->starts[i];
        if (r->starts[i] < r->ends[i]) {
            rr->slot[r->parts[i]] = i;
            rd_kafka_topic_partition_list_add(l, r->topic, r->parts[i])->offset = r->starts[i];
        }
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(rr->consumer, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "assign %s [%d%s]: %s", r->topic, (int)r->parts[0],
                            r->n > 1 ? ", ..." : "", rd_kafka_err2str(e));
    return 0;
}

/* What an error message of the consumer means for the read: 0 for those
 * the client retries or that only inform (end of a partition, a broker
 * down), else the error. */
static int ranges_msg_error(const ranges_read_t *rr, const rd_kafka_message_t *m, char *err, size_t errsz)
{
    const char *topic = rr->r->topic;
    int32_t partition = m->partition;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
        return 0;
    int k = partition >= 0 && partition <= rr->maxp ? rr->slot[partition] : -1;
    long long at = k >= 0 ? (long long)rr->next[k] : -1;
    if (m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE || m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET)
        return fsgd_err_fmt(err, errsz, FSGD_E_LOST,
                            "data lost: %s [%d] offset %lld is no longer in the log (log start moved past "
                            "it: retention or the broker's size limit): %s",
                            topic, (int)partition, at, rd_kafka_message_errstr(m));
    if (m->err != RD_KAFKA_RESP_ERR__TRANSPORT && m->err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "%s [%d]: %s", topic, (int)partition,
                            rd_kafka_message_errstr(m));
    return 0;
}

/* A row message's tag under the job key: 0 and *skip 0 for a good one; a
 * bad one is skipped (*skip 1, and fn told that no rows are at its offset)
 * where the job allows it, else FSGD_E_AUTH. */
static int ranges_check_row(const ranges_read_t *rr, const rd_kafka_message_t *m, int *skip, char *err,
                            size_t errsz)
{
    const char *topic = rr->r->topic;
    int32_t partition = m->partition;
    rd_kafka_headers_t *h = NULL;
    const void *mac = NULL;
    size_t ml = 0;
    *skip = 0;
    if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(h, FSGD_KBUS_MAC_HEADER, &mac, &ml) != RD_KAFKA_RESP_ERR_NO_ERROR)
        mac = NULL;
    /* checked once: a valid row's tag was computed twice before */
    if (fsgd_auth_row_ok(rr->auth, mac, ml, partition, m->payload, m->len))
        return 0;
    if (fsgd_auth_skip_bad_rows(rr->auth)) {
        fsgd_auth_note_skipped_row(rr->auth, topic, partition, m->offset,
                                   mac ? "a row whose tag is not this job key's" : "a row without a tag");
        *skip = 1;
        return rr->r->fn(rr->r->ctx, partition, m->offset, "", 0, err, errsz); /* no rows at this offset */
    }
    return fsgd_err_fmt(err, errsz, FSGD_E_AUTH,
                        "topic %s partition %d offset %lld: %s: the job is authenticated and its rows "
                        "must be written with its key (fsgd produce --job-key-file), or the job must "
                        "allow unsigned rows (unsigned_rows: 1, for kcat and other outside producers)%s",
                        topic, (int)partition, (long long)m->offset,
                        mac ? "a row whose tag is not this job key's" : "a row without a tag",
                        mac ? "; rows signed with another key: is another job of the same name writing "
                              "into the topic?"
                            : "");
}

/* The ranges of r, all assigned at once: one fetch serves them all, where
 * a partition at a time paid each one's start (on librdkafka's mock, 70 ms
 * a partition). Each partition's messages come in offset order; partitions
 * interleave. mode: FSGD_BUS_READ_COMPACTED, FSGD_BUS_READ_ROWS or 0. */
static int read_ranges(rd_kafka_t *consumer, fsgd_auth_t *auth, const fsgd_bus_ranges_t *r, int mode, char *err,
                       size_t errsz)
{
    ranges_read_t rr = {.consumer = consumer, .auth = auth, .r = r, .gaps = mode == FSGD_BUS_READ_COMPACTED,
                        .rows = mode == FSGD_BUS_READ_ROWS};
    int rc = ranges_assign(&rr, err, errsz);
    if (rc || !rr.open) {
        free(rr.next);
        free(rr.slot);
        return rc;
    }
    const char *topic = r->topic;
    const int64_t *ends = r->ends;
    int64_t *next = rr.next;
    double last = fsgd_clock_ms();
    while (rr.open > 0 && rc == 0) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 100);
        if (!m) {
            if (fsgd_clock_ms() - last > r->timeout_ms) {
                int i = 0;
                while (i < r->n - 1 && next[i] >= ends[i])
                    i++;
                rc = fsgd_err_fmt(err, errsz, FSGD_E_TIMEOUT,
                                  "%s [%d]: no data for %d ms at offset %lld (reading up to %lld)", topic,
                                  (int)r->parts[i], r->timeout_ms, (long long)next[i], (long long)ends[i]);
            }
            continue;
        }
        int32_t partition = m->partition;
        int i = !m->err && partition >= 0 && partition <= rr.maxp && m->rkt &&
                        !strcmp(rd_kafka_topic_name(m->rkt), topic)
                    ? rr.slot[partition]
                    : -1;
        if (m->err) {
            rc = ranges_msg_error(&rr, m, err, errsz);
            rd_kafka_message_destroy(m);
            continue;
        }
        if (i < 0 || m->offset < next[i] || next[i] >= ends[i]) { /* another's, or seen before a seek */
            rd_kafka_message_destroy(m);
            continue;
        }
        if (m->offset != next[i] && !rr.gaps) {
            rc = fsgd_err_fmt(err, errsz, FSGD_E_LOST,
                              "data lost: %s [%d]: expected offset %lld, got %lld (a gap or a log start past "
                              "the position)",
                              topic, (int)partition, (long long)next[i], (long long)m->offset);
            rd_kafka_message_destroy(m);
            break;
        }
        int skip = 0;
        if (m->offset < ends[i] && rr.rows)
            rc = ranges_check_row(&rr, m, &skip, err, errsz);
        if (m->offset < ends[i] && !rc && !skip)
            rc = r->fn(r->ctx, partition, m->offset, m->payload, m->len, err, errsz);
        next[i] = m->offset + 1;
        if (next[i] >= ends[i])
            rr.open--;
        last = fsgd_clock_ms();
        rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(consumer, NULL);
    free(rr.next);
    free(rr.slot);
    return rc;
}

void fsgd_klat_add(fsgd_klat_t *l, const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t n = 0;
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, "fsgd.sent_us", &v, &n) || !v || n == 0 ||
        n >= 24)
        return;
    char buf[24];
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *end;
    long long us = strtoll(buf, &end, 10);
    if (*end || us <= 0)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double ms = ((double)now.tv_sec * 1e6 + now.tv_nsec / 1e3 - (double)us) / 1e3;
    l->ms[l->n++ % FSGD_KLAT_CAP] = ms;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fsgd_klat_quantile(const fsgd_klat_t *l, double q)
{
    size_t n = l->n < FSGD_KLAT_CAP ? (size_t)l->n : FSGD_KLAT_CAP;
    if (!n)
        return -1;
    double *c = malloc(n * sizeof *c);
    if (!c)
        return -1;
    memcpy(c, l->ms, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    double v = c[(size_t)(q * (double)(n - 1) + 0.5)];
    free(c);
    return v;
}

