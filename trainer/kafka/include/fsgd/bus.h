/* The transport seam of a distributed job: what the worker and the
 * aggregator need from a message bus, with librdkafka behind it
 * (fsgd_bus_kafka_new) and an in-memory one beside it (fsgd_bus_mem_new of
 * the private trainer/kafka/bus_mem.h, for tests of the roles without a
 * broker).
 *
 * A bus is a cluster; clients made from it produce and consume. Messages
 * keep Kafka's model: topics of partitions, each an append-only log with
 * offsets, low/high watermarks, consumer groups that spread a topic's
 * partitions over their members. The frames sent are those of fsgd/kbus.h
 * (KAFKA_FORMAT.md), byte for byte, whichever bus carries them.
 *
 * Nothing here prints; errors go to the caller's buffer. A client is used
 * by one thread at a time; a bus may be shared by the clients of many
 * threads. */
#ifndef FSGD_BUS_H
#define FSGD_BUS_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/auth.h"
#include "fsgd/kbus.h"

typedef struct fsgd_bus fsgd_bus_t;
typedef struct fsgd_bus_client fsgd_bus_client_t;

#define FSGD_BUS_OFFSET_BEGINNING (-2) /* a partition's log start */
#define FSGD_BUS_OFFSET_END (-1)       /* a partition's end: only what comes later */
#define FSGD_BUS_PARTITION_ANY (-1)    /* send: the partition by key */

/* Why a consumed message is an error instead of data. */
typedef enum fsgd_bus_err {
    FSGD_BUS_OK = 0,
    FSGD_BUS_EOF = 1,       /* end of a partition (informational) */
    FSGD_BUS_LOST = 2,      /* the position left the log (retention): that partition's fetch stopped */
    FSGD_BUS_FATAL = 3,     /* the client cannot go on (topic gone, authorization, fatal state) */
    FSGD_BUS_TRANSIENT = 4, /* retried by the client */
} fsgd_bus_err_t;

/* One consumed message or error, owned by the client until
 * fsgd_bus_msg_destroy. */
typedef struct fsgd_bus_msg {
    const char *topic;
    int32_t partition;
    int64_t offset;
    const void *val;
    size_t len;
    int err;             /* fsgd_bus_err_t */
    int code;            /* the implementation's own error code (tells kinds apart in logs) */
    const char *errstr;  /* for err: what happened */
    const char *errname; /* for err: the code's name */
    double lat_ms;       /* produce-to-consume latency; < 0 when unknown */
    const void *key;     /* the message's key (NULL: none) */
    size_t key_len;
    const void *mac;     /* its fsgd.mac header (NULL: none): the tag of an authenticated job (fsgd/auth.h) */
    size_t mac_len;
    fsgd_bus_client_t *client; /* the owner (private) */
} fsgd_bus_msg_t;

/* A partition and where to read it from (an offset or FSGD_BUS_OFFSET_*). */
typedef struct fsgd_bus_tp {
    const char *topic;
    int32_t partition;
    int64_t offset;
} fsgd_bus_tp_t;

/* A group consumer's partitions of its topic changed: assigned (sorted
 * partition numbers, n of them) or revoked (n == 0). Called from
 * fsgd_bus_poll on the consumer's thread. The client only tracks
 * ownership: it reads nothing of the subscribed topic. */
typedef void (*fsgd_bus_rebalance_fn)(void *opaque, int assigned, const int32_t *parts, int n);

/* --- buses --- */

/* librdkafka against brokers ("host:port,..."), every client with the
 * job's settings (options: fsgd_kbus_options_resolve's lines, copied and
 * wiped when the bus goes; NULL: none). NULL with err set. */
fsgd_bus_t *fsgd_bus_kafka_new(const char *brokers, const char *options, char *err, size_t errsz);
void fsgd_bus_destroy(fsgd_bus_t *b);

/* What carries a bus's messages. */
typedef enum fsgd_bus_kind {
    FSGD_BUS_KAFKA = 1,          /* Kafka brokers */
    FSGD_BUS_KAFKA_EMBEDDED = 2, /* librdkafka's mock cluster: partitions read slowly (70-100 ms each) */
    FSGD_BUS_MEMORY = 3,         /* fsgd_bus_mem_new (bus_mem.h) */
} fsgd_bus_kind_t;
fsgd_bus_kind_t fsgd_bus_kind(const fsgd_bus_t *b);

