/* Kafka bus: frames (every field checked, CRC), reassembly of chunks in any
 * order, duplicate dropping by (kind, gen, sender, step, chunk), model
 * reassembly from a stream of frames, and chunked sends through the embedded
 * cluster read back with gap detection. */
#include <lz4.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/crc32c.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "kbus_raw.h"
#include "kasm_probe.h"
#include "fsgd/keys.h"
#include "fsgd/le.h"
#include "fsgd/shard.h"
#include "testlib.h"
#include "agg_ckpt.h"
#include "ctl.h"
#include "fsgd/auth.h"
#include "wire.h"

static size_t make_frame(uint8_t *out, uint8_t kind, uint32_t sender, uint64_t step, uint32_t chunk, uint32_t n,
                         const uint8_t *body, uint32_t len)
{
    fsgd_kframe_t f = {.kind = kind, .gen = 7, .sender = sender, .step = step, .chunk = chunk, .nchunks = n,
                       .body = body, .body_len = len};
    return fsgd_kframe_write(out, &f, NULL);
}

static void test_frame_roundtrip(void)
{
    uint8_t body[100], buf[200];
    for (int i = 0; i < 100; i++)
        body[i] = (uint8_t)(i * 7);
    size_t n = make_frame(buf, FSGD_KMSG_GRAD, 3, 42, 1, 2, body, 100);
    CU_ASSERT_EQUAL(n, 100 + FSGD_KFRAME_OVERHEAD);
    fsgd_kframe_t f;
    size_t used = 0;
    char err[256];
    CU_ASSERT_EQUAL(fsgd_kframe_parse(buf, n, &f, &used, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(used, n);
    CU_ASSERT_EQUAL(f.sender, 3);
    CU_ASSERT_EQUAL(f.step, 42);
    CU_ASSERT_EQUAL(f.chunk, 1);
    CU_ASSERT_EQUAL(f.nchunks, 2);
    CU_ASSERT_EQUAL(f.gen, 7);
    CU_ASSERT_EQUAL(memcmp(f.body, body, 100), 0);
}

static void test_frame_rejects(void)
{
    uint8_t body[16] = {1, 2, 3}, buf[64], bad[64];
    size_t n = make_frame(buf, FSGD_KMSG_DELTA, 1, 1, 0, 1, body, sizeof body);
    fsgd_kframe_t f;
    char err[256];
    /* every truncation */
    for (size_t k = 0; k < n; k++)
        CU_ASSERT(fsgd_kframe_parse(buf, k, &f, NULL, NULL, err, sizeof err) < 0);
    /* every single-bit flip is caught (field checks or the CRC) */
    uint64_t seed = fsgd_test_seed();
    for (size_t k = 0; k < n * 8; k++) {
        memcpy(bad, buf, n);
        bad[k / 8] ^= (uint8_t)(1u << (k % 8));
        CU_ASSERT(fsgd_kframe_parse(bad, n, &f, NULL, NULL, err, sizeof err) < 0);
    }
    (void)seed;
    memcpy(bad, buf, n);
    bad[4] = 9;
    CU_ASSERT_EQUAL(fsgd_kframe_parse(bad, n, &f, NULL, NULL, err, sizeof err), FSGD_E_VERSION);
    FSGD_ASSERT_CONTAINS(err, "version");
    memcpy(bad, buf, n);
    bad[n - 1] ^= 1;
    CU_ASSERT_EQUAL(fsgd_kframe_parse(bad, n, &f, NULL, NULL, err, sizeof err), FSGD_E_CRC);
    /* chunk >= nchunks with a valid CRC */
    n = make_frame(bad, FSGD_KMSG_GRAD, 1, 1, 2, 2, body, 4);
    CU_ASSERT_EQUAL(fsgd_kframe_parse(bad, n, &f, NULL, NULL, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "chunk 2 of 2");
}

static void test_reassembly_and_dups(void)
{
    fsgd_kasm_t *a = fsgd_kasm_new();
    uint8_t body[30], fr[3][64];
    for (int i = 0; i < 30; i++)
        body[i] = (uint8_t)i;
    size_t len[3];
    for (uint32_t c = 0; c < 3; c++)
        len[c] = make_frame(fr[c], FSGD_KMSG_GRAD, 5, 9, c, 3, body + 10 * c, 10);
    const int order[3] = {2, 0, 1};
    const uint8_t *out;
    size_t olen;
    char err[256];
    for (int i = 0; i < 3; i++) {
        fsgd_kframe_t f;
        CU_ASSERT_EQUAL(fsgd_kframe_parse(fr[order[i]], len[order[i]], &f, NULL, NULL, err, sizeof err), 0);
        int r = fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err);
        CU_ASSERT_EQUAL(r, i < 2 ? FSGD_KASM_PENDING : FSGD_KASM_DONE);
        if (i == 0) /* the same chunk again while pending */
            CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err), FSGD_KASM_DUP);
    }
    CU_ASSERT_EQUAL(olen, 30);
    CU_ASSERT_EQUAL(memcmp(out, body, 30), 0);
    /* any chunk of a completed message is a duplicate */
    for (int c = 0; c < 3; c++) {
        fsgd_kframe_t f;
        fsgd_kframe_parse(fr[c], len[c], &f, NULL, NULL, err, sizeof err);
        CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err), FSGD_KASM_DUP);
    }
    /* same step from another sender is not a duplicate */
    uint8_t other[64];
    size_t ol = make_frame(other, FSGD_KMSG_GRAD, 6, 9, 0, 1, body, 5);
    fsgd_kframe_t f;
    fsgd_kframe_parse(other, ol, &f, NULL, NULL, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err), FSGD_KASM_DONE);
    /* inconsistent chunk count */
    ol = make_frame(other, FSGD_KMSG_GRAD, 8, 1, 0, 2, body, 5);
    fsgd_kframe_parse(other, ol, &f, NULL, NULL, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err), FSGD_KASM_PENDING);
    ol = make_frame(other, FSGD_KMSG_GRAD, 8, 1, 1, 3, body, 5);
    fsgd_kframe_parse(other, ol, &f, NULL, NULL, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err), FSGD_E_FORMAT);
    fsgd_kasm_destroy(a);
    fsgd_kasm_destroy(NULL);
}

