/* Codec "sketchml": SketchML (Jiang, Fu, Yang, Cui, SIGMOD 2018), the
 * system FastSGD compares itself with (fastsgd.txt, sections 1, 3.3, 4).
 * Implemented without handicaps, as the paper and its authors' code do it:
 *
 *  1. Quantile buckets. q = min(q, n) (at least 2) buckets, shared
 *     between negative and positive values in proportion to their counts,
 *     0 an edge between them; within each sign the splits are the exact
 *     quantiles (a quantile sketch approximates these; exact is the best a
 *     sketch can do). Bucket i decodes to the midpoint of its edges (min and
 *     max close the first and last), as the authors' Quantizer.
 *  2. Grouped MinMaxSketch. Buckets are split into groups of q/groups
 *     buckets aligned on the bucket holding zero, so no group mixes signs of
 *     bucket distance; each group's keys insert their bucket index into a
 *     rows × ceil(col_ratio·n_g) table (one hash per row), keeping per cell
 *     the index closest to zero ("min"); a query takes the one furthest from
 *     zero over the rows ("max"). Collisions can only move a value towards
 *     zero: |v̂| is never overestimated in bucket order. Cells cost
 *     ceil(log2(group buckets)) bits.
 *  3. Delta-binary keys. Each group's keys as deltas (the first from 0),
 *     each in 1, 2 or 4 bytes, with a 2-bit flag per key (bytes - 1).
 * Exact zeros are not sent. Layout: codec/FORMAT.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"

enum { P_Q, P_GROUPS, P_ROWS, P_COLS };
static const codec_param_def_t sketchml_params[] = {
    {"q", PARAM_INT, 2, 32768, 0, 256, NULL},
    {"groups", PARAM_INT, 1, 255, 0, 8, NULL},
    {"rows", PARAM_INT, 1, 8, 0, 2, NULL},
    {"col_ratio", PARAM_REAL, 0, 1, 1, 0.3, NULL},
};

#define SK_FIXED 8
#define SK_GROUP 12

/* Hash of row r: multiplicative, the high 32 bits mapped onto [0, cols). */
static inline uint32_t sk_hash(int r, uint32_t key, uint32_t cols)
{
    static const uint64_t mult[8] = {0x9E3779B97F4A7C15ull, 0xBF58476D1CE4E5B9ull, 0x94D049BB133111EBull,
                                     0xD6E8FEB86659FD93ull, 0xA0761D6478BD642Full, 0xE7037ED1A0B428DBull,
                                     0x8EBC6AF09C88C6E3ull, 0x589965CC75374CC3ull};
    uint32_t h = (uint32_t)(((uint64_t)key + 1) * mult[r] >> 32);
    return (uint32_t)(((uint64_t)h * cols) >> 32);
}

/* Group geometry from q, groups and the zero bucket. */
typedef struct sk_geo {
    uint32_t q, span, zero, off, ng;
} sk_geo_t;

static void sk_geometry(sk_geo_t *g, uint32_t q, uint32_t groups, uint32_t zero)
{
    g->q = q;
    g->zero = zero;
    g->span = q / groups ? q / groups : 1;
    g->off = (zero + g->span - 1) / g->span;
    g->ng = g->off + (q - zero + g->span - 1) / g->span;
}

static inline void sk_group_range(const sk_geo_t *g, uint32_t gi, uint32_t *lo, uint32_t *hi)
{
    int64_t l = (int64_t)g->zero + ((int64_t)gi - g->off) * g->span, h = l + g->span;
    *lo = (uint32_t)(l < 0 ? 0 : l);
    *hi = (uint32_t)(h > g->q ? g->q : h);
}

static inline uint32_t sk_group_of(const sk_geo_t *g, uint32_t b)
{
    int64_t d = (int64_t)b - g->zero;
    int64_t f = d >= 0 ? d / g->span : -((-d + g->span - 1) / g->span);
    return (uint32_t)(f + g->off);
}

