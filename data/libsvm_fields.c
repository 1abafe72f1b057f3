/* Fields of LIBSVM rows and their crosses (fsgd/libsvm_fields.h). */
#include "fsgd/libsvm_fields.h"
#include "libsvm_cross.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"

static int is_name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Reads a decimal index at *p (at most 2^32, the largest LIBSVM index). */
static int read_index(const char **p, const char *e, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;
    while (q < e && *q >= '0' && *q <= '9' && v <= 4294967296ull)
        v = v * 10 + (uint64_t)(*q++ - '0');
    if (q == *p || v > 4294967296ull)
        return -1;
    *p = q;
    *out = v;
    return 0;
}

/* Adds [lo, hi] to field letter: 1 added, 0 when f holds it already (a spec
 * folded twice), -1 when it overlaps range *at, -2 when f is full. */
static int add_range(fsgd_libsvm_fields_t *f, char letter, uint64_t lo, uint64_t hi, int *at)
{
    for (int i = 0; i < f->n_ranges; i++)
        if (f->letter[i] == letter && f->lo[i] == lo && f->hi[i] == hi)
            return 0;
    for (int i = 0; i < f->n_ranges; i++)
        if (lo <= f->hi[i] && f->lo[i] <= hi) {
            *at = i;
            return -1;
        }
    if (f->n_ranges == FSGD_LIBSVM_MAX_RANGES)
        return -2;
    f->lo[f->n_ranges] = lo;
    f->hi[f->n_ranges] = hi;
    f->letter[f->n_ranges++] = letter;
    return 1;
}

int fsgd_libsvm_fields_parse(fsgd_libsvm_fields_t *f, const char *spec, char *err, size_t errsz)
{
    const char *p = spec;
    if (!*p)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: empty (e.g. a:1-14,b:15-100)");
    if (p[strlen(p) - 1] == ',') /* the loop below would end before an empty last range */
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "fields: '' is not NAME:FIRST-LAST or NAME:INDEX (e.g. a:1-14,b:15-100)");
    while (*p) {
        size_t n = strcspn(p, ",");
        const char *e = p + n, *q = p;
        while (q < e && is_name_char((unsigned char)*q))
            q++;
        uint64_t lo, hi;
        if (q == p || q == e || (*q != ':' && *q != '=') || (q++, read_index(&q, e, &lo) < 0))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "fields: '%.*s' is not NAME:FIRST-LAST or NAME:INDEX (e.g. a:1-14,b:15-100)", (int)n, p);
        hi = lo;
        if (q < e && *q == '-' && (q++, read_index(&q, e, &hi) < 0))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: '%.*s': the range's last index is not a number",
                                (int)n, p);
        if (q != e)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "fields: '%.*s' is not NAME:FIRST-LAST or NAME:INDEX (e.g. a:1-14,b:15-100)", (int)n, p);
        if (hi < lo)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: '%.*s': the range ends before it starts", (int)n, p);
        int at = 0, rc = add_range(f, *p, lo, hi, &at);
        if (rc == -1)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "fields: '%.*s' overlaps %c:%llu-%llu (an index belongs to one field)", (int)n, p,
                                f->letter[at], (unsigned long long)f->lo[at], (unsigned long long)f->hi[at]);
        if (rc == -2)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: more than %d ranges", FSGD_LIBSVM_MAX_RANGES);
        p = *e ? e + 1 : e;
    }
    return 0;
}

