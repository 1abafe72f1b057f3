/* Property tests of the codecs over many random gradients and seeds (the
 * seed is printed; FSGD_TEST_SEED repeats a run). Each property is checked
 * against quantities the test computes itself from the input. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "codec_internal.h"
#include "codec_testutil.h"
#include "fsgd/codec.h"
#include "fsgd/fastsgd.h"
#include "fsgd/le.h"
#include "fsgd/shard.h"
#include "testlib.h"
#include "fastsgd_fast.h"

#define ROUNDS 300

static uint64_t case_seed(int i) { return fsgd_test_seed() * 1000003ull + (uint64_t)i * 7919ull; }

static int encode(fsgd_codec_t *c, const fsgd_sparse_t *g, fsgd_outbuf_t *m)
{
    size_t need = fsgd_codec_bound(c, g->n);
    if (need > m->cap) {
        m->dst = realloc(m->dst, need);
        m->cap = need;
    }
    char err[256];
    int rc = fsgd_codec_encode(c, g->keys, g->vals, g->n, m, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n  encode %s: %s\n", fsgd_codec_spec(c), err);
    else if (m->len > need) {
        fprintf(stderr, "\n  %zu bytes > bound %zu\n", m->len, need);
        return -1;
    }
    return rc;
}

static int decode(const fsgd_outbuf_t *m, uint64_t dim, fsgd_sparse_t *out)
{
    char err[256];
    int rc = fsgd_codec_decode(m->dst, m->len, dim, out, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n  decode: %s\n", err);
    return rc;
}

static uint64_t pick_dim(uint64_t *s)
{
    switch (fsgd_test_rand(s) % 5) {
    case 0: return 1 + fsgd_test_rand(s) % 64;
    case 1: return 1 + fsgd_test_rand(s) % 100000;
    case 2: return 1ull << 32;
    case 3: return (1ull << 32) - fsgd_test_rand(s) % 1000;
    default: return 1 + fsgd_test_rand(s) % 10000000;
    }
}

static size_t pick_n(uint64_t *s, uint64_t dim)
{
    size_t n;
    switch (fsgd_test_rand(s) % 6) {
    case 0: n = fsgd_test_rand(s) % 3; break;
    case 1: n = 1 + fsgd_test_rand(s) % 20; break;
    case 2: n = 1 + fsgd_test_rand(s) % 5000; break;
    default: n = 1 + fsgd_test_rand(s) % 500;
    }
    return n > dim ? (size_t)dim : n;
}

/* Paper lengths and per-key bits, computed here from the definitions. */
static uint64_t paper_key_bits(const uint32_t *keys, size_t d, int l, int *M_out)
{
    uint32_t maxd = 0, prev = 0;
    for (size_t i = 0; i < d; i++) {
        uint32_t dl = keys[i] - prev;
        prev = keys[i];
        maxd = dl > maxd ? dl : maxd;
    }
    int M = 0;
    while (M < 32 && (maxd >> M))
        M++;
    *M_out = M;
    int k = 1 << l;
    uint64_t bits = 0;
    prev = 0;
    for (size_t i = 0; i < d; i++) {
        uint32_t dl = keys[i] - prev;
        prev = keys[i];
        int need = 0;
        while (need < 32 && (dl >> need))
            need++;
        int len = -1;
        for (int j = 0; j < k; j++) {
            int lj = (int)ceil((double)(j + 1) * M / k);
            if (lj >= need) {
                len = lj;
                break;
            }
        }
        CU_ASSERT_FATAL(len >= 0);
        bits += (uint64_t)(l + len);
    }
    return bits;
}

/* FastSGD: keys round-trip, kept values within (|v|/b, |v|] with their sign,
 * dropped values below the threshold, the size formula. */