/* Builds a model message body: step state (1 partition) + snapshot or delta. */
static size_t state_body(uint8_t *p)
{
    fsgd_le_put32(p, 1);      /* epoch */
    fsgd_le_put32(p + 4, 1);  /* nparts */
    fsgd_le_put64(p + 8, 0);  /* adam t */
    fsgd_le_put64(p + 16, 0); /* start */
    fsgd_le_put64(p + 24, 0); /* pos */
    fsgd_le_put64(p + 32, 5); /* end */
    fsgd_le_put32(p + 40, 5); /* quota */
    return 44;
}

/* One model message of shard `shard` of 2 (12 weights, 6 a shard): its
 * state, then pairs (a sparse table's snapshot) or a plain delta, framed. */
static size_t shard_msg(uint8_t *out, uint32_t shard, uint64_t step, int snapshot, uint32_t key, float val)
{
    fsgd_wire_state_t st = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_state_alloc(&st, 1), 0);
    st.end[0] = 5;
    fsgd_wire_buf_t b = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_state_put(&b, &st), 0);
    const uint32_t at = 0;
    if (snapshot) {
        const fsgd_wire_model_t head = {.kind = 1, .dim = 12, .n = 12, .shard = shard, .shards = 2};
        CU_ASSERT_EQUAL_FATAL(fsgd_wire_model_put_pairs(&b, &head, &key, &at, &val, 1), 0);
    } else {
        CU_ASSERT_EQUAL_FATAL(fsgd_wire_delta_put(&b, &key, &val, 1), 0);
    }
    fsgd_kframe_t f = {.kind = snapshot ? FSGD_KMSG_SNAPSHOT : FSGD_KMSG_DELTA, .gen = 5, .sender = shard,
                       .step = step, .nchunks = 1, .body = b.p, .body_len = (uint32_t)b.n};
    size_t n = fsgd_kframe_write(out, &f, NULL);
    free(b.p);
    fsgd_wire_state_free(&st);
    return n;
}

/* Sparse shard snapshots are written into the whole model by their pairs
 * only; a later one clears what the shard wrote before (its older
 * snapshot's keys and a delta's) and nothing of the other shard's. */
static void test_sparse_shard_snapshots(void)
{
    uint8_t stream[4096];
    size_t sl = 0;
    sl += shard_msg(stream + sl, 0, 0, 1, 1, 1.0f);  /* global 2 */
    sl += shard_msg(stream + sl, 1, 0, 1, 2, 2.0f);  /* global 5 */
    sl += shard_msg(stream + sl, 1, 1, 0, 3, 3.0f);  /* a delta: global 7 */
    sl += shard_msg(stream + sl, 0, 2, 1, 4, 4.0f);  /* global 8; 2 is +0 now */
    fsgd_model_t m;
    uint64_t step;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_assemble_stream(stream, sl, NULL, 0, &m, &step, err, sizeof err), 0);
    const float mid[12] = {[5] = 2.0f, [7] = 3.0f, [8] = 4.0f};
    CU_ASSERT_EQUAL(memcmp(m.w, mid, sizeof mid), 0);
    fsgd_model_free(&m);
    sl += shard_msg(stream + sl, 1, 2, 1, 0, 5.0f); /* global 1; 5 and 7 are +0 now */
    CU_ASSERT_EQUAL_FATAL(fsgd_model_assemble_stream(stream, sl, NULL, 0, &m, &step, err, sizeof err), 0);
    const float end[12] = {[1] = 5.0f, [8] = 4.0f};
    CU_ASSERT_EQUAL(memcmp(m.w, end, sizeof end), 0);
    CU_ASSERT_EQUAL(step, 2);
    fsgd_model_free(&m);
}

