/* fsgd serve's life cycle: configuration, models, metrics registry,
 * start, drain and stop (fsgd/serve.h). Requests: http.c; versions: watch.c.
 * Calls go one way: serve.c -> http.c, watch.c -> slot.c (neither http.c
 * nor watch.c calls back up here). */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "serve_internal.h"

void fsgd_serve_conf_defaults(fsgd_serve_conf_t *conf)
{
    memset(conf, 0, sizeof *conf);
    conf->port = 8080;
    conf->threads = 4;
    conf->max_body = (size_t)16 << 20;
    conf->max_conns = 1024;
    conf->timeout_s = 30;
    conf->poll_ms = 1000;
}

static const double latency_bounds[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                        0.025,   0.05,   0.1,     0.25,   0.5,   1,      2.5,    5};

/* The registry's series that are not per model. */
static int add_server_metrics(fsgd_serve_t *s, char *err, size_t errsz)
{
#define SERVE_ERROR_LABEL_(id, label) label,
    static const char *const kinds[] = {SERVE_ERROR_KINDS(SERVE_ERROR_LABEL_)};
#undef SERVE_ERROR_LABEL_
    for (int k = 0; k < SERVE_ERR_COUNT; k++) {
        const char *labels[] = {"kind", kinds[k], NULL};
        s->m_errors[k] = fsgd_prom_add(s->prom, FSGD_PROM_COUNTER, "fsgd_serve_errors_total",
                                       "Requests answered with an error, by kind", labels, err, errsz);
        if (s->m_errors[k] < 0)
            return s->m_errors[k];
    }
    s->m_in_flight = fsgd_prom_add(s->prom, FSGD_PROM_GAUGE, "fsgd_serve_in_flight", "Requests being answered",
                                   NULL, err, errsz);
    return s->m_in_flight < 0 ? s->m_in_flight : 0;
}

static int add_slot_metrics(fsgd_serve_t *s, serve_slot_t *sl, char *err, size_t errsz)
{
    const char *labels[] = {"model", sl->name, NULL};
    fsgd_prom_t *p = s->prom;
    if ((sl->m_requests = fsgd_prom_add(p, FSGD_PROM_COUNTER, "fsgd_serve_requests_total",
                                        "Scoring requests answered 200", labels, err, errsz)) < 0 ||
        (sl->m_rows = fsgd_prom_add(p, FSGD_PROM_COUNTER, "fsgd_serve_rows_total", "Rows scored", labels, err,
                                    errsz)) < 0 ||
        (sl->m_latency = fsgd_prom_add_histogram(p, "fsgd_serve_request_seconds",
                                                 "Time to answer a scoring request, from its headers to its answer",
                                                 labels, latency_bounds,
                                                 (int)(sizeof latency_bounds / sizeof *latency_bounds), err, errsz)) < 0 ||
        (sl->m_version = fsgd_prom_add(p, FSGD_PROM_GAUGE, "fsgd_serve_model_version",
                                       "Version of the model serving (1, 2, ... as they are swapped in)", labels, err,
                                       errsz)) < 0 ||
        (sl->m_age = fsgd_prom_add(p, FSGD_PROM_GAUGE, "fsgd_serve_model_age_seconds",
                                   "Seconds since the version serving was loaded", labels, err, errsz)) < 0 ||
        (sl->m_reloads = fsgd_prom_add(p, FSGD_PROM_COUNTER, "fsgd_serve_reloads_total",
                                       "New versions swapped in", labels, err, errsz)) < 0 ||
        (sl->m_refused = fsgd_prom_add(p, FSGD_PROM_COUNTER, "fsgd_serve_reloads_refused_total",
                                       "New versions refused (unreadable, corrupt or not like the one serving)",
                                       labels, err, errsz)) < 0)
        return FSGD_E_ARG;
    return 0;
}

fsgd_serve_t *fsgd_serve_new(const fsgd_serve_conf_t *conf, char *err, size_t errsz)
{
    if (conf->port < 0 || conf->port > 65535 || conf->threads < 1 || conf->threads > 1024 || conf->max_body == 0 ||
        conf->max_conns == 0 || !(conf->min_auc <= 1)) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "serve: port %d (0..65535), threads %d (1..1024), max body %zu and "
                     "connections %u (> 0), min AUC %g (<= 1)", conf->port, conf->threads, conf->max_body, conf->max_conns,
                     conf->min_auc);
        return NULL;
    }
    fsgd_serve_t *s = calloc(1, sizeof *s);
    if (!s || !(s->prom = fsgd_prom_new())) {
        free(s);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
        return NULL;
    }
    s->conf = *conf;
    snprintf(s->addr, sizeof s->addr, "%s", conf->addr && conf->addr[0] ? conf->addr : "127.0.0.1");
    s->conf.addr = s->addr;
    s->port = -1;
    s->listen_fd = -1;
    s->accept_wake_fd = -1;
    pthread_mutex_init(&s->wlock, NULL);
    pthread_cond_init(&s->wcond, NULL);
    if (add_server_metrics(s, err, errsz) < 0) {
        fsgd_serve_destroy(s);
        return NULL;
    }
    return s;
}

static int name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= SERVE_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", name[i]))
            return 0;
    return 1;
}

