/* The FastSGD device encoder's algorithm, checked on the host: its
 * sequential emulation (trainer/backend/fastsgd_device.c, which calls the
 * same fastsgd_device_math.h functions as the CUDA kernels) must give
 * fsgd_codec_encode's bytes, statistics and errors on many random
 * gradients, with the Σ|v| decided by the device tree and, forced, by the
 * CPU-lane fallback. A GPU is not needed; test_backend_parity compares the
 * real device's bytes when one exists. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fastsgd_device.h"
#include "fsgd/codec.h"
#include "fsgd/fastsgd.h"
#include "testlib.h"
#include "fastsgd_fast.h"

static float rand_unit(uint64_t *st) { return (float)((fsgd_test_rand(st) >> 40) * (1.0 / 16777216.0)); }

/* The level table of the shared header equals the codec's, bit for bit. */
static void test_levels_match(void)
{
    uint64_t st = fsgd_test_seed() ^ 0x1e7e1;
    static const double bs[] = {1.0000001, 1.0001, 1.01, 1.1, 1.5, 2, 3.7, 10, 1e6};
    float f1[256], f2[256];
    for (int it = 0; it < 3000; it++) {
        uint32_t u = (uint32_t)fsgd_test_rand(&st) & 0x7fffffffu;
        if ((u & 0x7f800000u) == 0x7f800000u)
            u = 0x7f7fffffu; /* FLT_MAX */
        if (it < 4)
            u = (uint32_t[]){1u, 0x00800000u, 0x7f7fffffu, 0x3f800000u}[it];
        float S;
        memcpy(&S, &u, 4);
        double b = bs[it % (sizeof bs / sizeof *bs)];
        fsgd_fastsgd_levels(S, b, 256, f1);
        fsd_levels(S, b, 256, f2);
        if (memcmp(f1, f2, sizeof f1) != 0) {
            fprintf(stderr, "\n  levels differ for S=%a b=%.17g\n", (double)S, b);
            CU_FAIL("level tables differ");
            return;
        }
    }
}

/* A random gradient: n strictly increasing keys below dim, values drawn by
 * one of several shapes (wide and narrow magnitude ranges, zeros, -0.0,
 * subnormals, repeats, sums beyond FLT_MAX). */
static size_t make_grad(uint64_t *st, uint64_t dim, size_t nmax, uint32_t *keys, float *vals, int shape)
{
    size_t n = (size_t)(fsgd_test_rand(st) % (nmax + 1));
    if (n > dim)
        n = (size_t)dim;
    /* keys: increasing with random gaps; mean gap fits dim */
    uint64_t room = dim - n, k = 0;
    uint64_t gapmax = n ? room / n : 0;
    if ((fsgd_test_rand(st) & 3) == 0 && n)
        gapmax = 0; /* dense */
    for (size_t i = 0; i < n; i++) {
        uint64_t g = gapmax ? fsgd_test_rand(st) % (gapmax + 1) : 0;
        if (i == 0 && gapmax && (fsgd_test_rand(st) & 1))
            g = room; /* a huge first key (dim may be 2^32) */
        if (g > room)
            g = room;
        room -= g;
        k += g;
        keys[i] = (uint32_t)k;
        k++;
    }
    for (size_t i = 0; i < n; i++) {
        float v;
        switch (shape) {
        case 0: /* log-uniform over 2^-40..2^10 */
            v = ldexpf(1 + rand_unit(st), -40 + (int)(fsgd_test_rand(st) % 50));
            break;
        case 1: /* narrow range: the codec's bucket-table path */
            v = 1e-3f * (1 + rand_unit(st));
            break;
        case 2: /* sparse with zeros and -0.0 */
            v = (fsgd_test_rand(st) & 1) ? 0.0f : rand_unit(st) * 1e-2f;
            if ((fsgd_test_rand(st) & 7) == 0)
                v = -0.0f;
            break;
        case 3: /* subnormals and tiny normals */
            v = ldexpf(rand_unit(st), -126 - (int)(fsgd_test_rand(st) % 23));
            break;
        case 4: /* few distinct values, repeats */
            v = (float)(1 + fsgd_test_rand(st) % 4) * 0.25f;
            break;
        case 5: /* near FLT_MAX: the sum saturates */
            v = FLT_MAX * (0.25f + 0.75f * rand_unit(st));
            break;
        default: /* values of a real gradient: most small, a few large */
            v = (float)(1e-4 * pow(rand_unit(st) + 1e-6, 6) * 1e3);
            break;
        }
        if (fsgd_test_rand(st) & 1)
            v = -v;
        vals[i] = v;
    }
    return n;
}