static void test_model_stream(void)
{
    uint8_t body[256], stream[2048];
    size_t sl = 0, n = state_body(body);
    /* snapshot: logistic, bias, dim 3 -> 4 weights */
    fsgd_le_put32(body + n, 1);
    fsgd_le_put32(body + n + 4, 1);
    fsgd_le_putf32(body + n + 8, 1.0f);
    fsgd_le_put64(body + n + 12, 3);
    fsgd_le_put64(body + n + 20, 4);
    for (int i = 0; i < 4; i++)
        fsgd_le_putf32(body + n + 28 + 4 * i, (float)i);
    fsgd_kframe_t f = {.kind = FSGD_KMSG_SNAPSHOT, .gen = 2, .step = 0, .nchunks = 1, .body = body,
                       .body_len = (uint32_t)(n + 44)};
    sl += fsgd_kframe_write(stream + sl, &f, NULL);
    /* delta step 1: key 2 -> 9.5, sent in two chunks */
    n = state_body(body);
    fsgd_le_put64(body + n, 1);
    fsgd_le_put32(body + n + 8, 2);
    fsgd_le_putf32(body + n + 12, 9.5f);
    size_t dl = n + 16;
    fsgd_kframe_t d1 = {.kind = FSGD_KMSG_DELTA, .gen = 2, .step = 1, .chunk = 0, .nchunks = 2, .body = body,
                        .body_len = 10};
    fsgd_kframe_t d2 = d1;
    d2.chunk = 1;
    d2.body = body + 10;
    d2.body_len = (uint32_t)(dl - 10);
    sl += fsgd_kframe_write(stream + sl, &d1, NULL);
    size_t dup_at = sl;
    sl += fsgd_kframe_write(stream + sl, &d2, NULL);
    memcpy(stream + sl, stream + dup_at, sl - dup_at); /* a duplicated chunk */
    sl += sl - dup_at;
    fsgd_model_t m;
    uint64_t step;
    char err[256];
    CU_ASSERT_EQUAL(fsgd_model_assemble_stream(stream, sl, NULL, 0, &m, &step, err, sizeof err), 0);
    CU_ASSERT_EQUAL(step, 1);
    CU_ASSERT_EQUAL(m.dim, 3);
    CU_ASSERT_EQUAL(m.has_bias, 1);
    CU_ASSERT_EQUAL(m.w[1], 1.0f);
    CU_ASSERT_EQUAL(m.w[2], 9.5f);
    CU_ASSERT_EQUAL(m.w[3], 3.0f);
    fsgd_model_free(&m);
    /* without the final snapshot, the strict mode refuses */
    CU_ASSERT_EQUAL(fsgd_model_assemble_stream(stream, sl, NULL, 1, &m, &step, err, sizeof err), FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, "final snapshot");
    /* a cut stream is an error naming the byte */
    CU_ASSERT(fsgd_model_assemble_stream(stream, sl - 3, NULL, 0, &m, &step, err, sizeof err) < 0);
    FSGD_ASSERT_CONTAINS(err, "at byte");
}

/* A packed delta (kind 4): snapshot of 1000 weights, then a delta touching
 * every third key (raw values, then a run of equal values that LZ4 takes),
 * reassembled exactly; truncations and corrupt value headers are errors. */
static size_t snapshot_frame(uint8_t *out, uint32_t D)
{
    uint8_t *body = malloc(128 + 4 * (size_t)D);
    size_t n = state_body(body);
    fsgd_le_put32(body + n, 1);
    fsgd_le_put32(body + n + 4, 0);
    fsgd_le_putf32(body + n + 8, 0.0f);
    fsgd_le_put64(body + n + 12, D);
    fsgd_le_put64(body + n + 20, D);
    for (uint32_t i = 0; i < D; i++)
        fsgd_le_putf32(body + n + 28 + 4 * i, 0.5f);
    fsgd_kframe_t f = {.kind = FSGD_KMSG_SNAPSHOT, .gen = 3, .step = 0, .nchunks = 1, .body = body,
                       .body_len = (uint32_t)(n + 28 + 4 * D)};
    size_t r = fsgd_kframe_write(out, &f, NULL);
    free(body);
    return r;
}

static size_t pdelta_body(uint8_t *body, uint64_t step, int lz, uint32_t *keys, float *vals, size_t *nk)
{
    size_t n = state_body(body), k = 0, kl = 0;
    for (uint32_t key = (uint32_t)step; key < 1000; key += 3) {
        keys[k] = key;
        vals[k] = lz ? 7.25f : (float)key * 0.001f - (float)step;
        k++;
    }
    char err[256];
    CU_ASSERT_EQUAL(fsgd_keys_encode(keys, k, body + n, fsgd_keys_bound(k), &kl, err, sizeof err), 0);
    n += kl;
    uint8_t raw[4000];
    for (size_t i = 0; i < k; i++)
        fsgd_le_putf32(raw + 4 * i, vals[i]);
    uint8_t *h = body + n;
    memset(h, 0, 8);
    if (lz) {
        int c = LZ4_compress_default((const char *)raw, (char *)h + 8, (int)(4 * k), 8000);
        h[0] = 1;
        fsgd_le_put32(h + 4, (uint32_t)c);
        n += 8 + (size_t)c;
    } else {
        fsgd_le_put32(h + 4, (uint32_t)(4 * k));
        memcpy(h + 8, raw, 4 * k);
        n += 8 + 4 * k;
    }
    *nk = k;
    return n;
}

static void test_packed_delta_stream(void)
{
    uint8_t *stream = malloc(64 * 1024), *body = malloc(16 * 1024);
    uint32_t keys[400];
    float vals[400];
    size_t sl = snapshot_frame(stream, 1000), nk;
    for (uint64_t step = 1; step <= 2; step++) {
        size_t bl = pdelta_body(body, step, step == 2, keys, vals, &nk);
        fsgd_kframe_t f = {.kind = FSGD_KMSG_DELTA_PACKED, .gen = 3, .step = step, .nchunks = 1, .body = body,
                           .body_len = (uint32_t)bl};
        sl += fsgd_kframe_write(stream + sl, &f, NULL);
    }
    fsgd_model_t m;
    uint64_t step;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_assemble_stream(stream, sl, NULL, 0, &m, &step, err, sizeof err), 0);
    CU_ASSERT_EQUAL(step, 2);
    for (uint32_t i = 0; i < 1000; i++) {
        float want = i % 3 == 2 ? 7.25f : i % 3 == 1 ? (float)i * 0.001f - 1.0f : 0.5f;
        CU_ASSERT_EQUAL(m.w[i], want);
    }
    fsgd_model_free(&m);
    /* corrupt packed deltas: a key count the stream does not hold, a bad value format, a
     * value count that disagrees with the keys, truncated values */
    size_t base = snapshot_frame(stream, 1000);
    for (int bad = 0; bad < 4; bad++) {
        size_t bl = pdelta_body(body, 1, 0, keys, vals, &nk), kl = 0;
        size_t vh = 44;
        uint32_t kn;
        CU_ASSERT_EQUAL(fsgd_keys_peek(body + 44, bl - 44, 1000, &kn, &kl, err, sizeof err), 0);
        vh += kl;
        if (bad == 0)
            fsgd_le_put32(body + 44, kn + 1); /* one key more than the stream holds */
        else if (bad == 1)
            body[vh] = 2;
        else if (bad == 2)
            fsgd_le_put32(body + vh + 4, (uint32_t)(4 * nk - 4));
        else
            bl -= 2;
        fsgd_kframe_t f = {.kind = FSGD_KMSG_DELTA_PACKED, .gen = 3, .step = 1, .nchunks = 1, .body = body,
                           .body_len = (uint32_t)bl};
        size_t l2 = base + fsgd_kframe_write(stream + base, &f, NULL);
        CU_ASSERT(fsgd_model_assemble_stream(stream, l2, NULL, 0, &m, &step, err, sizeof err) < 0);
        CU_ASSERT(strstr(err, "delta") != NULL);
    }
    free(stream);
    free(body);
}

