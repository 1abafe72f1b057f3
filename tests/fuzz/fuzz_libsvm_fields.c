/* Fuzz target for the LIBSVM fields spec and crosses (fsgd/libsvm_fields.h),
 * which a model file's input spec carries ("libsvm:...:fields=...:
 * interactions=..."), so any bytes may reach them.
 *
 * Input: the first line is the fields spec, the second the crosses, the rest
 * LIBSVM rows; or, when the first byte is '@', the rest is a map file's text
 * (--fields @FILE, fsgd_libsvm_fields_parse_map): its ranges do not overlap,
 * an error names the file and a line, and its canonical text parses back. Checks, not just "no crash": a spec that parses formats to a
 * canonical text that parses back to the same fields and formats the same;
 * the row format built from that text (as a model records it) reads the
 * same; a cross names only letters of the fields (or is "::"); the rows
 * crossed into 2^10 columns are well formed (sorted, unique, < 2^10, finite),
 * with the feature and cross entries counted; counting their columns
 * (opts.slots) changes no column, and counts each column a row uses. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/libsvm_fields.h"
#include "fsgd/rowfmt.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Copies the line at *p (up to '\n' or the end, at most cap - 1 bytes) into
 * out; returns 0 when it held a NUL byte or did not fit (nothing to test). */
static int take_line(const char **p, const char *e, char *out, size_t cap)
{
    const char *nl = memchr(*p, '\n', (size_t)(e - *p));
    size_t n = (size_t)((nl ? nl : e) - *p);
    if (n >= cap || memchr(*p, '\0', n))
        return 0;
    memcpy(out, *p, n);
    out[n] = '\0';
    *p = nl ? nl + 1 : e;
    return 1;
}

