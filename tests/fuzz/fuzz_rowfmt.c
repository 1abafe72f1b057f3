/* Fuzz target for a job's row parser on buffers (fsgd_rowfmt_parse), the
 * path every Kafka data-topic message value takes, from any client.
 *
 * Input: byte 0 picks the case, byte 1 the first line number, the rest is
 * the buffer.
 *   byte 0 bits 0-1  format: libsvm | criteo | "csv:label,num,cat*3" |
 *                    "tsv:skip,label,num*2,cat*2:header=1:bits=16"
 *          bit 2     stats NULL in the strict run (rowfmt.h: "may be NULL")
 *          bit 3     out already holds a row (rows are appended)
 *          bit 4     src NULL (errors then name "<buffer>")
 *          bit 5     hash_bits 2 for the hashed formats (collisions: values 2..)
 *          bit 6     libsvm: "libsvm:row_weights=1" (label:weight rows, weighted in
 *                    their labels, rows of weight 0 dropped and not counted);
 *                    criteo: "criteo:class_weight=2,0.5" (class weights in the labels)
 * Every buffer is parsed strict and with skip_bad. Checks what rowfmt.h,
 * delim.h and libsvm.h promise, not just "no crash":
 *   - the return is the rows appended; rows already in out stay as they were;
 *     the CSR is well formed (columns strictly increasing, < 2^bits when
 *     hashed, finite labels and values, max_col right);
 *   - an error names src and a line of the buffer numbered from first_line,
 *     and says what was expected; skip_bad never fails, counts malformed rows
 *     (bad_rows, first_bad named the same way) exactly when strict fails, and
 *     strict's rows are a prefix of skip_bad's;
 *   - a spec's header=1 changes nothing in a buffer (no header is looked for);
 *   - a label or num field holding a NUL byte is not a number. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/rowfmt.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SRC "topic t.data partition 2 offset 17"

static const char *const formats[4] = {"libsvm", "criteo", "csv:label,num,cat*3",
                                       "tsv:skip,label,num*2,cat*2:header=1:bits=16"};
/* formats[3] without the header: a buffer must parse the same under both. */
static const char *const tsv_no_header = "tsv:skip,label,num*2,cat*2:header=0:bits=16";

static size_t count_lines(const char *d, size_t n)
{
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += d[i] == '\n';
    return lines + (n > 0 && d[n - 1] != '\n');
}

/* msg is "<src>:<line>[:col]: ..." with line in [first, first + lines). */
static void check_where(const char *msg, const char *src, uint64_t first, size_t lines)
{
    size_t k = strlen(src);
    CHECK(!strncmp(msg, src, k) && msg[k] == ':');
    char *end;
    unsigned long long line = strtoull(msg + k + 1, &end, 10);
    CHECK(end > msg + k + 1 && *end == ':');
    CHECK(line >= first && line - first < lines);
}

static void check_csr(const fsgd_csr_t *m, const fsgd_rowfmt_t *f)
{
    CHECK(m->row_ptr && m->row_ptr[0] == 0 && m->row_ptr[m->n_rows] == m->nnz);
    size_t feats_max = 0;
    if (f->hashed)
        for (size_t c = 0; c < f->spec.n_cols; c++)
            feats_max += f->spec.kind[c] == FSGD_COL_NUM || f->spec.kind[c] == FSGD_COL_CAT;
    uint64_t maxc = 0;
    for (size_t r = 0; r < m->n_rows; r++) {
        CHECK(m->row_ptr[r] <= m->row_ptr[r + 1]);
        CHECK(isfinite(m->label[r]));
        double feats = 0;
        for (uint64_t j = m->row_ptr[r]; j < m->row_ptr[r + 1]; j++) {
            CHECK(isfinite(m->val[j]));
            if (j > m->row_ptr[r])
                CHECK(m->col[j] > m->col[j - 1]);
            if (f->hashed) {
                CHECK(m->col[j] < (UINT64_C(1) << f->spec.bits));
                CHECK(m->val[j] >= 1 && m->val[j] == floorf(m->val[j]));
                feats += m->val[j];
            }
            if ((uint64_t)m->col[j] + 1 > maxc)
                maxc = (uint64_t)m->col[j] + 1;
        }
        if (f->hashed)
            CHECK(feats <= (double)feats_max);
    }
    CHECK(maxc == m->max_col);
}

/* Rows [from, a->n_rows) of a equal rows [from, from + count) of b. */
static int same_rows(const fsgd_csr_t *a, const fsgd_csr_t *b, size_t from, size_t count)
{
    if (a->n_rows < from + count || b->n_rows < from + count)
        return 0;
    uint64_t j0 = a->row_ptr[from], j1 = a->row_ptr[from + count];
    if (b->row_ptr[from] != j0 || b->row_ptr[from + count] != j1)
        return 0;
    for (size_t r = from; r <= from + count; r++)
        if (a->row_ptr[r] != b->row_ptr[r])
            return 0;
    if (count && memcmp(a->label + from, b->label + from, count * sizeof *a->label))
        return 0;
    if (j1 > j0 && (memcmp(a->col + j0, b->col + j0, (j1 - j0) * sizeof *a->col) ||
                    memcmp(a->val + j0, b->val + j0, (j1 - j0) * sizeof *a->val)))
        return 0;
    return 1;
}

/* A field of a label or num column with a NUL byte in it is not a number:
 * a line that has one gives no row. */
