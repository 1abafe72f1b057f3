/* The bus interface (fsgd/bus.h): dispatch to the implementation. */
#include <stdlib.h>

#include "bus_impl.h"
#include "fsgd/error.h"

void fsgd_bus_destroy(fsgd_bus_t *b)
{
    if (b)
        b->ops->destroy(b);
}

void fsgd_bus_set_auth(fsgd_bus_t *b, fsgd_auth_t *auth)
{
    b->auth = auth;
}

fsgd_bus_kind_t fsgd_bus_kind(const fsgd_bus_t *b)
{
    return (fsgd_bus_kind_t)b->ops->kind(b);
}

fsgd_auth_t *fsgd_bus_auth(const fsgd_bus_t *b)
{
    return b->auth;
}

fsgd_auth_t *fsgd_bus_client_auth(const fsgd_bus_client_t *c)
{
    return c->bus->auth;
}

fsgd_bus_client_t *fsgd_bus_client_new(fsgd_bus_t *b, fsgd_kclient_t kind, char *err, size_t errsz)
{
    return b->ops->client_new(b, kind, NULL, NULL, NULL, NULL, err, errsz);
}

fsgd_bus_client_t *fsgd_bus_group_new(fsgd_bus_t *b, const char *group, const char *topic,
                                      fsgd_bus_rebalance_fn rebalance, void *opaque, char *err, size_t errsz)
{
    return b->ops->client_new(b, FSGD_KCLIENT_CONSUMER, group, topic, rebalance, opaque, err, errsz);
}

void fsgd_bus_client_destroy(fsgd_bus_client_t *c)
{
    if (c)
        c->bus->ops->client_destroy(c);
}

int fsgd_bus_send(fsgd_bus_client_t *c, const fsgd_bus_out_t *m, uint64_t *wire, char *err, size_t errsz)
{
    return c->bus->ops->send(c, m, wire, err, errsz);
}

int fsgd_bus_produce(fsgd_bus_client_t *c, const fsgd_bus_out_t *m, char *err, size_t errsz)
{
    return c->bus->ops->produce(c, m, err, errsz);
}

void fsgd_bus_serve(fsgd_bus_client_t *c)
{
    c->bus->ops->serve(c);
}

void fsgd_bus_group_nudge(fsgd_bus_client_t *c)
{
    if (c->bus->ops->group_nudge)
        c->bus->ops->group_nudge(c);
}

int fsgd_bus_flush(fsgd_bus_client_t *c, int timeout_ms, char *err, size_t errsz)
{
    return c->bus->ops->flush(c, timeout_ms, err, errsz);
}

int fsgd_bus_assign(fsgd_bus_client_t *c, const fsgd_bus_tp_t *tps, int n, char *err, size_t errsz)
{
    return c->bus->ops->assign(c, tps, n, err, errsz);
}

int fsgd_bus_restart(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t offset, char *err,
                     size_t errsz)
{
    return c->bus->ops->restart(c, topic, partition, offset, err, errsz);
}

fsgd_bus_msg_t *fsgd_bus_poll(fsgd_bus_client_t *c, int timeout_ms)
{
    return c->bus->ops->poll(c, timeout_ms);
}

void fsgd_bus_msg_destroy(fsgd_bus_msg_t *m)
{
    if (m)
        m->client->bus->ops->msg_destroy(m);
}

int fsgd_bus_fatal(fsgd_bus_client_t *c, char *buf, size_t cap)
{
    return c->bus->ops->fatal(c, buf, cap);
}

int fsgd_bus_topic_exists(fsgd_bus_client_t *c, const char *topic, int timeout_ms, char *err, size_t errsz)
{
    return c->bus->ops->topic_exists(c, topic, timeout_ms, err, errsz);
}

int fsgd_bus_partitions(fsgd_bus_client_t *c, const char *topic, int timeout_ms, char *err, size_t errsz)
{
    return c->bus->ops->partitions(c, topic, timeout_ms, err, errsz);
}

int fsgd_bus_watermarks(fsgd_bus_client_t *c, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                        int timeout_ms, char *err, size_t errsz)
{
    return c->bus->ops->watermarks(c, topic, partition, lo, hi, timeout_ms, err, errsz);
}

int fsgd_bus_watermarks_all(fsgd_bus_client_t *c, const char *topic, int n, int64_t *lo, int64_t *hi, int timeout_ms,
                            char *err, size_t errsz)
{
    if (c->bus->ops->watermarks_all)
        return c->bus->ops->watermarks_all(c, topic, n, lo, hi, timeout_ms, err, errsz);
    for (int p = 0; p < n; p++)
        FSGD_TRY(c->bus->ops->watermarks(c, topic, p, &lo[p], &hi[p], timeout_ms, err, errsz));
    return 0;
}

int fsgd_bus_read_range(fsgd_bus_client_t *c, const fsgd_bus_range_t *r, char *err, size_t errsz)
{
    return c->bus->ops->read_range(c, r, err, errsz);
}

int fsgd_bus_read_rows_parts(fsgd_bus_client_t *c, const fsgd_bus_ranges_t *r, char *err, size_t errsz)
{
    if (c->bus->ops->read_rows_parts)
        return c->bus->ops->read_rows_parts(c, r, err, errsz);
    for (int i = 0; i < r->n; i++) {
        const fsgd_bus_range_t one = {.topic = r->topic, .partition = r->parts[i], .start = r->starts[i],
                                      .end = r->ends[i], .timeout_ms = r->timeout_ms, .mode = FSGD_BUS_READ_ROWS,
                                      .fn = r->fn, .ctx = r->ctx};
        FSGD_TRY(c->bus->ops->read_range(c, &one, err, errsz));
    }
    return 0;
}

int fsgd_bus_create_topic(fsgd_bus_client_t *c, const char *topic, int partitions, int replication,
                          const char *const *configs, int timeout_ms, char *err, size_t errsz)
{
    return c->bus->ops->create_topic(c, topic, partitions, replication, configs, timeout_ms, err, errsz);
}

int fsgd_bus_broker_count(fsgd_bus_client_t *c, int timeout_ms, char *err, size_t errsz)
{
    return c->bus->ops->broker_count(c, timeout_ms, err, errsz);
}

void fsgd_bus_lat_add(fsgd_klat_t *l, const fsgd_bus_msg_t *m)
{
    if (m->lat_ms >= 0)
        l->ms[l->n++ % FSGD_KLAT_CAP] = m->lat_ms;
}