static void check_map(const char *text, size_t len)
{
    fsgd_libsvm_fields_t f = {0};
    char err[512];
    if (fsgd_libsvm_fields_parse_map(&f, text, len, "m", err, sizeof err) < 0) {
        CHECK(!strncmp(err, "fields: m:", 10) || !strcmp(err, "fields: m maps no index to a field"));
        return;
    }
    CHECK(f.n_ranges >= 1 && f.n_terms == 0);
    for (int i = 0; i < f.n_ranges; i++) {
        CHECK(f.lo[i] <= f.hi[i]);
        for (int j = 0; j < i; j++)
            CHECK(f.hi[j] < f.lo[i] || f.hi[i] < f.lo[j]);
    }
    char r1[4096], t[8], r2[4096];
    CHECK(fsgd_libsvm_fields_format(&f, r1, sizeof r1, t, sizeof t) == 0);
    fsgd_libsvm_fields_t back = {0};
    CHECK(fsgd_libsvm_fields_parse(&back, r1, err, sizeof err) == 0);
    CHECK(fsgd_libsvm_fields_format(&back, r2, sizeof r2, t, sizeof t) == 0 && !strcmp(r1, r2));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *e = p + size;
    if (size && p[0] == '@') {
        check_map(p + 1, size - 1);
        return 0;
    }
    char spec[512], terms[128], err[512];
    if (!take_line(&p, e, spec, sizeof spec) || !take_line(&p, e, terms, sizeof terms))
        return 0;
    fsgd_libsvm_opts_t o = {.hash_bits = 10};
    if (fsgd_libsvm_fields_parse(&o.fields, spec, err, sizeof err) < 0) {
        CHECK(!strncmp(err, "fields: ", 8));
        return 0;
    }
    CHECK(o.fields.n_ranges >= 1 && o.fields.n_ranges <= FSGD_LIBSVM_MAX_RANGES);
    for (int i = 0; i < o.fields.n_ranges; i++) {
        CHECK(o.fields.lo[i] <= o.fields.hi[i]);
        for (int j = 0; j < i; j++) /* no overlaps */
            CHECK(o.fields.hi[j] < o.fields.lo[i] || o.fields.hi[i] < o.fields.lo[j]);
    }
    if (terms[0] && fsgd_libsvm_fields_add_terms(&o.fields, terms, err, sizeof err) < 0) {
        CHECK(!strncmp(err, "interactions: ", 14));
        return 0;
    }
    for (int t = 0; t < o.fields.n_terms; t++) {
        const char *x = o.fields.term[t];
        int len = o.fields.term_len[t], wild = len == 2 && x[0] == ':' && x[1] == ':';
        CHECK(len >= 2 && len <= FSGD_LIBSVM_MAX_ORDER);
        for (int k = 0; k < len && !wild; k++) {
            int known = 0;
            for (int i = 0; i < o.fields.n_ranges; i++)
                known |= o.fields.letter[i] == x[k];
            CHECK(known);
        }
    }
    /* canonical text: parses back to the same, formats the same */
    char r1[4096], t1[256], r2[4096], t2[256];
    CHECK(fsgd_libsvm_fields_format(&o.fields, r1, sizeof r1, t1, sizeof t1) == 0);
    fsgd_libsvm_fields_t back = {0};
    CHECK(fsgd_libsvm_fields_parse(&back, r1, err, sizeof err) == 0);
    if (t1[0])
        CHECK(fsgd_libsvm_fields_add_terms(&back, t1, err, sizeof err) == 0);
    CHECK(fsgd_libsvm_fields_format(&back, r2, sizeof r2, t2, sizeof t2) == 0);
    CHECK(!strcmp(r1, r2) && !strcmp(t1, t2));
    CHECK(back.n_ranges <= o.fields.n_ranges && back.n_terms == o.fields.n_terms);
    /* the row format a model records reads the same spec */
    if (o.fields.n_terms) {
        char fmt[4500];
        snprintf(fmt, sizeof fmt, "libsvm:bits=10:fields=%s:interactions=%s", r1, t1);
        fsgd_rowfmt_t f;
        CHECK(fsgd_rowfmt_init(&f, fmt, 0, 0, err, sizeof err) == 0);
        char again[4500];
        fsgd_rowfmt_input(&f, again, sizeof again);
        CHECK(!strcmp(again, fmt));
    }
    /* the rows, crossed */
    fsgd_csr_t m = {0};
    fsgd_libsvm_stats_t st = {0};
    o.skip_bad = 1;
    long n = fsgd_libsvm_parse(p, (size_t)(e - p), &o, &(fsgd_parse_ctx_t){.src = "fz", .first_line = 1, .stats = &st},
                               &m, err, sizeof err);
    CHECK(n >= 0 && (uint64_t)n == st.rows && m.n_rows == (size_t)n);
    if (!o.fields.n_terms) /* fields alone cross nothing and count nothing */
        CHECK(st.cross_entries == 0 && st.feature_entries == 0);
    else
        CHECK(st.feature_entries + st.cross_entries >= m.nnz);
    for (size_t r = 0; r < m.n_rows; r++)
        for (uint64_t j = m.row_ptr[r]; j < m.row_ptr[r + 1]; j++) {
            CHECK(m.col[j] < 1024 && isfinite(m.val[j]));
            if (j > m.row_ptr[r])
                CHECK(m.col[j] > m.col[j - 1]);
        }
    /* the columns counted (opts.slots): the same rows, every column a row
     * uses counted as used (a bad row skipped may have counted some), no
     * more shared than used */
    fsgd_csr_t c = {0};
    fsgd_libsvm_stats_t cs = {0};
    o.slots = fsgd_libsvm_slots_new(o.hash_bits);
    CHECK(o.slots);
    CHECK(fsgd_libsvm_parse(p, (size_t)(e - p), &o, &(fsgd_parse_ctx_t){.src = "fz", .first_line = 1, .stats = &cs}, &c,
                            err, sizeof err) == n);
    CHECK(c.nnz == m.nnz && (!m.nnz || !memcmp(c.col, m.col, m.nnz * sizeof *m.col)));
    for (uint64_t j = 0; j < m.nnz; j++)
        CHECK(o.slots[m.col[j]] != 0);
    CHECK(cs.slots_collided <= cs.slots_used && cs.slots_used <= 1024 && (!m.nnz || cs.slots_used > 0));
    free(o.slots);
    fsgd_csr_free(&c);
    fsgd_csr_free(&m);
    return 0;
}
