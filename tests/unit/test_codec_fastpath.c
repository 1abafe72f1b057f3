/* The FastSGD codec's fast paths (codec/fastsgd.c) against the reference
 * implementation they replaced, kept here verbatim in spirit: the simple
 * per-entry encoder and decoder, the level table of fsgd_fastsgd_levels and
 * the Σ|v| loop. Over many seeds, parameter sets and gradient shapes the
 * messages must be byte-identical, decoding must give the same entries, and
 * corrupted bodies the same error codes and messages. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fastsgd_fast.h"
#include "codec_testutil.h"
#include "fsgd/codec.h"
#include "fsgd/crc32c.h"
#include "fsgd/fastsgd.h"
#include "fsgd/le.h"
#include "testlib.h"

/* ---- the reference (the encoder and decoder before the fast paths) ---- */

typedef struct {
    uint8_t *p;
    uint64_t acc;
    int nb;
} rbitw_t;

static void rbitw_put(rbitw_t *w, uint64_t v, int n)
{
    w->acc |= v << w->nb;
    w->nb += n;
    if (w->nb >= 32) {
        fsgd_le_put32(w->p, (uint32_t)w->acc);
        w->p += 4;
        w->acc >>= 32;
        w->nb -= 32;
    }
}

static uint8_t *rbitw_end(rbitw_t *w)
{
    while (w->nb > 0) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->nb -= 8;
    }
    return w->p;
}

typedef struct {
    const uint8_t *p, *end;
    uint64_t acc;
    int nb;
} rbitr_t;

static int rbitr_get(rbitr_t *r, int n, uint32_t *v)
{
    while (r->nb < n && r->p < r->end) {
        r->acc |= (uint64_t)*r->p++ << r->nb;
        r->nb += 8;
    }
    if (r->nb < n)
        return -1;
    *v = (uint32_t)(r->acc & ((1ull << n) - 1));
    r->acc >>= n;
    r->nb -= n;
    return 0;
}

static int rbitlen(uint32_t x) { return x ? 32 - __builtin_clz(x) : 0; }

/* Σ|v| exactly as the codec defines it (FORMAT.md: four double lanes). */
static double ref_sum(const float *v, size_t n, float *mx)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    float m = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float a0 = fabsf(v[i]), a1 = fabsf(v[i + 1]), a2 = fabsf(v[i + 2]), a3 = fabsf(v[i + 3]);
        s0 += a0;
        s1 += a1;
        s2 += a2;
        s3 += a3;
        m = a0 > m ? a0 : m;
        m = a1 > m ? a1 : m;
        m = a2 > m ? a2 : m;
        m = a3 > m ? a3 : m;
    }
    for (; i < n; i++) {
        float a = fabsf(v[i]);
        s0 += a;
        m = a > m ? a : m;
    }
    *mx = m;
    return (s0 + s1) + (s2 + s3);
}

/* The whole message: the level of each value by linear search in the full
 * level table, keys written two bit fields at a time. Returns its length,
 * or 0 when cap is too small (the codec's NOSPACE). */
