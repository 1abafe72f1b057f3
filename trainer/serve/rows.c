/* Request bodies to CSR rows (fsgd/serve_rows.h). Text goes through the
 * very parsers fsgd predict uses on files (fsgd_libsvm_parse with the
 * model's hash bits, fsgd_delim_parse_rows, fsgd_vw_parse), so the columns
 * and float values are the same bits; JSON rows are checked here and end up
 * in the same CSR. */
#include "serve_rows.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/libsvm.h"

/* Columns of one JSON row before they go into the CSR. */
typedef struct row_buf {
    uint32_t *col;
    float *val;
    uint64_t *keys; /* hashed LIBSVM: column << 32 | position */
    size_t cap;
} row_buf_t;

static int row_buf_reserve(row_buf_t *b, size_t n)
{
    if (n <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < n)
        cap *= 2;
    uint32_t *c = realloc(b->col, cap * sizeof *c);
    if (c)
        b->col = c;
    float *v = realloc(b->val, cap * sizeof *v);
    if (v)
        b->val = v;
    uint64_t *k = realloc(b->keys, cap * sizeof *k);
    if (k)
        b->keys = k;
    if (!c || !v || !k)
        return FSGD_E_NOMEM;
    b->cap = cap;
    return 0;
}

/* A JSON number as the float the LIBSVM reader would store for its
 * decimal text: jansson reads reals with strtod, the reader rounds its
 * correctly rounded double to float the same way. */
static int json_value(const json_t *v, float *out)
{
    double d;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v))
        d = json_real_value(v);
    else
        return -1;
    if (!isfinite(d) || fabs(d) > 3.4028234663852886e38)
        return -1;
    *out = (float)d;
    return 0;
}

static int cmp_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The n entries of b hashed into 2^bits columns as the LIBSVM reader hashes
 * a line's indices: sorted by column, entries of one column summed in the
 * row's order (the same float additions). Returns the entries left. */
static size_t hash_row(row_buf_t *b, size_t n, unsigned bits)
{
    for (size_t i = 0; i < n; i++)
        b->keys[i] = (uint64_t)fsgd_libsvm_hash_col(b->col[i], bits) << 32 | i;
    qsort(b->keys, n, sizeof *b->keys, cmp_key);
    /* the merged row: columns over b->col's front (read through the keys
     * from here on), values behind the row's own, then moved to the front */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = (uint32_t)(b->keys[i] >> 32);
        float x = b->val[(uint32_t)b->keys[i]];
        if (k && b->col[k - 1] == c) {
            b->val[n + k - 1] += x;
        } else {
            b->col[k] = c;
            b->val[n + k] = x;
            k++;
        }
    }
    memmove(b->val, b->val + n, k * sizeof *b->val);
    return k;
}

/* {"indices": [...], "values": [...]} of row r into the CSR (indices
 * hashed into 2^hash_bits columns when hash_bits > 0). */
static int json_sparse_row(const json_t *row, size_t r, unsigned hash_bits, row_buf_t *b, fsgd_csr_t *out, char *err,
                           size_t errsz)
{
    const json_t *idx = json_object_get(row, "indices");
    const json_t *vals = json_object_get(row, "values");
    if (!json_is_array(idx))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].indices: expected an array of 1-based feature indices",
                            r);
    size_t n = json_array_size(idx);
    if (vals && !json_is_array(vals))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].values: expected an array of numbers", r);
    if (vals && json_array_size(vals) != n)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].values: %zu values for %zu indices", r,
                            json_array_size(vals), n);
    /* twice the room: hashing merges the values behind the row's own */
    if (row_buf_reserve(b, 2 * n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory for row %zu", r);
    for (size_t i = 0; i < n; i++) {
        const json_t *k = json_array_get(idx, i);
        json_int_t ki = json_is_integer(k) ? json_integer_value(k) : 0;
        if (ki < 1 || ki > (json_int_t)1 << 32)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                                "rows[%zu].indices[%zu]: expected an integer index 1..4294967296", r, i);
        b->col[i] = (uint32_t)(ki - 1);
        if (i > 0 && b->col[i] <= b->col[i - 1])
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "rows[%zu].indices[%zu]: index %lld after %lu: indices must be strictly increasing", r,
                                i, (long long)ki, (unsigned long)b->col[i - 1] + 1);
        b->val[i] = 1.0f;
        if (vals && json_value(json_array_get(vals, i), &b->val[i]) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].values[%zu]: expected a finite number", r, i);
    }
    if (hash_bits)
        n = hash_row(b, n, hash_bits);
    if (fsgd_csr_append_row(out, 0.0, b->col, b->val, n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory for row %zu", r);
    return 0;
}

/* Appends s[0..n) to a growing line buffer. */
static int line_put(char **line, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1)
            c *= 2;
        char *p = realloc(*line, c);
        if (!p)
            return FSGD_E_NOMEM;
        *line = p;
        *cap = c;
    }
    memcpy(*line + *len, s, n);
    *len += n;
    return 0;
}

/* {"fields": [...]} of row r: joined with the spec's separator into the
 * text row the delimited parser reads (a missing label becomes "0"). */
