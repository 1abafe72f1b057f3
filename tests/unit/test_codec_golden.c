/* Golden files of codec format version 1 (tests/golden/codec/v1): each
 * <name>.bin must keep decoding to what <name>.txt says. The .txt holds the
 * encoded gradient ("in"), the expected decoded vector computed by a plain
 * reference formula in long double ("out", within the level table's float
 * rounding) and the exact floats decoded when the file was made ("dec").
 *
 * FSGD_GOLDEN_WRITE=1 build/unit/test_codec_golden regenerates the files
 * (only ever for a new format version) and the codec fuzz seed corpora. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "fsgd/codec.h"
#include "testlib.h"

#define GOLDEN_DIR "tests/golden/codec/v1"

typedef struct golden_case {
    const char *name, *spec;
    uint64_t dim;
    size_t n;
    int shape;
} golden_case_t;

static const golden_case_t cases_v1[] = {
    {"fastsgd_default", "fastsgd", 1000, 40, 0},
    {"fastsgd_b2_l1", "fastsgd:b=2,tau=20,l=1", 1000000, 30, 1},
    {"fastsgd_optimal_l3", "fastsgd:b=1.1,tau=128,l=3,levels=optimal", 1ull << 32, 50, 2},
    {"fastsgd_single", "fastsgd", 100, 1, 0},
    {"fastsgd_empty", "fastsgd", 100, 0, 0},
    {"none", "none", 500, 20, 0},
    {"none_lz4", "none:lz4=1", 100000, 200, 1},
    {"logquant", "logquant", 5000, 30, 0},
    {"topk", "topk:k=8,ef=0", 3000, 25, 0},
};

static uint64_t g_state;
static uint64_t rnd(void)
{
    uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Deterministic input of a case: shape 0 spread keys, 1 clustered, 2 near 2^32. */
static void make_input(const golden_case_t *gc, uint32_t *k, float *v)
{
    g_state = 0x5EED0000ull + gc->n * 31 + (uint64_t)gc->shape;
    uint64_t key = gc->shape == 2 ? gc->dim - 3 * gc->n : rnd() % 7;
    for (size_t i = 0; i < gc->n; i++) {
        k[i] = (uint32_t)key;
        key += gc->shape == 1 ? 1 + rnd() % 3 : 1 + rnd() % (gc->dim / (gc->n + 1) > 1 ? gc->dim / (gc->n + 1) : 1);
        if (gc->shape == 2)
            key = k[i] + 1 + rnd() % 3;
        double mag = exp(-(double)(rnd() % 1000) / 100.0);
        v[i] = (float)((rnd() & 1) ? -mag : mag);
        if (i % 13 == 5)
            v[i] = 0;
    }
    if (gc->shape == 2 && gc->n)
        k[0] = 3; /* a first delta of almost 2^32 */
}

