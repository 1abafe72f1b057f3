/* Message bodies of the distributed job, little-endian (KAFKA_FORMAT.md). */
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/keys.h"
#include "fsgd/le.h"
#include "fsgd/shard.h"
#include <lz4.h>

uint8_t *fsgd_wire_space(fsgd_wire_buf_t *b, size_t n)
{
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n)
            nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np)
            return NULL;
        b->p = np;
        b->cap = nc;
    }
    b->n += n;
    return b->p + b->n - n;
}

int fsgd_wire_put(fsgd_wire_buf_t *b, const void *src, size_t n)
{
    uint8_t *o = fsgd_wire_space(b, n);
    if (!o)
        return FSGD_E_NOMEM;
    if (n)
        memcpy(o, src, n);
    return 0;
}

int fsgd_wire_u32(fsgd_wire_buf_t *b, uint32_t v)
{
    uint8_t t[4];
    fsgd_le_put32(t, v);
    return fsgd_wire_put(b, t, 4);
}
int fsgd_wire_u64(fsgd_wire_buf_t *b, uint64_t v)
{
    uint8_t t[8];
    fsgd_le_put64(t, v);
    return fsgd_wire_put(b, t, 8);
}
int fsgd_wire_f32(fsgd_wire_buf_t *b, float v)
{
    uint8_t t[4];
    fsgd_le_putf32(t, v);
    return fsgd_wire_put(b, t, 4);
}
int fsgd_wire_f64(fsgd_wire_buf_t *b, double v)
{
    uint8_t t[8];
    fsgd_le_putf64(t, v);
    return fsgd_wire_put(b, t, 8);
}

int fsgd_wire_state_alloc(fsgd_wire_state_t *s, uint32_t nparts)
{
    free(s->start);
    free(s->pos);
    free(s->end);
    free(s->quota);
    s->nparts = nparts;
    s->start = calloc(nparts ? nparts : 1, sizeof *s->start);
    s->pos = calloc(nparts ? nparts : 1, sizeof *s->pos);
    s->end = calloc(nparts ? nparts : 1, sizeof *s->end);
    s->quota = calloc(nparts ? nparts : 1, sizeof *s->quota);
    return s->start && s->pos && s->end && s->quota ? 0 : FSGD_E_NOMEM;
}

void fsgd_wire_state_free(fsgd_wire_state_t *s)
{
    free(s->start);
    free(s->pos);
    free(s->end);
    free(s->quota);
    memset(s, 0, sizeof *s);
}

int fsgd_wire_state_copy(fsgd_wire_state_t *dst, const fsgd_wire_state_t *src)
{
    FSGD_TRY(fsgd_wire_state_alloc(dst, src->nparts));
    dst->epoch = src->epoch;
    dst->adam_t = src->adam_t;
    memcpy(dst->start, src->start, src->nparts * sizeof *dst->start);
    memcpy(dst->pos, src->pos, src->nparts * sizeof *dst->pos);
    memcpy(dst->end, src->end, src->nparts * sizeof *dst->end);
    memcpy(dst->quota, src->quota, src->nparts * sizeof *dst->quota);
    return 0;
}

int fsgd_wire_state_put(fsgd_wire_buf_t *b, const fsgd_wire_state_t *s)
{
    int rc = fsgd_wire_u32(b, s->epoch) | fsgd_wire_u32(b, s->nparts) | fsgd_wire_u64(b, s->adam_t);
    for (uint32_t i = 0; i < s->nparts; i++)
        rc |= fsgd_wire_u64(b, s->start[i]) | fsgd_wire_u64(b, s->pos[i]) | fsgd_wire_u64(b, s->end[i]) | fsgd_wire_u32(b, s->quota[i]);
    return rc ? FSGD_E_NOMEM : 0;
}

