/* Binary row cache; see fsgd/rowcache.h. */
#include "fsgd/rowcache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/le.h"

#define MAGIC "FSGDROWS"
#define HEADER 32
#define BUF (4u << 20)
#define ONES 0x80000000u /* record flag in n: every value is 1, none stored */

struct fsgd_rowcache_writer {
    FILE *f;
    char *path;
    uint64_t rows, max_col;
    uint8_t *buf;
    size_t len;
};

struct fsgd_rowcache_reader {
    FILE *f;
    char *path;
    uint64_t rows, done;
    uint8_t *buf;
    size_t cap, pos, len;
    uint64_t off; /* file offset of buf[0] */
};

static void header(uint8_t h[HEADER], uint64_t rows, uint64_t max_col)
{
    memcpy(h, MAGIC, 8);
    fsgd_le_put32(h + 8, 1);
    fsgd_le_put32(h + 12, 0);
    fsgd_le_put64(h + 16, rows);
    fsgd_le_put64(h + 24, max_col);
}

fsgd_rowcache_writer_t *fsgd_rowcache_create(const char *path, char *err, size_t errsz)
{
    fsgd_rowcache_writer_t *w = calloc(1, sizeof *w);
    if (w)
        w->buf = malloc(BUF);
    if (w)
        w->path = strdup(path);
    if (!w || !w->buf || !w->path) {
        if (w) {
            free(w->buf);
            free(w->path);
        }
        free(w);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    w->f = fopen(path, "wb");
    uint8_t h[HEADER];
    header(h, 0, 0);
    if (!w->f || fwrite(h, 1, HEADER, w->f) != HEADER) {
        fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot write cache '%s': %s", path, strerror(errno));
        if (w->f)
            fclose(w->f);
        free(w->buf);
        free(w->path);
        free(w);
        return NULL;
    }
    return w;
}

static int flush(fsgd_rowcache_writer_t *w, char *err, size_t errsz)
{
    if (w->len && fwrite(w->buf, 1, w->len, w->f) != w->len)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->len = 0;
    return FSGD_E_OK;
}

int fsgd_rowcache_append(fsgd_rowcache_writer_t *w, const fsgd_csr_t *m, char *err, size_t errsz)
{
    for (size_t r = 0; r < m->n_rows; r++) {
        uint64_t lo = m->row_ptr[r], n = m->row_ptr[r + 1] - lo;
        if (n >= ONES)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "%s: a row of %llu entries (at most 2^31-1)", w->path,
                                (unsigned long long)n);
        int ones = 1;
        for (uint64_t i = 0; i < n && ones; i++)
            ones = m->val[lo + i] == 1.0f;
        size_t need = 8 + (ones ? 4 : 8) * (size_t)n;
        if (w->len + need > BUF)
            FSGD_TRY(flush(w, err, errsz));
        if (need > BUF) { /* a huge row: straight through */
            uint8_t hd[8];
            fsgd_le_putf32(hd, (float)m->label[r]);
            fsgd_le_put32(hd + 4, (uint32_t)n | (ones ? ONES : 0));
            if (fwrite(hd, 1, 8, w->f) != 8 || fwrite(m->col + lo, 4, n, w->f) != n ||
                (!ones && fwrite(m->val + lo, 4, n, w->f) != n))
                return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: write failed: %s", w->path, strerror(errno));
        } else {
            uint8_t *p = w->buf + w->len;
            fsgd_le_putf32(p, (float)m->label[r]);
            fsgd_le_put32(p + 4, (uint32_t)n | (ones ? ONES : 0));
            p += 8;
            for (uint64_t i = 0; i < n; i++, p += 4)
                fsgd_le_put32(p, m->col[lo + i]);
            for (uint64_t i = 0; i < n && !ones; i++, p += 4)
                fsgd_le_putf32(p, m->val[lo + i]);
            w->len += need;
        }
        if (n && (uint64_t)m->col[lo + n - 1] + 1 > w->max_col)
            w->max_col = (uint64_t)m->col[lo + n - 1] + 1;
        w->rows++;
    }
    return FSGD_E_OK;
}

int fsgd_rowcache_close(fsgd_rowcache_writer_t *w, char *err, size_t errsz)
{
    int rc = flush(w, err, errsz);
    uint8_t h[HEADER];
    header(h, w->rows, w->max_col);
    if (rc == 0 && (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, 1, HEADER, w->f) != HEADER))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: write failed: %s", w->path, strerror(errno));
    if (fclose(w->f) != 0 && rc == 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: close failed: %s", w->path, strerror(errno));
    free(w->buf);
    free(w->path);
    free(w);
    return rc;
}

