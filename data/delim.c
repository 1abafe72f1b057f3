/* Delimited text (CSV/TSV/Criteo) to hashed CSR rows; see fsgd/delim.h. */
#include "fsgd/delim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL /* header-only use: the hash is inlined into the loop */
#include <xxhash.h>

#include "fsgd/error.h"
#include "fsgd/input.h"
#include "fsgd/zsource.h"
#include "data_testing.h"

static const char *const kind_name[] = {"skip", "label", "num", "cat"};

static int parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 19)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* One COLUMNS item ("cat*26") appended to spec. */
static int add_columns(fsgd_delim_spec_t *spec, const char *item, size_t len, char *err, size_t errsz)
{
    const char *star = memchr(item, '*', len);
    size_t name_len = star ? (size_t)(star - item) : len;
    uint64_t rep = 1;
    if (star && (parse_u64(star + 1, len - name_len - 1, &rep) < 0 || rep == 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "columns: '%.*s': expected NAME*COUNT with COUNT >= 1",
                            (int)len, item);
    int kind = -1;
    for (int k = 0; k < 4; k++)
        if (strlen(kind_name[k]) == name_len && !memcmp(kind_name[k], item, name_len))
            kind = k;
    if (kind < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "columns: '%.*s' is not label, num, cat or skip", (int)name_len,
                            item);
    if (rep > FSGD_DELIM_MAX_COLS - spec->n_cols)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "columns: more than %d", FSGD_DELIM_MAX_COLS);
    for (uint64_t i = 0; i < rep; i++) {
        if (kind == FSGD_COL_LABEL) {
            if (spec->label_col != (size_t)-1)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "columns: more than one label column");
            spec->label_col = spec->n_cols;
        }
        spec->kind[spec->n_cols++] = (uint8_t)kind;
    }
    return FSGD_E_OK;
}

int fsgd_delim_spec_add_crosses(fsgd_delim_spec_t *spec, const char *terms, char *err, size_t errsz)
{
    const char *p = terms;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (spec->n_crosses == FSGD_DELIM_MAX_CROSSES)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: more than %d crosses", FSGD_DELIM_MAX_CROSSES);
        int k = 0;
        for (const char *q = p, *e = p + n; q < e;) {
            size_t m = (size_t)(memchr(q, '*', (size_t)(e - q)) ? (const char *)memchr(q, '*', (size_t)(e - q)) - q
                                                                 : e - q);
            uint64_t c;
            if (k == 3 || parse_u64(q, m, &c) < 0 || c < 1 || c > spec->n_cols)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "interactions: '%.*s' is not A*B or A*B*C with A, B, C column numbers in 1..%zu "
                                    "(a cross of 2 or 3 columns, e.g. 15*16)",
                                    (int)n, p, spec->n_cols);
            if (spec->kind[c - 1] != FSGD_COL_NUM && spec->kind[c - 1] != FSGD_COL_CAT)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: '%.*s': column %llu is %s, not a num or cat column",
                                    (int)n, p, (unsigned long long)c,
                                    spec->kind[c - 1] == FSGD_COL_LABEL ? "the label" : "skipped");
            spec->cross[spec->n_crosses][k++] = (uint16_t)(c - 1);
            q += m + (q + m < e);
        }
        if (k < 2)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: '%.*s' crosses fewer than 2 columns", (int)n, p);
        spec->cross_len[spec->n_crosses++] = (uint8_t)k;
        p += n + (p[n] == ',');
    }
    return FSGD_E_OK;
}

/* The 1-based number of the column named [name, name + len): a header
 * field equal to it (header: the file's first line, may be NULL), else
 * Criteo's I<k> (the k-th num column) or C<k> (the k-th cat column).
 * 0 when none, -1 when two header fields have the name. */
