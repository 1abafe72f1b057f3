/* Binary row cache; see fsgd/rowcache.h. */
#include "fsgd/rowcache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsgd/error.h"
#include "fsgd/le.h"
#include "data_testing.h"

#define MAGIC "FSGDROWS"
#define HEADER 120
#define SEC_OFF(s) (16 + 32 * (s))
#define BUF (4u << 20)
#define ONES 0x80000000u /* record flag in n: every value is 1, none stored */
#define META_MAX (1u << 20)

static const char *const sec_name[FSGD_ROWCACHE_SECTIONS] = {"train", "holdout", "test"};

typedef struct section {
    uint64_t rows, max_col, bytes;
    uint64_t s1, s2; /* running sums (rowcache.h) */
    uint64_t sum;    /* the header's */
} section_t;

static void sum_words(section_t *s, const uint8_t *p, size_t len)
{
    uint64_t s1 = s->s1, s2 = s->s2;
    for (size_t i = 0; i + 4 <= len; i += 4) {
        s1 += fsgd_le_get32(p + i);
        s2 += s1;
    }
    s->s1 = s1;
    s->s2 = s2;
}

static uint64_t sum_final(const section_t *s)
{
    return s->s1 ^ ((s->s2 << 32) | (s->s2 >> 32));
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

struct fsgd_rowcache_writer {
    FILE *f;
    int own;
    char *path;
    section_t sec[FSGD_ROWCACHE_SECTIONS];
    int cur;
    uint8_t *buf;
    size_t len;
};

struct fsgd_rowcache_reader {
    FILE *f;
    char *path;
    char *meta;
    section_t sec[FSGD_ROWCACHE_SECTIONS];
    uint64_t start[FSGD_ROWCACHE_SECTIONS]; /* file offset of each section */
    int cur;
    uint64_t done, used; /* rows and bytes of the current section consumed */
    section_t run;       /* running sum of the current section */
    uint8_t *buf;
    size_t cap, pos, len;
    uint64_t off; /* file offset of buf[0] */
};

static void header(uint8_t h[HEADER], uint32_t version, const section_t *sec, const char *meta, uint32_t meta_len)
{
    memset(h, 0, HEADER);
    memcpy(h, MAGIC, 8);
    fsgd_le_put32(h + 8, version);
    fsgd_le_put32(h + 12, meta_len);
    for (int s = 0; s < FSGD_ROWCACHE_SECTIONS; s++) {
        uint8_t *p = h + SEC_OFF(s);
        fsgd_le_put64(p, sec[s].rows);
        fsgd_le_put64(p + 8, sec[s].max_col);
        fsgd_le_put64(p + 16, sec[s].bytes);
        fsgd_le_put64(p + 24, sec[s].sum);
    }
    uint64_t c = fnv(0xCBF29CE484222325ull, h, HEADER - 8);
    fsgd_le_put64(h + HEADER - 8, fnv(c, (const uint8_t *)meta, meta_len));
}

static void writer_free(fsgd_rowcache_writer_t *w)
{
    if (!w)
        return;
    if (w->own && w->f)
        fclose(w->f);
    free(w->buf);
    free(w->path);
    free(w);
}

fsgd_rowcache_writer_t *fsgd_rowcache_create_stream(FILE *f, const char *name, char *err, size_t errsz)
{
    fsgd_rowcache_writer_t *w = calloc(1, sizeof *w);
    if (w) {
        w->buf = malloc(BUF);
        w->path = strdup(name);
    }
    if (!w || !w->buf || !w->path) {
        writer_free(w);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", name);
        return NULL;
    }
    w->f = f;
    uint8_t h[HEADER];
    header(h, 0, w->sec, "", 0); /* version 0 until closed */
    if (fwrite(h, 1, HEADER, f) != HEADER) {
        fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot write cache '%s': %s", name, strerror(errno));
        w->f = NULL;
        writer_free(w);
        return NULL;
    }
    return w;
}

fsgd_rowcache_writer_t *fsgd_rowcache_create(const char *path, char *err, size_t errsz)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot write cache '%s': %s", path, strerror(errno));
        return NULL;
    }
    fsgd_rowcache_writer_t *w = fsgd_rowcache_create_stream(f, path, err, errsz);
    if (!w)
        fclose(f);
    else
        w->own = 1;
    return w;
}

