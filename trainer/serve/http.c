/* fsgd serve's requests (libmicrohttpd, a pool of conf.threads threads,
 * each answering its own connections): routing, the body, scoring and the
 * answers. libmicrohttpd's own error log stays off: a library does not print. */
#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "fsgd/clock.h"
#include "fsgd/error.h"
#include "serve_rows.h"
#include "serve_internal.h"

static const char TEXT[] = "text/plain; charset=utf-8";
static const char JSON[] = "application/json";

/* One request's state, from its headers to its completion. */
typedef struct req {
    char *body;
    size_t len, cap;
    int too_large;   /* the body passed conf.max_body: the rest is discarded, the answer is 413 */
    size_t dropped;  /* bytes discarded since */
    double t0;       /* CLOCK_MONOTONIC seconds at the headers */
} req_t;

/* Queues an answer; body is freed here when mode says MUST_FREE. */
static enum MHD_Result reply(fsgd_serve_t *s, struct MHD_Connection *c, unsigned status, const char *type,
                             char *body, size_t len, enum MHD_ResponseMemoryMode mode, const serve_slot_t *sl,
                             const serve_version_t *v)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (sl && v) {
        char num[32];
        snprintf(num, sizeof num, "%llu", (unsigned long long)v->number);
        MHD_add_response_header(resp, "X-Fsgd-Model", sl->name);
        MHD_add_response_header(resp, "X-Fsgd-Model-Version", num);
    }
    if (atomic_load(&s->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result r = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* An error answer: "what\n" as text, counted by kind. */
static enum MHD_Result reply_error(fsgd_serve_t *s, struct MHD_Connection *c, unsigned status, int kind,
                                   const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static enum MHD_Result reply_error(fsgd_serve_t *s, struct MHD_Connection *c, unsigned status, int kind,
                                   const char *fmt, ...)
{
    fsgd_prom_inc(s->prom, s->m_errors[kind], 1);
    char *msg = malloc(1024);
    if (!msg)
        return MHD_NO;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, 1023, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < 1022 ? (size_t)n : 1022;
    msg[len++] = '\n';
    msg[len] = 0;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, msg, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(msg);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, TEXT);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, !strncmp(msg, "POST", 4) ? "POST" : "GET, HEAD");
    if (status == MHD_HTTP_CONTENT_TOO_LARGE || atomic_load(&s->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result r = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* The slot a /score or /model path names: "" is the only model, or the one
 * named "default". */
static serve_slot_t *slot_of(const fsgd_serve_t *s, const char *name)
{
    if (*name)
        return serve_slots_find(s->slots, s->n_slots, name, strlen(name));
    if (s->n_slots == 1)
        return s->slots[0];
    return serve_slots_find(s->slots, s->n_slots, "default", 7);
}

static void model_names(const fsgd_serve_t *s, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < s->n_slots && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? ", " : "", s->slots[i]->name);
}

/* σ(s) written as fsgd predict --proba writes it (same expression, same bits). */
static double proba(double s)
{
    return s >= 0 ? 1 / (1 + exp(-s)) : exp(s) / (1 + exp(s));
}

/* Room for need more bytes in a growing buffer. */
static int reserve(char **buf, size_t len, size_t *cap, size_t need)
{
    if (*cap - len >= need)
        return 0;
    size_t nc = *cap * 2 + need;
    char *b = realloc(*buf, nc);
    if (!b)
        return -1;
    *buf = b;
    *cap = nc;
    return 0;
}

/* Appends "%.17g" of x and a separator to a growing buffer. */
static int put_score(char **buf, size_t *len, size_t *cap, double x, const char *sep)
{
    if (reserve(buf, *len, cap, 40) < 0)
        return -1;
    if (isfinite(x))
        *len += (size_t)snprintf(*buf + *len, *cap - *len, "%.17g%s", x, sep);
    else /* an overflowing margin: JSON has no inf */
        *len += (size_t)snprintf(*buf + *len, *cap - *len, "%s%s", x > 0 ? "1e999" : x < 0 ? "-1e999" : "0", sep);
    return 0;
}

/* The answer to rows scored by v: one score a line (a VW row's tag after
 * its score, as fsgd predict writes it), or JSON. NULL when out of memory. */
static char *format_scores(const char *name, const serve_version_t *v, const fsgd_csr_t *rows,
                           const fsgd_vw_extra_t *tags, fsgd_serve_body_t kind, int want_proba, size_t *len_out)
{
    size_t cap = 160 + rows->n_rows * 26, len = 0; /* the JSON head fits in 160 */
    char *buf = malloc(cap);
    int bad = !buf;
    if (!bad && kind == FSGD_SERVE_BODY_JSON)
        len = (size_t)snprintf(buf, cap, "{\"model\":\"%s\",\"version\":%llu,\"scores\":[", name,
                               (unsigned long long)v->number);
    int with_tags = kind == FSGD_SERVE_BODY_TEXT && tags->n == rows->n_rows && tags->tags_len > 0;
    for (size_t i = 0; i < rows->n_rows && !bad; i++) {
        uint64_t lo = rows->row_ptr[i];
        /* rows->val is never NULL here: the parsers fill values. */
        double x = fsgd_model_margin(&v->model, rows->col + lo, rows->val + lo, (size_t)(rows->row_ptr[i + 1] - lo));
        uint64_t t0 = with_tags && i ? tags->tag_end[i - 1] : 0, t1 = with_tags ? tags->tag_end[i] : 0;
        const char *sep = kind == FSGD_SERVE_BODY_JSON ? (i + 1 < rows->n_rows ? "," : "") : t1 > t0 ? " " : "\n";
        bad = put_score(&buf, &len, &cap, want_proba ? proba(x) : x, sep) < 0;
        if (!bad && t1 > t0) {
            bad = reserve(&buf, len, &cap, (size_t)(t1 - t0) + 1) < 0;
            if (!bad) {
                memcpy(buf + len, tags->tags + t0, (size_t)(t1 - t0));
                len += (size_t)(t1 - t0);
                buf[len++] = '\n';
            }
        }
    }
    if (!bad && kind == FSGD_SERVE_BODY_JSON) {
        bad = reserve(&buf, len, &cap, 4) < 0;
        if (!bad)
            len += (size_t)snprintf(buf + len, cap - len, "]}\n");
    }
    if (bad) {
        free(buf);
        return NULL;
    }
    *len_out = len;
    return buf;
}

static enum MHD_Result score(fsgd_serve_t *s, struct MHD_Connection *c, serve_slot_t *sl, req_t *r)
{
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && !strncasecmp(ct, "multipart/", 10))
        return reply_error(s, c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, SERVE_ERR_MEDIA_TYPE,
                           "unsupported content type '%s': send rows as text (LIBSVM or the model's delimited rows) "
                           "or application/json", ct);
    fsgd_serve_body_t kind = ct && !strncasecmp(ct, JSON, sizeof JSON - 1) ? FSGD_SERVE_BODY_JSON : FSGD_SERVE_BODY_TEXT;
    const char *out = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "output");
    if (out && strcmp(out, "margin") && strcmp(out, "proba"))
        return reply_error(s, c, MHD_HTTP_BAD_REQUEST, SERVE_ERR_BAD_REQUEST,
                           "output=%s: expected output=margin or output=proba", out);
    serve_version_t *v = serve_slot_acquire(sl);
    const fsgd_model_t *m = &v->model;
    int want_proba = m->kind == FSGD_LOSS_LOGISTIC && !(out && !strcmp(out, "margin"));
    enum MHD_Result res;
    if (out && !strcmp(out, "proba") && m->kind != FSGD_LOSS_LOGISTIC) {
        res = reply_error(s, c, MHD_HTTP_BAD_REQUEST, SERVE_ERR_BAD_REQUEST,
                          "output=proba: model %s is %s, not logistic: its scores are margins", sl->name,
                          fsgd_loss_name(m->kind));
        serve_version_release(v);
        return res;
    }
    fsgd_csr_t rows = {0};
    fsgd_vw_extra_t tags = {0};
    char err[1024];
    long got = fsgd_serve_rows_parse(r->body ? r->body : "", r->len, kind, &v->fmt, &rows, &tags, err, sizeof err);
    if (got < 0) {
        res = got == FSGD_E_NOMEM
                  ? reply_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, SERVE_ERR_INTERNAL, "%s", err)
                  : reply_error(s, c, MHD_HTTP_BAD_REQUEST, SERVE_ERR_BAD_REQUEST, "malformed request: %s", err);
        fsgd_csr_free(&rows);
        fsgd_vw_extra_free(&tags);
        serve_version_release(v);
        return res;
    }
    size_t len = 0;
    char *buf = format_scores(sl->name, v, &rows, &tags, kind, want_proba, &len);
    int bad = !buf;
    size_t n_rows = rows.n_rows;
    fsgd_csr_free(&rows);
    fsgd_vw_extra_free(&tags);
    if (bad) {
        free(buf);
        serve_version_release(v);
        return reply_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, SERVE_ERR_INTERNAL, "out of memory for %zu scores",
                           n_rows);
    }
    res = reply(s, c, MHD_HTTP_OK, kind == FSGD_SERVE_BODY_JSON ? JSON : TEXT, buf, len, MHD_RESPMEM_MUST_FREE, sl, v);
    serve_version_release(v);
    /* Plain atomics on the hot path; /metrics copies them into the registry. */
    atomic_fetch_add_explicit(&sl->requests, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&sl->rows, n_rows, memory_order_relaxed);
    fsgd_prom_observe(s->prom, sl->m_latency, fsgd_clock_s() - r->t0);
    return res;
}

