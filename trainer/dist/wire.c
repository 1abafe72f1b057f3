/* Message bodies of the distributed job, little-endian (KAFKA_FORMAT.md). */
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/le.h"

int wire_put(wire_buf_t *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n)
            nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np)
            return FSGD_E_NOMEM;
        b->p = np;
        b->cap = nc;
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

int wire_u32(wire_buf_t *b, uint32_t v)
{
    uint8_t t[4];
    fsgd_le_put32(t, v);
    return wire_put(b, t, 4);
}
int wire_u64(wire_buf_t *b, uint64_t v)
{
    uint8_t t[8];
    fsgd_le_put64(t, v);
    return wire_put(b, t, 8);
}
int wire_f32(wire_buf_t *b, float v)
{
    uint8_t t[4];
    fsgd_le_putf32(t, v);
    return wire_put(b, t, 4);
}
int wire_f64(wire_buf_t *b, double v)
{
    uint8_t t[8];
    fsgd_le_putf64(t, v);
    return wire_put(b, t, 8);
}

int wire_state_alloc(wire_state_t *s, uint32_t nparts)
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

void wire_state_free(wire_state_t *s)
{
    free(s->start);
    free(s->pos);
    free(s->end);
    free(s->quota);
    memset(s, 0, sizeof *s);
}

int wire_state_copy(wire_state_t *dst, const wire_state_t *src)
{
    FSGD_TRY(wire_state_alloc(dst, src->nparts));
    dst->epoch = src->epoch;
    dst->adam_t = src->adam_t;
    memcpy(dst->start, src->start, src->nparts * sizeof *dst->start);
    memcpy(dst->pos, src->pos, src->nparts * sizeof *dst->pos);
    memcpy(dst->end, src->end, src->nparts * sizeof *dst->end);
    memcpy(dst->quota, src->quota, src->nparts * sizeof *dst->quota);
    return 0;
}

int wire_state_put(wire_buf_t *b, const wire_state_t *s)
{
    int rc = wire_u32(b, s->epoch) | wire_u32(b, s->nparts) | wire_u64(b, s->adam_t);
    for (uint32_t i = 0; i < s->nparts; i++)
        rc |= wire_u64(b, s->start[i]) | wire_u64(b, s->pos[i]) | wire_u64(b, s->end[i]) | wire_u32(b, s->quota[i]);
    return rc ? FSGD_E_NOMEM : 0;
}

#define NEED(n, what)                                                                                          \
    do {                                                                                                       \
        if (len - *off < (size_t)(n))                                                                          \
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: need %zu bytes at byte %zu, %zu left", what, \
                                (size_t)(n), *off, len - *off);                                                \
    } while (0)

int wire_state_get(const uint8_t *p, size_t len, size_t *off, wire_state_t *s, char *err, size_t errsz)
{
    NEED(16, "step state");
    uint32_t epoch = fsgd_le_get32(p + *off), nparts = fsgd_le_get32(p + *off + 4);
    uint64_t t = fsgd_le_get64(p + *off + 8);
    *off += 16;
    if (nparts > 1000000)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "step state: %u partitions at byte %zu", nparts, *off - 12);
    NEED((size_t)nparts * 28, "step state partitions");
    FSGD_TRY(wire_state_alloc(s, nparts));
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

int wire_grad_put(wire_buf_t *b, const wire_grad_t *g)
{
    int rc = wire_u32(b, g->epoch) | wire_u32(b, g->nranges) | wire_u64(b, g->rows) | wire_f64(b, g->loss_sum) |
             wire_f64(b, g->t_grad) | wire_f64(b, g->t_encode) | wire_u64(b, g->raw_entries);
    for (uint32_t i = 0; i < g->nranges; i++)
        rc |= wire_u32(b, g->ranges[i].part) | wire_u64(b, g->ranges[i].start) | wire_u64(b, g->ranges[i].end);
    rc |= wire_u32(b, g->codec_len);
    rc |= wire_put(b, g->codec, g->codec_len);
    return rc ? FSGD_E_NOMEM : 0;
}

int wire_grad_get(const uint8_t *p, size_t len, uint32_t max_parts, wire_grad_t *g, char *err, size_t errsz)
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
    if ((g->rows == 0) != (g->nranges == 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gradient: %llu rows with %u ranges",
                            (unsigned long long)g->rows, g->nranges);
    return 0;
}

int wire_delta_put(wire_buf_t *b, const uint32_t *keys, const float *vals, size_t n)
{
    int rc = wire_u64(b, n);
    for (size_t i = 0; i < n; i++)
        rc |= wire_u32(b, keys[i]);
    for (size_t i = 0; i < n; i++)
        rc |= wire_f32(b, vals[i]);
    return rc ? FSGD_E_NOMEM : 0;
}

int wire_delta_get(const uint8_t *p, size_t len, size_t *off, uint64_t dim, fsgd_sparse_t *out, char *err,
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

int wire_model_put(wire_buf_t *b, uint32_t kind, uint32_t has_bias, float bias, uint64_t dim, const float *w,
                   uint64_t n)
{
    int rc = wire_u32(b, kind) | wire_u32(b, has_bias) | wire_f32(b, bias) | wire_u64(b, dim) | wire_u64(b, n);
    for (uint64_t i = 0; i < n; i++)
        rc |= wire_f32(b, w[i]);
    return rc ? FSGD_E_NOMEM : 0;
}

int wire_model_get(const uint8_t *p, size_t len, size_t *off, wire_model_t *m, char *err, size_t errsz)
{
    NEED(28, "snapshot header");
    m->kind = fsgd_le_get32(p + *off);
    m->has_bias = fsgd_le_get32(p + *off + 4);
    m->bias = fsgd_le_getf32(p + *off + 8);
    m->dim = fsgd_le_get64(p + *off + 12);
    m->n = fsgd_le_get64(p + *off + 20);
    *off += 28;
    if (m->kind < 1 || m->kind > 3 || m->has_bias > 1 || m->dim > ((uint64_t)1 << 32) ||
        m->n != m->dim + m->has_bias)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "snapshot: kind %u bias %u dim %llu weights %llu at byte %zu are inconsistent", m->kind,
                            m->has_bias, (unsigned long long)m->dim, (unsigned long long)m->n, *off - 28);
    NEED(m->n * 4, "snapshot weights");
    m->w = p + *off;
    *off += m->n * 4;
    return 0;
}
