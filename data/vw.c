/* Vowpal Wabbit text rows, hashed as VW 9 hashes them (fsgd/vw.h). Written
 * from VW's documented grammar and hashing; the golden indices of the unit
 * test come from VW 9.11's own --audit output. */
#include "fsgd/vw.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/input.h"
#include "fsgd/zsource.h"

#define FNV_PRIME 16777619u /* VW's multiplier of a cross's running index */

/* ---- hashing ---- */

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

uint32_t fsgd_vw_murmur3(const void *key, size_t len, uint32_t seed)
{
    const uint8_t *p = key;
    const uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
    uint32_t h = seed;
    size_t blocks = len / 4;
    for (size_t i = 0; i < blocks; i++) {
        uint32_t k = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                     (uint32_t)p[4 * i + 3] << 24; /* little-endian, whatever the host */
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64u;
    }
    const uint8_t *tail = p + blocks * 4;
    uint32_t k = 0;
    switch (len & 3) {
    case 3:
        k ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        k ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

uint32_t fsgd_vw_hash_string(const char *s, size_t len, uint32_t seed)
{
    while (len && (unsigned char)*s <= ' ') {
        s++;
        len--;
    }
    while (len && (unsigned char)s[len - 1] <= ' ')
        len--;
    /* VW sums in 64 bits; every use keeps at most the low 32 (masks of
     * <= 32 bits, 32-bit murmur seeds), which 32-bit arithmetic gives */
    uint32_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return fsgd_vw_murmur3(s, len, seed);
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    return v + seed;
}

/* ---- spec ---- */

static void set_bit(uint8_t *set, unsigned char c) { set[c >> 3] |= (uint8_t)(1u << (c & 7)); }
static int has_bit(const uint8_t *set, unsigned char c) { return set[c >> 3] >> (c & 7) & 1; }

static int any_bit(const uint8_t *set)
{
    for (int i = 0; i < 32; i++)
        if (set[i])
            return 1;
    return 0;
}

int fsgd_vw_spec_add_terms(fsgd_vw_spec_t *s, const char *terms, char *err, size_t errsz)
{
    const char *p = terms;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n < 2 || n > FSGD_VW_MAX_ORDER)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "interactions: '%.*s' %s (a cross joins 2 to %d namespace letters, e.g. ab, abc, ::)",
                                (int)n, p, n < 2 ? "crosses fewer than 2 namespaces" : "crosses too many namespaces",
                                FSGD_VW_MAX_ORDER);
        int wild = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c <= ' ' || c == '|' || c >= 127)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: '%.*s': byte 0x%02x is not a namespace letter",
                                    (int)n, p, c);
            wild += c == ':';
        }
        if (wild && (wild != 2 || n != 2))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "interactions: '%.*s': the wildcard is '::' alone (every pair of namespaces)", (int)n, p);
        if (s->n_terms == FSGD_VW_MAX_TERMS)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: more than %d crosses", FSGD_VW_MAX_TERMS);
        memcpy(s->term[s->n_terms], p, n);
        s->term_len[s->n_terms++] = (uint8_t)n;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int letters(uint8_t *set, const char *v, size_t n, const char *key, char *err, size_t errsz)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c <= ' ' || c == '|' || c == ':' || c >= 127)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s: byte 0x%02x is not a namespace letter", key, c);
        set_bit(set, c);
    }
    return 0;
}

