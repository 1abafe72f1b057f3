/* Lossless bit-level delta coding of sorted keys (fsgd/keys.h). */
#include "fsgd/keys.h"

#include <string.h>

#include "fsgd/error.h"
#include "fsgd/fastsgd.h"
#include "fsgd/le.h"

#define MAX_L 5

size_t fsgd_keys_bound(size_t n)
{
    /* header, up to 16 lengths (the encoder uses l <= 4), 4 + 32 bits per key */
    return FSGD_KEYS_HEADER + 16 + (n / 8) * 36 + (n % 8) * 5 + 1;
}

static int bitlen(uint32_t v) { return v ? 32 - __builtin_clz(v) : 0; }

int fsgd_keys_encode(const uint32_t *keys, size_t n, uint8_t *out, size_t cap, size_t *len, char *err,
                     size_t errsz)
{
    if (n > UINT32_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "keys: %zu keys do not fit a u32 count", n);
    uint64_t hist[33] = {0};
    for (size_t i = 0; i < n; i++) {
        if (i && keys[i] <= keys[i - 1])
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "keys: key %u at index %zu not above %u", keys[i], i,
                                keys[i - 1]);
        hist[bitlen(i ? keys[i] - keys[i - 1] - 1 : keys[0])]++;
    }
    /* The number of length classes that makes the whole block smallest. */
    int best_l = 0;
    uint8_t best[16], lens[16];
    uint64_t best_bytes = UINT64_MAX;
    for (int l = 0; l <= 4; l++) {
        uint64_t bits;
        if (l == 0) {
            int top = 0;
            for (int j = 0; j <= 32; j++)
                if (hist[j])
                    top = j;
            lens[0] = (uint8_t)top;
            bits = (uint64_t)n * (uint64_t)top;
        } else {
            fsgd_fastsgd_optimal_lengths(hist, l, lens);
            bits = fsgd_fastsgd_key_bits(hist, l, lens);
        }
        uint64_t bytes = (uint64_t)(1u << l) + (bits + 7) / 8;
        if (bits != UINT64_MAX && bytes < best_bytes) {
            best_bytes = bytes;
            best_l = l;
            memcpy(best, lens, (size_t)1 << l);
        }
    }
    int l = best_l, k = 1 << l;
    size_t stream = (size_t)best_bytes - (size_t)k, need = FSGD_KEYS_HEADER + (size_t)best_bytes;
    if (need > cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "keys: need %zu bytes, buffer has %zu", need, cap);
    fsgd_le_put32(out, (uint32_t)n);
    fsgd_le_put32(out + 4, (uint32_t)stream);
    out[8] = (uint8_t)l;
    out[9] = out[10] = out[11] = 0;
    memcpy(out + FSGD_KEYS_HEADER, best, (size_t)k);
    /* class of each bit length: the first length >= it */
    uint8_t cls[33];
    for (int j = 0, i = 0; j <= 32; j++) {
        while (i < k - 1 && best[i] < j)
            i++;
        cls[j] = (uint8_t)i;
    }
    uint8_t *p = out + FSGD_KEYS_HEADER + k;
    uint64_t acc = 0;
    int nb = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t d = i ? keys[i] - keys[i - 1] - 1 : keys[0];
        int c = cls[bitlen(d)];
        acc |= (uint64_t)c << nb;
        nb += l;
        acc |= (uint64_t)d << nb; /* d < 2^best[c] */
        nb += best[c];
        while (nb >= 8) {
            *p++ = (uint8_t)acc;
            acc >>= 8;
            nb -= 8;
        }
    }
    if (nb > 0)
        *p++ = (uint8_t)acc;
    if ((size_t)(p - (out + FSGD_KEYS_HEADER + k)) != stream)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "keys: internal error: stream %zu bytes, planned %zu",
                            (size_t)(p - (out + FSGD_KEYS_HEADER + k)), stream);
    *len = need;
    return 0;
}