int fsgd_libsvm_fields_parse_map(fsgd_libsvm_fields_t *f, const char *text, size_t len, const char *src, char *err,
                                 size_t errsz)
{
    const char *p = text, *end = text + len;
    int last = -1; /* the range the previous line added to, extended while indices follow on */
    for (uint64_t line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end, *q = p;
        const char *hash = memchr(p, '#', (size_t)(e - p));
        const char *stop = hash ? hash : e;
        while (q < stop && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < stop) {
            const char *tok = q;
            uint64_t lo = 0, hi;
            int ok = read_index(&q, stop, &lo) == 0;
            hi = lo;
            if (ok && q < stop && *q == '-')
                ok = (q++, read_index(&q, stop, &hi) == 0);
            const char *name = q;
            while (q < stop && (*q == ' ' || *q == '\t'))
                q++;
            ok = ok && q > name && q < stop && is_name_char((unsigned char)*q);
            name = q;
            while (q < stop && is_name_char((unsigned char)*q))
                q++;
            while (q < stop && (*q == ' ' || *q == '\t' || *q == '\r'))
                q++;
            if (!ok || q != stop) {
                char got[48];
                size_t gn = (size_t)(stop - tok) < sizeof got - 1 ? (size_t)(stop - tok) : sizeof got - 1;
                for (size_t i = 0; i < gn; i++)
                    got[i] = tok[i] >= 0x20 && tok[i] < 0x7f ? tok[i] : '?';
                got[gn] = '\0';
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "fields: %s:%llu:%llu: expected 'INDEX NAME' or 'FIRST-LAST NAME' (e.g. '7 age'), "
                                    "got '%s'",
                                    src, (unsigned long long)line, (unsigned long long)(tok - p + 1), got);
            }
            if (hi < lo)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: %s:%llu: the range ends before it starts", src,
                                    (unsigned long long)line);
            int at = -1, rc = 1;
            /* one-hot maps list an index a line: consecutive ones of a field make one range */
            const int extend = last >= 0 && f->letter[last] == *name && f->hi[last] + 1 == lo;
            if (extend) {
                for (int i = 0; i < f->n_ranges && at < 0; i++)
                    if (lo <= f->hi[i] && f->lo[i] <= hi)
                        at = i;
                rc = at >= 0 ? -1 : 1;
                if (rc == 1)
                    f->hi[last] = hi;
            } else {
                rc = add_range(f, *name, lo, hi, &at);
            }
            if (rc == -1)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "fields: %s:%llu: %llu-%llu overlaps %c:%llu-%llu (an index belongs to one field)",
                                    src, (unsigned long long)line, (unsigned long long)lo, (unsigned long long)hi,
                                    f->letter[at], (unsigned long long)f->lo[at], (unsigned long long)f->hi[at]);
            if (rc == -2)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "fields: %s:%llu: more than %d ranges (a field's indices listed apart count as "
                                    "ranges of their own)",
                                    src, (unsigned long long)line, FSGD_LIBSVM_MAX_RANGES);
            if (rc == 1 && !extend)
                last = f->n_ranges - 1;
        }
        p = nl ? nl + 1 : end;
    }
    if (!f->n_ranges)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: %s maps no index to a field", src);
    return 0;
}

static int has_letter(const fsgd_libsvm_fields_t *f, char c)
{
    for (int i = 0; i < f->n_ranges; i++)
        if (f->letter[i] == c)
            return 1;
    return 0;
}

/* "a, b, c": the field letters, each once, for messages. */
static const char *letter_list(const fsgd_libsvm_fields_t *f, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < f->n_ranges && k + 4 < cap; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= f->letter[j] == f->letter[i];
        if (!seen)
            k += (size_t)snprintf(buf + k, cap - k, "%s%c", k ? ", " : "", f->letter[i]);
    }
    return k ? buf : "(none: give --fields)";
}

