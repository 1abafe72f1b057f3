/* fsgd/api.h: a job's model from its topic, for bindings. */
#include "fsgd/api.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"

#define SETTINGS_MAX 4096

/* What the settings lines say. */
typedef struct topic_settings {
    char key_file[1024];
    int partial;
    int connect_timeout_ms;
    char kafka[SETTINGS_MAX]; /* the Kafka client settings, "key=value\n" lines */
} topic_settings_t;

static int parse_settings(const char *text, topic_settings_t *t, char *err, size_t errsz)
{
    memset(t, 0, sizeof *t);
    t->connect_timeout_ms = 15000;
    char line[2048];
    for (const char *p = text ? text : ""; *p;) {
        size_t n = strcspn(p, "\n");
        if (n >= sizeof line)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "settings: a line of %zu bytes", n);
        memcpy(line, p, n);
        line[n] = '\0';
        p += n + (p[n] == '\n');
        if (!line[0])
            continue;
        char *eq = strchr(line, '=');
        if (!eq)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "settings: '%s' is not key=value", line);
        *eq = '\0';
        const char *v = eq + 1;
        char *end;
        if (!strcmp(line, "job_key_file")) {
            snprintf(t->key_file, sizeof t->key_file, "%s", v);
        } else if (!strcmp(line, "partial")) {
            t->partial = !strcmp(v, "1") || !strcmp(v, "true");
        } else if (!strcmp(line, "connect_timeout_ms")) {
            long ms = strtol(v, &end, 10);
            if (*v == '\0' || *end || ms < 1 || ms > 3600000)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "connect_timeout_ms: expected 1 to 3600000, got '%s'", v);
            t->connect_timeout_ms = (int)ms;
        } else {
            FSGD_TRY(fsgd_kbus_options_add(t->kafka, sizeof t->kafka, line, v, err, errsz));
        }
    }
    return 0;
}

/* The job's key from its file (none: tags are not checked, and only the
 * job's own name binds what is read). */
static fsgd_auth_t *job_auth(const topic_settings_t *t, const char *name, char *err, size_t errsz)
{
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    if (t->key_file[0] && fsgd_auth_key_load(t->key_file, key, err, errsz) < 0)
        return NULL;
    fsgd_auth_t *a = fsgd_auth_new(t->key_file[0] ? key : NULL, name);
    sodium_memzero(key, sizeof key);
    if (!a)
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "libsodium did not start");
    return a;
}

int fsgd_api_model_from_topic(const char *brokers, const char *name, const char *settings, fsgd_model_t **out,
                              uint64_t *step, char *err, size_t errsz)
{
    *out = NULL;
    topic_settings_t t;
    char resolved[SETTINGS_MAX];
    FSGD_TRY(parse_settings(settings, &t, err, errsz));
    int rc = fsgd_kbus_options_resolve(t.kafka, resolved, sizeof resolved, err, errsz);
    fsgd_kbus_options_wipe(t.kafka, sizeof t.kafka);
    if (rc < 0)
        return rc;
    fsgd_auth_t *auth = job_auth(&t, name, err, errsz);
    fsgd_model_t *m = calloc(1, sizeof *m);
    fsgd_bus_t *bus = NULL;
    const fsgd_kconf_t kc = {brokers, resolved};
    if (!auth)
        rc = FSGD_E_ARG;
    else if (!m)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    else if ((rc = fsgd_kbus_connect(&kc, t.connect_timeout_ms, err, errsz)) == 0 &&
             !(bus = fsgd_bus_kafka_new(brokers, resolved, err, errsz)))
        rc = FSGD_E_KAFKA;
    if (rc == 0) {
        fsgd_bus_set_auth(bus, auth);
        uint64_t at = 0;
        rc = fsgd_model_assemble_topic(bus, name, !t.partial, m, &at, err, errsz);
        if (step)
            *step = at;
    }
    fsgd_bus_destroy(bus);
    fsgd_auth_destroy(auth);
    fsgd_kbus_options_wipe(resolved, sizeof resolved);
    if (rc < 0 && m) {
        fsgd_model_free(m);
        free(m);
        m = NULL;
    }
    *out = m;
    return rc < 0 ? rc : 0;
}