static void check_nul_fields(const fsgd_rowfmt_t *f, const char *buf, size_t len, uint64_t first)
{
    const char *p = buf, *e = buf + len;
    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        size_t field = 0;
        int nul = 0;
        for (const char *q = p; field < f->spec.n_cols;) {
            const char *s = memchr(q, f->spec.sep, (size_t)(le - q));
            const char *fe = s ? s : le;
            int k = f->spec.kind[field];
            if ((k == FSGD_COL_LABEL || k == FSGD_COL_NUM) && memchr(q, '\0', (size_t)(fe - q)))
                nul = 1;
            field++;
            if (!s)
                break;
            q = s + 1;
        }
        if (nul) {
            fsgd_csr_t m = {0};
            char err[512] = "";
            const fsgd_parse_ctx_t at = {.src = SRC, .first_line = first};
            long n = fsgd_rowfmt_parse(f, p, (size_t)(le - p), &at, &m, err, sizeof err);
            CHECK(n < 0 && m.n_rows == 0);
            fsgd_csr_free(&m);
        }
        p = nl ? nl + 1 : e;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const unsigned mode = data[0];
    const uint64_t first = data[1] < 200 ? (uint64_t)data[1] + 1 : (uint64_t)(data[1] - 199) << 40;
    const char *buf = (const char *)data + 2;
    const size_t len = size - 2, lines = count_lines(buf, len);
    const int fmt = mode & 3, hashed = fmt != 0;
    const int hash_bits = hashed && (mode & 32) ? 2 : 0;
    const char *src = mode & 16 ? NULL : SRC, *named = src ? src : "<buffer>";

    fsgd_rowfmt_t f[2];
    char err[512] = "";
    for (int skip = 0; skip < 2; skip++)
        CHECK(fsgd_rowfmt_init(&f[skip],
                               !(mode & 64) || fmt > 1 ? formats[fmt]
                               : fmt                   ? "criteo:class_weight=2,0.5"
                                                       : "libsvm:row_weights=1",
                               hash_bits, skip, err, sizeof err) == 0 &&
              f[skip].hashed == hashed);

    fsgd_csr_t out[2] = {{0}, {0}};
    fsgd_libsvm_stats_t st[2];
    long n[2];
    char errs[2][512];
    const size_t base = mode & 8 ? 1 : 0;
    static const uint32_t pcol[1] = {1};
    static const float pval[1] = {1};
    for (int skip = 0; skip < 2; skip++) {
        memset(&st[skip], 0, sizeof st[skip]);
        if (base)
            CHECK(fsgd_csr_append_row(&out[skip], 7, pcol, pval, 1) == 0);
        strcpy(errs[skip], "");
        fsgd_libsvm_stats_t *sp = !skip && (mode & 4) ? NULL : &st[skip];
        const fsgd_parse_ctx_t at = {.src = src, .first_line = first, .stats = sp};
        n[skip] = fsgd_rowfmt_parse(&f[skip], buf, len, &at, &out[skip], errs[skip], sizeof errs[skip]);
        fsgd_csr_t *m = &out[skip];
        check_csr(m, &f[skip]);
        CHECK(m->n_rows >= base);
        if (base)
            CHECK(m->row_ptr[1] == 1 && m->col[0] == 1 && m->val[0] == 1 && m->label[0] == 7);
        if (n[skip] >= 0) {
            CHECK(m->n_rows == base + (size_t)n[skip]);
            CHECK((size_t)n[skip] <= lines);
            if (sp)
                CHECK(sp->rows == (uint64_t)n[skip]);
        } else {
            CHECK(!skip);
            CHECK(n[skip] == FSGD_E_PARSE || n[skip] == FSGD_E_RANGE);
            check_where(errs[skip], named, first, lines);
            CHECK(strstr(errs[skip], "expected") || strstr(errs[skip], "more than"));
        }
    }

    /* skip_bad: the malformed rows counted exactly when strict fails, and named. */
    CHECK(st[1].rows + st[1].bad_rows <= lines);
    CHECK((n[0] < 0) == (st[1].bad_rows > 0));
    for (uint64_t i = 0; i < st[1].bad_rows && i < FSGD_LIBSVM_BAD_KEPT; i++) {
        check_where(st[1].first_bad[i], named, first, lines);
        CHECK(strlen(st[1].first_bad[i]) < sizeof st[1].first_bad[i]);
    }
    /* Strict rows (up to its error) are a prefix of skip_bad's. */
    CHECK(out[0].n_rows <= out[1].n_rows);
    CHECK(same_rows(&out[0], &out[1], 0, out[0].n_rows));

    /* A header is never looked for in a buffer: header=1 parses as header=0. */
    if (fmt == 3) {
        fsgd_rowfmt_t g;
        CHECK(fsgd_rowfmt_init(&g, tsv_no_header, hash_bits, 0, err, sizeof err) == 0);
        fsgd_csr_t m = {0};
        char e2[512] = "";
        if (base)
            CHECK(fsgd_csr_append_row(&m, 7, pcol, pval, 1) == 0);
        const fsgd_parse_ctx_t at = {.src = src, .first_line = first};
        long k = fsgd_rowfmt_parse(&g, buf, len, &at, &m, e2, sizeof e2);
        CHECK(k == n[0] && m.n_rows == out[0].n_rows && same_rows(&m, &out[0], 0, m.n_rows));
        if (k < 0)
            CHECK(!strcmp(e2, errs[0]));
        fsgd_csr_free(&m);
    }
    if (hashed)
        check_nul_fields(&f[0], buf, len, first);

    fsgd_csr_free(&out[0]);
    fsgd_csr_free(&out[1]);
    return 0;
}