typedef struct collect {
    int64_t first, last;
    size_t n, bytes;
} collect_t;

static int on_msg(void *ctx, int32_t p, int64_t off, const void *val, size_t len, char *err, size_t errsz)
{
    collect_t *c = ctx;
    if (!c->n)
        c->first = off;
    c->last = off;
    c->n++;
    c->bytes += len;
    fsgd_kframe_t f;
    return fsgd_kframe_parse(val, len, &f, NULL, NULL, err, errsz);
}

static void test_mock_send_read(void)
{
    char err[512];
    fsgd_kmock_t *m = fsgd_kmock_new(1, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(fsgd_kmock_topic(m, "t.grads", 1, 0, err, sizeof err), 0);
    fsgd_kconf_t kc = {fsgd_kmock_bootstraps(m), NULL};
    rd_kafka_t *p = fsgd_kbus_client(FSGD_KCLIENT_PRODUCER, &kc, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t len = 1300 * 1000; /* 1.3 MB: 3 chunks of at most 512 KiB */
    uint8_t *body = malloc(len);
    for (size_t i = 0; i < len; i++)
        body[i] = (uint8_t)(i * 31);
    fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .gen = 1, .sender = 4, .step = 3};
    uint64_t wire = 0;
    const fsgd_bus_out_t out = {.topic = "t.grads", .partition = 0, .job = "t", .hdr = &h, .val = body, .len = len};
    CU_ASSERT_EQUAL(fsgd_kbus_send(p, NULL, &out, 0, &wire, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_kbus_flush(p, 10000, err, sizeof err), 0);
    CU_ASSERT_EQUAL(wire, len + 3 * FSGD_KFRAME_OVERHEAD);
    rd_kafka_t *c = fsgd_kbus_client(FSGD_KCLIENT_CONSUMER, &kc, NULL, err, sizeof err);
    int64_t lo, hi;
    CU_ASSERT_EQUAL(fsgd_kbus_watermarks(c, "t.grads", 0, &lo, &hi, 5000, err, sizeof err), 0);
    CU_ASSERT_EQUAL(lo, 0);
    CU_ASSERT_EQUAL(hi, 3);
    collect_t col = {0};
    fsgd_bus_range_t r = {.topic = "t.grads", .partition = 0, .start = 0, .end = hi, .timeout_ms = 5000,
                          .fn = on_msg, .ctx = &col};
    CU_ASSERT_EQUAL(fsgd_kbus_read_range(c, NULL, &r, err, sizeof err), 0);
    CU_ASSERT_EQUAL(col.n, 3);
    CU_ASSERT_EQUAL(col.bytes, wire);
    /* reading past the end of the log times out with a clear message */
    memset(&col, 0, sizeof col);
    r.end = hi + 2;
    r.timeout_ms = 500;
    CU_ASSERT_EQUAL(fsgd_kbus_read_range(c, NULL, &r, err, sizeof err), FSGD_E_TIMEOUT);
    FSGD_ASSERT_CONTAINS(err, "no data");
    free(body);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    rd_kafka_destroy(p);
    fsgd_kmock_destroy(m);
    fsgd_kmock_destroy(NULL);
}

/* Incompressible values: the message that tried LZ4 is followed by
 * FSGD_WIRE_LZ4_RETRY - 1 raw ones, then LZ4 is tried again; compressible
 * values keep LZ4. Every message decodes to its values exactly. */
static void test_packed_delta_lz4_skip(void)
{
    enum { N = 512 };
    uint32_t keys[N];
    float noisy[N], flat[N];
    uint64_t seed = fsgd_test_seed();
    for (uint32_t i = 0; i < N; i++) {
        keys[i] = 3 * i;
        noisy[i] = (float)((double)fsgd_test_rand(&seed) / 18446744073709551616.0 - 0.5);
        flat[i] = 0.25f;
    }
    char err[256];
    fsgd_wire_buf_t b = {0};
    int tried = 0;
    for (int m = 0; m < 2 * FSGD_WIRE_LZ4_RETRY + 1; m++) {
        unsigned skip_before = b.lz4_skip;
        b.n = 0;
        CU_ASSERT_EQUAL_FATAL(fsgd_wire_pdelta_put(&b, keys, noisy, N, err, sizeof err), 0);
        tried += skip_before == 0;
        CU_ASSERT_EQUAL(b.lz4_skip, skip_before ? skip_before - 1 : FSGD_WIRE_LZ4_RETRY - 1);
        size_t off = 0;
        fsgd_sparse_t d = {0};
        CU_ASSERT_EQUAL_FATAL(fsgd_wire_pdelta_get(b.p, b.n, &off, 3 * N, &d, err, sizeof err), 0);
        CU_ASSERT_EQUAL(d.n, N);
        CU_ASSERT_EQUAL(memcmp(d.vals, noisy, sizeof noisy), 0);
        fsgd_sparse_free(&d);
    }
    CU_ASSERT_EQUAL(tried, 3); /* messages 0, 16 and 32 */
    fsgd_wire_buf_t c = {0};
    for (int m = 0; m < 3; m++) {
        c.n = 0;
        CU_ASSERT_EQUAL_FATAL(fsgd_wire_pdelta_put(&c, keys, flat, N, err, sizeof err), 0);
        CU_ASSERT_EQUAL(c.lz4_skip, 0);
        CU_ASSERT(c.n < 4 * N); /* the values went compressed */
    }
    free(b.p);
    free(c.p);
}

static void test_snapshot_body(void)
{
    float w[5] = {0.5f, -1.25f, 0, 3, 0.125f};
    fsgd_wire_buf_t b = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_model_put(&b, 1, 1, 1.0f, 4, w, 5), 0);
    fsgd_wire_model_t m;
    size_t off = 0;
    char err[256];
    CU_ASSERT_EQUAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), 0);
    CU_ASSERT_EQUAL(off, b.n);
    CU_ASSERT_EQUAL(m.n, 5);
    CU_ASSERT_EQUAL(fsgd_le_getf32(m.w + 4), -1.25f);
    /* a non-finite weight or bias is refused, naming the weight and byte */
    fsgd_le_putf32(b.p + 28 + 4 * 3, NAN);
    off = 0;
    CU_ASSERT_EQUAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), FSGD_E_NONFINITE);
    FSGD_ASSERT_CONTAINS(err, "weight 3 is not finite at byte 40");
    fsgd_le_putf32(b.p + 28 + 4 * 3, 3);
    fsgd_le_putf32(b.p + 8, INFINITY);
    off = 0;
    CU_ASSERT_EQUAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), FSGD_E_NONFINITE);
    FSGD_ASSERT_CONTAINS(err, "bias value is not finite at byte 8");
    /* and a truncated one names what is missing */
    fsgd_le_putf32(b.p + 8, 1);
    off = 0;
    CU_ASSERT_TRUE(fsgd_wire_model_get(b.p, b.n - 1, &off, &m, err, sizeof err) < 0);
    free(b.p);
}