static size_t ref_encode(double b, int tau, int l, int optimal, uint64_t dim, const uint32_t *keys,
                         const float *vals, size_t n, uint8_t *msg, size_t cap)
{
    const int nlev = 1 << l;
    const size_t hdr = 24 + (optimal ? (size_t)nlev : 0);
    float mx;
    double sum = ref_sum(vals, n, &mx);
    float S = sum > FLT_MAX ? FLT_MAX : (float)sum;
    float f[256];
    int lbase = 0, lhi = -1;
    if (S > 0) {
        fsgd_fastsgd_levels(S, b, tau + 1, f);
        while (lbase <= tau && f[lbase] > mx)
            lbase++;
        if (lbase <= tau)
            lhi = lbase + 127 < tau ? lbase + 127 : tau;
        else
            lbase = 0;
    }
    uint32_t *delta = malloc(n * 4 + 4);
    uint8_t *codes = malloc(n + 1);
    size_t d = 0;
    uint32_t prev = 0, orall = 0;
    for (size_t i = 0; i < n && lhi >= lbase; i++) {
        float a = fabsf(vals[i]);
        if (!(a >= f[lhi]))
            continue;
        int L = lbase;
        while (f[L] > a)
            L++;
        codes[d] = (uint8_t)((signbit(vals[i]) ? 128 : 0) | (L - lbase));
        delta[d] = keys[i] - prev;
        orall |= delta[d];
        prev = keys[i];
        d++;
    }
    uint8_t lens[32];
    int M = rbitlen(orall);
    uint64_t key_bits;
    if (optimal) {
        uint64_t hist[33] = {0};
        for (size_t t = 0; t < d; t++)
            hist[rbitlen(delta[t])]++;
        key_bits = fsgd_fastsgd_optimal_lengths(hist, l, lens);
    } else {
        fsgd_fastsgd_paper_lengths(M, l, lens);
        key_bits = (uint64_t)d * (uint64_t)(l + M);
    }
    size_t need = hdr + d + (size_t)((key_bits + 7) / 8);
    if (24 + need + 4 > cap) {
        free(delta);
        free(codes);
        return 0;
    }
    uint8_t *body = msg + 24;
    memset(body, 0, hdr);
    fsgd_le_putf64(body, b);
    fsgd_le_putf32(body + 8, S > 0 ? S : 0.0f);
    body[16] = (uint8_t)tau;
    body[17] = (uint8_t)l;
    body[18] = (uint8_t)optimal;
    body[19] = (uint8_t)lbase;
    body[20] = (uint8_t)M;
    if (optimal)
        memcpy(body + 24, lens, (size_t)nlev);
    memcpy(body + hdr, codes, d);
    rbitw_t w = {body + hdr + d, 0, 0};
    for (size_t t = 0; t < d; t++) {
        int li = 0;
        while (li < nlev - 1 && lens[li] < rbitlen(delta[t]))
            li++;
        rbitw_put(&w, (uint64_t)li, l);
        rbitw_put(&w, delta[t], lens[li]);
    }
    size_t key_bytes = (size_t)(rbitw_end(&w) - (body + hdr + d));
    fsgd_le_put32(body + 12, (uint32_t)key_bytes);
    size_t blen = hdr + d + key_bytes;
    memcpy(msg, "FSGC", 4);
    msg[4] = 1;
    msg[5] = 2;
    fsgd_le_put16(msg + 6, 0);
    fsgd_le_put64(msg + 8, dim);
    fsgd_le_put32(msg + 16, (uint32_t)d);
    fsgd_le_put32(msg + 20, (uint32_t)blen);
    fsgd_le_put32(msg + 24 + blen, fsgd_crc32c(0, msg, 24 + blen));
    free(delta);
    free(codes);
    return 24 + blen + 4;
}

