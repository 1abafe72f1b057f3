/* Fields of LIBSVM rows and their crosses (fsgd/libsvm_fields.h). */
#include "fsgd/libsvm_fields.h"

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
        int again = 0; /* the same range of the same field: a spec folded twice */
        for (int i = 0; i < f->n_ranges; i++)
            again |= f->letter[i] == *p && f->lo[i] == lo && f->hi[i] == hi;
        if (again) {
            p = *e ? e + 1 : e;
            continue;
        }
        for (int i = 0; i < f->n_ranges; i++)
            if (lo <= f->hi[i] && f->lo[i] <= hi)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "fields: '%.*s' overlaps %c:%llu-%llu (an index belongs to one field)", (int)n, p,
                                    f->letter[i], (unsigned long long)f->lo[i], (unsigned long long)f->hi[i]);
        if (f->n_ranges == FSGD_LIBSVM_MAX_RANGES)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: more than %d ranges", FSGD_LIBSVM_MAX_RANGES);
        f->lo[f->n_ranges] = lo;
        f->hi[f->n_ranges] = hi;
        f->letter[f->n_ranges++] = *p;
        p = *e ? e + 1 : e;
    }
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

size_t fsgd_libsvm_fields_cross(const fsgd_libsvm_fields_t *f, const uint64_t *idx, const float *val,
                                const char *field, size_t n, unsigned bits, uint32_t *col, float *cval, size_t cap)
{
    walk_t w = {idx, val, field, n, bits && bits < 32 ? (1ULL << bits) - 1 : 0xffffffffULL, col, cval, cap, 0};
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
