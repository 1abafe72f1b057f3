/* The raw librdkafka side of the Kafka bus (bus_kafka.c), private to
 * trainer/kafka/ and its tests: everything else reaches Kafka through
 * fsgd/bus.h. rk is a client of fsgd_kbus_client. */
#ifndef FSGD_KBUS_RAW_H
#define FSGD_KBUS_RAW_H

#include <librdkafka/rdkafka.h>

#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "fsgd/kbus.h"

/* Makes a client of the given kind for kc's cluster. group may be NULL (a
 * consumer used with assign only). Returns NULL with err set. */
rd_kafka_t *fsgd_kbus_client(fsgd_kclient_t kind, const fsgd_kconf_t *kc, const char *group, char *err,
                             size_t errsz);

/* Number of partitions of topic, once every partition has a leader (waits up
 * to timeout_ms for that). Returns >= 1 or a negative error naming the
 * partition without a leader, or the topic without metadata. */
int fsgd_kbus_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms, char *err, size_t errsz);

/* Low and high watermarks, queried from the partition's leader. Retriable
 * errors (no leader yet, a leader that moved, a broker not answering) are
 * retried with fresh metadata until timeout_ms; the error then says how
 * often it asked. */
int fsgd_kbus_watermarks(rd_kafka_t *rk, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                         int timeout_ms, char *err, size_t errsz);

/* A group consumer whose partition assignments go to rebalance (librdkafka's
 * rebalance callback, which must call rd_kafka_assign) with opaque. Uses
 * the round-robin assignor so partitions spread evenly over workers. */
typedef void (*fsgd_kbus_rebalance_fn)(rd_kafka_t *rk, rd_kafka_resp_err_t e, rd_kafka_topic_partition_list_t *parts,
                                       void *opaque);
rd_kafka_t *fsgd_kbus_group_consumer(const fsgd_kconf_t *kc, const char *group, fsgd_kbus_rebalance_fn rebalance,
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

/* Brokers in the cluster's metadata. Returns >= 1 or FSGD_E_KAFKA. */
int fsgd_kbus_broker_count(rd_kafka_t *rk, int timeout_ms, char *err, size_t errsz);

/* Sends m->val as ceil(m->len / chunk_max) frames of m->hdr (kind, flags,
 * gen, sender, step) to m->topic's m->partition (FSGD_BUS_PARTITION_ANY:
 * by key), tagged under auth (fsgd_kframe_write); chunk_max 0: the
 * largest. Kafka key "<m->key>.<chunk index>" (a prefix of up to 20
 * characters) or, with m->key NULL, the sender id: on a compacted topic the
 * newest message of each key survives, so a repeating key names what a
 * newer message replaces (KAFKA_FORMAT.md, NAME.model). Adds the frame
 * bytes sent to *wire (may be NULL). Does not wait for delivery. */
int fsgd_kbus_send(rd_kafka_t *rk, fsgd_auth_t *auth, const fsgd_bus_out_t *m, size_t chunk_max, uint64_t *wire,
                   char *err, size_t errsz);

/* Waits for every queued message to be delivered. FSGD_E_TIMEOUT/KAFKA. */
int fsgd_kbus_flush(rd_kafka_t *rk, int timeout_ms, char *err, size_t errsz);

/* Reads offsets [r->start, r->end) of one partition with an assign-only
 * consumer, checking that offsets arrive consecutively from start: a log
 * start past start or a gap is FSGD_E_LOST ("data lost: ..."), no progress
 * for r->timeout_ms is FSGD_E_TIMEOUT. Leaves the consumer unassigned.
 * r->mode FSGD_BUS_READ_COMPACTED: a compacted topic (NAME.model), whose
 * log has holes where newer messages with the same key replaced older
 * ones: offsets must only increase, and the last offset before end must
 * exist (compaction keeps the newest message, and never touches the active
 * segment). FSGD_BUS_READ_ROWS: as fsgd_kbus_read_rows_parts. auth: only
 * for FSGD_BUS_READ_ROWS (may be NULL otherwise). */
int fsgd_kbus_read_range(rd_kafka_t *consumer, fsgd_auth_t *auth, const fsgd_bus_range_t *r, char *err,
                         size_t errsz);

/* The same for NAME.data, ranges [starts[i], ends[i]) of partitions parts[i]
 * (r->n of each, distinct partitions), assigned at once: each partition's
 * messages in offset order, partitions interleaved. Every message must pass
 * fsgd_auth_row_ok under auth (its tag in the Kafka header
 * FSGD_KBUS_MAC_HEADER) before r->fn sees it; one that does not stops the
 * read with FSGD_E_AUTH naming its offset. */
int fsgd_kbus_read_rows_parts(rd_kafka_t *consumer, fsgd_auth_t *auth, const fsgd_bus_ranges_t *r, char *err,
                              size_t errsz);

/* fsgd_kbus_watermarks (fsgd/kbus.h) of partitions 0..n-1 of topic at once
 * (lo, hi: n each). */
int fsgd_kbus_watermarks_all(rd_kafka_t *rk, const char *topic, int n, int64_t *lo, int64_t *hi, int timeout_ms,
                             char *err, size_t errsz);

/* Adds m's latency (no-op for a message without the stamp). */
void fsgd_klat_add(fsgd_klat_t *l, const rd_kafka_message_t *m);

/* 1 when brokers is librdkafka's mock cluster (the embedded one), asked once
 * per bootstrap list. */
int fsgd_kbus_is_mock(const fsgd_kconf_t *kc);

#endif