int fsgd_vw_spec_parse(const char *text, fsgd_vw_spec_t *s, char *err, size_t errsz)
{
    memset(s, 0, sizeof *s);
    s->bits = 18;
    if (strncmp(text, "vw", 2) || (text[2] && text[2] != ':'))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "'%s' is not a vw spec (vw[:bits=B][:seed=S]...)", text);
    const char *p = text + 2;
    while (*p == ':') {
        p++;
        size_t n = strcspn(p, ":");
        /* the interactions may hold "::": it is the last key, so it takes the rest */
        const char *eq = memchr(p, '=', n);
        if (!eq)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "vw spec: '%.*s' is not key=value", (int)n, p);
        size_t kl = (size_t)(eq - p);
        const char *v = eq + 1;
        if (kl == 12 && !strncmp(p, "interactions", 12)) {
            FSGD_TRY(fsgd_vw_spec_add_terms(s, v, err, errsz));
            return 0;
        }
        size_t vl = n - kl - 1;
        char *end;
        if (kl == 4 && !strncmp(p, "bits", 4)) {
            errno = 0;
            unsigned long b = strtoul(v, &end, 10);
            if (end != v + vl || vl == 0 || b < 1 || b > 32)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "vw spec: bits '%.*s' is not in 1..32", (int)vl, v);
            s->bits = (unsigned)b;
        } else if (kl == 4 && !strncmp(p, "seed", 4)) {
            unsigned long long v64 = strtoull(v, &end, 10);
            if (end != v + vl || vl == 0 || v64 > UINT32_MAX)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "vw spec: seed '%.*s' is not in 0..4294967295", (int)vl,
                                    v);
            s->hash_seed = (uint32_t)v64;
        } else if (kl == 6 && !strncmp(p, "ignore", 6)) {
            FSGD_TRY(letters(s->ignore, v, vl, "ignore", err, errsz));
        } else if (kl == 4 && !strncmp(p, "keep", 4)) {
            FSGD_TRY(letters(s->keep, v, vl, "keep", err, errsz));
        } else {
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "vw spec: unknown key '%.*s' (bits, seed, ignore, keep, interactions)", (int)kl, p);
        }
        p += n;
    }
    return 0;
}

static size_t set_letters(const uint8_t *set, char *out)
{
    size_t n = 0;
    for (int c = 33; c < 127; c++)
        if (has_bit(set, (unsigned char)c))
            out[n++] = (char)c;
    out[n] = '\0';
    return n;
}

int fsgd_vw_spec_format(const fsgd_vw_spec_t *s, char *out, size_t cap)
{
    char ig[100], kp[100];
    set_letters(s->ignore, ig);
    set_letters(s->keep, kp);
    size_t n = (size_t)snprintf(out, cap, "vw:bits=%u:seed=%u", s->bits, s->hash_seed);
    if (n < cap && ig[0])
        n += (size_t)snprintf(out + n, cap - n, ":ignore=%s", ig);
    if (n < cap && kp[0])
        n += (size_t)snprintf(out + n, cap - n, ":keep=%s", kp);
    for (int t = 0; t < s->n_terms && n < cap; t++)
        n += (size_t)snprintf(out + n, cap - n, "%s%.*s", t ? "," : ":interactions=", (int)s->term_len[t], s->term[t]);
    return n < cap ? 0 : FSGD_E_NOSPACE;
}

/* ---- rows ---- */

void fsgd_vw_extra_free(fsgd_vw_extra_t *x)
{
    if (!x)
        return;
    free(x->weight);
    free(x->tag_end);
    free(x->tags);
    memset(x, 0, sizeof *x);
}

/* One feature of the row being parsed: its namespace letter, masked index
 * and value. */
typedef struct feat {
    uint32_t idx;  /* masked */
    uint32_t full; /* VW's unmasked hash, which tells colliding features apart */
    float val;
    unsigned char ns;
} feat_t;

typedef struct scratch {
    feat_t *f;
    size_t nf, capf;
    uint64_t *keys; /* col << 32 | position, for sorting the row */
    float *vals;
    size_t n, cap;
    size_t ns_begin[256], ns_end[256]; /* the row's features of each letter, after grouping */
    feat_t *grouped;
    size_t capg;
} scratch_t;

typedef struct ctx {
    const fsgd_vw_spec_t *s;
    const char *src;
    uint64_t lineno;
    const char *line;
    scratch_t *sc;
    uint32_t mask;
    uint32_t *fp;          /* counting columns: the fingerprint of the first feature of each, else NULL */
    fsgd_vw_extra_t *slots; /* where the counts go */
} ctx_t;

/* Counts column col for a feature of unmasked hash h: a fingerprint of the
 * first feature seen in each column, bit 31 marking one counted as collided
 * (as the delimited reader counts its columns). */