/* The job's message security on b (fsgd/auth.h; NULL, the default: no key,
 * no job name): frames sent by b's clients are tagged under it, the rows
 * they read (FSGD_BUS_READ_ROWS) and the frames and NAME.ctl events the
 * roles take are checked against it. auth outlives b; set it before b's
 * first client. A view of the in-memory bus starts with its source's. */
void fsgd_bus_set_auth(fsgd_bus_t *b, fsgd_auth_t *auth);
fsgd_auth_t *fsgd_bus_auth(const fsgd_bus_t *b);
/* The auth of the bus c was made from. */
fsgd_auth_t *fsgd_bus_client_auth(const fsgd_bus_client_t *c);

/* --- clients (fsgd_kclient_t kinds of fsgd/kbus.h) --- */

fsgd_bus_client_t *fsgd_bus_client_new(fsgd_bus_t *b, fsgd_kclient_t kind, char *err, size_t errsz);
/* A member of consumer group `group` on `topic`: its partitions go to
 * rebalance with opaque. */
fsgd_bus_client_t *fsgd_bus_group_new(fsgd_bus_t *b, const char *group, const char *topic,
                                      fsgd_bus_rebalance_fn rebalance, void *opaque, char *err, size_t errsz);
/* Leaves the group, drops what a producer has not delivered, frees c. */
void fsgd_bus_client_destroy(fsgd_bus_client_t *c);

/* --- producing --- */

/* A message to send, as librdkafka's rd_kafka_producev takes one: named
 * fields, so a call site says what each value is. */
typedef struct fsgd_bus_out {
    const char *topic;
    int32_t partition;         /* or FSGD_BUS_PARTITION_ANY: by key */
    const char *job;           /* header fsgd.job (produce: NULL, no fsgd.* headers) */
    const char *key;           /* send: the prefix of key "<key>.<chunk>" (NULL: the sender id);
                                * produce: the key as it is (NULL: none) */
    const void *val;           /* the body, len bytes */
    size_t len;
    const fsgd_kframe_t *hdr;  /* send only: the frames' header */
    const char *kind;          /* produce only: header fsgd.kind (with job) */
    const char *mac;           /* produce only: a NUL-terminated hex tag for header fsgd.mac (NULL: none) */
} fsgd_bus_out_t;

/* fsgd_kbus_send of trainer/kafka/kbus_raw.h on this bus: m->val as frames
 * of m->hdr (KAFKA_FORMAT.md), tagged under the bus's auth; adds the frame
 * bytes sent to *wire (may be NULL). */
int fsgd_bus_send(fsgd_bus_client_t *c, const fsgd_bus_out_t *m, uint64_t *wire, char *err, size_t errsz);
/* One message as it is (a NAME.ctl event, a data row): key, job, kind and
 * mac of m as headers (fsgd_bus_out_t). */
int fsgd_bus_produce(fsgd_bus_client_t *c, const fsgd_bus_out_t *m, char *err, size_t errsz);
/* Serves delivery reports and callbacks without blocking. */
void fsgd_bus_serve(fsgd_bus_client_t *c);
/* A group member (fsgd_bus_group_new) whose join is under way: lets the
 * join take its next step now. librdkafka (2.0.2) moves a group's join on
 * when its main thread wakes, which may be a second later: two workers
 * joining at once waited 1.7 s for their first assignment, 0.75 s when
 * nudged every few ms (a query of the assignment wakes that thread). */
void fsgd_bus_group_nudge(fsgd_bus_client_t *c);
/* Waits for every queued message to be delivered. FSGD_E_TIMEOUT/KAFKA. */
int fsgd_bus_flush(fsgd_bus_client_t *c, int timeout_ms, char *err, size_t errsz);

/* --- consuming --- */

/* Reads from exactly these partitions (n == 0: none). */
int fsgd_bus_assign(fsgd_bus_client_t *c, const fsgd_bus_tp_t *tps, int n, char *err, size_t errsz);
/* After a FSGD_BUS_LOST message: reads partition of topic again from offset,
 * the others of the assignment from where they are. */