int fsgd_keys_peek(const uint8_t *buf, size_t len, uint64_t dim, uint32_t *n, size_t *size, char *err,
                   size_t errsz)
{
    if (len < FSGD_KEYS_HEADER)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "keys: header needs %d bytes at offset 0, %zu present",
                            FSGD_KEYS_HEADER, len);
    uint32_t cnt = fsgd_le_get32(buf), stream = fsgd_le_get32(buf + 4);
    int l = buf[8];
    if (l > MAX_L)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "keys: l = %d at offset 8, at most %d", l, MAX_L);
    if (buf[9] | buf[10] | buf[11])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "keys: reserved bytes at offset 9 are not zero");
    if (cnt > dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "keys: count %u at offset 0 above dim %llu", cnt,
                            (unsigned long long)dim);
    size_t k = (size_t)1 << l;
    if (len - FSGD_KEYS_HEADER < k || len - FSGD_KEYS_HEADER - k < stream)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                            "keys: %zu length bytes and a %u-byte stream at offset 12 need more than the %zu "
                            "bytes present",
                            k, stream, len);
    /* every key costs at least l bits */
    if ((uint64_t)cnt * (uint64_t)l > (uint64_t)stream * 8)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "keys: %u keys of at least %d bits in a %u-byte stream",
                            cnt, l, stream);
    *n = cnt;
    *size = FSGD_KEYS_HEADER + k + stream;
    return 0;
}

int fsgd_keys_decode(const uint8_t *buf, size_t len, uint64_t dim, uint32_t *keys, size_t cap, uint32_t *n,
                     char *err, size_t errsz)
{
    uint32_t cnt;
    size_t sz;
    FSGD_TRY(fsgd_keys_peek(buf, len, dim, &cnt, &sz, err, errsz));
    if (cnt > cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "keys: %u keys, room for %zu", cnt, cap);
    int l = buf[8], k = 1 << l;
    const uint8_t *lens = buf + FSGD_KEYS_HEADER;
    for (int i = 0; i < k; i++)
        if (lens[i] > 32 || (i && lens[i] < lens[i - 1]))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "keys: length %u at offset %d is above 32 or decreasing",
                                lens[i], FSGD_KEYS_HEADER + i);
    const uint8_t *p = lens + k, *end = buf + sz;
    size_t base = (size_t)(p - buf);
    uint64_t acc = 0, prev = 0;
    int nb = 0;
    uint64_t mask_l = ((uint64_t)1 << l) - 1;
    for (uint32_t i = 0; i < cnt; i++) {
        while (nb <= 56 && p < end) {
            acc |= (uint64_t)*p++ << nb;
            nb += 8;
        }
        if (nb < l)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "keys: stream ends in key %u at offset %zu", i,
                                (size_t)(p - buf));
        int c = (int)(acc & mask_l);
        acc >>= l;
        nb -= l;
        int w = lens[c];
        if (nb < w)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "keys: stream ends in key %u at offset %zu", i,
                                (size_t)(p - buf));
        uint64_t d = w ? acc & (((uint64_t)1 << w) - 1) : 0;
        acc = w < 64 ? acc >> w : 0;
        nb -= w;
        uint64_t key = i ? prev + 1 + d : d;
        if (key >= dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "keys: key %u = %llu at offset %zu >= dim %llu", i,
                                (unsigned long long)key, (size_t)(p - buf) - (size_t)(nb + 7) / 8,
                                (unsigned long long)dim);
        keys[i] = (uint32_t)key;
        prev = key;
    }
    /* what is left must be the zero padding of the last byte */
    if (p != end || nb >= 8 || acc != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "keys: stream of %zu bytes at offset %zu not used exactly (%d bits left, non-zero "
                            "padding or extra bytes)",
                            (size_t)(end - (buf + base)), base, nb + (int)(end - p) * 8);
    *n = cnt;
    return 0;
}
