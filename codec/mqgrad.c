/* Codec "mqgrad" (wire id 7): the uniform B-bit quantizer MQGrad puts under
 * its agent (Cui et al., "MQGrad", sec. 3.2, footnote 1: TensorFlow's
 * Quantize/De-quantize), with the bits B in every message's header.
 *
 * TensorFlow's scheme maps [min, max] linearly onto the 2^B codes. As in
 * TensorFlow's own quantized training (FakeQuant's "nudged" range), the range
 * is first widened to contain 0 and shifted so that 0 is exactly a code (the
 * zero point z): a sparse gradient's zeros stay zeros, and an entry whose
 * code is z is not sent at all (with ef=1 it stays in the residual). So
 *   lo = min(0, min v), hi = max(0, max v), s = (hi - lo) / (2^B - 1)  (float)
 *   z  = clamp(round(-lo / s), 0, 2^B - 1)
 *   q  = clamp(round(v / s) + z, 0, 2^B - 1),   v̂ = (float)(q - z) * s
 * with round(x) = floor(x + 0.5) in float (round half up), every step in
 * IEEE float32 so encoder and decoder agree bit for bit. Keys use FastSGD's
 * key coder (fsgd/keys.h). Body layout in FORMAT.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codec_internal.h"
#include "fsgd/keys.h"
#include "fsgd/mqgrad.h"

#define BODY_FIXED 16 /* bits u8, 3 reserved, scale f32, zero point u32, key_bytes u32 */

static const codec_param_def_t mq_params[] = {
    {"bits", PARAM_INT, FSGD_MQGRAD_MIN_BITS, FSGD_MQGRAD_MAX_BITS, 0, 2, NULL},
};

static size_t code_bytes(uint64_t count, int bits) { return (size_t)((count * (uint64_t)bits + 7) / 8); }

static size_t mq_bound(const fsgd_codec_t *c, size_t n)
{
    return BODY_FIXED + fsgd_keys_bound(n) + code_bytes(n, FSGD_MQGRAD_MAX_BITS);
}

static float round_half_up(float x) { return floorf(x + 0.5f); }

static int mq_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                     size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                     size_t errsz)
{
    int bits = (int)c->p[0];
    uint32_t qmax = (1u << bits) - 1;
    float lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = vals[i] < lo ? vals[i] : lo;
        hi = vals[i] > hi ? vals[i] : hi;
    }
    float s = (float)(((double)hi - (double)lo) / (double)qmax);
    uint32_t z = 0;
    if (!(s > 0) || !isfinite(s * (float)qmax))
        s = 0; /* all zero, or a range that underflows (or overflows) the scale: nothing is sent */
    else {
        float zf = round_half_up(-lo / s);
        z = zf < 0 ? 0 : (zf > (float)qmax ? qmax : (uint32_t)zf);
    }
    if (fsgd_codec_scratch(c, n * 6 + 16) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "mqgrad: out of memory");
    uint32_t *kk = c->scratch;
    uint16_t *qq = (uint16_t *)(kk + n);
    size_t d = 0;
    if (s > 0)
        for (size_t i = 0; i < n; i++) {
            float qf = round_half_up(vals[i] / s) + (float)z;
            uint32_t q = qf < 0 ? 0 : (qf > (float)qmax ? qmax : (uint32_t)qf);
            if (q == z)
                continue;
            kk[d] = keys[i];
            qq[d++] = (uint16_t)q;
        }
    else
        s = 0;
    size_t kcap = cap > BODY_FIXED ? cap - BODY_FIXED : 0, kb = 0;
    int rc = fsgd_keys_encode(kk, d, body + BODY_FIXED, kcap, &kb, err, errsz);
    if (rc < 0)
        return rc == FSGD_E_NOSPACE ? fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "mqgrad: buffer of %zu body bytes too small", cap) : rc;
    size_t vb = code_bytes(d, bits), need = BODY_FIXED + kb + vb;
    if (need > cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "mqgrad: need %zu body bytes, buffer has %zu", need, cap);
    body[0] = (uint8_t)bits;
    memset(body + 1, 0, 3);
    fsgd_le_putf32(body + 4, s);
    fsgd_le_put32(body + 8, z);
    fsgd_le_put32(body + 12, (uint32_t)kb);
    bitw_t w = {body + BODY_FIXED + kb, 0, 0};
    for (size_t i = 0; i < d; i++)
        bitw_put(&w, qq[i], bits);
    bitw_end(&w);
    if (sent) {
        for (size_t i = 0; i < d; i++) {
            sent->keys[i] = kk[i];
            sent->vals[i] = (float)((int32_t)qq[i] - (int32_t)z) * s;
        }
        sent->n = d;
    }
    *body_len = need;
    *count = (uint32_t)d;
    c->last.key_bits = 8 * (uint64_t)kb;
    c->last.value_bits = (uint64_t)bits * d;
    c->last.header_bytes = BODY_FIXED;
    return 0;
}