/* A JSON number, or null for NAN (JSON has no NaN). */
static json_t *json_real_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

/* What training recorded about the version (rows trained, held-out
 * metrics) into o; null and a note saying why when unknown. */
static void add_metrics_json(json_t *o, const serve_metrics_t *mt)
{
    json_object_set_new(o, "rows_trained", mt->known ? json_integer((json_int_t)mt->rows) : json_null());
    json_t *m = json_null();
    if (mt->known)
        m = json_pack("{s:I, s:o, s:o}", "test_rows", (json_int_t)mt->test_rows, "test_auc",
                      json_real_or_null(mt->test_auc), "test_logloss", json_real_or_null(mt->test_logloss));
    json_object_set_new(o, "metrics", m ? m : json_null());
    json_object_set_new(o, "metrics_note", mt->note[0] ? json_string(mt->note) : json_null());
}

/* One model's description for GET /model. */
static json_t *model_json(const fsgd_serve_t *s, serve_slot_t *sl)
{
    serve_version_t *v = serve_slot_acquire(sl);
    const fsgd_model_t *m = &v->model;
    pthread_mutex_lock(&sl->lock);
    json_t *refusal = sl->last_refusal[0] ? json_string(sl->last_refusal) : json_null();
    pthread_mutex_unlock(&sl->lock);
    char source[4400];
    if (sl->from_topic)
        snprintf(source, sizeof source, "topic %s.model on %s", sl->topic.job, sl->topic.brokers);
    else
        snprintf(source, sizeof source, "file %s", sl->file.path);
    json_t *o = json_pack("{s:s, s:I, s:s, s:f, s:f, s:I, s:s, s:I, s:b, s:f, s:s, s:I, s:s, s:I, s:I, s:I, s:o}",
                          "name", sl->name, "version", (json_int_t)v->number, "source", source, "loaded_at",
                          v->loaded_at, "age_seconds", serve_now() - v->loaded_at, "step", (json_int_t)v->step,
                          "loss", fsgd_loss_name(m->kind), "dim", (json_int_t)m->dim, "has_bias", m->has_bias,
                          "bias", (double)m->bias, "hashing", m->input, "nnz", (json_int_t)fsgd_model_nnz(m),
                          "scores", m->kind == FSGD_LOSS_LOGISTIC ? "probability (output=margin for margins)" : "margin",
                          "reloads", (json_int_t)atomic_load(&sl->reloads), "refused",
                          (json_int_t)atomic_load(&sl->refused), "polls", (json_int_t)atomic_load(&sl->polls),
                          "last_refusal", refusal);
    if (o) {
        add_metrics_json(o, &v->metrics);
        json_object_set_new(o, "source_reads", json_integer((json_int_t)atomic_load(&sl->reads)));
        if (sl->from_topic)
            json_object_set_new(o, "delta_reads", json_integer((json_int_t)atomic_load(&sl->delta_reads)));
    }
    serve_version_release(v);
    (void)s;
    return o;
}