static void note_slot(const ctx_t *c, uint32_t col, uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    uint32_t f = ((uint32_t)h & 0x7FFFFFFFu) | 1u, cur = c->fp[col];
    if (cur == 0) {
        c->fp[col] = f;
        c->slots->slots_used++;
    } else if ((cur & 0x7FFFFFFFu) != f && !(cur & 0x80000000u)) {
        c->fp[col] = cur | 0x80000000u;
        c->slots->slots_collided++;
    }
}

static int is_sp(char c) { return c == ' ' || c == '\t'; }

static int perr(const ctx_t *c, char *err, size_t errsz, int code, const char *at, const char *e, const char *what)
{
    char tok[48];
    size_t n = 0;
    while (at + n < e && n < sizeof tok - 4 && !is_sp(at[n]))
        n++;
    memcpy(tok, at, n);
    tok[n] = '\0';
    if (at + n < e && !is_sp(at[n]))
        strcpy(tok + n, "...");
    return fsgd_err_fmt(err, errsz, code, "%s:%llu:%llu: expected %s, got '%s'", c->src, (unsigned long long)c->lineno,
                        (unsigned long long)(at - c->line + 1), what, at < e ? tok : "end of line");
}

/* A whole token [p, e) as a finite decimal number: 1, or 0 when it is not one
 * at all (a string), or -1 when it starts as one and stops (or is not finite). */
static int parse_number(const char *p, const char *e, double *v)
{
    char buf[64];
    size_t n = (size_t)(e - p);
    if (n == 0)
        return 0;
    if (n >= sizeof buf)
        return (p[0] >= '0' && p[0] <= '9') || p[0] == '-' || p[0] == '+' || p[0] == '.' ? -1 : 0;
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *end;
    *v = strtod(buf, &end);
    if (end == buf)
        return 0;
    if ((size_t)(end - buf) != n || !isfinite(*v) || memchr(buf, 'x', n) || memchr(buf, 'X', n) ||
        memchr(buf, 'n', n) || memchr(buf, 'N', n)) /* hex, inf, nan: not VW's numbers */
        return -1;
    return 1;
}

static int push_feat(scratch_t *sc, unsigned char ns, uint32_t idx, uint32_t full, float val)
{
    if (sc->nf == sc->capf) {
        size_t cap = sc->capf ? 2 * sc->capf : 256;
        feat_t *f = realloc(sc->f, cap * sizeof *f);
        if (!f)
            return FSGD_E_NOMEM;
        sc->f = f;
        sc->capf = cap;
    }
    sc->f[sc->nf++] = (feat_t){idx, full, val, ns};
    return 0;
}

static int push_entry(scratch_t *sc, uint32_t col, float val)
{
    if (sc->n == sc->cap) {
        size_t cap = sc->cap ? 2 * sc->cap : 256;
        uint64_t *k = realloc(sc->keys, cap * sizeof *k);
        if (k)
            sc->keys = k;
        float *v = realloc(sc->vals, cap * sizeof *v);
        if (v)
            sc->vals = v;
        if (!k || !v)
            return FSGD_E_NOMEM;
        sc->cap = cap;
    }
    sc->keys[sc->n] = (uint64_t)col << 32 | sc->n;
    sc->vals[sc->n++] = val;
    return 0;
}

/* The row's features grouped by namespace letter (stable), for crosses. */
static int group(scratch_t *sc)
{
    if (sc->capg < sc->nf) {
        feat_t *g = realloc(sc->grouped, sc->nf * sizeof *g);
        if (!g)
            return FSGD_E_NOMEM;
        sc->grouped = g;
        sc->capg = sc->nf;
    }
    size_t count[256] = {0};
    for (size_t i = 0; i < sc->nf; i++)
        count[sc->f[i].ns]++;
    size_t at = 0;
    for (int c = 0; c < 256; c++) {
        sc->ns_begin[c] = at;
        at += count[c];
        sc->ns_end[c] = sc->ns_begin[c];
    }
    for (size_t i = 0; i < sc->nf; i++)
        sc->grouped[sc->ns_end[sc->f[i].ns]++] = sc->f[i];
    return 0;
}

/* The crosses of one term over letters ns[0..k): every combination, a letter
 * equal to the one before it starting at that one's position (VW's
 * unordered self-crosses). */
