/* Codec API tests: the registry, spec parsing and its errors, the edge cases
 * the FastSGD issue lists, input validation and decoder error messages. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "fsgd/codec.h"
#include "fsgd/crc32c.h"
#include "fsgd/fastsgd.h"
#include "fsgd/le.h"
#include "testlib.h"
#include "codec_testing.h"

static void test_registry_and_specs(void)
{
    char err[256];
    FSGD_ASSERT_CONTAINS(fsgd_codec_list(), "fastsgd");
    static const struct { const char *spec, *canon; int id, lossless; } ok[] = {
        {"fastsgd", "fastsgd:b=1.1,tau=128,l=2,levels=paper,ef=0", 2, 0},
        {"fastsgd:b=1.5,tau=20,l=3,levels=optimal,ef=1", "fastsgd:b=1.5,tau=20,l=3,levels=optimal,ef=1", 2, 0},
        {"none", "none:lz4=0", 1, 1},
        {"none:lz4=1", "none:lz4=1", 1, 1},
        {"logquant:ef=1", "logquant:ef=1", 3, 0},
        {"topk", "topk:k=0,ratio=0.01,ef=1", 4, 0},
        {"topk:k=100", "topk:k=100,ratio=0,ef=1", 4, 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        fsgd_codec_t *c = fsgd_codec_new(ok[i].spec, 1000, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_STRING_EQUAL(fsgd_codec_spec(c), ok[i].canon);
        CU_ASSERT_EQUAL(fsgd_codec_id(c), ok[i].id);
        CU_ASSERT_EQUAL(fsgd_codec_is_lossless(c), ok[i].lossless);
        /* the canonical spec parses to itself */
        fsgd_codec_t *c2 = fsgd_codec_new(fsgd_codec_spec(c), 1000, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c2);
        CU_ASSERT_STRING_EQUAL(fsgd_codec_spec(c2), ok[i].canon);
        fsgd_codec_destroy(c2);
        fsgd_codec_destroy(c);
    }
    static const struct { const char *spec, *msg; } bad[] = {
        {"zip", "unknown codec 'zip'"},
        {"fastsgd:b=1", "parameter b=1 out of range (1"},
        {"fastsgd:b=0.5", "parameter b"},
        {"fastsgd:b=x", "parameter b: 'x' is not a number"},
        {"fastsgd:tau=0", "parameter tau=0 out of range"},
        {"fastsgd:tau=256", "parameter tau=256"},
        {"fastsgd:tau=1.5", "parameter tau: '1.5' is not an integer"},
        {"fastsgd:l=0", "parameter l=0"},
        {"fastsgd:l=6", "parameter l=6"},
        {"fastsgd:levels=best", "parameter levels: 'best' is not one of paper|optimal"},
        {"fastsgd:q=1", "unknown parameter 'q'"},
        {"fastsgd:b", "parameter b: expected b=value"},
        {"fastsgd:b=2,b=3", "parameter b given twice"},
        {"fastsgd:", "empty parameter list"},
        {"fastsgd:b=2,", "trailing ','"},
        {"none:lz4=2", "parameter lz4=2"},
        {"none:ef=1", "unknown parameter 'ef'"},
        {"topk:k=5,ratio=0.1", "give k or ratio, not both"},
        {"topk:ratio=0", "ratio must be in (0, 1]"},
        {"topk:ratio=1.5", "parameter ratio=1.5"},
        {"topk:k=0", "k must be >= 1"},
        {"logquant:ef=2", "parameter ef=2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CU_ASSERT_PTR_NULL(fsgd_codec_new(bad[i].spec, 1000, err, sizeof err));
        FSGD_ASSERT_CONTAINS(err, bad[i].msg);
    }
    CU_ASSERT_PTR_NULL(fsgd_codec_new("fastsgd", 0, err, sizeof err));
    FSGD_ASSERT_CONTAINS(err, "dim 0 out of range");
    CU_ASSERT_PTR_NULL(fsgd_codec_new("fastsgd", (1ull << 32) + 1, err, sizeof err));
    fsgd_codec_t *c = fsgd_codec_new("fastsgd", 1ull << 32, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(c);
    fsgd_codec_destroy(c);
    fsgd_codec_destroy(NULL);
}

/* Encodes and decodes; returns the message length (0 on failure). */
static size_t roundtrip(const char *spec, uint64_t dim, const uint32_t *k, const float *v, size_t n, uint8_t *buf,
                        fsgd_sparse_t *out)
{
    char err[256];
    fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    fsgd_outbuf_t msg = {buf, fsgd_codec_bound(c, n), 0};
    int rc = fsgd_codec_encode(c, k, v, n, &msg, err, sizeof err);
    size_t len = msg.len;
    if (rc)
        fprintf(stderr, "\n  %s: %s\n", spec, err);
    CU_ASSERT_EQUAL(rc, 0);
    rc = fsgd_codec_decode(buf, len, dim, out, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n  %s: %s\n", spec, err);
    CU_ASSERT_EQUAL(rc, 0);
    fsgd_codec_destroy(c);
    return rc ? 0 : len;
}

static void test_fastsgd_edges(void)
{
    uint8_t buf[4096];
    fsgd_sparse_t out = {0};
    /* one element: L = 0, decodes to itself */
    uint32_t k1 = 7;
    float v1 = -0.3f;
    CU_ASSERT_TRUE(roundtrip("fastsgd", 100, &k1, &v1, 1, buf, &out) > 0);
    CU_ASSERT_EQUAL_FATAL(out.n, 1);
    CU_ASSERT_EQUAL(out.keys[0], 7);
    CU_ASSERT_EQUAL(out.vals[0], -0.3f);
    CU_ASSERT_EQUAL(buf[24 + 19], 0); /* lbase */
    CU_ASSERT_EQUAL(buf[24 + 24] & 127, 0);
    /* empty and all-zero (incl. -0.0): nothing sent, a valid message */
    size_t len = roundtrip("fastsgd", 100, NULL, NULL, 0, buf, &out);
    CU_ASSERT_EQUAL(len, 24 + 24 + 4);
    CU_ASSERT_EQUAL(out.n, 0);
    uint32_t kz[3] = {1, 2, 3};
    float vz[3] = {0.0f, -0.0f, 0.0f};
    CU_ASSERT_EQUAL(roundtrip("fastsgd", 100, kz, vz, 3, buf, &out), 24 + 24 + 4);
    CU_ASSERT_EQUAL(out.n, 0);
    /* -0.0 beside real values is dropped like any zero */
    float vm[3] = {1.0f, -0.0f, -2.0f};
    roundtrip("fastsgd", 100, kz, vm, 3, buf, &out);
    CU_ASSERT_EQUAL_FATAL(out.n, 2);
    CU_ASSERT_EQUAL(out.keys[1], 3);
    CU_ASSERT_TRUE(out.vals[1] < 0);
    /* nothing left after the threshold: tau=1, b=2 keeps only |v| >= sum/2 */
    uint32_t kt[4] = {0, 1, 2, 3};
    float vt[4] = {1, 1, 1, 1};
    roundtrip("fastsgd:b=2,tau=1", 100, kt, vt, 4, buf, &out);
    CU_ASSERT_EQUAL(out.n, 0);
    /* the largest delta a power of two: M = bits(2^20) = 21 */
    uint32_t kp[3] = {0, 1u << 20, (1u << 20) + 3};
    float vp[3] = {1, 1, 1};
    roundtrip("fastsgd", 1u << 22, kp, vp, 3, buf, &out);
    CU_ASSERT_EQUAL(buf[24 + 20], 21);
    CU_ASSERT_EQUAL_FATAL(out.n, 3);
    CU_ASSERT_EQUAL(out.keys[1], 1u << 20);
    /* keys near 2^32, a first delta of 2^32 - 1 (M = 32) */
    uint32_t kn[3] = {0, UINT32_MAX - 1, UINT32_MAX};
    float vn[3] = {0.5f, -0.25f, 0.125f};
    for (int l = 1; l <= 5; l++) {
        char spec[64];
        snprintf(spec, sizeof spec, "fastsgd:l=%d", l);
        roundtrip(spec, 1ull << 32, kn, vn, 3, buf, &out);
        CU_ASSERT_EQUAL(buf[24 + 20], 32);
        CU_ASSERT_EQUAL_FATAL(out.n, 3);
        CU_ASSERT_EQUAL(out.keys[1], UINT32_MAX - 1);
        CU_ASSERT_EQUAL(out.keys[2], UINT32_MAX);
        snprintf(spec, sizeof spec, "fastsgd:l=%d,levels=optimal", l);
        roundtrip(spec, 1ull << 32, kn, vn, 3, buf, &out);
        CU_ASSERT_EQUAL_FATAL(out.n, 3);
        CU_ASSERT_EQUAL(out.keys[2], UINT32_MAX);
    }
    /* a single key 0: M = 0, keys are only flags */
    uint32_t k0 = 0;
    float v0 = 3;
    CU_ASSERT_EQUAL(roundtrip("fastsgd", 1, &k0, &v0, 1, buf, &out), 24 + 24 + 4 + 1 + 1);
    CU_ASSERT_EQUAL(out.n, 1);
    /* huge values: the sum saturates at FLT_MAX, values still never overestimated */
    float vh[3] = {FLT_MAX, -FLT_MAX, 1e35f};
    roundtrip("fastsgd", 100, kz, vh, 3, buf, &out);
    CU_ASSERT_EQUAL_FATAL(out.n, 3);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_TRUE(fabsf(out.vals[i]) <= fabsf(vh[i]) && (out.vals[i] < 0) == (vh[i] < 0));
    /* subnormal values */
    float vs[3] = {1e-45f, -3e-44f, 1e-40f};
    roundtrip("fastsgd:b=2,tau=255", 100, kz, vs, 3, buf, &out);
    for (size_t i = 0, j = 0; i < 3 && j < out.n; i++)
        if (out.keys[j] == kz[i]) {
            CU_ASSERT_TRUE(fabsf(out.vals[j]) <= fabsf(vs[i]) && 2 * fabsf(out.vals[j]) > fabsf(vs[i]));
            j++;
        }
    fsgd_sparse_free(&out);
}

static void test_input_errors(void)
{
    char err[256];
    uint8_t buf[1024];
    fsgd_outbuf_t out = {buf, sizeof buf, 99};
    const char *specs[] = {"fastsgd", "none", "none:lz4=1", "logquant", "topk:k=2"};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        fsgd_codec_t *c = fsgd_codec_new(specs[s], 100, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        uint32_t k[3] = {1, 2, 3};
        float v[3] = {1, NAN, 2};
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, v, 3, &out, err, sizeof err), FSGD_E_NONFINITE);
        FSGD_ASSERT_CONTAINS(err, "key 2");
        CU_ASSERT_EQUAL(out.len, 0);
        v[1] = -INFINITY;
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, v, 3, &out, err, sizeof err), FSGD_E_NONFINITE);
        v[1] = 1;
        uint32_t kd[3] = {1, 1, 3};
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, kd, v, 3, &out, err, sizeof err), FSGD_E_ARG);
        FSGD_ASSERT_CONTAINS(err, "not strictly increasing at entry 1");
        uint32_t kb[3] = {1, 2, 100};
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, kb, v, 3, &out, err, sizeof err), FSGD_E_RANGE);
        FSGD_ASSERT_CONTAINS(err, "key 100 >= dim 100");
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, v, 3, &(fsgd_outbuf_t){buf, 20, 0}, err, sizeof err), FSGD_E_NOSPACE);
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, v, 3, &(fsgd_outbuf_t){buf, 40, 0}, err, sizeof err), FSGD_E_NOSPACE);
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, v, 3, &out, err, sizeof err), 0);
        fsgd_codec_destroy(c);
    }
    /* the residual is unchanged by a rejected call */
    fsgd_codec_t *c = fsgd_codec_new("topk:k=1", 100, err, sizeof err);
    uint32_t k[3] = {1, 2, 3};
    float v[3] = {1, 2, 3};
    CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, v, 3, &out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_codec_residual(c)->n, 2);
    v[0] = NAN;
    CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, v, 3, &out, err, sizeof err), FSGD_E_NONFINITE);
    CU_ASSERT_EQUAL(fsgd_codec_residual(c)->n, 2);
    /* value + residual overflowing is an error too */
    float big[3] = {FLT_MAX, FLT_MAX, FLT_MAX};
    CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, big, 3, &out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, big, 3, &out, err, sizeof err), FSGD_E_NONFINITE);
    FSGD_ASSERT_CONTAINS(err, "overflows");
    fsgd_codec_destroy(c);
}