static int flush(fsgd_rowcache_writer_t *w, char *err, size_t errsz)
{
    if (w->len && fwrite(w->buf, 1, w->len, w->f) != w->len)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->len = 0;
    return FSGD_E_OK;
}

static int append(fsgd_rowcache_writer_t *w, const fsgd_csr_t *m, char *err, size_t errsz)
{
    section_t *sec = &w->sec[w->cur];
    for (size_t r = 0; m && r < m->n_rows; r++) {
        uint64_t lo = m->row_ptr[r], n = m->row_ptr[r + 1] - lo;
        if (n >= ONES)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "%s: a row of %llu entries (at most 2^31-1)", w->path,
                                (unsigned long long)n);
        int ones = 1; /* a binary batch (fsgd/csr.h): every row */
        for (uint64_t i = 0; i < n && ones && m->val; i++)
            ones = m->val[lo + i] == 1.0f;
        size_t need = 8 + (ones ? 4 : 8) * (size_t)n;
        if (w->len + need > BUF)
            FSGD_TRY(flush(w, err, errsz));
        uint8_t hd[8];
        fsgd_le_putf32(hd, (float)m->label[r]);
        fsgd_le_put32(hd + 4, (uint32_t)n | (ones ? ONES : 0));
        if (need > BUF) { /* a huge row: straight through, in pieces of the buffer */
            if (fwrite(hd, 1, 8, w->f) != 8)
                return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: write failed: %s", w->path, strerror(errno));
            sum_words(sec, hd, 8);
            for (int part = 0; part < (ones ? 1 : 2); part++) {
                for (uint64_t i = 0; i < n;) {
                    size_t k = 0;
                    for (; i < n && k + 4 <= BUF; i++, k += 4) {
                        if (part == 0)
                            fsgd_le_put32(w->buf + k, m->col[lo + i]);
                        else
                            fsgd_le_putf32(w->buf + k, m->val[lo + i]);
                    }
                    sum_words(sec, w->buf, k);
                    w->len = k;
                    FSGD_TRY(flush(w, err, errsz));
                }
            }
        } else {
            uint8_t *p = w->buf + w->len, *p0 = p;
            memcpy(p, hd, 8);
            p += 8;
            for (uint64_t i = 0; i < n; i++, p += 4)
                fsgd_le_put32(p, m->col[lo + i]);
            for (uint64_t i = 0; i < n && !ones; i++, p += 4)
                fsgd_le_putf32(p, m->val[lo + i]);
            sum_words(sec, p0, need);
            w->len += need;
        }
        for (uint64_t i = 0; i < n; i++)
            if ((uint64_t)m->col[lo + i] + 1 > sec->max_col)
                sec->max_col = (uint64_t)m->col[lo + i] + 1;
        sec->rows++;
        sec->bytes += need;
    }
    return FSGD_E_OK;
}

int fsgd_rowcache_append(fsgd_rowcache_writer_t *w, const fsgd_csr_t *m, char *err, size_t errsz)
{
    return append(w, m, err, errsz);
}

void fsgd_rowcache_discard(fsgd_rowcache_writer_t *w)
{
    writer_free(w);
}

int fsgd_rowcache_close(fsgd_rowcache_writer_t *w, const fsgd_csr_t *hold, const fsgd_csr_t *test,
                        const char *meta, char *err, size_t errsz)
{
    int rc = FSGD_E_OK;
    if (!meta)
        meta = "";
    size_t ml = strlen(meta);
    if (ml > META_MAX)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "%s: %zu bytes of metadata (at most %u)", w->path, ml, META_MAX);
    w->cur = FSGD_ROWCACHE_HOLD;
    rc = append(w, hold, err, errsz);
    w->cur = FSGD_ROWCACHE_TEST;
    if (rc == 0)
        rc = append(w, test, err, errsz);
    if (rc == 0)
        rc = flush(w, err, errsz);
    if (rc == 0 && fwrite(meta, 1, ml, w->f) != ml)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: write failed: %s", w->path, strerror(errno));
    for (int s = 0; s < FSGD_ROWCACHE_SECTIONS; s++)
        w->sec[s].sum = sum_final(&w->sec[s]);
    uint8_t h[HEADER];
    header(h, FSGD_ROWCACHE_VERSION, w->sec, meta, (uint32_t)ml);
    if (rc == 0 && (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, 1, HEADER, w->f) != HEADER || fflush(w->f) != 0))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: write failed: %s", w->path, strerror(errno));
    if (w->own) {
        if (fclose(w->f) != 0 && rc == 0)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: close failed: %s", w->path, strerror(errno));
        w->f = NULL;
    }
    writer_free(w);
    return rc;
}