/* The expected decode from the definitions, in long double. Returns count. */
static size_t reference(const golden_case_t *gc, fsgd_codec_t *c, const uint32_t *k, const float *v, uint32_t *ok,
                        long double *ov)
{
    const char *cs = fsgd_codec_spec(c);
    size_t d = 0;
    if (strncmp(cs, "none", 4) == 0) {
        for (size_t i = 0; i < gc->n; i++) {
            ok[d] = k[i];
            ov[d++] = v[i];
        }
    } else if (strncmp(cs, "fastsgd", 7) == 0) {
        long double b = strtold(strstr(cs, "b=") + 2, NULL), sum = 0;
        int tau = atoi(strstr(cs, "tau=") + 4);
        for (size_t i = 0; i < gc->n; i++)
            sum += fabsl((long double)v[i]);
        long double S = (float)sum, thr = S / powl(b, tau);
        for (size_t i = 0; i < gc->n; i++) {
            long double a = fabsl((long double)v[i]);
            if (a == 0 || a < thr)
                continue;
            long double L = ceill(logl(S / a) / logl(b) - 1e-12L); /* L = ceil(log_b(sum/|v|)) */
            if (L < 0)
                L = 0;
            ok[d] = k[i];
            ov[d++] = (v[i] < 0 ? -1 : 1) * S / powl(b, L);
        }
    } else if (strncmp(cs, "logquant", 8) == 0) {
        long double m = 0;
        for (size_t i = 0; i < gc->n; i++)
            m = fmaxl(m, fabsl((long double)v[i]));
        for (size_t i = 0; i < gc->n; i++) {
            long double a = fabsl((long double)v[i]);
            if (a == 0)
                continue;
            long double e = ceill(log2l(m / a));
            ok[d] = k[i];
            ov[d++] = (v[i] < 0 ? -1 : 1) * ldexpl(m, -(int)e);
        }
    } else { /* topk: the k largest magnitudes, in key order */
        size_t kk = (size_t)atoi(strstr(cs, "k=") + 2);
        for (size_t i = 0; i < gc->n; i++) {
            size_t larger = 0;
            for (size_t j = 0; j < gc->n; j++)
                larger += fabsf(v[j]) > fabsf(v[i]) || (fabsf(v[j]) == fabsf(v[i]) && j < i);
            if (larger < kk && v[i] != 0) {
                ok[d] = k[i];
                ov[d++] = v[i];
            }
        }
    }
    return d;
}

static int near(long double want, float got)
{
    if (want == 0)
        return got == 0;
    return fabsl(((long double)got - want) / want) <= 4e-5L && (got < 0) == (want < 0);
}

static void write_files(void)
{
    char err[256], path[512];
    for (size_t t = 0; t < sizeof cases_v1 / sizeof *cases_v1; t++) {
        const golden_case_t *gc = &cases_v1[t];
        uint32_t k[256], ok[256];
        float v[256];
        long double ov[256];
        make_input(gc, k, v);
        fsgd_codec_t *c = fsgd_codec_new(gc->spec, gc->dim, err, sizeof err);
        uint8_t buf[8192];
        fsgd_outbuf_t msg = {buf, sizeof buf, 0};
        fsgd_sparse_t out = {0};
        if (!c || fsgd_codec_encode(c, k, v, gc->n, &msg, err, sizeof err) != 0 ||
            fsgd_codec_decode(buf, msg.len, gc->dim, &out, err, sizeof err) != 0) {
            fprintf(stderr, "golden %s: %s\n", gc->name, err);
            exit(1);
        }
        size_t len = msg.len;
        size_t d = reference(gc, c, k, v, ok, ov);
        if (d != out.n) {
            fprintf(stderr, "golden %s: reference keeps %zu, codec %zu\n", gc->name, d, out.n);
            exit(1);
        }
        for (size_t i = 0; i < d; i++)
            if (ok[i] != out.keys[i] || !near(ov[i], out.vals[i])) {
                fprintf(stderr, "golden %s: entry %zu differs from the reference\n", gc->name, i);
                exit(1);
            }
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.bin", gc->name);
        fsgd_test_write_file(path, buf, len);
        snprintf(path, sizeof path, "tests/fuzz/corpus/codec/golden_%s", gc->name);
        fsgd_test_write_file(path, buf, len);
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.txt", gc->name);
        FILE *f = fopen(path, "w");
        fprintf(f, "# fsgd codec golden file, format version 1 (see test_codec_golden.c)\n");
        fprintf(f, "spec %s\ndim %llu\nbytes %zu\n", fsgd_codec_spec(c), (unsigned long long)gc->dim, len);
        for (size_t i = 0; i < gc->n; i++)
            fprintf(f, "in %u %a\n", k[i], (double)v[i]);
        for (size_t i = 0; i < d; i++)
            fprintf(f, "out %u %.12Lg\n", ok[i], ov[i]);
        for (size_t i = 0; i < out.n; i++)
            fprintf(f, "dec %u %a\n", out.keys[i], (double)out.vals[i]);
        fclose(f);
        fsgd_sparse_free(&out);
        fsgd_codec_destroy(c);
    }
    /* round-trip fuzzer seeds: spec byte, dim byte, steps byte, then 6-byte entries */
    for (int s = 0; s < 12; s++) {
        uint8_t seed[3 + 6 * 16];
        g_state = 77 + (uint64_t)s;
        seed[0] = (uint8_t)s;
        seed[1] = (uint8_t)(s % 6);
        seed[2] = (uint8_t)s;
        for (int i = 0; i < 16; i++) {
            uint16_t gap = (uint16_t)(rnd() % 50);
            float val = (float)((double)(rnd() % 2000) / 1000.0 - 1.0);
            memcpy(seed + 3 + 6 * i, &gap, 2);
            memcpy(seed + 5 + 6 * i, &val, 4);
        }
        snprintf(path, sizeof path, "tests/fuzz/corpus/codec_roundtrip/seed_%02d", s);
        fsgd_test_write_file(path, seed, sizeof seed);
    }
    printf("golden files written to " GOLDEN_DIR "\n");
}