static void check_fastsgd_message(const char *spec, double b, int tau, int l, int optimal, const fsgd_sparse_t *g,
                                  const fsgd_outbuf_t *m, const fsgd_sparse_t *out, uint64_t seed)
{
    /* sum as the encoder defines it: Σ|v| in double, rounded to float */
    double sum = 0;
    for (size_t i = 0; i < g->n; i++)
        sum += fabs((double)g->vals[i]);
    float S = sum > FLT_MAX ? FLT_MAX : (float)sum;
    float Sm = fsgd_le_getf32(m->dst + 24 + 8);
    int lbase = m->dst[24 + 19];
    /* the encoder sums in double with its own order: equal within rounding */
    if (out->n > 0)
        CU_ASSERT_TRUE(fabs((double)Sm - (double)S) <= 1e-6 * (double)S);
    if (out->n > 0 || Sm > 0)
        S = Sm;
    float f[256];
    fsgd_fastsgd_levels(S, b, tau + 1, f);
    int lhi = lbase + 127 < tau ? lbase + 127 : tau;
    /* threshold of the paper, sum/b^τ, and the exact one the codec uses */
    long double paper_thr = (long double)S / powl((long double)b, tau);
    size_t j = 0;
    int bad = 0;
    for (size_t i = 0; i < g->n; i++) {
        float v = g->vals[i], a = fabsf(v);
        int kept = j < out->n && out->keys[j] == g->keys[i];
        if (kept) {
            float w = out->vals[j++], aw = fabsf(w);
            int sign_ok = (v < 0) == (w < 0) && w != 0;
            int upper = aw <= a;
            int lower = (long double)aw * (long double)b > (long double)a;
            if (!(sign_ok && upper && lower) && bad++ < 5)
                fprintf(stderr, "\n  seed %llu %s: key %u v=%a decoded %a\n", (unsigned long long)seed, spec,
                        g->keys[i], (double)v, (double)w);
            CU_ASSERT_TRUE(sign_ok && upper && lower);
            CU_ASSERT_TRUE(a >= f[tau] && a >= f[lhi]);
            /* the paper's threshold, within the level table's float rounding */
            CU_ASSERT_TRUE((long double)a >= paper_thr * (1 - 1e-4L));
        } else {
            /* dropped: below sum/b^τ, or more than 127 levels under the largest value */
            int below = S == 0 || a < f[tau] || a < f[lhi];
            if (!below && bad++ < 5)
                fprintf(stderr, "\n  seed %llu %s: key %u v=%a dropped, f[tau]=%a\n", (unsigned long long)seed,
                        spec, g->keys[i], (double)v, (double)f[tau]);
            CU_ASSERT_TRUE(below);
            if (S > 0 && a >= f[tau]) {
                if (!(tau > 127 && a < f[lhi]))
                    fprintf(stderr, "\n  seed %llu %s: a=%a f[tau]=%a f[lhi]=%a tau=%d lbase=%d S=%a\n", (unsigned long long)seed, spec, (double)a, (double)f[tau], (double)f[lhi], tau, lbase, (double)S);
                CU_ASSERT_TRUE(tau > 127 && a < f[lhi]);
            } else {
                CU_ASSERT_TRUE(S == 0 || (long double)a < paper_thr * (1 + 1e-4L));
            }
        }
    }
    CU_ASSERT_EQUAL(j, out->n); /* every decoded key was an input key */
    /* size = common header 24 + fastsgd params 24 (+ 2^l lengths) + d + key bits + CRC 4 */
    int M;
    uint64_t bits = paper_key_bits(out->keys, out->n, l, &M);
    size_t expect = 24 + 24 + 4 + out->n + (size_t)((bits + 7) / 8);
    if (!optimal) {
        CU_ASSERT_EQUAL(m->len, expect);
        CU_ASSERT_EQUAL(m->dst[24 + 20], M);
    }
    if (optimal) {
        size_t opt = m->len - (24 + 24 + 4 + (1u << l) + out->n);
        CU_ASSERT_TRUE(opt <= (bits + 7) / 8); /* never worse than the paper's lengths */
    }
}