static long column_named(const fsgd_delim_spec_t *spec, const char *header, const char *name, size_t len)
{
    const size_t header_len = header ? strlen(header) : 0;
    long found = 0;
    size_t col = 0;
    for (const char *p = header, *e = header ? header + header_len : NULL; p && p <= e; col++) {
        const char *q = memchr(p, spec->sep, (size_t)(e - p));
        const char *fe = q ? q : e;
        if (!q && fe > p && fe[-1] == '\r')
            fe--;
        if ((size_t)(fe - p) == len && !memcmp(p, name, len)) {
            if (found)
                return -1;
            found = (long)col + 1;
        }
        if (!q)
            break;
        p = q + 1;
    }
    uint64_t k;
    if (found || len < 2 || (name[0] != 'I' && name[0] != 'C') || parse_u64(name + 1, len - 1, &k) < 0 || k == 0)
        return found;
    const int kind = name[0] == 'I' ? FSGD_COL_NUM : FSGD_COL_CAT;
    for (size_t c = 0; c < spec->n_cols; c++)
        if (spec->kind[c] == kind && --k == 0)
            return (long)c + 1;
    return 0;
}

/* "I1..I13, C1..C26" (the spec's conventional names) into buf. */
static void conventional_names(const fsgd_delim_spec_t *spec, char *buf, size_t cap)
{
    size_t num = 0, cat = 0;
    for (size_t c = 0; c < spec->n_cols; c++) {
        num += spec->kind[c] == FSGD_COL_NUM;
        cat += spec->kind[c] == FSGD_COL_CAT;
    }
    int w = 0;
    buf[0] = '\0';
    if (num)
        w = snprintf(buf, cap, num > 1 ? "I1..I%zu" : "I1", num);
    if (cat && w >= 0 && (size_t)w < cap)
        snprintf(buf + w, cap - (size_t)w, cat > 1 ? "%sC1..C%zu" : "%sC1", w ? ", " : "", cat);
}

int fsgd_delim_crosses_by_name(const fsgd_delim_spec_t *spec, const char *terms, const char *header, const char *src,
                               char *out, size_t cap, char *err, size_t errsz)
{
    const size_t header_len = header ? strlen(header) : 0;
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = terms; *p;) {
        const size_t t = strcspn(p, ",");
        const int cross = memchr(p, '*', t) != NULL; /* not a cross: left for fsgd_delim_spec_add_crosses to name */
        for (const char *q = p, *e = p + t; q < e;) {
            const char *star = memchr(q, '*', (size_t)(e - q));
            const size_t m = (size_t)((star ? star : e) - q);
            uint64_t num;
            long c = !cross || parse_u64(q, m, &num) == 0 ? -2 : column_named(spec, header, q, m);
            if (c == -1)
                return fsgd_err_fmt(err, errsz, FSGD_E_PARSE,
                                    "interactions: '%.*s': two columns of %s's header are named '%.*s' (name them by "
                                    "number)",
                                    (int)t, p, src ? src : "the file", (int)m, q);
            if (c == 0) {
                char names[64];
                conventional_names(spec, names, sizeof names);
                if (!header)
                    return fsgd_err_fmt(err, errsz, FSGD_E_PARSE,
                                        "interactions: '%.*s': no column named '%.*s' among Criteo's names %s (no "
                                        "header was read; or give column numbers 1..%zu)",
                                        (int)t, p, (int)m, q, names[0] ? names : "(none)", spec->n_cols);
                const int show = header_len > 200 ? 200 : (int)header_len;
                return fsgd_err_fmt(err, errsz, FSGD_E_PARSE,
                                    "interactions: '%.*s': no column named '%.*s' in the header of %s (%.*s%s) nor "
                                    "among Criteo's names %s (or give column numbers 1..%zu)",
                                    (int)t, p, (int)m, q, src ? src : "the file", show, header,
                                    (size_t)show < header_len ? "..." : "", names[0] ? names : "(none)", spec->n_cols);
            }
            /* a name's number, or the number as written */
            int w = c == -2 ? snprintf(out + n, cap - n, "%.*s%s", (int)m, q, star && star < e ? "*" : "")
                            : snprintf(out + n, cap - n, "%ld%s", c, star && star < e ? "*" : "");
            if (w < 0 || (size_t)w >= cap - n)
                return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "interactions: '%s' is too long", terms);
            n += (size_t)w;
            q += m + (star && star < e);
        }
        p += t;
        if (*p == ',') {
            if (n + 1 >= cap)
                return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "interactions: '%s' is too long", terms);
            out[n++] = ',';
            out[n] = '\0';
            p++;
        }
    }
    return FSGD_E_OK;
}