static int cross(const ctx_t *c, const unsigned char *ns, int k)
{
    scratch_t *sc = c->sc;
    size_t pos[FSGD_VW_MAX_ORDER];
    for (int i = 0; i < k; i++)
        if (sc->ns_begin[ns[i]] == sc->ns_end[ns[i]])
            return 0; /* a namespace the row lacks: no crosses */
    int d = 0;
    pos[0] = sc->ns_begin[ns[0]];
    for (;;) {
        if (pos[d] == sc->ns_end[ns[d]]) { /* this level done: back up */
            if (d == 0)
                return 0;
            pos[--d]++;
            continue;
        }
        if (d + 1 < k) {
            d++;
            pos[d] = ns[d] == ns[d - 1] ? pos[d - 1] : sc->ns_begin[ns[d]];
            continue;
        }
        uint64_t h = sc->grouped[pos[0]].idx;
        float v = sc->grouped[pos[0]].val;
        for (int i = 1; i < k; i++) {
            h = (h * FNV_PRIME) ^ sc->grouped[pos[i]].idx;
            v *= sc->grouped[pos[i]].val;
        }
        FSGD_TRY(push_entry(sc, (uint32_t)(h & c->mask), v));
        if (c->fp)
            note_slot(c, (uint32_t)(h & c->mask), h ^ 0x9e3779b97f4a7c15ULL); /* (a cross is not its first feature) */
        pos[d]++;
    }
}

/* Sorts a row's keys (distinct: each carries its position) ascending. A
 * quicksort with the comparison inline and insertion sort below 24 keys:
 * libc's qsort through a comparison pointer was 40% of the time to read
 * a9a with -q aa (119 keys a row). Median-of-three pivots; past 2·log2(n)
 * levels (inputs built against it) the rest goes to heapsort, so a row
 * costs O(n log n) whatever its features. */
static void sift_down(uint64_t *k, size_t i, size_t n)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && k[c + 1] > k[c])
            c++;
        if (k[i] >= k[c])
            return;
        uint64_t t = k[i];
        k[i] = k[c];
        k[c] = t;
        i = c;
    }
}

static void heap_sort(uint64_t *k, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(k, i, n);
    for (size_t m = n; m-- > 1;) {
        uint64_t t = k[0];
        k[0] = k[m];
        k[m] = t;
        sift_down(k, 0, m);
    }
}

static void sort_keys(uint64_t *k, size_t n, int depth)
{
    while (n > 24) {
        if (depth-- == 0) {
            heap_sort(k, n);
            return;
        }
        size_t mid = n / 2;
        uint64_t a = k[0], b = k[mid], c = k[n - 1];
        uint64_t piv = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t i = 0, j = n - 1;
        for (;;) { /* Hoare: keys are distinct, the pivot is one of them */
            while (k[i] < piv)
                i++;
            while (k[j] > piv)
                j--;
            if (i >= j)
                break;
            uint64_t t = k[i];
            k[i++] = k[j];
            k[j--] = t;
        }
        /* [0, j] <= piv <= [j+1, n): recurse into the smaller side */
        size_t left = j + 1;
        if (left < n - left) {
            sort_keys(k, left, depth);
            k += left;
            n -= left;
        } else {
            sort_keys(k + left, n - left, depth);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t x = k[i];
        size_t j = i;
        for (; j > 0 && k[j - 1] > x; j--)
            k[j] = k[j - 1];
        k[j] = x;
    }
}

static int log2_floor(size_t n)
{
    int l = 0;
    while (n >>= 1)
        l++;
    return l;
}

static int extra_push(fsgd_vw_extra_t *x, double w, const char *tag, size_t tl)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 1024;
        double *nw = realloc(x->weight, cap * sizeof *nw);
        if (nw)
            x->weight = nw;
        uint64_t *te = realloc(x->tag_end, cap * sizeof *te);
        if (te)
            x->tag_end = te;
        if (!nw || !te)
            return FSGD_E_NOMEM;
        x->cap = cap;
    }
    if (x->tags_len + tl > x->tags_cap) {
        size_t cap = x->tags_cap ? x->tags_cap : 4096;
        while (cap < x->tags_len + tl)
            cap *= 2;
        char *t = realloc(x->tags, cap);
        if (!t)
            return FSGD_E_NOMEM;
        x->tags = t;
        x->tags_cap = cap;
    }
    if (tl) /* (no tags yet: no buffer either) */
        memcpy(x->tags + x->tags_len, tag, tl);
    x->tags_len += tl;
    x->weight[x->n] = w;
    x->tag_end[x->n++] = x->tags_len;
    x->any_weight |= w != 1.0;
    return 0;
}

