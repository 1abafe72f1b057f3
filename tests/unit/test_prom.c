/* The metrics registry: exact exposition text, name and label checks,
 * counter monotonicity, histogram buckets, and /metrics over a real socket
 * from libmicrohttpd's thread. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/prom.h"
#include "testlib.h"
#include "observe_testing.h"

static void test_render_exact(void)
{
    char err[256];
    fsgd_prom_t *r = fsgd_prom_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    const char *up[] = {"direction", "up", "strategy", "fastsgd", NULL};
    const char *down[] = {"direction", "down", "strategy", "fastsgd", NULL};
    int steps = fsgd_prom_add(r, FSGD_PROM_COUNTER, "fsgd_steps_total", "Steps applied.", NULL, err, sizeof err);
    int bu = fsgd_prom_add(r, FSGD_PROM_COUNTER, "fsgd_wire_bytes_total", "Bytes on the wire.", up, err, sizeof err);
    int loss = fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_train_loss", "Loss\\mean\nof a step.", NULL, err, sizeof err);
    int bd = fsgd_prom_add(r, FSGD_PROM_COUNTER, "fsgd_wire_bytes_total", "ignored", down, err, sizeof err);
    double b[] = {0.001, 0.01, 0.1};
    int h = fsgd_prom_add_histogram(r, "fsgd_step_seconds", "Step time.", NULL, b, 3, err, sizeof err);
    CU_ASSERT(steps >= 0 && bu >= 0 && loss >= 0 && bd >= 0 && h >= 0);
    fsgd_prom_set(r, steps, 12);
    fsgd_prom_inc(r, bu, 1000);
    fsgd_prom_inc(r, bu, 24);
    fsgd_prom_set(r, bd, 4096);
    fsgd_prom_set(r, loss, 0.25);
    fsgd_prom_observe(r, h, 0.0005);
    fsgd_prom_observe(r, h, 0.001); /* le is inclusive */
    fsgd_prom_observe(r, h, 0.05);
    fsgd_prom_observe(r, h, 3);
    fsgd_prom_observe(r, h, NAN); /* ignored */
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(fsgd_prom_render(r, &text, &len), 0);
    const char *want = "# HELP fsgd_steps_total Steps applied.\n"
                       "# TYPE fsgd_steps_total counter\n"
                       "fsgd_steps_total 12\n"
                       "# HELP fsgd_wire_bytes_total Bytes on the wire.\n"
                       "# TYPE fsgd_wire_bytes_total counter\n"
                       "fsgd_wire_bytes_total{direction=\"up\",strategy=\"fastsgd\"} 1024\n"
                       "fsgd_wire_bytes_total{direction=\"down\",strategy=\"fastsgd\"} 4096\n"
                       "# HELP fsgd_train_loss Loss\\\\mean\\nof a step.\n"
                       "# TYPE fsgd_train_loss gauge\n"
                       "fsgd_train_loss 0.25\n"
                       "# HELP fsgd_step_seconds Step time.\n"
                       "# TYPE fsgd_step_seconds histogram\n"
                       "fsgd_step_seconds_bucket{le=\"0.001\"} 2\n"
                       "fsgd_step_seconds_bucket{le=\"0.01\"} 2\n"
                       "fsgd_step_seconds_bucket{le=\"0.1\"} 3\n"
                       "fsgd_step_seconds_bucket{le=\"+Inf\"} 4\n"
                       "fsgd_step_seconds_sum 3.0515\n"
                       "fsgd_step_seconds_count 4\n";
    CU_ASSERT_STRING_EQUAL(text, want);
    CU_ASSERT_EQUAL(len, strlen(want));
    if (strcmp(text, want))
        printf("\n--- got ---\n%s--- want ---\n%s", text, want);
    free(text);
    fsgd_prom_destroy(r);
}