static void test_fastsgd_properties(void)
{
    static const char *specs[] = {"fastsgd", "fastsgd:b=1.1,tau=128,l=2", "fastsgd:b=2,tau=20,l=1",
                                  "fastsgd:b=1.01,tau=255,l=5", "fastsgd:b=1.5,tau=8,l=3", "fastsgd:b=1.1,l=2,levels=optimal",
                                  "fastsgd:b=1.05,tau=200,l=4,levels=optimal", "fastsgd:b=1000,tau=3,l=1"};
    fsgd_sparse_t g = {0}, out = {0};
    fsgd_outbuf_t m = {0};
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t seed = case_seed(r), s = seed;
        const char *spec = specs[r % (sizeof specs / sizeof *specs)];
        uint64_t dim = pick_dim(&s);
        tu_gradient(&s, dim, pick_n(&s, dim), (int)(fsgd_test_rand(&s) % 4), &g);
        char err[256];
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        if (encode(c, &g, &m) != 0 || decode(&m, dim, &out) != 0) {
            fprintf(stderr, "  seed %llu spec %s n %zu dim %llu\n", (unsigned long long)seed, spec, g.n,
                    (unsigned long long)dim);
            CU_FAIL("encode/decode");
            fsgd_codec_destroy(c);
            continue;
        }
        const char *cs = fsgd_codec_spec(c);
        double b = strtod(strstr(cs, "b=") + 2, NULL);
        int tau = atoi(strstr(cs, "tau=") + 4), l = atoi(strstr(cs, ",l=") + 3);
        check_fastsgd_message(spec, b, tau, l, strstr(cs, "optimal") != NULL, &g, &m, &out, seed);
        fsgd_codec_stats_t st;
        fsgd_codec_last_stats(c, &st);
        CU_ASSERT_EQUAL(st.bytes, m.len);
        CU_ASSERT_EQUAL(st.n_sent, out.n);
        CU_ASSERT_EQUAL(st.header_bytes + st.value_bits / 8 + (st.key_bits + 7) / 8, m.len);
        fsgd_codec_destroy(c);
    }
    free(m.dst);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&out);
}

/* The optimal lengths equal a brute force over all length choices (l = 1, 2). */
static void test_optimal_lengths_brute_force(void)
{
    uint64_t s = case_seed(-1);
    for (int r = 0; r < 60; r++) {
        uint64_t hist[33] = {0};
        int top = (int)(fsgd_test_rand(&s) % 33);
        for (int j = 0; j <= top; j++)
            hist[j] = (fsgd_test_rand(&s) % 3 == 0) ? fsgd_test_rand(&s) % 1000 : 0;
        hist[top] += 1;
        for (int l = 1; l <= 2; l++) {
            uint8_t lens[32];
            uint64_t got = fsgd_fastsgd_optimal_lengths(hist, l, lens);
            CU_ASSERT_EQUAL(got, fsgd_fastsgd_key_bits(hist, l, lens));
            CU_ASSERT_EQUAL(lens[(1 << l) - 1], top);
            uint64_t best = UINT64_MAX;
            uint8_t t[4];
            t[(1 << l) - 1] = (uint8_t)top;
            if (l == 1) {
                for (int a = 0; a <= top; a++) {
                    t[0] = (uint8_t)a;
                    uint64_t v = fsgd_fastsgd_key_bits(hist, l, t);
                    best = v < best ? v : best;
                }
            } else {
                for (int a = 0; a <= top; a++)
                    for (int b2 = a; b2 <= top; b2++)
                        for (int c2 = b2; c2 <= top; c2++) {
                            t[0] = (uint8_t)a;
                            t[1] = (uint8_t)b2;
                            t[2] = (uint8_t)c2;
                            uint64_t v = fsgd_fastsgd_key_bits(hist, l, t);
                            best = v < best ? v : best;
                        }
            }
            CU_ASSERT_EQUAL(got, best);
            uint8_t paper[32];
            fsgd_fastsgd_paper_lengths(top, l, paper);
            CU_ASSERT_TRUE(got <= fsgd_fastsgd_key_bits(hist, l, paper));
        }
    }
}

/* The level table makes |v|/b < f[L] <= |v| exact for the smallest L with f[L] <= |v|. */
static void test_level_table(void)
{
    uint64_t s = case_seed(-2);
    for (int r = 0; r < 2000; r++) {
        double b = 1 + exp(-tu_unif(&s) * 12) * 3;
        float S = (float)exp((tu_unif(&s) - 0.5) * 150);
        float f[256];
        fsgd_fastsgd_levels(S, b, 256, f);
        CU_ASSERT_EQUAL(f[0], S);
        for (int L = 1; L < 256; L++) {
            CU_ASSERT_TRUE(f[L] <= f[L - 1]);
            CU_ASSERT_TRUE(fma((double)f[L], b, -(double)f[L - 1]) > 0 || f[L] == f[L - 1]);
        }
    }
}