static int stats_equal(const fsgd_codec_t *a, const fsgd_codec_t *b)
{
    fsgd_codec_stats_t x, y;
    fsgd_codec_last_stats(a, &x);
    fsgd_codec_last_stats(b, &y);
    return memcmp(&x, &y, sizeof x) == 0;
}

/* Encodes with the codec, the emulation, and the emulation forced onto the
 * CPU-lane sum; all three must agree byte for byte (or fail alike). */
static int check_one(const char *spec, uint64_t dim, const uint32_t *keys, const float *vals, size_t n, size_t cap,
                     int *ambiguous_seen)
{
    char err[256], err2[256];
    fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
    fsgd_codec_t *e = fsgd_codec_new(spec, dim, err, sizeof err);
    fsgd_codec_t *e2 = fsgd_codec_new(spec, dim, err, sizeof err);
    CU_ASSERT_FATAL(c && e && e2);
    size_t bound = fsgd_codec_bound(c, n);
    if (cap == (size_t)-1)
        cap = bound;
    uint8_t *m1 = malloc(bound + 1), *m2 = malloc(bound + 1), *m3 = malloc(bound + 1);
    CU_ASSERT_FATAL(m1 && m2 && m3);
    fsgd_outbuf_t o1 = {m1, cap, 0}, o2 = {m2, cap, 0}, o3 = {m3, cap, 0};
    fsd_lanes_t tree = {.force = 0}, lanes = {.force = 1};
    int r1 = fsgd_codec_encode(c, keys, vals, n, &o1, err, sizeof err);
    int r2 = fsgd_fastsgd_device_emulate(e, keys, vals, n, &o2, &tree, err2, sizeof err2);
    int r3 = fsgd_fastsgd_device_emulate(e2, keys, vals, n, &o3, &lanes, err2, sizeof err2);
    size_t l1 = o1.len, l2 = o2.len, l3 = o3.len;
    int amb = tree.ambiguous, amb2 = lanes.ambiguous;
    int ok = r1 == r2 && r1 == r3 && l1 == l2 && l1 == l3 && (r1 < 0 || (memcmp(m1, m2, l1) == 0 &&
                                                                         memcmp(m1, m3, l1) == 0 &&
                                                                         stats_equal(c, e) && stats_equal(c, e2)));
    if (r1 < 0 && ok)
        ok = strcmp(err, err2) == 0;
    if (!ok) {
        fprintf(stderr, "\n  %s n=%zu dim=%llu cap=%zu: codec rc=%d len=%zu, emulation rc=%d/%d len=%zu/%zu (%s | %s)\n",
                spec, n, (unsigned long long)dim, cap, r1, l1, r2, r3, l2, l3, err, err2);
        for (size_t i = 0; i < l1 && i < l2; i++)
            if (m1[i] != m2[i]) {
                fprintf(stderr, "  first difference at byte %zu: %02x vs %02x\n", i, m1[i], m2[i]);
                break;
            }
    }
    if (amb)
        (*ambiguous_seen)++;
    CU_ASSERT_TRUE(amb2 == 1 || r2 < 0);
    free(m1);
    free(m2);
    free(m3);
    fsgd_codec_destroy(c);
    fsgd_codec_destroy(e);
    fsgd_codec_destroy(e2);
    return ok;
}