int fsgd_libsvm_fields_add_terms(fsgd_libsvm_fields_t *f, const char *terms, char *err, size_t errsz)
{
    const char *p = terms;
    char list[200];
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n < 2 || n > FSGD_LIBSVM_MAX_ORDER)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "interactions: '%.*s' (a cross of LIBSVM fields joins 2 to %d field letters, e.g. ab, "
                                "abc, ::)",
                                (int)n, p, FSGD_LIBSVM_MAX_ORDER);
        if (!(n == 2 && p[0] == ':' && p[1] == ':')) {
            for (size_t i = 0; i < n; i++)
                if (!has_letter(f, p[i]))
                    return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: '%.*s': no field '%c' in fields %s",
                                        (int)n, p, p[i], letter_list(f, list, sizeof list));
        } else if (!f->n_ranges) {
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: '::' crosses fields, and there are none (--fields)");
        }
        int have = 0;
        for (int t = 0; t < f->n_terms; t++)
            have |= f->term_len[t] == n && !memcmp(f->term[t], p, n);
        if (!have) {
            if (f->n_terms == FSGD_LIBSVM_MAX_TERMS)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: more than %d crosses", FSGD_LIBSVM_MAX_TERMS);
            memcpy(f->term[f->n_terms], p, n);
            f->term_len[f->n_terms++] = (uint8_t)n;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

int fsgd_libsvm_fields_format(const fsgd_libsvm_fields_t *f, char *ranges, size_t rcap, char *terms, size_t tcap)
{
    size_t k = 0;
    if (rcap)
        ranges[0] = '\0';
    if (tcap)
        terms[0] = '\0';
    for (int i = 0; i < f->n_ranges; i++) {
        int w = f->lo[i] == f->hi[i]
                    ? snprintf(ranges + k, rcap - k, "%s%c=%llu", i ? "," : "", f->letter[i],
                               (unsigned long long)f->lo[i])
                    : snprintf(ranges + k, rcap - k, "%s%c=%llu-%llu", i ? "," : "", f->letter[i],
                               (unsigned long long)f->lo[i], (unsigned long long)f->hi[i]);
        if (w < 0 || (size_t)w >= rcap - k)
            return FSGD_E_NOSPACE;
        k += (size_t)w;
    }
    k = 0;
    for (int t = 0; t < f->n_terms; t++) {
        int w = snprintf(terms + k, tcap - k, "%s%.*s", t ? "," : "", (int)f->term_len[t], f->term[t]);
        if (w < 0 || (size_t)w >= tcap - k)
            return FSGD_E_NOSPACE;
        k += (size_t)w;
    }
    return 0;
}

char fsgd_libsvm_fields_of(const fsgd_libsvm_fields_t *f, uint64_t idx, uint64_t base)
{
    uint64_t i = idx + base; /* as the file writes it */
    for (int r = 0; r < f->n_ranges; r++)
        if (i >= f->lo[r] && i <= f->hi[r])
            return f->letter[r];
    return 0;
}

static uint64_t fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

typedef struct walk {
    const uint64_t *idx;
    const float *val;
    const char *field;
    size_t n;
    uint64_t mask;
    uint32_t *col;
    float *cval;
    size_t cap, got;
} walk_t;

/* Every combination of the term's fields from position pos on; h chains
 * the columns so far (each step mixed: (i, j) and (j, i) land apart). */
static void walk(walk_t *w, const char *term, int len, int pos, size_t start, uint64_t h, float v)
{
    if (pos == len) {
        if (w->got < w->cap) {
            w->col[w->got] = (uint32_t)(h & w->mask);
            w->cval[w->got] = v;
        }
        w->got++;
        return;
    }
    /* a letter repeating the one before: unordered combinations, x*x included */
    size_t from = pos > 0 && term[pos] == term[pos - 1] ? start : 0;
    for (size_t i = from; i < w->n; i++)
        if (w->field[i] == term[pos])
            walk(w, term, len, pos + 1, i, fmix64(h ^ (w->idx[i] + 0x9E3779B97F4A7C15ULL)), v * w->val[i]);
}

size_t fsgd_libsvm_fields_cross(const fsgd_libsvm_fields_t *f, const fsgd_libsvm_fields_row_t *row, unsigned bits,
                                uint32_t *col, float *cval, size_t cap)
{
    walk_t w = {row->idx, row->val, row->field, row->n, bits && bits < 32 ? (1ULL << bits) - 1 : 0xffffffffULL, col, cval, cap, 0};
    for (int t = 0; t < f->n_terms; t++) {
        const int len = f->term_len[t];
        const uint64_t seed = (uint64_t)len * 0x632BE59BD9B4E019ULL;
        if (len == 2 && f->term[t][0] == ':' && f->term[t][1] == ':') {
            /* every unordered pair of field letters, each letter once */
            for (int a = 0; a < f->n_ranges; a++) {
                int dup = 0;
                for (int k = 0; k < a; k++)
                    dup |= f->letter[k] == f->letter[a];
                for (int b = a; b < f->n_ranges && !dup; b++) {
                    int dupb = 0;
                    for (int k = a; k < b; k++)
                        dupb |= f->letter[k] == f->letter[b];
                    int seen_before = 0; /* letter b first appears before a: pair already taken */
                    for (int k = 0; k < a; k++)
                        seen_before |= f->letter[k] == f->letter[b];
                    if (dupb || seen_before)
                        continue;
                    const char pair[2] = {f->letter[a], f->letter[b]};
                    walk(&w, pair, 2, 0, 0, seed, 1.0f);
                }
            }
            continue;
        }
        walk(&w, f->term[t], len, 0, 0, seed, 1.0f);
    }
    return w.got;
}
