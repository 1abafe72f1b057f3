/* Fuzz target for the LIBSVM parser (fsgd_libsvm_parse), strict and
 * skip_bad, under several option sets, and the rows' copy into a binary
 * batch (as fsgd_libsvm_opts_t.binary keeps them). Checks invariants instead of just
 * "no crash": the CSR is well formed (row_ptr monotone, columns strictly
 * increasing and within max_col / max_dim, finite values and labels), strict
 * mode yields a prefix of what skip_bad yields, every line is accounted
 * for, and error messages name the source and say what was expected.
 * With row_weights ("label:weight"), one weight a row, each finite and
 * >= 0, the strict ones a prefix of the skip_bad ones. With fields
 * crosses, the same invariants on the crossed rows, and the counts of
 * feature and cross entries add up to the rows' entries before merging. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_csr(const fsgd_csr_t *m, const fsgd_libsvm_opts_t *o)
{
    CHECK(m->row_ptr && m->row_ptr[0] == 0);
    CHECK(m->row_ptr[m->n_rows] == m->nnz);
    uint64_t maxc = 0;
    for (size_t r = 0; r < m->n_rows; r++) {
        CHECK(m->row_ptr[r] <= m->row_ptr[r + 1]);
        CHECK(isfinite(m->label[r]));
        for (uint64_t j = m->row_ptr[r]; j < m->row_ptr[r + 1]; j++) {
            CHECK(isfinite(m->val[j]));
            if (j > m->row_ptr[r])
                CHECK(m->col[j] > m->col[j - 1]);
            if (o->max_dim)
                CHECK(m->col[j] < o->max_dim);
            if ((uint64_t)m->col[j] + 1 > maxc)
                maxc = (uint64_t)m->col[j] + 1;
        }
    }
    CHECK(maxc == m->max_col);
}

/* The rows appended to a binary batch (fsgd/csr.h), a row, then two,
 * three... at a time, as the threaded reader appends its parts: the same
 * rows, values 1 where the batch held none, and values only once a row had
 * one other than 1. */
static void check_binary_copy(const fsgd_csr_t *m)
{
    fsgd_csr_t b;
    CHECK(fsgd_csr_init_binary(&b, 0, 0) == 0);
    for (size_t r = 0, k = 1; r < m->n_rows; r += k, k++)
        CHECK(fsgd_csr_append_rows(&b, m, r, m->n_rows - r < k ? m->n_rows - r : k) == 0);
    CHECK(b.n_rows == m->n_rows && b.nnz == m->nnz && b.max_col == m->max_col);
    CHECK((b.val == NULL) == (fsgd_csr_all_ones(m) != 0));
    CHECK(!memcmp(b.row_ptr, m->row_ptr, (m->n_rows + 1) * sizeof *m->row_ptr));
    for (size_t i = 0; i < m->nnz; i++)
        CHECK(b.col[i] == m->col[i] && (b.val ? b.val[i] : 1.0f) == m->val[i]);
    fsgd_csr_free(&b);
}

static size_t count_lines(const uint8_t *d, size_t n)
{
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += d[i] == '\n';
    return lines + (n > 0 && d[n - 1] != '\n');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    fsgd_libsvm_opts_t sets[6] = {
        {0}, {.zero_based = 1}, {.allow_unsorted = 1}, {.max_dim = 100}, {.row_weights = 1, .hash_bits = 6}, {.hash_bits = 8}};
    /* fields crosses (fsgd/libsvm_fields.h): pairs, a field with itself, a triple and every pair */
    char ferr[256];
    CHECK(fsgd_libsvm_fields_parse(&sets[5].fields, "a:1-3,b:4-9,c:10,a:20-30", ferr, sizeof ferr) == 0);
    CHECK(fsgd_libsvm_fields_add_terms(&sets[5].fields, "ab,aa,abc,::", ferr, sizeof ferr) == 0);
    for (int s = 0; s < 6; s++) {
        fsgd_csr_t strict = {0}, skip = {0};
        fsgd_libsvm_stats_t st1 = {0}, st2 = {0};
        fsgd_libsvm_weights_t w1 = {0}, w2 = {0};
        char err[512] = "";
        fsgd_libsvm_opts_t o = sets[s];
        if (o.row_weights)
            o.weights = &w1;
        long n1 = fsgd_libsvm_parse(buf, size, &o, &(fsgd_parse_ctx_t){.src = "fz", .first_line = 1, .stats = &st1},
                                    &strict, err, sizeof err);
        if (o.fields.n_terms)
            CHECK(st1.feature_entries + st1.cross_entries >= strict.nnz);
        if (n1 < 0) {
            CHECK(n1 == FSGD_E_PARSE || n1 == FSGD_E_RANGE);
            CHECK(!strncmp(err, "fz:", 3) && strstr(err, ": expected ") != NULL);
            CHECK(st1.lines >= 1);
        } else {
            CHECK((uint64_t)n1 == st1.rows && st1.lines == count_lines(data, size) && st1.bytes == size);
        }
        check_csr(&strict, &o);
        o.skip_bad = 1;
        if (o.row_weights)
            o.weights = &w2;
        long n2 = fsgd_libsvm_parse(buf, size, &o, &(fsgd_parse_ctx_t){.src = "fz", .first_line = 1, .stats = &st2},
                                    &skip, err, sizeof err);
        CHECK(n2 >= 0 && (uint64_t)n2 == st2.rows && st2.bytes == size);
        CHECK(st2.lines == count_lines(data, size));
        CHECK(st2.rows + st2.bad_rows <= st2.lines);
        CHECK((n1 < 0) == (st2.bad_rows > 0));
        for (uint64_t i = 0; i < st2.bad_rows && i < FSGD_LIBSVM_BAD_KEPT; i++)
            CHECK(!strncmp(st2.first_bad[i], "fz:", 3));
        check_csr(&skip, &o);
        /* Strict rows are a prefix of the skip_bad rows. */
        CHECK(strict.n_rows <= skip.n_rows && strict.nnz <= skip.nnz);
        CHECK(!memcmp(strict.row_ptr, skip.row_ptr, (strict.n_rows + 1) * sizeof *strict.row_ptr));
        if (strict.n_rows)
            CHECK(!memcmp(strict.label, skip.label, strict.n_rows * sizeof *strict.label));
        if (strict.nnz) {
            CHECK(!memcmp(strict.col, skip.col, strict.nnz * sizeof *strict.col));
            CHECK(!memcmp(strict.val, skip.val, strict.nnz * sizeof *strict.val));
        }
        if (o.row_weights) {
            CHECK(w1.n == strict.n_rows && w2.n == skip.n_rows);
            for (size_t i = 0; i < w2.n; i++)
                CHECK(isfinite(w2.w[i]) && w2.w[i] >= 0 && (i >= w1.n || w1.w[i] == w2.w[i]));
            int any = 0;
            for (size_t i = 0; i < w2.n; i++)
                any |= w2.w[i] != 1;
            CHECK(any == w2.any);
        }
        fsgd_libsvm_weights_free(&w1);
        fsgd_libsvm_weights_free(&w2);
        check_binary_copy(&skip);
        fsgd_csr_free(&strict);
        fsgd_csr_free(&skip);
    }
    return 0;
}
