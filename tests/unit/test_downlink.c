/* fsgd/downlink.h: a worker that decodes the downlink messages on its own
 * holds the aggregator's replica bit for bit; θ − ρ is the only residual and
 * drains when θ stops moving (no mass lost); the budget keeps the largest
 * |Δ|; fsgd_codec_undo_last restores the uplink residual exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/codec.h"
#include "fsgd/downlink.h"
#include "fsgd/error.h"
#include "fsgd/keysort.h"
#include "testlib.h"
#include "codec_testing.h"

#define DIM 5000

static float frand(uint64_t *s) { return (float)((double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0) * 2 - 1; }

/* n distinct increasing keys < dim. */
static size_t rand_keys(uint64_t *s, uint32_t *keys, size_t n, uint32_t dim)
{
    size_t m = 0;
    for (uint32_t k = 0; k < dim && m < n; k++)
        if (fsgd_test_rand(s) % dim < n)
            keys[m++] = k;
    return m;
}

static void check_replicas_agree(const char *spec)
{
    uint64_t s = fsgd_test_seed() ^ 0xD0;
    float *theta = calloc(DIM, sizeof *theta), *worker = calloc(DIM, sizeof *worker);
    uint32_t *keys = malloc(DIM * sizeof *keys);
    char err[256];
    fsgd_downlink_t *d = fsgd_downlink_new(spec, DIM, theta, err, sizeof err);
    CU_ASSERT_FATAL(d != NULL && theta && worker && keys);
    size_t cap = fsgd_downlink_bound(d, DIM);
    uint8_t *msg = malloc(cap);
    fsgd_outbuf_t out = {msg, cap, 0};
    fsgd_sparse_t dec = {0};
    size_t sent_total = 0, touched_total = 0;
    for (int step = 0; step < 200; step++) {
        size_t n = rand_keys(&s, keys, 300, DIM);
        for (size_t i = 0; i < n; i++)
            theta[keys[i]] += 0.01f * frand(&s);
        CU_ASSERT_EQUAL_FATAL(fsgd_downlink_encode(d, theta, keys, n, 0, &out, err, sizeof err), 0);
        /* The worker sees only the bytes. */
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg, out.len, DIM, &dec, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_downlink_apply(worker, DIM, &dec, err, sizeof err), 0);
        CU_ASSERT_EQUAL(fsgd_downlink_checksum(worker, DIM), fsgd_downlink_checksum(fsgd_downlink_replica(d), DIM));
        sent_total += dec.n;
        touched_total += n;
    }
    CU_ASSERT(memcmp(worker, fsgd_downlink_replica(d), DIM * sizeof *worker) == 0);
    CU_ASSERT(sent_total > 0 && sent_total <= touched_total);

    /* θ stops moving: re-sending every key drains θ − ρ (nothing is lost). */
    double before = 0, after = 0;
    for (uint32_t k = 0; k < DIM; k++) {
        keys[k] = k;
        before = fmax(before, fabs(theta[k] - fsgd_downlink_replica(d)[k]));
    }
    for (int r = 0; r < 60; r++) {
        CU_ASSERT_EQUAL_FATAL(fsgd_downlink_encode(d, theta, keys, DIM, 0, &out, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg, out.len, DIM, &dec, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_downlink_apply(worker, DIM, &dec, err, sizeof err), 0);
    }
    for (uint32_t k = 0; k < DIM; k++)
        after = fmax(after, fabs(theta[k] - fsgd_downlink_replica(d)[k]));
    printf("\n  %s: %zu of %zu touched entries sent; max |θ−ρ| %.3g -> %.3g after 60 idle rounds\n", spec,
           sent_total, touched_total, before, after);
    CU_ASSERT(before > 0);
    CU_ASSERT(after < 1e-3 * before);
    CU_ASSERT(memcmp(worker, fsgd_downlink_replica(d), DIM * sizeof *worker) == 0);

    /* A snapshot: ρ = θ exactly. */
    fsgd_downlink_sync(d, theta);
    CU_ASSERT(memcmp(theta, fsgd_downlink_replica(d), DIM * sizeof *theta) == 0);
    CU_ASSERT_EQUAL(fsgd_downlink_checksum(theta, DIM), fsgd_downlink_checksum(fsgd_downlink_replica(d), DIM));
    fsgd_sparse_free(&dec);
    fsgd_downlink_destroy(d);
    free(msg);
    free(theta);
    free(worker);
    free(keys);
}