fsgd_rowcache_reader_t *fsgd_rowcache_open(const char *path, uint64_t *rows, uint64_t *max_col, char *err,
                                           size_t errsz)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot open cache '%s': %s", path, strerror(errno));
        return NULL;
    }
    uint8_t h[HEADER];
    if (fread(h, 1, HEADER, f) != HEADER || memcmp(h, MAGIC, 8) != 0 || fsgd_le_get32(h + 8) != 1 ||
        fsgd_le_get32(h + 12) != 0) {
        fclose(f);
        fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: not an fsgd row cache (version 1)", path);
        return NULL;
    }
    fsgd_rowcache_reader_t *r = calloc(1, sizeof *r);
    if (r) {
        r->buf = malloc(BUF);
        r->path = strdup(path);
    }
    if (!r || !r->buf || !r->path) {
        if (r) {
            free(r->buf);
            free(r->path);
        }
        free(r);
        fclose(f);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    r->f = f;
    r->cap = BUF;
    r->off = HEADER;
    r->rows = fsgd_le_get64(h + 16);
    if (rows)
        *rows = r->rows;
    if (max_col)
        *max_col = fsgd_le_get64(h + 24);
    return r;
}

/* Makes need bytes available at buf[pos]. 0, 1 at a clean end of file, or an error. */
static int have(fsgd_rowcache_reader_t *r, size_t need, char *err, size_t errsz)
{
    if (r->len - r->pos >= need)
        return 0;
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->off += r->pos;
    r->len -= r->pos;
    r->pos = 0;
    if (need > r->cap) {
        uint8_t *b = realloc(r->buf, need);
        if (!b)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory for a %zu-byte row", r->path, need);
        r->buf = b;
        r->cap = need;
    }
    r->len += fread(r->buf + r->len, 1, r->cap - r->len, r->f);
    if (r->len >= need)
        return 0;
    if (r->len == 0 && r->done == r->rows)
        return 1;
    return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: cut short at byte %llu in row %llu of %llu", r->path,
                        (unsigned long long)(r->off + r->len), (unsigned long long)r->done,
                        (unsigned long long)r->rows);
}

long fsgd_rowcache_read(fsgd_rowcache_reader_t *r, fsgd_csr_t *out, size_t max_rows, char *err, size_t errsz)
{
    fsgd_csr_clear(out);
    long got = 0;
    while ((size_t)got < max_rows && r->done < r->rows) {
        int h = have(r, 8, err, errsz);
        if (h != 0)
            return h < 0 ? h : fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: %llu rows, header says %llu",
                                             r->path, (unsigned long long)r->done, (unsigned long long)r->rows);
        const uint8_t *p = r->buf + r->pos;
        float label = fsgd_le_getf32(p);
        uint32_t n = fsgd_le_get32(p + 4);
        const int ones = (n & ONES) != 0;
        n &= ~ONES;
        const size_t rec = 8 + (ones ? 4 : 8) * (size_t)n;
        h = have(r, rec, err, errsz);
        if (h != 0)
            return h < 0 ? h : FSGD_E_TRUNCATED;
        p = r->buf + r->pos + 8;
        if (fsgd_csr_reserve(out, 1, n) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", r->path);
        size_t base = out->nnz;
        for (uint32_t i = 0; i < n; i++)
            out->col[base + i] = fsgd_le_get32(p + 4 * (size_t)i);
        for (uint32_t i = 0; i < n; i++)
            out->val[base + i] = ones ? 1.0f : fsgd_le_getf32(p + 4 * ((size_t)n + i));
        out->nnz += n;
        out->label[out->n_rows] = label;
        out->row_ptr[++out->n_rows] = out->nnz;
        if (n && (uint64_t)out->col[out->nnz - 1] + 1 > out->max_col)
            out->max_col = (uint64_t)out->col[out->nnz - 1] + 1;
        r->pos += rec;
        r->done++;
        got++;
    }
    return got;
}

int fsgd_rowcache_rewind(fsgd_rowcache_reader_t *r, char *err, size_t errsz)
{
    if (fseek(r->f, HEADER, SEEK_SET) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: seek failed: %s", r->path, strerror(errno));
    r->pos = r->len = 0;
    r->off = HEADER;
    r->done = 0;
    return FSGD_E_OK;
}

void fsgd_rowcache_free(fsgd_rowcache_reader_t *r)
{
    if (!r)
        return;
    fclose(r->f);
    free(r->buf);
    free(r->path);
    free(r);
}
