/* Private to the buses (trainer/kafka/bus_*.c): the table of functions
 * each implementation fills, and the head of its bus and client structs. */
#ifndef FSGD_BUS_IMPL_H
#define FSGD_BUS_IMPL_H

#include <pthread.h>

#include "fsgd/bus.h"

typedef struct fsgd_bus_ops {
    void (*destroy)(fsgd_bus_t *b);
    int (*kind)(const fsgd_bus_t *b); /* fsgd_bus_kind_t */
    fsgd_bus_client_t *(*client_new)(fsgd_bus_t *b, fsgd_kclient_t kind, const char *group, const char *topic,
                                     fsgd_bus_rebalance_fn rebalance, void *opaque, char *err, size_t errsz);
    void (*client_destroy)(fsgd_bus_client_t *c);
    int (*send)(fsgd_bus_client_t *c, const fsgd_bus_out_t *m, uint64_t *wire, char *err, size_t errsz);
    int (*produce)(fsgd_bus_client_t *c, const fsgd_bus_out_t *m, char *err, size_t errsz);
    void (*serve)(fsgd_bus_client_t *c);
    /* NULL: nothing to do (fsgd_bus_group_nudge) */
    void (*group_nudge)(fsgd_bus_client_t *c);
    int (*flush)(fsgd_bus_client_t *c, int timeout_ms, char *err, size_t errsz);
    int (*assign)(fsgd_bus_client_t *c, const fsgd_bus_tp_t *tps, int n, char *err, size_t errsz);
    int (*restart)(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t offset, char *err,
                   size_t errsz);
    fsgd_bus_msg_t *(*poll)(fsgd_bus_client_t *c, int timeout_ms);
    void (*msg_destroy)(fsgd_bus_msg_t *m);
    int (*fatal)(fsgd_bus_client_t *c, char *buf, size_t cap);
    int (*partitions)(fsgd_bus_client_t *c, const char *topic, int timeout_ms, char *err, size_t errsz);
    int (*topic_exists)(fsgd_bus_client_t *c, const char *topic, int timeout_ms, char *err, size_t errsz);
    int (*watermarks)(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                      int timeout_ms, char *err, size_t errsz);
    /* NULL: watermarks, partition by partition */
    int (*watermarks_all)(fsgd_bus_client_t *c, const char *topic, int n, int64_t *lo, int64_t *hi, int timeout_ms,
                          char *err, size_t errsz);
    int (*read_range)(fsgd_bus_client_t *c, const fsgd_bus_range_t *r, char *err, size_t errsz);
    /* NULL: read_range, partition by partition */
    int (*read_rows_parts)(fsgd_bus_client_t *c, const fsgd_bus_ranges_t *r, char *err, size_t errsz);
    int (*create_topic)(fsgd_bus_client_t *c, const char *topic, int partitions, int replication,
                        const char *const *configs, int timeout_ms, char *err, size_t errsz);
    int (*broker_count)(fsgd_bus_client_t *c, int timeout_ms, char *err, size_t errsz);
} fsgd_bus_ops_t;

struct fsgd_bus {
    const fsgd_bus_ops_t *ops;
    fsgd_auth_t *auth; /* fsgd_bus_set_auth: the job's key and name, NULL: none */
};

struct fsgd_bus_client {
    fsgd_bus_t *bus;
};

/* --- bus.c, connect.c, conn_watch.c and kopt_file.c share these (Kafka clients only) --- */

/* Why the start-up check's client could not connect (conn_watch.c): the
 * newest connection failure in its log (facility FAIL) and the newest
 * error code of its error callback. */
typedef struct fsgd_kwatch {
    pthread_mutex_t lock;
    char last_fail[512];
    int last_code; /* rd_kafka_resp_err_t */
} fsgd_kwatch_t;
void fsgd_kwatch_init(fsgd_kwatch_t *w);
void fsgd_kwatch_destroy(fsgd_kwatch_t *w);

/* Installs w on a configuration (its opaque, error and log callbacks): only
 * for the start-up check's client, which polls them; other clients keep
 * librdkafka's default handling. */
struct rd_kafka_conf_s;
void fsgd_kbus_conf_watch(struct rd_kafka_conf_s *c, fsgd_kwatch_t *w);

/* The newest failure's text into why (empty when none) and its error code
 * (rd_kafka_resp_err_t; 0 when none). Thread safe. */
int fsgd_kbus_watch_get(fsgd_kwatch_t *w, char *why, size_t whysz);

/* A producer client as fsgd_kbus_client makes one, its errors watched by w. */
struct rd_kafka_s;
struct rd_kafka_s *fsgd_kbus_client_watched(const fsgd_kconf_t *kc, fsgd_kwatch_t *w, char *err, size_t errsz);

/* Copies "key=value\n" lines to out, replacing each KEY_file=PATH line by
 * KEY=the first line of PATH (a regular file, not a link, owned by this
 * user, mode & 077 == 0). Errors name the key and the path, never the
 * content. */
int fsgd_kbus_resolve_files(const char *lines, char *out, size_t cap, char *err, size_t errsz);

/* Zeroes memory that held a secret (not optimised away). */
void fsgd_kbus_wipe(void *p, size_t n);

#endif
