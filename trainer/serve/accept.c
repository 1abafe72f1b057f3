/* The listening socket and the thread that accepts from it (serve_internal.h).
 *
 * Why not libmicrohttpd's own accepting: in its thread pool every worker
 * polls the one listening socket and whichever wakes first accepts up to 11
 * connections in a row, so the connections a client opens together often
 * land on one worker while the others idle (wrk -c16 on 2 workers: all 16 on
 * one in 2 of 6 runs, 2026-11-29): half the cores, queues twice as long.
 * Here one thread accepts and hands each connection to the daemon
 * (MHD_add_connection), which gives it to the worker its socket number
 * picks, the next one when that one is full: sockets opened together have
 * consecutive numbers and spread evenly. It accepts nothing while
 * --max-conns connections are open, so those over the limit wait in the
 * listen queue, as before. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "serve_internal.h"

int serve_accept_listen(fsgd_serve_t *s, const struct sockaddr *sa, socklen_t salen, char *err, size_t errsz)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && sa->sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (fd < 0 || bind(fd, sa, salen) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return fsgd_err_fmt(err, errsz, FSGD_E_IO,
                            "serve: cannot listen on %s%s%s:%d: %s (port in use, privileged, or not an address of "
                            "this machine)",
                            strchr(s->addr, ':') ? "[" : "", s->addr, strchr(s->addr, ':') ? "]" : "", s->conf.port,
                            strerror(e));
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    s->port = s->conf.port;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    s->listen_fd = fd;
    if ((s->accept_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "serve: eventfd: %s", strerror(errno));
    return 0;
}

static void wake(fsgd_serve_t *s)
{
    uint64_t one = 1;
    ssize_t n = write(s->accept_wake_fd, &one, sizeof one);
    (void)n; /* EAGAIN: the counter is already non-zero, the thread wakes anyway */
}

void serve_accept_notify(void *cls, struct MHD_Connection *c, void **socket_ctx, enum MHD_ConnectionNotificationCode code)
{
    fsgd_serve_t *s = cls;
    (void)c;
    (void)socket_ctx;
    /* The acceptor counted the connection when it handed it over; at the
     * limit it waits for this. */
    if (code == MHD_CONNECTION_NOTIFY_CLOSED && atomic_fetch_sub(&s->open_conns, 1) >= (int)s->conf.max_conns)
        wake(s);
}

static void *acceptor_main(void *arg)
{
    fsgd_serve_t *s = arg;
    while (!atomic_load(&s->accept_stop)) {
        int room = atomic_load(&s->open_conns) < (int)s->conf.max_conns;
        struct pollfd p[2] = {{.fd = s->accept_wake_fd, .events = POLLIN}, {.fd = room ? s->listen_fd : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno != EINTR)
                nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
            continue;
        }
        if (p[0].revents & POLLIN) {
            uint64_t x;
            ssize_t n = read(s->accept_wake_fd, &x, sizeof x);
            (void)n;
        }
        if (!(p[1].revents & POLLIN))
            continue;
        struct sockaddr_storage a;
        socklen_t alen = sizeof a;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&a, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors (EMFILE): the connection waits in the queue. */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
            continue;
        }
        atomic_fetch_add(&s->open_conns, 1);
        /* MHD_NO: the daemon closed the socket (out of memory). */
        if (MHD_add_connection(s->daemon, fd, (struct sockaddr *)&a, alen) != MHD_YES)
            atomic_fetch_sub(&s->open_conns, 1);
    }
    return NULL;
}

int serve_accept_start(fsgd_serve_t *s, char *err, size_t errsz)
{
    if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "serve: cannot start the accepting thread");
    s->acceptor_started = 1;
    return 0;
}

void serve_accept_stop(fsgd_serve_t *s)
{
    if (s->acceptor_started) {
        atomic_store(&s->accept_stop, 1);
        wake(s);
        pthread_join(s->acceptor, NULL);
        s->acceptor_started = 0;
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
}
