/* The job's row format: picks the LIBSVM or the delimited parser (fsgd/rowfmt.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/rowblock.h"
#include "fsgd/rowfmt.h"
#include "fsgd/rowlabel.h"

/* The weight keys right after the format's name (":row_weights=1",
 * ":class_weight=POS,NEG", as fsgd_train_fold_weights puts them) read into f
 * and left out of out, the format without them; how rows are weighed is
 * not what the model is; out stays "" when there were none. */
static int take_weight_keys(fsgd_rowfmt_t *f, const char *format, char *out, size_t cap, char *err, size_t errsz)
{
    const size_t name = strcspn(format, ":");
    const char *p = format + name;
    for (;;) {
        const size_t n = p[0] == ':' ? strcspn(p + 1, ":") : 0;
        if (n == 13 && !strncmp(p + 1, "row_weights=1", 13)) {
            f->weigh_rows = 1;
        } else if (n > 13 && !strncmp(p + 1, "class_weight=", 13)) {
            if (fsgd_rowlabel_class_weight_parse(p + 14, n - 13, &f->class_pos, &f->class_neg) < 0)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "format: '%s': class_weight is not POS,NEG (two numbers > 0)", format);
        } else {
            break;
        }
        p += 1 + n;
    }
    if (p == format + name) /* none: format as it is (a model's input may be long) */
        return 0;
    if (name + strlen(p) >= cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: '%.40s...' is too long", format);
    memcpy(out, format, name);
    memcpy(out + name, p, strlen(p) + 1);
    return 0;
}