static void test_values_and_escapes(void)
{
    char err[256];
    fsgd_prom_t *r = fsgd_prom_new();
    const char *lab[] = {"spec", "a\"b\\c\nd", NULL};
    int g = fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_g", "", lab, err, sizeof err);
    int c = fsgd_prom_add(r, FSGD_PROM_COUNTER, "fsgd_c_total", "", NULL, err, sizeof err);
    CU_ASSERT_FATAL(g >= 0 && c >= 0);
    char *t;
    size_t n;
    const double vals[] = {NAN, INFINITY, -INFINITY, 0.1, -2.5, 1e300, 123456789012.0};
    const char *want[] = {"NaN", "+Inf", "-Inf", "0.1", "-2.5", "1e+300", "123456789012"};
    for (int i = 0; i < 7; i++) {
        fsgd_prom_set(r, g, vals[i]);
        CU_ASSERT_EQUAL_FATAL(fsgd_prom_render(r, &t, &n), 0);
        char line[128];
        snprintf(line, sizeof line, "fsgd_g{spec=\"a\\\"b\\\\c\\nd\"} %s\n", want[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(t, line));
        free(t);
    }
    /* a counter set from a total that went back keeps its value */
    fsgd_prom_set(r, c, 10);
    fsgd_prom_set(r, c, 7);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_prom_get(r, c), 10, 0);
    fsgd_prom_inc(r, c, -3);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_prom_get(r, c), 10, 0);
    fsgd_prom_inc(r, c, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_prom_get(r, c), 10.5, 0);
    /* a gauge goes both ways */
    fsgd_prom_set(r, g, 5);
    fsgd_prom_inc(r, g, -7);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_prom_get(r, g), -2, 0);
    CU_ASSERT(isnan(fsgd_prom_get(r, 99)));
    fsgd_prom_set(r, 99, 1); /* unknown id: ignored */
    fsgd_prom_destroy(r);
    fsgd_prom_destroy(NULL);
}

static void test_bad_names(void)
{
    char err[256] = "";
    fsgd_prom_t *r = fsgd_prom_new();
    double b[] = {1, 2};
    double bad_b[] = {2, 1};
    const char *le[] = {"le", "1", NULL};
    const char *dunder[] = {"__x", "1", NULL};
    const char *twice[] = {"a", "1", "a", "2", NULL};
    const char *novalue[] = {"a", NULL};
    const char *digit[] = {"1a", "x", NULL};
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_COUNTER, "fsgd_steps", "", NULL, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "_total"));
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_x_total", "", NULL, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "9fsgd", "", NULL, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd-x", "", NULL, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "", "", NULL, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_x", "", dunder, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_x", "", twice, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_x", "", novalue, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_x", "", digit, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add_histogram(r, "fsgd_h", "", le, b, 2, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add_histogram(r, "fsgd_h", "", NULL, bad_b, 2, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add_histogram(r, "fsgd_h", "", NULL, b, 0, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_HISTOGRAM, "fsgd_h", "", NULL, err, sizeof err), FSGD_E_ARG);
    /* le is an ordinary label outside histograms; a gauge family stays a gauge */
    CU_ASSERT(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_x", "", le, err, sizeof err) >= 0);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_x", "", le, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_COUNTER, "fsgd_x", "", NULL, err, sizeof err), FSGD_E_ARG);
    /* a histogram's generated names are taken */
    CU_ASSERT(fsgd_prom_add_histogram(r, "fsgd_h", "", NULL, b, 2, err, sizeof err) >= 0);
    CU_ASSERT_EQUAL(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_h_count", "", NULL, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT(fsgd_prom_add(r, FSGD_PROM_GAUGE, "fsgd_y_sum", "", NULL, err, sizeof err) >= 0);
    CU_ASSERT_EQUAL(fsgd_prom_add_histogram(r, "fsgd_y", "", NULL, b, 2, err, sizeof err), FSGD_E_ARG);
    fsgd_prom_destroy(r);
}

/* Three writer threads while this one renders: every snapshot is whole
 * (a histogram's _count equals its +Inf bucket, buckets are cumulative)
 * and the counter never goes back; no update is lost. */
typedef struct {
    fsgd_prom_t *r;
    int c, h;
} thr_t;

static void *writer(void *p)
{
    thr_t *t = p;
    for (int i = 0; i < 20000; i++) {
        fsgd_prom_inc(t->r, t->c, 1);
        fsgd_prom_observe(t->r, t->h, (i % 7) * 0.01);
    }
    return NULL;
}

