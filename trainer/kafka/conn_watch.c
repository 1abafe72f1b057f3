/* Why a connection failed: librdkafka says so only in its log (facility
 * FAIL, from its broker threads: "ssl://127.0.0.1:9093/bootstrap: SSL
 * handshake failed: ... certificate verify failed ...") and, for some
 * causes, with an error code on the error callback. Both are kept here, the
 * newest of each, in the start-up check's own watch (connect.c), whose
 * client alone logs here. Its own file so that neither bus.c nor connect.c
 * calls the other. */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_impl.h"

void fsgd_kwatch_init(fsgd_kwatch_t *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
}

void fsgd_kwatch_destroy(fsgd_kwatch_t *w)
{
    pthread_mutex_destroy(&w->lock);
}

static void watch_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    fsgd_kwatch_t *w = rd_kafka_opaque(rk);
    if (getenv("FSGD_KAFKA_DEBUG")) /* as every other client's log (bus.c) */
        fprintf(stderr, "rdkafka %d %s: %s\n", level, fac, buf);
    if (level > 4 || !fac || strcmp(fac, "FAIL") != 0 || !buf || !w)
        return;
    /* "[thrd:ssl://h:p/bootstrap]: ssl://h:p/bootstrap: why": the thread's name is said again */
    if (!strncmp(buf, "[thrd:", 6)) {
        const char *e = strstr(buf, "]: ");
        if (e)
            buf = e + 3;
    }
    pthread_mutex_lock(&w->lock);
    snprintf(w->last_fail, sizeof w->last_fail, "%s", buf);
    pthread_mutex_unlock(&w->lock);
}

static void on_error(rd_kafka_t *rk, int code, const char *reason, void *opaque)
{
    (void)rk;
    fsgd_kwatch_t *w = opaque;
    pthread_mutex_lock(&w->lock);
    /* _ALL_BROKERS_DOWN follows the error that says why */
    if (code != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || !w->last_code)
        w->last_code = code;
    if (!w->last_fail[0] && reason)
        snprintf(w->last_fail, sizeof w->last_fail, "%s", reason);
    pthread_mutex_unlock(&w->lock);
}

void fsgd_kbus_conf_watch(rd_kafka_conf_t *c, fsgd_kwatch_t *w)
{
    rd_kafka_conf_set_opaque(c, w);
    rd_kafka_conf_set_error_cb(c, on_error);
    rd_kafka_conf_set_log_cb(c, watch_log);
}

int fsgd_kbus_watch_get(fsgd_kwatch_t *w, char *why, size_t whysz)
{
    pthread_mutex_lock(&w->lock);
    snprintf(why, whysz, "%s", w->last_fail);
    int code = w->last_code;
    pthread_mutex_unlock(&w->lock);
    return code;
}