static void test_random_gradients(void)
{
    uint64_t st = fsgd_test_seed() ^ 0xfa575;
    static const char *const bs[] = {"1.0001", "1.01", "1.1", "1.5", "2", "10", "1000000"};
    static const int taus[] = {1, 5, 60, 127, 128, 200, 255};
    size_t nmax = 20000;
    uint32_t *keys = malloc(4 * nmax * sizeof *keys);
    float *vals = malloc(4 * nmax * sizeof *vals);
    CU_ASSERT_FATAL(keys && vals);
    int cases = 0, fails = 0, amb = 0;
    size_t sent_total = 0;
    for (int it = 0; it < 700; it++) {
        char spec[128];
        snprintf(spec, sizeof spec, "fastsgd:b=%s,tau=%d,l=%d,levels=%s", bs[fsgd_test_rand(&st) % 7],
                 taus[fsgd_test_rand(&st) % 7], 1 + (int)(fsgd_test_rand(&st) % 5),
                 (fsgd_test_rand(&st) & 1) ? "optimal" : "paper");
        if (it < 100)
            snprintf(spec, sizeof spec, "fastsgd"); /* the defaults */
        uint64_t dims[] = {1, 100, 123457, 1ull << 20, 1ull << 32};
        uint64_t dim = dims[fsgd_test_rand(&st) % 5];
        size_t nm = (it % 50 == 0) ? 4 * nmax : (it % 3 == 0 ? 64 : nmax);
        size_t n = make_grad(&st, dim, nm, keys, vals, (int)(fsgd_test_rand(&st) % 7));
        fails += !check_one(spec, dim, keys, vals, n, (size_t)-1, &amb);
        cases++;
        sent_total += n;
    }
    printf("\n  %d gradients (%zu values): %d byte mismatches, %d sums needed the lane fallback\n", cases,
           sent_total, fails, amb);
    CU_ASSERT_EQUAL(fails, 0);
    free(keys);
    free(vals);
}

/* Sums at exact float rounding boundaries: the device tree cannot decide
 * them, the fallback must; and saturating sums. */
