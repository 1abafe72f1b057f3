/* The in-memory bus (fsgd/bus.h): logs, offsets and watermarks, consumer
 * groups and their deterministic assignment, fault hooks. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/bus.h"
#include "bus_mem.h"
#include "fsgd/error.h"
#include "testlib.h"

static void put(fsgd_bus_client_t *p, const char *topic, int32_t part, const char *text)
{
    char err[256];
    const fsgd_bus_out_t m = {.topic = topic, .partition = part, .key = "k", .val = text, .len = strlen(text),
                              .job = "job", .kind = "ctl"};
    CU_ASSERT_EQUAL(fsgd_bus_produce(p, &m, err, sizeof err), 0);
}

/* The next message's text ("" for none, "!" for an error). */
static const char *next(fsgd_bus_client_t *c, int timeout_ms, int64_t *offset)
{
    static char buf[128];
    fsgd_bus_msg_t *m = fsgd_bus_poll(c, timeout_ms);
    if (!m)
        return "";
    if (m->err) {
        snprintf(buf, sizeof buf, "!");
    } else {
        snprintf(buf, sizeof buf, "%.*s", (int)m->len, (const char *)m->val);
        CU_ASSERT_TRUE(m->lat_ms >= 0);
    }
    if (offset)
        *offset = m->offset;
    fsgd_bus_msg_destroy(m);
    return buf;
}