/* A shard's snapshot: dim and n are the whole model's, the weights are the
 * shard's local ones (dense or sparse); the shard words are checked. */
static void test_snapshot_shard(void)
{
    enum { N = 1001, S = 3 };
    for (uint32_t shard = 0; shard < S; shard++) {
        uint64_t nl = fsgd_shard_dim(N, shard, S);
        float *w = malloc(nl * sizeof *w), *back = malloc(nl * sizeof *back);
        CU_ASSERT_FATAL(w && back);
        for (uint64_t i = 0; i < nl; i++)
            w[i] = (float)(i * S + shard) * 0.5f - 7.0f;
        for (int sparse = 0; sparse < 2; sparse++) {
            if (sparse)
                for (uint64_t i = 1; i < nl; i++)
                    w[i] = i % 50 ? 0.0f : w[i];
            fsgd_wire_buf_t b = {0};
            CU_ASSERT_EQUAL_FATAL(fsgd_wire_model_put_shard(&b, 2, 1, 1.0f, N - 1, w, N, shard, S), 0);
            fsgd_wire_model_t m;
            size_t off = 0;
            char err[256];
            CU_ASSERT_EQUAL_FATAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), 0);
            CU_ASSERT_EQUAL(off, b.n);
            CU_ASSERT_EQUAL(m.n, N);
            CU_ASSERT_EQUAL(m.dim, N - 1);
            CU_ASSERT_EQUAL(m.has_bias, 1);
            CU_ASSERT_EQUAL(m.shard, shard);
            CU_ASSERT_EQUAL(m.shards, S);
            CU_ASSERT_EQUAL(m.nloc, nl);
            CU_ASSERT_EQUAL(m.w == NULL, sparse);
            fsgd_wire_model_weights(&m, back);
            CU_ASSERT_EQUAL(memcmp(w, back, nl * sizeof *w), 0);
            /* straight into the whole model: this shard's keys only, zeros listed or not */
            float *whole = malloc(N * sizeof *whole);
            CU_ASSERT_FATAL(whole != NULL);
            for (int k = 0; k < N; k++)
                whole[k] = 99.0f;
            fsgd_wire_model_weights_strided(&m, whole, S, shard);
            for (int k = 0; k < N; k++)
                CU_ASSERT_EQUAL(whole[k], fsgd_shard_of((uint64_t)k, S) == shard ? w[fsgd_shard_local((uint64_t)k, S)]
                                                                                  : 99.0f);
            free(whole);
            /* a shard past the count is refused */
            fsgd_le_put32(b.p + 28, S);
            off = 0;
            CU_ASSERT_EQUAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), FSGD_E_FORMAT);
            FSGD_ASSERT_CONTAINS(err, "shard 3 of 3");
            free(b.p);
        }
        free(w);
        free(back);
    }
}

/* A model that is mostly +0.0 (a fresh one, an L1 one) goes as (index,
 * weight) pairs: -0.0 is a weight like any other, so the copy is the same
 * bit for bit; indices must increase and stay below n. */