static void check_exact(const fsgd_sparse_t *g, const fsgd_sparse_t *out)
{
    CU_ASSERT_EQUAL_FATAL(out->n, g->n);
    for (size_t i = 0; i < g->n; i++) {
        CU_ASSERT_EQUAL(out->keys[i], g->keys[i]);
        CU_ASSERT_EQUAL(memcmp(&out->vals[i], &g->vals[i], 4), 0);
    }
}

/* none and none:lz4 are exact; logquant keeps |v|/2 < v̂ <= |v|; topk keeps the k largest. */
static void test_other_codecs(void)
{
    static const char *specs[] = {"none", "none:lz4=1", "logquant", "topk:k=10", "topk:ratio=0.1,ef=0",
                                  "topk:ratio=1"};
    fsgd_sparse_t g = {0}, out = {0};
    fsgd_outbuf_t m = {0};
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t seed = case_seed(r + 100000), s = seed;
        const char *spec = specs[r % (sizeof specs / sizeof *specs)];
        uint64_t dim = pick_dim(&s);
        tu_gradient(&s, dim, pick_n(&s, dim), (int)(fsgd_test_rand(&s) % 4), &g);
        char err[256];
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        if (encode(c, &g, &m) != 0 || decode(&m, dim, &out) != 0) {
            fprintf(stderr, "  seed %llu spec %s\n", (unsigned long long)seed, spec);
            CU_FAIL("encode/decode");
            fsgd_codec_destroy(c);
            continue;
        }
        if (strncmp(spec, "none", 4) == 0) {
            CU_ASSERT_TRUE(fsgd_codec_is_lossless(c));
            check_exact(&g, &out);
        } else if (strcmp(spec, "logquant") == 0) {
            float mx = 0;
            for (size_t i = 0; i < g.n; i++)
                mx = fabsf(g.vals[i]) > mx ? fabsf(g.vals[i]) : mx;
            size_t j = 0;
            for (size_t i = 0; i < g.n; i++) {
                float a = fabsf(g.vals[i]);
                if (j < out.n && out.keys[j] == g.keys[i]) {
                    float w = out.vals[j++];
                    CU_ASSERT_TRUE((w < 0) == (g.vals[i] < 0));
                    CU_ASSERT_TRUE(fabsf(w) <= a);
                    if (a >= FLT_MIN)
                        CU_ASSERT_TRUE(2 * fabsf(w) > a);
                } else {
                    CU_ASSERT_TRUE(a == 0 || a < ldexpf(mx, -127));
                }
            }
            CU_ASSERT_EQUAL(j, out.n);
        } else { /* topk */
            size_t nz = 0;
            for (size_t i = 0; i < g.n; i++)
                nz += g.vals[i] != 0;
            size_t k = strstr(spec, "k=10") ? 10 : (size_t)ceil((strstr(spec, "0.1") ? 0.1 : 1.0) * (double)g.n);
            if (k > g.n)
                k = g.n;
            /* k is counted over the entries; zeros among them are not sent */
            CU_ASSERT_TRUE(out.n <= k && out.n <= nz);
            float min_kept = INFINITY, max_dropped = 0;
            size_t j = 0;
            for (size_t i = 0; i < g.n; i++) {
                if (j < out.n && out.keys[j] == g.keys[i]) {
                    CU_ASSERT_EQUAL(out.vals[j], g.vals[i]);
                    j++;
                    min_kept = fminf(min_kept, fabsf(g.vals[i]));
                } else {
                    max_dropped = fmaxf(max_dropped, fabsf(g.vals[i]));
                }
            }
            CU_ASSERT_EQUAL(j, out.n);
            if (out.n)
                CU_ASSERT_TRUE(min_kept >= max_dropped);
            if (nz >= k)
                CU_ASSERT_EQUAL(out.n, k);
        }
        fsgd_codec_destroy(c);
    }
    free(m.dst);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&out);
}

/* Error feedback: merged = input + residual; after encoding, residual =
 * merged - decoded on every key (exact float subtraction). */
