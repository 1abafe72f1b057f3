/* The server's state, shared by its files (private to trainer/serve):
 * serve.c (life cycle, metrics) calls http.c (requests) and watch.c
 * (versions), which call slot.c (slot.h) and never back up into serve.c:
 * tests/integration/call_cycles.sh holds it. */
#ifndef FSGD_SERVE_INTERNAL_H
#define FSGD_SERVE_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "fsgd/prom.h"
#include "fsgd/serve.h"
#include "slot.h"

#define SERVE_MAX_MODELS 64

/* Kinds of error answers, the label values of fsgd_serve_errors_total. */
#define SERVE_ERROR_KINDS(X)                                                   \
    X(BAD_REQUEST, "bad_request")        /* 400: a malformed row or body */    \
    X(TOO_LARGE, "too_large")            /* 413 */                             \
    X(NOT_FOUND, "not_found")            /* 404: no such path or model */      \
    X(METHOD, "method_not_allowed")      /* 405 */                             \
    X(MEDIA_TYPE, "unsupported_media")   /* 415 */                             \
    X(INTERNAL, "internal")              /* 500: out of memory */              \
    X(TIMEOUT, "timeout")                /* a body slower than --timeout */

#define SERVE_ERROR_ENUM_(id, label) SERVE_ERR_##id,
enum { SERVE_ERROR_KINDS(SERVE_ERROR_ENUM_) SERVE_ERR_COUNT };
#undef SERVE_ERROR_ENUM_

struct fsgd_serve {
    fsgd_serve_conf_t conf;
    char addr[64];
    serve_slot_t *slots[SERVE_MAX_MODELS];
    int n_slots;
    struct MHD_Daemon *daemon;
    int port;
    double started_at;
    atomic_int draining;
    /* Accepting (accept.c): the listening socket (-1 once closed), the
     * thread that accepts from it, and the connections it handed to the
     * daemon that are still open. */
    int listen_fd;
    int accept_wake_fd; /* eventfd: a connection closed at the limit, or stop */
    pthread_t acceptor;
    int acceptor_started;
    atomic_int accept_stop;
    atomic_int open_conns;
    atomic_int in_flight; /* requests between their first callback and their completion */
    /* Metrics. */
    fsgd_prom_t *prom;
    int m_errors[SERVE_ERR_COUNT];
    int m_in_flight;
    /* The watcher thread. */
    pthread_t watcher;
    int watcher_started;
    pthread_mutex_t wlock;
    pthread_cond_t wcond;
    int wstop; /* under wlock */
};

/* Starts the MHD daemon (http.c). 0 or FSGD_E_IO with err set. */
int serve_http_start(fsgd_serve_t *s, char *err, size_t errsz);

/* Binds and listens on sa (s->port set to the port bound), and makes the
 * acceptor's wake-up eventfd (accept.c). 0 or FSGD_E_IO with err set. */
int serve_accept_listen(fsgd_serve_t *s, const struct sockaddr *sa, socklen_t salen, char *err, size_t errsz);
/* The daemon's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the server):
 * counts connections closed. */
void serve_accept_notify(void *cls, struct MHD_Connection *c, void **socket_ctx,
                         enum MHD_ConnectionNotificationCode code);
/* Starts accepting into s->daemon: 0, or FSGD_E_NOMEM with err set. */
int serve_accept_start(fsgd_serve_t *s, char *err, size_t errsz);
/* Stops accepting and closes the listening socket (new connections are
 * refused); the connections handed over stay the daemon's. Idempotent. */
void serve_accept_stop(fsgd_serve_t *s);

/* Checks every slot's source once for a new version (watch.c). */
void serve_watch_poll(fsgd_serve_t *s);
/* The watcher thread's loop: serve_watch_poll every conf.poll_ms until stopped. */
void *serve_watch_main(void *arg);

/* Assembles the topic of a topic slot as a version, checked likewise;
 * *same is set (and NULL returned, no error) when its step is the one
 * serving. */
serve_version_t *serve_watch_load_topic(serve_slot_t *slot, double min_auc, int *same, int *rc, char *err,
                                        size_t errsz);

/* Loads the file of a file slot (and its metrics JSON) as a version,
 * checked against the version serving (when there is one) and min_auc
 * (> 0). NULL with *rc and err set when refused. */
serve_version_t *serve_watch_load_file(serve_slot_t *slot, double min_auc, int *rc, char *err, size_t errsz);

#endif