static void test_sum_boundaries(void)
{
    int amb = 0;
    uint32_t keys[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    /* 1 + 2^-24 is the midpoint of 1 and nextafterf(1): ties to even gives 1. */
    float v1[2] = {1.0f, 0x1p-24f};
    CU_ASSERT_TRUE(check_one("fastsgd", 8, keys, v1, 2, (size_t)-1, &amb));
    CU_ASSERT_EQUAL(amb, 1);
    float v2[3] = {1.0f, 0x1p-24f, 0x1p-60f}; /* just above the midpoint: rounds up */
    CU_ASSERT_TRUE(check_one("fastsgd:tau=255,levels=optimal", 8, keys, v2, 3, (size_t)-1, &amb));
    float v3[5] = {3.0f, -0x1p-23f, 0x1p-80f, -5.5f, 0x1p-23f};
    CU_ASSERT_TRUE(check_one("fastsgd:b=2,l=3", 8, keys, v3, 5, (size_t)-1, &amb));
    float v4[4] = {FLT_MAX, -FLT_MAX, FLT_MAX, 1.0f}; /* saturates at FLT_MAX */
    CU_ASSERT_TRUE(check_one("fastsgd", 8, keys, v4, 4, (size_t)-1, &amb));
    float v5[1] = {0x1p-149f}; /* one subnormal */
    CU_ASSERT_TRUE(check_one("fastsgd:b=1000000", 8, keys, v5, 1, (size_t)-1, &amb));
    float v6[4] = {0.0f, -0.0f, 0.0f, 0.0f}; /* all zero: count 0, S 0 */
    CU_ASSERT_TRUE(check_one("fastsgd", 8, keys, v6, 4, (size_t)-1, &amb));
    CU_ASSERT_TRUE(check_one("fastsgd", 8, keys, v6, 0, (size_t)-1, &amb));
}

/* The same errors as fsgd_codec_encode: non-finite values, buffers too
 * small at every size around the message, error feedback, other codecs. */
static void test_errors_match(void)
{
    uint64_t st = fsgd_test_seed() ^ 0xe7705;
    uint32_t keys[300];
    float vals[300];
    int amb = 0;
    size_t n = 0;
    while (n < 50)
        n = make_grad(&st, 1000, 300, keys, vals, 0);
    char err[256];
    for (int mode = 0; mode < 2; mode++) {
        const char *spec = mode ? "fastsgd:levels=optimal,l=3" : "fastsgd:l=2";
        fsgd_codec_t *c = fsgd_codec_new(spec, 1000, err, sizeof err);
        uint8_t buf[4096];
        fsgd_outbuf_t msg = {buf, sizeof buf, 0};
        CU_ASSERT_FATAL(fsgd_codec_encode(c, keys, vals, n, &msg, err, sizeof err) == 0);
        fsgd_codec_destroy(c);
        for (size_t cap = 0; cap <= msg.len + 40; cap++)
            CU_ASSERT_TRUE(check_one(spec, 1000, keys, vals, n, cap, &amb));
    }
    float saved = vals[17];
    vals[17] = NAN;
    CU_ASSERT_TRUE(check_one("fastsgd", 1000, keys, vals, n, (size_t)-1, &amb));
    vals[17] = -INFINITY;
    vals[30] = NAN;
    CU_ASSERT_TRUE(check_one("fastsgd", 1000, keys, vals, n, (size_t)-1, &amb));
    vals[17] = saved;

    uint8_t out[8192];
    fsgd_outbuf_t msg = {out, sizeof out, 7};
    fsgd_codec_t *ef = fsgd_codec_new("fastsgd:ef=1", 1000, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_fastsgd_device_emulate(ef, keys, vals, n, &msg, NULL, err, sizeof err), FSGD_E_UNSUPPORTED);
    FSGD_ASSERT_CONTAINS(err, "ef=1");
    CU_ASSERT_EQUAL(msg.len, 0);
    fsgd_codec_destroy(ef);
    fsgd_codec_t *tk = fsgd_codec_new("topk", 1000, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_fastsgd_device_emulate(tk, keys, vals, n, &msg, NULL, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "not fastsgd");
    fsgd_codec_destroy(tk);
}

/* The emulated message decodes like any other (the decoder's checks). */
static void test_decodes(void)
{
    uint64_t st = fsgd_test_seed() ^ 0xdec0de;
    uint32_t *keys = malloc(5000 * sizeof *keys);
    float *vals = malloc(5000 * sizeof *vals);
    char err[256];
    fsgd_sparse_t out = {0};
    for (int it = 0; it < 50; it++) {
        size_t n = make_grad(&st, 1ull << 32, 5000, keys, vals, it % 7 == 5 ? 0 : it % 7);
        fsgd_codec_t *c = fsgd_codec_new(it & 1 ? "fastsgd:levels=optimal" : "fastsgd", 1ull << 32, err, sizeof err);
        size_t cap = fsgd_codec_bound(c, n);
        uint8_t *m = malloc(cap);
        fsgd_outbuf_t msg = {m, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_fastsgd_device_emulate(c, keys, vals, n, &msg, NULL, err, sizeof err), 0);
        size_t len = msg.len;
        CU_ASSERT_EQUAL(fsgd_codec_decode(m, len, 1ull << 32, &out, err, sizeof err), 0);
        fsgd_codec_stats_t s;
        fsgd_codec_last_stats(c, &s);
        CU_ASSERT_EQUAL(out.n, s.n_sent);
        CU_ASSERT_EQUAL(s.bytes, len);
        free(m);
        fsgd_codec_destroy(c);
    }
    fsgd_sparse_free(&out);
    free(keys);
    free(vals);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"levels_match", test_levels_match},
        {"random_gradients", test_random_gradients},
        {"sum_boundaries", test_sum_boundaries},
        {"errors_match", test_errors_match},
        {"decodes", test_decodes},
        {NULL, NULL},
    };
    fsgd_test_suite("cuda_encoder_host", cases);
}