static void test_error_feedback(void)
{
    static const char *specs[] = {"fastsgd:ef=1", "fastsgd:b=2,tau=4,ef=1", "logquant:ef=1", "topk:k=5",
                                  "topk:ratio=0.3,ef=1", "fastsgd:levels=optimal,ef=1"};
    fsgd_sparse_t g = {0}, out = {0}, prev = {0}, merged = {0};
    fsgd_outbuf_t m = {0};
    for (int r = 0; r < 60; r++) {
        uint64_t seed = case_seed(r + 200000), s = seed;
        const char *spec = specs[r % (sizeof specs / sizeof *specs)];
        uint64_t dim = 1 + fsgd_test_rand(&s) % 5000;
        char err[256];
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        for (int step = 0; step < 6; step++) {
            fsgd_sparse_copy(&prev, fsgd_codec_residual(c));
            tu_gradient(&s, dim, pick_n(&s, dim), (int)(fsgd_test_rand(&s) % 4), &g);
            /* merged, computed here */
            fsgd_sparse_reserve(&merged, g.n + prev.n + 1);
            size_t i = 0, j = 0, o = 0;
            while (i < g.n || j < prev.n) {
                if (j == prev.n || (i < g.n && g.keys[i] < prev.keys[j])) {
                    merged.keys[o] = g.keys[i];
                    merged.vals[o++] = g.vals[i++];
                } else if (i == g.n || prev.keys[j] < g.keys[i]) {
                    merged.keys[o] = prev.keys[j];
                    merged.vals[o++] = prev.vals[j++];
                } else {
                    merged.keys[o] = g.keys[i];
                    merged.vals[o++] = g.vals[i++] + prev.vals[j++];
                }
            }
            merged.n = o;
            if (encode(c, &g, &m) != 0 || decode(&m, dim, &out) != 0) {
                CU_FAIL("encode/decode");
                break;
            }
            const fsgd_sparse_t *res = fsgd_codec_residual(c);
            size_t jd = 0, jr = 0, bad = 0;
            for (size_t t = 0; t < merged.n; t++) {
                float want = merged.vals[t];
                if (jd < out.n && out.keys[jd] == merged.keys[t])
                    want -= out.vals[jd++];
                float have = 0;
                if (jr < res->n && res->keys[jr] == merged.keys[t])
                    have = res->vals[jr++];
                bad += have != want;
            }
            CU_ASSERT_EQUAL(jd, out.n);
            CU_ASSERT_EQUAL(jr, res->n);
            if (bad)
                fprintf(stderr, "\n  seed %llu %s step %d: %zu residual mismatches\n", (unsigned long long)seed, spec,
                        step, bad);
            CU_ASSERT_EQUAL(bad, 0);
        }
        fsgd_codec_reset(c);
        CU_ASSERT_EQUAL(fsgd_codec_residual(c)->n, 0);
        fsgd_codec_destroy(c);
    }
    free(m.dst);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&out);
    fsgd_sparse_free(&prev);
    fsgd_sparse_free(&merged);
}

/* encode_sent reports, bit for bit, what a decoder of its message produces,
 * for every codec (the downlink moves its replica by it); it refuses a codec
 * with error feedback, whose residual would not see what was sent. */
