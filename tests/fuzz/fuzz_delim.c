/* Fuzz target for the delimited-text reader (fsgd_delim_parse) under a few
 * specs (Criteo TSV, a small CSV with a header, 1-bit hashing, crosses). Checks
 * invariants, not just "no crash": the CSR is well formed (columns strictly
 * increasing and < 2^bits, values whole numbers >= 1 that add up to the
 * row's features), and errors name the source and line and say what was
 * expected. Crosses by name are resolved against the input's first line as
 * a header (fsgd_delim_crosses_by_name). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "fuzz_check.h"
#include "data_testing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const specs[] = {"criteo", "csv:skip,label,num,cat*2:header=1:bits=12", "tsv:label,cat*3:bits=1",
                                        "tsv:label,num,cat*3:bits=10:interactions=2*3,3*4*5"};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        fsgd_delim_spec_t spec;
        char err[512] = "";
        CHECK(fsgd_delim_spec_parse(specs[s], &spec, err, sizeof err) == 0);
        fsgd_csr_t m = {0};
        long n = fsgd_delim_parse((const char *)data, size, &spec, "fz", &m, err, sizeof err);
        if (n < 0) {
            CHECK(n == FSGD_E_PARSE || n == FSGD_E_NOMEM);
            CHECK(!strncmp(err, "fz:", 3));
            CHECK(strstr(err, "expected") || strstr(err, "more than"));
        } else {
            CHECK((size_t)n == m.n_rows);
        }
        CHECK(m.row_ptr && m.row_ptr[0] == 0 && m.row_ptr[m.n_rows] == m.nnz);
        for (size_t r = 0; r < m.n_rows; r++) {
            CHECK(isfinite(m.label[r]));
            double feats = 0;
            for (uint64_t j = m.row_ptr[r]; j < m.row_ptr[r + 1]; j++) {
                CHECK(m.col[j] < (UINT64_C(1) << spec.bits));
                if (j > m.row_ptr[r])
                    CHECK(m.col[j] > m.col[j - 1]);
                CHECK(m.val[j] >= 1 && m.val[j] == floorf(m.val[j]));
                feats += m.val[j];
            }
            CHECK(feats <= (double)spec.n_cols - 1 + spec.n_crosses); /* a feature a field, one a cross */
        }
        fsgd_csr_free(&m);
        /* crosses by name against the input's first line as a header: the
         * numbers written are the spec's columns, or the error names the term */
        char header[512], out[128];
        const char *nl = memchr(data, '\n', size);
        size_t hl = nl ? (size_t)(nl - (const char *)data) : size;
        hl = hl < sizeof header ? hl : sizeof header - 1;
        memcpy(header, data, hl);
        header[hl] = '\0';
        int rc = fsgd_delim_crosses_by_name(&spec, "C1*C2,age*I1,x*y*z,2*3", header, "fz", out, sizeof out, err,
                                            sizeof err);
        CHECK(rc == 0 || rc == FSGD_E_PARSE);
        if (rc == 0) {
            fsgd_delim_spec_t t = spec;
            t.n_crosses = 0;
            int arc = fsgd_delim_spec_add_crosses(&t, out, err, sizeof err);
            CHECK(arc == 0 || arc == FSGD_E_ARG);
        } else {
            CHECK(!strncmp(err, "interactions: '", 15) && strstr(err, "named '"));
        }
    }
    return 0;
}
