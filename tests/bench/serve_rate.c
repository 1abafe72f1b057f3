/* serve_rate: an open-loop HTTP/1.1 load at a fixed request rate, for
 * tests/bench/serve.sh (wrk saturates the server, so its latencies are
 * those of a full queue; wrk2, which holds a rate, is not in Debian).
 *
 *   serve_rate --port P --body FILE --rate R --seconds S --conns C [--path /score] [--expect FILE]...
 *              [--trace FILE]
 *
 * Request i is due at start + i/R whatever happened before it: it goes out
 * on the first idle keep-alive connection (waiting in a queue when none is
 * idle), and its latency is measured from when it was due, not from when it
 * was sent, so a server that falls behind shows it (no coordinated
 * omission). One thread, epoll, nanosecond timeouts (epoll_pwait2). Prints
 *   RATE due=N done=N failed=N seconds=S req_s=X p50_ms=X p99_ms=X p99.9_ms=X max_ms=X
 *        versions=N mixed_versions=N unexpected=N
 * failed: answers other than 200, and requests whose connection broke.
 * Each answer's body is hashed under the X-Fsgd-Model-Version it names:
 * versions: how many versions answered; mixed_versions: versions that
 * answered two different bodies to the same request (an answer from more
 * than one version, or a version that changed); unexpected: answers equal
 * to none of the --expect files (each the whole answer of one model file),
 * when some are given. --trace FILE writes a line an answer: when it was
 * due (seconds from the start), its latency (ms) and the version it names.
 * Built by serve.sh with the system compiler; not part of the library. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct conn {
    int fd;
    long req;       /* the request in flight (its index), -1: idle */
    size_t sent;    /* bytes of the request written */
    char *in;       /* the answer so far */
    size_t in_len, in_cap;
} conn_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* FNV-1a, 64 bits: tells bodies apart. */
static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

/* The body hash each version answered (0: none yet), by version number. */
#define MAX_VERSIONS 65536
static uint64_t version_hash[MAX_VERSIONS];
static long n_versions, mixed_versions, unexpected;
static uint64_t expect_hash[16];
static int n_expect;

