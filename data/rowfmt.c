/* The job's row format: picks the LIBSVM or the delimited parser (fsgd/rowfmt.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/rowblock.h"
#include "fsgd/rowfmt.h"
#include "fsgd/rowlabel.h"

int fsgd_rowfmt_init(fsgd_rowfmt_t *f, const char *format, int hash_bits, int skip_bad, char *err, size_t errsz)
{
    memset(f, 0, sizeof *f);
    f->opts.skip_bad = skip_bad;
    if (hash_bits < 0 || hash_bits > 32)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "hash_bits: %d is not in 1..32 (0: the format's bits)", hash_bits);
    if (!format[0] || !strcmp(format, "libsvm") || !strncmp(format, "libsvm:", 7)) {
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
                f->opts.row_weights = 1;
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
static long parse_delim(const fsgd_rowfmt_t *f, const char *buf, size_t len, const char *src, uint64_t first_line,
                        fsgd_csr_t *out, fsgd_libsvm_stats_t *st, char *err, size_t errsz)
{
    if (!f->opts.skip_bad) {
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

long fsgd_rowfmt_parse(const fsgd_rowfmt_t *f, const char *buf, size_t len, const char *src, uint64_t first_line,
                       fsgd_csr_t *out, fsgd_libsvm_stats_t *stats, char *err, size_t errsz)
{
    fsgd_libsvm_stats_t local;
    if (!stats) {
        memset(&local, 0, sizeof local);
        stats = &local;
    }
    if (!src)
        src = "<buffer>";
    if (f->vw) {
        /* the distributed roles read rows here, and do not weigh them yet:
         * a weighted row is refused, not trained at weight 1 */
        fsgd_vw_extra_t x = {0};
        long n = fsgd_vw_parse(buf, len, &f->vw_spec, f->opts.skip_bad, src, first_line, out, &x, stats, err, errsz);
        if (n > 0 && x.any_weight)
            n = fsgd_err_fmt(err, errsz, FSGD_E_UNSUPPORTED,
                             "%s: rows with importance weights (VW's 'label weight |...'): fsgd run and its roles do "
                             "not weigh rows yet; train them with fsgd train",
                             src);
        fsgd_vw_extra_free(&x);
        return n;
    }
    if (!f->hashed && f->opts.row_weights) {
        /* label:weight: the weights ride in the labels (fsgd/rowlabel.h), so
         * they travel in row blocks and reach the workers' gradients */
        fsgd_libsvm_weights_t w = {0};
        fsgd_libsvm_opts_t o = f->opts;
        o.weights = &w;
        size_t first = out->n_rows;
        long n = fsgd_libsvm_parse(buf, len, src, first_line, &o, out, stats, err, errsz);
        /* every row, weighted or not (labels then read by class alike in any
         * buffer), the rows before an error too: they stay in out, as rows do */
        if (w.n) {
            size_t dropped = fsgd_rowlabel_weigh(out, first, w.w, 1, 1); /* weight 0: no row */
            stats->rows -= dropped;
            if (n > 0)
                n -= (long)dropped;
        }
        fsgd_libsvm_weights_free(&w);
        return n;
    }
    if (!f->hashed)
        return fsgd_libsvm_parse(buf, len, src, first_line, &f->opts, out, stats, err, errsz);
    return parse_delim(f, buf, len, src, first_line, out, stats, err, errsz);
}

long fsgd_rowfmt_parse_msg(const fsgd_rowfmt_t *f, const void *buf, size_t len, const char *src, fsgd_csr_t *out,
                           fsgd_libsvm_stats_t *stats, char *err, size_t errsz)
{
    if (!fsgd_rowblock_is(buf, len))
        return fsgd_rowfmt_parse(f, buf, len, src, 1, out, stats, err, errsz);
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
