/* Codec and strategy efsign (codec/efsign.c, strategy/efsign.c), through the
 * public APIs with P simulated workers, one aggregator and the downlink:
 * - the codec is the blockwise compressor ||p_G||_1/|G| · sign(p_G) and costs
 *   1 bit per entry + 32 bits per block + the key block, both directions;
 * - the worker's error feedback is exactly p − C(p) (a reference
 *   implementation of Algorithm 4 in the test reproduces every uplink
 *   message byte for byte, which it can only do while its residual equals
 *   the worker's), and a message not applied leaves no trace;
 * - the aggregator's error θ − ρ is the paper's ẽ (θ − ρ after the downlink
 *   = Δ − C(Δ) with Δ = θ − ρ before it, to float rounding);
 * - malformed messages are refused naming the field. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/codec.h"
#include "fsgd/crc32c.h"
#include "fsgd/downlink.h"
#include "fsgd/error.h"
#include "fsgd/keys.h"
#include "fsgd/le.h"
#include "fsgd/reduce.h"
#include "fsgd/strategy.h"
#include "testlib.h"
#include "codec_testing.h"
#include "strategy_testing.h"

#define DIM 4000
#define P 3
#define B 16

static float frand(uint64_t *s) { return (float)((double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0) * 2 - 1; }

static size_t rand_grad(uint64_t *s, uint32_t *keys, float *vals, size_t n)
{
    size_t m = 0;
    for (uint32_t k = 0; k < DIM; k++)
        if (fsgd_test_rand(s) % DIM < n) {
            keys[m] = k;
            vals[m++] = frand(s) * 3;
        }
    return m;
}

/* Body size of an efsign message of count entries: exactly 12 + key blocks +
 * class ids (layout 0 only) + 4·nb + ceil(count/8), with ceil(count/B) <= nb
 * <= that + C - 1. Returns the key bytes; *value_bits gets the bits spent on
 * values. */
static uint32_t check_size_bits(const uint8_t *msg, size_t len, size_t count, size_t block, double *value_bits)
{
    uint32_t klen = fsgd_le_get32(msg + 24 + 4), C = msg[24 + 8], cb = 0;
    while ((1u << cb) < C && msg[24 + 9] == 0) /* layout 1: the key order carries the classes */
        cb++;
    size_t rest = len - 24 - 12 - klen - 4 - (count * cb + 7) / 8 - (count + 7) / 8, nb = rest / 4;
    CU_ASSERT_EQUAL(rest % 4, 0);
    CU_ASSERT(nb >= (count + block - 1) / block && nb <= (count + block - 1) / block + C - 1);
    CU_ASSERT_EQUAL(fsgd_le_get32(msg + 16), count);
    if (value_bits)
        *value_bits = 8.0 * (double)((count * cb + 7) / 8 + (count + 7) / 8) + 32.0 * (double)nb;
    return klen;
}

static uint32_t check_size(const uint8_t *msg, size_t len, size_t count, size_t block)
{
    return check_size_bits(msg, len, count, block, NULL);
}

/* The definition: C magnitude classes (binary exponent below the largest),
 * each class's nonzero entries in key order in blocks of B, every entry
 * decoding to ±(its block's mean |v|). */
static void check_definition(const uint32_t *keys, const float *vals, size_t n, size_t blk, uint32_t C,
                             const fsgd_sparse_t *dec)
{
    float vmax = 0;
    for (size_t i = 0; i < n; i++)
        vmax = fmaxf(vmax, fabsf(vals[i]));
    int emax;
    frexpf(vmax, &emax);
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        if (vals[i] != 0) {
            CU_ASSERT_EQUAL(dec->keys[d], keys[i]);
            d++;
        }
    CU_ASSERT_EQUAL_FATAL(d, dec->n);
    for (uint32_t c = 0; c < C; c++) {
        size_t in_block = 0;
        double l1 = 0;
        size_t members[64]; /* blk <= 64 */
        size_t nm = 0;
        for (size_t i = 0; i <= n; i++) {
            int member = 0;
            if (i < n && vals[i] != 0) {
                int e;
                frexpf(vals[i], &e);
                int k = emax - e < 0 ? 0 : emax - e;
                member = (uint32_t)(k >= (int)C ? (int)C - 1 : k) == c;
            }
            if (member) {
                l1 += fabs(vals[i]);
                members[nm++] = i;
                in_block++;
            }
            if ((in_block == blk || (i == n && in_block)) && nm) {
                float scale = (float)(l1 / (double)in_block);
                for (size_t q = 0; q < nm; q++) {
                    size_t at = 0; /* position of members[q] among the nonzero entries */
                    for (size_t r = 0; r < members[q]; r++)
                        at += vals[r] != 0;
                    CU_ASSERT_EQUAL(dec->vals[at], vals[members[q]] < 0 ? -scale : scale);
                }
                in_block = 0;
                nm = 0;
                l1 = 0;
            }
        }
    }
}

