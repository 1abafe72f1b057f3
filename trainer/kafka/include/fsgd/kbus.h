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
 * - A client's settings (fsgd_kconf_t) and the start-up connection check.
 *
 * Messages are sent and read through fsgd/bus.h; the raw librdkafka calls
 * behind it (sending frames, reading offset ranges with gap and log-start
 * detection) are private to trainer/kafka/ (kbus_raw.h).
 *
 * Nothing here prints; errors go to the caller's buffer. Handles are not
 * thread safe unless stated. */
#ifndef FSGD_KBUS_H
#define FSGD_KBUS_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/auth.h"

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
#define FSGD_KFLAG_BY_ID 8u   /* pull: the body names a key list its shard keeps (trainer/distributed/pull.h) */
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
 * (auth enabled, fsgd/auth.h) the frame gets flag FSGD_KFLAG_AUTH and its
 * tag after the CRC; without one (auth NULL too) neither. Returns the bytes
 * written. */
size_t fsgd_kframe_write(uint8_t *out, const fsgd_kframe_t *f, fsgd_auth_t *auth);

/* Parses and checks one frame at the start of buf (magic, version, reserved
 * bits, kind, chunk < nchunks, length against len, CRC32C). *used (may be
 * NULL) gets the frame's size, so concatenated frames can be walked. body
 * points into buf. With a job key (auth enabled), a frame without
 * FSGD_KFLAG_AUTH and a valid tag is refused (FSGD_E_AUTH); without one
 * (auth NULL too), so is a frame that has a tag (it cannot be checked: give
 * the job key). Returns 0 or FSGD_E_FORMAT/TRUNCATED/CRC/VERSION/AUTH. */
int fsgd_kframe_parse(const uint8_t *buf, size_t len, fsgd_kframe_t *f, size_t *used, const fsgd_auth_t *auth,
                      char *err, size_t errsz);

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

/* The most body bytes ever held in incomplete messages (what is held now:
 * fsgd_kasm_held of the private kasm_probe.h). */
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

/* A cluster and how this job's clients reach it: the bootstrap list and the
 * job's librdkafka settings as "key=value\n" lines (fsgd_kbus_options_resolve
 * made them; NULL: none). They apply after fsgd's own settings and
 * FSGD_RDKAFKA, so they win. Each client is made from one (no
 * process-wide settings): two jobs of one process may reach two clusters
 * differently. */
typedef struct fsgd_kconf {
    const char *brokers;
    const char *options;
} fsgd_kconf_t;

/* A job's cluster and transport settings (job keys of section "cluster"
 * that kafka/ owns; trainer/job/ fills them from YAML and flags). */
#define FSGD_CLUSTER_PATH_MAX 1024
typedef struct fsgd_cluster_conf {
    char brokers[512];               /* "" -> embedded mock cluster */
    char kafka[4096];                /* librdkafka security settings, "key=value\n" lines (--kafka-opt, YAML kafka:) */
    int replication_factor;          /* replicas of each topic on a real cluster (0 = min(3, brokers); 1 embedded) */
    int min_insync_replicas;         /* topics' min.insync.replicas (0 = 2 with 3+ replicas, else 1) */
    int connect_timeout_ms;          /* a role gives up (exit 4) on brokers that do not answer by then */
    char job_key_file[FSGD_CLUSTER_PATH_MAX]; /* key that authenticates every message on the job's topics (fsgd/auth.h) */
    int unsigned_rows;               /* with a key: NAME.data may hold rows without its tag (outside producers) */
} fsgd_cluster_conf_t;

/* The job's settings (fsgd_cluster_conf_t.kafka: authentication and encryption,
 * e.g. security.protocol=SASL_SSL, sasl.mechanism=PLAIN,
 * sasl.username=..., ssl.ca.location=...) made ready for fsgd_kconf_t into
 * out (cap bytes): a line KEY_file=PATH becomes KEY=the first line of the
 * file PATH, which must be a regular file owned by this user and readable
 * by nobody else (secrets: sasl.password_file, ssl.key.password_file); then
 * each setting is checked with librdkafka: an unknown key or a value this
 * librdkafka cannot use is FSGD_E_ARG naming it. out holds secrets: wipe
 * it (fsgd_kbus_options_wipe) when done. */
int fsgd_kbus_options_resolve(const char *lines, char *out, size_t cap, char *err, size_t errsz);
/* Appends the setting "key=value\n" to lines (cap bytes, NUL-terminated):
 * authentication and encryption only (security.*, sasl.*, ssl.*,
 * enable.ssl.certificate.verification), so that no job can change the
 * delivery settings the exactly-once rules rely on. 0 or FSGD_E_ARG naming
 * the key (lines unchanged). */
int fsgd_kbus_options_add(char *lines, size_t cap, const char *key, const char *value, char *err, size_t errsz);
/* Zeroes out (cap bytes) so that no secret stays in memory. */
void fsgd_kbus_options_wipe(char *out, size_t cap);

/* Waits up to timeout_ms for brokers to answer a metadata request (the TLS
 * handshake and SASL authentication done): every role's first contact, so
 * a wrong address, certificate or password fails in bounded time. A cause
 * that waiting cannot cure (certificate not trusted, authentication
 * refused), seen twice, ends the wait early. 0, or FSGD_E_KAFKA with err
 * naming the brokers and librdkafka's cause, e.g. "ssl://127.0.0.1:9093/
 * bootstrap: SSL handshake failed: ... certificate verify failed ...
 * (_SSL)". */
int fsgd_kbus_connect(const fsgd_kconf_t *kc, int timeout_ms, char *err, size_t errsz);



/* Called for each message of a range, in offset order. */
typedef int (*fsgd_kbus_msg_fn)(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len,
                                char *err, size_t errsz);

/* The Kafka header that carries a data row's or a ctl event's tag (hex). */
#define FSGD_KBUS_MAC_HEADER "fsgd.mac"


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