static void test_fastsgd_replicas(void) { check_replicas_agree("fastsgd"); }
static void test_logquant_replicas(void) { check_replicas_agree("logquant"); }
static void test_topk_replicas(void) { check_replicas_agree("topk:ratio=0.3"); }

static void test_budget_keeps_largest(void)
{
    float theta[100] = {0};
    uint32_t keys[100];
    for (uint32_t k = 0; k < 100; k++) {
        keys[k] = k;
        theta[k] = (k % 2 ? 1.0f : -1.0f) * (float)(k + 1); /* |Δ| grows with k */
    }
    float zero[100] = {0};
    char err[256];
    fsgd_downlink_t *d = fsgd_downlink_new("fastsgd", 100, zero, err, sizeof err);
    CU_ASSERT_FATAL(d != NULL);
    size_t cap = fsgd_downlink_bound(d, 100);
    uint8_t *msg = malloc(cap);
    fsgd_outbuf_t out = {msg, cap, 0};
    CU_ASSERT_EQUAL_FATAL(fsgd_downlink_encode(d, theta, keys, 100, 10, &out, err, sizeof err), 0);
    const fsgd_sparse_t *u = fsgd_downlink_last(d);
    CU_ASSERT(u->n >= 1 && u->n <= 10);
    for (size_t i = 0; i < u->n; i++)
        CU_ASSERT(u->keys[i] >= 90);
    /* Untouched by the budget: ρ still 0 there, the mass waits in θ − ρ. */
    CU_ASSERT_EQUAL(fsgd_downlink_replica(d)[0], 0.0f);
    free(msg);
    fsgd_downlink_destroy(d);
}

/* The budget takes exactly the budget largest |Δ| (ties: lower keys first),
 * checked against a sort, over magnitudes spread across many binades and
 * crowded into one, with many ties. topk:ratio=1 sends what it is given. */
static int by_mag_then_key(const void *x, const void *y)
{
    const float *a = x, *b = y; /* (|Δ|, key) pairs */
    if (a[0] != b[0])
        return a[0] < b[0] ? 1 : -1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

static void test_budget_selects_exactly(void)
{
    uint64_t s = 77;
    float zero[DIM] = {0}, theta[DIM], pairs[2 * DIM];
    uint32_t keys[DIM], want[DIM];
    char err[256];
    for (int round = 0; round < 40; round++) {
        size_t n = rand_keys(&s, keys, 1 + fsgd_test_rand(&s) % DIM, DIM);
        int shape = round % 3;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            float u = frand(&s);
            float v = shape == 0   ? ldexpf(u, (int)(fsgd_test_rand(&s) % 60) - 30) /* many binades */
                      : shape == 1 ? 1.0f + fabsf(u) * 0x1p-10f                 /* one bin */
                                   : (float)(fsgd_test_rand(&s) % 5) * (u < 0 ? -1 : 1); /* ties, zeros */
            theta[keys[i]] = v;
            if (v != 0.0f) {
                pairs[2 * m] = fabsf(v);
                pairs[2 * m++ + 1] = (float)keys[i]; /* keys < 2^24: exact */
            }
        }
        size_t budget = 1 + fsgd_test_rand(&s) % n;
        qsort(pairs, m, 2 * sizeof *pairs, by_mag_then_key);
        size_t nw = m < budget ? m : budget;
        for (size_t i = 0; i < nw; i++)
            want[i] = (uint32_t)pairs[2 * i + 1];
        fsgd_keysort(want, nw);
        fsgd_downlink_t *d = fsgd_downlink_new("topk:ratio=1", DIM, zero, err, sizeof err);
        CU_ASSERT_FATAL(d != NULL);
        size_t cap = fsgd_downlink_bound(d, n);
        uint8_t *msg = malloc(cap);
        fsgd_outbuf_t out = {msg, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_downlink_encode(d, theta, keys, n, budget, &out, err, sizeof err), 0);
        const fsgd_sparse_t *u = fsgd_downlink_last(d);
        CU_ASSERT_EQUAL(u->n, nw);
        CU_ASSERT(u->n == nw && memcmp(u->keys, want, nw * sizeof *want) == 0);
        free(msg);
        fsgd_downlink_destroy(d);
        for (size_t i = 0; i < n; i++)
            theta[keys[i]] = 0;
    }
}

