/* A small Prometheus metrics registry and its text exposition (format
 * 0.0.4, what every Prometheus server scrapes), plus the HTTP endpoint that
 * serves it (libmicrohttpd).
 *
 * A registry holds metric families (counter, gauge, histogram), each with
 * a name, help text and one or more series told apart by labels. Values are
 * set from any thread; fsgd_prom_render takes a consistent snapshot of all
 * of them under the registry's lock. Names follow Prometheus conventions
 * and are checked when a series is added: [a-zA-Z_:][a-zA-Z0-9_:]*, a
 * counter's name ends in _total, labels are [a-zA-Z_][a-zA-Z0-9_]* and do
 * not start with "__", "le" is reserved for histogram buckets. */
#ifndef FSGD_PROM_H
#define FSGD_PROM_H

#include <stddef.h>

typedef struct fsgd_prom fsgd_prom_t;

typedef enum fsgd_prom_type { FSGD_PROM_COUNTER, FSGD_PROM_GAUGE, FSGD_PROM_HISTOGRAM } fsgd_prom_type_t;

/* Most histogram buckets (upper bounds, +Inf excluded) of one series. */
#define FSGD_PROM_MAX_BUCKETS 32

/* A new empty registry, or NULL when out of memory. */
fsgd_prom_t *fsgd_prom_new(void);
/* Frees the registry; NULL is a no-op. No server may still be using it. */
void fsgd_prom_destroy(fsgd_prom_t *r);

/* Adds a counter or gauge series: family `name` (created on first use with
 * `help`; a later series of the family must have the same type) and the
 * labels `labels`, a NULL-terminated list of name, value pairs (NULL for
 * none); label values may hold any bytes and are escaped on output. Returns
 * the series id (>= 0) for fsgd_prom_set/inc, or FSGD_E_ARG (bad name,
 * label, type, duplicate series) / FSGD_E_NOMEM with err set. Values start
 * at 0. Thread safe. */
int fsgd_prom_add(fsgd_prom_t *r, fsgd_prom_type_t type, const char *name, const char *help,
                  const char *const *labels, char *err, size_t errsz);

/* Adds a histogram series with n (1..FSGD_PROM_MAX_BUCKETS) strictly
 * increasing finite upper bounds; the +Inf bucket is implicit. Returns the
 * series id for fsgd_prom_observe, or an error as fsgd_prom_add. */
int fsgd_prom_add_histogram(fsgd_prom_t *r, const char *name, const char *help, const char *const *labels,
                            const double *bounds, int n, char *err, size_t errsz);

/* Sets a gauge, or a counter to a running total kept elsewhere (a counter
 * never goes down: a smaller value is ignored, so a total read from stats
 * that were reset cannot make the exposition invalid). Unknown ids and
 * histograms are ignored. Thread safe. */
void fsgd_prom_set(fsgd_prom_t *r, int id, double v);
/* Adds d (>= 0 for counters; a negative d is ignored there). Thread safe. */
void fsgd_prom_inc(fsgd_prom_t *r, int id, double d);
/* Counts one observation in a histogram series. NaN is ignored. Thread safe. */
void fsgd_prom_observe(fsgd_prom_t *r, int id, double v);
/* Renders every family in the order they were first added, as the text
 * exposition format: "# HELP", "# TYPE", then one line per series (a
 * histogram: cumulative _bucket lines with le, +Inf last, then _sum and
 * _count). *out gets a malloc'ed NUL-terminated string the caller frees,
 * *len its length. 0, or FSGD_E_NOMEM. Thread safe (one snapshot). */
int fsgd_prom_render(fsgd_prom_t *r, char **out, size_t *len);

/* The Content-Type of the rendered text. */
#define FSGD_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* --- HTTP endpoint --- */

typedef struct fsgd_prom_server fsgd_prom_server_t;

/* Serves GET /metrics (the registry, rendered per request) on addr:port
 * from libmicrohttpd's own thread; "/" answers with a pointer to /metrics,
 * other paths 404, other methods 405. addr is a numeric IPv4 or IPv6
 * address (NULL or "" = 127.0.0.1, loopback); port 0 picks a free port
 * (fsgd_prom_server_port tells which). The registry must outlive the
 * server. NULL with err set (FSGD_E_ARG bad address, FSGD_E_IO when the
 * port cannot be bound, FSGD_E_NOT_BUILT without libmicrohttpd). */
fsgd_prom_server_t *fsgd_prom_server_start(fsgd_prom_t *r, const char *addr, int port, char *err, size_t errsz);
/* The port the server listens on. */
int fsgd_prom_server_port(const fsgd_prom_server_t *s);
/* Stops the server (waits for a request in progress); NULL is a no-op. */
void fsgd_prom_server_stop(fsgd_prom_server_t *s);

#endif
