/* The bus (fsgd/bus.h) over librdkafka: each call is the librdkafka call
 * the roles made before the seam, so behaviour and bytes are unchanged. */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bus_impl.h"
#include "fsgd/error.h"
#include "kbus_raw.h"

typedef struct kbus {
    fsgd_bus_t base;
    char brokers[512];
    char *options; /* the job's librdkafka settings (secrets: wiped at the end) */
    size_t options_cap;
    fsgd_kconf_t kc; /* brokers and options, for every client */
} kbus_t;

typedef struct kclient {
    fsgd_bus_client_t base;
    rd_kafka_t *rk;
    int consumer;
    char topic[256]; /* a group consumer's topic */
    fsgd_bus_rebalance_fn rebalance;
    void *opaque;
    /* the offsets of the last assign, for partitions without a position yet */
    fsgd_bus_tp_t *asg;
    char (*asg_topic)[256];
    int nasg;
} kclient_t;

typedef struct kmsg {
    fsgd_bus_msg_t m;
    rd_kafka_message_t *rm;
} kmsg_t;

static const fsgd_bus_ops_t kafka_ops;

static void k_destroy(fsgd_bus_t *b)
{
    kbus_t *kb = (kbus_t *)b;
    if (kb->options)
        fsgd_kbus_options_wipe(kb->options, kb->options_cap);
    free(kb->options);
    free(b);
}

fsgd_bus_t *fsgd_bus_kafka_new(const char *brokers, const char *options, char *err, size_t errsz)
{
    kbus_t *b = calloc(1, sizeof *b);
    size_t cap = options ? strlen(options) + 1 : 0;
    if (!b || (options && !(b->options = malloc(cap)))) {
        free(b);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
        return NULL;
    }
    b->base.ops = &kafka_ops;
    snprintf(b->brokers, sizeof b->brokers, "%s", brokers ? brokers : "");
    if (options)
        memcpy(b->options, options, cap);
    b->options_cap = cap;
    b->kc = (fsgd_kconf_t){b->brokers, b->options};
    return &b->base;
}

/* librdkafka's rebalance callback: the group consumer only tracks
 * ownership (rows are read by offset elsewhere), so its partitions are
 * assigned at their end and paused; the role hears the partition numbers. */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t e, rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    kclient_t *c = opaque;
    if (e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        int32_t *p = malloc((parts->cnt ? parts->cnt : 1) * sizeof *p);
        int n = 0;
        for (int i = 0; i < parts->cnt; i++) {
            if (p && !strcmp(parts->elems[i].topic, c->topic))
                p[n++] = parts->elems[i].partition;
            parts->elems[i].offset = RD_KAFKA_OFFSET_END;
        }
        /* sorted, as the roles expect */
        for (int i = 1; p && i < n; i++)
            for (int j = i; j > 0 && p[j - 1] > p[j]; j--) {
                int32_t t = p[j];
                p[j] = p[j - 1];
                p[j - 1] = t;
            }
        rd_kafka_assign(rk, parts);
        rd_kafka_pause_partitions(rk, parts);
        if (p)
            c->rebalance(c->opaque, 1, p, n);
        free(p);
    } else {
        rd_kafka_assign(rk, NULL);
        c->rebalance(c->opaque, 0, NULL, 0);
    }
}

static fsgd_bus_client_t *k_client_new(fsgd_bus_t *b, fsgd_kclient_t kind, const char *group, const char *topic,
                                       fsgd_bus_rebalance_fn rebalance, void *opaque, char *err, size_t errsz)
{
    kbus_t *kb = (kbus_t *)b;
    kclient_t *c = calloc(1, sizeof *c);
    if (!c) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
        return NULL;
    }
    c->base.bus = b;
    c->consumer = FSGD_KCLIENT_IS_CONSUMER(kind);
    if (rebalance) {
        snprintf(c->topic, sizeof c->topic, "%s", topic);
        c->rebalance = rebalance;
        c->opaque = opaque;
        c->rk = fsgd_kbus_group_consumer(&kb->kc, group, on_rebalance, c, err, errsz);
    } else {
        c->rk = fsgd_kbus_client(kind, &kb->kc, group, err, errsz);
    }
    if (!c->rk) {
        free(c);
        return NULL;
    }
    if (rebalance) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, topic, RD_KAFKA_PARTITION_UA);
        rd_kafka_resp_err_t e = rd_kafka_subscribe(c->rk, l);
        rd_kafka_topic_partition_list_destroy(l);
        if (e) {
            fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "subscribe %s: %s", topic, rd_kafka_err2str(e));
            rd_kafka_consumer_close(c->rk);
            rd_kafka_destroy(c->rk);
            free(c);
            return NULL;
        }
    }
    return &c->base;
}