/* The body decoder as it was (frame already checked). */
static int ref_decode_body(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                           fsgd_sparse_t *out, char *err, size_t errsz)
{
    const uint8_t *body = msg + off;
    if (blen < 24)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field fastsgd.params at offset %zu: %zu bytes < %d",
                            off, blen, 24);
    double b = fsgd_le_getf64(body);
    float S = fsgd_le_getf32(body + 8);
    uint32_t key_bytes = fsgd_le_get32(body + 12);
    int tau = body[16], l = body[17], mode = body[18], lbase = body[19], M = body[20];
    if (!(b > 1 && b <= 1e6))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.b at offset %zu: %g not in (1, 1e6]", off,
                            b);
    if (!(S >= 0 && S <= FLT_MAX) || (count > 0 && S == 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.sum at offset %zu: %g invalid", off + 8,
                            (double)S);
    if (tau < 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.tau at offset %zu: 0", off + 16);
    if (l < 1 || l > 5)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.l at offset %zu: %d not in 1..5", off + 17,
                            l);
    if (mode > 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.levels at offset %zu: mode %d", off + 18,
                            mode);
    if (lbase > tau)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.lbase at offset %zu: %d > tau %d",
                            off + 19, lbase, tau);
    if (M > 32)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.M at offset %zu: %d > 32", off + 20, M);
    if (body[21] | body[22] | body[23])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.reserved at offset %zu: not zero",
                            off + 21);
    int nlev = 1 << l;
    size_t hdr = 24 + (mode ? (size_t)nlev : 0);
    if ((uint64_t)hdr + count + key_bytes != blen)
        return fsgd_err_fmt(err, errsz, blen < (uint64_t)hdr + count + key_bytes ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field fastsgd.key_bytes at offset %zu: %zu header + %u values + %u key bytes != "
                            "body of %zu",
                            off + 12, hdr, count, key_bytes, blen);
    uint8_t lens[32];
    if (mode) {
        for (int i = 0; i < nlev; i++) {
            lens[i] = body[24 + i];
            if (lens[i] > 32 || (i > 0 && lens[i] < lens[i - 1]))
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                    "field fastsgd.lengths at offset %zu: length %d (must be <= 32, nondecreasing)",
                                    off + 24 + i, lens[i]);
        }
    } else {
        fsgd_fastsgd_paper_lengths(M, l, lens);
    }
    fsgd_sparse_reserve(out, count);
    float f[256];
    fsgd_fastsgd_levels(S, b, tau + 1, f);
    const uint8_t *codes = body + hdr;
    for (uint32_t i = 0; i < count; i++) {
        int L = lbase + (codes[i] & 127);
        if (L > tau)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.value at offset %zu: level %d > tau %d",
                                off + hdr + i, L, tau);
        out->vals[i] = (codes[i] & 128) ? -f[L] : f[L];
    }
    const uint8_t *kstart = codes + count;
    rbitr_t r = {kstart, kstart + key_bytes, 0, 0};
    uint64_t key = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t flag, dk;
        size_t at = off + hdr + count + (size_t)(r.p - kstart) - (size_t)(r.nb / 8);
        if (rbitr_get(&r, l, &flag) < 0 || rbitr_get(&r, lens[flag], &dk) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field fastsgd.keys at offset %zu: key %u cut off",
                                at, i);
        if (i > 0 && dk == 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field fastsgd.keys at offset %zu: key %u repeats key %llu", at, i,
                                (unsigned long long)key);
        key += dk;
        if (key >= dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "field fastsgd.keys at offset %zu: key %llu >= dim %llu",
                                at, (unsigned long long)key, (unsigned long long)dim);
        out->keys[i] = (uint32_t)key;
    }
    /* drain whole bytes the reader took but did not use */
    size_t used = (size_t)(r.p - kstart) - (size_t)(r.nb / 8);
    if (used != key_bytes || (r.nb % 8 && (r.acc & ((1u << (r.nb % 8)) - 1))))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field fastsgd.keys at offset %zu: %zu of %u key bytes used, padding must be zero",
                            off + hdr + count + used, used, key_bytes);
    out->n = count;
    return 0;
}

/* ---- tests -------------------------------------------------------------- */

static const double test_bs[] = {1.0000001, 1.0001, 1.001, 1.01, 1.05, 1.1, 1.3, 1.5, 2, 3.7, 10, 1000, 1e6};
#define N_BS (sizeof test_bs / sizeof *test_bs)

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fsgd_fastsgd_levels_from gives fsgd_fastsgd_levels' table bit for bit,
 * for sums over the whole float range (subnormal ones included) and bases
 * from barely above 1 to 1e6, plus random bases. */