static void reader_free(fsgd_rowcache_reader_t *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    free(r->buf);
    free(r->path);
    free(r->meta);
    free(r);
}

static fsgd_rowcache_reader_t *open_fail(fsgd_rowcache_reader_t *r, int *why, int code)
{
    if (why)
        *why = code;
    reader_free(r);
    return NULL;
}

fsgd_rowcache_reader_t *fsgd_rowcache_open(const char *path, fsgd_rowcache_info_t *info, int *why, char *err,
                                           size_t errsz)
{
    fsgd_rowcache_reader_t *r = calloc(1, sizeof *r);
    if (r) {
        r->buf = malloc(BUF);
        r->path = strdup(path);
    }
    if (!r || !r->buf || !r->path) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
        return open_fail(r, why, FSGD_E_NOMEM);
    }
    r->f = fopen(path, "rb");
    if (!r->f) {
        fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot open cache '%s': %s", path, strerror(errno));
        return open_fail(r, why, FSGD_E_IO);
    }
    uint8_t h[HEADER];
    size_t got = fread(h, 1, HEADER, r->f);
    if (got < 8 || memcmp(h, MAGIC, 8) != 0) {
        fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: not an fsgd row cache", path);
        return open_fail(r, why, FSGD_E_FORMAT);
    }
    uint32_t version = got >= 12 ? fsgd_le_get32(h + 8) : 0;
    if (version != FSGD_ROWCACHE_VERSION) {
        if (version == 0)
            fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: an unfinished row cache (its writer was interrupted)",
                         path);
        else
            fsgd_err_fmt(err, errsz, FSGD_E_VERSION, "%s: row cache format version %u (this fsgd reads version %d)",
                         path, version, FSGD_ROWCACHE_VERSION);
        return open_fail(r, why, version == 0 ? FSGD_E_TRUNCATED : FSGD_E_VERSION);
    }
    if (got != HEADER) {
        fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: row cache cut short in its header", path);
        return open_fail(r, why, FSGD_E_TRUNCATED);
    }
    uint32_t ml = fsgd_le_get32(h + 12);
    uint64_t end = HEADER;
    for (int s = 0; s < FSGD_ROWCACHE_SECTIONS; s++) {
        const uint8_t *p = h + SEC_OFF(s);
        r->sec[s].rows = fsgd_le_get64(p);
        r->sec[s].max_col = fsgd_le_get64(p + 8);
        r->sec[s].bytes = fsgd_le_get64(p + 16);
        r->sec[s].sum = fsgd_le_get64(p + 24);
        r->start[s] = end;
        end += r->sec[s].bytes < UINT64_MAX / 4 ? r->sec[s].bytes : UINT64_MAX / 4;
    }
    const uint64_t meta_at = end;
    end += ml;
    struct stat st;
    int sized = fstat(fileno(r->f), &st) == 0 && (uint64_t)st.st_size == end;
    if (!sized) {
        fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: row cache is %llu bytes, its header says %llu (%s)", path,
                     (unsigned long long)st.st_size, (unsigned long long)end,
                     (uint64_t)st.st_size < end ? "cut short" : "extra bytes at the end");
        return open_fail(r, why, FSGD_E_TRUNCATED);
    }
    if (ml > META_MAX || !(r->meta = malloc((size_t)ml + 1)) || fseeko(r->f, (off_t)meta_at, SEEK_SET) != 0 ||
        fread(r->meta, 1, ml, r->f) != ml ||
        fnv(fnv(0xCBF29CE484222325ull, h, HEADER - 8), (const uint8_t *)r->meta, ml) != fsgd_le_get64(h + HEADER - 8) ||
        fseeko(r->f, HEADER, SEEK_SET) != 0) {
        fsgd_err_fmt(err, errsz, FSGD_E_CRC, "%s: row cache header is corrupt (checksum mismatch)", path);
        return open_fail(r, why, FSGD_E_CRC);
    }
    r->meta[ml] = '\0';
    r->cap = BUF;
    r->cur = FSGD_ROWCACHE_TRAIN;
    r->off = r->start[FSGD_ROWCACHE_TRAIN];
    if (info) {
        for (int s = 0; s < FSGD_ROWCACHE_SECTIONS; s++) {
            info->rows[s] = r->sec[s].rows;
            info->max_col[s] = r->sec[s].max_col;
        }
        info->meta = r->meta;
    }
    return r;
}