int fsgd_delim_read_header(const char *path, char *buf, size_t cap, size_t *len, char *err, size_t errsz)
{
    fsgd_zsource_t *z = fsgd_zsource_open(path, err, errsz);
    if (!z)
        return FSGD_E_IO;
    size_t n = 0;
    int rc = FSGD_E_OK;
    while (n < cap) {
        ssize_t got = fsgd_zsource_read(z, buf + n, cap - n, err, errsz);
        if (got < 0)
            rc = (int)got;
        if (got <= 0)
            break;
        char *nl = memchr(buf + n, '\n', (size_t)got);
        n += (size_t)got;
        if (nl) {
            n = (size_t)(nl - buf);
            break;
        }
    }
    fsgd_zsource_close(z);
    if (rc == 0 && n == cap)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:1: the header is longer than %zu bytes", path, cap);
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n < cap ? n : cap - 1] = '\0';
    *len = n;
    return rc;
}

static int set_option(fsgd_delim_spec_t *spec, const char *opt, size_t len, char *err, size_t errsz)
{
    if (len > 13 && !memcmp(opt, "interactions=", 13)) {
        char terms[FSGD_DELIM_SPEC_MAX];
        snprintf(terms, sizeof terms, "%.*s", (int)(len - 13), opt + 13);
        return fsgd_delim_spec_add_crosses(spec, terms, err, errsz);
    }
    const char *eq = memchr(opt, '=', len);
    uint64_t v;
    if (!eq || parse_u64(eq + 1, len - (size_t)(eq - opt) - 1, &v) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "option '%.*s': expected NAME=NUMBER", (int)len, opt);
    size_t nl = (size_t)(eq - opt);
    if (nl == 6 && !memcmp(opt, "header", 6) && v <= 1)
        spec->header = (int)v;
    else if (nl == 4 && !memcmp(opt, "bits", 4) && v >= 1 && v <= 32)
        spec->bits = (unsigned)v;
    else if (nl == 4 && !memcmp(opt, "seed", 4))
        spec->seed = v;
    else
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "option '%.*s': expected header=0|1, bits=1..32 or seed=N", (int)len, opt);
    return FSGD_E_OK;
}

int fsgd_delim_spec_parse(const char *text, fsgd_delim_spec_t *spec, char *err, size_t errsz)
{
    memset(spec, 0, sizeof *spec);
    spec->bits = 24;
    spec->label_col = (size_t)-1;
    if (!strcmp(text, "criteo"))
        text = "tsv:label,num*13,cat*26";
    if (!strncmp(text, "tsv:", 4))
        spec->sep = '\t';
    else if (!strncmp(text, "csv:", 4))
        spec->sep = ',';
    else
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "format '%s': expected libsvm, criteo, tsv:COLUMNS or csv:COLUMNS", text);
    const char *p = text + 4;
    const char *cols_end = strchr(p, ':');
    if (!cols_end)
        cols_end = p + strlen(p);
    while (p < cols_end) {
        const char *c = memchr(p, ',', (size_t)(cols_end - p));
        const char *e = c ? c : cols_end;
        FSGD_TRY(add_columns(spec, p, (size_t)(e - p), err, errsz));
        p = c ? c + 1 : cols_end;
    }
    if (spec->label_col == (size_t)-1)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "columns: no label column in '%s'", text);
    p = cols_end;
    while (*p == ':') {
        p++;
        const char *e = strchr(p, ':');
        if (!e)
            e = p + strlen(p);
        FSGD_TRY(set_option(spec, p, (size_t)(e - p), err, errsz));
        p = e;
    }
    return FSGD_E_OK;
}