/* A key that steps touch often goes first: workers read it every step, so
 * its pending Δ costs more than a larger one of a key read once. Keys 0..9
 * are touched in 8 encodes with Δ = 1 each time; then a step also touches
 * keys 10..19 with Δ = 4: weights 9·1 against 1·4, so 0..9 win the budget. */
static void test_budget_prefers_hot_keys(void)
{
    float zero[20] = {0}, theta[20] = {0};
    uint32_t keys[20];
    for (uint32_t k = 0; k < 20; k++)
        keys[k] = k;
    char err[256];
    fsgd_downlink_t *d = fsgd_downlink_new("logquant", 20, zero, err, sizeof err);
    CU_ASSERT_FATAL(d != NULL);
    size_t cap = fsgd_downlink_bound(d, 20);
    uint8_t *msg = malloc(cap);
    fsgd_outbuf_t out = {msg, cap, 0};
    for (int step = 0; step < 8; step++) {
        fsgd_downlink_sync(d, zero); /* nothing pending between the warm-up steps */
        for (uint32_t k = 0; k < 10; k++)
            theta[k] = 1.0f;
        CU_ASSERT_EQUAL_FATAL(fsgd_downlink_encode(d, theta, keys, 10, 0, &out, err, sizeof err), 0);
    }
    fsgd_downlink_sync(d, zero);
    for (uint32_t k = 10; k < 20; k++)
        theta[k] = 4.0f;
    CU_ASSERT_EQUAL_FATAL(fsgd_downlink_encode(d, theta, keys, 20, 10, &out, err, sizeof err), 0);
    const fsgd_sparse_t *u = fsgd_downlink_last(d);
    CU_ASSERT(u->n >= 1 && u->n <= 10);
    for (size_t i = 0; i < u->n; i++)
        CU_ASSERT(u->keys[i] < 10);
    free(msg);
    fsgd_downlink_destroy(d);
}

static void test_refuses_lossless_and_bad_keys(void)
{
    float theta[8] = {0};
    char err[256];
    CU_ASSERT(fsgd_downlink_new("none", 8, theta, err, sizeof err) == NULL);
    FSGD_ASSERT_CONTAINS(err, "lossless");
    CU_ASSERT(fsgd_downlink_new("nosuch", 8, theta, err, sizeof err) == NULL);
    fsgd_downlink_t *d = fsgd_downlink_new("fastsgd", 8, theta, err, sizeof err);
    CU_ASSERT_FATAL(d != NULL);
    uint8_t msg[256];
    fsgd_outbuf_t out = {msg, sizeof msg, 0};
    uint32_t bad[2] = {3, 3};
    CU_ASSERT_EQUAL(fsgd_downlink_encode(d, theta, bad, 2, 0, &out, err, sizeof err), FSGD_E_ARG);
    uint32_t big[1] = {8};
    CU_ASSERT_EQUAL(fsgd_downlink_encode(d, theta, big, 1, 0, &out, err, sizeof err), FSGD_E_ARG);
    fsgd_sparse_t u = {0};
    CU_ASSERT_EQUAL(fsgd_sparse_reserve(&u, 1), 0);
    u.keys[0] = 1;
    u.vals[0] = INFINITY;
    u.n = 1;
    CU_ASSERT_EQUAL(fsgd_downlink_apply(theta, 8, &u, err, sizeof err), FSGD_E_NONFINITE);
    CU_ASSERT_EQUAL(theta[1], 0.0f);
    fsgd_sparse_free(&u);
    fsgd_downlink_destroy(d);
}

/* An uplink message the aggregator did not apply: undo_last puts the
 * residual back, so the next message equals that of a stream that never
 * sent the rejected one. */
