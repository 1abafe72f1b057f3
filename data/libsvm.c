/* Streaming LIBSVM reader.
 *
 * Lines are found with memchr in a large read buffer (grown when one line
 * does not fit) and parsed in place straight into the caller's CSR: the
 * entries of a row are written past out->nnz and only committed (nnz,
 * row_ptr, label advanced) once the whole row is valid, so a malformed row
 * never leaves a partial row behind and nothing is allocated per row.
 *
 * Numbers are parsed here, not with strtod: up to 19 significant digits go
 * into a uint64 mantissa, and when that mantissa is <= 2^53 and the decimal
 * exponent is within +-22 the double is m * 10^e or m / 10^-e, which is
 * exact-then-rounded-once (Clinger's fast path), i.e. identical to strtod.
 * Anything else (long mantissas, big exponents) falls back to strtod on a
 * copy of the token. Values are then rounded to float.
 *
 * Explicit zeros ("3:0") are kept as stored entries, as scikit-learn's
 * load_svmlight_file and LIBLINEAR do; they are harmless to training and
 * keeping them makes the CSR a faithful image of the file. */
#include "fsgd/libsvm.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/zsource.h"
#include "fsgd/input.h"
#include "libsvm_cross.h"
#include "libsvm_weights.h"

#define DEFAULT_BUF (4u << 20)
#define MAX_INDEX_1BASED 4294967296ull /* 2^32: column 2^32 - 1 */

/* Scratch for sorting rows when allow_unsorted is set (owned by a reader or
 * by one fsgd_libsvm_parse call; grows, never per row). */
typedef struct sort_scratch {
    uint64_t *keys;
    float *vals;
    size_t cap;
    uint64_t *raw; /* fields crosses: a row's columns before hashing, */
    float *rawv;   /* their values */
    char *field;   /* and fields */
    size_t raw_cap;
} sort_scratch_t;

#define MAX_ROW_CROSSES ((size_t)1 << 20) /* a row's crosses beyond this are an error, not a memory blow-up */

static void scratch_free(sort_scratch_t *s)
{
    free(s->keys);
    free(s->vals);
    free(s->raw);
    free(s->rawv);
    free(s->field);
}

/* Room for n raw entries; 0 or -1 (no memory). */
static int raw_reserve(sort_scratch_t *s, size_t n)
{
    if (n <= s->raw_cap)
        return 0;
    size_t cap = s->raw_cap ? s->raw_cap * 2 : 256;
    while (cap < n)
        cap *= 2;
    uint64_t *r = realloc(s->raw, cap * sizeof *r);
    if (!r)
        return -1;
    s->raw = r;
    float *v = realloc(s->rawv, cap * sizeof *v);
    if (!v)
        return -1;
    s->rawv = v;
    char *f = realloc(s->field, cap);
    if (!f)
        return -1;
    s->field = f;
    s->raw_cap = cap;
    return 0;
}

struct fsgd_libsvm_reader {
    fsgd_zsource_t *src; /* the file, decompressed when gzip or zstd */
    char *buf;
    size_t cap, pos, end, scan; /* [pos, end) unconsumed; no '\n' in [pos, scan) */
    int eof;
    int failed; /* sticky error */
    char errmsg[512];
    fsgd_libsvm_opts_t opts;
    fsgd_libsvm_stats_t stats;
    sort_scratch_t scratch;
    char *path;
    int stream;                /* not a regular file: bounded (fsgd/input.h) */
    uint64_t read_total, stream_max;
};

static inline int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static inline int is_end(const char *p, const char *e)
{
    return p == e || is_ws((unsigned char)*p) || *p == '#';
}

static inline int is_digit(unsigned char c) { return (unsigned)(c - '0') < 10u; }

