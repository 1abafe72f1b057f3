/* What a job's input keys fold into its format (fields, crosses, row
 * weights, VW namespaces): fsgd/train_params.h. */
#include "fsgd/train_params.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/delim.h"
#include "fsgd/libsvm_fields.h"
#include "fsgd/rowfmt.h"
#include "fsgd/rowlabel.h"
#include "fsgd/vw.h"

/* --fields @FILE: the index -> field map of a file (fsgd_libsvm_fields_parse_map). */
static int fields_from_file(fsgd_libsvm_fields_t *fl, const char *path, char *err, size_t errsz)
{
    enum { MAX_MAP = 16 << 20 }; /* 2^32 indices a line each would not fit 64 ranges anyway */
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: cannot open '%s': %s", path, strerror(errno));
    char *text = malloc(MAX_MAP + 1);
    size_t n = text ? fread(text, 1, MAX_MAP + 1, fp) : 0;
    int bad = ferror(fp);
    fclose(fp);
    int rc = !text ? fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "fields: out of memory reading '%s'", path)
             : bad ? fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: cannot read '%s'", path)
             : n > MAX_MAP ? fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: '%s' is larger than %d bytes", path, MAX_MAP)
                           : 0;
    /* read into a fresh set, then added as ranges: a format that holds them
     * already (a job folded twice, fsgd run's roles) takes them once */
    fsgd_libsvm_fields_t map = {0};
    char ranges[4096], none[8];
    if (rc == 0)
        rc = fsgd_libsvm_fields_parse_map(&map, text, n, path, err, errsz);
    if (rc == 0 && fsgd_libsvm_fields_format(&map, ranges, sizeof ranges, none, sizeof none) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "fields: the ranges of '%s' are too long", path);
    if (rc == 0)
        rc = fsgd_libsvm_fields_parse(fl, ranges, err, errsz);
    free(text);
    return rc;
}

/* LIBSVM fields and crosses folded into the format, as a model records
 * them: "libsvm:bits=B:fields=a=1-14,...:interactions=ab,...". */