#define NEED(n, what)                                                                                          \
    do {                                                                                                       \
        if (len - *off < (size_t)(n))                                                                          \
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: need %zu bytes at byte %zu, %zu left", what, \
                                (size_t)(n), *off, len - *off);                                                \
    } while (0)

int fsgd_wire_state_get(const uint8_t *p, size_t len, size_t *off, fsgd_wire_state_t *s, char *err, size_t errsz)
{
    NEED(16, "step state");
    uint32_t epoch = fsgd_le_get32(p + *off), nparts = fsgd_le_get32(p + *off + 4);
    uint64_t t = fsgd_le_get64(p + *off + 8);
    *off += 16;
    if (nparts > 1000000)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "step state: %u partitions at byte %zu", nparts, *off - 12);
    NEED((size_t)nparts * 28, "step state partitions");
    FSGD_TRY(fsgd_wire_state_alloc(s, nparts));
    s->epoch = epoch;
    s->adam_t = t;
    for (uint32_t i = 0; i < nparts; i++) {
        s->start[i] = fsgd_le_get64(p + *off);
        s->pos[i] = fsgd_le_get64(p + *off + 8);
        s->end[i] = fsgd_le_get64(p + *off + 16);
        s->quota[i] = fsgd_le_get32(p + *off + 24);
        if (s->pos[i] > s->end[i] || s->pos[i] < s->start[i])
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "step state: partition %u position %llu outside its range (end %llu)",
                                i, (unsigned long long)s->pos[i], (unsigned long long)s->end[i]);
        *off += 28;
    }
    return 0;
}

int fsgd_wire_grad_put(fsgd_wire_buf_t *b, const fsgd_wire_grad_t *g)
{
    int rc = fsgd_wire_u32(b, g->epoch) | fsgd_wire_u32(b, g->nranges) | fsgd_wire_u64(b, g->rows) | fsgd_wire_f64(b, g->loss_sum) |
             fsgd_wire_f64(b, g->t_grad) | fsgd_wire_f64(b, g->t_encode) | fsgd_wire_u64(b, g->raw_entries);
    for (uint32_t i = 0; i < g->nranges; i++)
        rc |= fsgd_wire_u32(b, g->ranges[i].part) | fsgd_wire_u64(b, g->ranges[i].start) | fsgd_wire_u64(b, g->ranges[i].end);
    rc |= fsgd_wire_u32(b, g->codec_len);
    rc |= fsgd_wire_put(b, g->codec, g->codec_len);
    return rc ? FSGD_E_NOMEM : 0;
}

int fsgd_wire_grad_get(const uint8_t *p, size_t len, uint32_t max_parts, fsgd_wire_grad_t *g, char *err, size_t errsz)
{
    size_t o = 0, *off = &o;
    memset(g, 0, sizeof *g);
    NEED(48, "gradient header");
    g->epoch = fsgd_le_get32(p);
    g->nranges = fsgd_le_get32(p + 4);
    g->rows = fsgd_le_get64(p + 8);
    g->loss_sum = fsgd_le_getf64(p + 16);
    g->t_grad = fsgd_le_getf64(p + 24);
    g->t_encode = fsgd_le_getf64(p + 32);
    g->raw_entries = fsgd_le_get64(p + 40);
    o = 48;
    if (g->nranges > max_parts)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "gradient: %u ranges at byte 4, only %u partitions",
                            g->nranges, max_parts);
    if (!isfinite(g->loss_sum) || !isfinite(g->t_grad) || !isfinite(g->t_encode))
        return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "gradient: non-finite loss or timing at byte 16");
    NEED((size_t)g->nranges * 20 + 4, "gradient ranges");
    g->ranges = calloc(g->nranges ? g->nranges : 1, sizeof *g->ranges);
    if (!g->ranges)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradient: out of memory");
    for (uint32_t i = 0; i < g->nranges; i++) {
        g->ranges[i].part = fsgd_le_get32(p + o);
        g->ranges[i].start = fsgd_le_get64(p + o + 4);
        g->ranges[i].end = fsgd_le_get64(p + o + 12);
        if (g->ranges[i].part >= max_parts || g->ranges[i].end <= g->ranges[i].start)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gradient: bad range %u [%llu, %llu) at byte %zu",
                                g->ranges[i].part, (unsigned long long)g->ranges[i].start,
                                (unsigned long long)g->ranges[i].end, o);
        o += 20;
    }
    g->codec_len = fsgd_le_get32(p + o);
    o += 4;
    if (g->codec_len != len - o)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gradient: codec length %u at byte %zu but %zu bytes follow",
                            g->codec_len, o - 4, len - o);
    g->codec = p + o;
    /* 0 rows with ranges: offsets whose messages hold no rows (skipped or
     * replayed, read as empty), passed over without a gradient; the
     * aggregator checks that they hold none */
    if ((g->rows && !g->nranges) || (!g->rows && g->nranges && g->codec_len))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gradient: %llu rows with %u ranges and %u bytes of gradient",
                            (unsigned long long)g->rows, g->nranges, g->codec_len);
    return 0;
}