static enum MHD_Result send_json(fsgd_serve_t *s, struct MHD_Connection *c, json_t *o)
{
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    if (!text)
        return reply_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, SERVE_ERR_INTERNAL, "out of memory");
    size_t n = strlen(text);
    char *body = realloc(text, n + 2);
    if (!body) {
        free(text);
        return reply_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, SERVE_ERR_INTERNAL, "out of memory");
    }
    body[n++] = '\n';
    return reply(s, c, MHD_HTTP_OK, JSON, body, n, MHD_RESPMEM_MUST_FREE, NULL, NULL);
}

static enum MHD_Result get_model(fsgd_serve_t *s, struct MHD_Connection *c, const char *name)
{
    if (*name) {
        serve_slot_t *sl = slot_of(s, name);
        if (!sl) {
            char names[1024];
            model_names(s, names, sizeof names);
            return reply_error(s, c, MHD_HTTP_NOT_FOUND, SERVE_ERR_NOT_FOUND, "no model '%s' (models: %s)", name,
                               names);
        }
        return send_json(s, c, model_json(s, sl));
    }
    json_t *all = json_array();
    for (int i = 0; all && i < s->n_slots; i++)
        json_array_append_new(all, model_json(s, s->slots[i]));
    return send_json(s, c, json_pack("{s:o}", "models", all));
}

