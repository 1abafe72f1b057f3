/* The Kafka bus of a distributed job (trainer/KAFKA_FORMAT.md).
 *
 * - Client configuration with the low-latency settings the mock cluster
 *   needs (fetch.wait.max.ms=1, ...), plus FSGD_RDKAFKA="k=v,k=v" overrides.
 * - The embedded cluster: librdkafka's in-process mock (rdkafka_mock.h).
 * - Framing: every fsgd message value is one frame (magic, version, kind,
 *   generation, sender, step, chunk i of n, body, CRC32C); large bodies are
 *   split into chunks below FSGD_KBUS_CHUNK_MAX. The same fields are copied
 *   into Kafka headers (text) for outside clients.
 * - Reassembly with duplicate dropping by (kind, gen, sender, step, chunk).
 * - Reading a partition's offset range with gap / log-start detection.
 *
 * Nothing here prints; errors go to the caller's buffer. Handles are not
 * thread safe unless stated. */
#ifndef FSGD_KBUS_H
#define FSGD_KBUS_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#define FSGD_KFRAME_MAGIC "FSGK"
#define FSGD_KFRAME_VERSION 1
#define FSGD_KFRAME_HEADER 36  /* bytes before the body */
#define FSGD_KFRAME_OVERHEAD 40 /* header + CRC32C trailer */
#define FSGD_KBUS_CHUNK_MAX (512u * 1024u) /* body bytes per message, well below 1 MiB */
#define FSGD_KBUS_MAX_CHUNKS 65536u

typedef enum fsgd_kmsg_kind {
    FSGD_KMSG_GRAD = 1,     /* worker -> aggregator, <job>.grads */
    FSGD_KMSG_DELTA = 2,    /* aggregator -> workers, <job>.model: touched keys' new values */
    FSGD_KMSG_SNAPSHOT = 3, /* aggregator -> workers, <job>.model: the whole model */
    FSGD_KMSG_DELTA_PACKED = 4, /* <job>.model: touched keys' new values, keys bit-packed (fsgd/keys.h) */
    FSGD_KMSG_DELTA_CODED = 5,  /* <job>.model: an update every replica adds, codec-compressed (fsgd/downlink.h) */
    FSGD_KMSG_PULL = 6,   /* working-set worker -> aggregator, <job>.grads: the keys a step's rows use */
    FSGD_KMSG_VALUES = 7, /* aggregator -> that worker, <job>.pull: their values (replica working_set) */
} fsgd_kmsg_kind_t;
#define FSGD_KMSG_KIND_LAST FSGD_KMSG_VALUES

#define FSGD_KFLAG_FINAL 1u   /* model message: the job is finished */
#define FSGD_KFLAG_SECTION 2u /* model message: a strategy feedback section follows the state (fsgd/strategy.h) */
#define FSGD_KFLAG_AUTH 4u    /* a FSGD_KFRAME_TAG-byte tag under the job key follows the CRC32C (fsgd/auth.h) */
#define FSGD_KFRAME_TAG 32    /* = FSGD_AUTH_TAG_BYTES */
/* Gradient frame, bits 8-15: its lag, so the gradient of step s was computed
 * on the model of step s - 1 - lag (bounded staleness, job key staleness). */
#define FSGD_KFLAG_LAG_SHIFT 8
#define FSGD_KFLAG_LAG_MASK 0xFF00u

/* One frame as it appears on the wire (body borrowed from the buffer). */
typedef struct fsgd_kframe {
    uint8_t kind;
    uint16_t flags;
    uint32_t gen;     /* aggregator generation the message belongs to */
    uint32_t sender;  /* worker id; 0 for the aggregator */
    uint64_t step;
    uint32_t chunk;   /* 0-based index */
    uint32_t nchunks; /* >= 1 */
    const uint8_t *body;
    uint32_t body_len;
} fsgd_kframe_t;

/* Writes frame f (with f->body) into out, which must hold
 * f->body_len + FSGD_KFRAME_OVERHEAD + FSGD_KFRAME_TAG bytes. With a job key
 * set (fsgd/auth.h) the frame gets flag FSGD_KFLAG_AUTH and its tag after
 * the CRC; without one neither. Returns the bytes written. */
size_t fsgd_kframe_write(uint8_t *out, const fsgd_kframe_t *f);

/* Parses and checks one frame at the start of buf (magic, version, reserved
 * bits, kind, chunk < nchunks, length against len, CRC32C). *used (may be
 * NULL) gets the frame's size, so concatenated frames can be walked. body
 * points into buf. With a job key set, a frame without FSGD_KFLAG_AUTH and a
 * valid tag is refused (FSGD_E_AUTH); without one, so is a frame that has a
 * tag (it cannot be checked: give the job key). Returns 0 or
 * FSGD_E_FORMAT/TRUNCATED/CRC/VERSION/AUTH. */