static int json_fields_row(const json_t *row, size_t r, const fsgd_delim_spec_t *spec, char **line, size_t *cap,
                           fsgd_csr_t *out, char *err, size_t errsz)
{
    const json_t *fields = json_object_get(row, "fields");
    if (!json_is_array(fields))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "rows[%zu].fields: expected an array of strings (the model hashes raw fields)", r);
    size_t n = json_array_size(fields);
    int no_label = n + 1 == spec->n_cols;
    if (n != spec->n_cols && !no_label)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].fields: %zu fields, expected %zu (or %zu without the label)",
                            r, n, spec->n_cols, spec->n_cols - 1);
    size_t len = 0;
    for (size_t c = 0, i = 0; c < spec->n_cols; c++) {
        const char *text = "0";
        size_t tn = 1;
        if (!(no_label && c == spec->label_col)) {
            const json_t *f = json_array_get(fields, i);
            if (!json_is_string(f))
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].fields[%zu]: expected a string", r, i);
            text = json_string_value(f);
            tn = json_string_length(f);
            if (memchr(text, spec->sep, tn) || memchr(text, '\n', tn) || memchr(text, '\r', tn) ||
                memchr(text, '\0', tn))
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                    "rows[%zu].fields[%zu]: a field cannot hold the separator, a line break or NUL", r,
                                    i);
            i++;
        }
        if ((c > 0 && line_put(line, &len, cap, &spec->sep, 1) < 0) || line_put(line, &len, cap, text, tn) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory for row %zu", r);
    }
    char src[48];
    snprintf(src, sizeof src, "rows[%zu]", r);
    /* The parser's message ("rows[3]:1:40: column 2 (num): ...") names the column. */
    long got = fsgd_delim_parse_rows(*line, len, spec, src, 1, out, err, errsz);
    if (got < 0)
        return (int)got;
    if (got != 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].fields: an empty row", r);
    return 0;
}

/* Text rows of the model's format from buf[0..len): src names them in
 * errors ("body", "rows[3]"). */
static long parse_text(const char *buf, size_t len, const fsgd_rowfmt_t *fmt, const char *src, fsgd_csr_t *out,
                       fsgd_vw_extra_t *tags, char *err, size_t errsz)
{
    const fsgd_parse_ctx_t at = {.src = src, .first_line = 1};
    if (fmt && fmt->vw)
        return fsgd_vw_parse(buf, len, &fmt->vw_spec, &at, out, tags, err, errsz);
    if (fmt && fmt->hashed)
        return fsgd_delim_parse_rows(buf, len, &fmt->spec, src, 1, out, err, errsz);
    /* fsgd predict's: 1-based, strictly increasing, the model's hash bits */
    fsgd_libsvm_opts_t opts = {.hash_bits = fmt ? fmt->opts.hash_bits : 0};
    return fsgd_libsvm_parse(buf, len, &opts, &at, out, err, errsz);
}

/* {"line": "TEXT"} of row r: one row of the text body's format. */
static int json_line_row(const json_t *line, size_t r, const fsgd_rowfmt_t *fmt, fsgd_csr_t *out,
                         fsgd_vw_extra_t *tags, char *err, size_t errsz)
{
    if (!json_is_string(line))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].line: expected a string", r);
    const char *text = json_string_value(line);
    size_t n = json_string_length(line);
    if (memchr(text, '\n', n) || memchr(text, '\r', n) || memchr(text, '\0', n))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].line: one row: no line break or NUL", r);
    char src[48];
    snprintf(src, sizeof src, "rows[%zu]", r);
    long got = parse_text(text, n, fmt, src, out, tags, err, errsz);
    if (got < 0)
        return (int)got;
    if (got != 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu].line: an empty row", r);
    return 0;
}

static long parse_json(const char *body, size_t len, const fsgd_rowfmt_t *fmt, fsgd_csr_t *out,
                       fsgd_vw_extra_t *tags, char *err, size_t errsz)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "body:%d:%d: not JSON: %s", je.line, je.column, je.text);
    const json_t *rows = json_object_get(root, "rows");
    long rc;
    if (!json_is_array(rows)) {
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "body: expected an object {\"rows\": [...]}");
    } else if (json_array_size(rows) == 0) {
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "body: no rows");
    } else {
        row_buf_t b = {0};
        char *line = NULL;
        size_t line_cap = 0;
        rc = 0;
        for (size_t r = 0; r < json_array_size(rows) && rc >= 0; r++) {
            const json_t *row = json_array_get(rows, r);
            const json_t *text = json_is_object(row) ? json_object_get(row, "line") : NULL;
            if (!json_is_object(row))
                rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "rows[%zu]: expected an object", r);
            else if (text)
                rc = json_line_row(text, r, fmt, out, tags, err, errsz);
            else if (fmt && fmt->vw)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                  "rows[%zu]: a VW model reads {\"line\": \"...\"} rows (VW text)", r);
            else if (fmt && fmt->hashed)
                rc = json_fields_row(row, r, &fmt->spec, &line, &line_cap, out, err, errsz);
            else
                rc = json_sparse_row(row, r, fmt ? fmt->opts.hash_bits : 0, &b, out, err, errsz);
        }
        if (rc >= 0)
            rc = (long)json_array_size(rows);
        free(b.col);
        free(b.val);
        free(b.keys);
        free(line);
    }
    json_decref(root);
    return rc;
}

long fsgd_serve_rows_parse(const char *body, size_t len, fsgd_serve_body_t kind, const fsgd_rowfmt_t *fmt,
                           fsgd_csr_t *out, fsgd_vw_extra_t *tags, char *err, size_t errsz)
{
    if (kind == FSGD_SERVE_BODY_JSON)
        return parse_json(body, len, fmt, out, tags, err, errsz);
    long got = parse_text(body, len, fmt, "body", out, tags, err, errsz);
    if (got == 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "body: no rows");
    return got;
}