static void test_decoder_errors(void)
{
    char err[256];
    uint8_t buf[1024], bad[1024];
    uint32_t k[3] = {1, 5, 9};
    float v[3] = {1, -2, 3};
    fsgd_sparse_t out = {0};
    size_t len = roundtrip("fastsgd", 100, k, v, 3, buf, &out);
    CU_ASSERT_EQUAL(fsgd_codec_decode(buf, len, 0, &out, err, sizeof err), 0); /* dim 0: the message's */
    CU_ASSERT_EQUAL(fsgd_codec_decode(buf, len, 99, &out, err, sizeof err), FSGD_E_RANGE);
    FSGD_ASSERT_CONTAINS(err, "field dim at offset 8: message dim 100 != expected 99");
    CU_ASSERT_EQUAL(fsgd_codec_decode(buf, 10, 100, &out, err, sizeof err), FSGD_E_TRUNCATED);
    CU_ASSERT_EQUAL(fsgd_codec_decode(buf, len - 1, 100, &out, err, sizeof err), FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, "field body_len at offset 20");
    memcpy(bad, buf, len);
    bad[len] = 0;
    CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len + 1, 100, &out, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "trailing bytes");
    memcpy(bad, buf, len);
    bad[0] = 'X';
    CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len, 100, &out, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "field magic at offset 0");
    memcpy(bad, buf, len);
    bad[4] = 2;
    CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len, 100, &out, err, sizeof err), FSGD_E_VERSION);
    memcpy(bad, buf, len);
    bad[30] ^= 1;
    CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len, 100, &out, err, sizeof err), FSGD_E_CRC);
    FSGD_ASSERT_CONTAINS(err, "field crc32c at offset");
    /* field checks behind a valid CRC: patch, then re-seal */