static inline int little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static const double pow10_tab[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Parses a decimal floating-point number [+-]digits[.digits][(e|E)[+-]digits]
 * starting at p. Returns the end of the number, or NULL when there is no
 * number there. The result equals strtod's (correctly rounded). */
/* Hard case: strtod on a NUL-terminated copy of [start, end) (C locale
 * assumed). Out of line: rare, and it keeps the fast path small. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static double slow_strtod(const char *start, const char *end)
{
    size_t len = (size_t)(end - start);
    char small[128];
    char *tmp = len < sizeof small ? small : malloc(len + 1);
    if (!tmp)
        return NAN; /* reported as not a finite number */
    memcpy(tmp, start, len);
    tmp[len] = '\0';
    double d = strtod(tmp, NULL);
    if (tmp != small)
        free(tmp);
    return d;
}

#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline const char *parse_double(const char *p, const char *e, double *out)
{
    const char *start = p;
    int neg = 0;
    if (p < e && (*p == '+' || *p == '-')) {
        neg = *p == '-';
        p++;
    }
    uint64_t m = 0;
    int nd = 0, exp10 = 0, inexact = 0, any = 0;
    while (p < e && is_digit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        any = 1;
        if (nd < 19) {
            m = m * 10 + d;
            if (m)
                nd++;
        } else {
            exp10++;
            inexact |= d != 0;
        }
        p++;
    }
    if (p < e && *p == '.') {
        p++;
        while (p < e && is_digit((unsigned char)*p)) {
            unsigned d = (unsigned)(*p - '0');
            any = 1;
            if (nd < 19) {
                m = m * 10 + d;
                if (m)
                    nd++;
                exp10--;
            } else {
                inexact |= d != 0;
            }
            p++;
        }
    }
    if (!any)
        return NULL;
    if (p < e && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        int eneg = 0;
        if (q < e && (*q == '+' || *q == '-')) {
            eneg = *q == '-';
            q++;
        }
        if (q < e && is_digit((unsigned char)*q)) {
            int x = 0;
            while (q < e && is_digit((unsigned char)*q)) {
                if (x < 100000)
                    x = x * 10 + (*q - '0');
                q++;
            }
            exp10 += eneg ? -x : x;
            p = q;
        } /* else: "1e" ends before the 'e'; the caller sees garbage */
    }
    if (m == 0) {
        *out = neg ? -0.0 : 0.0;
        return p;
    }
    if (!inexact && m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
        double d = (double)m;
        d = exp10 >= 0 ? d * pow10_tab[exp10] : d / pow10_tab[-exp10];
        *out = neg ? -d : d;
        return p;
    }
    *out = slow_strtod(start, p);
    return p;
}

/* Reads the decimal digits among the 8 bytes at p (which must be readable)
 * into *value; returns the byte after them. A word at once: each digit
 * costs a multiply-add chained on the last in a byte-by-byte loop. */