static void test_snapshot_sparse(void)
{
    enum { N = 1001 };
    float *w = calloc(N, sizeof *w), *back = malloc(N * sizeof *back);
    CU_ASSERT_FATAL(w && back);
    w[3] = 0.75f;
    w[500] = -0.0f;
    w[N - 1] = -2.5f; /* the intercept */
    fsgd_wire_buf_t b = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_model_put(&b, 1, 1, 1.0f, N - 1, w, N), 0);
    CU_ASSERT_EQUAL(b.n, 28 + 8 + 3 * 8);
    fsgd_wire_model_t m;
    size_t off = 0;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), 0);
    CU_ASSERT_EQUAL(off, b.n);
    CU_ASSERT_EQUAL(m.has_bias, 1);
    CU_ASSERT_EQUAL(m.nnz, 3);
    CU_ASSERT_PTR_NULL(m.w);
    memset(back, 0xFF, N * sizeof *back);
    fsgd_wire_model_weights(&m, back);
    CU_ASSERT_EQUAL(memcmp(w, back, N * sizeof *w), 0);
    /* all +0.0: no pairs at all */
    fsgd_wire_buf_t z = {0};
    float *zero = calloc(N, sizeof *zero);
    CU_ASSERT_EQUAL(fsgd_wire_model_put(&z, 1, 0, 1.0f, N, zero, N), 0);
    CU_ASSERT_EQUAL(z.n, 36);
    /* indices out of order, or past n, are refused with their byte */
    fsgd_le_put32(b.p + 36 + 8, 2); /* second pair's index 500 -> 2 < 3 */
    off = 0;
    CU_ASSERT_EQUAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "weight index 2 at byte 44");
    fsgd_le_put32(b.p + 36 + 8, 500);
    fsgd_le_put32(b.p + 36 + 16, N);
    off = 0;
    CU_ASSERT_EQUAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), FSGD_E_FORMAT);
    /* a count beyond the weights, and a truncated list */
    fsgd_le_put32(b.p + 36 + 16, N - 1);
    off = 0;
    CU_ASSERT_TRUE(fsgd_wire_model_get(b.p, b.n - 1, &off, &m, err, sizeof err) < 0);
    fsgd_le_put64(b.p + 28, N + 1);
    off = 0;
    CU_ASSERT_EQUAL(fsgd_wire_model_get(b.p, b.n, &off, &m, err, sizeof err), FSGD_E_FORMAT);
    free(b.p);
    free(z.p);
    free(zero);
    free(w);
    free(back);
}

/* Reassembly with limits (what the aggregator sets): a chunk above the
 * chunk size, a message past its bound and a full reassembler are refused
 * and store nothing; held bytes are accounted; forget drops the pending
 * chunks and the completion of one key, so a stray 2-chunk frame cannot
 * block the genuine 1-chunk message of the same key. */
static void test_reassembly_limits(void)
{
    static uint8_t big[FSGD_KBUS_CHUNK_MAX + 1];
    fsgd_kasm_t *a = fsgd_kasm_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    fsgd_kasm_set_limits(a, 3000, 5000);
    const uint8_t *out;
    size_t olen;
    char err[256];
    fsgd_kframe_t f = {.kind = FSGD_KMSG_GRAD, .gen = 7, .sender = 1, .step = 5, .chunk = 0, .nchunks = 1,
                       .body = big, .body_len = sizeof big};
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err), FSGD_E_RANGE);
    FSGD_ASSERT_CONTAINS(err, "above the 524288-byte chunks fsgd writes");
    f.nchunks = 2;
    f.body_len = 2000;
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err), FSGD_KASM_PENDING);
    CU_ASSERT_EQUAL(fsgd_kasm_held(a), 2000);
    f.chunk = 1;
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &f, &out, &olen, err, sizeof err), FSGD_E_RANGE); /* 4000 > 3000 */
    FSGD_ASSERT_CONTAINS(err, "grows past 3000 bytes");
    CU_ASSERT_EQUAL(fsgd_kasm_held(a), 2000);
    /* other senders fill the reassembler up to its total */
    fsgd_kframe_t g = f;
    g.sender = 2;
    g.chunk = 0;
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &g, &out, &olen, err, sizeof err), FSGD_KASM_PENDING);
    g.sender = 3;
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &g, &out, &olen, err, sizeof err), FSGD_E_RANGE);
    FSGD_ASSERT_CONTAINS(err, "limit 5000");
    CU_ASSERT_EQUAL(fsgd_kasm_held(a), 4000);
    CU_ASSERT_EQUAL(fsgd_kasm_held_max(a), 4000);
    /* the genuine 1-chunk message of sender 1 disagrees with the pending
     * 2-chunk one: after forget, it goes through */
    fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .gen = 7, .sender = 1, .step = 5, .chunk = 0, .nchunks = 1,
                       .body = big, .body_len = 10};
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &h, &out, &olen, err, sizeof err), FSGD_E_FORMAT);
    fsgd_kasm_forget(a, &h);
    CU_ASSERT_EQUAL(fsgd_kasm_held(a), 2000);
    CU_ASSERT_FALSE(fsgd_kasm_completed(a, &h));
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &h, &out, &olen, err, sizeof err), FSGD_KASM_DONE);
    CU_ASSERT_EQUAL(olen, 10);
    CU_ASSERT_TRUE(fsgd_kasm_completed(a, &h));
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &h, &out, &olen, err, sizeof err), FSGD_KASM_DUP);
    /* a rejected message is forgotten: its next copy is taken again */
    fsgd_kasm_forget(a, &h);
    CU_ASSERT_EQUAL(fsgd_kasm_feed(a, &h, &out, &olen, err, sizeof err), FSGD_KASM_DONE);
    fsgd_kasm_prune(a, 6);
    CU_ASSERT_EQUAL(fsgd_kasm_held(a), 0);
    fsgd_kasm_destroy(a);
}