static void test_codec_blockwise(void)
{
    uint64_t s = fsgd_test_seed() ^ 0xE5;
    char err[256];
    const char *specs[] = {"efsign:block=5,classes=1", "efsign:block=5,classes=4", "efsign:block=3,classes=16",
                           "efsign:block=5,classes=4,layout=ids", "efsign:block=3,classes=16,layout=ids"};
    const uint32_t Cs[] = {1, 4, 16, 4, 16};
    static uint32_t keys[DIM];
    static float vals[DIM];
    fsgd_sparse_t dec = {0};
    for (int sp = 0; sp < 5; sp++) {
        fsgd_codec_t *c = fsgd_codec_new(specs[sp], DIM, err, sizeof err);
        CU_ASSERT_FATAL(c != NULL);
        for (int t = 0; t < 30; t++) {
            size_t n = rand_grad(&s, keys, vals, 1 + t * 7);
            for (size_t i = 0; i < n; i++) /* magnitudes over 2^-12 .. 2^2 */
                vals[i] = ldexpf(vals[i], -(int)(fsgd_test_rand(&s) % 12));
            if (n > 3)
                vals[n / 2] = 0; /* an exact zero is not sent */
            size_t cap = fsgd_codec_bound(c, n), len;
            uint8_t *msg = malloc(cap);
            fsgd_outbuf_t ob = {msg, cap, 0};
            CU_ASSERT_EQUAL_FATAL(fsgd_codec_encode(c, keys, vals, n, &ob, err, sizeof err), 0);
            len = ob.len;
            CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg, len, DIM, &dec, err, sizeof err), 0);
            size_t nz = 0;
            for (size_t i = 0; i < n; i++)
                nz += vals[i] != 0;
            CU_ASSERT_EQUAL_FATAL(dec.n, nz);
            double vbits = 0;
            size_t blk = sp == 2 || sp == 4 ? 3 : 5;
            check_size_bits(msg, len, nz, blk, &vbits);
            fsgd_codec_stats_t st;
            fsgd_codec_last_stats(c, &st);
            CU_ASSERT_EQUAL(st.value_bits, (uint64_t)vbits);
            CU_ASSERT_EQUAL(st.key_bits, 8 * (uint64_t)fsgd_le_get32(msg + 28));
            if (sp == 0) /* key-order blocks: exactly 1 bit per entry (bytes rounded) + 32 per block */
                CU_ASSERT_EQUAL(st.value_bits, 8 * ((nz + 7) / 8) + 32 * ((nz + 4) / 5));
            if (sp < 3) /* layout=keys: 1 bit per entry + 32 per block, one short block per class at most */
                CU_ASSERT(st.value_bits <= 8 * ((nz + 7) / 8) + 32 * ((nz + blk - 1) / blk + Cs[sp] - 1));
            check_definition(keys, vals, n, blk, Cs[sp], &dec);
            free(msg);
        }
        fsgd_codec_destroy(c);
    }
    fsgd_sparse_free(&dec);
}