static inline const char *leading_digits8(const char *p, uint64_t *value)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    if (!little_endian())
        return p;
    uint64_t x = w ^ 0x3030303030303030ull; /* a digit's byte: 0..9 */
    /* a byte's high bit set where it is not below 10 (no carry between bytes) */
    uint64_t not_digit = (x | ((x & 0x7F7F7F7F7F7F7F7Full) + 0x7676767676767676ull)) & 0x8080808080808080ull;
    int n = not_digit ? __builtin_ctzll(not_digit) >> 3 : 8;
    if (n == 0)
        return p;
    /* the n digits in the top bytes, zeros (leading zero digits) below */
    uint64_t v = x << (8 * (8 - n));
    v = v * 10 + (v >> 8);
    v = (((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
         (((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >>
        32;
    *value = v;
    return p + n;
}

/* Appends a printable copy of the token at p (up to whitespace or end, at
 * most 40 bytes) for "got '...'" in messages. */
static const char *token_text(const char *p, const char *e, char *buf, size_t cap)
{
    size_t n = 0;
    const char *q = p;
    while (q < e && !is_ws((unsigned char)*q) && n + 5 < cap && q - p < 40) {
        unsigned char c = (unsigned char)*q++;
        if (c >= 0x20 && c < 0x7f && c != '\'') {
            buf[n++] = (char)c;
        } else {
            n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
        }
    }
    if (q < e && !is_ws((unsigned char)*q) && n + 4 < cap) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

typedef struct line_ctx {
    const fsgd_libsvm_opts_t *opts;
    const char *src;
    uint64_t lineno;
    const char *line; /* start of line, for columns */
    sort_scratch_t *scratch;
    fsgd_libsvm_stats_t *stats; /* feature and cross entries counted (fields crosses) */
} line_ctx_t;

static int line_err(const line_ctx_t *c, char *err, size_t errsz, int code, const char *at, const char *e,
                    const char *what)
{
    char tok[64];
    return fsgd_err_fmt(err, errsz, code, "%s:%llu:%llu: expected %s, got '%s'", c->src,
                        (unsigned long long)c->lineno, (unsigned long long)(at - c->line + 1), what,
                        token_text(at, e, tok, sizeof tok));
}

uint32_t *fsgd_libsvm_slots_new(unsigned bits)
{
    return bits && bits <= 28 ? calloc((size_t)1 << bits, sizeof(uint32_t)) : NULL;
}

/* Counts column col for an index or a cross whose identity is key: a
 * 31-bit fingerprint of the first one seen in each column, bit 31 marking
 * a column counted as collided (as the delimited and VW readers count
 * theirs). Atomic, for threads sharing the table: each column is claimed
 * and marked once, so the totals do not depend on the order. */
static void note_slot(const line_ctx_t *c, uint32_t col, uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    const uint32_t f = ((uint32_t)key & 0x7FFFFFFFu) | 1u;
    uint32_t *slot = c->opts->slots + col, cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    for (;;) {
        if (cur == 0) {
            if (__atomic_compare_exchange_n(slot, &cur, f, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                c->stats->slots_used++;
                return;
            }
        } else if ((cur & 0x7FFFFFFFu) != f && !(cur & 0x80000000u)) {
            if (__atomic_compare_exchange_n(slot, &cur, cur | 0x80000000u, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                c->stats->slots_collided++;
                return;
            }
        } else {
            return;
        }
    }
}

/* 1 when this read counts columns (opts.slots). */
static int counting(const line_ctx_t *c)
{
    return c->opts->slots && c->opts->hash_bits && c->opts->hash_bits <= 28 && c->stats;
}

/* The column of 0-based index cl (hashed with hash_bits, counted when
 * counting: its 32-bit hash is its identity, its column the low bits). */
static uint32_t index_col(const line_ctx_t *c, uint64_t cl)
{
    const unsigned bits = c->opts->hash_bits;
    if (!bits || !counting(c))
        return bits ? fsgd_libsvm_hash_col(cl, bits) : (uint32_t)cl;
    const uint32_t h = fsgd_libsvm_hash_col(cl, 32), col = h & ((1u << bits) - 1);
    note_slot(c, col, h);
    return col;
}

/* Counting: a row's m crosses col[0..m), read as their 32-bit hashes (their
 * identities), counted and masked to their columns. */
static void count_crosses(const line_ctx_t *c, uint32_t *col, size_t m)
{
    const uint32_t mask = (1u << c->opts->hash_bits) - 1;
    for (size_t i = 0; counting(c) && i < m; i++) {
        const uint32_t h = col[i];
        col[i] = h & mask;
        note_slot(c, col[i], (uint64_t)h | (1ULL << 40)); /* never an index's identity */
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

uint32_t fsgd_libsvm_hash_col(uint64_t i, unsigned bits)
{
    i ^= i >> 33;
    i *= 0xff51afd7ed558ccdULL;
    i ^= i >> 33;
    i *= 0xc4ceb9fe1a85ec53ULL;
    i ^= i >> 33;
    return (uint32_t)(bits >= 32 ? i : i & ((1ULL << bits) - 1));
}

/* Finds the second occurrence of feature column `col` in the line (for the
 * location of a duplicate in an unsorted row). Error path only. */
static const char *find_duplicate(const line_ctx_t *c, const char *p, const char *e, uint32_t col)
{
    int seen = 0;
    uint64_t base = c->opts->zero_based ? 0 : 1;
    while (p < e) {
        while (p < e && is_ws((unsigned char)*p))
            p++;
        const char *tok = p;
        uint64_t idx = 0;
        while (p < e && is_digit((unsigned char)*p)) {
            idx = idx * 10 + (uint64_t)(*p - '0');
            p++;
        }
        if (p > tok && p < e && *p == ':' && idx - base == col && ++seen == 2)
            return tok;
        while (p < e && !is_ws((unsigned char)*p))
            p++;
    }
    return c->line;
}

/* Sorts the n entries at col/val by column; returns the index of a
 * duplicated column or -1. */
static long sort_row(sort_scratch_t *s, uint32_t *col, float *val, size_t n, int *nomem);

/* Sorts a hashed row and sums the entries that share a column; returns the
 * entries left, or -1 out of memory. */
static long sort_merge_row(sort_scratch_t *s, uint32_t *col, float *val, size_t n)
{
    int nomem = 0;
    size_t k = 0;
    if (n > 1 && sort_row(s, col, val, n, &nomem) >= 0 && !nomem) {
        /* sort_row stopped copying back at the first shared column: the
         * sorted keys are all in the scratch, copied back here */
        for (size_t i = 0; i < n; i++) {
            col[i] = (uint32_t)(s->keys[i] >> 32);
            val[i] = s->vals[(uint32_t)s->keys[i]];
        }
    }
    if (nomem)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (k && col[k - 1] == col[i]) {
            val[k - 1] += val[i];
        } else {
            col[k] = col[i];
            val[k] = val[i];
            k++;
        }
    }
    return (long)k;
}

static long sort_row(sort_scratch_t *s, uint32_t *col, float *val, size_t n, int *nomem)
{
    if (n > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < n)
            cap *= 2;
        uint64_t *k = realloc(s->keys, cap * sizeof *k);
        if (!k) {
            *nomem = 1;
            return -1;
        }
        s->keys = k;
        float *v = realloc(s->vals, cap * sizeof *v);
        if (!v) {
            *nomem = 1;
            return -1;
        }
        s->vals = v;
        s->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        s->keys[i] = (uint64_t)col[i] << 32 | i;
        s->vals[i] = val[i];
    }
    qsort(s->keys, n, sizeof *s->keys, cmp_u64);
    for (size_t i = 0; i < n; i++) {
        col[i] = (uint32_t)(s->keys[i] >> 32);
        val[i] = s->vals[(uint32_t)s->keys[i]];
        if (i && col[i] == col[i - 1])
            return (long)i;
    }
    return -1;
}

/* Parses one line [p, e) (no '\n'). Returns 1 when a row was appended to out,
 * 0 for a blank or comment-only line, or a negative error with err set.
 * out is untouched on error (entries past nnz may be scribbled on). */
static int parse_line(const line_ctx_t *c, const char *p, const char *e, fsgd_csr_t *out, char *err,
                      size_t errsz)
{
    const fsgd_libsvm_opts_t *o = c->opts;
    while (p < e && is_ws((unsigned char)*p))
        p++;
    if (p == e || *p == '#')
        return 0;

    double label, weight = 1;
    const char *q = parse_double(p, e, &label);
    if (q && q < e && *q == ':' && isfinite(label)) {
        if (!o->row_weights)
            return line_err(c, err, errsz, FSGD_E_PARSE, p, e,
                            "a label (a finite number; no label? label:weight needs --row-weights)");
        /* "label:weight": the row's importance weight */
        const char *w0 = q + 1;
        q = parse_double(w0, e, &weight);
        if (!q || !is_end(q, e) || !isfinite(weight) || weight < 0)
            return line_err(c, err, errsz, FSGD_E_PARSE, w0, e, "a row weight (a finite number >= 0) after 'label:'");
    } else if (!q || !is_end(q, e) || !isfinite(label)) {
        return line_err(c, err, errsz, FSGD_E_PARSE, p, e, "a label (a finite number)");
    }
    p = q;
    fsgd_libsvm_weights_t *wts = o->row_weights ? o->weights : NULL;
    if (wts && wts->n == wts->cap) { /* room for this row's weight before the row is committed */
        size_t cap = wts->cap ? wts->cap * 2 : 1024;
        double *w = realloc(wts->w, cap * sizeof *w);
        if (!w)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory for row weights", c->src,
                                (unsigned long long)c->lineno);
        wts->w = w;
        wts->cap = cap;
    }

    /* Every entry takes at least 4 bytes (" i:v"). */
    int rc = fsgd_csr_reserve(out, 1, (size_t)(e - p) / 4 + 1);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s:%llu: out of memory for a row of %zu bytes", c->src,
                            (unsigned long long)c->lineno, (size_t)(e - c->line));
    uint32_t *col = out->col + out->nnz;
    float *val = out->val + out->nnz;
    size_t n = 0;
    int64_t prev = -1;
    int sorted = 1;
    uint64_t base = o->zero_based ? 0 : 1;
    uint64_t limit = o->zero_based ? MAX_INDEX_1BASED - 1 : MAX_INDEX_1BASED;
    int first = 1;
    const int crossing = o->fields.n_terms > 0;
    for (;;) {
        while (p < e && is_ws((unsigned char)*p))
            p++;
        if (p == e || *p == '#')
            break;
        const char *tok = p;
        if (first && e - p >= 4 && memcmp(p, "qid:", 4) == 0) {
            first = 0;
            q = p + 4;
            if (q < e && (*q == '-' || *q == '+'))
                q++;
            const char *d0 = q;
            while (q < e && is_digit((unsigned char)*q))
                q++;
            if (q == d0 || !is_end(q, e))
                return line_err(c, err, errsz, FSGD_E_PARSE, tok, e, "qid:<integer>");
            p = q;
            continue;
        }
        first = 0;
        uint64_t idx = 0;
        /* the digits are most of a CTR file: up to 8 at once where 8 bytes
         * are left in the line, then one at a time as before */
        if (e - p >= 8)
            p = leading_digits8(p, &idx);
        while (p < e && is_digit((unsigned char)*p)) {
            if (idx <= MAX_INDEX_1BASED)
                idx = idx * 10 + (uint64_t)(*p - '0');
            p++;
        }
        if (p == tok || p == e || *p != ':')
            return line_err(c, err, errsz, FSGD_E_PARSE, tok, e, "index:value");
        if (idx < base)
            return line_err(c, err, errsz, FSGD_E_PARSE, tok, e, "a feature index >= 1 (indices are 1-based)");
        if (idx > limit)
            return line_err(c, err, errsz, FSGD_E_RANGE, tok, e,
                            o->zero_based ? "a feature index <= 4294967295" : "a feature index <= 4294967296");
        uint64_t cl = idx - base;
        if (!o->hash_bits && o->max_dim && cl >= o->max_dim) {
            char what[96];
            snprintf(what, sizeof what, "a feature index <= %llu (the dimension)",
                     (unsigned long long)(o->max_dim - 1 + base));
            return line_err(c, err, errsz, FSGD_E_RANGE, tok, e, what);
        }
        if ((int64_t)cl <= prev) {
            if (!o->allow_unsorted) {
                char what[96];
                snprintf(what, sizeof what, "a feature index > %llu (indices must be strictly increasing)",
                         (unsigned long long)((uint64_t)prev + base));
                return line_err(c, err, errsz, FSGD_E_PARSE, tok, e, what);
            }
            sorted = 0;
        }
        const char *v0 = ++p;
        double v;
        /* CTR data's every value: "1" alone, parsed as parse_double would */
        if (p < e && *p == '1' && (p + 1 == e || is_ws((unsigned char)p[1]) || p[1] == '#')) {
            v = 1.0;
            p++;
        } else {
            q = parse_double(p, e, &v);
            if (!q || !is_end(q, e) || !isfinite(v) || fabs(v) > FLT_MAX)
                return line_err(c, err, errsz, FSGD_E_PARSE, v0, e, "a finite number as feature value");
            p = q;
        }
        if (crossing) {
            if (raw_reserve(c->scratch, n + 1) < 0)
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory for a row's fields", c->src,
                                    (unsigned long long)c->lineno);
            c->scratch->raw[n] = cl;
            c->scratch->rawv[n] = (float)v;
            c->scratch->field[n] = fsgd_libsvm_fields_of(&o->fields, cl, base);
        }
        /* the file's order is checked on its indices (above), the columns ordered below */
        col[n] = index_col(c, cl);
        val[n] = (float)v;
        n++;
        prev = (int64_t)cl;
    }
    if (crossing) {
        const sort_scratch_t *sc = c->scratch;
        const fsgd_libsvm_fields_row_t row = {sc->raw, sc->rawv, sc->field, n};
        size_t m = fsgd_libsvm_fields_cross(&o->fields, &row, o->hash_bits, NULL, NULL, 0);
        if (m > MAX_ROW_CROSSES)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "%s:%llu: expected at most %zu crosses of a row's fields, got %zu",
                                c->src, (unsigned long long)c->lineno, MAX_ROW_CROSSES, m);
        /* the row's entries stay past nnz: realloc keeps them */
        if (fsgd_csr_reserve(out, 1, n + m) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory for a row's crosses", c->src,
                                (unsigned long long)c->lineno);
        col = out->col + out->nnz;
        val = out->val + out->nnz;
        fsgd_libsvm_fields_cross(&o->fields, &row, counting(c) ? 32 : o->hash_bits, col + n, val + n, m);
        count_crosses(c, col + n, m);
        if (c->stats) {
            c->stats->feature_entries += n;
            c->stats->cross_entries += m;
        }
        n += m;
        sorted = 0;
    }
    if (o->hash_bits || crossing) {
        long k = sort_merge_row(c->scratch, col, val, n);
        if (k < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory sorting a row", c->src,
                                (unsigned long long)c->lineno);
        n = (size_t)k;
        /* products of crosses and sums of entries sharing a column can leave a float */
        for (size_t i = 0; i < n; i++)
            if (!isfinite(val[i]))
                return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                                    "%s:%llu: expected entries that fit a float once %s, got %g at column %u",
                                    c->src, (unsigned long long)c->lineno,
                                    crossing ? "crossed (values multiplied) and hashed (shared columns summed)"
                                             : "hashed (shared columns summed)",
                                    (double)val[i], (unsigned)col[i]);
    } else if (!sorted) {
        int nomem = 0;
        long dup = sort_row(c->scratch, col, val, n, &nomem);
        if (nomem)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory sorting a row", c->src,
                                (unsigned long long)c->lineno);
        if (dup >= 0) {
            const char *at = find_duplicate(c, c->line, e, col[dup]);
            return line_err(c, err, errsz, FSGD_E_PARSE, at, e, "a feature index not seen before in the row");
        }
    }
    /* Commit the row. */
    uint64_t mc = n ? (uint64_t)col[n - 1] + 1 : 0; /* sorted by now */
    if (mc > out->max_col)
        out->max_col = mc;
    out->label[out->n_rows] = label;
    if (wts) {
        wts->w[wts->n++] = weight;
        wts->any |= weight != 1;
    }
    out->nnz += n;
    out->n_rows++;
    out->row_ptr[out->n_rows] = out->nnz;
    return 1;
}

int fsgd_libsvm_weights_append(fsgd_libsvm_weights_t *dst, const fsgd_libsvm_weights_t *src)
{
    if (!src->n)
        return FSGD_E_OK;
    if (dst->n + src->n > dst->cap) {
        size_t cap = dst->cap ? dst->cap : 1024;
        while (cap < dst->n + src->n)
            cap *= 2;
        double *w = realloc(dst->w, cap * sizeof *w);
        if (!w)
            return FSGD_E_NOMEM;
        dst->w = w;
        dst->cap = cap;
    }
    memcpy(dst->w + dst->n, src->w, src->n * sizeof *src->w);
    dst->n += src->n;
    dst->any |= src->any;
    return FSGD_E_OK;
}

void fsgd_libsvm_weights_free(fsgd_libsvm_weights_t *w)
{
    if (!w)
        return;
    free(w->w);
    memset(w, 0, sizeof *w);
}

void fsgd_libsvm_note_bad(fsgd_libsvm_stats_t *st, const char *msg)
{
    if (st->bad_rows < FSGD_LIBSVM_BAD_KEPT) {
        /* Truncated to the slot, marked with "..." when it did not fit. */
        char *d = st->first_bad[st->bad_rows];
        size_t cap = sizeof st->first_bad[0], n = strlen(msg);
        if (n >= cap) {
            memcpy(d, msg, cap - 4);
            memcpy(d + cap - 4, "...", 4);
        } else {
            memcpy(d, msg, n + 1);
        }
    }
    st->bad_rows++;
}

static int ensure_rowptr(fsgd_csr_t *out)
{
    return out->row_ptr ? 0 : fsgd_csr_reserve(out, 0, 0);
}

/* ---- reader ---- */

fsgd_libsvm_reader_t *fsgd_libsvm_open(const char *path, const fsgd_libsvm_opts_t *opts, char *err,
                                       size_t errsz)
{
    fsgd_libsvm_reader_t *r = calloc(1, sizeof *r);
    if (!r) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory opening '%s'", path);
        return NULL;
    }
    if (opts)
        r->opts = *opts;
    r->path = strdup(path);
    r->cap = r->opts.read_buf ? r->opts.read_buf : DEFAULT_BUF;
    r->buf = malloc(r->cap);
    if (!r->path || !r->buf) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory opening '%s'", path);
        fsgd_libsvm_close(r);
        return NULL;
    }
    if (!(r->src = fsgd_zsource_open(path, err, errsz))) {
        free(r->buf);
        free(r->path);
        free(r);
        return NULL;
    }
    r->stream = fsgd_zsource_is_stream(r->src);
    r->stream_max = fsgd_input_stream_max();
    return r;
}