int fsgd_delim_spec_format(const fsgd_delim_spec_t *spec, char *out, size_t cap)
{
    size_t n = 0;
    int w = snprintf(out, cap, "%s:", spec->sep == '\t' ? "tsv" : "csv");
    if (w < 0 || (size_t)w >= cap)
        return FSGD_E_RANGE;
    n = (size_t)w;
    for (size_t i = 0; i < spec->n_cols;) {
        size_t j = i;
        while (j < spec->n_cols && spec->kind[j] == spec->kind[i])
            j++;
        w = j - i > 1 ? snprintf(out + n, cap - n, "%s%s*%zu", i ? "," : "", kind_name[spec->kind[i]], j - i)
                      : snprintf(out + n, cap - n, "%s%s", i ? "," : "", kind_name[spec->kind[i]]);
        if (w < 0 || (size_t)w >= cap - n)
            return FSGD_E_RANGE;
        n += (size_t)w;
        i = j;
    }
    w = snprintf(out + n, cap - n, ":header=%d:bits=%u:seed=%llu", spec->header, spec->bits,
                 (unsigned long long)spec->seed);
    for (int t = 0; t < spec->n_crosses && w >= 0 && (size_t)w < cap - n; t++) {
        n += (size_t)w;
        w = snprintf(out + n, cap - n, "%s%u*%u", t ? "," : ":interactions=", spec->cross[t][0] + 1u,
                     spec->cross[t][1] + 1u);
        if (w >= 0 && (size_t)w < cap - n && spec->cross_len[t] == 3) {
            n += (size_t)w;
            w = snprintf(out + n, cap - n, "*%u", spec->cross[t][2] + 1u);
        }
    }
    return w < 0 || (size_t)w >= cap - n ? FSGD_E_RANGE : FSGD_E_OK;
}

static uint64_t hash64(const fsgd_delim_spec_t *spec, size_t col, const char *text, size_t len)
{
    return XXH3_64bits_withSeed(text, len, spec->seed + col);
}

static uint32_t slot_of(const fsgd_delim_spec_t *spec, uint64_t h)
{
    return (uint32_t)(h >> (64 - spec->bits));
}

uint32_t fsgd_delim_hash(const fsgd_delim_spec_t *spec, size_t col, const char *text, size_t len)
{
    return slot_of(spec, hash64(spec, col, text, len));
}

typedef struct reader {
    const fsgd_delim_spec_t *spec;
    const char *path;
    uint32_t *fp;            /* collision fingerprints, NULL when not counting */
    fsgd_delim_stats_t st;
    uint32_t *col;
    float *val;
    size_t cap;
    uint64_t *fh;  /* crosses: each field's 64-bit hash in this row ... */
    uint8_t *has;  /* ... and whether the field was present */
} reader_t;

/* The per-field hashes a spec with crosses needs. 0 or -1. */
static int cross_room(reader_t *r)
{
    if (!r->spec->n_crosses)
        return 0;
    r->fh = malloc(r->spec->n_cols * sizeof *r->fh);
    r->has = calloc(r->spec->n_cols, 1);
    return r->fh && r->has ? 0 : -1;
}