/* Checkpoints begin with a magic of their own ("FSGDCKPT", version 2);
 * version 1 began with "FSGC", the codec messages' magic, and is refused
 * by name. The bytes are the fuzz corpus's (control byte first). */
static void test_checkpoint_magic(void)
{
    size_t len = 0;
    uint8_t *p = fsgd_test_read_file("tests/fuzz/corpus/checkpoint/fixed_data", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(memcmp(p + 1, "FSGDCKPT\002\000\000\000", 12), 0);
    fsgd_wire_state_t exp = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_state_alloc(&exp, 2), 0);
    exp.end[0] = 600;
    exp.end[1] = 400;
    char err[512] = "";
    CU_ASSERT_EQUAL(fsgd_agg_ckpt_check(p + 1, len - 1, 1000, 124, &exp, NULL, NULL, err, sizeof err), 1);
    free(p);
    uint8_t *old = fsgd_test_read_file("tests/fuzz/corpus/checkpoint/old_magic_v1", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    p = old + 1;
    len--;
    fsgd_le_put32(p + len - 4, fsgd_crc32c(0, p, len - 4));
    int rc = fsgd_agg_ckpt_check(p, len, 1000, 124, &exp, NULL, NULL, err, sizeof err);
    free(old);
    CU_ASSERT_EQUAL(rc, FSGD_E_VERSION);
    FSGD_ASSERT_CONTAINS(err, "is in the version 1 format (magic FSGC) of an older fsgd");
    fsgd_wire_state_free(&exp);
}

/* Kafka security settings are checked by librdkafka when set. */
static void test_kafka_options_checked(void)
{
    char err[512] = "", out[4096];
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve("security.protocol=plaintext\nsasl.mechanism=PLAIN\n", out, sizeof out,
                                              err, sizeof err),
                    0);
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve("security.protocol=bogus\n", out, sizeof out, err, sizeof err),
                    FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "kafka option security.protocol");
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve("sasl.no.such.key=1\n", out, sizeof out, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "sasl.no.such.key");
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve("", out, sizeof out, err, sizeof err), 0);
}

static const char *secret_file(const char *name, const char *content, mode_t mode)
{
    const char *p = fsgd_test_tmp(name);
    unlink(p);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(content, f);
    fclose(f);
    chmod(p, mode);
    return p;
}

/* KEY_file=PATH: KEY gets the file's first line (librdkafka checks it as if
 * given inline), from a file only this user may read; errors name the file,
 * never what it holds. */
static void test_kafka_option_files(void)
{
    char err[512] = "", lines[1200], out[4096];
    snprintf(lines, sizeof lines, "security.protocol_file=%s\n", secret_file("proto", "ssl\n", 0600));
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve(lines, out, sizeof out, err, sizeof err), 0);
    /* the content is what is set: a value librdkafka refuses fails as inline */
    const char *bogus = secret_file("bogus", "s3cret-bogus\n", 0600);
    snprintf(lines, sizeof lines, "sasl.username=u\nsecurity.protocol_file=%s\n", bogus);
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve(lines, out, sizeof out, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "kafka option security.protocol");
    static const struct {
        const char *content;
        mode_t mode;
        const char *why;
    } bad[] = {
        {"s3cret-one\n", 0644, "has mode 0644: others may read it"},
        {"s3cret-one\n", 0640, "has mode 0640"},
        {"s3cret-one\ns3cret-two\n", 0600, "holds more than one line"},
        {"", 0600, "is empty"},
        {"\n", 0600, "is empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *p = secret_file("pw", bad[i].content, bad[i].mode);
        snprintf(lines, sizeof lines, "sasl.password_file=%s\n", p);
        err[0] = '\0';
        CU_ASSERT_EQUAL(fsgd_kbus_options_resolve(lines, out, sizeof out, err, sizeof err), FSGD_E_ARG);
        FSGD_ASSERT_CONTAINS(err, "kafka option sasl.password_file");
        FSGD_ASSERT_CONTAINS(err, p);
        FSGD_ASSERT_CONTAINS(err, bad[i].why);
        CU_ASSERT_PTR_NULL(strstr(err, "s3cret"));
    }
    /* a link to a good file: refused (name the file itself) */
    const char *good = secret_file("good", "s3cret-good\n", 0600), *link = fsgd_test_tmp("link");
    unlink(link);
    CU_ASSERT_EQUAL(symlink(good, link), 0);
    snprintf(lines, sizeof lines, "sasl.password_file=%s\n", link);
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve(lines, out, sizeof out, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "a symbolic link");
    snprintf(lines, sizeof lines, "sasl.password_file=%s\n", fsgd_test_tmp("no-such-file"));
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve(lines, out, sizeof out, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "No such file");
    snprintf(lines, sizeof lines, "sasl.password_file=%s\nsasl.username=u\n", good);
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve(lines, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "sasl.password=s3cret-good\n")); /* the file's line, in place */
    fsgd_kbus_options_wipe(out, sizeof out);
    CU_ASSERT_EQUAL(out[0], '\0');
    CU_ASSERT_EQUAL(fsgd_kbus_options_resolve("", out, sizeof out, err, sizeof err), 0);
}

/* Brokers that never answer: a bounded wait, then an error naming them and
 * librdkafka's cause (port 1, tcpmux: nothing listens there). */