/* Makes room and reads more input. Returns 0 or a negative error. */
static int refill(fsgd_libsvm_reader_t *r)
{
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->end - r->pos);
        r->end -= r->pos;
        r->scan -= r->pos;
        r->pos = 0;
    }
    if (r->end == r->cap) { /* one line fills the buffer: grow */
        if (r->cap >= FSGD_INPUT_MAX_LINE)
            return fsgd_input_line_error(r->errmsg, sizeof r->errmsg, r->path, r->stats.lines + 1);
        size_t cap = r->cap * 2;
        char *b = cap > r->cap ? realloc(r->buf, cap) : NULL;
        if (!b)
            return fsgd_err_fmt(r->errmsg, sizeof r->errmsg, FSGD_E_NOMEM,
                                "%s:%llu: line longer than %zu bytes, cannot grow the buffer", r->path,
                                (unsigned long long)r->stats.lines + 1, r->cap);
        r->buf = b;
        r->cap = cap;
    }
    ssize_t n = fsgd_zsource_read(r->src, r->buf + r->end, r->cap - r->end, r->errmsg, sizeof r->errmsg);
    if (n < 0)
        return (int)n;
    if (n == 0) {
        r->eof = 1;
        return 0;
    }
    r->end += (size_t)n;
    r->read_total += (uint64_t)n;
    if (r->stream && r->read_total > r->stream_max)
        return fsgd_input_stream_error(r->errmsg, sizeof r->errmsg, r->path, r->read_total);
    return 0;
}