static void test_encode_sent_is_decoded(void)
{
    static const char *specs[] = {"fastsgd", "fastsgd:levels=optimal,l=3", "fastsgd:b=2,tau=4", "logquant:ef=0",
                                  "topk:k=7,ef=0", "efsign:ef=0", "sketchml:ef=0", "mqgrad:ef=0", "none"};
    fsgd_sparse_t g = {0}, out = {0}, sent = {0};
    fsgd_outbuf_t m = {0};
    char err[256];
    for (int r = 0; r < 90; r++) {
        uint64_t seed = case_seed(r + 400000), s = seed;
        const char *spec = specs[r % (sizeof specs / sizeof *specs)];
        uint64_t dim = 1 + fsgd_test_rand(&s) % 100000;
        tu_gradient(&s, dim, pick_n(&s, dim), (int)(fsgd_test_rand(&s) % 4), &g);
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        size_t need = fsgd_codec_bound(c, g.n);
        if (need > m.cap) {
            m.dst = realloc(m.dst, need);
            m.cap = need;
        }
        CU_ASSERT_EQUAL_FATAL(
            fsgd_codec_encode_sent(c, g.keys, g.vals, g.n, &m, &sent, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(decode(&m, dim, &out), 0);
        CU_ASSERT_EQUAL(sent.n, out.n);
        size_t n = sent.n < out.n ? sent.n : out.n;
        /* n 0: an empty message, whose arrays may be NULL (memcmp must not see them) */
        CU_ASSERT(n == 0 || memcmp(sent.keys, out.keys, n * sizeof *out.keys) == 0);
        CU_ASSERT(n == 0 || memcmp(sent.vals, out.vals, n * sizeof *out.vals) == 0);
        if (sent.n != out.n || (n && memcmp(sent.vals, out.vals, n * sizeof *out.vals)))
            fprintf(stderr, "\n  seed %llu %s: sent differs from decoded\n", (unsigned long long)seed, spec);
        fsgd_codec_destroy(c);
    }
    fsgd_codec_t *c = fsgd_codec_new("fastsgd:ef=1", 100, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    uint32_t k = 3;
    float v = 1;
    CU_ASSERT_EQUAL(fsgd_codec_encode_sent(c, &k, &v, 1, &m, &sent, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "needs ef=0");
    fsgd_codec_destroy(c);
    free(m.dst);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&out);
    fsgd_sparse_free(&sent);
}

/* A gradient split by shard (key k to part k mod S) and each part encoded
 * after fsgd_codec_set_whole of the whole gradient: FastSGD (ef=0, τ <= 128)
 * sends exactly the pairs and values of one message of the whole, so a
 * sharded job's uplink carries what an unsharded one's does. Without it a
 * part's threshold Σ|v|/b^τ is its own, lower one. set_whole(NAN) gives
 * the part's own encoding back; codecs that choose per message ignore it. */
static void test_parts_of_whole(void)
{
    static const char *specs[] = {"fastsgd", "fastsgd:levels=optimal,l=3", "fastsgd:b=2,tau=4", "fastsgd:b=1.05"};
    fsgd_sparse_t g = {0}, whole = {0}, parts[8] = {{0}}, dec[8] = {{0}}, joined = {0};
    fsgd_outbuf_t m = {0};
    char err[256];
    int fewer = 0;
    for (int r = 0; r < 120; r++) {
        uint64_t seed = case_seed(r + 500000), s = seed;
        const char *spec = specs[r % (sizeof specs / sizeof *specs)];
        uint32_t S = 2 + (uint32_t)(fsgd_test_rand(&s) % 7);
        uint64_t dim = S + fsgd_test_rand(&s) % 200000;
        tu_gradient(&s, dim, pick_n(&s, dim), (int)(fsgd_test_rand(&s) % 4), &g);
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_EQUAL_FATAL(encode(c, &g, &m), 0);
        CU_ASSERT_EQUAL_FATAL(decode(&m, dim, &whole), 0);
        fsgd_codec_destroy(c);
        CU_ASSERT_EQUAL_FATAL(fsgd_shard_split(&g, S, parts), 0);
        size_t own_sent = 0;
        for (uint32_t i = 0; i < S; i++) {
            uint64_t di = fsgd_shard_dim(dim, i, S);
            fsgd_codec_t *ci = fsgd_codec_new(spec, di, err, sizeof err);
            CU_ASSERT_PTR_NOT_NULL_FATAL(ci);
            /* the part's own choices first, then the whole's */
            CU_ASSERT_EQUAL_FATAL(encode(ci, &parts[i], &m), 0);
            CU_ASSERT_EQUAL_FATAL(decode(&m, di, &dec[i]), 0);
            own_sent += dec[i].n;
            fsgd_codec_set_whole(ci, fsgd_codec_whole_scale(ci, g.vals, g.n));
            CU_ASSERT_EQUAL_FATAL(encode(ci, &parts[i], &m), 0);
            CU_ASSERT_EQUAL_FATAL(decode(&m, di, &dec[i]), 0);
            fsgd_codec_destroy(ci);
        }
        fewer += whole.n < own_sent;
        CU_ASSERT_EQUAL_FATAL(fsgd_shard_merge(dec, S, &joined), 0);
        int same = joined.n == whole.n && (whole.n == 0 ||
                   (memcmp(joined.keys, whole.keys, whole.n * sizeof *whole.keys) == 0 &&
                    memcmp(joined.vals, whole.vals, whole.n * sizeof *whole.vals) == 0));
        CU_ASSERT_TRUE(same);
        if (!same)
            fprintf(stderr, "\n  seed %llu %s S=%u: parts decode to %zu pairs, the whole to %zu\n",
                    (unsigned long long)seed, spec, S, joined.n, whole.n);
    }
    /* the parts' own thresholds kept more pairs on most of these gradients */
    CU_ASSERT_TRUE(fewer > 30);
    /* set_whole(NAN): the part's own encoding again, byte for byte; a codec
     * that chooses per message has no whole scale */
    uint64_t s = case_seed(600000);
    tu_gradient(&s, 5000, 800, 1, &g);
    fsgd_codec_t *a = fsgd_codec_new("fastsgd", 5000, err, sizeof err), *b = fsgd_codec_new("fastsgd", 5000, err,
                                                                                               sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    fsgd_outbuf_t m2 = {0};
    fsgd_codec_set_whole(a, 1e6);
    fsgd_codec_set_whole(a, NAN);
    CU_ASSERT_EQUAL(encode(a, &g, &m), 0);
    CU_ASSERT_EQUAL(encode(b, &g, &m2), 0);
    CU_ASSERT_TRUE(m.len == m2.len && memcmp(m.dst, m2.dst, m.len) == 0);
    fsgd_codec_t *lq = fsgd_codec_new("logquant", 5000, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lq);
    CU_ASSERT_TRUE(isnan(fsgd_codec_whole_scale(lq, g.vals, g.n)));
    CU_ASSERT_TRUE(fsgd_codec_whole_scale(a, g.vals, g.n) > 0);
    fsgd_codec_destroy(lq);
    fsgd_codec_destroy(a);
    fsgd_codec_destroy(b);
    free(m2.dst);
    free(m.dst);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&whole);
    fsgd_sparse_free(&joined);
    for (int i = 0; i < 8; i++) {
        fsgd_sparse_free(&parts[i]);
        fsgd_sparse_free(&dec[i]);
    }
}

/* Every single-byte change and every truncation of a valid message is rejected. */
static void test_corruption_rejected(void)
{
    static const char *specs[] = {"fastsgd", "fastsgd:levels=optimal,l=3", "none", "none:lz4=1", "logquant",
                                  "topk:k=4"};
    fsgd_sparse_t g = {0}, out = {0};
    fsgd_outbuf_t m = {0};
    for (int r = 0; r < 24; r++) {
        uint64_t seed = case_seed(r + 300000), s = seed;
        const char *spec = specs[r % (sizeof specs / sizeof *specs)];
        uint64_t dim = 1 + fsgd_test_rand(&s) % 100000;
        tu_gradient(&s, dim, fsgd_test_rand(&s) % 40, (int)(fsgd_test_rand(&s) % 4), &g);
        char err[256];
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_EQUAL_FATAL(encode(c, &g, &m), 0);
        CU_ASSERT_EQUAL_FATAL(decode(&m, dim, &out), 0);
        uint8_t *copy = malloc(m.len);
        size_t accepted = 0;
        for (size_t i = 0; i < m.len; i++) {
            memcpy(copy, m.dst, m.len);
            copy[i] ^= (uint8_t)(1 + fsgd_test_rand(&s) % 255);
            int rc = fsgd_codec_decode(copy, m.len, dim, &out, err, sizeof err);
            accepted += rc == 0;
            CU_ASSERT_TRUE(rc < 0 && out.n == 0 && strstr(err, "offset") != NULL);
        }
        for (size_t len = 0; len < m.len; len++) {
            int rc = fsgd_codec_decode(m.dst, len, dim, &out, err, sizeof err);
            accepted += rc == 0;
            CU_ASSERT_TRUE(rc < 0 && strstr(err, "offset") != NULL);
        }
        if (accepted)
            fprintf(stderr, "\n  seed %llu %s: %zu corrupted messages accepted\n", (unsigned long long)seed, spec,
                    accepted);
        free(copy);
        fsgd_codec_destroy(c);
    }
    free(m.dst);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&out);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"fastsgd_properties", test_fastsgd_properties},
        {"optimal_lengths_brute_force", test_optimal_lengths_brute_force},
        {"level_table", test_level_table},
        {"other_codecs", test_other_codecs},
        {"error_feedback", test_error_feedback},
        {"encode_sent_is_decoded", test_encode_sent_is_decoded},
        {"parts_of_whole", test_parts_of_whole},
        {"corruption_rejected", test_corruption_rejected},
        {NULL, NULL},
    };
    fsgd_test_suite("codec_props", cases);
}
