/* Codec "efsign": the blockwise scaled sign compressor of dist-EF-blockSGDM
 * (Zheng, Huang, Kwok, NeurIPS 2019, section 3.2):
 *
 *   C_B(v) = [ ||v_G1||_1/|G1| · sign(v_G1), ..., ||v_GB||_1/|GB| · sign(v_GB) ]
 *
 * For a sparse vector the blocks are taken over the entries present, in key
 * order: block b holds entries [b·B, min((b+1)·B, n)) of the nonzero
 * entries, so every block but the last has exactly B entries. Exact zeros
 * are not sent (sign(0) = 0 in the paper: they cost nothing and decode to
 * nothing). Each entry costs 1 sign bit, each block one float32 scale, and
 * the keys travel with the FastSGD key coder (fsgd/keys.h). C_B is
 * homogeneous, C_B(c·v) = c·C_B(v) for every real c, which the efsign
 * strategy relies on (strategy/FORMAT.md). Layout: codec/FORMAT.md. */
#include <math.h>
#include <string.h>

#include "codec_internal.h"
#include "fsgd/keys.h"

enum { P_BLOCK };
static const codec_param_def_t efsign_params[] = {
    {"block", PARAM_INT, 1, 1048576, 0, 128, NULL},
};

#define EFSIGN_FIXED 8 /* block (u32), key_bytes (u32) */

static size_t efsign_bound(const fsgd_codec_t *c, size_t n)
{
    size_t b = (size_t)c->p[P_BLOCK];
    return EFSIGN_FIXED + fsgd_keys_bound(n) + 4 * ((n + b - 1) / b) + (n + 7) / 8;
}

static int efsign_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                         size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                         size_t errsz)
{
    size_t B = (size_t)c->p[P_BLOCK];
    /* the nonzero entries, keys first (scratch: n keys) */
    if (fsgd_codec_scratch(c, n * 4 + 4) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "efsign: out of memory");
    uint32_t *nzk = c->scratch;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (vals[i] != 0.0f)
            nzk[m++] = keys[i];
    size_t nb = (m + B - 1) / B;
    if (cap < EFSIGN_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "efsign: buffer of %zu body bytes", cap);
    size_t klen = 0;
    FSGD_TRY(fsgd_keys_encode(nzk, m, body + EFSIGN_FIXED, cap - EFSIGN_FIXED, &klen, err, errsz));
    size_t need = EFSIGN_FIXED + klen + 4 * nb + (m + 7) / 8;
    if (need > cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "efsign: need %zu body bytes, buffer has %zu", need, cap);
    fsgd_le_put32(body, (uint32_t)B);
    fsgd_le_put32(body + 4, (uint32_t)klen);
    uint8_t *scales = body + EFSIGN_FIXED + klen, *signs = scales + 4 * nb;
    memset(signs, 0, (m + 7) / 8);
    size_t j = 0; /* index among the nonzero entries */
    size_t i = 0; /* index in the input */
    for (size_t b = 0; b < nb; b++) {
        size_t lo = j, hi = j + B < m ? j + B : m;
        /* ||p_G||_1 / |G|, summed in double in key order */
        double l1 = 0;
        size_t i0 = i;
        for (size_t t = lo; t < hi; i++) {
            if (vals[i] == 0.0f)
                continue;
            l1 += fabs((double)vals[i]);
            t++;
        }
        float scale = (float)(l1 / (double)(hi - lo));
        if (!isfinite(scale))
            scale = 3.40282347e38f; /* a sum beyond FLT_MAX saturates */
        fsgd_le_putf32(scales + 4 * b, scale);
        for (size_t t = lo, q = i0; t < hi; q++) {
            if (vals[q] == 0.0f)
                continue;
            int neg = signbit(vals[q]) != 0;
            signs[t >> 3] |= (uint8_t)(neg << (t & 7));
            if (sent) {
                sent->keys[t] = keys[q];
                sent->vals[t] = neg ? -scale : scale;
            }
            t++;
        }
        j = hi;
    }
    if (sent)
        sent->n = m;
    *body_len = need;
    *count = (uint32_t)m;
    c->last.key_bits = 8 * (uint64_t)klen;
    c->last.value_bits = 32 * (uint64_t)nb + 8 * (uint64_t)((m + 7) / 8);
    c->last.header_bytes = EFSIGN_FIXED;
    return 0;
}

static int efsign_decode(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                         fsgd_sparse_t *out, char *err, size_t errsz)
{
    if (blen < EFSIGN_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field efsign.block at offset %zu: body of %zu bytes < %d",
                            off, blen, EFSIGN_FIXED);
    const uint8_t *p = msg + off;
    uint32_t B = fsgd_le_get32(p), klen = fsgd_le_get32(p + 4);
    if (B < 1 || B > 1048576)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.block at offset %zu: %u out of range [1, 2^20]",
                            off, B);
    if (klen > blen - EFSIGN_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                            "field efsign.key_bytes at offset %zu: %u bytes but %zu left in the body", off + 4, klen,
                            blen - EFSIGN_FIXED);
    uint64_t nb = ((uint64_t)count + B - 1) / B, sbytes = ((uint64_t)count + 7) / 8;
    uint64_t need = EFSIGN_FIXED + (uint64_t)klen + 4 * nb + sbytes;
    if (need != blen)
        return fsgd_err_fmt(err, errsz, need > blen ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field count at offset 16: %u entries in blocks of %u need a body of %llu bytes, body has %zu",
                            count, B, (unsigned long long)need, blen);
    size_t koff = off + EFSIGN_FIXED;
    uint32_t kn = 0;
    size_t ksize = 0;
    char kerr[160];
    if (fsgd_keys_peek(p + EFSIGN_FIXED, klen, dim, &kn, &ksize, kerr, sizeof kerr) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.keys at offset %zu: %s", koff, kerr);
    if (kn != count || ksize != klen)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field efsign.keys at offset %zu: block of %u keys in %zu bytes, header says %u keys in %u",
                            koff, kn, ksize, count, klen);
    FSGD_TRY(codec_reserve(out, count, err, errsz));
    int rc = fsgd_keys_decode(p + EFSIGN_FIXED, klen, dim, out->keys, count, &kn, NULL, kerr, sizeof kerr);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "field efsign.keys at offset %zu: %s", koff, kerr);
    const uint8_t *scales = p + EFSIGN_FIXED + klen, *signs = scales + 4 * nb;
    size_t soff = off + EFSIGN_FIXED + klen;
    for (uint64_t b = 0; b < nb; b++) {
        float s = fsgd_le_getf32(scales + 4 * b);
        if (!isfinite(s) || s < 0 || signbit(s))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field efsign.scale at offset %zu: block %llu scale %g is not finite and >= 0",
                                soff + 4 * (size_t)b, (unsigned long long)b, (double)s);
        uint64_t lo = b * B, hi = lo + B < count ? lo + B : count;
        for (uint64_t t = lo; t < hi; t++)
            out->vals[t] = (signs[t >> 3] >> (t & 7)) & 1 ? -s : s;
    }
    if ((count & 7) && (signs[sbytes - 1] >> (count & 7)) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.signs at offset %zu: padding bits set",
                            soff + 4 * (size_t)nb + (size_t)sbytes - 1);
    out->n = count;
    return 0;
}

const fsgd_codec_vt_t fsgd_codec_vt_efsign = {
    .name = "efsign",
    .id = CODEC_ID_EFSIGN,
    .lossy = 1,
    .ef_default = 0,
    .params = efsign_params,
    .n_params = 1,
    .bound = efsign_bound,
    .encode = efsign_encode,
    .decode = efsign_decode,
};
