/* Codec "none": float32 keys and values as they are (keys, then values),
 * optionally compressed with LZ4 (none:lz4=1). Lossless. */
#include <lz4.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"

static const codec_param_def_t none_params[] = {
    {"lz4", PARAM_INT, 0, 1, 0, 0, NULL},
};

#define BODY_FIXED 12 /* lz4 u8, 3 reserved, raw_len u32, stored_len u32 */

static size_t none_bound(const fsgd_codec_t *c, size_t n)
{
    size_t raw = 8 * n;
    if (c->p[0] != 0 && raw <= LZ4_MAX_INPUT_SIZE)
        raw = (size_t)LZ4_compressBound((int)raw);
    return BODY_FIXED + raw;
}

static void put_pairs(uint8_t *p, const uint32_t *keys, const float *vals, size_t n)
{
    if (n == 0) /* an empty gradient may come with NULL arrays; memcpy(NULL, 0) is undefined */
        return;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, keys, 4 * n);
    memcpy(p + 4 * n, vals, 4 * n);
    return;
#endif
    for (size_t i = 0; i < n; i++)
        fsgd_le_put32(p + 4 * i, keys[i]);
    for (size_t i = 0; i < n; i++)
        fsgd_le_putf32(p + 4 * n + 4 * i, vals[i]);
}

static int none_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                       size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                       size_t errsz)
{
    int lz4 = c->p[0] != 0;
    size_t raw = 8 * n, stored = raw;
    if (raw > UINT32_MAX - 64 || (lz4 && raw > LZ4_MAX_INPUT_SIZE))
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "none: %zu entries too many for one message", n);
    if (cap < BODY_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "none: buffer too small");
    if (!lz4) {
        if (cap < BODY_FIXED + raw)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "none: need %zu body bytes, buffer has %zu",
                                BODY_FIXED + raw, cap);
        put_pairs(body + BODY_FIXED, keys, vals, n);
    } else {
        if (fsgd_codec_scratch(c, raw + 8) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "none: out of memory");
        put_pairs(c->scratch, keys, vals, n);
        size_t room = cap - BODY_FIXED;
        int got = LZ4_compress_default(c->scratch, (char *)body + BODY_FIXED, (int)raw,
                                       room > INT32_MAX ? INT32_MAX : (int)room);
        if (got <= 0 && raw > 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "none: lz4 output does not fit %zu bytes", room);
        stored = (size_t)(got > 0 ? got : 0);
    }
    body[0] = (uint8_t)lz4;
    body[1] = body[2] = body[3] = 0;
    fsgd_le_put32(body + 4, (uint32_t)raw);
    fsgd_le_put32(body + 8, (uint32_t)stored);
    *body_len = BODY_FIXED + stored;
    *count = (uint32_t)n;
    if (lz4) {
        c->last.key_bits = c->last.value_bits = 0;
        c->last.header_bytes = BODY_FIXED + stored; /* not separable */
    } else {
        c->last.key_bits = c->last.value_bits = 32 * (uint64_t)n;
        c->last.header_bytes = BODY_FIXED;
    }
    if (sent) { /* lossless: never used (ef is not offered), kept for symmetry */
        memcpy(sent->keys, keys, n * 4);
        memcpy(sent->vals, vals, n * 4);
        sent->n = n;
    }
    return 0;
}

int fsgd_codec_take_pairs(const uint8_t *p, size_t at, uint32_t n, uint64_t dim, const char *what,
                          fsgd_sparse_t *out, char *err, size_t errsz)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = fsgd_le_get32(p + 4 * (size_t)i);
        if (k >= dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "field %s.keys at offset %zu: key %u >= dim %llu", what,
                                at + 4 * (size_t)i, k, (unsigned long long)dim);
        if (i > 0 && k <= out->keys[i - 1])
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field %s.keys at offset %zu: key %u not above previous key %u", what,
                                at + 4 * (size_t)i, k, out->keys[i - 1]);
        out->keys[i] = k;
    }
    for (uint32_t i = 0; i < n; i++) {
        float v = fsgd_le_getf32(p + 4 * (size_t)n + 4 * (size_t)i);
        if (!isfinite(v))
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "field %s.values at offset %zu: non-finite value",
                                what, at + 4 * (size_t)n + 4 * (size_t)i);
        out->vals[i] = v;
    }
    out->n = n;
    return 0;
}

static int none_decode(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                       fsgd_sparse_t *out, char *err, size_t errsz)
{
    const uint8_t *body = msg + off;
    if (blen < BODY_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field none.params at offset %zu: %zu bytes < %d", off,
                            blen, BODY_FIXED);
    int lz4 = body[0];
    if (lz4 > 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field none.lz4 at offset %zu: %d not 0 or 1", off, lz4);
    if (body[1] | body[2] | body[3])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field none.reserved at offset %zu: not zero", off + 1);
    uint32_t raw = fsgd_le_get32(body + 4), stored = fsgd_le_get32(body + 8);
    if ((uint64_t)raw != 8 * (uint64_t)count)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field none.raw_len at offset %zu: %u != 8 * count %u",
                            off + 4, raw, count);
    if ((uint64_t)stored + BODY_FIXED != blen)
        return fsgd_err_fmt(err, errsz, blen < (uint64_t)stored + BODY_FIXED ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field none.stored_len at offset %zu: %u stored bytes, body has %zu", off + 8, stored,
                            blen - BODY_FIXED);
    if (!lz4) {
        if (stored != raw)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field none.stored_len at offset %zu: %u != raw %u",
                                off + 8, stored, raw);
        FSGD_TRY(codec_reserve(out, count, err, errsz));
        return fsgd_codec_take_pairs(body + BODY_FIXED, off + BODY_FIXED, count, dim, "none", out, err, errsz);
    }
    /* LZ4 expands at most ~255x; refuse forged raw lengths before allocating. */
    if ((uint64_t)raw > 255 * (uint64_t)stored + 16 || raw > LZ4_MAX_INPUT_SIZE)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field none.raw_len at offset %zu: %u raw bytes cannot come from %u lz4 bytes", off + 4,
                            raw, stored);
    uint8_t *tmp = malloc(raw ? raw : 1);
    if (!tmp)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "none: out of memory for %u bytes", raw);
    int got = LZ4_decompress_safe((const char *)body + BODY_FIXED, (char *)tmp, (int)stored, (int)raw);
    int rc;
    if (got != (int)raw)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field none.data at offset %zu: lz4 data invalid (%d of %u bytes)",
                          off + BODY_FIXED, got, raw);
    else if ((rc = codec_reserve(out, count, err, errsz)) == 0)
        rc = fsgd_codec_take_pairs(tmp, off + BODY_FIXED, count, dim, "none(lz4, offsets in decompressed data)", out,
                                   err, errsz);
    free(tmp);
    return rc;
}

const fsgd_codec_vt_t fsgd_codec_vt_none = {
    .name = "none",
    .id = CODEC_ID_NONE,
    .lossy = 0,
    .params = none_params,
    .n_params = 1,
    .bound = none_bound,
    .encode = none_encode,
    .decode = none_decode,
};