long fsgd_libsvm_read(fsgd_libsvm_reader_t *r, fsgd_csr_t *out, size_t max_rows, char *err, size_t errsz)
{
    if (r->failed) {
        fsgd_err_fmt(err, errsz, r->failed, "%s", r->errmsg);
        return r->failed;
    }
    int rc = ensure_rowptr(out);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s: out of memory", r->path);
    line_ctx_t c = {&r->opts, r->path, 0, NULL, &r->scratch, &r->stats};
    char msg[512];
    long got = 0;
    while ((size_t)got < max_rows) {
        char *nl = memchr(r->buf + r->scan, '\n', r->end - r->scan);
        size_t next;
        const char *le;
        if (nl) {
            le = nl;
            next = (size_t)(nl - r->buf) + 1;
        } else if (r->eof) {
            if (r->pos == r->end)
                break;
            le = r->buf + r->end;
            next = r->end;
        } else {
            r->scan = r->end;
            rc = refill(r);
            if (rc < 0) {
                r->failed = rc;
                fsgd_err_fmt(err, errsz, rc, "%s", r->errmsg);
                return rc;
            }
            continue;
        }
        c.lineno = r->stats.lines + 1;
        c.line = r->buf + r->pos;
        rc = parse_line(&c, c.line, le, out, msg, sizeof msg);
        r->stats.lines++;
        r->stats.bytes += next - r->pos;
        r->pos = r->scan = next;
        if (rc == 1) {
            got++;
            r->stats.rows++;
        } else if (rc < 0) {
            if (r->opts.skip_bad && rc != FSGD_E_NOMEM) {
                fsgd_libsvm_note_bad(&r->stats, msg);
            } else {
                r->failed = rc;
                snprintf(r->errmsg, sizeof r->errmsg, "%s", msg);
                fsgd_err_fmt(err, errsz, rc, "%s", msg);
                return rc;
            }
        }
    }
    return got;
}

