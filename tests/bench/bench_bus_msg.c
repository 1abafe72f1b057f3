/* What one Kafka message costs the roles' CPU, sender and receiver
 * together, in the request-and-answer pattern of a step (each message sent,
 * then waited for, before the next: no batching): through fsgd's own bus
 * (librdkafka, framed, tagged with a job key and checked as the roles do),
 * against the real broker at FSGD_BROKERS. The process's CPU (every thread:
 * librdkafka's too, getrusage) over the messages. The CTR cost model
 * (tests/bench/lib/cost_model.py) charges half to each end of a message.
 * Then bursts: K messages sent, then the K read (a shard's step: P workers'
 * gradients come together, and one fetch brings several of them).
 * Lines:
 *   bench bus_msg bytes=N messages=M cpu_us_msg=.. wall_us_msg=..
 *   bench bus_msg bytes=N burst=K messages=M cpu_us_msg=.. wall_us_msg=..
 *   bench bus_msg skipped="..."  (no FSGD_BROKERS)
 * BENCH_BUS_MSGS: messages a size (default 2000). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* burst messages of len bytes sent (steps step + 1 ..), then each read
 * back and its frame checked. */
static int round_trip(fsgd_bus_client_t *prod, fsgd_bus_client_t *cons, const fsgd_auth_t *auth, const char *topic,
                      const uint8_t *body, size_t len, int burst, uint64_t *step, char *err, size_t errsz)
{
    for (int i = 0; i < burst; i++) {
        fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .gen = 1, .sender = 1, .step = ++*step};
        const fsgd_bus_out_t out = {.topic = topic, .partition = 0, .job = "busmsg", .hdr = &h, .val = body, .len = len};
        FSGD_TRY(fsgd_bus_send(prod, &out, NULL, err, errsz));
    }
    fsgd_bus_serve(prod);
    int got = 0;
    for (int waited = 0; got < burst && waited < 300; waited++) {
        fsgd_bus_msg_t *m = fsgd_bus_poll(cons, 100);
        if (!m)
            continue;
        fsgd_kframe_t f;
        int rc = m->err ? FSGD_E_KAFKA : fsgd_kframe_parse(m->val, m->len, &f, NULL, auth, err, errsz);
        fsgd_bus_msg_destroy(m);
        if (rc < 0)
            return rc;
        got++, waited = -1;
    }
    return got == burst ? 0
                        : fsgd_err_fmt(err, errsz, FSGD_E_TIMEOUT, "message %llu not back in 30 s",
                                       (unsigned long long)(*step - (uint64_t)(burst - got) + 1));
}

/* n messages of len bytes in bursts of burst: a line of their CPU. */
static int measure(fsgd_bus_client_t *prod, fsgd_bus_client_t *cons, const fsgd_auth_t *auth, const char *topic,
                   const uint8_t *body, size_t len, int burst, int n, uint64_t *step, char *err, size_t errsz)
{
    double c0 = cpu_s(), w0 = wall_s();
    int sent = 0;
    for (; sent < n; sent += burst)
        FSGD_TRY(round_trip(prod, cons, auth, topic, body, len, burst, step, err, errsz));
    if (burst == 1)
        printf("bench bus_msg bytes=%zu messages=%d cpu_us_msg=%.1f wall_us_msg=%.1f\n", len, sent,
               1e6 * (cpu_s() - c0) / sent, 1e6 * (wall_s() - w0) / sent);
    else
        printf("bench bus_msg bytes=%zu burst=%d messages=%d cpu_us_msg=%.1f wall_us_msg=%.1f\n", len, burst, sent,
               1e6 * (cpu_s() - c0) / sent, 1e6 * (wall_s() - w0) / sent);
    fflush(stdout);
    return 0;
}

int main(void)
{
    const char *brokers = getenv("FSGD_BROKERS");
    if (!brokers || !*brokers) {
        printf("bench bus_msg skipped=\"FSGD_BROKERS not set: a real broker is needed\"\n");
        return 0;
    }
    const char *e = getenv("BENCH_BUS_MSGS");
    int n = e ? atoi(e) : 2000;
    char err[512] = "", topic[64];
    snprintf(topic, sizeof topic, "busmsg-%d", (int)getpid());
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(i * 37 + 11);
    fsgd_auth_t *auth = fsgd_auth_new(key, "busmsg");
    fsgd_bus_t *bus = fsgd_bus_kafka_new(brokers, NULL, err, sizeof err);
    fsgd_bus_client_t *prod = NULL, *cons = NULL;
    int rc = bus && auth ? 0 : FSGD_E_KAFKA;
    if (!rc) {
        fsgd_bus_set_auth(bus, auth);
        prod = fsgd_bus_client_new(bus, FSGD_KCLIENT_PRODUCER, err, sizeof err);
        cons = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, sizeof err);
        rc = prod && cons ? 0 : FSGD_E_KAFKA;
    }
    if (!rc)
        rc = fsgd_bus_create_topic(prod, topic, 1, 1, NULL, 15000, err, sizeof err);
    if (!rc) /* a new topic: read from its first message (its end may come after the first send) */
        rc = fsgd_bus_assign(cons, &(fsgd_bus_tp_t){topic, 0, FSGD_BUS_OFFSET_BEGINNING}, 1, err, sizeof err);
    /* a small gradient part, a step's pull, a large gradient */
    static const size_t sizes[] = {1024, 4096, 32768};
    uint8_t *body = calloc(1, 32768);
    uint64_t step = 0;
    rc = rc ? rc : body ? 0 : FSGD_E_NOMEM;
    for (int i = 0; !rc && i < 100; i++) /* connections, metadata, the consumer's first fetch */
        rc = round_trip(prod, cons, auth, topic, body, 1024, 1, &step, err, sizeof err);
    for (size_t s = 0; !rc && s < sizeof sizes / sizeof *sizes; s++) {
        for (size_t i = 0; i < sizes[s]; i++)
            body[i] = (uint8_t)(i * 131 + s);
        rc = measure(prod, cons, auth, topic, body, sizes[s], 1, n, &step, err, sizeof err);
    }
    static const int bursts[] = {2, 4, 8};
    for (size_t b = 0; !rc && b < sizeof bursts / sizeof *bursts; b++)
        rc = measure(prod, cons, auth, topic, body, 4096, bursts[b], n, &step, err, sizeof err);
    if (rc)
        printf("bench bus_msg error=\"%s\"\n", err[0] ? err : fsgd_err_name(rc));
    free(body);
    fsgd_bus_client_destroy(prod);
    fsgd_bus_client_destroy(cons);
    fsgd_bus_destroy(bus);
    fsgd_auth_destroy(auth);
    return rc ? 1 : 0;
}
