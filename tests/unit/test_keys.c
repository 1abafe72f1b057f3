/* fsgd/keys.h: lossless key coding round trips over random, dense, sparse
 * and edge-case key sets; every truncation and corrupted field is rejected;
 * the block is compact (runs of consecutive keys cost bits, not bytes). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/keys.h"
#include "fsgd/le.h"
#include "testlib.h"

static int roundtrip(const uint32_t *keys, size_t n, uint64_t dim, size_t *blen)
{
    size_t cap = fsgd_keys_bound(n), len = 0;
    uint8_t *buf = malloc(cap);
    uint32_t *out = malloc((n ? n : 1) * sizeof *out);
    char err[256];
    int ok = buf && out && fsgd_keys_encode(keys, n, buf, cap, &len, err, sizeof err) == 0 && len <= cap;
    uint32_t m = 0, peeked = 0;
    size_t used = 0;
    ok = ok && fsgd_keys_decode(buf, len, dim, out, n, &m, err, sizeof err) == 0;
    ok = ok && m == n && (n == 0 || memcmp(out, keys, n * sizeof *keys) == 0);
    ok = ok && fsgd_keys_peek(buf, len, dim, &peeked, &used, err, sizeof err) == 0 && peeked == n && used == len;
    /* a block followed by other bytes decodes the same, and peek says its size */
    if (ok && len + 3 <= cap) {
        memset(buf + len, 0xAB, 3);
        ok = fsgd_keys_decode(buf, len + 3, dim, out, n, &m, err, sizeof err) == 0 && m == n &&
             fsgd_keys_peek(buf, len + 3, dim, &peeked, &used, err, sizeof err) == 0 && used == len;
    }
    if (blen)
        *blen = len;
    free(buf);
    free(out);
    return ok;
}

static void test_keys_roundtrip(void)
{
    uint64_t s = fsgd_test_seed();
    uint32_t *k = malloc(200000 * sizeof *k);
    CU_ASSERT_FATAL(k != NULL);
    CU_ASSERT(roundtrip(k, 0, 1, NULL));
    k[0] = 0;
    CU_ASSERT(roundtrip(k, 1, 1, NULL));
    k[0] = UINT32_MAX;
    CU_ASSERT(roundtrip(k, 1, (uint64_t)1 << 32, NULL));
    k[0] = 0;
    k[1] = UINT32_MAX;
    CU_ASSERT(roundtrip(k, 2, (uint64_t)1 << 32, NULL));
    for (int trial = 0; trial < 300; trial++) {
        uint64_t dim = 1 + fsgd_test_rand(&s) % (trial < 100 ? 1000 : trial < 200 ? 1000000 : 4000000000ull);
        /* density from 1e-4 to 1 */
        double dens = trial % 7 == 0 ? 1.0 : 1.0 / (double)(1 + fsgd_test_rand(&s) % 10000);
        size_t n = 0;
        for (uint64_t key = fsgd_test_rand(&s) % 3; key < dim && n < 200000; key++) {
            if (dens < 1.0 && (double)(fsgd_test_rand(&s) % 1000000) / 1e6 >= dens) {
                /* skip ahead geometrically in sparse sets */
                key += fsgd_test_rand(&s) % (uint64_t)(2.0 / dens + 1);
                if (key >= dim)
                    break;
            }
            k[n++] = (uint32_t)key;
        }
        size_t len;
        CU_ASSERT(roundtrip(k, n, dim, &len));
        if (!roundtrip(k, n, dim, &len))
            fprintf(stderr, "keys roundtrip failed: trial %d n %zu dim %llu\n", trial, n, (unsigned long long)dim);
    }
    /* a dense run costs l = 1 bit per key: far below 4 bytes */
    for (size_t i = 0; i < 100000; i++)
        k[i] = (uint32_t)(5000 + i);
    size_t len;
    CU_ASSERT(roundtrip(k, 100000, 1 << 20, &len));
    CU_ASSERT(len <= 100000 / 8 + 64);
    /* 10% of 2^20: about log2(10) + 1 bits per key, ~3.3x below raw u32 */
    size_t n = 0;
    for (uint32_t key = 0; key < (1u << 20); key++)
        if (fsgd_test_rand(&s) % 10 == 0)
            k[n++] = key;
    CU_ASSERT(roundtrip(k, n, 1 << 20, &len));
    CU_ASSERT(len * 8 < n * 7);
    fprintf(stderr, "[keys: 10%% of 2^20: %.2f bits per key] ", len * 8.0 / (double)n);
    free(k);
}