/* Room for one more feature in r->col / r->val. 0 or -1. */
static int room(reader_t *r, size_t n)
{
    if (n < r->cap)
        return 0;
    size_t cap = r->cap ? r->cap * 2 : 64;
    uint32_t *c = realloc(r->col, cap * sizeof *c);
    if (c)
        r->col = c;
    float *v = c ? realloc(r->val, cap * sizeof *v) : NULL;
    if (!v)
        return -1;
    r->val = v;
    r->cap = cap;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Criteo-style bucket of a num field: integers <= 2 as they are, larger
 * values floor(ln(v)^2). Writes the token ("b:5") into buf; -1 if not a number. */
static int num_token(const char *f, size_t len, char *buf, size_t cap, size_t *out_len)
{
    char tmp[64];
    if (len >= sizeof tmp)
        return -1;
    memcpy(tmp, f, len);
    tmp[len] = '\0';
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (end != tmp + len || len == 0 || !isfinite(v)) /* the whole field: a NUL inside is not a number */
        return -1;
    long long b;
    if (v > 2)
        b = (long long)floor(log(v) * log(v));
    else if (v < (double)LLONG_MIN) /* all share its bucket: converting them is undefined */
        b = LLONG_MIN;
    else
        b = (long long)floor(v);
    int w = snprintf(buf, cap, "b:%lld", b);
    *out_len = (size_t)w;
    return 0;
}

/* Records slot for collision counting: fp holds a 31-bit fingerprint of the
 * first value seen in each slot, bit 31 marks a slot already counted as
 * collided. */
static void note_slot(reader_t *r, uint32_t slot, uint64_t h)
{
    uint32_t f = ((uint32_t)h & 0x7FFFFFFFu) | 1u;
    uint32_t cur = r->fp[slot];
    if (cur == 0) {
        r->fp[slot] = f;
        r->st.slots_used++;
    } else if ((cur & 0x7FFFFFFFu) != f && !(cur & 0x80000000u)) {
        r->fp[slot] = cur | 0x80000000u;
        r->st.slots_collided++;
    }
}

/* The row's crosses after its n features (r->has, r->fh: the fields
 * present and their hashes): a cross of fields all present. 0 or
 * FSGD_E_NOMEM. */
static int add_crosses(reader_t *r, size_t *n)
{
    const fsgd_delim_spec_t *s = r->spec;
    for (int t = 0; t < s->n_crosses; t++) {
        const uint16_t *c = s->cross[t];
        int k = s->cross_len[t], all = 1;
        for (int i = 0; i < k; i++)
            all &= r->has[c[i]];
        if (!all)
            continue; /* a missing field: no cross */
        uint64_t h = r->fh[c[0]];
        for (int i = 1; i < k; i++)
            h = (h ^ r->fh[c[i]]) * 0x100000001b3ULL; /* FNV-1a's step over the fields' hashes */
        h ^= h >> 33; /* fmix64: the slot takes the top bits */
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 33;
        if (room(r, *n) < 0)
            return FSGD_E_NOMEM;
        r->col[(*n)++] = slot_of(s, h);
        if (r->fp)
            note_slot(r, slot_of(s, h), h);
    }
    return 0;
}

/* Parses one line [p, e) (no newline) into out. Returns 1 (row), 0 (blank) or an error. */
static int parse_row(reader_t *r, uint64_t lineno, const char *p, const char *e, fsgd_csr_t *out, char *err,
                     size_t errsz)
{
    const fsgd_delim_spec_t *s = r->spec;
    if (e > p && e[-1] == '\r')
        e--;
    if (p == e)
        return 0;
    const char *line = p;
    size_t n = 0, field = 0;
    double label = 0;
    for (;;) {
        const char *q = memchr(p, s->sep, (size_t)(e - p));
        const char *fe = q ? q : e;
        size_t len = (size_t)(fe - p);
        if (field >= s->n_cols)
            return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%llu: more than %zu fields", r->path,
                                (unsigned long long)lineno, s->n_cols);
        int kind = s->kind[field];
        if (kind == FSGD_COL_LABEL) {
            char tmp[64], *end;
            if (len == 0 || len >= sizeof tmp)
                return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%llu:%zu: column %zu (label): expected a number, got '%.*s'",
                                    r->path, (unsigned long long)lineno, (size_t)(p - line) + 1, field + 1,
                                    (int)(len > 40 ? 40 : len), p);
            memcpy(tmp, p, len);
            tmp[len] = '\0';
            label = strtod(tmp, &end);
            if (end != tmp + len || !isfinite(label)) /* the whole field: a NUL inside is not a number */
                return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%llu:%zu: column %zu (label): expected a number, got '%.*s'",
                                    r->path, (unsigned long long)lineno, (size_t)(p - line) + 1, field + 1,
                                    (int)(len > 40 ? 40 : len), p);
        } else if (kind != FSGD_COL_SKIP && len > 0) {
            const char *text = p;
            char tok[32];
            if (kind == FSGD_COL_NUM) {
                if (num_token(p, len, tok, sizeof tok, &len) < 0)
                    return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%llu:%zu: column %zu (num): expected a number, got '%.*s'",
                                        r->path, (unsigned long long)lineno, (size_t)(p - line) + 1, field + 1,
                                        (int)(fe - p > 40 ? 40 : fe - p), p);
                text = tok;
            }
            if (room(r, n) < 0)
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory", r->path,
                                    (unsigned long long)lineno);
            uint64_t h = hash64(s, field, text, len);
            r->col[n++] = slot_of(s, h);
            if (r->fp)
                note_slot(r, slot_of(s, h), h);
            if (r->has) {
                r->fh[field] = h;
                r->has[field] = 1;
            }
        }
        field++;
        if (!q)
            break;
        p = q + 1;
    }
    if (field != s->n_cols)
        return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%llu: %zu fields, expected %zu", r->path,
                            (unsigned long long)lineno, field, s->n_cols);
    const size_t n_features = n;
    if (r->has && add_crosses(r, &n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory", r->path, (unsigned long long)lineno);
    r->st.feature_entries += n_features;
    r->st.cross_entries += n - n_features;
    if (r->has)
        memset(r->has, 0, s->n_cols);
    /* strictly increasing columns: sort, and merge fields that share a slot
     * (a row without features has r->col NULL, which qsort must not get) */
    if (n > 1)
        qsort(r->col, n, sizeof *r->col, cmp_u32);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r->col[m - 1] == r->col[i]) {
            r->val[m - 1] += 1;
        } else {
            r->col[m] = r->col[i];
            r->val[m++] = 1;
        }
    }
    if (fsgd_csr_append_row(out, label, r->col, r->val, m) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory", r->path, (unsigned long long)lineno);
    return 1;
}

