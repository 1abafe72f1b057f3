/* The bodies of working-set pulls and their answers (pull.h). */
#include <math.h>
#include <string.h>

#include "fsgd/error.h"
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

int fsgd_values_put(fsgd_wire_buf_t *b, uint32_t worker, uint64_t at, uint32_t keys_crc, const float *vals,
                    uint32_t n)
{
    uint8_t *p = fsgd_wire_space(b, FSGD_VALUES_HEADER + 4 * (size_t)n);
    if (!p)
        return FSGD_E_NOMEM;
    fsgd_le_put32(p, worker);
    fsgd_le_put64(p + 4, at);
    fsgd_le_put32(p + 12, n);
    fsgd_le_put32(p + 16, keys_crc);
    for (uint32_t i = 0; i < n; i++)
        fsgd_le_putf32(p + FSGD_VALUES_HEADER + 4 * (size_t)i, vals[i]);
    return 0;
}

int fsgd_values_get(const uint8_t *body, size_t len, fsgd_values_t *out, char *err, size_t errsz)
{
    if (len < FSGD_VALUES_HEADER)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "values: %zu bytes, need at least %d", len,
                            FSGD_VALUES_HEADER);
    out->worker = fsgd_le_get32(body);
    out->at = fsgd_le_get64(body + 4);
    out->n = fsgd_le_get32(body + 12);
    out->keys_crc = fsgd_le_get32(body + 16);
    if ((len - FSGD_VALUES_HEADER) / 4 != out->n || (len - FSGD_VALUES_HEADER) % 4)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "values: %u values declared at byte 12, %zu bytes follow",
                            out->n, len - FSGD_VALUES_HEADER);
    for (uint32_t i = 0; i < out->n; i++)
        if (!isfinite(fsgd_le_getf32(body + FSGD_VALUES_HEADER + 4 * (size_t)i)))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "values: value %u at byte %zu is not finite", i,
                                FSGD_VALUES_HEADER + 4 * (size_t)i);
    out->vals = body + FSGD_VALUES_HEADER;
    return 0;
}
