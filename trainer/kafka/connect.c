/* Reaching the brokers at start, in bounded time, with the reason when it
 * fails (fsgd/kbus.h: fsgd_kbus_connect). */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bus_impl.h"
#include "fsgd/clock.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"

/* Causes that do not go away by waiting: a certificate not trusted, a
 * password refused. Seen twice (librdkafka reconnects within a second), the
 * wait ends early. */
static int lasting(rd_kafka_resp_err_t e)
{
    return e == RD_KAFKA_RESP_ERR__SSL || e == RD_KAFKA_RESP_ERR__AUTHENTICATION ||
           e == RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED;
}

/* librdkafka before 2.6.1 sends the client nonce twice in its SCRAM
 * client-final-message (librdkafka#4895); Kafka 3.x lets it pass, Kafka 4.0
 * and later check the nonce strictly (RFC 5802) and say "invalid
 * credentials", as for a wrong password. fsgd cannot tell the two apart. */
static const char *scram_hint(const fsgd_kconf_t *kc)
{
    if (rd_kafka_version() >= 0x020601ff || !kc->options || !strstr(kc->options, "sasl.mechanism=SCRAM"))
        return "";
    return "; note: this librdkafka is older than 2.6.1, whose SCRAM Kafka 4.0 and later refuse as invalid "
           "credentials whatever the password (librdkafka#4895; Kafka 3.x accepts it): with such a broker use "
           "sasl.mechanism=PLAIN over SASL_SSL, or a newer librdkafka";
}

int fsgd_kbus_connect(const fsgd_kconf_t *kc, int timeout_ms, char *err, size_t errsz)
{
    const char *brokers = kc->brokers;
    fsgd_kwatch_t w;
    fsgd_kwatch_init(&w);
    char e[512];
    rd_kafka_t *rk = fsgd_kbus_client_watched(kc, &w, e, sizeof e);
    if (!rk) {
        fsgd_kwatch_destroy(&w);
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "brokers %s: %s", brokers, e);
    }
    const double start = fsgd_clock_ms(), end = start + timeout_ms;
    int ok = 0, lasting_seen = 0;
    rd_kafka_resp_err_t mdrc = RD_KAFKA_RESP_ERR__TIMED_OUT;
    for (;;) {
        double left = end - fsgd_clock_ms();
        if (left <= 0)
            break;
        const struct rd_kafka_metadata *md = NULL;
        mdrc = rd_kafka_metadata(rk, 0, NULL, &md, left < 1000 ? (int)left + 1 : 1000);
        if (mdrc == RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_metadata_destroy(md);
            ok = 1;
            break;
        }
        rd_kafka_poll(rk, 0); /* serves the watch's error callback */
        char ignored[1];
        if (lasting(fsgd_kbus_watch_get(&w, ignored, sizeof ignored)) && ++lasting_seen >= 2)
            break;
    }
    /* the cause before rd_kafka_destroy, which logs failures of its own */
    char why[512];
    rd_kafka_resp_err_t code = fsgd_kbus_watch_get(&w, why, sizeof why);
    if (!why[0])
        snprintf(why, sizeof why, "%s", rd_kafka_err2str(mdrc));
    const char *name = code ? rd_kafka_err2name(code) : rd_kafka_err2name(mdrc);
    rd_kafka_destroy(rk);
    fsgd_kwatch_destroy(&w);
    if (ok)
        return 0;
    const double now = fsgd_clock_ms();
    return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "brokers %s: no connection %s %.1f s: %s (%s)%s", brokers,
                        now < end ? "after" : "within", (now < end ? now - start : timeout_ms) / 1e3, why, name,
                        scram_hint(kc));
}
