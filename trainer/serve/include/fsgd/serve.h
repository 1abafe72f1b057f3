/* fsgd serve: an HTTP/1.1 scoring server (libmicrohttpd) for one or more
 * named models, each swapped for its newer versions while it serves.
 *
 * Endpoints (docs/serve.md): POST /score and /score/NAME (rows in the
 * body, scores out in request order), GET /model[/NAME], /healthz and
 * /metrics (Prometheus text). Every scoring answer carries the version of
 * the model that scored it (header X-Fsgd-Model-Version).
 *
 * Versions: each model has a source (a file polled by stat: a file
 * replaced by rename is a new version; or a job's model topic, whose new
 * steps are new versions) that a watcher thread of its own
 * checks every poll_ms, never a request thread. A new version is loaded and
 * checked (the model loader's format and CRC checks; the same dimension,
 * loss and hashing as the version serving; with min_auc, its held-out AUC)
 * and then swapped in: the
 * versions are reference counted, so a request in flight finishes on the
 * version it started with and the old one is freed by the last request that
 * holds it. A version that fails its checks is refused, logged and counted;
 * the one serving stays.
 *
 * The library never prints: it reports reloads, refusals and start-up
 * through conf->log. */
#ifndef FSGD_SERVE_H
#define FSGD_SERVE_H

#include <stddef.h>

typedef struct fsgd_serve fsgd_serve_t;

/* One line of what the server did ("model ctr: version 3 from ctr.model"),
 * without a trailing newline. Called from the watcher thread and from the
 * caller's thread; must be thread safe. */
typedef void (*fsgd_serve_log_fn)(void *ctx, const char *line);

typedef struct fsgd_serve_conf {
    const char *addr;   /* numeric IPv4 or IPv6 address; NULL or "": 127.0.0.1 (loopback) */
    int port;           /* 0..65535; 0: a free port (fsgd_serve_port tells which) */
    int threads;        /* request threads, >= 1 */
    size_t max_body;    /* a request body over this many bytes is answered 413 */
    unsigned max_conns; /* open connections at most; more are refused at accept */
    unsigned timeout_s; /* a connection idle (or a client this slow) this long is closed */
    unsigned poll_ms;   /* how often sources are checked for a new version (0: never) */
    double min_auc;     /* > 0: a version whose held-out (test) AUC, as its metrics JSON records it,
                           is below this, or that has none, is refused (the first one too) */
    fsgd_serve_log_fn log;
    void *log_ctx;
} fsgd_serve_conf_t;

/* The defaults: loopback, port 8080, 4 threads, 16 MiB bodies, 1024
 * connections, 30 s timeout, polled every second, no log. */
void fsgd_serve_conf_defaults(fsgd_serve_conf_t *conf);

/* A server that serves nothing yet (conf is copied). NULL with err set on
 * a bad conf (FSGD_E_ARG) or FSGD_E_NOMEM. */
fsgd_serve_t *fsgd_serve_new(const fsgd_serve_conf_t *conf, char *err, size_t errsz);

/* Adds model `name` ([A-Za-z0-9_.-], 1..64 bytes, unique) from the model file
 * at path, loading its first version now. metrics (NULL or "": none) is the
 * metrics JSON that training writes beside it (fsgd train --metrics-json):
 * each version's rows trained and held-out metrics (GET /model, min_auc).
 * It describes a version when it is no older than the model file (fsgd
 * train writes it after the model) and names the model's dimension and
 * loss; a change of either file is a new version. Before fsgd_serve_start
 * only. Returns 0, FSGD_E_ARG (bad or duplicate name), the loader's error
 * with err naming the file, or (min_auc) FSGD_E_RANGE / FSGD_E_FORMAT: the
 * first version's held-out AUC is below the bound, or unknown. */
int fsgd_serve_add_file(fsgd_serve_t *s, const char *name, const char *path, const char *metrics, char *err,
                        size_t errsz);

/* Adds model `name` that follows job `job`'s model topic (JOB.model on
 * brokers, as fsgd predict --brokers reads it: the newest snapshot and the
 * updates after it); the first version is assembled now, and a new step
 * seen at a poll is a new version. A poll asks the topic's partition ends
 * and reads the topic (from its log start) only when they moved. The topic
 * is read on bus (fsgd/bus.h: a Kafka bus on brokers, which are named in
 * what the server says), which s owns from this call on, even when it
 * fails; frames are checked under the bus's job key (fsgd_bus_set_auth):
 * untagged or forged ones are skipped. Before fsgd_serve_start only.
 * Returns 0 or an error as fsgd_serve_add_file (FSGD_E_KAFKA when the topic
 * cannot be read). */
struct fsgd_bus;
int fsgd_serve_add_topic(fsgd_serve_t *s, const char *name, const char *brokers, const char *job,
                         struct fsgd_bus *bus, char *err, size_t errsz);

/* Binds and starts serving (the request threads and the watcher). Signals
 * the caller wants for itself (SIGTERM) should be blocked before: the
 * threads inherit the mask. Returns 0, FSGD_E_ARG (no model) or FSGD_E_IO
 * (the port cannot be bound) with err set. */
int fsgd_serve_start(fsgd_serve_t *s, char *err, size_t errsz);

/* The port it listens on (after fsgd_serve_start), else -1. */
int fsgd_serve_port(const fsgd_serve_t *s);

/* Stops accepting connections, answers the requests already received
 * (with "Connection: close"), and waits up to max_ms for them to finish.
 * Returns the number of requests still in flight at the deadline (0:
 * drained). Idempotent. */
int fsgd_serve_drain(fsgd_serve_t *s, unsigned max_ms);

/* Stops the threads (after fsgd_serve_drain, if it is to be graceful) and
 * frees everything. NULL is a no-op. */
void fsgd_serve_destroy(fsgd_serve_t *s);

#endif