static long check_answer(const char *head_end, const char *in, size_t head, size_t clen)
{
    long v = 0;
    for (const char *p = in; p && p < head_end; p = memchr(p, '\n', (size_t)(head_end - p)), p = p ? p + 1 : NULL)
        if (!strncasecmp(p, "x-fsgd-model-version:", 21))
            v = strtol(p + 21, NULL, 10);
    uint64_t h = hash_bytes(in + head, clen) | 1; /* never 0 */
    if (v > 0 && v < MAX_VERSIONS) {
        if (!version_hash[v]) {
            version_hash[v] = h;
            n_versions++;
        } else if (version_hash[v] != h && version_hash[v] != 2) {
            version_hash[v] = 2; /* counted once */
            mixed_versions++;
        }
    }
    int known = !n_expect;
    for (int i = 0; i < n_expect && !known; i++)
        known = expect_hash[i] == h;
    unexpected += !known;
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what)
{
    fprintf(stderr, "serve_rate: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int connect_to(int port, int ep, conn_t *c)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    c->req = -1;
    c->in_len = 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        die("epoll_ctl");
    return 0;
}

/* Writes what is left of the request; EPOLLOUT is asked while some is. */
static int send_more(conn_t *c, int ep, const char *req, size_t len)
{
    while (c->sent < len) {
        ssize_t n = send(c->fd, req + c->sent, len - c->sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN)
            break;
        if (n < 0)
            return -1;
        c->sent += (size_t)n;
    }
    struct epoll_event ev = {.events = EPOLLIN | (c->sent < len ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    return 0;
}

/* 1 with *status set when c->in holds a whole answer (headers and
 * Content-Length bytes of body), 0 when more is to come; a whole 200
 * answer is checked (check_answer). */
static int answer_done(conn_t *c, int *status, int *closes, long *version)
{
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head = (size_t)(end - c->in) + 4, clen = 0;
    *status = c->in_len > 12 ? atoi(c->in + 9) : 0;
    *closes = 0;
    for (char *p = c->in; p < end; p = memchr(p, '\n', (size_t)(end - p)) + 1) {
        if (!strncasecmp(p, "content-length:", 15))
            clen = strtoul(p + 15, NULL, 10);
        if (!strncasecmp(p, "connection: close", 17))
            *closes = 1;
        if (!memchr(p, '\n', (size_t)(end - p)))
            break;
    }
    if (c->in_len < head + clen)
        return 0;
    if (*status == 200)
        *version = check_answer(end, c->in, head, clen);
    return 1;
}

int main(int argc, char **argv)
{
    int port = 0, conns = 16;
    double rate = 0, seconds = 0;
    const char *body_path = NULL, *path = "/score";
    FILE *trace = NULL; /* --trace: "due_s latency_ms version" of each answer */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate"))
            rate = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--conns"))
            conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--body"))
            body_path = argv[i + 1];
        else if (!strcmp(argv[i], "--path"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "--trace")) {
            if (!(trace = fopen(argv[i + 1], "w")))
                die(argv[i + 1]);
        } else if (!strcmp(argv[i], "--expect") && n_expect < 16) {
            FILE *e = fopen(argv[i + 1], "rb");
            static char want[1 << 22];
            if (!e)
                die(argv[i + 1]);
            size_t n = fread(want, 1, sizeof want, e);
            fclose(e);
            expect_hash[n_expect++] = hash_bytes(want, n) | 1;
        }
    }
    if (port <= 0 || rate <= 0 || seconds <= 0 || conns <= 0 || !body_path) {
        fprintf(stderr, "usage: serve_rate --port P --body FILE --rate R --seconds S --conns C [--path /score]\n");
        return 2;
    }
    FILE *f = fopen(body_path, "rb");
    if (!f)
        die(body_path);
    static char body[1 << 22];
    size_t blen = fread(body, 1, sizeof body, f);
    fclose(f);
    size_t cap = blen + 512;
    char *req = malloc(cap);
    int hl = snprintf(req, cap,
                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n",
                      path, blen);
    memcpy(req + hl, body, blen);
    size_t rlen = (size_t)hl + blen;

    long total = (long)(rate * seconds);
    double *lat = calloc((size_t)total, sizeof *lat);
    conn_t *cs = calloc((size_t)conns, sizeof *cs);
    int ep = epoll_create1(0);
    if (!lat || !cs || ep < 0)
        die("setup");
    for (int i = 0; i < conns; i++)
        connect_to(port, ep, &cs[i]);
    long due = 0, next = 0, done = 0, failed = 0; /* due: scheduled so far; next: the first not yet sent */
    double start = now_s() + 0.01, deadline = start + seconds + 10;
    struct epoll_event evs[64];
    while (done + failed < total && now_s() < deadline) {
        double t = now_s();
        long d = t < start ? 0 : (long)((t - start) * rate) + 1;
        due = d < total ? d : total;
        /* due requests to idle connections */
        for (int i = 0; i < conns && next < due; i++) {
            conn_t *c = &cs[i];
            if (c->req >= 0)
                continue;
            c->req = next++;
            c->sent = 0;
            c->in_len = 0;
            if (send_more(c, ep, req, rlen) < 0) {
                failed++;
                close(c->fd);
                connect_to(port, ep, c);
            }
        }
        /* wait for answers, or until the next request is due */
        double wake = due < total ? start + (double)due / rate : t + 0.01;
        double w = wake - now_s();
        struct timespec to = {0, 0};
        if (w > 0) {
            to.tv_sec = (time_t)w;
            to.tv_nsec = (long)((w - (double)to.tv_sec) * 1e9);
        }
        int n = epoll_pwait2(ep, evs, 64, &to, NULL);
        if (n < 0 && errno != EINTR)
            die("epoll_pwait2");
        for (int k = 0; k < n; k++) {
            conn_t *c = evs[k].data.ptr;
            if (evs[k].events & EPOLLOUT && c->req >= 0 && send_more(c, ep, req, rlen) < 0)
                goto broken;
            if (!(evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                continue;
            for (;;) {
                if (c->in_cap - c->in_len < 65536) {
                    c->in_cap = c->in_cap * 2 + 65536;
                    c->in = realloc(c->in, c->in_cap);
                    if (!c->in)
                        die("realloc");
                }
                ssize_t got = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
                if (got < 0 && errno == EAGAIN)
                    break;
                if (got <= 0)
                    goto broken;
                c->in_len += (size_t)got;
            }
            int status = 0, closes = 0;
            long version = 0;
            if (c->req >= 0 && answer_done(c, &status, &closes, &version)) {
                double sched = start + (double)c->req / rate;
                if (status == 200) {
                    lat[done] = now_s() - sched;
                    if (trace)
                        fprintf(trace, "%.6f %.3f %ld\n", sched - start, lat[done] * 1e3, version);
                    done++;
                } else {
                    failed++;
                }
                c->req = -1;
                c->in_len = 0;
                if (closes) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    connect_to(port, ep, c);
                }
            }
            continue;
        broken:
            if (c->req >= 0)
                failed++;
            epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            connect_to(port, ep, c);
        }
    }
    double secs = now_s() - start;
    qsort(lat, (size_t)done, sizeof *lat, cmp_double);
#define PCT(p) (done ? lat[(size_t)((double)(done - 1) * (p))] * 1e3 : 0.0)
    printf("RATE due=%ld done=%ld failed=%ld seconds=%.3f req_s=%.0f p50_ms=%.3f p99_ms=%.3f p99.9_ms=%.3f "
           "max_ms=%.3f versions=%ld mixed_versions=%ld unexpected=%ld\n",
           total, done, failed + (total - done - failed), secs, done / (secs > 0 ? secs : 1), PCT(0.5), PCT(0.99),
           PCT(0.999), PCT(1.0), n_versions, mixed_versions, unexpected);
    if (trace)
        fclose(trace);
    return 0;
}