const fsgd_libsvm_stats_t *fsgd_libsvm_stats(const fsgd_libsvm_reader_t *r) { return &r->stats; }

void fsgd_libsvm_close(fsgd_libsvm_reader_t *r)
{
    if (!r)
        return;
    fsgd_zsource_close(r->src);
    free(r->buf);
    free(r->path);
    scratch_free(&r->scratch);
    free(r);
}

int fsgd_libsvm_load(const char *path, const fsgd_libsvm_opts_t *opts, fsgd_csr_t *out,
                     fsgd_libsvm_stats_t *stats, char *err, size_t errsz)
{
    fsgd_libsvm_reader_t *r = fsgd_libsvm_open(path, opts, err, errsz);
    if (!r)
        return FSGD_E_IO;
    long n;
    do
        n = fsgd_libsvm_read(r, out, (size_t)1 << 20, err, errsz);
    while (n > 0);
    if (stats)
        *stats = r->stats;
    fsgd_libsvm_close(r);
    return n < 0 ? (int)n : FSGD_E_OK;
}

long fsgd_libsvm_parse(const char *buf, size_t len, const fsgd_libsvm_opts_t *opts, const fsgd_parse_ctx_t *at,
                       fsgd_csr_t *out, char *err, size_t errsz)
{
    static const fsgd_libsvm_opts_t defaults;
    static const fsgd_parse_ctx_t from_line_1 = {.first_line = 1};
    if (!at)
        at = &from_line_1;
    const char *src = at->src;
    fsgd_libsvm_stats_t *stats = at->stats;
    fsgd_libsvm_stats_t local;
    if (!stats) {
        memset(&local, 0, sizeof local);
        stats = &local;
    }
    if (!opts)
        opts = &defaults;
    if (!src)
        src = "<buffer>";
    int rc = ensure_rowptr(out);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s: out of memory", src);
    sort_scratch_t scratch = {0};
    line_ctx_t c = {opts, src, at->first_line, NULL, &scratch, stats};
    const int skip_bad = opts->skip_bad || at->skip_bad;
    const char *p = buf, *e = buf + len;
    char msg[512];
    long got = 0;
    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        c.line = p;
        rc = parse_line(&c, p, le, out, msg, sizeof msg);
        stats->lines++;
        stats->bytes += (uint64_t)(le - p) + (nl != NULL);
        c.lineno++;
        p = nl ? nl + 1 : e;
        if (rc == 1) {
            got++;
            stats->rows++;
        } else if (rc < 0) {
            if (skip_bad && rc != FSGD_E_NOMEM) {
                fsgd_libsvm_note_bad(stats, msg);
            } else {
                fsgd_err_fmt(err, errsz, rc, "%s", msg);
                got = rc;
                break;
            }
        }
    }
    scratch_free(&scratch);
    return got;
}