int fsgd_wire_delta_put(fsgd_wire_buf_t *b, const uint32_t *keys, const float *vals, size_t n)
{
    int rc = fsgd_wire_u64(b, n);
    for (size_t i = 0; i < n; i++)
        rc |= fsgd_wire_u32(b, keys[i]);
    for (size_t i = 0; i < n; i++)
        rc |= fsgd_wire_f32(b, vals[i]);
    return rc ? FSGD_E_NOMEM : 0;
}

int fsgd_wire_delta_get(const uint8_t *p, size_t len, size_t *off, uint64_t dim, fsgd_sparse_t *out, char *err,
                   size_t errsz)
{
    NEED(8, "delta");
    uint64_t n = fsgd_le_get64(p + *off);
    *off += 8;
    if (n > dim || n > (len - *off) / 8)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "delta: %llu entries at byte %zu (dim %llu, %zu bytes left)",
                            (unsigned long long)n, *off - 8, (unsigned long long)dim, len - *off);
    if (fsgd_sparse_reserve(out, n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "delta: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        uint32_t k = fsgd_le_get32(p + *off + 4 * i);
        if (k >= dim || (i && k <= out->keys[i - 1]))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "delta: key %u at byte %zu not increasing or >= dim %llu",
                                k, *off + 4 * i, (unsigned long long)dim);
        out->keys[i] = k;
    }
    *off += 4 * n;
    for (uint64_t i = 0; i < n; i++) {
        out->vals[i] = fsgd_le_getf32(p + *off + 4 * i);
        if (!isfinite(out->vals[i]))
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "delta: non-finite value at byte %zu", *off + 4 * i);
    }
    *off += 4 * n;
    out->n = n;
    return 0;
}

int fsgd_wire_pdelta_put(fsgd_wire_buf_t *b, const uint32_t *keys, const float *vals, size_t n, char *err, size_t errsz)
{
    size_t kb = fsgd_keys_bound(n), raw = 4 * n;
    size_t lzb = (size_t)LZ4_compressBound(raw > INT32_MAX ? 0 : (int)raw);
    /* room for the keys, the value header and the larger of raw/LZ4 values */
    size_t need = kb + 8 + (lzb > raw ? lzb : raw) + raw;
    if (b->n + need > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + need)
            nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "delta: out of memory");
        b->p = np;
        b->cap = nc;
    }
    size_t klen = 0;
    FSGD_TRY(fsgd_keys_encode(keys, n, b->p + b->n, kb, &klen, err, errsz));
    b->n += klen;
    uint8_t *hdr = b->p + b->n;
    uint8_t *vals_raw = hdr + 8 + (lzb > raw ? lzb : raw); /* scratch past the end */
    for (size_t i = 0; i < n; i++)
        fsgd_le_putf32(vals_raw + 4 * i, vals[i]);
    /* Adam's weights are close to random floats: LZ4 rarely saves a tenth
     * of them, and then costs both sides CPU on every step for nothing; a
     * message that did not save it sends the next ones raw, trying again
     * every FSGD_WIRE_LZ4_RETRY messages (which bytes go is still decided
     * by the result alone: raw or LZ4, whichever is smaller when tried) */
    int lz = raw >= 64 && raw <= INT32_MAX && !b->lz4_skip
                 ? LZ4_compress_default((const char *)vals_raw, (char *)hdr + 8, (int)raw, (int)lzb)
                 : 0;
    if (b->lz4_skip)
        b->lz4_skip--;
    else if (raw >= 64 && (lz <= 0 || (size_t)lz * 10 > raw * 9))
        b->lz4_skip = FSGD_WIRE_LZ4_RETRY - 1;
    if (lz > 0 && (size_t)lz < raw) {
        hdr[0] = 1;
        fsgd_le_put32(hdr + 4, (uint32_t)lz);
    } else {
        hdr[0] = 0;
        memmove(hdr + 8, vals_raw, raw);
        fsgd_le_put32(hdr + 4, (uint32_t)raw);
        lz = (int)raw;
    }
    hdr[1] = hdr[2] = hdr[3] = 0;
    b->n += 8 + (size_t)lz;
    return 0;
}