int fsgd_kframe_parse(const uint8_t *buf, size_t len, fsgd_kframe_t *f, size_t *used, char *err, size_t errsz);

/* The same checks but the tag's: for looking at frames of other runs (is a
 * job name in use?), never for acting on them. */
int fsgd_kframe_parse_unverified(const uint8_t *buf, size_t len, fsgd_kframe_t *f, size_t *used, char *err,
                                 size_t errsz);

/* Reassembles chunked messages and drops duplicates. */
typedef struct fsgd_kasm fsgd_kasm_t;

enum { FSGD_KASM_PENDING = 0, FSGD_KASM_DONE = 1, FSGD_KASM_DUP = 2 };

fsgd_kasm_t *fsgd_kasm_new(void);
void fsgd_kasm_destroy(fsgd_kasm_t *a);

/* Feeds one checked frame. Returns FSGD_KASM_DONE when it completed a
 * message: *body and *len then hold the whole body (owned by a, valid until the
 * next call); FSGD_KASM_PENDING when chunks are missing; FSGD_KASM_DUP when
 * (kind, gen, sender, step, chunk) was seen before (dropped); or a negative
 * error for a frame inconsistent with its siblings (chunk count differs). */
int fsgd_kasm_feed(fsgd_kasm_t *a, const fsgd_kframe_t *f, const uint8_t **body, size_t *len, char *err,
                   size_t errsz);

/* Forgets pending messages older than step (of any sender) to bound memory. */
void fsgd_kasm_prune(fsgd_kasm_t *a, uint64_t below_step);

/* Bounds what a holds for incomplete messages (0: no bound, the default):
 * a frame whose body is above FSGD_KBUS_CHUNK_MAX, that would grow its
 * message past max_message bytes, or all pending messages past max_total,
 * is refused by fsgd_kasm_feed with FSGD_E_RANGE (and not stored). */
void fsgd_kasm_set_limits(fsgd_kasm_t *a, size_t max_message, size_t max_total);

/* 1 when the message of f's (kind, gen, sender, step) was completed (among
 * the last 8192): a copy of f would be a duplicate. */
int fsgd_kasm_completed(const fsgd_kasm_t *a, const fsgd_kframe_t *f);

/* Body bytes held in incomplete messages now, and the most ever held. */
size_t fsgd_kasm_held(const fsgd_kasm_t *a);
size_t fsgd_kasm_held_max(const fsgd_kasm_t *a);

/* Forgets everything about the message of f's (kind, gen, sender, step):
 * that it completed, so a later copy is reassembled again instead of dropped
 * as a duplicate, and any chunks pending. For a receiver that rejected what
 * it reassembled, or whose chunks disagree: a forged or stray message must
 * not shadow the genuine one with the same key. */
void fsgd_kasm_forget(fsgd_kasm_t *a, const fsgd_kframe_t *f);

/* --- clients --- */

typedef enum fsgd_kclient {
    FSGD_KCLIENT_PRODUCER = 1,      /* low latency producer (gradients, model) */
    FSGD_KCLIENT_DATA_PRODUCER = 2, /* batched lz4 idempotent producer (data rows) */
    FSGD_KCLIENT_CONSUMER = 3,      /* consumer with low fetch wait */
    FSGD_KCLIENT_READER = 4,        /* consumer of ranges that end at or below the high watermark */
} fsgd_kclient_t;

/* A consumer of either kind. */
#define FSGD_KCLIENT_IS_CONSUMER(k) ((k) == FSGD_KCLIENT_CONSUMER || (k) == FSGD_KCLIENT_READER)

/* Settings for every client made after this call, as "key=value\n" lines
 * (fsgd_job_t.kafka: authentication and encryption, e.g.
 * security.protocol=SASL_SSL, sasl.mechanism=PLAIN, sasl.username=...,
 * ssl.ca.location=...). Each is checked with librdkafka now: an unknown key
 * or a value this librdkafka cannot use is FSGD_E_ARG naming it. They apply
 * after fsgd's own settings and FSGD_RDKAFKA, so they win. A line
 * KEY_file=PATH sets KEY to the first line of the file PATH, which must be
 * a regular file owned by this user and readable by nobody else (secrets:
 * sasl.password_file, ssl.key.password_file). Not thread safe: call before
 * making clients. */
int fsgd_kbus_set_options(const char *lines, char *err, size_t errsz);