static void test_codec_rejects_malformed(void)
{
    char err[256];
    fsgd_codec_t *c = fsgd_codec_new("efsign:block=4,classes=1", 1000, err, sizeof err);
    uint32_t keys[11] = {1, 2, 3, 50, 51, 90, 200, 300, 301, 302, 999};
    float vals[11] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11};
    uint8_t msg[512], bad[512];
    size_t len;
    fsgd_outbuf_t ob = {msg, sizeof msg, 0};
    CU_ASSERT_EQUAL_FATAL(fsgd_codec_encode(c, keys, vals, 11, &ob, err, sizeof err), 0);
    len = ob.len;
    fsgd_sparse_t dec = {0};
    for (size_t cut = 0; cut < len; cut++)
        CU_ASSERT(fsgd_codec_decode(msg, cut, 1000, &dec, err, sizeof err) < 0);
    /* body fields with the CRC fixed up, so the body checks are reached */
    struct { size_t at; uint32_t v; const char *field; } cases[] = {
        {24, 0, "efsign.block"},           {24, 3, "count"},
        {28, 1000, "efsign.key_bytes"},    {36, 10, "efsign.keys"},
        {32, 17, "efsign.classes"},        {32, 1 | 1 << 8, "efsign.layout"},
        {32, 1 | 1 << 16, "efsign.reserved"},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        memcpy(bad, msg, len);
        fsgd_le_put32(bad + cases[t].at, cases[t].v);
        fsgd_le_put32(bad + len - 4, fsgd_crc32c(0, bad, len - 4));
        CU_ASSERT(fsgd_codec_decode(bad, len, 1000, &dec, err, sizeof err) < 0);
        FSGD_ASSERT_CONTAINS(err, cases[t].field);
    }
    /* a negative scale, and a padding sign bit */
    uint32_t klen = fsgd_le_get32(msg + 28);
    memcpy(bad, msg, len);
    bad[24 + 12 + klen + 3] |= 0x80;
    fsgd_le_put32(bad + len - 4, fsgd_crc32c(0, bad, len - 4));
    CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len, 1000, &dec, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "efsign.scale");
    memcpy(bad, msg, len);
    bad[len - 5] |= 0x80; /* 11 entries: bits 3..7 of the last sign byte are padding */
    fsgd_le_put32(bad + len - 4, fsgd_crc32c(0, bad, len - 4));
    CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len, 1000, &dec, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "efsign.signs");
    fsgd_sparse_free(&dec);
    fsgd_codec_destroy(c);
}

/* layout=keys (the default) and layout=ids carry the same partition: the
 * same input decodes to the same entries, bit for bit; only the bytes
 * differ (class ids per entry against one key block per class). */