int fsgd_wire_pdelta_get(const uint8_t *p, size_t len, size_t *off, uint64_t dim, fsgd_sparse_t *out, char *err,
                    size_t errsz)
{
    uint32_t n = 0;
    size_t ksz = 0;
    char e[200];
    int rc = fsgd_keys_peek(p + *off, len - *off, dim, &n, &ksz, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "delta at byte %zu: %s", *off, e);
    if (fsgd_sparse_reserve(out, n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "delta: out of memory");
    rc = fsgd_keys_decode(p + *off, len - *off, dim, out->keys, n, &n, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "delta keys at byte %zu: %s", *off, e);
    *off += ksz;
    NEED(8, "delta values header");
    const uint8_t *h = p + *off;
    uint32_t stored = fsgd_le_get32(h + 4);
    if (h[0] > 1 || h[1] || h[2] || h[3])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "delta: value format %u / reserved bytes at byte %zu", h[0],
                            *off);
    *off += 8;
    NEED(stored, "delta values");
    size_t raw = 4 * (size_t)n;
    const uint8_t *v = p + *off;
    uint8_t *tmp = NULL;
    if (h[0] == 0) {
        if (stored != raw)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "delta: %u value bytes at byte %zu for %u keys",
                                stored, *off - 4, n);
    } else {
        if (raw > INT32_MAX || stored > INT32_MAX || stored == 0 || raw > 255 * (size_t)stored + 16)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "delta: LZ4 values of %u bytes at byte %zu for %u keys",
                                stored, *off - 4, n);
        tmp = malloc(raw ? raw : 1);
        if (!tmp)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "delta: out of memory");
        int got = LZ4_decompress_safe((const char *)v, (char *)tmp, (int)stored, (int)raw);
        if (got != (int)raw) {
            free(tmp);
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "delta: LZ4 values at byte %zu do not decompress to %zu bytes", *off, raw);
        }
        v = tmp;
    }
    for (uint32_t i = 0; i < n; i++) {
        out->vals[i] = fsgd_le_getf32(v + 4 * i);
        if (!isfinite(out->vals[i])) {
            free(tmp);
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "delta: non-finite value %u at byte %zu", i,
                                *off + (h[0] ? 0 : 4 * (size_t)i));
        }
    }
    free(tmp);
    *off += stored;
    out->n = n;
    return 0;
}

/* A weight that is exactly +0.0 (bit pattern 0): -0.0 is sent as it is, so
 * the receiver's copy stays identical bit for bit. */
static int is_plus_zero(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u == 0;
}

int fsgd_wire_model_put(fsgd_wire_buf_t *b, uint32_t kind, uint32_t has_bias, float bias, uint64_t dim, const float *w,
                        uint64_t n)
{
    return fsgd_wire_model_put_shard(b, kind, has_bias, bias, dim, w, n, 0, 1);
}

/* The snapshot's header: kind, flags (has_bias and the form), bias, dim,
 * n, and a shard's place. */