#define RESEAL(b, n) fsgd_le_put32((b) + (n) - 4, fsgd_crc32c(0, (b), (n) - 4))
    struct { size_t at; uint8_t val; int code; const char *msg; } patches[] = {
        {5, 77, FSGD_E_FORMAT, "field codec_id at offset 5"},
        {6, 1, FSGD_E_FORMAT, "field flags at offset 6"},
        {24 + 16, 0, FSGD_E_FORMAT, "field fastsgd.tau at offset 40"},
        {24 + 17, 6, FSGD_E_FORMAT, "field fastsgd.l at offset 41"},
        {24 + 18, 2, FSGD_E_FORMAT, "field fastsgd.levels at offset 42"},
        {24 + 20, 33, FSGD_E_FORMAT, "field fastsgd.M at offset 44"},
        {24 + 21, 1, FSGD_E_FORMAT, "field fastsgd.reserved at offset 45"},
        {24 + 12, 9, FSGD_E_TRUNCATED, "field fastsgd.key_bytes at offset 36"},
        {24 + 7, 0xff, FSGD_E_FORMAT, "field fastsgd.b at offset 24"},
    };
    for (size_t i = 0; i < sizeof patches / sizeof *patches; i++) {
        memcpy(bad, buf, len);
        bad[patches[i].at] = patches[i].val;
        RESEAL(bad, len);
        CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len, 100, &out, err, sizeof err), patches[i].code);
        FSGD_ASSERT_CONTAINS(err, patches[i].msg);
        CU_ASSERT_EQUAL(out.n, 0);
    }
    /* raw keys out of order / out of range behind a valid CRC (none codec) */
    len = roundtrip("none", 100, k, v, 3, buf, &out);
    memcpy(bad, buf, len);
    fsgd_le_put32(bad + 24 + 12 + 4, 1);
    RESEAL(bad, len);
    CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len, 100, &out, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "field none.keys at offset 40: key 1 not above previous key 1");
    fsgd_le_put32(bad + 24 + 12 + 8, 100);
    fsgd_le_put32(bad + 24 + 12 + 4, 5);
    RESEAL(bad, len);
    CU_ASSERT_EQUAL(fsgd_codec_decode(bad, len, 100, &out, err, sizeof err), FSGD_E_RANGE);
    FSGD_ASSERT_CONTAINS(err, "key 100 >= dim 100");
    /* a forged count cannot make the decoder allocate */
    memcpy(bad, buf, len);
    fsgd_le_put32(bad + 16, 0xFFFFFFF0u);
    fsgd_le_put64(bad + 8, 1ull << 32);
    RESEAL(bad, len);
    CU_ASSERT_TRUE(fsgd_codec_decode(bad, len, 0, &out, err, sizeof err) < 0);
    fsgd_sparse_free(&out);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"registry_and_specs", test_registry_and_specs},
        {"fastsgd_edges", test_fastsgd_edges},
        {"input_errors", test_input_errors},
        {"decoder_errors", test_decoder_errors},
        {NULL, NULL},
    };
    fsgd_test_suite("codec", cases);
}