/* The sorted keys of sc as columns (shared ones summed) into col and val;
 * the entries written. val NULL (a binary row): 0 instead when a summed
 * value is not 1. */
static size_t emit_row(const scratch_t *sc, uint32_t *col, float *val)
{
    size_t k = 0;
    for (size_t i = 0; i < sc->n; i++) {
        uint32_t cl = (uint32_t)(sc->keys[i] >> 32);
        float v = sc->vals[(uint32_t)sc->keys[i]];
        if (k && col[k - 1] == cl) {
            if (!val)
                return 0;
            val[k - 1] += v;
        } else {
            if (!val && v != 1.0f)
                return 0;
            col[k] = cl;
            if (val)
                val[k] = v;
            k++;
        }
    }
    return k;
}

/* Parses one line [p, e) (no '\n'). 1: a row appended to out (and extra);
 * 0: a blank line; negative: an error in err, out untouched. */
static int parse_line(const ctx_t *c, const char *p, const char *e, fsgd_csr_t *out, fsgd_vw_extra_t *extra,
                      char *err, size_t errsz)
{
    const fsgd_vw_spec_t *s = c->s;
    scratch_t *sc = c->sc;
    if (e > p && e[-1] == '\r')
        e--;
    const char *q = p;
    while (q < e && is_sp(*q))
        q++;
    if (q == e)
        return 0;
    const char *bar = memchr(p, '|', (size_t)(e - p));
    if (!bar)
        return perr(c, err, errsz, FSGD_E_PARSE, e, e, "'|' and a namespace (VW rows are 'label |ns feature ...')");
    /* the label part: label [importance] [tag] */
    const char *tok[4];
    size_t tl[4];
    int nt = 0;
    for (q = p; q < bar;) {
        while (q < bar && is_sp(*q))
            q++;
        if (q == bar)
            break;
        const char *t0 = q;
        while (q < bar && !is_sp(*q))
            q++;
        if (nt == 4)
            return perr(c, err, errsz, FSGD_E_PARSE, t0, e, "'|' after label, importance and tag");
        tok[nt] = t0;
        tl[nt++] = (size_t)(q - t0);
    }
    const char *tag = "";
    size_t tag_len = 0;
    if (nt && (tok[nt - 1] + tl[nt - 1] == bar || tok[nt - 1][0] == '\'')) { /* VW's rule for the tag */
        tag = tok[nt - 1];
        tag_len = tl[nt - 1];
        if (tag_len && tag[0] == '\'') {
            tag++;
            tag_len--;
        }
        nt--;
    }
    double label, weight = 1;
    if (nt == 0)
        return perr(c, err, errsz, FSGD_E_PARSE, p, e, "a label before the first '|' (a finite number)");
    if (parse_number(tok[0], tok[0] + tl[0], &label) != 1)
        return perr(c, err, errsz, FSGD_E_PARSE, tok[0], e, "a label (a finite number)");
    if (nt >= 2 && (parse_number(tok[1], tok[1] + tl[1], &weight) != 1 || weight < 0))
        return perr(c, err, errsz, FSGD_E_PARSE, tok[1], e, "an importance weight (a finite number >= 0)");
    if (nt >= 3)
        return perr(c, err, errsz, FSGD_E_PARSE, tok[2], e,
                    "'|' or a tag after label and importance (VW's initial prediction is not supported)");

    /* namespaces */
    sc->nf = 0;
    q = bar;
    while (q < e) {
        if (*q != '|')
            return perr(c, err, errsz, FSGD_E_PARSE, q, e, "'|' or the end of the line");
        q++;
        unsigned char ns;
        uint32_t seed;
        float nsv = 1;
        if (q == e || is_sp(*q) || *q == '|') {
            ns = ' ';
            seed = s->hash_seed == 0 ? 0 : fsgd_vw_murmur3("", 0, s->hash_seed);
        } else if (*q == ':') {
            return perr(c, err, errsz, FSGD_E_PARSE, q, e, "a namespace name after '|'");
        } else {
            const char *n0 = q;
            while (q < e && !is_sp(*q) && *q != ':' && *q != '|')
                q++;
            ns = (unsigned char)n0[0];
            seed = fsgd_vw_hash_string(n0, (size_t)(q - n0), s->hash_seed);
            if (q < e && *q == ':') {
                const char *v0 = ++q;
                while (q < e && !is_sp(*q) && *q != '|')
                    q++;
                double v;
                if (parse_number(v0, q, &v) != 1)
                    return perr(c, err, errsz, FSGD_E_PARSE, v0, e, "a namespace value (a finite number)");
                nsv = (float)v;
            }
        }
        const int drop = has_bit(s->ignore, ns) || (any_bit(s->keep) && !has_bit(s->keep, ns));
        uint32_t anon = 0;
        while (q < e && is_sp(*q)) {
            q++;
            if (q == e || is_sp(*q) || *q == '|')
                continue;
            const char *f0 = q;
            while (q < e && !is_sp(*q) && *q != ':' && *q != '|')
                q++;
            const size_t fl = (size_t)(q - f0);
            uint32_t idx;
            float v = nsv;
            if (q < e && *q == ':') {
                const char *v0 = ++q;
                while (q < e && !is_sp(*q) && *q != '|')
                    q++;
                double x;
                int k = parse_number(v0, q, &x);
                if (k < 0 || (k == 0 && (q == v0 || !fl)))
                    return perr(c, err, errsz, FSGD_E_PARSE, v0, e,
                                fl ? "a feature value (a finite number) or a string" : "a feature value (a finite number)");
                if (k == 1) {
                    v = (float)(nsv * x);
                    idx = fl ? fsgd_vw_hash_string(f0, fl, seed) : seed + anon++;
                } else { /* name:string, hashed as the pair; value 1, not scaled (as VW) */
                    v = 1;
                    idx = fsgd_vw_hash_string(v0, (size_t)(q - v0), fsgd_vw_hash_string(f0, fl, seed));
                }
            } else {
                idx = fsgd_vw_hash_string(f0, fl, seed);
            }
            if (!isfinite(v))
                return perr(c, err, errsz, FSGD_E_RANGE, f0, e, "a feature value within float range");
            if (v == 0 || drop)
                continue; /* VW keeps no zero-valued feature */
            if (push_feat(sc, ns, idx & c->mask, idx, v) < 0)
                goto nomem;
        }
        if (q < e && *q != '|')
            return perr(c, err, errsz, FSGD_E_PARSE, q, e, "a space, '|' or the end of the line");
    }

    /* the row: its features, then its crosses; sorted, shared columns summed */
    sc->n = 0;
    for (size_t i = 0; i < sc->nf; i++) {
        if (push_entry(sc, sc->f[i].idx, sc->f[i].val) < 0)
            goto nomem;
        if (c->fp)
            note_slot(c, sc->f[i].idx, sc->f[i].full);
    }
    if (s->n_terms && sc->nf) {
        if (group(sc) < 0)
            goto nomem;
        for (int t = 0; t < s->n_terms; t++) {
            if (s->term[t][0] == ':') {
                /* every pair of the row's namespaces with a printable ASCII
                 * letter (as VW expands its wildcard), pairs of one included */
                for (int a = ' '; a < 127; a++)
                    for (int b = a; b < 127 && sc->ns_begin[a] < sc->ns_end[a]; b++)
                        if (sc->ns_begin[b] < sc->ns_end[b] &&
                            cross(c, (const unsigned char[]){(unsigned char)a, (unsigned char)b}, 2) < 0)
                            goto nomem;
            } else if (cross(c, (const unsigned char *)s->term[t], s->term_len[t]) < 0) {
                goto nomem;
            }
        }
    }
    if (sc->n) /* (a row of no features has no keys array yet) */
        sort_keys(sc->keys, sc->n, 2 * log2_floor(sc->n));
    if (fsgd_csr_reserve(out, 1, sc->n) < 0)
        goto nomem;
    /* a binary out (fsgd_csr_init_binary) stays so while its rows' summed
     * values are 1: half the memory of a row of crosses */
    size_t k = emit_row(sc, out->col + out->nnz, out->val ? out->val + out->nnz : NULL);
    if (k == 0 && sc->n) {
        if (fsgd_csr_give_values(out) < 0)
            goto nomem;
        k = emit_row(sc, out->col + out->nnz, out->val + out->nnz);
    }
    const uint32_t *col = out->col + out->nnz;
    if (extra && extra_push(extra, weight, tag, tag_len) < 0)
        goto nomem;
    if (extra) {
        extra->feature_entries += sc->nf;
        extra->cross_entries += sc->n - sc->nf;
    }
    if (k && (uint64_t)col[k - 1] + 1 > out->max_col)
        out->max_col = (uint64_t)col[k - 1] + 1;
    out->label[out->n_rows] = label;
    out->nnz += k;
    out->n_rows++;
    out->row_ptr[out->n_rows] = out->nnz;
    return 1;
nomem:
    return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: out of memory", c->src, (unsigned long long)c->lineno);
}