static void test_codec_undo_last(void)
{
    char err[256];
    fsgd_codec_t *a = fsgd_codec_new("fastsgd:ef=1", 1000, err, sizeof err);
    fsgd_codec_t *b = fsgd_codec_new("fastsgd:ef=1", 1000, err, sizeof err);
    CU_ASSERT_FATAL(a && b);
    uint64_t s = fsgd_test_seed() ^ 0x77;
    uint32_t keys[200];
    float vals[200];
    size_t cap = fsgd_codec_bound(a, 1000);
    uint8_t *ma = malloc(cap), *mb = malloc(cap);
    fsgd_outbuf_t oa = {ma, cap, 0}, ob = {mb, cap, 0};
    for (int step = 0; step < 5; step++) { /* the same history on both */
        size_t n = rand_keys(&s, keys, 200, 1000);
        for (size_t i = 0; i < n; i++)
            vals[i] = frand(&s);
        CU_ASSERT_EQUAL(fsgd_codec_encode(a, keys, vals, n, &oa, err, sizeof err), 0);
        CU_ASSERT_EQUAL(fsgd_codec_encode(b, keys, vals, n, &ob, err, sizeof err), 0);
    }
    size_t n = rand_keys(&s, keys, 200, 1000);
    for (size_t i = 0; i < n; i++)
        vals[i] = frand(&s);
    CU_ASSERT_EQUAL(fsgd_codec_encode(a, keys, vals, n, &oa, err, sizeof err), 0); /* rejected */
    CU_ASSERT_EQUAL(fsgd_codec_undo_last(a), 1);
    CU_ASSERT_EQUAL(fsgd_codec_undo_last(a), 0); /* only once */
    const fsgd_sparse_t *ra = fsgd_codec_residual(a), *rb = fsgd_codec_residual(b);
    CU_ASSERT_EQUAL_FATAL(ra->n, rb->n);
    CU_ASSERT(memcmp(ra->keys, rb->keys, ra->n * sizeof *ra->keys) == 0);
    CU_ASSERT(memcmp(ra->vals, rb->vals, ra->n * sizeof *ra->vals) == 0);
    CU_ASSERT_EQUAL(fsgd_codec_encode(a, keys, vals, n, &oa, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_codec_encode(b, keys, vals, n, &ob, err, sizeof err), 0);
    CU_ASSERT(oa.len == ob.len && memcmp(ma, mb, oa.len) == 0);
    /* Without error feedback there is nothing to restore. */
    fsgd_codec_t *c = fsgd_codec_new("fastsgd:ef=0", 1000, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_codec_encode(c, keys, vals, n, &oa, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_codec_undo_last(c), 0);
    fsgd_codec_destroy(a);
    fsgd_codec_destroy(b);
    fsgd_codec_destroy(c);
    free(ma);
    free(mb);
}

/* A shard's replica inside a whole model: its strided checksum is the
 * checksum of its weights gathered, for every shard of S, across the
 * checksum's 4 KiB blocks. */
static void test_checksum_strided(void)
{
    enum { N = 5003 };
    float *w = malloc(N * sizeof *w), *part = malloc(N * sizeof *part);
    CU_ASSERT_FATAL(w && part);
    for (int i = 0; i < N; i++)
        w[i] = (float)sin(i * 0.37) * (float)(1 + i % 13);
    CU_ASSERT_EQUAL(fsgd_downlink_checksum_strided(w, N, 1, 0), fsgd_downlink_checksum(w, N));
    for (uint64_t S = 2; S <= 5; S++)
        for (uint64_t I = 0; I < S; I++) {
            uint64_t n = 0;
            for (uint64_t k = I; k < N; k += S)
                part[n++] = w[k];
            CU_ASSERT_EQUAL(fsgd_downlink_checksum_strided(w, n, S, I), fsgd_downlink_checksum(part, n));
            part[0] += 1.0f; /* one weight differs: the check sees it */
            CU_ASSERT_NOT_EQUAL(fsgd_downlink_checksum_strided(w, n, S, I), fsgd_downlink_checksum(part, n));
        }
    free(w);
    free(part);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"fastsgd downlink: worker replica equals the aggregator's, θ − ρ drains", test_fastsgd_replicas},
        {"logquant downlink: the same", test_logquant_replicas},
        {"topk downlink: the same", test_topk_replicas},
        {"budget keeps the largest |Δ|", test_budget_keeps_largest},
        {"budget takes exactly the largest |Δ|, ties by key", test_budget_selects_exactly},
        {"budget weighs |Δ| by how often steps touch the key", test_budget_prefers_hot_keys},
        {"lossless codecs, bad keys and non-finite updates are refused", test_refuses_lossless_and_bad_keys},
        {"codec_undo_last restores the residual of a rejected message", test_codec_undo_last},
        {"a shard's strided checksum is its gathered weights' checksum", test_checksum_strided},
        {NULL, NULL},
    };
    fsgd_test_suite("downlink", cases);
}