static void test_logs(void)
{
    fsgd_bus_t *b = fsgd_bus_mem_new();
    char err[256];
    CU_ASSERT_EQUAL(fsgd_bus_mem_topic(b, "t", 2), 0);
    fsgd_bus_client_t *p = fsgd_bus_client_new(b, FSGD_KCLIENT_PRODUCER, err, sizeof err);
    fsgd_bus_client_t *c = fsgd_bus_client_new(b, FSGD_KCLIENT_CONSUMER, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_bus_partitions(c, "t", 0, err, sizeof err), 2);
    CU_ASSERT_TRUE(fsgd_bus_partitions(c, "nope", 0, err, sizeof err) < 0);
    put(p, "t", 0, "a");
    put(p, "t", 0, "b");
    put(p, "t", 1, "c");
    int64_t lo = -1, hi = -1, off = -1;
    CU_ASSERT_EQUAL(fsgd_bus_watermarks(c, "t", 0, &lo, &hi, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(lo, 0);
    CU_ASSERT_EQUAL(hi, 2);
    /* END reads only what comes later; BEGINNING all */
    fsgd_bus_tp_t tp[2] = {{"t", 0, FSGD_BUS_OFFSET_END}, {"t", 1, FSGD_BUS_OFFSET_BEGINNING}};
    CU_ASSERT_EQUAL(fsgd_bus_assign(c, tp, 2, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(next(c, 0, &off), "c");
    CU_ASSERT_STRING_EQUAL(next(c, 10, NULL), "");
    put(p, "t", 0, "d");
    CU_ASSERT_STRING_EQUAL(next(c, 100, &off), "d");
    CU_ASSERT_EQUAL(off, 2);
    /* retention: a position before the log start is an error once, then
     * nothing until the partition is read again */
    fsgd_bus_mem_truncate(b, "t", 0, 2);
    tp[0].offset = 0;
    CU_ASSERT_EQUAL(fsgd_bus_assign(c, tp, 1, err, sizeof err), 0);
    fsgd_bus_msg_t *m = fsgd_bus_poll(c, 0);
    CU_ASSERT_TRUE(m && m->err == FSGD_BUS_LOST && m->offset == 0);
    fsgd_bus_msg_destroy(m);
    CU_ASSERT_STRING_EQUAL(next(c, 0, NULL), "");
    CU_ASSERT_EQUAL(fsgd_bus_restart(c, "t", 0, FSGD_BUS_OFFSET_BEGINNING, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(next(c, 0, &off), "d");
    CU_ASSERT_EQUAL(off, 2);
    const fsgd_bus_range_t r = {.topic = "t", .partition = 0, .start = 0, .end = 3};
    CU_ASSERT_TRUE(fsgd_bus_read_range(c, &r, err, sizeof err) == FSGD_E_LOST);
    fsgd_bus_client_destroy(p);
    fsgd_bus_client_destroy(c);
    fsgd_bus_destroy(b);
}

/* Frames as fsgd_kbus_send writes them: chunks of at most
 * FSGD_KBUS_CHUNK_MAX body bytes that parse and reassemble. */
static int collect(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                   size_t errsz)
{
    fsgd_kasm_t *as = ctx;
    fsgd_kframe_t f;
    if (fsgd_kframe_parse(val, len, &f, NULL, NULL, err, errsz) < 0)
        return -1;
    const uint8_t *body;
    size_t n;
    int r = fsgd_kasm_feed(as, &f, &body, &n, err, errsz);
    if (r == FSGD_KASM_DONE) {
        CU_ASSERT_EQUAL(n, FSGD_KBUS_CHUNK_MAX + 100);
        CU_ASSERT_TRUE(body[0] == 7 && body[n - 1] == 9);
        CU_ASSERT_EQUAL(f.step, 42);
        CU_ASSERT_EQUAL(f.nchunks, 2);
    }
    return r < 0 ? r : 0;
}

static void test_frames(void)
{
    fsgd_bus_t *b = fsgd_bus_mem_new();
    char err[256];
    fsgd_bus_mem_topic(b, "g", 1);
    fsgd_bus_client_t *p = fsgd_bus_client_new(b, FSGD_KCLIENT_PRODUCER, err, sizeof err);
    size_t len = FSGD_KBUS_CHUNK_MAX + 100;
    uint8_t *body = calloc(len, 1);
    body[0] = 7;
    body[len - 1] = 9;
    fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .gen = 3, .sender = 5, .step = 42};
    uint64_t wire = 0;
    const fsgd_bus_out_t out = {.topic = "g", .partition = FSGD_BUS_PARTITION_ANY, .job = "job", .hdr = &h,
                                .val = body, .len = len};
    CU_ASSERT_EQUAL(fsgd_bus_send(p, &out, &wire, err, sizeof err), 0);
    CU_ASSERT_EQUAL(wire, len + 2 * FSGD_KFRAME_OVERHEAD);
    int64_t lo, hi;
    fsgd_bus_watermarks(p, "g", 0, &lo, &hi, 0, err, sizeof err);
    CU_ASSERT_EQUAL(hi, 2);
    fsgd_kasm_t *as = fsgd_kasm_new();
    const fsgd_bus_range_t r = {.topic = "g", .partition = 0, .start = 0, .end = 2, .fn = collect, .ctx = as};
    CU_ASSERT_EQUAL(fsgd_bus_read_range(p, &r, err, sizeof err), 0);
    fsgd_kasm_destroy(as);
    free(body);
    fsgd_bus_client_destroy(p);
    fsgd_bus_destroy(b);
}

typedef struct seen {
    int32_t parts[8];
    int n, assigns, revokes;
} seen_t;

static void on_rebalance(void *opaque, int assigned, const int32_t *parts, int n)
{
    seen_t *s = opaque;
    if (!assigned) {
        s->revokes++;
        s->n = 0;
        return;
    }
    s->assigns++;
    s->n = n;
    memcpy(s->parts, parts, (size_t)n * sizeof *parts);
}

static void test_groups(void)
{
    fsgd_bus_t *b = fsgd_bus_mem_new();
    char err[256];
    fsgd_bus_mem_topic(b, "d", 5);
    fsgd_bus_t *v1 = fsgd_bus_mem_view(b, 1), *v2 = fsgd_bus_mem_view(b, 2);
    seen_t s1 = {0}, s2 = {0};
    fsgd_bus_client_t *g1 = fsgd_bus_group_new(v1, "grp", "d", on_rebalance, &s1, err, sizeof err);
    fsgd_bus_msg_destroy(fsgd_bus_poll(g1, 0));
    CU_ASSERT_EQUAL(s1.n, 5);
    fsgd_bus_client_t *g2 = fsgd_bus_group_new(v2, "grp", "d", on_rebalance, &s2, err, sizeof err);
    fsgd_bus_msg_destroy(fsgd_bus_poll(g1, 0));
    fsgd_bus_msg_destroy(fsgd_bus_poll(g2, 0));
    /* partition p to member p % n in join order */
    CU_ASSERT_EQUAL(s1.n, 3);
    CU_ASSERT_TRUE(s1.parts[0] == 0 && s1.parts[1] == 2 && s1.parts[2] == 4);
    CU_ASSERT_EQUAL(s2.n, 2);
    CU_ASSERT_TRUE(s2.parts[0] == 1 && s2.parts[1] == 3);
    CU_ASSERT_EQUAL(s1.revokes, 2);
    /* a killed member: what it sends is lost, it holds its partitions until
     * its session ends, then they move */
    fsgd_bus_mem_topic(b, "x", 1);
    fsgd_bus_client_t *p2 = fsgd_bus_client_new(v2, FSGD_KCLIENT_PRODUCER, err, sizeof err);
    fsgd_bus_mem_kill(b, 2, 150);
    put(p2, "x", 0, "lost");
    int64_t lo, hi;
    fsgd_bus_watermarks(g1, "x", 0, &lo, &hi, 0, err, sizeof err);
    CU_ASSERT_EQUAL(hi, 0);
    fsgd_bus_client_destroy(p2);
    fsgd_bus_client_destroy(g2);
    fsgd_bus_msg_destroy(fsgd_bus_poll(g1, 20));
    CU_ASSERT_EQUAL(s1.n, 3);
    struct timespec ns = {0, 200 * 1000000};
    nanosleep(&ns, NULL);
    fsgd_bus_msg_destroy(fsgd_bus_poll(g1, 0));
    CU_ASSERT_EQUAL(s1.n, 5);
    fsgd_bus_client_destroy(g1);
    fsgd_bus_destroy(v1);
    fsgd_bus_destroy(v2);
    fsgd_bus_destroy(b);
}

static fsgd_bus_fault_t faults(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                               int *delay_ms)
{
    const char *v = val;
    if (v[0] == 'x')
        return FSGD_BUS_DROP;
    if (v[0] == '2')
        return FSGD_BUS_DUPLICATE;
    if (v[0] == 'l') {
        *delay_ms = 50;
        return FSGD_BUS_DELAY;
    }
    return FSGD_BUS_DELIVER;
}

static void test_hooks(void)
{
    fsgd_bus_t *b = fsgd_bus_mem_new();
    char err[256];
    fsgd_bus_mem_topic(b, "t", 1);
    fsgd_bus_mem_set_hook(b, faults, NULL);
    fsgd_bus_client_t *p = fsgd_bus_client_new(b, FSGD_KCLIENT_PRODUCER, err, sizeof err);
    fsgd_bus_client_t *c = fsgd_bus_client_new(b, FSGD_KCLIENT_CONSUMER, err, sizeof err);
    fsgd_bus_tp_t tp = {"t", 0, FSGD_BUS_OFFSET_BEGINNING};
    fsgd_bus_assign(c, &tp, 1, err, sizeof err);
    put(p, "t", 0, "late");
    put(p, "t", 0, "x");
    put(p, "t", 0, "2");
    put(p, "t", 0, "a");
    CU_ASSERT_STRING_EQUAL(next(c, 0, NULL), "2");
    CU_ASSERT_STRING_EQUAL(next(c, 0, NULL), "2");
    CU_ASSERT_STRING_EQUAL(next(c, 0, NULL), "a");
    CU_ASSERT_STRING_EQUAL(next(c, 0, NULL), ""); /* "late" is not there yet */
    int64_t off = -1;
    CU_ASSERT_STRING_EQUAL(next(c, 1000, &off), "late");
    CU_ASSERT_EQUAL(off, 3);
    fsgd_bus_client_destroy(p);
    fsgd_bus_client_destroy(c);
    fsgd_bus_destroy(b);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"logs, watermarks, assign at begin/end, lost positions", test_logs},
        {"sent frames chunk and reassemble", test_frames},
        {"groups: deterministic assignment, join, kill and session end", test_groups},
        {"hooks: drop, duplicate, delay", test_hooks},
        {NULL, NULL},
    };
    fsgd_test_suite("bus_mem", cases);
}