static void k_client_destroy(fsgd_bus_client_t *bc)
{
    kclient_t *c = (kclient_t *)bc;
    if (c->consumer) {
        rd_kafka_consumer_close(c->rk);
    } else {
        rd_kafka_purge(c->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    }
    rd_kafka_destroy(c->rk);
    free(c->asg);
    free(c->asg_topic);
    free(c);
}

static int k_send(fsgd_bus_client_t *bc, const fsgd_bus_out_t *m, uint64_t *wire, char *err, size_t errsz)
{
    return fsgd_kbus_send(((kclient_t *)bc)->rk, bc->bus->auth, m, 0, wire, err, errsz);
}

static int k_produce(fsgd_bus_client_t *bc, const fsgd_bus_out_t *m, char *err, size_t errsz)
{
    kclient_t *c = (kclient_t *)bc;
    const char *topic = m->topic, *key = m->key, *job = m->job, *kind = m->kind, *mac = m->mac;
    const void *val = m->val;
    const size_t len = m->len;
    int32_t part = m->partition < 0 ? RD_KAFKA_PARTITION_UA : m->partition;
    rd_kafka_resp_err_t e;
    for (;;) {
        rd_kafka_headers_t *h = NULL;
        if (job || mac) {
            h = rd_kafka_headers_new(3);
            if (job) {
                rd_kafka_header_add(h, "fsgd.job", -1, job, -1);
                rd_kafka_header_add(h, "fsgd.kind", -1, kind, -1);
            }
            if (mac)
                rd_kafka_header_add(h, FSGD_KBUS_MAC_HEADER, -1, mac, -1);
        }
        e = h ? rd_kafka_producev(c->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                                  RD_KAFKA_V_KEY(key, key ? strlen(key) : 0), RD_KAFKA_V_VALUE((void *)val, len),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END)
              : rd_kafka_producev(c->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                                  RD_KAFKA_V_KEY(key, key ? strlen(key) : 0), RD_KAFKA_V_VALUE((void *)val, len),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (e && h) /* producev owns the headers only when it succeeds */
            rd_kafka_headers_destroy(h);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(c->rk, 10); /* a full queue: let deliveries drain it */
    }
    rd_kafka_poll(c->rk, 0);
    if (e)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "produce to %s: %s", topic, rd_kafka_err2str(e));
    return 0;
}

static void k_serve(fsgd_bus_client_t *bc)
{
    rd_kafka_poll(((kclient_t *)bc)->rk, 0);
}

static void k_group_nudge(fsgd_bus_client_t *bc)
{
    rd_kafka_topic_partition_list_t *l = NULL;
    if (!rd_kafka_assignment(((kclient_t *)bc)->rk, &l) && l)
        rd_kafka_topic_partition_list_destroy(l);
}

static int k_flush(fsgd_bus_client_t *bc, int timeout_ms, char *err, size_t errsz)
{
    return fsgd_kbus_flush(((kclient_t *)bc)->rk, timeout_ms, err, errsz);
}

static int k_assign(fsgd_bus_client_t *bc, const fsgd_bus_tp_t *tps, int n, char *err, size_t errsz)
{
    kclient_t *c = (kclient_t *)bc;
    free(c->asg);
    free(c->asg_topic);
    c->asg = NULL;
    c->asg_topic = NULL;
    c->nasg = 0;
    if (n == 0) {
        rd_kafka_assign(c->rk, NULL);
        return 0;
    }
    c->asg = calloc((size_t)n, sizeof *c->asg);
    c->asg_topic = calloc((size_t)n, sizeof *c->asg_topic);
    if (!c->asg || !c->asg_topic)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int i = 0; i < n; i++) {
        rd_kafka_topic_partition_list_add(l, tps[i].topic, tps[i].partition)->offset = tps[i].offset;
        snprintf(c->asg_topic[i], sizeof c->asg_topic[i], "%s", tps[i].topic);
        c->asg[i] = tps[i];
        c->asg[i].topic = c->asg_topic[i];
    }
    c->nasg = n;
    rd_kafka_resp_err_t e = rd_kafka_assign(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "assign %s: %s", tps[0].topic, rd_kafka_err2str(e));
    return 0;
}