static enum MHD_Result get_metrics(fsgd_serve_t *s, struct MHD_Connection *c)
{
    double now = serve_now();
    for (int i = 0; i < s->n_slots; i++) {
        serve_slot_t *sl = s->slots[i];
        serve_version_t *v = serve_slot_acquire(sl);
        fsgd_prom_set(s->prom, sl->m_age, now - v->loaded_at);
        serve_version_release(v);
        fsgd_prom_set(s->prom, sl->m_requests, (double)atomic_load(&sl->requests));
        fsgd_prom_set(s->prom, sl->m_rows, (double)atomic_load(&sl->rows));
    }
    /* This request counts itself. */
    fsgd_prom_set(s->prom, s->m_in_flight, (double)atomic_load(&s->in_flight));
    char *body = NULL;
    size_t len = 0;
    if (fsgd_prom_render(s->prom, &body, &len) < 0)
        return reply_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, SERVE_ERR_INTERNAL, "out of memory");
    return reply(s, c, MHD_HTTP_OK, FSGD_PROM_CONTENT_TYPE, body, len, MHD_RESPMEM_MUST_FREE, NULL, NULL);
}

/* The whole request is in: route it. */
static enum MHD_Result dispatch(fsgd_serve_t *s, struct MHD_Connection *c, const char *url, const char *method,
                                req_t *r)
{
    int is_get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    int is_post = !strcmp(method, MHD_HTTP_METHOD_POST);
    if (!strcmp(url, "/score") || !strncmp(url, "/score/", 7)) {
        if (!is_post)
            return reply_error(s, c, MHD_HTTP_METHOD_NOT_ALLOWED, SERVE_ERR_METHOD, "POST rows to %s", url);
        if (r->too_large)
            return reply_error(s, c, MHD_HTTP_CONTENT_TOO_LARGE, SERVE_ERR_TOO_LARGE,
                               "request body over %zu bytes (fsgd serve --max-body)", s->conf.max_body);
        const char *name = url[6] ? url + 7 : "";
        serve_slot_t *sl = slot_of(s, name);
        if (!sl) {
            char names[1024];
            model_names(s, names, sizeof names);
            return reply_error(s, c, MHD_HTTP_NOT_FOUND, SERVE_ERR_NOT_FOUND, "no model '%s': POST to /score/NAME, "
                               "NAME one of: %s", *name ? name : "default", names);
        }
        return score(s, c, sl, r);
    }
    int known = !strcmp(url, "/healthz") || !strcmp(url, "/metrics") || !strcmp(url, "/model") ||
                !strncmp(url, "/model/", 7) || !strcmp(url, "/");
    if (!known)
        return reply_error(s, c, MHD_HTTP_NOT_FOUND, SERVE_ERR_NOT_FOUND,
                           "not found: %s (POST /score[/NAME]; GET /model[/NAME], /healthz, /metrics)", url);
    if (!is_get)
        return reply_error(s, c, MHD_HTTP_METHOD_NOT_ALLOWED, SERVE_ERR_METHOD, "GET %s", url);
    if (!strcmp(url, "/healthz")) {
        static char ok[] = "ok\n", draining[] = "draining\n";
        if (atomic_load(&s->draining))
            return reply(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, TEXT, draining, sizeof draining - 1,
                         MHD_RESPMEM_PERSISTENT, NULL, NULL);
        return reply(s, c, MHD_HTTP_OK, TEXT, ok, sizeof ok - 1, MHD_RESPMEM_PERSISTENT, NULL, NULL);
    }
    if (!strcmp(url, "/metrics"))
        return get_metrics(s, c);
    if (!strcmp(url, "/")) {
        static char msg[] = "fsgd serve: POST /score[/NAME]; GET /model[/NAME], /healthz, /metrics\n";
        return reply(s, c, MHD_HTTP_OK, TEXT, msg, sizeof msg - 1, MHD_RESPMEM_PERSISTENT, NULL, NULL);
    }
    return get_model(s, c, url[6] ? url + 7 : "");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
    fsgd_serve_t *s = cls;
    (void)version;
    req_t *r = *req_cls;
    if (!r) {
        /* The headers: the request starts; its body (if any) comes next. */
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        r->t0 = fsgd_clock_s();
        *req_cls = r;
        atomic_fetch_add(&s->in_flight, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->conf.max_body && !strcmp(method, MHD_HTTP_METHOD_POST) &&
            (!strcmp(url, "/score") || !strncmp(url, "/score/", 7)))
            /* Said up front: answer before reading it (the connection then closes). */
            return reply_error(s, c, MHD_HTTP_CONTENT_TOO_LARGE, SERVE_ERR_TOO_LARGE,
                               "request body of %s bytes over %zu (fsgd serve --max-body)", cl, s->conf.max_body);
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        /* A body still arriving --timeout seconds after its headers: the
         * daemon's timeout closes a silent connection only, and a client
         * that sends a byte now and then would hold one of --max-conns. */
        if (s->conf.timeout_s && fsgd_clock_s() - r->t0 > (double)s->conf.timeout_s) {
            fsgd_prom_inc(s->prom, s->m_errors[SERVE_ERR_TIMEOUT], 1);
            return MHD_NO;
        }
        if (r->too_large || r->len + n > s->conf.max_body) {
            /* Chunked and too long: the rest is read and dropped so that the
             * client reads its 413 (libmicrohttpd answers only once the body
             * is in); a body that goes on past 4 limits more gets the
             * connection closed instead. */
            r->too_large = 1;
            r->dropped += n;
            if (r->dropped / 4 <= s->conf.max_body)
                return MHD_YES;
            fsgd_prom_inc(s->prom, s->m_errors[SERVE_ERR_TOO_LARGE], 1);
            return MHD_NO;
        }
        if (r->len + n > r->cap) {
            size_t nc = r->cap ? r->cap : 4096;
            while (nc < r->len + n)
                nc *= 2;
            char *b = realloc(r->body, nc);
            if (!b)
                return MHD_NO;
            r->body = b;
            r->cap = nc;
        }
        memcpy(r->body + r->len, upload, n);
        r->len += n;
        return MHD_YES;
    }
    return dispatch(s, c, url, method, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe)
{
    fsgd_serve_t *s = cls;
    (void)c;
    (void)toe;
    req_t *r = *req_cls;
    if (!r)
        return;
    free(r->body);
    free(r);
    *req_cls = NULL;
    atomic_fetch_sub(&s->in_flight, 1);
}

int serve_http_start(fsgd_serve_t *s, char *err, size_t errsz)
{
    const char *addr = s->conf.addr;
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *sa;
    /* No listening socket of the daemon's: accept.c accepts and hands it
     * each connection (ITC: so that a worker takes it at once). */
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    socklen_t salen;
    if (inet_pton(AF_INET, addr, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)s->conf.port);
        sa = (struct sockaddr *)&a4;
        salen = sizeof a4;
    } else if (inet_pton(AF_INET6, addr, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)s->conf.port);
        sa = (struct sockaddr *)&a6;
        salen = sizeof a6;
    } else {
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "serve: address '%s': expected a numeric IPv4 or IPv6 address",
                            addr);
    }
    FSGD_TRY(serve_accept_listen(s, sa, salen, err, errsz));
    unsigned pool = s->conf.threads > 1 ? (unsigned)s->conf.threads : 0;
    /* The acceptor holds --max-conns. The daemon's own limit is only a
     * backstop, with room for connections that told the acceptor they closed
     * before the daemon stopped counting them: the daemon would refuse
     * (reset) a connection handed over in between. */
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_THREAD_POOL_SIZE, pool,
                                 MHD_OPTION_CONNECTION_LIMIT, 2 * s->conf.max_conns, MHD_OPTION_CONNECTION_TIMEOUT,
                                 s->conf.timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, serve_accept_notify, s, MHD_OPTION_END);
    if (!s->daemon)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "serve: cannot start the HTTP daemon's %u thread(s)",
                            pool ? pool : 1);
    FSGD_TRY(serve_accept_start(s, err, errsz));
    return 0;
}