static inline uint32_t sk_dist(uint32_t b, uint32_t zero) { return b > zero ? b - zero : zero - b; }

static size_t sketchml_bound(const fsgd_codec_t *c, size_t n)
{
    size_t q = (size_t)c->p[P_Q], rows = (size_t)c->p[P_ROWS], ng = (size_t)c->p[P_GROUPS] + 2;
    /* flags 2 bits, deltas <= 4 bytes, table rows·ceil(n_g·ratio) cells of <= 15 bits */
    return SK_FIXED + 4 * q + ng * (SK_GROUP + 3) + n / 4 + 1 + 4 * n + rows * (n + ng) * 2;
}

/* Sorts m floats ascending (no NaN): an LSD radix sort on their bits mapped
 * to unsigned order, 4 passes of 8 bits, tmp holding m words. */
static void sort_floats(float *v, uint32_t *tmp, size_t m)
{
    uint32_t *u = (uint32_t *)(void *)v;
    for (size_t i = 0; i < m; i++)
        u[i] = u[i] >> 31 ? ~u[i] : u[i] | 0x80000000u;
    uint32_t *src = u, *dst = tmp;
    for (int sh = 0; sh < 32; sh += 8) {
        size_t cnt[257] = {0};
        for (size_t i = 0; i < m; i++)
            cnt[((src[i] >> sh) & 255) + 1]++;
        for (int b = 0; b < 256; b++)
            cnt[b + 1] += cnt[b];
        for (size_t i = 0; i < m; i++)
            dst[cnt[(src[i] >> sh) & 255]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    /* 4 passes: the result is back in u */
    for (size_t i = 0; i < m; i++)
        u[i] = u[i] >> 31 ? u[i] & 0x7fffffffu : ~u[i];
}

static int sketchml_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                           size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                           size_t errsz)
{
    uint32_t q = (uint32_t)c->p[P_Q], G = (uint32_t)c->p[P_GROUPS], R = (uint32_t)c->p[P_ROWS];
    double ratio = c->p[P_COLS];
    /* scratch: sorted values (4n), bucket per entry (4n), order by group (4n),
     * table cells (4·R·(n + groups)), group starts */
    size_t need_scratch = 12 * n + 4 * (size_t)R * (n + G + 8) + 8 * ((size_t)G + 8) + 64;
    if (fsgd_codec_scratch(c, need_scratch) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "sketchml: out of memory");
    float *sorted = c->scratch;
    uint32_t *bin = (uint32_t *)(sorted + n), *order = bin + n, *cells = order + n;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (vals[i] != 0.0f)
            sorted[m++] = vals[i];
    /* n values have at most n distinct quantile buckets: fewer buckets cost
     * less and decode the same (the q of the message is what counts) */
    if (m < q)
        q = m < 2 ? 2 : (uint32_t)m;
    if (cap < SK_FIXED + 4 * (size_t)q)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "sketchml: buffer of %zu body bytes", cap);
    uint8_t *binv = body + SK_FIXED;
    uint32_t zero = 0;
    if (m == 0) {
        memset(body, 0, SK_FIXED + 4 * (size_t)q);
    } else {
        sort_floats(sorted, order, m);
        float mn = sorted[0], mx = sorted[m - 1];
        /* Zero is always a bucket edge, so no bucket holds both signs and a
         * decoded value never has the wrong sign (the "reversed gradient"
         * SketchML guards against; with a mixed bucket, a midpoint of the
         * other sign reaches Adam, which scales any value to a full step).
         * The q buckets are shared between the signs in proportion to their
         * counts; within each sign the splits are its exact quantiles. */
        size_t nneg = 0;
        while (nneg < m && sorted[nneg] < 0)
            nneg++;
        size_t npos = m - nneg;
        uint32_t qn = 0;
        if (nneg) {
            double want = floor((double)q * (double)nneg / (double)m + 0.5);
            uint32_t hi = q - (npos ? 1 : 0);
            qn = want < 1 ? 1 : want > hi ? hi : (uint32_t)want;
        }
        uint32_t qp = q - qn;
        /* edges E[0..q]: E[i] and E[i+1] bound bucket i; splits = E[1..q-1] */
        float *edge = malloc(((size_t)q + 1) * sizeof *edge);
        if (!edge)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "sketchml: out of memory");
        edge[0] = mn;
        edge[q] = mx;
        for (uint32_t i = 1; i < qn; i++)
            edge[i] = sorted[(size_t)(((uint64_t)i * nneg) / qn)];
        if (qn && qp)
            edge[qn] = 0;
        for (uint32_t i = 1; i < qp; i++)
            edge[qn + i] = sorted[nneg + (size_t)(((uint64_t)i * npos) / qp)];
        float *splits = edge + 1;
        /* bucket values: midpoints of the edges (authors' Quantizer.getValues) */
        for (uint32_t i = 0; i < q; i++)
            fsgd_le_putf32(binv + 4 * i, (float)(0.5 * ((double)edge[i] + (double)edge[i + 1])));
        /* the zero bucket: the first positive one (all negative: the last) */
        zero = qp ? qn : q - 1;
        /* bucket of each value: the number of splits <= v */
        for (size_t i = 0, j = 0; i < n; i++) {
            if (vals[i] == 0.0f)
                continue;
            float v = vals[i];
            uint32_t lo = 0, hi = q - 1; /* first split > v, in [0, q-1] */
            while (lo < hi) {
                uint32_t mid = (lo + hi) / 2;
                if (splits[mid] <= v)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            bin[j++] = lo;
        }
        free(edge);
    }
    fsgd_le_put16(body, (uint16_t)q);
    body[2] = (uint8_t)G;
    body[3] = (uint8_t)R;
    fsgd_le_put16(body + 4, (uint16_t)zero);
    body[6] = body[7] = 0;
    sk_geo_t geo;
    sk_geometry(&geo, q, G, zero);
    /* entries by group, key order kept (a counting sort) */
    uint32_t *gstart = cells + (size_t)R * (n + G + 6);
    memset(gstart, 0, (geo.ng + 1) * sizeof *gstart);
    for (size_t j = 0; j < m; j++)
        gstart[sk_group_of(&geo, bin[j]) + 1]++;
    for (uint32_t g = 0; g < geo.ng; g++)
        gstart[g + 1] += gstart[g];
    {
        /* order[] holds input indexes of the nonzero entries, grouped */
        uint32_t *fill = gstart + geo.ng + 1;
        memcpy(fill, gstart, geo.ng * sizeof *fill);
        for (size_t i = 0, j = 0; i < n; i++)
            if (vals[i] != 0.0f) {
                order[fill[sk_group_of(&geo, bin[j])]++] = (uint32_t)j; /* bin is by nonzero position */
                j++;
            }
    }
    /* nonzero position -> input index */
    uint32_t *nzidx = (uint32_t *)sorted; /* sorted values are no longer needed */
    for (size_t i = 0, j = 0; i < n; i++)
        if (vals[i] != 0.0f)
            nzidx[j++] = (uint32_t)i;
    size_t pos = SK_FIXED + 4 * (size_t)q;
    uint64_t key_bits = 0, value_bits = 32 * (uint64_t)q, coder_bits = 0;
    if (sent)
        sent->n = 0;
    for (uint32_t g = 0; g < geo.ng; g++) {
        uint32_t lo, hi, a = gstart[g], b = gstart[g + 1], ngk = b - a;
        sk_group_range(&geo, g, &lo, &hi);
        uint32_t span = hi - lo, bits = (uint32_t)codec_bitlen(span ? span - 1 : 0);
        uint32_t cols = ngk ? (uint32_t)ceil(ratio * (double)ngk) : 0;
        if (ngk && cols < 1)
            cols = 1;
        if (cols > ngk)
            cols = ngk;
        /* the MinMaxSketch: "unset" is UINT32_MAX */
        for (size_t t = 0; t < (size_t)R * cols; t++)
            cells[t] = UINT32_MAX;
        for (uint32_t t = a; t < b; t++) {
            uint32_t j = order[t], key = keys[nzidx[j]], v = bin[j];
            for (uint32_t r = 0; r < R; r++) {
                uint32_t *cell = &cells[(size_t)r * cols + sk_hash((int)r, key, cols)];
                if (*cell == UINT32_MAX || sk_dist(v, zero) < sk_dist(*cell, zero))
                    *cell = v;
            }
        }
        /* sizes: flags, deltas, table */
        size_t fbytes = ((size_t)ngk * 2 + 7) / 8, dbytes = 0;
        uint32_t prev = 0;
        for (uint32_t t = a; t < b; t++) {
            uint32_t key = keys[nzidx[order[t]]], d = key - prev;
            dbytes += d < 256 ? 1 : d < 65536 ? 2 : 4;
            prev = key;
        }
        size_t tbytes = ((size_t)R * cols * bits + 7) / 8;
        size_t gneed = SK_GROUP + fbytes + dbytes + tbytes;
        if (pos + gneed > cap)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "sketchml: need more than %zu body bytes", cap);
        uint8_t *p = body + pos;
        fsgd_le_put32(p, ngk);
        fsgd_le_put32(p + 4, cols);
        fsgd_le_put32(p + 8, (uint32_t)dbytes);
        uint8_t *flags = p + SK_GROUP, *deltas = flags + fbytes, *table = deltas + dbytes;
        memset(flags, 0, fbytes);
        prev = 0;
        size_t dp = 0;
        for (uint32_t t = a; t < b; t++) {
            uint32_t key = keys[nzidx[order[t]]], d = key - prev;
            uint32_t nb = d < 256 ? 1 : d < 65536 ? 2 : 4, idx = t - a;
            flags[idx >> 2] |= (uint8_t)((nb - 1) << (2 * (idx & 3)));
            for (uint32_t q8 = 0; q8 < nb; q8++)
                deltas[dp++] = (uint8_t)(d >> (8 * q8));
            prev = key;
        }
        bitw_t bw = {table, 0, 0};
        for (size_t t = 0; t < (size_t)R * cols; t++) {
            uint32_t v = cells[t] == UINT32_MAX ? 0 : cells[t] - lo;
            if (bits)
                bitw_put(&bw, v, (int)bits);
        }
        bitw_end(&bw);
        pos += gneed;
        key_bits += 8 * (uint64_t)(fbytes + dbytes);
        coder_bits += 2 * (uint64_t)ngk + 8 * (uint64_t)dbytes;
        value_bits += 8 * (uint64_t)tbytes;
    }
    *body_len = pos;
    *count = (uint32_t)m;
    c->last.key_bits = key_bits;
    c->last.value_bits = value_bits;
    c->last.key_coder_bits = coder_bits;
    c->last.header_bytes = SK_FIXED + SK_GROUP * geo.ng;
    if (sent) {
        /* The decoder's view, for error feedback: decode the body just written. */
        uint8_t *tmp = malloc(FSGD_CODEC_HDR + pos + FSGD_CODEC_TRAILER);
        if (!tmp)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "sketchml: out of memory");
        memcpy(tmp + FSGD_CODEC_HDR, body, pos);
        size_t tl = fsgd_codec_frame_write(c, tmp, (uint32_t)m, pos);
        int rc = fsgd_codec_decode(tmp, tl, c->dim, sent, err, errsz);
        free(tmp);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int sketchml_decode(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                           fsgd_sparse_t *out, char *err, size_t errsz)
{
    const uint8_t *p = msg + off;
    if (blen < SK_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field sketchml.q at offset %zu: body of %zu bytes", off,
                            blen);
    uint32_t q = fsgd_le_get16(p), G = p[2], R = p[3], zero = fsgd_le_get16(p + 4);
    if (q < 2 || q > 32768)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.q at offset %zu: %u out of range [2, 32768]",
                            off, q);
    if (G < 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.groups at offset %zu: 0", off + 2);
    if (R < 1 || R > 8)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.rows at offset %zu: %u out of range [1, 8]",
                            off + 3, R);
    if (zero >= q)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.zero at offset %zu: %u >= q %u", off + 4,
                            zero, q);
    if (p[6] | p[7])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.reserved at offset %zu: not zero", off + 6);
    if (blen < SK_FIXED + 4 * (size_t)q)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field sketchml.buckets at offset %zu: %u buckets need %u bytes",
                            off + SK_FIXED, q, 4 * q);
    const uint8_t *binv = p + SK_FIXED;
    for (uint32_t i = 0; i < q; i++)
        if (!isfinite(fsgd_le_getf32(binv + 4 * i)))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.buckets at offset %zu: bucket %u not finite",
                                off + SK_FIXED + 4 * (size_t)i, i);
    /* every entry costs at least 10 bits of body, so 2·count entries of room
     * is bounded by the message: the upper half holds the groups before the merge */
    if ((uint64_t)count * 10 > 8 * (uint64_t)blen)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field count at offset 16: %u entries cannot fit %zu body bytes",
                            count, blen);
    if (fsgd_sparse_reserve(out, 2 * (size_t)count + 1) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "decode: out of memory for %u entries", count);
    sk_geo_t geo;
    sk_geometry(&geo, q, G, zero);
    uint32_t *gk = out->keys + count;
    float *gv = out->vals + count;
    uint32_t gstart[260], total = 0; /* ng <= groups + 2 <= 257 */
    size_t pos = SK_FIXED + 4 * (size_t)q;
    for (uint32_t g = 0; g < geo.ng; g++) {
        gstart[g] = total;
        if (blen - pos < SK_GROUP)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field sketchml.group at offset %zu: group %u header missing",
                                off + pos, g);
        const uint8_t *h = p + pos;
        uint32_t ngk = fsgd_le_get32(h), cols = fsgd_le_get32(h + 4), dbytes = fsgd_le_get32(h + 8);
        if (ngk > count - total)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.n at offset %zu: group %u has %u keys, %u left",
                                off + pos, g, ngk, count - total);
        if ((ngk == 0) != (cols == 0) || cols > ngk)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.cols at offset %zu: %u columns for %u keys",
                                off + pos + 4, cols, ngk);
        uint32_t lo, hi;
        sk_group_range(&geo, g, &lo, &hi);
        uint32_t span = hi - lo, bits = (uint32_t)codec_bitlen(span ? span - 1 : 0);
        uint64_t fbytes = ((uint64_t)ngk * 2 + 7) / 8, tbytes = ((uint64_t)R * cols * bits + 7) / 8;
        if (fbytes + dbytes + tbytes > blen - pos - SK_GROUP)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                                "field sketchml.delta_bytes at offset %zu: group %u needs %llu bytes, %zu left",
                                off + pos + 8, g, (unsigned long long)(fbytes + dbytes + tbytes), blen - pos - SK_GROUP);
        const uint8_t *flags = h + SK_GROUP, *deltas = flags + fbytes, *table = deltas + dbytes;
        size_t doff = off + pos + SK_GROUP + (size_t)fbytes;
        uint64_t prev = 0, dp = 0;
        for (uint32_t t = 0; t < ngk; t++) {
            uint32_t f = (flags[t >> 2] >> (2 * (t & 3))) & 3;
            if (f == 2)
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.flags at offset %zu: flag 2 (3 bytes) unused",
                                    off + pos + SK_GROUP + (t >> 2));
            uint32_t nb = f + 1;
            if (dp + nb > dbytes)
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.deltas at offset %zu: ran out at key %u",
                                    doff + (size_t)dp, t);
            uint32_t d = 0;
            for (uint32_t b8 = 0; b8 < nb; b8++)
                d |= (uint32_t)deltas[dp + b8] << (8 * b8);
            dp += nb;
            uint64_t key = prev + d;
            if ((t && d == 0) || key >= dim)
                return fsgd_err_fmt(err, errsz, d == 0 ? FSGD_E_FORMAT : FSGD_E_RANGE,
                                    "field sketchml.deltas at offset %zu: key %llu %s", doff + (size_t)dp - nb,
                                    (unsigned long long)key, d == 0 ? "repeats" : ">= dim");
            gk[total + t] = (uint32_t)key;
            prev = key;
        }
        if (dp != dbytes)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.delta_bytes at offset %zu: %u bytes, %llu used",
                                off + pos + 8, dbytes, (unsigned long long)dp);
        if (ngk & 3 && flags[fbytes - 1] >> (2 * (ngk & 3)))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.flags at offset %zu: padding bits set",
                                off + pos + SK_GROUP + (size_t)fbytes - 1);
        /* the table, then the queries */
        size_t toff = doff + dbytes;
        for (uint32_t t = 0; t < ngk; t++) {
            uint32_t key = gk[total + t], best = 0;
            int have = 0;
            for (uint32_t r = 0; r < R; r++) {
                uint64_t bitpos = ((uint64_t)r * cols + sk_hash((int)r, key, cols)) * bits;
                uint32_t v = 0;
                for (uint32_t b = 0; b < bits; b++)
                    v |= (uint32_t)((table[(bitpos + b) >> 3] >> ((bitpos + b) & 7)) & 1) << b;
                if (v >= span)
                    return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                        "field sketchml.table at offset %zu: cell %u >= %u buckets in group %u",
                                        toff + (size_t)(bitpos >> 3), v, span, g);
                v += lo;
                if (!have || sk_dist(v, zero) > sk_dist(best, zero))
                    best = v;
                have = 1;
            }
            gv[total + t] = fsgd_le_getf32(binv + 4 * best);
        }
        uint64_t tbits = (uint64_t)R * cols * bits;
        if (tbits & 7 && table[tbytes - 1] >> (tbits & 7))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.table at offset %zu: padding bits set",
                                toff + (size_t)tbytes - 1);
        total += ngk;
        pos += SK_GROUP + (size_t)(fbytes + dbytes + tbytes);
    }
    gstart[geo.ng] = total;
    if (total != count)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field count at offset 16: %u entries, the groups hold %u", count,
                            total);
    if (pos != blen)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field body_len at offset 20: %zu bytes after the last group",
                            blen - pos);
    /* merge the groups (each increasing) into key order */
    uint32_t cur[260];
    memcpy(cur, gstart, geo.ng * sizeof *cur);
    for (uint32_t o = 0; o < count; o++) {
        uint32_t bg = UINT32_MAX;
        for (uint32_t g = 0; g < geo.ng; g++)
            if (cur[g] < gstart[g + 1] && (bg == UINT32_MAX || gk[cur[g]] < gk[cur[bg]]))
                bg = g;
        uint32_t key = gk[cur[bg]];
        if (o && key <= out->keys[o - 1])
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field sketchml.deltas at offset %zu: key %u in two groups", off, key);
        out->keys[o] = key;
        out->vals[o] = gv[cur[bg]++];
    }
    out->n = count;
    return 0;
}

const fsgd_codec_vt_t fsgd_codec_vt_sketchml = {
    .name = "sketchml",
    .id = CODEC_ID_SKETCHML,
    .lossy = 1,
    .ef_default = 0,
    .params = sketchml_params,
    .n_params = 4,
    .bound = sketchml_bound,
    .encode = sketchml_encode,
    .decode = sketchml_decode,
};
