/* Row blocks (fsgd/rowblock.h): the producer's binary messages of parsed rows. */
#include "fsgd/rowblock.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fsgd/error.h"

static const uint8_t magic[4] = {0, 'F', 'R', 'B'};

int fsgd_rowblock_is(const void *buf, size_t len)
{
    return len >= sizeof magic && !memcmp(buf, magic, sizeof magic);
}

uint32_t fsgd_rowblock_format_id(const char *canonical_spec)
{
    uint32_t h = 2166136261u;
    for (const char *s = "fsgd-rows:"; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    for (const char *s = canonical_spec; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static uint8_t *put_varint(uint8_t *p, uint32_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static uint8_t *put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

size_t fsgd_rowblock_bound_n(size_t count, size_t nnz)
{
    return FSGD_ROWBLOCK_HEADER + 5 + count * (8 + 5) + nnz * (5 + 4);
}

size_t fsgd_rowblock_bound(const fsgd_csr_t *rows, size_t first, size_t count)
{
    size_t nnz = count ? (size_t)(rows->row_ptr[first + count] - rows->row_ptr[first]) : 0;
    return fsgd_rowblock_bound_n(count, nnz);
}

static int all_ones(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != 1.0f)
            return 0;
    return 1;
}

size_t fsgd_rowblock_encode(const fsgd_csr_t *rows, size_t first, size_t count, uint32_t format_id, uint8_t *out)
{
    uint8_t *p = out;
    memcpy(p, magic, sizeof magic);
    p += sizeof magic;
    *p++ = FSGD_ROWBLOCK_VERSION;
    p = put_le32(p, format_id);
    p = put_varint(p, (uint32_t)count);
    for (size_t r = first; r < first + count; r++) {
        uint64_t lo = rows->row_ptr[r], hi = rows->row_ptr[r + 1];
        size_t n = (size_t)(hi - lo);
        uint64_t bits;
        memcpy(&bits, &rows->label[r], sizeof bits);
        p = put_le64(p, bits);
        int ones = all_ones(rows->val + lo, n);
        /* a row of 2^31 nonzeros does not fit a message anyway */
        p = put_varint(p, (uint32_t)(n << 1) | (uint32_t)ones);
        for (size_t j = 0; j < n; j++)
            p = put_varint(p, j ? rows->col[lo + j] - rows->col[lo + j - 1] - 1 : rows->col[lo]);
        if (!ones)
            for (size_t j = 0; j < n; j++) {
                uint32_t vb;
                memcpy(&vb, &rows->val[lo + j], sizeof vb);
                p = put_le32(p, vb);
            }
    }
    return (size_t)(p - out);
}

typedef struct reader {
    const uint8_t *p, *start, *end;
} reader_t;

/* 0 on success; -1 past the end or a varint over 32 bits. */
static int get_varint(reader_t *r, uint32_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (r->p >= r->end)
            return -1;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            if (x > UINT32_MAX)
                return -1;
            *v = (uint32_t)x;
            return 0;
        }
    }
    return -1;
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static long refuse(const reader_t *r, fsgd_csr_t *out, size_t rows0, size_t nnz0, uint64_t maxc0, const char *src,
                   char *err, size_t errsz, const char *fmt, ...)
{
    out->n_rows = rows0;
    out->nnz = nnz0;
    out->max_col = maxc0;
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: row block: %s at byte %zu", src ? src : "<buffer>", what,
                        (size_t)(r->p - r->start));
}

long fsgd_rowblock_decode(const uint8_t *buf, size_t len, uint32_t format_id, const char *src, fsgd_csr_t *out,
                          char *err, size_t errsz)
{
    reader_t r = {buf, buf, buf + len};
    const size_t rows0 = out->n_rows, nnz0 = out->nnz;
    const uint64_t maxc0 = out->max_col;
#define REFUSE(...) refuse(&r, out, rows0, nnz0, maxc0, src, err, errsz, __VA_ARGS__)
    if (len < FSGD_ROWBLOCK_HEADER || !fsgd_rowblock_is(buf, len))
        return REFUSE("no row block header");
    r.p += sizeof magic;
    if (*r.p != FSGD_ROWBLOCK_VERSION)
        return REFUSE("version %u, this reader knows %u", *r.p, FSGD_ROWBLOCK_VERSION);
    r.p++;
    uint32_t id = (uint32_t)get_le(r.p, 4);
    if (id != format_id)
        return REFUSE("written for another format or hash width (format id %08x, the job's is %08x)", id, format_id);
    r.p += 4;
    uint32_t n;
    if (get_varint(&r, &n))
        return REFUSE("truncated row count");
    /* every row takes at least 9 bytes: a count past them is a lie */
    if ((uint64_t)n * 9 > (uint64_t)(r.end - r.p))
        return REFUSE("%u rows cannot fit in %zu bytes", n, (size_t)(r.end - r.p));
    if (fsgd_csr_reserve(out, n, 0) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", src ? src : "<buffer>");
    for (uint32_t i = 0; i < n; i++) {
        if (r.end - r.p < 8)
            return REFUSE("truncated row %u", i);
        uint64_t lb = get_le(r.p, 8);
        double label;
        memcpy(&label, &lb, sizeof label);
        if (!isfinite(label))
            return REFUSE("row %u: label is not a finite number", i);
        r.p += 8;
        uint32_t head;
        if (get_varint(&r, &head))
            return REFUSE("row %u: truncated nonzero count", i);
        uint32_t k = head >> 1, ones = head & 1;
        /* each nonzero takes a byte at least, and 4 more with values */
        if ((uint64_t)k * (ones ? 1 : 5) > (uint64_t)(r.end - r.p))
            return REFUSE("row %u: %u nonzeros cannot fit in %zu bytes", i, k, (size_t)(r.end - r.p));
        if (fsgd_csr_reserve(out, 1, k) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", src ? src : "<buffer>");
        uint32_t *col = out->col + out->nnz;
        float *val = out->val + out->nnz;
        uint64_t c = 0;
        for (uint32_t j = 0; j < k; j++) {
            uint32_t d;
            if (get_varint(&r, &d))
                return REFUSE("row %u: truncated column %u", i, j);
            c = j ? c + (uint64_t)d + 1 : d;
            if (c > UINT32_MAX)
                return REFUSE("row %u: column past 2^32 - 1", i);
            col[j] = (uint32_t)c;
        }
        if (ones) {
            for (uint32_t j = 0; j < k; j++)
                val[j] = 1.0f;
        } else {
            if ((uint64_t)k * 4 > (uint64_t)(r.end - r.p))
                return REFUSE("row %u: truncated values", i);
            for (uint32_t j = 0; j < k; j++, r.p += 4) {
                uint32_t vb = (uint32_t)get_le(r.p, 4);
                memcpy(&val[j], &vb, sizeof vb);
                if (!isfinite(val[j]))
                    return REFUSE("row %u: value %u is not a finite number", i, j);
            }
        }
        if (k && c + 1 > out->max_col)
            out->max_col = c + 1;
        out->label[out->n_rows] = label;
        out->nnz += k;
        out->n_rows++;
        out->row_ptr[out->n_rows] = out->nnz;
    }
    if (r.p != r.end)
        return REFUSE("%zu bytes after the last row", (size_t)(r.end - r.p));
#undef REFUSE
    return (long)n;
}