static void test_codec_layouts_agree(void)
{
    uint64_t s = fsgd_test_seed() ^ 0x1A7;
    char err[256];
    static uint32_t keys[DIM];
    static float vals[DIM];
    fsgd_sparse_t d1 = {0}, d2 = {0};
    fsgd_codec_t *ck = fsgd_codec_new("efsign:block=7,classes=4", DIM, err, sizeof err);
    fsgd_codec_t *ci = fsgd_codec_new("efsign:block=7,classes=4,layout=ids", DIM, err, sizeof err);
    CU_ASSERT_FATAL(ck && ci);
    for (int t = 0; t < 40; t++) {
        size_t n = rand_grad(&s, keys, vals, 1 + t * 50);
        for (size_t i = 0; i < n; i++)
            vals[i] = ldexpf(vals[i], -(int)(fsgd_test_rand(&s) % 8));
        size_t cap = fsgd_codec_bound(ck, n) + fsgd_codec_bound(ci, n), l1 = 0, l2 = 0;
        uint8_t *m1 = malloc(cap), *m2 = malloc(cap);
        fsgd_outbuf_t ob1 = {m1, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_encode(ck, keys, vals, n, &ob1, err, sizeof err), 0);
        l1 = ob1.len;
        fsgd_outbuf_t ob2 = {m2, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_encode(ci, keys, vals, n, &ob2, err, sizeof err), 0);
        l2 = ob2.len;
        CU_ASSERT(l1 <= fsgd_codec_bound(ck, n));
        CU_ASSERT_EQUAL(m1[24 + 9], 1);
        CU_ASSERT_EQUAL(m2[24 + 9], 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(m1, l1, DIM, &d1, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(m2, l2, DIM, &d2, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(d1.n, d2.n);
        CU_ASSERT(d1.n == 0 || /* empty: NULL arrays, and memcmp(NULL, NULL, 0) is undefined */
                  (!memcmp(d1.keys, d2.keys, d1.n * 4) && !memcmp(d1.vals, d2.vals, d1.n * 4)));
        check_definition(keys, vals, n, 7, 4, &d1);
        free(m1);
        free(m2);
    }
    fsgd_codec_destroy(ck);
    fsgd_codec_destroy(ci);
    fsgd_sparse_free(&d1);
    fsgd_sparse_free(&d2);
}

/* A message of layout 1 written by hand: C = 2, class 0 holds keys ck0,
 * class 1 keys ck1, block B = 4, all signs positive, scales 1. */
static size_t hand_message(uint8_t *msg, const uint32_t *ck0, size_t n0, const uint32_t *ck1, size_t n1)
{
    char err[128];
    uint8_t *body = msg + 24;
    size_t k0 = 0, k1 = 0;
    CU_ASSERT_EQUAL_FATAL(fsgd_keys_encode(ck0, n0, body + 12, 256, &k0, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_keys_encode(ck1, n1, body + 12 + k0, 256, &k1, err, sizeof err), 0);
    size_t nb = (n0 + 3) / 4 + (n1 + 3) / 4, count = n0 + n1, blen = 12 + k0 + k1 + 4 * nb + (count + 7) / 8;
    fsgd_le_put32(body, 4);
    fsgd_le_put32(body + 4, (uint32_t)(k0 + k1));
    body[8] = 2;
    body[9] = 1;
    body[10] = body[11] = 0;
    for (size_t b = 0; b < nb; b++)
        fsgd_le_putf32(body + 12 + k0 + k1 + 4 * b, 1.0f);
    memset(body + 12 + k0 + k1 + 4 * nb, 0, (count + 7) / 8);
    memcpy(msg, "FSGC", 4);
    msg[4] = 1;
    msg[5] = 5;
    msg[6] = msg[7] = 0;
    fsgd_le_put64(msg + 8, 1000);
    fsgd_le_put32(msg + 16, (uint32_t)count);
    fsgd_le_put32(msg + 20, (uint32_t)blen);
    fsgd_le_put32(msg + 24 + blen, fsgd_crc32c(0, msg, 24 + blen));
    return 24 + blen + 4;
}

static void test_codec_layout_keys_malformed(void)
{
    char err[256];
    uint8_t msg[1024];
    fsgd_sparse_t dec = {0};
    const uint32_t a[] = {5, 9, 40}, b[] = {7, 300};
    size_t len = hand_message(msg, a, 3, b, 2);
    CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg, len, 1000, &dec, err, sizeof err), 0);
    const uint32_t want[] = {5, 7, 9, 40, 300}; /* merged into key order */
    CU_ASSERT_EQUAL_FATAL(dec.n, 5);
    CU_ASSERT(!memcmp(dec.keys, want, sizeof want));
    const uint32_t dup[] = {9};
    len = hand_message(msg, a, 3, dup, 1); /* key 9 in both classes */
    CU_ASSERT_EQUAL(fsgd_codec_decode(msg, len, 1000, &dec, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "two classes");
    /* count says one key more than the key blocks hold */
    len = hand_message(msg, a, 3, b, 2);
    fsgd_le_put32(msg + 16, 6);
    fsgd_le_put32(msg + len - 4, fsgd_crc32c(0, msg, len - 4));
    CU_ASSERT(fsgd_codec_decode(msg, len, 1000, &dec, err, sizeof err) < 0);
    fsgd_sparse_free(&dec);
}

/* The reference worker: Algorithm 4 lines 5-9 in the same float operations
 * as strategy/efsign.c (lazy=1: over the gradient's keys, momentum decayed
 * by mu^(gap-1) for the steps a key was absent; lazy=0: every key with m or e). */
typedef struct ref {
    float m[DIM], e[DIM];
    uint32_t last[DIM], t; /* lazy: the decay of momentum over the steps a key was not touched */
} ref_t;

static void run_two_way(int lazy)
{
    uint64_t s = fsgd_test_seed() ^ (0xEF + (uint64_t)lazy);
    const float mu = 0.9f, lr = 0.05f;
    char spec[96], err[256];
    snprintf(spec, sizeof spec, "efsign:block=%d,mu=0.9,lr=0.05,lazy=%d", B, lazy);
    fsgd_sworker_t *w[P];
    ref_t *ref = calloc(P, sizeof *ref);
    for (int i = 0; i < P; i++)
        CU_ASSERT_FATAL((w[i] = fsgd_sworker_new(spec, DIM, 1, err, sizeof err)) != NULL);
    fsgd_sagg_t *a = fsgd_sagg_new(spec, DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT_EQUAL(fsgd_sagg_optimizer(a), FSGD_OPT_APPLY);
    const char *dspec = fsgd_sagg_downlink_spec(a);
    CU_ASSERT_FATAL(dspec != NULL);
    CU_ASSERT_STRING_EQUAL(dspec, "efsign:block=16");
    float *theta = calloc(DIM, sizeof *theta), *before = malloc(DIM * sizeof *before);
    fsgd_downlink_t *dl = fsgd_downlink_new(dspec, DIM, theta, err, sizeof err);
    CU_ASSERT_FATAL(dl != NULL);
    char cs[64];
    snprintf(cs, sizeof cs, "efsign:block=%d,classes=4,ef=0", B);
    fsgd_codec_t *rc = fsgd_codec_new(cs, DIM, err, sizeof err);
    uint32_t *keys = malloc(DIM * 4), *pk = malloc(DIM * 4);
    float *vals = malloc(DIM * 4), *pv = malloc(DIM * 4);
    size_t cap = 64 + 2 * fsgd_codec_bound(rc, DIM);
    uint8_t *msg = malloc(cap), *rmsg = malloc(cap), *down = malloc(cap);
    fsgd_sparse_t dec = {0};
    int mismatch = 0;
    double worst_server = 0;
    for (int step = 0; step < 60; step++) {
        for (int i = 0; i < P; i++) {
            size_t n = rand_grad(&s, keys, vals, 150), len = 0, rlen = 0;
            uint64_t rows = 1 + fsgd_test_rand(&s) % 4;
            fsgd_outbuf_t ob = {msg, cap, 0};
            CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w[i], keys, vals, n, rows, &ob, err, sizeof err), 0);
            len = ob.len;
            /* the reference, over K = keys(g) (lazy) or every key with m or e nonzero */
            size_t nk = 0, gi = 0;
            ref[i].t++;
            for (uint32_t k = 0; k < DIM; k++) {
                int in_g = gi < n && keys[gi] == k;
                if (!in_g && (lazy || (ref[i].m[k] == 0 && ref[i].e[k] == 0)))
                    continue;
                float g = in_g ? (float)(vals[gi++] * (1.0 / (double)rows)) : 0;
                float md = ref[i].m[k];
                if (lazy) {
                    uint32_t gap = ref[i].last[k] ? ref[i].t - ref[i].last[k] : 1;
                    if (gap > 1 && md != 0)
                        md *= powf(mu, (float)(gap - 1));
                    ref[i].last[k] = ref[i].t;
                }
                float mn = mu * md + g;
                pk[nk] = k;
                pv[nk++] = lr * (mu * mn + g) + ref[i].e[k];
                ref[i].m[k] = mn;
            }
            fsgd_outbuf_t obr = {rmsg, cap, 0};
            CU_ASSERT_EQUAL_FATAL(fsgd_codec_encode(rc, pk, pv, nk, &obr, err, sizeof err), 0);
            rlen = obr.len;
            if (rlen != len || memcmp(rmsg, msg, len))
                mismatch++;
            CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg, len, DIM, &dec, err, sizeof err), 0);
            double vbits = 0;
            size_t klen = check_size_bits(msg, len, dec.n, B, &vbits);
            /* the default (4 classes in the key order): 1 sign bit per entry + 32 per block (+ rounding,
             * + one short block per class), the paper's 1 + 32/B */
            CU_ASSERT(vbits <= 1.0 * dec.n + 7 + 32.0 * ((dec.n + B - 1) / B + 3));
            CU_ASSERT(8.0 * (double)(len - 24 - 4 - 12) <= vbits + 8.0 * klen);
            for (size_t t = 0, d = 0; t < nk; t++) { /* e = p − C(p) */
                float c = d < dec.n && dec.keys[d] == pk[t] ? dec.vals[d++] : 0;
                ref[i].e[pk[t]] = pv[t] - c;
            }
            size_t nres = 0;
            for (uint32_t k = 0; k < DIM; k++)
                nres += ref[i].e[k] != 0;
            CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w[i]), nres);
            CU_ASSERT_EQUAL_FATAL(fsgd_sagg_add(a, (uint32_t)i, msg, len, 1e30, NULL, err, sizeof err), 0);
        }
        fsgd_reducer_t *r = fsgd_sagg_take(a, NULL, err, sizeof err);
        CU_ASSERT_FATAL(r != NULL);
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_take(r, 1.0 / P, &dec), 0); /* the average */
        for (size_t t = 0; t < dec.n; t++) /* FSGD_OPT_APPLY */
            theta[dec.keys[t]] -= dec.vals[t];
        /* the server: Δ = θ − ρ over the touched keys, compressed, ρ += C(Δ) */
        const float *rho = fsgd_downlink_replica(dl);
        memcpy(before, rho, DIM * sizeof *before);
        size_t dlen = 0, nt = dec.n;
        memcpy(pk, dec.keys, nt * 4);
        fsgd_outbuf_t obd = {down, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_downlink_encode(dl, theta, pk, nt, 0, &obd, err, sizeof err), 0);
        dlen = obd.len;
        const fsgd_sparse_t *u = fsgd_downlink_last(dl);
        check_size(down, dlen, u->n, B);
        /* ẽ' = Δ − C(Δ): θ − ρ after = (θ − ρ before) − decoded downlink */
        for (size_t t = 0; t < u->n; t++) {
            uint32_t k = u->keys[t];
            double want = ((double)theta[k] - before[k]) - u->vals[t], got = (double)theta[k] - rho[k];
            /* in units of the float rounding of ρ + C(Δ) */
            double e = fabs(want - got) / (ldexp(fabs((double)rho[k]) + fabs((double)theta[k]), -23) + 1e-30);
            worst_server = e > worst_server ? e : worst_server;
        }
        for (int i = 0; i < P; i++)
            CU_ASSERT_EQUAL(fsgd_sworker_after_step(w[i], 1, NULL, 0, err, sizeof err), 0);
    }
    CU_ASSERT_EQUAL(mismatch, 0);
    CU_ASSERT(worst_server <= 2);
    if (worst_server > 2)
        fprintf(stderr, "\n  server EF off by %g ulp\n", worst_server);
    /* a message not applied: momentum and residual as before it */
    size_t n = rand_grad(&s, keys, vals, 150);
    size_t before_res = fsgd_sworker_residual_entries(w[0]);
    fsgd_outbuf_t first = {msg, cap, 0}, again = {rmsg, cap, 0};
    CU_ASSERT_EQUAL(fsgd_sworker_encode(w[0], keys, vals, n, 1, &first, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w[0], 0, NULL, 0, err, sizeof err), 1);
    CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w[0]), before_res);
    CU_ASSERT_EQUAL(fsgd_sworker_encode(w[0], keys, vals, n, 1, &again, err, sizeof err), 0);
    /* the same step again gives the same message */
    CU_ASSERT(first.len == again.len && !memcmp(msg, rmsg, first.len));
    for (int i = 0; i < P; i++)
        fsgd_sworker_destroy(w[i]);
    fsgd_sagg_destroy(a);
    fsgd_downlink_destroy(dl);
    fsgd_codec_destroy(rc);
    fsgd_sparse_free(&dec);
    free(ref);
    free(theta);
    free(before);
    free(keys);
    free(pk);
    free(vals);
    free(pv);
    free(msg);
    free(rmsg);
    free(down);
}