/* Makes need bytes available at buf[pos]; the caller has checked that they
 * lie within the file. 0 or an error. */
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
    return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: cut short at byte %llu in %s row %llu of %llu", r->path,
                        (unsigned long long)(r->off + r->len), sec_name[r->cur], (unsigned long long)r->done,
                        (unsigned long long)r->sec[r->cur].rows);
}

static int corrupt(fsgd_rowcache_reader_t *r, int code, const char *what, char *err, size_t errsz)
{
    return fsgd_err_fmt(err, errsz, code, "%s: corrupt row cache: %s in %s row %llu (byte %llu); delete it to have "
                                          "it rewritten",
                        r->path, what, sec_name[r->cur], (unsigned long long)r->done,
                        (unsigned long long)(r->off + r->pos));
}

long fsgd_rowcache_read(fsgd_rowcache_reader_t *r, fsgd_csr_t *out, size_t max_rows, char *err, size_t errsz)
{
    fsgd_csr_clear(out);
    const section_t *sec = &r->sec[r->cur];
    long got = 0;
    while ((size_t)got < max_rows && r->done < sec->rows) {
        if (sec->bytes - r->used < 8)
            return corrupt(r, FSGD_E_FORMAT, "a record past the section's end", err, errsz);
        int h = have(r, 8, err, errsz);
        if (h != 0)
            return h;
        const uint8_t *p = r->buf + r->pos;
        float label = fsgd_le_getf32(p);
        uint32_t n = fsgd_le_get32(p + 4);
        const int ones = (n & ONES) != 0;
        n &= ~ONES;
        const uint64_t rec = 8 + (ones ? 4 : 8) * (uint64_t)n;
        if (rec > sec->bytes - r->used)
            return corrupt(r, FSGD_E_FORMAT, "a record past the section's end", err, errsz);
        h = have(r, (size_t)rec, err, errsz);
        if (h != 0)
            return h;
        p = r->buf + r->pos + 8;
        if (fsgd_csr_reserve(out, 1, n) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", r->path);
        size_t base = out->nnz;
        uint32_t mc = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t c = fsgd_le_get32(p + 4 * (size_t)i);
            out->col[base + i] = c;
            mc = c > mc ? c : mc;
        }
        if (n && (uint64_t)mc >= sec->max_col)
            return corrupt(r, FSGD_E_FORMAT, "a column past the header's largest", err, errsz);
        for (uint32_t i = 0; i < n; i++)
            out->val[base + i] = ones ? 1.0f : fsgd_le_getf32(p + 4 * ((size_t)n + i));
        sum_words(&r->run, r->buf + r->pos, (size_t)rec);
        out->nnz += n;
        out->label[out->n_rows] = label;
        out->row_ptr[++out->n_rows] = out->nnz;
        if (n && (uint64_t)mc + 1 > out->max_col)
            out->max_col = (uint64_t)mc + 1;
        r->pos += (size_t)rec;
        r->used += rec;
        r->done++;
        got++;
    }
    if (r->done == sec->rows && r->used != UINT64_MAX) {
        if (r->used != sec->bytes)
            return corrupt(r, FSGD_E_FORMAT, "rows that end before the section's bytes", err, errsz);
        if (sum_final(&r->run) != sec->sum)
            return corrupt(r, FSGD_E_CRC, "a checksum mismatch", err, errsz);
        r->used = UINT64_MAX; /* checked once */
    }
    return got;
}

int fsgd_rowcache_seek(fsgd_rowcache_reader_t *r, fsgd_rowcache_section_t s, char *err, size_t errsz)
{
    if (fseeko(r->f, (off_t)r->start[s], SEEK_SET) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: seek failed: %s", r->path, strerror(errno));
    r->cur = (int)s;
    r->pos = r->len = 0;
    r->off = r->start[s];
    r->done = r->used = 0;
    r->run.s1 = r->run.s2 = 0;
    return FSGD_E_OK;
}

int fsgd_rowcache_rewind(fsgd_rowcache_reader_t *r, char *err, size_t errsz)
{
    return fsgd_rowcache_seek(r, FSGD_ROWCACHE_TRAIN, err, errsz);
}

void fsgd_rowcache_free(fsgd_rowcache_reader_t *r)
{
    reader_free(r);
}
