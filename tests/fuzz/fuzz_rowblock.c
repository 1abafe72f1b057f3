/* Fuzz target: row blocks (fsgd/rowblock.h), the binary NAME.data messages
 * every worker and the aggregator decode, from any client.
 *
 * Input byte 0:
 *   bit 0  the job's format id is LIBSVM's (else a hashed spec's)
 *   bit 1  out already holds a row (rows are appended)
 *   bit 2  the rest builds rows (label byte, nnz byte, gap bytes, value
 *          bytes) that are encoded and must decode exactly; else the rest
 *          is a message of any client, decoded as it is.
 * Checks what rowblock.h promises, not just "no crash": a decoded block
 * appends well-formed rows (columns strictly increasing, finite labels and
 * values, max_col right) and re-encodes to a fixed point; a refused one
 * leaves out as it was and names the source, "row block" and a byte. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/rowblock.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SRC "topic t.data partition 2 offset 17"

static void check_csr(const fsgd_csr_t *m)
{
    CHECK(m->row_ptr && m->row_ptr[0] == 0 && m->row_ptr[m->n_rows] == m->nnz);
    uint64_t maxc = 0;
    for (size_t r = 0; r < m->n_rows; r++) {
        CHECK(m->row_ptr[r] <= m->row_ptr[r + 1]);
        CHECK(isfinite(m->label[r]));
        for (uint64_t j = m->row_ptr[r]; j < m->row_ptr[r + 1]; j++) {
            CHECK(isfinite(m->val[j]));
            if (j > m->row_ptr[r])
                CHECK(m->col[j] > m->col[j - 1]);
            if ((uint64_t)m->col[j] + 1 > maxc)
                maxc = (uint64_t)m->col[j] + 1;
        }
    }
    CHECK(maxc == m->max_col);
}

static int same_rows(const fsgd_csr_t *a, size_t fa, const fsgd_csr_t *b, size_t fb, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t a0 = a->row_ptr[fa + i], a1 = a->row_ptr[fa + i + 1];
        uint64_t b0 = b->row_ptr[fb + i], b1 = b->row_ptr[fb + i + 1];
        if (a1 - a0 != b1 - b0 || memcmp(&a->label[fa + i], &b->label[fb + i], sizeof *a->label))
            return 0;
        if (a1 > a0 && (memcmp(a->col + a0, b->col + b0, (a1 - a0) * sizeof *a->col) ||
                        memcmp(a->val + a0, b->val + b0, (a1 - a0) * sizeof *a->val)))
            return 0;
    }
    return 1;
}

/* Rows from bytes: per row a label byte, an nnz byte (mod 16), per nonzero
 * a gap byte and, when the label byte is odd, a value byte. */
static void build_rows(const uint8_t *p, size_t n, fsgd_csr_t *m)
{
    const uint8_t *e = p + n;
    while (e - p >= 2) {
        uint8_t lb = *p++, k = *p++ % 16;
        uint32_t col[16];
        float val[16];
        size_t got = 0;
        uint64_t c = lb & 0x80 ? UINT32_MAX - 40 : 0; /* rows near the top column too */
        for (; got < k && p < e; got++) {
            c += (uint64_t)*p++ + (got ? 1 : 0);
            if (c > UINT32_MAX)
                break;
            col[got] = (uint32_t)c;
            val[got] = (lb & 1) && p < e ? (float)((int)*p++ - 128) / 8.0f : 1.0f;
        }
        CHECK(fsgd_csr_append_row(m, (double)((int)lb - 100) / 3.0, col, val, got) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned mode = data[0];
    const uint32_t id = fsgd_rowblock_format_id(mode & 1 ? "" : "tsv:label,cat*2:header=0:bits=16:seed=0");
    fsgd_csr_t out = {0};
    static const uint32_t pcol[1] = {5};
    static const float pval[1] = {2};
    const size_t base = mode & 2 ? 1 : 0;
    if (base)
        CHECK(fsgd_csr_append_row(&out, 7, pcol, pval, 1) == 0);
    char err[512] = "";

    if (mode & 4) {
        fsgd_csr_t rows = {0};
        build_rows(data + 1, size - 1, &rows);
        CHECK(fsgd_csr_reserve(&rows, 0, 0) == 0);
        size_t cap = fsgd_rowblock_bound(&rows, 0, rows.n_rows);
        uint8_t *blk = malloc(cap);
        CHECK(blk);
        size_t len = fsgd_rowblock_encode(&rows, 0, rows.n_rows, id, blk);
        CHECK(len <= cap && fsgd_rowblock_is(blk, len));
        long n = fsgd_rowblock_decode(blk, len, id, SRC, &out, err, sizeof err);
        CHECK(n == (long)rows.n_rows && out.n_rows == base + rows.n_rows);
        CHECK(same_rows(&out, base, &rows, 0, rows.n_rows));
        check_csr(&out);
        /* another format's id: refused whole */
        size_t r0 = out.n_rows;
        CHECK(fsgd_rowblock_decode(blk, len, id ^ 1, SRC, &out, err, sizeof err) == FSGD_E_FORMAT);
        CHECK(out.n_rows == r0 && strstr(err, "another format"));
        free(blk);
        fsgd_csr_free(&rows);
        fsgd_csr_free(&out);
        return 0;
    }

    const uint8_t *buf = data + 1;
    const size_t len = size - 1;
    long n = fsgd_rowblock_decode(buf, len, id, SRC, &out, err, sizeof err);
    if (n < 0) {
        CHECK(n == FSGD_E_FORMAT);
        CHECK(!strncmp(err, SRC ": row block: ", strlen(SRC ": row block: ")) && strstr(err, " at byte "));
        CHECK(out.n_rows == base && out.nnz == base && out.max_col == (base ? 6u : 0u));
        if (base)
            CHECK(out.row_ptr[1] == 1 && out.col[0] == 5 && out.val[0] == 2 && out.label[0] == 7);
    } else {
        CHECK(fsgd_rowblock_is(buf, len) && out.n_rows == base + (size_t)n);
        check_csr(&out);
        /* the decoded rows re-encode to a block that decodes to them again */
        size_t cap = fsgd_rowblock_bound(&out, base, (size_t)n);
        uint8_t *blk = malloc(cap);
        CHECK(blk);
        size_t l2 = fsgd_rowblock_encode(&out, base, (size_t)n, id, blk);
        CHECK(l2 <= cap && l2 <= len); /* a writer's block is never larger than any that decodes the same */
        fsgd_csr_t again = {0};
        CHECK(fsgd_rowblock_decode(blk, l2, id, NULL, &again, err, sizeof err) == n);
        CHECK(same_rows(&again, 0, &out, base, (size_t)n));
        fsgd_csr_free(&again);
        free(blk);
    }
    fsgd_csr_free(&out);
    return 0;
}