/* Waits up to timeout_ms for brokers to answer a metadata request (the TLS
 * handshake and SASL authentication done): every role's first contact, so
 * a wrong address, certificate or password fails in bounded time. A cause
 * that waiting cannot cure (certificate not trusted, authentication
 * refused), seen twice, ends the wait early. 0, or FSGD_E_KAFKA with err
 * naming the brokers and librdkafka's cause, e.g. "ssl://127.0.0.1:9093/
 * bootstrap: SSL handshake failed: ... certificate verify failed ...
 * (_SSL)". */
int fsgd_kbus_connect(const char *brokers, int timeout_ms, char *err, size_t errsz);

/* Makes a client of the given kind for brokers. group may be NULL (a
 * consumer used with assign only). Returns NULL with err set. */
rd_kafka_t *fsgd_kbus_client(fsgd_kclient_t kind, const char *brokers, const char *group, char *err, size_t errsz);

/* A group consumer whose partition assignments go to rebalance (librdkafka's
 * rebalance callback, which must call rd_kafka_assign) with opaque. Uses
 * the round-robin assignor so partitions spread evenly over workers. */
typedef void (*fsgd_kbus_rebalance_fn)(rd_kafka_t *rk, rd_kafka_resp_err_t e, rd_kafka_topic_partition_list_t *parts,
                                       void *opaque);
rd_kafka_t *fsgd_kbus_group_consumer(const char *brokers, const char *group, fsgd_kbus_rebalance_fn rebalance,
                                     void *opaque, char *err, size_t errsz);

/* Creates topic with partitions and replication (<= 0: the broker's
 * default) and topic configs (name, value pairs ending with NULL; may be
 * NULL) through the admin API, then waits until every partition has a
 * leader: Kafka answers CreateTopics before leaders are elected. An existing
 * topic is fine (its settings are left as they are). Everything within about
 * timeout_ms. Returns 0, FSGD_E_TIMEOUT ("partition 3 has no leader after
 * ...") or FSGD_E_KAFKA. */
int fsgd_kbus_create_topic(rd_kafka_t *rk, const char *topic, int partitions, int replication,
                           const char *const *configs, int timeout_ms, char *err, size_t errsz);

/* Number of partitions of topic, once every partition has a leader (waits up
 * to timeout_ms for that). Returns >= 1 or a negative error naming the
 * partition without a leader, or the topic without metadata. */
int fsgd_kbus_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms, char *err, size_t errsz);

/* Brokers in the cluster's metadata. Returns >= 1 or FSGD_E_KAFKA. */
int fsgd_kbus_broker_count(rd_kafka_t *rk, int timeout_ms, char *err, size_t errsz);

/* Sends body as ceil(len / chunk_max) frames of (kind, flags, gen, sender,
 * step) to topic partition (RD_KAFKA_PARTITION_UA means by key). Adds the frame
 * bytes sent to *wire (may be NULL). Does not wait for delivery. */
int fsgd_kbus_send(rd_kafka_t *rk, const char *topic, int32_t partition, const char *job, const fsgd_kframe_t *hdr,
                   const uint8_t *body, size_t len, size_t chunk_max, uint64_t *wire, char *err, size_t errsz);

/* fsgd_kbus_send with Kafka key "<key_prefix>.<chunk index>" (prefix up to
 * 20 characters) instead of the sender id: on a compacted topic the newest
 * message of each key survives, so a repeating key names what a newer
 * message replaces (KAFKA_FORMAT.md, NAME.model). */
int fsgd_kbus_send_keyed(rd_kafka_t *rk, const char *topic, int32_t partition, const char *job,
                         const fsgd_kframe_t *hdr, const char *key_prefix, const uint8_t *body, size_t len,
                         size_t chunk_max, uint64_t *wire, char *err, size_t errsz);

/* Waits for every queued message to be delivered. FSGD_E_TIMEOUT/KAFKA. */
int fsgd_kbus_flush(rd_kafka_t *rk, int timeout_ms, char *err, size_t errsz);

/* Called for each message of a range, in offset order. */
typedef int (*fsgd_kbus_msg_fn)(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len,
                                char *err, size_t errsz);

/* Reads offsets [start, end) of one partition with an assign-only consumer,
 * checking that offsets arrive consecutively from start: a log start past
 * start or a gap is FSGD_E_LOST ("data lost: ..."), no progress for
 * timeout_ms is FSGD_E_TIMEOUT. Leaves the consumer unassigned. */
int fsgd_kbus_read_range(rd_kafka_t *consumer, const char *topic, int32_t partition, int64_t start, int64_t end,
                         int timeout_ms, fsgd_kbus_msg_fn fn, void *ctx, char *err, size_t errsz);

/* The same for NAME.data: every message must pass fsgd_auth_row_ok (its
 * tag in the Kafka header FSGD_KBUS_MAC_HEADER) before fn sees it; one that
 * does not stops the read with FSGD_E_AUTH naming its offset. */
