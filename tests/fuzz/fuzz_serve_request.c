/* Fuzz target for fsgd serve's request bodies (fsgd_serve_rows_parse): the
 * first byte picks the body kind (text or JSON) and the model's input
 * (LIBSVM, Criteo TSV hashed into 2^12 columns, a small CSV spec, LIBSVM
 * hashed into 2^8 columns, VW text with a cross); the rest is the body. Checks invariants, not just "no crash": a success returns
 * the rows it appended (at least one) as a well-formed CSR (row_ptr
 * monotone, columns strictly increasing and below 2^bits when hashed,
 * finite values); a failure is an fsgd error whose message names where in
 * the body ("body:..." or "rows[...]"). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "fsgd/serve_rows.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    fsgd_serve_body_t kind = (mode & 1) ? FSGD_SERVE_BODY_JSON : FSGD_SERVE_BODY_TEXT;
    static const char *const specs[] = {NULL, "tsv:label,num*13,cat*26:bits=12", "csv:label,num,cat*2,skip:bits=10:seed=3",
                                        "libsvm:bits=8", "vw:bits=10:interactions=ab"};
    const char *spec_text = specs[(mode >> 1) % 5];
    fsgd_rowfmt_t spec;
    char err[1024];
    if (spec_text)
        CHECK(fsgd_rowfmt_init(&spec, spec_text, 0, 0, err, sizeof err) == 0);
    /* The body in a buffer of its own size, so reads past it are caught. */
    size_t len = size - 1;
    char *body = malloc(len ? len : 1);
    CHECK(body);
    memcpy(body, data + 1, len);
    unsigned bits = !spec_text ? 0 : spec.vw ? spec.vw_spec.bits : spec.hashed ? spec.spec.bits : spec.opts.hash_bits;
    fsgd_csr_t out = {0};
    fsgd_vw_extra_t tags = {0};
    err[0] = 0;
    long got = fsgd_serve_rows_parse(body, len, kind, spec_text ? &spec : NULL, &out, &tags, err, sizeof err);
    if (got > 0) {
        CHECK((size_t)got == out.n_rows);
        CHECK(spec_text && spec.vw ? tags.n == out.n_rows : tags.n == 0);
        CHECK(out.row_ptr[0] == 0 && out.row_ptr[out.n_rows] == out.nnz);
        for (size_t r = 0; r < out.n_rows; r++) {
            CHECK(out.row_ptr[r] <= out.row_ptr[r + 1]);
            CHECK(isfinite(out.label[r]));
            for (uint64_t j = out.row_ptr[r]; j < out.row_ptr[r + 1]; j++) {
                CHECK(!out.val || isfinite(out.val[j]));
                if (j > out.row_ptr[r])
                    CHECK(out.col[j] > out.col[j - 1]);
                if (bits)
                    CHECK(bits == 32 || out.col[j] < (1u << bits));
            }
        }
    } else {
        CHECK(got < 0 && got != 0);
        CHECK(got == FSGD_E_NOMEM || !strncmp(err, "body", 4) || !strncmp(err, "rows[", 5));
    }
    fsgd_csr_free(&out);
    fsgd_vw_extra_free(&tags);
    free(body);
    return 0;
}