static unsigned long long field(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void test_threads(void)
{
    char err[256];
    fsgd_prom_t *r = fsgd_prom_new();
    double b[] = {0.005, 0.02};
    thr_t t = {r, fsgd_prom_add(r, FSGD_PROM_COUNTER, "fsgd_n_total", "", NULL, err, sizeof err),
               fsgd_prom_add_histogram(r, "fsgd_h_seconds", "", NULL, b, 2, err, sizeof err)};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, writer, &t);
    unsigned long long last = 0;
    for (int k = 0; k < 200; k++) {
        char *text;
        size_t n;
        CU_ASSERT_EQUAL_FATAL(fsgd_prom_render(r, &text, &n), 0);
        unsigned long long c = field(text, "fsgd_n_total ");
        CU_ASSERT(c >= last);
        last = c;
        CU_ASSERT_EQUAL(field(text, "fsgd_h_seconds_bucket{le=\"+Inf\"} "), field(text, "fsgd_h_seconds_count "));
        CU_ASSERT(field(text, "fsgd_h_seconds_bucket{le=\"0.005\"} ") <=
                  field(text, "fsgd_h_seconds_bucket{le=\"0.02\"} "));
        free(text);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_prom_get(r, t.c), 60000, 0);
    fsgd_prom_destroy(r);
}

/* One HTTP/1.0 request over a TCP socket; returns the whole response. */
static char *http_get(int port, const char *method, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: localhost\r\n\r\n", method, path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t k;
    while (buf && (k = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)k;
    close(fd);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static void test_http(void)
{
    char err[256];
    fsgd_prom_t *r = fsgd_prom_new();
    int c = fsgd_prom_add(r, FSGD_PROM_COUNTER, "fsgd_steps_total", "Steps.", NULL, err, sizeof err);
    fsgd_prom_server_t *s = fsgd_prom_server_start(r, NULL, 0, err, sizeof err);
    if (!s) {
        /* a sandbox without loopback sockets */
        printf("(%s) ", err);
        fsgd_test_skip("cannot listen on 127.0.0.1");
        fsgd_prom_destroy(r);
        return;
    }
    int port = fsgd_prom_server_port(s);
    CU_ASSERT(port > 0);
    fsgd_prom_set(r, c, 41);
    char *resp = http_get(port, "GET", "/metrics");
    CU_ASSERT_PTR_NOT_NULL_FATAL(resp);
    CU_ASSERT(!strncmp(resp, "HTTP/1.", 7) && strstr(resp, " 200 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "text/plain; version=0.0.4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "\r\n\r\n# HELP fsgd_steps_total Steps.\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(resp, "\nfsgd_steps_total 41\n"));
    free(resp);
    fsgd_prom_inc(r, c, 1);
    resp = http_get(port, "GET", "/metrics");
    CU_ASSERT(resp && strstr(resp, "\nfsgd_steps_total 42\n"));
    free(resp);
    resp = http_get(port, "GET", "/nope");
    CU_ASSERT(resp && strstr(resp, " 404 "));
    free(resp);
    resp = http_get(port, "POST", "/metrics");
    CU_ASSERT(resp && strstr(resp, " 405 "));
    free(resp);
    /* the port is taken now */
    fsgd_prom_server_t *s2 = fsgd_prom_server_start(r, "127.0.0.1", port, err, sizeof err);
    CU_ASSERT_PTR_NULL(s2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot serve metrics"));
    fsgd_prom_server_stop(s2);
    CU_ASSERT_PTR_NULL(fsgd_prom_server_start(r, "localhost", 0, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "numeric"));
    CU_ASSERT_PTR_NULL(fsgd_prom_server_start(r, NULL, 70000, err, sizeof err));
    fsgd_prom_server_stop(s);
    fsgd_prom_server_stop(NULL);
    /* stopped: nobody answers */
    resp = http_get(port, "GET", "/metrics");
    CU_ASSERT_PTR_NULL(resp);
    free(resp);
    fsgd_prom_destroy(r);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {{"render_exact", test_render_exact},
                                             {"values_and_escapes", test_values_and_escapes},
                                             {"bad_names", test_bad_names},
                                             {"threads", test_threads},
                                             {"http", test_http},
                                             {NULL, NULL}};
    fsgd_test_suite("prom", cases);
}