static int k_restart(fsgd_bus_client_t *bc, const char *topic, int32_t partition, int64_t offset, char *err,
                     size_t errsz)
{
    /* The partition's fetcher stopped (auto.offset.reset=error): assign
     * again, that partition from offset, the others from where they are
     * (or, never read, from where they were assigned). */
    kclient_t *c = (kclient_t *)bc;
    rd_kafka_topic_partition_list_t *l = NULL;
    rd_kafka_resp_err_t e = rd_kafka_assignment(c->rk, &l);
    if (!e)
        e = rd_kafka_position(c->rk, l);
    for (int i = 0; !e && i < l->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &l->elems[i];
        if (tp->partition == partition && !strcmp(tp->topic, topic))
            tp->offset = offset;
        else if (tp->offset < 0)
            for (int k = 0; k < c->nasg; k++)
                if (c->asg[k].partition == tp->partition && !strcmp(c->asg[k].topic, tp->topic))
                    tp->offset = c->asg[k].offset;
    }
    if (!e)
        e = rd_kafka_assign(c->rk, l);
    if (l)
        rd_kafka_topic_partition_list_destroy(l);
    if (e)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "%s [%d]: reading again from %lld failed: %s", topic,
                            (int)partition, (long long)offset, rd_kafka_err2str(e));
    return 0;
}

/* Produce-to-consume latency from the header fsgd.sent_us that
 * fsgd_kbus_send stamps (-1 without it). */
static double latency_ms(const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t n = 0;
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, "fsgd.sent_us", &v, &n) || !v || n == 0 ||
        n >= 24)
        return -1;
    char buf[24];
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *end;
    long long us = strtoll(buf, &end, 10);
    if (*end || us <= 0)
        return -1;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return ((double)now.tv_sec * 1e6 + now.tv_nsec / 1e3 - (double)us) / 1e3;
}

static int classify(rd_kafka_resp_err_t e)
{
    switch (e) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
        return FSGD_BUS_OK;
    case RD_KAFKA_RESP_ERR__PARTITION_EOF:
        return FSGD_BUS_EOF;
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
    case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
        return FSGD_BUS_LOST;
    case RD_KAFKA_RESP_ERR__FATAL:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
        return FSGD_BUS_FATAL;
    default:
        return FSGD_BUS_TRANSIENT;
    }
}

static fsgd_bus_msg_t *k_poll(fsgd_bus_client_t *bc, int timeout_ms)
{
    kclient_t *c = (kclient_t *)bc;
    rd_kafka_message_t *rm = rd_kafka_consumer_poll(c->rk, timeout_ms);
    if (!rm)
        return NULL;
    kmsg_t *k = calloc(1, sizeof *k);
    if (!k) {
        rd_kafka_message_destroy(rm);
        return NULL;
    }
    k->rm = rm;
    fsgd_bus_msg_t *m = &k->m;
    m->client = bc;
    m->topic = rm->rkt ? rd_kafka_topic_name(rm->rkt) : "";
    m->partition = rm->partition;
    m->offset = rm->offset;
    m->val = rm->payload;
    m->len = rm->len;
    m->code = (int)rm->err;
    m->err = classify(rm->err);
    m->errstr = rm->err ? rd_kafka_message_errstr(rm) : "";
    m->errname = rm->err ? rd_kafka_err2name(rm->err) : "";
    m->lat_ms = rm->err ? -1 : latency_ms(rm);
    m->key = rm->key;
    m->key_len = rm->key_len;
    rd_kafka_headers_t *h = NULL;
    if (!rm->err && rd_kafka_message_headers(rm, &h) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        rd_kafka_header_get_last(h, FSGD_KBUS_MAC_HEADER, &m->mac, &m->mac_len) != RD_KAFKA_RESP_ERR_NO_ERROR)
        m->mac = NULL;
    return m;
}

static void k_msg_destroy(fsgd_bus_msg_t *m)
{
    kmsg_t *k = (kmsg_t *)m;
    rd_kafka_message_destroy(k->rm);
    free(k);
}

static int k_fatal(fsgd_bus_client_t *bc, char *buf, size_t cap)
{
    return rd_kafka_fatal_error(((kclient_t *)bc)->rk, buf, cap) != RD_KAFKA_RESP_ERR_NO_ERROR;
}