static void test_connect_bounded(void)
{
    char err[1024] = "";
    fsgd_kconf_t kc = {"127.0.0.1:1", NULL};
    int rc = fsgd_kbus_connect(&kc, 1500, err, sizeof err);
    CU_ASSERT_EQUAL(rc, FSGD_E_KAFKA);
    FSGD_ASSERT_CONTAINS(err, "brokers 127.0.0.1:1: no connection within 1.5 s");
    FSGD_ASSERT_CONTAINS(err, "Connection refused");
    FSGD_ASSERT_CONTAINS(err, "(_TRANSPORT)");
}

/* NAME.ctl events and frames are bound to their job (issue 42, items 10
 * and 11): an event naming another job, or a frame tagged in another job
 * with the same key file, is refused. */
static void test_bound_to_job(void)
{
    fsgd_ctl_json_t j = {0};
    fsgd_cj_begin(&j, "worker_leave", "ctlB");
    fsgd_cj_u64(&j, "worker", 1);
    CU_ASSERT_EQUAL_FATAL(fsgd_cj_end(&j), 0);
    fsgd_bus_msg_t m = {.topic = "ctlA.ctl", .val = j.p, .len = j.n, .key = "worker_leave", .key_len = 12};
    char why[256] = "";
    fsgd_auth_t *ja = fsgd_auth_new(NULL, "ctlA"), *jb = fsgd_auth_new(NULL, "ctlB");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ja && jb);
    CU_ASSERT_EQUAL(fsgd_ctl_verify(NULL, &m, why, sizeof why), 0); /* no job (in-process tests): not checked */
    CU_ASSERT_EQUAL(fsgd_ctl_verify(ja, &m, why, sizeof why), FSGD_E_AUTH); /* unauthenticated, another job's event */
    FSGD_ASSERT_CONTAINS(why, "an event of job 'ctlB', not of this job 'ctlA'");
    CU_ASSERT_EQUAL(fsgd_ctl_verify(jb, &m, why, sizeof why), 0);
    const char bare[] = "{\"event\": \"worker_leave\", \"worker\": 1}";
    fsgd_bus_msg_t b = {.topic = "ctlB.ctl", .val = bare, .len = sizeof bare - 1};
    CU_ASSERT_EQUAL(fsgd_ctl_verify(jb, &b, why, sizeof why), FSGD_E_AUTH);
    fsgd_auth_destroy(ja);
    fsgd_auth_destroy(jb);
    /* with a key: the tag made in job ctlB does not pass in ctlA */
    uint8_t key[FSGD_AUTH_KEY_BYTES] = {7};
    ja = fsgd_auth_new(key, "ctlA");
    jb = fsgd_auth_new(key, "ctlB");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ja && jb);
    char mac[FSGD_AUTH_TAG_HEX + 1];
    fsgd_auth_tag_hex(jb, mac, FSGD_AUTH_CTL, "worker_leave", 13, j.p, j.n);
    m.mac = mac;
    m.mac_len = FSGD_AUTH_TAG_HEX;
    CU_ASSERT_EQUAL(fsgd_ctl_verify(jb, &m, why, sizeof why), 0);
    /* a frame of job ctlB */
    uint8_t buf[256];
    fsgd_kframe_t f = {.kind = FSGD_KMSG_SNAPSHOT, .gen = 3, .step = 390, .nchunks = 1, .body = (const uint8_t *)"x",
                       .body_len = 1};
    size_t n = fsgd_kframe_write(buf, &f, jb);
    fsgd_kframe_t g;
    CU_ASSERT_EQUAL(fsgd_kframe_parse(buf, n, &g, NULL, jb, why, sizeof why), 0);
    /* copied into job ctlA's topics */
    CU_ASSERT_EQUAL(fsgd_kframe_parse(buf, n, &g, NULL, ja, why, sizeof why), FSGD_E_AUTH);
    m.val = j.p;
    CU_ASSERT_EQUAL(fsgd_ctl_verify(ja, &m, why, sizeof why), FSGD_E_AUTH);
    fsgd_auth_destroy(ja);
    fsgd_auth_destroy(jb);
    fsgd_cj_free(&j);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t frame[] = {
        {"events and frames are bound to their job", test_bound_to_job},
        {"frame round trip", test_frame_roundtrip},
        {"frame rejects truncation, bit flips, bad fields", test_frame_rejects},
        {"chunk reassembly and duplicate dropping", test_reassembly_and_dups},
        {"model reassembly from a frame stream", test_model_stream},
        {"packed deltas (kind 4): keys bit-packed, raw and LZ4 values", test_packed_delta_stream},
        {"packed deltas: LZ4 that does not pay is left out for a while, values intact", test_packed_delta_lz4_skip},
        {"snapshot bodies: round trip, non-finite and truncated refused", test_snapshot_body},
        {"a mostly zero snapshot goes as pairs, the same bit for bit", test_snapshot_sparse},
        {"a shard's snapshot: its local weights, the shard words checked", test_snapshot_shard},
        {"sparse shard snapshots: pairs only, a newer one clears the shard's older keys", test_sparse_shard_snapshots},
        {"reassembly limits, held bytes, forget", test_reassembly_limits},
        {"checkpoint magic: FSGDCKPT read, version 1 refused by name", test_checkpoint_magic},
        {"kafka security options are checked when set", test_kafka_options_checked},
        {"kafka options from files: KEY_file, permissions, never the content", test_kafka_option_files},
        {"connecting to brokers that never answer: bounded, with the cause", test_connect_bounded},
        {NULL, NULL},
    };
    static const fsgd_test_case_t mock[] = {
        {"chunked send and range read on the embedded cluster", test_mock_send_read},
        {NULL, NULL},
    };
    fsgd_test_suite("kafka frames", frame);
    fsgd_test_suite("kafka embedded cluster", mock);
}