static int fold_libsvm(fsgd_train_params_t *job, char *err, size_t errsz)
{
    fsgd_rowfmt_t f;
    char e[400];
    if (fsgd_rowfmt_init(&f, job->format[0] ? job->format : "libsvm", job->hash_bits, 0, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s", e);
    fsgd_libsvm_fields_t *fl = &f.opts.fields;
    if (job->fields[0] == '@') {
        FSGD_TRY(fields_from_file(fl, job->fields + 1, err, errsz));
    } else if (job->fields[0] && fsgd_libsvm_fields_parse(fl, job->fields, e, sizeof e) < 0) {
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s", e);
    }
    if (job->interactions[0] && !fl->n_ranges)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "interactions: LIBSVM rows are crossed by fields: give --fields (e.g. a:1-14,b:15-100) "
                            "and cross their letters (-q ab)");
    if (job->interactions[0] && fsgd_libsvm_fields_add_terms(fl, job->interactions, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s", e);
    if (!fl->n_terms) /* fields without crosses change nothing */
        return 0;
    if (!f.opts.hash_bits)
        f.opts.hash_bits = 18;
    char spec[sizeof job->format + 1];
    fsgd_rowfmt_input(&f, spec, sizeof spec);
    if (!spec[0] || strlen(spec) >= sizeof job->format)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: the libsvm spec with its fields and crosses is too long");
    memcpy(job->format, spec, strlen(spec) + 1);
    return 0;
}

/* Crosses naming columns (C1*C2, age*city) as numbers into out: names
 * from the training file's header (header=1) or Criteo's I<k>/C<k>
 * (fsgd_delim_crosses_by_name). The header is read again by every role of
 * fsgd run, which all have --data; a name no column has is bad input
 * (FSGD_E_PARSE: exit 3). */
static int delim_names(const fsgd_delim_spec_t *d, const fsgd_train_params_t *job, char *out, size_t cap, char *err,
                       size_t errsz)
{
    enum { HEADER_MAX = 1 << 16 };
    if (strspn(job->interactions, "0123456789*,") == strlen(job->interactions)) { /* numbers: no file read */
        snprintf(out, cap, "%s", job->interactions);
        return 0;
    }
    const int from_stdin = !job->data[0] || !strcmp(job->data, "-");
    char *header = d->header && !from_stdin ? malloc(HEADER_MAX) : NULL;
    size_t len = 0;
    char e[600];
    int rc = d->header && !from_stdin && !header ? FSGD_E_NOMEM : 0;
    if (rc == 0 && header)
        rc = fsgd_delim_read_header(job->data, header, HEADER_MAX, &len, e, sizeof e);
    if (rc < 0) {
        free(header);
        return fsgd_err_fmt(err, errsz, rc, "interactions: '%s' names columns, but the header of %s was not read: %s",
                            job->interactions, job->data, rc == FSGD_E_NOMEM ? "out of memory" : e);
    }
    rc = fsgd_delim_crosses_by_name(d, job->interactions, header, job->data, out, cap, e, sizeof e);
    free(header);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s%s", e,
                            d->header && from_stdin ? " (a header on stdin is read with the rows, after the crosses "
                                                      "are set: give --data FILE to name its columns)"
                                                    : "");
    return 0;
}

/* Delimited formats cross columns by 1-based number (--interactions
 * 15*16,15*16*17) or name (C1*C2, a header's age*city): the crosses join
 * the spec's own, each once. */
static int fold_delim(fsgd_train_params_t *job, char *err, size_t errsz)
{
    fsgd_delim_spec_t d, t;
    char e[400], named[sizeof job->interactions + 256];
    if (fsgd_delim_spec_parse(job->format, &d, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: %s", e);
    FSGD_TRY(delim_names(&d, job, named, sizeof named, err, errsz));
    t = d;
    t.n_crosses = 0;
    if (fsgd_delim_spec_add_crosses(&t, named, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "%s (--format %s crosses columns by number or name, e.g. -q 15*16 or -q C1*C2; letters name VW "
                            "namespaces)",
                            e, job->format);
    for (int i = 0; i < t.n_crosses; i++) {
        int have = 0;
        for (int j = 0; j < d.n_crosses; j++)
            have |= d.cross_len[j] == t.cross_len[i] &&
                    !memcmp(d.cross[j], t.cross[i], t.cross_len[i] * sizeof d.cross[j][0]);
        if (have)
            continue;
        if (d.n_crosses == FSGD_DELIM_MAX_CROSSES)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: more than %d crosses", FSGD_DELIM_MAX_CROSSES);
        memset(d.cross[d.n_crosses], 0, sizeof d.cross[0]);
        memcpy(d.cross[d.n_crosses], t.cross[i], t.cross_len[i] * sizeof d.cross[0][0]);
        d.cross_len[d.n_crosses++] = t.cross_len[i];
    }
    if (fsgd_delim_spec_format(&d, job->format, sizeof job->format) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: the spec with its crosses is too long");
    return 0;
}

/* The weight keys after the format's name (":row_weights=1",
 * ":class_weight=P,N", fsgd_train_fold_weights) moved back into the job's
 * keys, so that the format's own parsers read it and folding stays
 * idempotent (fsgd run's roles fold the job they are given again). */
static void unfold_weights(fsgd_train_params_t *job)
{
    const size_t name = strcspn(job->format, ":");
    char *p = job->format + name;
    for (;;) {
        const size_t n = p[0] == ':' ? strcspn(p + 1, ":") : 0;
        if (n == 13 && !strncmp(p + 1, "row_weights=1", 13)) {
            /* LIBSVM's label:weight; a VW job's is the job's model's to say */
            job->row_weights |= !name || !strncmp(job->format, "libsvm", name);
        } else if (n > 13 && n - 13 < sizeof job->class_weight && !strncmp(p + 1, "class_weight=", 13)) {
            if (!job->class_weight[0]) {
                memcpy(job->class_weight, p + 14, n - 13);
                job->class_weight[n - 13] = '\0';
            }
        } else {
            break;
        }
        memmove(p, p + 1 + n, strlen(p + 1 + n) + 1);
    }
}

int fsgd_train_fold_input(fsgd_train_params_t *job, char *err, size_t errsz)
{
    unfold_weights(job);
    const int vw = !strcmp(job->format, "vw") || !strncmp(job->format, "vw:", 3);
    const int delim = !strcmp(job->format, "criteo") || !strncmp(job->format, "tsv:", 4) ||
                      !strncmp(job->format, "csv:", 4);
    const int libsvm = !job->format[0] || !strcmp(job->format, "libsvm") || !strncmp(job->format, "libsvm:", 7);
    if (job->fields[0] && !libsvm)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "fields: index ranges are for --format libsvm (vw crosses namespaces, criteo/tsv/csv "
                            "columns by number); format is %s",
                            job->format);
    if (!vw) {
        const char *key = job->ignore[0] ? "ignore" : job->keep[0] ? "keep" : NULL;
        if (!key && job->interactions[0] && !delim && !libsvm)
            key = "interactions";
        if (key)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "%s: namespaces%s are for --format vw (VW text rows)%s; format is %s", key,
                                delim ? "" : " and crosses",
                                delim ? "" : " and the delimited formats (criteo, tsv:, csv: cross columns by number)",
                                job->format);
    }
    if (libsvm && (job->fields[0] || job->interactions[0]))
        FSGD_TRY(fold_libsvm(job, err, errsz));
    if (libsvm && job->row_weights && !strstr(job->format, "row_weights=1")) {
        /* how rows are read travels with the format to every role (first:
         * interactions, which may hold "::", stay the last key) */
        const char *rest = job->format[0] ? job->format + 6 : "";
        char spec[sizeof job->format];
        if (snprintf(spec, sizeof spec, "libsvm:row_weights=1%s", rest) >= (int)sizeof spec)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: the libsvm spec with row_weights is too long");
        memcpy(job->format, spec, strlen(spec) + 1);
    }
    if (libsvm)
        return 0;
    if (delim && job->interactions[0])
        return fold_delim(job, err, errsz);
    if (!vw)
        return 0;
    fsgd_vw_spec_t s;
    char e[400];
    if (fsgd_vw_spec_parse(job->format, &s, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: %s", e);
    if (job->hash_bits)
        s.bits = (unsigned)job->hash_bits;
    char more[300];
    snprintf(more, sizeof more, "vw%s%s%s%s", job->ignore[0] ? ":ignore=" : "", job->ignore,
             job->keep[0] ? ":keep=" : "", job->keep);
    fsgd_vw_spec_t add;
    if (fsgd_vw_spec_parse(more, &add, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s", e);
    for (int i = 0; i < 32; i++) {
        s.ignore[i] |= add.ignore[i];
        s.keep[i] |= add.keep[i];
    }
    if (job->interactions[0]) {
        fsgd_vw_spec_t t = {0};
        if (fsgd_vw_spec_add_terms(&t, job->interactions, e, sizeof e) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s", e);
        for (int i = 0; i < t.n_terms; i++) {
            int have = 0;
            for (int j = 0; j < s.n_terms; j++)
                have |= s.term_len[j] == t.term_len[i] && !memcmp(s.term[j], t.term[i], t.term_len[i]);
            if (have)
                continue;
            if (s.n_terms == FSGD_VW_MAX_TERMS)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "interactions: more than %d crosses", FSGD_VW_MAX_TERMS);
            memcpy(s.term[s.n_terms], t.term[i], t.term_len[i]);
            s.term_len[s.n_terms++] = t.term_len[i];
        }
    }
    if (fsgd_vw_spec_format(&s, job->format, sizeof job->format) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: the vw spec with its crosses is too long");
    return 0;
}

int fsgd_train_fold_weights(fsgd_train_params_t *job, char *err, size_t errsz)
{
    double pos, neg;
    FSGD_TRY(fsgd_train_class_weight(job, &pos, &neg, err, errsz));
    const int vw = !strcmp(job->format, "vw") || !strncmp(job->format, "vw:", 3);
    const int classify = job->model != FSGD_LOSS_SQUARED;
    const int cpu = !strcmp(job->backend, "cpu");
    if ((job->class_weight[0] || job->row_weights) && !(classify && cpu))
        /* the weights ride in the labels (fsgd/rowlabel.h): a class's sign, read by the cpu backend */
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "%s: row and class weights are for classification models (logistic, svm) on the cpu "
                            "backend",
                            job->class_weight[0] ? "class_weight" : "row_weights");
    char keys[128] = "";
    if (vw && classify && cpu && !strstr(job->format, ":row_weights=1")) /* VW's importance (libsvm: fold_input's) */
        snprintf(keys, sizeof keys, ":row_weights=1");
    if (job->class_weight[0] && !strstr(job->format, ":class_weight="))
        snprintf(keys + strlen(keys), sizeof keys - strlen(keys), ":class_weight=%.17g,%.17g", pos, neg);
    if (!keys[0])
        return 0;
    /* right after the format's name, where fsgd_rowfmt_init takes them */
    const char *f = job->format[0] ? job->format : "libsvm";
    const size_t name = strcspn(f, ":");
    char spec[sizeof job->format];
    if (snprintf(spec, sizeof spec, "%.*s%s%s", (int)name, f, keys, f + name) >= (int)sizeof spec)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "format: the spec with its weights is too long");
    memcpy(job->format, spec, strlen(spec) + 1);
    return 0;
}