static void test_levels_fast(void)
{
    uint64_t st = fsgd_test_seed() ^ 0x1e7e15;
    float f1[256], f2[256];
    int bad = 0;
    for (int it = 0; it < 20000 && bad < 5; it++) {
        uint32_t u = (uint32_t)fsgd_test_rand(&st) & 0x7fffffffu;
        if ((u & 0x7f800000u) == 0x7f800000u)
            u = 0x7f7fffffu;
        if (it < 6)
            u = (uint32_t[]){1u, 0x00800000u, 0x7f7fffffu, 0x3f800000u, 0x00000100u, 0x0c000000u}[it];
        if (u == 0)
            u = 1;
        double b = (it & 1) ? test_bs[(it >> 1) % N_BS] : 1 + tu_unif(&st) * ((it & 2) ? 0.3 : 5.0);
        if (!(b > 1))
            b = 1.5;
        float S = bits_float(u);
        fsgd_fastsgd_levels(S, b, 256, f1);
        f2[0] = S;
        fsgd_fastsgd_levels_from(b, 1, 256, f2);
        if (memcmp(f1, f2, sizeof f1) != 0) {
            fprintf(stderr, "\n  levels differ for S=%a b=%.17g\n", (double)S, b);
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The SSE2 Σ|v| equals the reference lanes exactly, with max and min. */
static void test_abs_sum(void)
{
    uint64_t st = fsgd_test_seed() ^ 0xab5;
    fsgd_sparse_t g = {0};
    for (int it = 0; it < 500; it++) {
        size_t n = (size_t)(fsgd_test_rand(&st) % 300);
        tu_gradient(&st, 1u << 20, n, it, &g);
        float mx, mn, rmx;
        double s = fsgd_fastsgd_abs_sum(g.vals, g.n, &mx, &mn);
        double r = ref_sum(g.vals, g.n, &rmx);
        float rmn = INFINITY;
        for (size_t i = 0; i < g.n; i++)
            if (fabsf(g.vals[i]) > 0 && fabsf(g.vals[i]) < rmn)
                rmn = fabsf(g.vals[i]);
        CU_ASSERT_TRUE(memcmp(&s, &r, 8) == 0 && mx == rmx && mn == rmn);
    }
    fsgd_sparse_free(&g);
}

/* Values in one of several shapes beyond tu_gradient's: narrow ranges (the
 * bucket table), subnormals, sums beyond FLT_MAX, one value, all zero. */
static void reshape_values(uint64_t *st, fsgd_sparse_t *g, int shape, double b)
{
    if (shape == 7 && g->n >= 3) {
        /* Values exactly on the level table of S = 1: levels f[L] in
         * [2^-24, 0.5/n] (their sum and every partial sum exact in double),
         * then two entries making Σ|v| exactly 1. The encoder must give each
         * f[L] level L exactly (the boundary of its search). */
        float f[256];
        fsgd_fastsgd_levels(1.0f, b, 256, f);
        int lo = 0, hi = -1;
        for (int L = 0; L < 256; L++) {
            if (f[L] <= 0.5f / (float)g->n && lo == 0)
                lo = L;
            if (f[L] >= 0x1p-24f)
                hi = L;
        }
        if (lo > 0 && hi >= lo) {
            double sum = 0;
            size_t i1 = (size_t)(fsgd_test_rand(st) % g->n), i2 = (i1 + 1) % g->n;
            for (size_t i = 0; i < g->n; i++) {
                if (i == i1 || i == i2)
                    continue;
                float v = f[lo + (int)(fsgd_test_rand(st) % (uint64_t)(hi - lo + 1))];
                sum += v;
                g->vals[i] = (fsgd_test_rand(st) & 1) ? -v : v;
            }
            float b1 = (float)(1.0 - sum);
            if ((double)b1 > 1.0 - sum)
                b1 = nextafterf(b1, 0);
            g->vals[i1] = b1;
            g->vals[i2] = (float)(1.0 - sum - b1);
            return;
        }
    }
    for (size_t i = 0; i < g->n; i++) {
        float v = g->vals[i];
        switch (shape) {
        case 0:
            break; /* tu_gradient's wide log-uniform values */
        case 1:
            v = (float)(1e-3 * (1 + tu_unif(st)));
            break;
        case 2:
            v = bits_float((uint32_t)(fsgd_test_rand(st) % 0x01000000u)); /* subnormal and tiny normal */
            break;
        case 3:
            v = (float)(FLT_MAX / 3 * tu_unif(st));
            break;
        case 4:
            v = i == g->n / 2 ? 0.5f : 0.0f;
            break;
        case 5:
            v = 0.0f;
            break;
        default:
            v = (float)(exp(-tu_unif(st) * 12) * 1e-2); /* a gradient-like spread */
            break;
        }
        if (fsgd_test_rand(st) & 1)
            v = -v;
        g->vals[i] = v;
    }
}

static int check_same(const char *spec, uint64_t seed, const uint8_t *a, size_t alen, const uint8_t *b,
                      size_t blen)
{
    if (alen == blen && memcmp(a, b, alen) == 0)
        return 1;
    size_t at = 0;
    while (at < alen && at < blen && a[at] == b[at])
        at++;
    fprintf(stderr, "\n  seed %llu %s: message differs (len %zu vs reference %zu, first at byte %zu)\n",
            (unsigned long long)seed, spec, alen, blen, at);
    return 0;
}

/* Many random gradients and parameter sets: fsgd_codec_encode's message is
 * the reference's byte for byte, also with a buffer of exactly the message
 * size (the paths that cannot write past the message); fsgd_codec_decode
 * gives the reference decoder's entries. */
static void test_encode_decode_match(void)
{
    uint64_t st = fsgd_test_seed() ^ 0xfa57;
    fsgd_sparse_t g = {0}, o1 = {0}, o2 = {0};
    int bad = 0;
    for (int it = 0; it < 3000 && bad < 5; it++) {
        uint64_t seed = fsgd_test_rand(&st), s = seed;
        double b = (s & 1) ? test_bs[fsgd_test_rand(&s) % N_BS] : 1 + tu_unif(&s) * 0.5;
        int tau = (fsgd_test_rand(&s) & 1) ? 128 : 1 + (int)(fsgd_test_rand(&s) % 255);
        int l = 1 + (int)(fsgd_test_rand(&s) % 5), optimal = (int)(fsgd_test_rand(&s) & 1);
        uint64_t dims[] = {1, 100, 1000, 1u << 20, 1000000, 1ull << 32};
        uint64_t dim = dims[fsgd_test_rand(&s) % 6];
        size_t nmax = (fsgd_test_rand(&s) & 3) == 0 ? 20000 : 400;
        size_t n = (size_t)(fsgd_test_rand(&s) % (nmax + 1));
        tu_gradient(&s, dim, n, (int)(fsgd_test_rand(&s) % 4), &g);
        reshape_values(&s, &g, (int)(fsgd_test_rand(&s) % 8), b);
        char spec[128], err[256];
        snprintf(spec, sizeof spec, "fastsgd:b=%.17g,tau=%d,l=%d,levels=%s", b, tau, l,
                 optimal ? "optimal" : "paper");
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        size_t cap = fsgd_codec_bound(c, g.n), len = 0;
        uint8_t *m1 = malloc(cap), *m2 = malloc(cap), *m3 = malloc(cap);
        fsgd_outbuf_t ob = {m1, cap, 0};
        int rc = fsgd_codec_encode(c, g.keys, g.vals, g.n, &ob, err, sizeof err);
        len = ob.len;
        size_t rlen = ref_encode(b, tau, l, optimal, dim, g.keys, g.vals, g.n, m2, cap);
        CU_ASSERT_EQUAL(rc, 0);
        int ok = rc == 0 && check_same(spec, seed, m1, len, m2, rlen);
        /* a buffer of exactly the size the encoder asks for: the message in
         * optimal mode, the bound d * (l + M) key bits in paper mode */
        size_t len3 = 0;
        if (ok) {
            uint64_t d = fsgd_le_get32(m2 + 16), M = m2[24 + 20];
            size_t tight = optimal ? rlen : 24 + 24 + d + (size_t)((d * (l + M) + 7) / 8) + 4;
            fsgd_outbuf_t ob3 = {m3, tight, 0};
            int rc3 = fsgd_codec_encode(c, g.keys, g.vals, g.n, &ob3, err, sizeof err);
            len3 = ob3.len;
            if (rc3)
                fprintf(stderr, "\n  seed %llu %s: buffer of %zu: %s\n", (unsigned long long)seed, spec, tight, err);
            ok = rc3 == 0 && check_same(spec, seed, m3, len3, m2, rlen);
        }
        /* decoding */
        if (ok) {
            int d1 = fsgd_codec_decode(m1, len, dim, &o1, err, sizeof err);
            uint32_t count = fsgd_le_get32(m2 + 16), blen = fsgd_le_get32(m2 + 20);
            char err2[256];
            int d2 = ref_decode_body(m2, 24, blen, count, dim, &o2, err2, sizeof err2);
            /* empty results may have NULL arrays: compare only when there is something */
            ok = d1 == 0 && d2 == 0 && o1.n == o2.n &&
                 (o1.n == 0 || (memcmp(o1.keys, o2.keys, 4 * o1.n) == 0 && memcmp(o1.vals, o2.vals, 4 * o1.n) == 0));
            if (!ok)
                fprintf(stderr, "\n  seed %llu %s: decode differs (rc %d/%d: %s)\n", (unsigned long long)seed, spec,
                        d1, d2, d1 ? err : err2);
        }
        bad += !ok;
        free(m1);
        free(m2);
        free(m3);
        fsgd_codec_destroy(c);
    }
    CU_ASSERT_EQUAL(bad, 0);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&o1);
    fsgd_sparse_free(&o2);
}

/* Corrupted bodies (CRC recomputed so the body decoder sees them): the fast
 * decoder fails exactly when the reference does, with the same code and
 * message, and otherwise decodes the same entries. */
static void test_decode_corrupt_match(void)
{
    uint64_t st = fsgd_test_seed() ^ 0xc0de;
    fsgd_sparse_t g = {0}, o1 = {0}, o2 = {0};
    int bad = 0, failures = 0;
    for (int it = 0; it < 3000 && bad < 5; it++) {
        uint64_t seed = fsgd_test_rand(&st), s = seed;
        double b = test_bs[fsgd_test_rand(&s) % N_BS];
        int tau = 1 + (int)(fsgd_test_rand(&s) % 255), l = 1 + (int)(fsgd_test_rand(&s) % 5);
        int optimal = (int)(fsgd_test_rand(&s) & 1);
        uint64_t dim = (fsgd_test_rand(&s) & 1) ? 5000 : (1ull << 32);
        tu_gradient(&s, dim, (size_t)(fsgd_test_rand(&s) % 600), (int)(fsgd_test_rand(&s) % 4), &g);
        size_t cap = 24 + 56 + g.n + (37 * g.n + 7) / 8 + 4;
        uint8_t *m = malloc(cap);
        size_t len = ref_encode(b, tau, l, optimal, dim, g.keys, g.vals, g.n, m, cap);
        CU_ASSERT_FATAL(len > 0);
        uint32_t count = fsgd_le_get32(m + 16), blen = fsgd_le_get32(m + 20);
        int flips = 1 + (int)(fsgd_test_rand(&s) % 3);
        for (int k = 0; k < flips; k++) {
            size_t at = 24 + (size_t)(fsgd_test_rand(&s) % blen);
            if ((fsgd_test_rand(&s) & 3) == 0 && blen > 24)
                at = 24 + blen - 1 - (size_t)(fsgd_test_rand(&s) % (blen < 40 ? blen - 24 : 16));
            m[at] ^= (uint8_t)(1u << (fsgd_test_rand(&s) % 8));
        }
        fsgd_le_put32(m + 24 + blen, fsgd_crc32c(0, m, 24 + blen));
        char e1[256] = "", e2[256] = "";
        int d1 = fsgd_codec_decode(m, len, dim, &o1, e1, sizeof e1);
        int d2 = ref_decode_body(m, 24, blen, count, dim, &o2, e2, sizeof e2);
        int ok = d1 == d2 && (d1 < 0 ? strcmp(e1, e2) == 0
                                     : o1.n == o2.n && (o1.n == 0 || /* memcmp(NULL, NULL, 0) is undefined */
                                                        (memcmp(o1.keys, o2.keys, 4 * o1.n) == 0 &&
                                                         memcmp(o1.vals, o2.vals, 4 * o1.n) == 0)));
        failures += d1 < 0;
        if (!ok)
            fprintf(stderr, "\n  seed %llu: rc %d '%s' vs reference %d '%s'\n", (unsigned long long)seed, d1, e1, d2,
                    e2);
        bad += !ok;
        free(m);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(failures > 100); /* the corruptions did reach the checks */
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&o1);
    fsgd_sparse_free(&o2);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"levels_fast_equal_reference", test_levels_fast},
        {"abs_sum_equal_reference", test_abs_sum},
        {"encode_decode_equal_reference", test_encode_decode_match},
        {"decode_corrupt_equal_reference", test_decode_corrupt_match},
        {NULL, NULL},
    };
    fsgd_test_suite("codec_fastpath", cases);
}