static int put_model_head(fsgd_wire_buf_t *b, uint32_t kind, uint32_t flags, float bias, uint64_t dim, uint64_t n_all,
                          uint32_t shard, uint32_t shards)
{
    int rc = fsgd_wire_u32(b, kind) | fsgd_wire_u32(b, flags) | fsgd_wire_f32(b, bias) | fsgd_wire_u64(b, dim) |
             fsgd_wire_u64(b, n_all);
    if (shards > 1)
        rc |= fsgd_wire_u32(b, shard) | fsgd_wire_u32(b, shards);
    return rc ? FSGD_E_NOMEM : 0;
}

int fsgd_wire_model_put_pairs(fsgd_wire_buf_t *b, const fsgd_wire_model_t *head, const uint32_t *keys,
                              const uint32_t *at, const float *w, uint64_t nkeys)
{
    uint64_t nnz = 0;
    for (uint64_t i = 0; i < nkeys; i++)
        nnz += !is_plus_zero(w[at[i]]);
    uint32_t flags = (head->has_bias ? 1u : 0u) | FSGD_WIRE_MODEL_SPARSE | (head->shards > 1 ? FSGD_WIRE_MODEL_SHARD : 0);
    FSGD_TRY(put_model_head(b, head->kind, flags, head->bias, head->dim, head->n, head->shard, head->shards));
    uint8_t *out = fsgd_wire_space(b, 8 + nnz * 8);
    if (!out)
        return FSGD_E_NOMEM;
    fsgd_le_put64(out, nnz);
    out += 8;
    for (uint64_t i = 0; i < nkeys; i++) {
        float x = w[at[i]];
        if (is_plus_zero(x))
            continue;
        fsgd_le_put32(out, keys[i]);
        fsgd_le_putf32(out + 4, x);
        out += 8;
    }
    return 0;
}

int fsgd_wire_model_put_shard(fsgd_wire_buf_t *b, uint32_t kind, uint32_t has_bias, float bias, uint64_t dim,
                              const float *w, uint64_t n_all, uint32_t shard, uint32_t shards)
{
    uint64_t n = shards > 1 ? fsgd_shard_dim(n_all, shard, shards) : n_all;
    uint64_t nnz = 0;
    for (uint64_t i = 0; i < n; i++)
        nnz += !is_plus_zero(w[i]);
    /* pairs are 8 bytes against 4 a weight: sparse below half full */
    int sparse = n <= UINT32_MAX && nnz * 8 + 8 < n * 4;
    uint32_t flags = has_bias | (sparse ? FSGD_WIRE_MODEL_SPARSE : 0) | (shards > 1 ? FSGD_WIRE_MODEL_SHARD : 0);
    FSGD_TRY(put_model_head(b, kind, flags, bias, dim, n_all, shard, shards));
    if (sparse) {
        int rc = fsgd_wire_u64(b, nnz);
        for (uint64_t i = 0; i < n && !rc; i++)
            if (!is_plus_zero(w[i]))
                rc = fsgd_wire_u32(b, (uint32_t)i) | fsgd_wire_f32(b, w[i]);
        return rc ? FSGD_E_NOMEM : 0;
    }
    uint8_t *out = fsgd_wire_space(b, n * 4);
    if (!out)
        return FSGD_E_NOMEM;
    for (uint64_t i = 0; i < n; i++)
        fsgd_le_putf32(out + 4 * i, w[i]);
    return 0;
}

