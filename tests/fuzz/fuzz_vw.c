/* Fuzz target for the Vowpal Wabbit line parser (fsgd_vw_parse), strict and
 * skip_bad, with and without crosses. Checks invariants, not just "no
 * crash": the CSR is well formed (row_ptr monotone, columns strictly
 * increasing and below 2^bits, finite values and labels), weights and tags
 * come one a row with finite weights >= 0, strict mode yields a prefix of
 * what skip_bad yields, a binary batch (values 1 until one is not) takes the
 * same rows, and errors name the source. The first input byte
 * picks the spec. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/vw.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const fsgd_csr_t *m, const fsgd_vw_extra_t *x, unsigned bits)
{
    CHECK(m->row_ptr && m->row_ptr[0] == 0 && m->row_ptr[m->n_rows] == m->nnz);
    CHECK(x->n == m->n_rows);
    for (size_t r = 0; r < m->n_rows; r++) {
        CHECK(m->row_ptr[r] <= m->row_ptr[r + 1]);
        CHECK(isfinite(m->label[r]));
        CHECK(isfinite(x->weight[r]) && x->weight[r] >= 0);
        CHECK(x->tag_end[r] >= (r ? x->tag_end[r - 1] : 0) && x->tag_end[r] <= x->tags_len);
        for (uint64_t j = m->row_ptr[r]; j < m->row_ptr[r + 1]; j++) {
            CHECK(bits >= 32 || m->col[j] < (1u << bits));
            CHECK(m->col[j] < m->max_col);
            if (j > m->row_ptr[r])
                CHECK(m->col[j] > m->col[j - 1]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *specs[] = {"vw", "vw:bits=4", "vw:bits=12:interactions=ab,abc,::", "vw:bits=32:seed=9:ignore=a",
                                  "vw:bits=8:keep=b:interactions=bb"};
    if (size == 0)
        return 0;
    const char *spec = specs[data[0] % 5];
    data++;
    size--;
    fsgd_vw_spec_t s;
    char err[512];
    CHECK(fsgd_vw_spec_parse(spec, &s, err, sizeof err) == 0);
    fsgd_csr_t strict = {0}, lax = {0};
    fsgd_vw_extra_t xs = {0}, xl = {0};
    const fsgd_parse_ctx_t strict_at = {.src = "fz", .first_line = 1};
    long a = fsgd_vw_parse((const char *)data, size, &s, &strict_at, &strict, &xs, err, sizeof err);
    if (a < 0)
        CHECK(!strncmp(err, "fz:", 3) && (a == FSGD_E_PARSE || a == FSGD_E_RANGE || a == FSGD_E_NOMEM));
    fsgd_libsvm_stats_t st = {0};
    const fsgd_parse_ctx_t lax_at = {.src = "fz", .first_line = 1, .skip_bad = 1, .stats = &st};
    long b = fsgd_vw_parse((const char *)data, size, &s, &lax_at, &lax, &xl, err, sizeof err);
    CHECK(b >= 0 || b == FSGD_E_NOMEM);
    check(&strict, &xs, s.bits);
    if (b >= 0) {
        check(&lax, &xl, s.bits);
        CHECK((uint64_t)b == st.rows);
        CHECK(strict.n_rows <= lax.n_rows);
        /* the rows before the first bad one are the same */
        CHECK(!strict.n_rows || (strict.nnz <= lax.nnz && !memcmp(strict.col, lax.col, strict.nnz * sizeof *strict.col)));
        if (a >= 0)
            CHECK(st.bad_rows == 0 && (size_t)a == lax.n_rows);
        /* into a binary batch: the same rows, values 1 while it has none */
        fsgd_csr_t bin;
        if (fsgd_csr_init_binary(&bin, 0, 0) == 0) {
            const fsgd_parse_ctx_t bin_at = {.src = "fz", .first_line = 1, .skip_bad = 1};
            long c = fsgd_vw_parse((const char *)data, size, &s, &bin_at, &bin, NULL, err, sizeof err);
            if (c >= 0) {
                CHECK(c == b && bin.nnz == lax.nnz && !memcmp(bin.col, lax.col, lax.nnz * sizeof *lax.col));
                CHECK(!memcmp(bin.row_ptr, lax.row_ptr, (lax.n_rows + 1) * sizeof *lax.row_ptr));
                for (size_t j = 0; j < lax.nnz; j++)
                    CHECK((bin.val ? bin.val[j] : 1.0f) == lax.val[j]);
            }
            fsgd_csr_free(&bin);
        }
    }
    fsgd_csr_free(&strict);
    fsgd_csr_free(&lax);
    fsgd_vw_extra_free(&xs);
    fsgd_vw_extra_free(&xl);
    return 0;
}