int fsgd_kbus_read_rows(rd_kafka_t *consumer, const char *topic, int32_t partition, int64_t start, int64_t end,
                        int timeout_ms, fsgd_kbus_msg_fn fn, void *ctx, char *err, size_t errsz);

/* 1 when brokers is librdkafka's mock cluster (the embedded one), asked once
 * per bootstrap list. */
int fsgd_kbus_is_mock(const char *brokers);

/* The same for ranges [starts[i], ends[i]) of partitions parts[i] (n of
 * each, distinct partitions), assigned at once: each partition's messages in
 * offset order, partitions interleaved. */
int fsgd_kbus_read_rows_parts(rd_kafka_t *consumer, const char *topic, int n, const int32_t *parts,
                              const int64_t *starts, const int64_t *ends, int timeout_ms, fsgd_kbus_msg_fn fn,
                              void *ctx, char *err, size_t errsz);

/* The Kafka header that carries a data row's or a ctl event's tag (hex). */
#define FSGD_KBUS_MAC_HEADER "fsgd.mac"

/* The same for a compacted topic (NAME.model), whose log has holes where
 * newer messages with the same key replaced older ones: offsets must only
 * increase. The last offset before end must exist (compaction keeps the
 * newest message, and never touches the active segment). */
int fsgd_kbus_read_compacted(rd_kafka_t *consumer, const char *topic, int32_t partition, int64_t start, int64_t end,
                             int timeout_ms, fsgd_kbus_msg_fn fn, void *ctx, char *err, size_t errsz);

/* Low and high watermarks, queried from the partition's leader. Retriable
 * errors (no leader yet, a leader that moved, a broker not answering) are
 * retried with fresh metadata until timeout_ms; the error then says how
 * often it asked. */
int fsgd_kbus_watermarks(rd_kafka_t *rk, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                         int timeout_ms, char *err, size_t errsz);
/* The same for partitions 0..n-1 of topic at once (lo, hi: n each). */
int fsgd_kbus_watermarks_all(rd_kafka_t *rk, const char *topic, int n, int64_t *lo, int64_t *hi, int timeout_ms,
                             char *err, size_t errsz);

/* Produce-to-consume latency of one hop. fsgd_kbus_send stamps every frame
 * with the header fsgd.sent_us (wall clock, microseconds, text) when it hands
 * it to librdkafka; a receiver adds each consumed message here and gets
 * now - stamp: client queueing, the broker (replication with acks=all) and
 * the fetch. Keeps the last FSGD_KLAT_CAP samples; plain data, zero it to
 * start. Not thread safe. */
#define FSGD_KLAT_CAP 8192
typedef struct fsgd_klat {
    double ms[FSGD_KLAT_CAP];
    uint64_t n; /* samples added (the last FSGD_KLAT_CAP are kept) */
} fsgd_klat_t;

/* Adds m's latency (no-op for a message without the stamp). */
void fsgd_klat_add(fsgd_klat_t *l, const rd_kafka_message_t *m);

/* Quantile q (0..1) of the kept samples in ms; -1 without samples. */
double fsgd_klat_quantile(const fsgd_klat_t *l, double q);

/* "<job>.<suffix>" into out. */
void fsgd_kbus_topic(char *out, size_t cap, const char *job, const char *suffix);

/* --- the embedded cluster --- */

typedef struct fsgd_kmock fsgd_kmock_t;

/* Starts librdkafka's in-process mock cluster with `brokers` brokers on
 * 127.0.0.1. It serves any Kafka client until destroyed. NULL on error. */
fsgd_kmock_t *fsgd_kmock_new(int brokers, char *err, size_t errsz);
void fsgd_kmock_destroy(fsgd_kmock_t *m);

/* Bootstrap address list ("127.0.0.1:port,..."). Owned by m. */
const char *fsgd_kmock_bootstraps(const fsgd_kmock_t *m);

/* Creates a topic with partitions; leader of partition p is broker
 * (leader_base + p) % brokers + 1 when leader_base >= 0. */
int fsgd_kmock_topic(fsgd_kmock_t *m, const char *topic, int partitions, int leader_base, char *err, size_t errsz);

/* Fault injection: broker up/down; delay the next `count` Produce replies of
 * a broker by rtt_ms (a client whose request times out retries, and the mock
 * then stores the message twice). */
int fsgd_kmock_broker_down(fsgd_kmock_t *m, int broker, int down);
int fsgd_kmock_delay_produce(fsgd_kmock_t *m, int broker, int count, int rtt_ms);

/* Largest data the embedded cluster keeps per partition before dropping the
 * oldest (measured with librdkafka 2.0.2). */
#define FSGD_KMOCK_PARTITION_BYTES (5u * 1024u * 1024u)

#endif