int fsgd_wire_model_head_get(const uint8_t *p, size_t len, size_t *off, fsgd_wire_model_t *m, char *err,
                             size_t errsz)
{
    NEED(28, "snapshot header");
    size_t at = *off;
    m->kind = fsgd_le_get32(p + *off);
    uint32_t bias_word = fsgd_le_get32(p + *off + 4);
    m->has_bias = bias_word & ~(FSGD_WIRE_MODEL_SPARSE | FSGD_WIRE_MODEL_SHARD);
    int sparse = (bias_word & FSGD_WIRE_MODEL_SPARSE) != 0;
    m->bias = fsgd_le_getf32(p + *off + 8);
    m->dim = fsgd_le_get64(p + *off + 12);
    m->n = fsgd_le_get64(p + *off + 20);
    m->w = m->kv = NULL;
    m->nnz = 0;
    m->shard = 0;
    m->shards = 1;
    *off += 28;
    if (m->kind < 1 || m->kind > 3 || m->has_bias > 1 || m->dim > ((uint64_t)1 << 32) ||
        m->n != m->dim + m->has_bias)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "snapshot: kind %u bias %u dim %llu weights %llu at byte %zu are inconsistent", m->kind,
                            bias_word, (unsigned long long)m->dim, (unsigned long long)m->n, at);
    if (bias_word & FSGD_WIRE_MODEL_SHARD) {
        NEED(8, "snapshot shard");
        m->shard = fsgd_le_get32(p + *off);
        m->shards = fsgd_le_get32(p + *off + 4);
        if (m->shards < 2 || m->shards > FSGD_SHARDS_MAX || m->shard >= m->shards)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "snapshot: shard %u of %u at byte %zu", m->shard,
                                m->shards, *off);
        *off += 8;
    }
    m->nloc = fsgd_shard_dim(m->n, m->shard, m->shards);
    if (!isfinite(m->bias))
        return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "snapshot: bias value is not finite at byte %zu", at + 8);
    m->sparse = sparse;
    return 0;
}

int fsgd_wire_model_get(const uint8_t *p, size_t len, size_t *off, fsgd_wire_model_t *m, char *err, size_t errsz)
{
    FSGD_TRY(fsgd_wire_model_head_get(p, len, off, m, err, errsz));
    if (m->sparse) {
        NEED(8, "snapshot weight count");
        uint64_t nnz = fsgd_le_get64(p + *off);
        if (nnz > m->nloc)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "snapshot: %llu nonzero weights of %llu at byte %zu",
                                (unsigned long long)nnz, (unsigned long long)m->nloc, *off);
        *off += 8;
        NEED(nnz * 8, "snapshot weights");
        /* Deltas are checked value by value; a snapshot is held to the same. */
        int64_t prev = -1;
        for (uint64_t i = 0; i < nnz; i++) {
            const uint8_t *q = p + *off + 8 * i;
            uint32_t k = fsgd_le_get32(q);
            if ((int64_t)k <= prev || k >= m->nloc)
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                    "snapshot: weight index %u at byte %zu is not increasing and below %llu", k,
                                    (size_t)(q - p), (unsigned long long)m->nloc);
            if (!isfinite(fsgd_le_getf32(q + 4)))
                return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "snapshot: weight %u is not finite at byte %zu",
                                    k, (size_t)(q - p) + 4);
            prev = k;
        }
        m->kv = p + *off;
        m->nnz = nnz;
        *off += nnz * 8;
        return 0;
    }
    NEED(m->nloc * 4, "snapshot weights");
    for (uint64_t i = 0; i < m->nloc; i++)
        if (!isfinite(fsgd_le_getf32(p + *off + 4 * i)))
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "snapshot: weight %llu is not finite at byte %zu",
                                (unsigned long long)i, *off + 4 * (size_t)i);
    m->w = p + *off;
    *off += m->nloc * 4;
    return 0;
}

void fsgd_wire_model_weights_strided(const fsgd_wire_model_t *m, float *out, uint64_t stride, uint64_t offset)
{
    if (m->w) {
        for (uint64_t i = 0; i < m->nloc; i++)
            out[offset + i * stride] = fsgd_le_getf32(m->w + 4 * i);
        return;
    }
    for (uint64_t i = 0; i < m->nloc; i++)
        out[offset + i * stride] = 0;
    for (uint64_t i = 0; i < m->nnz; i++)
        out[offset + (uint64_t)fsgd_le_get32(m->kv + 8 * i) * stride] = fsgd_le_getf32(m->kv + 8 * i + 4);
}

