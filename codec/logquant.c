/* Codec "logquant": base-2 logarithmic quantization. Each value becomes a
 * sign and an exponent e in 0..127 below the largest magnitude m of the
 * message, decoding to ±m·2^-e with e the smallest such that m·2^-e <= |v|
 * (so |v|/2 < v̂ <= |v| away from subnormals). Values below m·2^-127 and
 * zeros are not sent. Keys are raw uint32. */
#include <math.h>
#include <string.h>

#include "codec_internal.h"

#define BODY_FIXED 8 /* scale f32, 4 reserved */

static size_t lq_bound(const fsgd_codec_t *c, size_t n) { return BODY_FIXED + 5 * n; }

static int lq_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                     size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                     size_t errsz)
{
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(vals[i]);
        m = a > m ? a : m;
    }
    if (fsgd_codec_scratch(c, n * 5 + 8) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "logquant: out of memory");
    uint32_t *kk = c->scratch;
    uint8_t *codes = (uint8_t *)(kk + n);
    size_t d = 0;
    if (m > 0) {
        float thr = ldexpf(m, -127);
        int em;
        frexpf(m, &em);
        for (size_t i = 0; i < n; i++) {
            float a = fabsf(vals[i]);
            if (!(a >= thr) || a == 0)
                continue;
            int ea;
            frexpf(a, &ea);
            int e = em - ea;
            e = e < 0 ? 0 : (e > 127 ? 127 : e);
            while (e > 0 && ldexpf(m, -(e - 1)) <= a)
                e--;
            while (e < 127 && ldexpf(m, -e) > a)
                e++;
            if (ldexpf(m, -e) > a)
                continue;
            uint32_t u;
            memcpy(&u, &vals[i], 4);
            codes[d] = (uint8_t)((u >> 31) << 7 | (uint32_t)e);
            kk[d++] = keys[i];
        }
    }
    size_t need = BODY_FIXED + 5 * d;
    if (need > cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "logquant: need %zu body bytes, buffer has %zu", need, cap);
    fsgd_le_putf32(body, m);
    memset(body + 4, 0, 4);
    for (size_t i = 0; i < d; i++)
        fsgd_le_put32(body + BODY_FIXED + 4 * i, kk[i]);
    memcpy(body + BODY_FIXED + 4 * d, codes, d);
    if (sent) {
        for (size_t i = 0; i < d; i++) {
            float v = ldexpf(m, -(codes[i] & 127));
            sent->keys[i] = kk[i];
            sent->vals[i] = (codes[i] & 128) ? -v : v;
        }
        sent->n = d;
    }
    *body_len = need;
    *count = (uint32_t)d;
    c->last.key_bits = 32 * (uint64_t)d;
    c->last.value_bits = 8 * (uint64_t)d;
    c->last.header_bytes = BODY_FIXED;
    return 0;
}

static int lq_decode(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                     fsgd_sparse_t *out, char *err, size_t errsz)
{
    const uint8_t *body = msg + off;
    if (blen < BODY_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field logquant.params at offset %zu: %zu bytes < %d",
                            off, blen, BODY_FIXED);
    float m = fsgd_le_getf32(body);
    if (!(m >= 0 && isfinite(m)) || (count > 0 && m == 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field logquant.scale at offset %zu: %g invalid", off,
                            (double)m);
    if (fsgd_le_get32(body + 4) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field logquant.reserved at offset %zu: not zero", off + 4);
    if ((uint64_t)BODY_FIXED + 5 * (uint64_t)count != blen)
        return fsgd_err_fmt(err, errsz, blen < BODY_FIXED + 5 * (uint64_t)count ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field count at offset 16: %u entries need %llu body bytes, body has %zu", count,
                            (unsigned long long)(BODY_FIXED + 5 * (uint64_t)count), blen);
    FSGD_TRY(codec_reserve(out, count, err, errsz));
    const uint8_t *kp = body + BODY_FIXED, *cp = kp + 4 * (size_t)count;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t k = fsgd_le_get32(kp + 4 * (size_t)i);
        if (k >= dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "field logquant.keys at offset %zu: key %u >= dim %llu",
                                off + BODY_FIXED + 4 * (size_t)i, k, (unsigned long long)dim);
        if (i > 0 && k <= out->keys[i - 1])
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field logquant.keys at offset %zu: key %u not above previous key %u",
                                off + BODY_FIXED + 4 * (size_t)i, k, out->keys[i - 1]);
        out->keys[i] = k;
        float v = ldexpf(m, -(cp[i] & 127));
        out->vals[i] = (cp[i] & 128) ? -v : v;
    }
    out->n = count;
    return 0;
}

const fsgd_codec_vt_t fsgd_codec_vt_logquant = {
    .name = "logquant",
    .id = CODEC_ID_LOGQUANT,
    .lossy = 1,
    .ef_default = 0,
    .params = NULL,
    .n_params = 0,
    .bound = lq_bound,
    .encode = lq_encode,
    .decode = lq_decode,
};
