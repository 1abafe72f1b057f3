/* The bodies of working-set pulls and their answers (pull.h). */
#include <math.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/half.h"
#include "fsgd/keys.h"
#include "fsgd/le.h"
#include "pull.h"

int fsgd_pull_put(fsgd_wire_buf_t *b, uint64_t need, const uint32_t *keys, size_t n, char *err, size_t errsz)
{
    size_t start = b->n;
    if (fsgd_wire_u64(b, need) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "pull: out of memory");
    size_t bound = fsgd_keys_bound(n), len = 0;
    uint8_t *p = fsgd_wire_space(b, bound);
    if (!p) {
        b->n = start;
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "pull: out of memory");
    }
    int rc = fsgd_keys_encode(keys, n, p, bound, &len, err, errsz);
    b->n = rc ? start : b->n - bound + len;
    return rc;
}

int fsgd_pull_get(const uint8_t *body, size_t len, uint64_t dim, fsgd_pull_t *out, char *err, size_t errsz)
{
    if (len < FSGD_PULL_HEADER + FSGD_KEYS_HEADER)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "pull: %zu bytes, need at least %d", len,
                            FSGD_PULL_HEADER + FSGD_KEYS_HEADER);
    out->need = fsgd_le_get64(body);
    size_t size = 0;
    char e[200];
    int rc = fsgd_keys_peek(body + FSGD_PULL_HEADER, len - FSGD_PULL_HEADER, dim, &out->n, &size, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "pull: key block at byte %d: %s", FSGD_PULL_HEADER, e);
    if (size != len - FSGD_PULL_HEADER)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "pull: %zu bytes after the key block ending at byte %zu",
                            len - FSGD_PULL_HEADER - size, FSGD_PULL_HEADER + size);
    out->block = body + FSGD_PULL_HEADER;
    out->block_len = size;
    return 0;
}

int fsgd_pull_ref_put(fsgd_wire_buf_t *b, const fsgd_pull_ref_t *r)
{
    uint8_t *p = fsgd_wire_space(b, FSGD_PULL_BY_ID_LEN);
    if (!p)
        return FSGD_E_NOMEM;
    fsgd_le_put64(p, r->need);
    fsgd_le_put64(p + 8, r->id);
    fsgd_le_put32(p + 16, r->n);
    fsgd_le_put32(p + 20, r->keys_crc);
    return 0;
}

int fsgd_pull_ref_get(const uint8_t *body, size_t len, uint64_t dim, fsgd_pull_ref_t *out, char *err, size_t errsz)
{
    if (len != FSGD_PULL_BY_ID_LEN)
        return fsgd_err_fmt(err, errsz, len < FSGD_PULL_BY_ID_LEN ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "pull by id: %zu bytes, expected %d", len, FSGD_PULL_BY_ID_LEN);
    out->need = fsgd_le_get64(body);
    out->id = fsgd_le_get64(body + 8);
    out->n = fsgd_le_get32(body + 16);
    out->keys_crc = fsgd_le_get32(body + 20);
    if (!out->id)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "pull by id: id 0 at byte 8");
    if (out->n > dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "pull by id: %u keys at byte 16, more than the dimension %llu",
                            out->n, (unsigned long long)dim);
    return 0;
}

int fsgd_values_put(fsgd_wire_buf_t *b, uint32_t worker, uint64_t at, uint32_t keys_crc, const float *vals,
                    uint32_t n, int half, unsigned flags)
{
    const size_t width = half ? 2 : 4;
    uint8_t *p = fsgd_wire_space(b, FSGD_VALUES_HEADER + width * (size_t)n);
    if (!p)
        return FSGD_E_NOMEM;
    memset(p, 0, FSGD_VALUES_HEADER);
    fsgd_le_put32(p, worker);
    fsgd_le_put64(p + 4, at);
    fsgd_le_put32(p + 12, n);
    fsgd_le_put32(p + 16, keys_crc);
    p[20] = half ? 1 : 0;
    p[21] = (uint8_t)flags;
    p += FSGD_VALUES_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        if (half)
            fsgd_le_put16(p + 2 * (size_t)i, fsgd_half_from_float(vals[i]));
        else
            fsgd_le_putf32(p + 4 * (size_t)i, vals[i]);
    }
    return 0;
}

float fsgd_values_at(const fsgd_values_t *v, uint32_t i)
{
    return v->half ? fsgd_half_to_float(fsgd_le_get16(v->vals + 2 * (size_t)i))
                   : fsgd_le_getf32(v->vals + 4 * (size_t)i);
}

int fsgd_values_get(const uint8_t *body, size_t len, fsgd_values_t *out, char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    if (len < FSGD_VALUES_HEADER)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "values: %zu bytes, need at least %d", len,
                            FSGD_VALUES_HEADER);
    out->worker = fsgd_le_get32(body);
    out->at = fsgd_le_get64(body + 4);
    out->n = fsgd_le_get32(body + 12);
    out->keys_crc = fsgd_le_get32(body + 16);
    if (body[20] > 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "values: encoding %u at byte 20, expected 0 or 1", body[20]);
    if (body[22] | body[23])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "values: reserved bytes 22-23 are not 0");
    out->flags = body[21];
    if (out->flags & ~(FSGD_VALUES_KEPT | FSGD_VALUES_MISS))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "values: unknown flags 0x%02x at byte 21", out->flags);
    if ((out->flags & FSGD_VALUES_MISS) && (out->n || (out->flags & FSGD_VALUES_KEPT)))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "values: a miss (byte 21) with %u values%s", out->n,
                            out->flags & FSGD_VALUES_KEPT ? ", kept" : "");
    out->half = body[20];
    const size_t width = out->half ? 2 : 4, rest = len - FSGD_VALUES_HEADER;
    if (rest / width != out->n || rest % width)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "values: %u values of %zu bytes declared at byte 12, %zu bytes "
                            "follow", out->n, width, rest);
    out->vals = body + FSGD_VALUES_HEADER;
    for (uint32_t i = 0; i < out->n; i++)
        if (!isfinite(fsgd_values_at(out, i)))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "values: value %u at byte %zu is not finite", i,
                                FSGD_VALUES_HEADER + width * (size_t)i);
    return 0;
}
