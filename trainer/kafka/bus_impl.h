/* Private to the buses (trainer/kafka/bus_*.c): the table of functions
 * each implementation fills, and the head of its bus and client structs. */
#ifndef FSGD_BUS_IMPL_H
#define FSGD_BUS_IMPL_H

#include "fsgd/bus.h"

typedef struct fsgd_bus_ops {
    void (*destroy)(fsgd_bus_t *b);
    fsgd_bus_client_t *(*client_new)(fsgd_bus_t *b, fsgd_kclient_t kind, const char *group, const char *topic,
                                     fsgd_bus_rebalance_fn rebalance, void *opaque, char *err, size_t errsz);
    void (*client_destroy)(fsgd_bus_client_t *c);
    int (*send)(fsgd_bus_client_t *c, const char *topic, int32_t partition, const char *job,
                const fsgd_kframe_t *hdr, const char *key_prefix, const uint8_t *body, size_t len, uint64_t *wire,
                char *err, size_t errsz);
    int (*produce)(fsgd_bus_client_t *c, const char *topic, int32_t partition, const char *key, const void *val,
                   size_t len, const char *job, const char *kind, const char *mac, char *err, size_t errsz);
    void (*serve)(fsgd_bus_client_t *c);
    int (*flush)(fsgd_bus_client_t *c, int timeout_ms, char *err, size_t errsz);
    int (*assign)(fsgd_bus_client_t *c, const fsgd_bus_tp_t *tps, int n, char *err, size_t errsz);
    int (*restart)(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t offset, char *err,
                   size_t errsz);
    fsgd_bus_msg_t *(*poll)(fsgd_bus_client_t *c, int timeout_ms);
    void (*msg_destroy)(fsgd_bus_msg_t *m);
    int (*fatal)(fsgd_bus_client_t *c, char *buf, size_t cap);
    int (*partitions)(fsgd_bus_client_t *c, const char *topic, int timeout_ms, char *err, size_t errsz);
    int (*watermarks)(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                      int timeout_ms, char *err, size_t errsz);
    /* NULL: watermarks, partition by partition */
    int (*watermarks_all)(fsgd_bus_client_t *c, const char *topic, int n, int64_t *lo, int64_t *hi, int timeout_ms,
                          char *err, size_t errsz);
    int (*read_range)(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t start, int64_t end,
                      int timeout_ms, int mode, fsgd_kbus_msg_fn fn, void *ctx, char *err, size_t errsz);
    int (*create_topic)(fsgd_bus_client_t *c, const char *topic, int partitions, int replication,
                        const char *const *configs, int timeout_ms, char *err, size_t errsz);
    int (*broker_count)(fsgd_bus_client_t *c, int timeout_ms, char *err, size_t errsz);
} fsgd_bus_ops_t;

struct fsgd_bus {
    const fsgd_bus_ops_t *ops;
};

struct fsgd_bus_client {
    fsgd_bus_t *bus;
};

#endif