static int mq_decode(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                     fsgd_sparse_t *out, char *err, size_t errsz)
{
    const uint8_t *body = msg + off;
    if (blen < BODY_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field mqgrad.params at offset %zu: %zu bytes < %d",
                            off, blen, BODY_FIXED);
    int bits = body[0];
    if (bits < FSGD_MQGRAD_MIN_BITS || bits > FSGD_MQGRAD_MAX_BITS)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.bits at offset %zu: %d outside [%d, %d]", off,
                            bits, FSGD_MQGRAD_MIN_BITS, FSGD_MQGRAD_MAX_BITS);
    if (body[1] | body[2] | body[3])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.reserved at offset %zu: not zero", off + 1);
    uint32_t qmax = (1u << bits) - 1;
    float s = fsgd_le_getf32(body + 4);
    uint32_t z = fsgd_le_get32(body + 8);
    if (count == 0 ? s != 0 || z != 0 : !(s > 0) || !isfinite(s * (float)qmax))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.scale at offset %zu: %g invalid for %u entries",
                            off + 4, (double)s, count);
    if (z > qmax)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.zero_point at offset %zu: %u > %u", off + 8, z,
                            qmax);
    uint32_t kb = fsgd_le_get32(body + 12);
    if (kb > blen - BODY_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                            "field mqgrad.key_bytes at offset %zu: %u key bytes, %zu body bytes left", off + 12, kb,
                            blen - BODY_FIXED);
    size_t vb = code_bytes(count, bits);
    if ((uint64_t)BODY_FIXED + kb + vb != blen)
        return fsgd_err_fmt(err, errsz, blen < (uint64_t)BODY_FIXED + kb + vb ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field mqgrad.codes at offset %zu: %u codes of %d bits need %zu bytes, %zu present",
                            off + BODY_FIXED + kb, count, bits, vb, blen - BODY_FIXED - kb);
    char e[160];
    uint32_t nk = 0;
    size_t ksz = 0;
    size_t koff = off + BODY_FIXED;
    int prc = fsgd_keys_peek(body + BODY_FIXED, kb, dim, &nk, &ksz, e, sizeof e);
    if (prc < 0)
        return fsgd_err_fmt(err, errsz, prc, "field mqgrad.keys at offset %zu: %s", koff, e);
    if (nk != count || ksz != kb)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field mqgrad.keys at offset %zu: key block of %u keys in %zu bytes, expected %u keys in %u",
                            koff, nk, ksz, count, kb);
    FSGD_TRY(codec_reserve(out, count, err, errsz));
    e[0] = '\0';
    int rc = fsgd_keys_decode(body + BODY_FIXED, kb, dim, out->keys, count, &nk, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "field mqgrad.keys at offset %zu: %s", koff, e);
    const uint8_t *cp = body + BODY_FIXED + kb;
    bitr_t r = {cp, cp + vb, 0, 0};
    for (uint32_t i = 0; i < count; i++) {
        uint32_t q = 0;
        if (bitr_get(&r, bits, &q) < 0) /* cannot happen: the length was checked */
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field mqgrad.codes at offset %zu: ends in code %u",
                                off + BODY_FIXED + kb, i);
        if (q == z)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field mqgrad.codes at offset %zu: code %u of key %u is the zero point",
                                off + BODY_FIXED + kb + (size_t)i * bits / 8, i, out->keys[i]);
        out->vals[i] = (float)((int32_t)q - (int32_t)z) * s;
    }
    uint32_t pad = 0;
    int padbits = (int)(vb * 8 - (uint64_t)count * bits);
    if (padbits > 0 && (bitr_get(&r, padbits, &pad) < 0 || pad != 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.codes at offset %zu: padding bits not zero",
                            off + blen - 1);
    out->n = count;
    return 0;
}

const fsgd_codec_vt_t fsgd_codec_vt_mqgrad = {
    .name = "mqgrad",
    .id = CODEC_ID_MQGRAD,
    .lossy = 1,
    .ef_default = 0,
    .params = mq_params,
    .n_params = 1,
    .bound = mq_bound,
    .encode = mq_encode,
    .decode = mq_decode,
};

int fsgd_mqgrad_set_bits(fsgd_codec_t *c, int bits)
{
    if (!c || c->vt != &fsgd_codec_vt_mqgrad || bits < FSGD_MQGRAD_MIN_BITS || bits > FSGD_MQGRAD_MAX_BITS)
        return FSGD_E_ARG;
    c->p[0] = bits;
    snprintf(c->spec, sizeof c->spec, "mqgrad:bits=%d,ef=%d", bits, c->ef);
    return 0;
}

int fsgd_mqgrad_message_bits(const uint8_t *msg, size_t len)
{
    if (!msg || len < FSGD_CODEC_HDR + 1 + FSGD_CODEC_TRAILER || memcmp(msg, FSGD_CODEC_MAGIC, 4) != 0 ||
        msg[5] != CODEC_ID_MQGRAD)
        return 0;
    return msg[FSGD_CODEC_HDR];
}
