/* GET /metrics over HTTP with libmicrohttpd (prom.h): one internal
 * polling thread; each request renders the registry afresh under its lock.
 * libmicrohttpd's own error log stays off: a library does not print. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fsgd/error.h"
#include "fsgd/prom.h"

struct fsgd_prom_server {
    struct MHD_Daemon *d;
    fsgd_prom_t *reg;
    int port;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len,
                             enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result r = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
    fsgd_prom_server_t *s = cls;
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)req_cls;
    static const char text[] = "text/plain; charset=utf-8";
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
        static char msg[] = "only GET /metrics\n";
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, msg, sizeof msg - 1, MHD_RESPMEM_PERSISTENT);
    }
    if (!strcmp(url, "/metrics")) {
        char *body = NULL;
        size_t len = 0;
        if (fsgd_prom_render(s->reg, &body, &len) < 0) {
            static char msg[] = "out of memory\n";
            return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, msg, sizeof msg - 1, MHD_RESPMEM_PERSISTENT);
        }
        return reply(c, MHD_HTTP_OK, FSGD_PROM_CONTENT_TYPE, body, len, MHD_RESPMEM_MUST_FREE);
    }
    if (!strcmp(url, "/")) {
        static char msg[] = "fsgd: metrics at /metrics (Prometheus text format)\n";
        return reply(c, MHD_HTTP_OK, text, msg, sizeof msg - 1, MHD_RESPMEM_PERSISTENT);
    }
    static char msg[] = "not found: metrics are at /metrics\n";
    return reply(c, MHD_HTTP_NOT_FOUND, text, msg, sizeof msg - 1, MHD_RESPMEM_PERSISTENT);
}

fsgd_prom_server_t *fsgd_prom_server_start(fsgd_prom_t *r, const char *addr, int port, char *err, size_t errsz)
{
    if (!addr || !*addr)
        addr = "127.0.0.1";
    if (port < 0 || port > 65535) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "metrics port %d: expected 0..65535", port);
        return NULL;
    }
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *sa;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, addr, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, addr, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "metrics address '%s': expected a numeric IPv4 or IPv6 address", addr);
        return NULL;
    }
    fsgd_prom_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
        return NULL;
    }
    s->reg = r;
    s->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!s->d) {
        fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot serve metrics on %s%s%s:%d (port in use, privileged, or not an address "
                     "of this machine)", strchr(addr, ':') ? "[" : "", addr, strchr(addr, ':') ? "]" : "", port);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info && info->port ? info->port : port;
    return s;
}

int fsgd_prom_server_port(const fsgd_prom_server_t *s) { return s ? s->port : -1; }

void fsgd_prom_server_stop(fsgd_prom_server_t *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    free(s);
}
