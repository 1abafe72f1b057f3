/* Why a connection failed: librdkafka says so only in its log (facility
 * FAIL, from its broker threads: "ssl://127.0.0.1:9093/bootstrap: SSL
 * handshake failed: ... certificate verify failed ...") and, for some
 * causes, with an error code on the error callback. Both are kept here, the
 * newest of each, for the start-up check (connect.c); every client's log
 * passes through (bus.c). Its own file so that neither of those two calls
 * the other. */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "bus_impl.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char last_fail[512];
static rd_kafka_resp_err_t last_code;

void fsgd_kbus_note_log(int level, const char *fac, const char *buf)
{
    if (level > 4 || !fac || strcmp(fac, "FAIL") != 0 || !buf)
        return;
    /* "[thrd:ssl://h:p/bootstrap]: ssl://h:p/bootstrap: why": the thread's name is said again */
    if (!strncmp(buf, "[thrd:", 6)) {
        const char *e = strstr(buf, "]: ");
        if (e)
            buf = e + 3;
    }
    pthread_mutex_lock(&lock);
    snprintf(last_fail, sizeof last_fail, "%s", buf);
    pthread_mutex_unlock(&lock);
}

static void on_error(rd_kafka_t *rk, int code, const char *reason, void *opaque)
{
    (void)rk, (void)opaque;
    pthread_mutex_lock(&lock);
    /* _ALL_BROKERS_DOWN follows the error that says why */
    if (code != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || !last_code)
        last_code = (rd_kafka_resp_err_t)code;
    if (!last_fail[0] && reason)
        snprintf(last_fail, sizeof last_fail, "%s", reason);
    pthread_mutex_unlock(&lock);
}

void fsgd_kbus_conf_watch(rd_kafka_conf_t *c)
{
    rd_kafka_conf_set_error_cb(c, on_error);
}

void fsgd_kbus_watch_reset(void)
{
    pthread_mutex_lock(&lock);
    last_fail[0] = '\0';
    last_code = RD_KAFKA_RESP_ERR_NO_ERROR;
    pthread_mutex_unlock(&lock);
}

int fsgd_kbus_watch_get(char *why, size_t whysz)
{
    pthread_mutex_lock(&lock);
    snprintf(why, whysz, "%s", last_fail);
    int code = last_code;
    pthread_mutex_unlock(&lock);
    return code;
}