/* The lines of buf as rows numbered from first_line; with header, the first is skipped. */
static long parse_buf(const char *buf, size_t len, const fsgd_delim_spec_t *spec, int header, const char *src,
                      uint64_t first_line, fsgd_csr_t *out, char *err, size_t errsz)
{
    reader_t r = {.spec = spec, .path = src ? src : "<buffer>"};
    const char *p = buf, *e = buf + len;
    long got = 0;
    int rc = fsgd_csr_reserve(out, 0, 0);
    if (rc == 0 && cross_room(&r) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", r.path);
    while (rc == 0 && p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        r.st.lines++;
        if (!(header && r.st.lines == 1)) {
            int k = parse_row(&r, first_line + r.st.lines - 1, p, le, out, err, errsz);
            if (k < 0)
                rc = k;
            got += k == 1;
        }
        p = nl ? nl + 1 : e;
    }
    free(r.col);
    free(r.fh);
    free(r.has);
    free(r.val);
    return rc < 0 ? rc : got;
}

long fsgd_delim_parse(const char *buf, size_t len, const fsgd_delim_spec_t *spec, const char *src, fsgd_csr_t *out,
                      char *err, size_t errsz)
{
    return parse_buf(buf, len, spec, spec->header, src, 1, out, err, errsz);
}

long fsgd_delim_parse_rows(const char *buf, size_t len, const fsgd_delim_spec_t *spec, const char *src,
                           uint64_t first_line, fsgd_csr_t *out, char *err, size_t errsz)
{
    return parse_buf(buf, len, spec, 0, src, first_line, out, err, errsz);
}

int fsgd_delim_load(const char *path, const fsgd_delim_spec_t *spec, int count_collisions, fsgd_csr_t *out,
                    fsgd_delim_stats_t *stats, char *err, size_t errsz)
{
    return fsgd_delim_load_chunks(path, spec, count_collisions, out, NULL, stats, err, errsz);
}

int fsgd_delim_load_chunks(const char *path, const fsgd_delim_spec_t *spec, int count_collisions, fsgd_csr_t *out,
                           const fsgd_delim_chunks_t *chunks, fsgd_delim_stats_t *stats, char *err, size_t errsz)
{
    const size_t chunk_rows = chunks ? chunks->rows : 0;
    const fsgd_delim_chunk_fn fn = chunks ? chunks->fn : NULL;
    void *const ctx = chunks ? chunks->ctx : NULL;
    fsgd_zsource_t *src = fsgd_zsource_open(path, err, errsz); /* gzip and zstd read as their text */
    if (!src)
        return FSGD_E_IO;
    reader_t r = {.spec = spec, .path = path};
    int rc = FSGD_E_OK;
    const int stream = fsgd_zsource_is_stream(src);
    const uint64_t stream_max = fsgd_input_stream_max();
    uint64_t read_total = 0;
    if (count_collisions && !(r.fp = calloc((size_t)1 << spec->bits, sizeof *r.fp)))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory for 2^%u collision fingerprints", spec->bits);
    if (rc == 0 && cross_room(&r) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
    size_t cap = (size_t)4 << 20, len = 0, pos = 0;
    char *buf = rc == 0 ? malloc(cap) : NULL;
    if (rc == 0 && !buf)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    int eof = 0;
    while (rc == 0) {
        char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl && !eof) {
            memmove(buf, buf + pos, len - pos);
            len -= pos;
            pos = 0;
            if (len == cap && cap >= FSGD_INPUT_MAX_LINE) {
                rc = fsgd_input_line_error(err, errsz, path, r.st.lines + 1);
                break;
            }
            if (len == cap) {
                char *b = realloc(buf, cap * 2);
                if (!b) {
                    rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: line too long", path,
                                      (unsigned long long)r.st.lines + 1);
                    break;
                }
                buf = b;
                cap *= 2;
            }
            ssize_t got = fsgd_zsource_read(src, buf + len, cap - len, err, errsz);
            if (got < 0) {
                rc = (int)got;
                break;
            }
            if (got == 0)
                eof = 1;
            len += (size_t)got;
            read_total += (uint64_t)got;
            if (stream && read_total > stream_max) {
                rc = fsgd_input_stream_error(err, errsz, path, read_total);
                break;
            }
            continue;
        }
        if (!nl && pos == len)
            break;
        char *le = nl ? nl : buf + len;
        r.st.lines++;
        if (!(spec->header && r.st.lines == 1)) {
            int k = parse_row(&r, r.st.lines, buf + pos, le, out, err, errsz);
            if (k < 0)
                rc = k;
            r.st.rows += k == 1;
            if (rc == 0 && fn && out->n_rows >= chunk_rows) {
                rc = fn(ctx, out, err, errsz);
                fsgd_csr_clear(out);
            }
        }
        pos = nl ? (size_t)(nl - buf) + 1 : len;
    }
    fsgd_zsource_close(src);
    free(buf);
    free(r.fp);
    free(r.col);
    free(r.fh);
    free(r.has);
    free(r.val);
    if (rc == 0 && out->n_rows == 0 && !out->row_ptr) /* an empty file still gives a valid CSR */
        rc = fsgd_csr_reserve(out, 0, 0);
    if (rc == 0 && fn && out->n_rows) {
        rc = fn(ctx, out, err, errsz);
        fsgd_csr_clear(out);
    }
    if (stats)
        *stats = r.st;
    return rc;
}