int fsgd_bus_restart(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t offset, char *err,
                     size_t errsz);
/* The next message or error, waiting up to timeout_ms; NULL when none. */
fsgd_bus_msg_t *fsgd_bus_poll(fsgd_bus_client_t *c, int timeout_ms);
void fsgd_bus_msg_destroy(fsgd_bus_msg_t *m);
/* 1 with the reason in buf when c is in a fatal state. */
int fsgd_bus_fatal(fsgd_bus_client_t *c, char *buf, size_t cap);

/* --- topics --- */

/* read_range modes: a compacted topic's range (keys may be gone), or data
 * rows, each checked against the job key when the job has one
 * (fsgd_kbus_read_rows_parts); 0: every offset, as it is. */
#define FSGD_BUS_READ_COMPACTED 1
#define FSGD_BUS_READ_ROWS 2

/* As fsgd_kbus_partitions, fsgd_kbus_watermarks, fsgd_kbus_read_range
 * and fsgd_kbus_read_rows_parts of trainer/kafka/kbus_raw.h. */
int fsgd_bus_partitions(fsgd_bus_client_t *c, const char *topic, int timeout_ms, char *err, size_t errsz);
/* 1 when topic exists, 0 when not, or a negative error: asked of the whole
 * cluster's metadata, never of the topic itself, which a broker that makes
 * topics on demand (the embedded cluster) would create. */
int fsgd_bus_topic_exists(fsgd_bus_client_t *c, const char *topic, int timeout_ms, char *err, size_t errsz);
int fsgd_bus_watermarks(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                        int timeout_ms, char *err, size_t errsz);
/* Watermarks of partitions 0..n-1 of topic (lo, hi: n each), at once where
 * the bus can (one request per leader). */
int fsgd_bus_watermarks_all(fsgd_bus_client_t *c, const char *topic, int n, int64_t *lo, int64_t *hi, int timeout_ms,
                            char *err, size_t errsz);
/* Offsets [start, end) of one partition, each to fn(ctx, ...) in offset
 * order: a log start past start or a gap (a hole of a compacted topic
 * aside) is FSGD_E_LOST, no progress for timeout_ms FSGD_E_TIMEOUT. */
typedef struct fsgd_bus_range {
    const char *topic;
    int32_t partition;
    int64_t start, end;
    int timeout_ms;
    int mode; /* FSGD_BUS_READ_COMPACTED, FSGD_BUS_READ_ROWS or 0 */
    fsgd_kbus_msg_fn fn;
    void *ctx;
} fsgd_bus_range_t;
int fsgd_bus_read_range(fsgd_bus_client_t *c, const fsgd_bus_range_t *r, char *err, size_t errsz);
/* Data rows (FSGD_BUS_READ_ROWS) of n distinct partitions of a topic,
 * [starts[i], ends[i]) of parts[i], at once where the bus can (else one
 * after another): each partition's rows in offset order, partitions
 * interleaved. */
typedef struct fsgd_bus_ranges {
    const char *topic;
    int n;
    const int32_t *parts;
    const int64_t *starts, *ends;
    int timeout_ms;
    fsgd_kbus_msg_fn fn;
    void *ctx;
} fsgd_bus_ranges_t;
int fsgd_bus_read_rows_parts(fsgd_bus_client_t *c, const fsgd_bus_ranges_t *r, char *err, size_t errsz);
/* As fsgd_kbus_create_topic (an existing topic is kept as it is) and
 * fsgd_kbus_broker_count. A job's topics: fsgd_dist_topics_create. */
int fsgd_bus_create_topic(fsgd_bus_client_t *c, const char *topic, int partitions, int replication,
                          const char *const *configs, int timeout_ms, char *err, size_t errsz);
int fsgd_bus_broker_count(fsgd_bus_client_t *c, int timeout_ms, char *err, size_t errsz);

/* Adds a message's latency to l (no-op when unknown). */
void fsgd_bus_lat_add(fsgd_klat_t *l, const fsgd_bus_msg_t *m);

#endif
