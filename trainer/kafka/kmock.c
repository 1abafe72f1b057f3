/* The embedded cluster: librdkafka's in-process mock brokers, for `fsgd run`
 * without --brokers and for the tests' mock runs. */
#include <arpa/inet.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/kbus.h"

struct fsgd_kmock {
    rd_kafka_t *rk;
    rd_kafka_mock_cluster_t *mc;
    int brokers;
    char boot[512];
    struct sockaddr_in first; /* broker 1's listener: what wakes the mock thread */
    pthread_t waker;
    atomic_int waking, stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (getenv("FSGD_KAFKA_DEBUG"))
        fprintf(stderr, "rdkafka %d %s: %s\n", level, fac, buf);
}

/* librdkafka's mock thread serves its op queue each time its poll() returns,
 * and is woken for a new op by a byte on a pipe. An op queued while the
 * thread is between serving the queue and draining that pipe loses its
 * wake-up (librdkafka 2.0.2, and the same code today), and is served only at
 * the poll's 1 s timeout: setting up a job's four topics took 1-3 s at
 * random. Any readable socket ends the poll too, so while an op is pending a
 * thread opens (and drops) a connection to broker 1 every 2 ms. */
static void *waker_main(void *arg)
{
    fsgd_kmock_t *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!atomic_load(&m->stop)) {
        if (!atomic_load(&m->waking)) {
            pthread_cond_wait(&m->cond, &m->lock);
            continue;
        }
        pthread_mutex_unlock(&m->lock);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            (void)connect(fd, (const struct sockaddr *)&m->first, sizeof m->first);
            close(fd);
        }
        struct timespec ns = {0, 2 * 1000000};
        nanosleep(&ns, NULL);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

static void waking(fsgd_kmock_t *m, int on)
{
    pthread_mutex_lock(&m->lock);
    atomic_store(&m->waking, on);
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

fsgd_kmock_t *fsgd_kmock_new(int brokers, char *err, size_t errsz)
{
    fsgd_kmock_t *m = calloc(1, sizeof *m);
    if (!m) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "mock cluster: out of memory");
        return NULL;
    }
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(c, quiet_log);
    char e[512];
    m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, e, sizeof e);
    if (!m->rk) {
        fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "mock cluster: %s", e);
        free(m);
        return NULL;
    }
    m->mc = rd_kafka_mock_cluster_new(m->rk, brokers);
    if (!m->mc) {
        fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "mock cluster: cannot start %d brokers", brokers);
        rd_kafka_destroy(m->rk);
        free(m);
        return NULL;
    }
    m->brokers = brokers;
    snprintf(m->boot, sizeof m->boot, "%s", rd_kafka_mock_cluster_bootstraps(m->mc));
    /* "127.0.0.1:PORT,..." */
    unsigned port = 0;
    char host[64] = "";
    m->first.sin_family = AF_INET;
    if (sscanf(m->boot, "%63[^:]:%u", host, &port) == 2 && port < 65536 &&
        inet_pton(AF_INET, host, &m->first.sin_addr) == 1)
        m->first.sin_port = htons((uint16_t)port);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    if (m->first.sin_port && pthread_create(&m->waker, NULL, waker_main, m) != 0)
        m->first.sin_port = 0; /* ops still work, at the mock's own pace */
    return m;
}

void fsgd_kmock_destroy(fsgd_kmock_t *m)
{
    if (!m)
        return;
    if (m->first.sin_port) {
        pthread_mutex_lock(&m->lock);
        atomic_store(&m->stop, 1);
        pthread_cond_signal(&m->cond);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->waker, NULL);
    }
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    rd_kafka_mock_cluster_destroy(m->mc);
    rd_kafka_destroy(m->rk);
    free(m);
}

const char *fsgd_kmock_bootstraps(const fsgd_kmock_t *m) { return m->boot; }

int fsgd_kmock_topic(fsgd_kmock_t *m, const char *topic, int partitions, int leader_base, char *err, size_t errsz)
{
    waking(m, 1);
    rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(m->mc, topic, partitions, 1);
    if (!e && leader_base >= 0)
        for (int p = 0; p < partitions; p++)
            rd_kafka_mock_partition_set_leader(m->mc, topic, p, (leader_base + p) % m->brokers + 1);
    waking(m, 0);
    if (e)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "mock topic %s: %s", topic, rd_kafka_err2str(e));
    return 0;
}

int fsgd_kmock_broker_down(fsgd_kmock_t *m, int broker, int down)
{
    waking(m, 1);
    rd_kafka_resp_err_t e = down ? rd_kafka_mock_broker_set_down(m->mc, broker)
                                 : rd_kafka_mock_broker_set_up(m->mc, broker);
    waking(m, 0);
    return e ? FSGD_E_KAFKA : 0;
}

int fsgd_kmock_delay_produce(fsgd_kmock_t *m, int broker, int count, int rtt_ms)
{
    int rc = 0;
    waking(m, 1);
    for (int i = 0; i < count && !rc; i++)
        rc = rd_kafka_mock_broker_push_request_error_rtts(m->mc, broker, 0 /* ApiKey Produce */, 1,
                                                          RD_KAFKA_RESP_ERR_NO_ERROR, rtt_ms)
                 ? FSGD_E_KAFKA
                 : 0;
    waking(m, 0);
    return rc;
}