static void test_golden_v1(void)
{
    char path[512], err[256], line[256];
    for (size_t t = 0; t < sizeof cases_v1 / sizeof *cases_v1; t++) {
        const golden_case_t *gc = &cases_v1[t];
        size_t len = 0;
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.bin", gc->name);
        uint8_t *bin = fsgd_test_read_file(path, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(bin);
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.txt", gc->name);
        FILE *f = fopen(path, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fsgd_sparse_t out = {0}, in = {0};
        fsgd_sparse_reserve(&in, 256);
        uint64_t dim = 0;
        char spec[200] = "";
        uint32_t ok[256], dk[256];
        long double ov[256];
        float dv[256];
        size_t no = 0, nd = 0;
        while (fgets(line, sizeof line, f)) {
            unsigned key;
            char val[64];
            if (sscanf(line, "spec %199s", spec) == 1 || sscanf(line, "dim %llu", (unsigned long long *)&dim) == 1)
                continue;
            if (sscanf(line, "in %u %63s", &key, val) == 2) {
                in.keys[in.n] = key;
                in.vals[in.n++] = strtof(val, NULL);
            } else if (sscanf(line, "out %u %63s", &key, val) == 2) {
                ok[no] = key;
                ov[no++] = strtold(val, NULL);
            } else if (sscanf(line, "dec %u %63s", &key, val) == 2) {
                dk[nd] = key;
                dv[nd++] = strtof(val, NULL);
            }
        }
        fclose(f);
        CU_ASSERT_EQUAL(dim, gc->dim);
        int rc = fsgd_codec_decode(bin, len, dim, &out, err, sizeof err);
        if (rc)
            fprintf(stderr, "\n  %s: %s\n", gc->name, err);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        CU_ASSERT_EQUAL_FATAL(out.n, no);
        CU_ASSERT_EQUAL_FATAL(out.n, nd);
        for (size_t i = 0; i < out.n; i++) {
            CU_ASSERT_EQUAL(out.keys[i], ok[i]);
            CU_ASSERT_EQUAL(out.keys[i], dk[i]);
            CU_ASSERT_TRUE(near(ov[i], out.vals[i]));
            CU_ASSERT_EQUAL(out.vals[i], dv[i]);
        }
        /* the encoder still writes the same bytes for the same input */
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        uint8_t buf[8192];
        size_t len2 = 0;
        fsgd_outbuf_t ob2 = {buf, sizeof buf, 0};
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, in.keys, in.vals, in.n, &ob2, err, sizeof err), 0);
        len2 = ob2.len;
        CU_ASSERT_TRUE(len2 == len && memcmp(buf, bin, len) == 0);
        fsgd_codec_destroy(c);
        fsgd_sparse_free(&out);
        fsgd_sparse_free(&in);
        free(bin);
    }
}

void fsgd_test_register(void)
{
    if (getenv("FSGD_GOLDEN_WRITE")) {
        write_files();
        exit(0);
    }
    static const fsgd_test_case_t cases[] = {
        {"golden_v1", test_golden_v1},
        {NULL, NULL},
    };
    fsgd_test_suite("codec_golden", cases);
}