int fsgd_rowfmt_init(fsgd_rowfmt_t *f, const char *format, int hash_bits, int skip_bad, char *err, size_t errsz)
{
    memset(f, 0, sizeof *f);
    char bare[1024];
    bare[0] = '\0';
    FSGD_TRY(take_weight_keys(f, format, bare, sizeof bare, err, errsz));
    if (bare[0])
        format = bare;
    f->opts.skip_bad = skip_bad;
    if (hash_bits < 0 || hash_bits > 32)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "hash_bits: %d is not in 1..32 (0: the format's bits)", hash_bits);
    if (!format[0] || !strcmp(format, "libsvm") || !strncmp(format, "libsvm:", 7)) {
        f->opts.row_weights = f->weigh_rows; /* label:weight */
        /* "libsvm:bits=B[:fields=a=1-14,...][:interactions=ab,...]", as a model records hashed LIBSVM input */
        for (const char *p = format[0] ? format + 6 : format; *p == ':';) {
            p++;
            size_t n = strcspn(p, ":");
            if (!strncmp(p, "bits=", 5)) {
                char *end;
                unsigned long b = strtoul(p + 5, &end, 10);
                if (!b || b > 32 || end != p + n)
                    return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: '%s' is not libsvm:bits=B (B in 1..32)",
                                        format);
                if (!hash_bits)
                    hash_bits = (int)b;
            } else if (n == 13 && !strncmp(p, "row_weights=1", 13)) {
                /* label:weight rows (fsgd train/run --row-weights): how rows are read, not what the
                 * model is, so the model's input spec leaves it out */
                f->opts.row_weights = f->weigh_rows = 1;
            } else if (!strncmp(p, "fields=", 7) || !strncmp(p, "interactions=", 13)) {
                char v[1024], e[400];
                const int fields = p[0] == 'f';
                const size_t k = fields ? 7 : 13;
                /* interactions may hold "::": the last key, it takes the rest */
                size_t vl = fields ? n - k : strlen(p + k);
                if (vl >= sizeof v)
                    return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: '%s': %s too long", format, fields ? "fields" : "interactions");
                memcpy(v, p + k, vl);
                v[vl] = '\0';
                if ((fields ? fsgd_libsvm_fields_parse(&f->opts.fields, v, e, sizeof e)
                            : fsgd_libsvm_fields_add_terms(&f->opts.fields, v, e, sizeof e)) < 0)
                    return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: %s", e);
                n = fields ? n : strlen(p);
            } else {
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "format: '%s': unknown libsvm key '%.*s' (bits=B, row_weights=1, fields=..., interactions=...)",
                                    format, (int)n, p);
            }
            p += n;
        }
        /* crosses are hashed: VW's default 2^18 columns unless told */
        if (f->opts.fields.n_terms && !hash_bits)
            hash_bits = 18;
        f->opts.hash_bits = (unsigned)hash_bits;
        char canon[4096];
        fsgd_rowfmt_input(f, canon, sizeof canon);
        f->block_id = fsgd_rowblock_format_id(canon);
        return 0;
    }
    char e[400];
    if (!strcmp(format, "vw") || !strncmp(format, "vw:", 3)) {
        if (fsgd_vw_spec_parse(format, &f->vw_spec, e, sizeof e) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: %s", e);
        if (hash_bits)
            f->vw_spec.bits = (unsigned)hash_bits;
        f->vw = 1;
        char canon[FSGD_VW_SPEC_MAX];
        fsgd_rowfmt_input(f, canon, sizeof canon);
        f->block_id = fsgd_rowblock_format_id(canon);
        return 0;
    }
    if (fsgd_delim_spec_parse(format, &f->spec, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: %s", e);
    if (hash_bits)
        f->spec.bits = (unsigned)hash_bits;
    f->hashed = 1;
    char canon[16384]; /* 1024 columns of any kinds fit */
    fsgd_rowfmt_input(f, canon, sizeof canon);
    f->block_id = fsgd_rowblock_format_id(canon);
    return 0;
}

int fsgd_rowfmt_dim(const fsgd_rowfmt_t *f, uint64_t job_dim, uint64_t *dim, char *err, size_t errsz)
{
    *dim = job_dim;
    if (!f->hashed && !f->vw && !f->opts.hash_bits)
        return 0;
    unsigned bits = f->hashed ? f->spec.bits : f->vw ? f->vw_spec.bits : f->opts.hash_bits;
    uint64_t h = (uint64_t)1 << bits;
    if (job_dim && job_dim != h)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "dim %llu: a hashed format has 2^%u = %llu columns (set hash_bits, not dim)",
                            (unsigned long long)job_dim, bits, (unsigned long long)h);
    *dim = h;
    return 0;
}

void fsgd_rowfmt_input(const fsgd_rowfmt_t *f, char *out, size_t cap)
{
    if (cap)
        out[0] = '\0';
    if (!f->hashed && !f->vw && f->opts.hash_bits) {
        int w = snprintf(out, cap, "libsvm:bits=%u", f->opts.hash_bits);
        char ranges[2048], terms[256];
        if (f->opts.fields.n_ranges && w >= 0 && (size_t)w < cap &&
            fsgd_libsvm_fields_format(&f->opts.fields, ranges, sizeof ranges, terms, sizeof terms) == 0) {
            /* fields only matter to crosses; interactions last (it may hold "::") */
            int w2 = f->opts.fields.n_terms ? snprintf(out + w, cap - (size_t)w, ":fields=%s:interactions=%s", ranges, terms) : 0;
            if (w2 < 0 || (size_t)w2 >= cap - (size_t)w)
                out[0] = '\0';
        }
    }
    if (f->vw && fsgd_vw_spec_format(&f->vw_spec, out, cap) < 0 && cap)
        out[0] = '\0';
    if (f->hashed && fsgd_delim_spec_format(&f->spec, out, cap) < 0 && cap)
        out[0] = '\0';
}

/* Delimited rows line by line, so that a bad one is skipped alone. */
static long parse_delim(const fsgd_rowfmt_t *f, const char *buf, size_t len, const fsgd_parse_ctx_t *at,
                        fsgd_csr_t *out, char *err, size_t errsz)
{
    const char *src = at->src;
    const uint64_t first_line = at->first_line;
    fsgd_libsvm_stats_t *st = at->stats;
    if (!at->skip_bad) {
        long n = fsgd_delim_parse_rows(buf, len, &f->spec, src, first_line, out, err, errsz);
        if (n > 0)
            st->rows += (uint64_t)n;
        return n;
    }
    const char *p = buf, *e = buf + len;
    uint64_t line = first_line;
    long got = 0;
    char msg[512];
    if (fsgd_csr_reserve(out, 0, 0) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", src);
    for (; p < e; line++) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        long n = fsgd_delim_parse_rows(p, (size_t)(le - p), &f->spec, src, line, out, msg, sizeof msg);
        st->lines++;
        if (n == FSGD_E_NOMEM)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s", msg);
        if (n < 0)
            fsgd_libsvm_note_bad(st, msg);
        else
            got += n;
        p = nl ? nl + 1 : e;
    }
    st->rows += (uint64_t)got;
    return got;
}

int fsgd_rowfmt_weighs(const fsgd_rowfmt_t *f) { return f->weigh_rows || f->class_pos > 0; }

/* Rows [first, out->n_rows) weighed (fsgd/rowlabel.h): each by its own
 * weight w (NULL: 1) and its class's; every row, weighted or not, so that
 * labels read by class alike in any buffer. Returns n less the rows of
 * weight 0, dropped (n < 0, an error, as it is: the rows before it stay in
 * out, weighed, as rows do). */
static long weigh(const fsgd_rowfmt_t *f, fsgd_csr_t *out, size_t first, const double *w, long n,
                  fsgd_libsvm_stats_t *st)
{
    if (out->n_rows == first) /* none parsed (out may have no row_ptr yet) */
        return n;
    const double pos = f->class_pos > 0 ? f->class_pos : 1, neg = f->class_pos > 0 ? f->class_neg : 1;
    size_t dropped = fsgd_rowlabel_weigh(out, first, w, pos, neg);
    st->rows -= dropped;
    return n > 0 ? n - (long)dropped : n;
}

long fsgd_rowfmt_parse(const fsgd_rowfmt_t *f, const char *buf, size_t len, const fsgd_parse_ctx_t *at,
                       fsgd_csr_t *out, char *err, size_t errsz)
{
    fsgd_libsvm_stats_t local;
    fsgd_parse_ctx_t c = at ? *at : (fsgd_parse_ctx_t){.first_line = 1};
    if (!c.stats) {
        memset(&local, 0, sizeof local);
        c.stats = &local;
    }
    if (!c.src)
        c.src = "<buffer>";
    c.skip_bad = c.skip_bad || f->opts.skip_bad;
    const char *src = c.src;
    fsgd_libsvm_stats_t *stats = c.stats;
    const size_t first = out->n_rows;
    if (f->vw) {
        /* importance weights ride in the labels when the job weighs rows (a
         * classification job's, fsgd_train_fold_weights); otherwise a weighted
         * row is refused, not trained at weight 1 */
        fsgd_vw_extra_t x = {0};
        long n = fsgd_vw_parse(buf, len, &f->vw_spec, &c, out, &x, err, errsz);
        if (n > 0 && x.any_weight && !f->weigh_rows)
            n = fsgd_err_fmt(err, errsz, FSGD_E_UNSUPPORTED,
                             "%s: rows with importance weights (VW's 'label weight |...'): fsgd run weighs rows of "
                             "classification models (logistic, svm) only; --model linear reads labels as values",
                             src);
        else if (fsgd_rowfmt_weighs(f))
            n = weigh(f, out, first, x.any_weight && x.n == out->n_rows - first ? x.weight : NULL, n, stats);
        fsgd_vw_extra_free(&x);
        return n;
    }
    if (!f->hashed && f->opts.row_weights) {
        /* label:weight: the weights ride in the labels (fsgd/rowlabel.h), so
         * they travel in row blocks and reach the workers' gradients */
        fsgd_libsvm_weights_t w = {0};
        fsgd_libsvm_opts_t o = f->opts;
        o.weights = &w;
        long n = fsgd_libsvm_parse(buf, len, &o, &c, out, err, errsz);
        n = weigh(f, out, first, w.n == out->n_rows - first ? w.w : NULL, n, stats);
        fsgd_libsvm_weights_free(&w);
        return n;
    }
    long n = !f->hashed ? fsgd_libsvm_parse(buf, len, &f->opts, &c, out, err, errsz)
                        : parse_delim(f, buf, len, &c, out, err, errsz);
    return f->class_pos > 0 ? weigh(f, out, first, NULL, n, stats) : n;
}

long fsgd_rowfmt_parse_msg(const fsgd_rowfmt_t *f, const void *buf, size_t len, const char *src, fsgd_csr_t *out,
                           fsgd_libsvm_stats_t *stats, char *err, size_t errsz)
{
    if (!fsgd_rowblock_is(buf, len))
        return fsgd_rowfmt_parse(f, buf, len, &(fsgd_parse_ctx_t){.src = src, .first_line = 1, .stats = stats}, out,
                                 err, errsz);
    char msg[512];
    long n = fsgd_rowblock_decode(buf, len, f->block_id, src, out, msg, sizeof msg);
    if (n >= 0) {
        if (stats)
            stats->rows += (uint64_t)n;
        return n;
    }
    if (n != FSGD_E_FORMAT || !f->opts.skip_bad)
        return fsgd_err_fmt(err, errsz, (int)n, "%s", msg);
    if (stats)
        fsgd_libsvm_note_bad(stats, msg);
    return 0;
}

int fsgd_rowfmt_load(const fsgd_rowfmt_t *f, const char *path, int threads, fsgd_csr_t *out,
                     fsgd_libsvm_stats_t *stats, char *err, size_t errsz)
{
    if (f->vw)
        return fsgd_vw_load(path, &f->vw_spec, f->opts.skip_bad, out, NULL, stats, err, errsz);
    if (!f->hashed)
        return fsgd_libsvm_load_threads(path, &f->opts, threads, out, stats, err, errsz);
    fsgd_delim_stats_t ds;
    int rc = fsgd_delim_load(path, &f->spec, 0, out, &ds, err, errsz);
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->lines = ds.lines;
        stats->rows = ds.rows;
    }
    return rc;
}