static void scratch_free(scratch_t *sc)
{
    free(sc->f);
    free(sc->keys);
    free(sc->vals);
    free(sc->grouped);
}

/* The lines of buf[0..len) (the last may lack its '\n'), each parsed. */
static long parse_lines(const char *buf, size_t len, const ctx_t *c0, int skip_bad, fsgd_csr_t *out,
                        fsgd_vw_extra_t *extra, fsgd_libsvm_stats_t *st, char *err, size_t errsz)
{
    ctx_t c = *c0;
    const char *p = buf, *e = buf + len;
    char msg[512];
    long got = 0;
    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        c.line = p;
        int rc = parse_line(&c, p, le, out, extra, msg, sizeof msg);
        st->lines++;
        st->bytes += (uint64_t)(le - p) + (nl != NULL);
        c.lineno++;
        p = nl ? nl + 1 : e;
        if (rc == 1) {
            got++;
            st->rows++;
        } else if (rc < 0) {
            if (skip_bad && rc != FSGD_E_NOMEM) {
                fsgd_libsvm_note_bad(st, msg);
            } else {
                fsgd_err_fmt(err, errsz, rc, "%s", msg);
                return rc;
            }
        }
    }
    return got;
}

long fsgd_vw_parse(const char *buf, size_t len, const fsgd_vw_spec_t *s, const fsgd_parse_ctx_t *at,
                   fsgd_csr_t *out, fsgd_vw_extra_t *extra, char *err, size_t errsz)
{
    static const fsgd_parse_ctx_t from_line_1 = {.first_line = 1};
    if (!at)
        at = &from_line_1;
    const char *src = at->src;
    fsgd_libsvm_stats_t *stats = at->stats;
    fsgd_libsvm_stats_t local = {0};
    if (!stats)
        stats = &local;
    if (!src)
        src = "<buffer>";
    if (fsgd_csr_reserve(out, 0, 0) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", src);
    scratch_t sc = {0};
    ctx_t c = {s, src, at->first_line, buf, &sc, s->bits >= 32 ? UINT32_MAX : (uint32_t)((1u << s->bits) - 1), NULL,
               NULL};
    long n = parse_lines(buf, len, &c, at->skip_bad, out, extra, stats, err, errsz);
    scratch_free(&sc);
    return n;
}

int fsgd_vw_load(const char *path, const fsgd_vw_spec_t *s, int skip_bad, fsgd_csr_t *out, fsgd_vw_extra_t *extra,
                 fsgd_libsvm_stats_t *stats, char *err, size_t errsz)
{
    const fsgd_parse_ctx_t at = {.src = path, .first_line = 1, .skip_bad = skip_bad, .stats = stats};
    return fsgd_vw_load_chunks(path, s, &at, out, extra, NULL, err, errsz);
}

/* Hands out's rows (and extra's weights and tags) to fn and empties both,
 * keeping extra's counts. */
static int hand_chunk(fsgd_vw_chunk_fn fn, void *ctx, fsgd_csr_t *out, fsgd_vw_extra_t *extra, char *err,
                      size_t errsz)
{
    int rc = fn(ctx, out, extra, err, errsz);
    fsgd_csr_clear(out);
    if (extra) {
        extra->n = 0;
        extra->tags_len = 0;
    }
    return rc;
}

int fsgd_vw_load_chunks(const char *path, const fsgd_vw_spec_t *s, const fsgd_parse_ctx_t *origin, fsgd_csr_t *out,
                        fsgd_vw_extra_t *extra, const fsgd_vw_chunks_t *chunks, char *err, size_t errsz)
{
    const int skip_bad = origin && origin->skip_bad;
    fsgd_libsvm_stats_t *const stats = origin ? origin->stats : NULL;
    const size_t chunk_rows = chunks ? chunks->rows : 0;
    const fsgd_vw_chunk_fn fn = chunks ? chunks->fn : NULL;
    void *const ctx = chunks ? chunks->ctx : NULL;
    fsgd_libsvm_stats_t st = {0};
    fsgd_zsource_t *z = fsgd_zsource_open(path, err, errsz);
    if (!z)
        return FSGD_E_IO;
    int rc = fsgd_csr_reserve(out, 0, 0) < 0 ? fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path) : 0;
    const int stream = fsgd_zsource_is_stream(z);
    const uint64_t stream_max = fsgd_input_stream_max();
    uint64_t total = 0;
    size_t cap = (size_t)4 << 20, len = 0;
    char *buf = rc ? NULL : malloc(cap);
    if (!rc && !buf)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
    scratch_t sc = {0};
    ctx_t c = {s, path, 1, NULL, &sc, s->bits >= 32 ? UINT32_MAX : (uint32_t)((1u << s->bits) - 1), NULL, extra};
    if (!rc && extra && extra->count_slots && s->bits <= 28 && !(c.fp = calloc((size_t)1 << s->bits, sizeof *c.fp)))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory for 2^%u column fingerprints", s->bits);
    int eof = 0;
    while (!rc && !eof) {
        if (len == cap) { /* one line fills the buffer */
            if (cap >= FSGD_INPUT_MAX_LINE) {
                rc = fsgd_input_line_error(err, errsz, path, st.lines + 1);
                break;
            }
            char *b = realloc(buf, cap * 2);
            if (!b) {
                rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: line too long", path,
                                  (unsigned long long)st.lines + 1);
                break;
            }
            buf = b;
            cap *= 2;
        }
        ssize_t got = fsgd_zsource_read(z, buf + len, cap - len, err, errsz);
        if (got < 0) {
            rc = (int)got;
            break;
        }
        eof = got == 0;
        len += (size_t)got;
        total += (uint64_t)got;
        if (stream && total > stream_max) {
            rc = fsgd_input_stream_error(err, errsz, path, total);
            break;
        }
        /* whole lines now, the rest carried to the next read */
        const char *nl = eof ? buf + len : memrchr(buf, '\n', len);
        if (!nl)
            continue;
        size_t cut = eof ? len : (size_t)(nl - buf) + 1;
        /* chunked: the text in pieces of about 64 KiB, so a chunk of rows
         * of many crosses stays near its bound */
        for (size_t at = 0, end; !rc && at < cut; at = end) {
            const char *pe = fn && cut - at > ((size_t)64 << 10)
                                 ? memchr(buf + at + ((size_t)64 << 10), '\n', cut - at - ((size_t)64 << 10))
                                 : NULL;
            end = pe ? (size_t)(pe - buf) + 1 : cut;
            c.lineno = st.lines + 1;
            long n = parse_lines(buf + at, end - at, &c, skip_bad, out, extra, &st, err, errsz);
            if (n < 0)
                rc = (int)n;
            else if (fn && (out->n_rows >= chunk_rows || out->nnz >= FSGD_VW_CHUNK_NNZ))
                rc = hand_chunk(fn, ctx, out, extra, err, errsz);
        }
        if (rc)
            break;
        memmove(buf, buf + cut, len - cut);
        len -= cut;
    }
    if (!rc && fn && out->n_rows)
        rc = hand_chunk(fn, ctx, out, extra, err, errsz);
    scratch_free(&sc);
    free(c.fp);
    free(buf);
    fsgd_zsource_close(z);
    if (stats)
        *stats = st;
    return rc;
}