void fsgd_wire_model_weights_into_zeros(const fsgd_wire_model_t *m, float *out, uint64_t stride, uint64_t offset)
{
    if (m->w) {
        fsgd_wire_model_weights_strided(m, out, stride, offset);
        return;
    }
    for (uint64_t i = 0; i < m->nnz; i++)
        out[offset + (uint64_t)fsgd_le_get32(m->kv + 8 * i) * stride] = fsgd_le_getf32(m->kv + 8 * i + 4);
}

void fsgd_wire_model_weights(const fsgd_wire_model_t *m, float *out)
{
    if (m->w) {
        for (uint64_t i = 0; i < m->nloc; i++)
            out[i] = fsgd_le_getf32(m->w + 4 * i);
        return;
    }
    memset(out, 0, m->nloc * sizeof *out);
    for (uint64_t i = 0; i < m->nnz; i++)
        out[fsgd_le_get32(m->kv + 8 * i)] = fsgd_le_getf32(m->kv + 8 * i + 4);
}

int fsgd_wire_cdelta_put(fsgd_wire_buf_t *b, uint32_t flags, uint32_t check, const uint32_t *applied,
                         uint32_t n_applied, const uint8_t *msg, uint32_t msg_len)
{
    int rc = fsgd_wire_u32(b, flags & 0xFF) | fsgd_wire_u32(b, check) | fsgd_wire_u32(b, n_applied);
    for (uint32_t i = 0; i < n_applied; i++)
        rc |= fsgd_wire_u32(b, applied[i]);
    rc |= fsgd_wire_u32(b, msg_len) | fsgd_wire_put(b, msg, msg_len);
    return rc ? FSGD_E_NOMEM : 0;
}

int fsgd_wire_cdelta_get(const uint8_t *p, size_t len, size_t *off, fsgd_wire_cdelta_t *d, char *err, size_t errsz)
{
    memset(d, 0, sizeof *d);
    NEED(12, "coded delta header");
    uint32_t fl = fsgd_le_get32(p + *off);
    if (fl & ~FSGD_WIRE_CDELTA_CHECK)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "coded delta: flags/reserved 0x%08x at byte %zu", fl, *off);
    d->flags = fl;
    d->check = fsgd_le_get32(p + *off + 4);
    d->n_applied = fsgd_le_get32(p + *off + 8);
    *off += 12;
    NEED(4 * (size_t)d->n_applied, "coded delta applied senders");
    d->applied = p + *off;
    for (uint32_t i = 1; i < d->n_applied; i++)
        if (fsgd_le_get32(d->applied + 4 * i) <= fsgd_le_get32(d->applied + 4 * (i - 1)))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "coded delta: applied senders not increasing at byte %zu",
                                *off + 4 * (size_t)i);
    *off += 4 * (size_t)d->n_applied;
    NEED(4, "coded delta message length");
    d->msg_len = fsgd_le_get32(p + *off);
    *off += 4;
    NEED(d->msg_len, "coded delta message");
    d->msg = p + *off;
    *off += d->msg_len;
    return 0;
}

int fsgd_wire_cdelta_applied(const fsgd_wire_cdelta_t *d, uint32_t sender)
{
    uint32_t lo = 0, hi = d->n_applied;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2, v = fsgd_le_get32(d->applied + 4 * mid);
        if (v == sender)
            return 1;
        if (v < sender)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

int fsgd_wire_section_get(const uint8_t *p, size_t len, size_t *off, const uint8_t **sec, size_t *slen, char *err,
                          size_t errsz)
{
    if (*off > len || len - *off < 4)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "section: length at offset %zu: message ends", *off);
    uint32_t n = fsgd_le_get32(p + *off);
    if (n == 0 || n > FSGD_WIRE_SECTION_MAX || n > len - *off - 4)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "section: length %u at offset %zu: must be 1..%u and within the %zu bytes left", n, *off,
                            FSGD_WIRE_SECTION_MAX, len - *off - 4);
    *sec = p + *off + 4;
    *slen = n;
    *off += 4 + (size_t)n;
    return 0;
}