static int k_partitions(fsgd_bus_client_t *bc, const char *topic, int timeout_ms, char *err, size_t errsz)
{
    return fsgd_kbus_partitions(((kclient_t *)bc)->rk, topic, timeout_ms, err, errsz);
}

static int k_topic_exists(fsgd_bus_client_t *bc, const char *topic, int timeout_ms, char *err, size_t errsz)
{
    /* every topic's metadata: asking for the one topic makes a broker (the
     * embedded cluster) that creates topics on demand create it */
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(((kclient_t *)bc)->rk, 1, NULL, &md, timeout_ms);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "cluster metadata: %s", rd_kafka_err2str(e));
    int found = 0;
    for (int i = 0; i < md->topic_cnt && !found; i++)
        found = strcmp(md->topics[i].topic, topic) == 0;
    rd_kafka_metadata_destroy(md);
    return found;
}

static int k_watermarks(fsgd_bus_client_t *bc, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                        int timeout_ms, char *err, size_t errsz)
{
    return fsgd_kbus_watermarks(((kclient_t *)bc)->rk, topic, partition, lo, hi, timeout_ms, err, errsz);
}

static int k_watermarks_all(fsgd_bus_client_t *bc, const char *topic, int n, int64_t *lo, int64_t *hi,
                            int timeout_ms, char *err, size_t errsz)
{
    return fsgd_kbus_watermarks_all(((kclient_t *)bc)->rk, topic, n, lo, hi, timeout_ms, err, errsz);
}

static int k_read_range(fsgd_bus_client_t *bc, const fsgd_bus_range_t *r, char *err, size_t errsz)
{
    return fsgd_kbus_read_range(((kclient_t *)bc)->rk, bc->bus->auth, r, err, errsz);
}

static int k_read_rows_parts(fsgd_bus_client_t *bc, const fsgd_bus_ranges_t *r, char *err, size_t errsz)
{
    rd_kafka_t *rk = ((kclient_t *)bc)->rk;
    /* librdkafka's mock serves many partitions at once far slower than one
     * at a time (86 partitions of 2 MiB: 17 s against 6 s) */
    if (fsgd_kbus_is_mock(&((kbus_t *)bc->bus)->kc)) {
        for (int i = 0; i < r->n; i++) {
            fsgd_bus_ranges_t one = *r;
            one.n = 1;
            one.parts = &r->parts[i];
            one.starts = &r->starts[i];
            one.ends = &r->ends[i];
            FSGD_TRY(fsgd_kbus_read_rows_parts(rk, bc->bus->auth, &one, err, errsz));
        }
        return 0;
    }
    return fsgd_kbus_read_rows_parts(rk, bc->bus->auth, r, err, errsz);
}

static int k_create_topic(fsgd_bus_client_t *bc, const char *topic, int partitions, int replication,
                          const char *const *configs, int timeout_ms, char *err, size_t errsz)
{
    return fsgd_kbus_create_topic(((kclient_t *)bc)->rk, topic, partitions, replication, configs, timeout_ms, err,
                                  errsz);
}

static int k_broker_count(fsgd_bus_client_t *bc, int timeout_ms, char *err, size_t errsz)
{
    return fsgd_kbus_broker_count(((kclient_t *)bc)->rk, timeout_ms, err, errsz);
}

static int k_kind(const fsgd_bus_t *b)
{
    return fsgd_kbus_is_mock(&((const kbus_t *)b)->kc) ? FSGD_BUS_KAFKA_EMBEDDED : FSGD_BUS_KAFKA;
}

static const fsgd_bus_ops_t kafka_ops = {
    .destroy = k_destroy,
    .kind = k_kind,
    .client_new = k_client_new,
    .client_destroy = k_client_destroy,
    .send = k_send,
    .produce = k_produce,
    .serve = k_serve,
    .group_nudge = k_group_nudge,
    .flush = k_flush,
    .assign = k_assign,
    .restart = k_restart,
    .poll = k_poll,
    .msg_destroy = k_msg_destroy,
    .fatal = k_fatal,
    .partitions = k_partitions,
    .topic_exists = k_topic_exists,
    .watermarks = k_watermarks,
    .watermarks_all = k_watermarks_all,
    .read_range = k_read_range,
    .read_rows_parts = k_read_rows_parts,
    .create_topic = k_create_topic,
    .broker_count = k_broker_count,
};