/* A new slot called name, or NULL with err set. */
static serve_slot_t *new_slot(fsgd_serve_t *s, const char *name, char *err, size_t errsz)
{
    if (s->daemon) {
        fsgd_err_fmt(err, errsz, FSGD_E_STATE, "serve: models are added before the server starts");
        return NULL;
    }
    if (!name_ok(name)) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "serve: model name '%s': expected 1 to %d of A-Z a-z 0-9 _ . -", name,
                     SERVE_NAME_MAX - 1);
        return NULL;
    }
    if (serve_slots_find(s->slots, s->n_slots, name, strlen(name))) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "serve: two models named '%s'", name);
        return NULL;
    }
    if (s->n_slots == SERVE_MAX_MODELS) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "serve: more than %d models", SERVE_MAX_MODELS);
        return NULL;
    }
    serve_slot_t *sl = calloc(1, sizeof *sl);
    if (!sl) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
        return NULL;
    }
    snprintf(sl->name, sizeof sl->name, "%s", name);
    pthread_mutex_init(&sl->lock, NULL);
    return sl;
}

static void free_slot(serve_slot_t *sl)
{
    serve_version_release(sl->cur);
    fsgd_bus_client_destroy(sl->topic.client);
    fsgd_ctl_versions_free(sl->topic.ctl); /* its client is the bus's */
    fsgd_model_follow_free(sl->topic.follow);
    fsgd_bus_destroy(sl->topic.bus);
    pthread_mutex_destroy(&sl->lock);
    free(sl);
}

/* Publishes the slot's first version v (NULL: its load failed, err set). */
static int publish_slot(fsgd_serve_t *s, serve_slot_t *sl, serve_version_t *v, int load_rc, char *err, size_t errsz)
{
    int rc = v ? add_slot_metrics(s, sl, err, errsz) : load_rc;
    if (rc < 0) {
        serve_version_release(v);
        free_slot(sl);
        return rc;
    }
    serve_slot_swap(sl, v);
    fsgd_prom_set(s->prom, sl->m_version, 1);
    s->slots[s->n_slots++] = sl;
    return 0;
}

int fsgd_serve_add_file(fsgd_serve_t *s, const char *name, const char *path, const char *metrics, char *err,
                        size_t errsz)
{
    if (!metrics)
        metrics = "";
    if (strlen(path) >= sizeof s->slots[0]->file.path || strlen(metrics) >= sizeof s->slots[0]->file.metrics_path)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "serve: model or metrics path too long");
    serve_slot_t *sl = new_slot(s, name, err, errsz);
    if (!sl)
        return FSGD_E_ARG;
    snprintf(sl->file.path, sizeof sl->file.path, "%s", path);
    snprintf(sl->file.metrics_path, sizeof sl->file.metrics_path, "%s", metrics);
    int load_rc = 0;
    serve_version_t *v = serve_watch_load_file(sl, s->conf.min_auc, &load_rc, err, errsz);
    return publish_slot(s, sl, v, load_rc, err, errsz);
}

int fsgd_serve_add_topic(fsgd_serve_t *s, const char *name, const char *brokers, const char *job,
                         struct fsgd_bus *bus, char *err, size_t errsz)
{
    if (strlen(brokers) >= sizeof s->slots[0]->topic.brokers || strlen(job) >= sizeof s->slots[0]->topic.job) {
        fsgd_bus_destroy(bus);
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "serve: brokers or job name too long");
    }
    serve_slot_t *sl = new_slot(s, name, err, errsz);
    if (!sl) {
        fsgd_bus_destroy(bus);
        return FSGD_E_ARG;
    }
    sl->topic.bus = bus;
    sl->from_topic = 1;
    sl->topic.n_ends = -1;
    sl->topic.refused_ctl_offset = -1;
    snprintf(sl->topic.brokers, sizeof sl->topic.brokers, "%s", brokers);
    snprintf(sl->topic.job, sizeof sl->topic.job, "%s", job);
    int same = 0, load_rc = 0;
    serve_version_t *v = serve_watch_load_topic(sl, s->conf.min_auc, &same, &load_rc, err, errsz);
    return publish_slot(s, sl, v, load_rc, err, errsz);
}

int fsgd_serve_start(fsgd_serve_t *s, char *err, size_t errsz)
{
    if (s->n_slots == 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "serve: no model to serve");
    if (s->daemon)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "serve: already started");
    s->started_at = serve_now();
    FSGD_TRY(serve_http_start(s, err, errsz));
    if (s->conf.poll_ms > 0) {
        if (pthread_create(&s->watcher, NULL, serve_watch_main, s) != 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "serve: cannot start the watcher thread");
        s->watcher_started = 1;
    }
    return 0;
}

int fsgd_serve_port(const fsgd_serve_t *s)
{
    return s ? s->port : -1;
}

int fsgd_serve_drain(fsgd_serve_t *s, unsigned max_ms)
{
    if (!s->daemon)
        return 0;
    if (!atomic_exchange(&s->draining, 1))
        serve_accept_stop(s); /* no new connections */
    for (unsigned waited = 0; atomic_load(&s->in_flight) > 0 && waited < max_ms; waited += 10)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    return atomic_load(&s->in_flight);
}

void fsgd_serve_destroy(fsgd_serve_t *s)
{
    if (!s)
        return;
    if (s->watcher_started) {
        pthread_mutex_lock(&s->wlock);
        s->wstop = 1;
        pthread_cond_signal(&s->wcond);
        pthread_mutex_unlock(&s->wlock);
        pthread_join(s->watcher, NULL);
    }
    serve_accept_stop(s);
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    if (s->accept_wake_fd >= 0) /* the daemon's threads wrote to it until now */
        close(s->accept_wake_fd);
    for (int i = 0; i < s->n_slots; i++)
        free_slot(s->slots[i]);
    fsgd_prom_destroy(s->prom);
    pthread_mutex_destroy(&s->wlock);
    pthread_cond_destroy(&s->wcond);
    free(s);
}