static void test_keys_rejects(void)
{
    uint32_t keys[64];
    for (int i = 0; i < 64; i++)
        keys[i] = (uint32_t)(i * i * 3 + (i & 1));
    uint8_t buf[512], bad[512];
    uint32_t out[64], m;
    size_t len;
    char err[256];
    CU_ASSERT_EQUAL(fsgd_keys_encode(keys, 64, buf, sizeof buf, &len, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_keys_decode(buf, len, 20000, out, 64, &m, err, sizeof err), 0);
    /* every truncation */
    for (size_t k = 0; k < len; k++)
        CU_ASSERT(fsgd_keys_decode(buf, k, 20000, out, 64, &m, err, sizeof err) < 0);
    /* a key at or above dim */
    CU_ASSERT_EQUAL(fsgd_keys_decode(buf, len, keys[63], out, 64, &m, err, sizeof err), FSGD_E_RANGE);
    FSGD_ASSERT_CONTAINS(err, "dim");
    /* no room */
    CU_ASSERT_EQUAL(fsgd_keys_decode(buf, len, 20000, out, 63, &m, err, sizeof err), FSGD_E_NOSPACE);
    /* count larger than dim, reserved bytes, l, decreasing lengths */
    memcpy(bad, buf, len);
    fsgd_le_put32(bad, 30000);
    CU_ASSERT(fsgd_keys_decode(bad, len, 20000, out, 64, &m, err, sizeof err) < 0);
    memcpy(bad, buf, len);
    bad[10] = 1;
    CU_ASSERT_EQUAL(fsgd_keys_decode(bad, len, 20000, out, 64, &m, err, sizeof err), FSGD_E_FORMAT);
    memcpy(bad, buf, len);
    bad[8] = 6;
    CU_ASSERT_EQUAL(fsgd_keys_decode(bad, len, 20000, out, 64, &m, err, sizeof err), FSGD_E_FORMAT);
    if (buf[8] >= 1) {
        memcpy(bad, buf, len);
        bad[FSGD_KEYS_HEADER] = 33;
        CU_ASSERT(fsgd_keys_decode(bad, len, 20000, out, 64, &m, err, sizeof err) < 0);
    }
    /* one key fewer in the count: the stream is not used exactly */
    memcpy(bad, buf, len);
    fsgd_le_put32(bad, 63);
    CU_ASSERT_EQUAL(fsgd_keys_decode(bad, len, 20000, out, 64, &m, err, sizeof err), FSGD_E_FORMAT);
    /* any bit flip either fails or still gives strictly increasing keys < dim */
    for (size_t k = 0; k < len * 8; k++) {
        memcpy(bad, buf, len);
        bad[k / 8] ^= (uint8_t)(1u << (k % 8));
        if (fsgd_keys_decode(bad, len, 20000, out, 64, &m, err, sizeof err) == 0)
            for (uint32_t i = 0; i < m; i++)
                CU_ASSERT(out[i] < 20000 && (i == 0 || out[i] > out[i - 1]));
    }
    /* the encoder refuses unsorted keys and small buffers */
    uint32_t uns[3] = {1, 5, 5};
    CU_ASSERT_EQUAL(fsgd_keys_encode(uns, 3, buf, sizeof buf, &len, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_keys_encode(keys, 64, buf, 10, &len, err, sizeof err), FSGD_E_NOSPACE);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"round trips (random, dense, sparse, edges) and compactness", test_keys_roundtrip},
        {"rejects truncation and corrupt fields", test_keys_rejects},
        {NULL, NULL},
    };
    fsgd_test_suite("keys", cases);
}