static void test_two_way_lazy(void) { run_two_way(1); }
static void test_two_way_dense(void) { run_two_way(0); }

static void test_spec_errors(void)
{
    char err[256];
    CU_ASSERT_EQUAL(fsgd_strategy_check("efsign", 100, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("efsign:block=64,mu=0.5,lr=0.2,lazy=0", 100, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("efsign:mu=1", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "mu");
    CU_ASSERT_EQUAL(fsgd_strategy_check("efsign:block=0", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "block");
    CU_ASSERT_EQUAL(fsgd_strategy_check("efsign:ef=1", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "ef");
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"codec: blockwise mean |v| with signs, 1 bit per entry + 32 per block", test_codec_blockwise},
        {"codec: malformed messages refused naming the field", test_codec_rejects_malformed},
        {"codec: classes in the key order decode as with class ids", test_codec_layouts_agree},
        {"codec: key blocks per class merged, a key in two classes refused", test_codec_layout_keys_malformed},
        {"3 workers, lazy: worker EF = p − C(p) (reference byte for byte), server EF = Δ − C(Δ)",
         test_two_way_lazy},
        {"3 workers, dense momentum (paper verbatim): the same", test_two_way_dense},
        {"spec errors name the parameter", test_spec_errors},
        {NULL, NULL},
    };
    fsgd_test_suite("strategy efsign", cases);
}
