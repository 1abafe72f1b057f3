/* Row blocks (fsgd/rowblock.h) as the readers of NAME.data meet them
 * (fsgd_rowfmt_parse_msg): a block holds exactly the rows the text parser
 * gives for the same lines, LIBSVM and hashed; text messages still parse;
 * a block of another format or a damaged one is refused whole (or, with
 * skip_bad, skipped as one bad row); the producer's block size rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/rowblock.h"
#include "fsgd/rowfmt.h"
#include "testlib.h"

static int same_csr(const fsgd_csr_t *a, const fsgd_csr_t *b)
{
    return a->n_rows == b->n_rows && a->nnz == b->nnz && a->max_col == b->max_col &&
           !memcmp(a->row_ptr, b->row_ptr, (a->n_rows + 1) * sizeof *a->row_ptr) &&
           !memcmp(a->label, b->label, a->n_rows * sizeof *a->label) &&
           (!a->nnz || (!memcmp(a->col, b->col, a->nnz * sizeof *a->col) &&
                        !memcmp(a->val, b->val, a->nnz * sizeof *a->val)));
}

/* text through the parser, then the same rows as a block: identical CSR */
static void roundtrip(const char *format, const char *text)
{
    fsgd_rowfmt_t f;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, format, 0, 0, err, sizeof err), 0);
    fsgd_csr_t parsed = {0}, decoded = {0};
    long n = fsgd_rowfmt_parse(&f, text, strlen(text), FSGD_TEST_AT("text", NULL), &parsed, err, sizeof err);
    if (n <= 0)
        fprintf(stderr, "\n  %s: %s\n", format, err);
    CU_ASSERT_TRUE_FATAL(n > 0);
    uint8_t *blk = malloc(fsgd_rowblock_bound(&parsed, 0, parsed.n_rows));
    size_t len = fsgd_rowblock_encode(&parsed, 0, parsed.n_rows, f.block_id, blk);
    CU_ASSERT_TRUE(fsgd_rowblock_is(blk, len));
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse_msg(&f, blk, len, "blk", &decoded, NULL, err, sizeof err), n);
    CU_ASSERT_TRUE(same_csr(&parsed, &decoded));
    /* the text itself is still a message any client may write */
    fsgd_csr_t again = {0};
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse_msg(&f, text, strlen(text), "txt", &again, NULL, err, sizeof err), n);
    CU_ASSERT_TRUE(same_csr(&parsed, &again));
    free(blk);
    fsgd_csr_free(&parsed);
    fsgd_csr_free(&decoded);
    fsgd_csr_free(&again);
}

static void test_same_rows_as_text(void)
{
    roundtrip("libsvm", "1 3:1 7:1 4000000000:1\n-1 2:0.25 9:-3.5e-7\n0\n+1 1:1e30 2:1\n");
    roundtrip("tsv:label,num*2,cat*3:bits=16", "1\t5\t\ta1\tb2\t\n0\t\t7\t\tq\tz\n");
    roundtrip("csv:label,num,cat*2:bits=12", "1,2.5,x,y\n0,,a,\n");
}

static void test_refused_whole(void)
{
    fsgd_rowfmt_t lib, cri, skip;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&lib, "libsvm", 0, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&cri, "criteo", 0, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&skip, "libsvm", 0, 1, err, sizeof err), 0);
    CU_ASSERT_NOT_EQUAL(lib.block_id, cri.block_id);
    fsgd_rowfmt_t cri20;
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&cri20, "criteo", 20, 0, err, sizeof err), 0);
    CU_ASSERT_NOT_EQUAL(cri.block_id, cri20.block_id); /* another hash width */

    fsgd_csr_t rows = {0}, out = {0};
    const char *text = "1 3:1 7:2\n-1 2:1\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_parse(&lib, text, strlen(text), FSGD_TEST_AT("t", NULL), &rows, err, sizeof err),
                          2);
    uint8_t blk[256];
    CU_ASSERT_TRUE_FATAL(fsgd_rowblock_bound(&rows, 0, 2) <= sizeof blk);
    size_t len = fsgd_rowblock_encode(&rows, 0, 2, lib.block_id, blk);
    static const uint32_t c0[1] = {1};
    static const float v0[1] = {1};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&out, 1, c0, v0, 1), 0);

    /* written for LIBSVM, read by a criteo job */
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse_msg(&cri, blk, len, "topic x.data partition 1 offset 9", &out, NULL, err,
                                          sizeof err),
                    FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "topic x.data partition 1 offset 9: row block: written for another format");
    CU_ASSERT_EQUAL(out.n_rows, 1);
    /* every truncation is refused, the rows before it left as they were */
    for (size_t cut = 0; cut < len; cut++) {
        long n = fsgd_rowfmt_parse_msg(&lib, blk, cut, "p", &out, NULL, err, sizeof err);
        if (cut >= 4) { /* the magic is there: a block, refused */
            CU_ASSERT_EQUAL(n, FSGD_E_FORMAT);
        } else {
            CU_ASSERT_TRUE(n <= 0); /* a few bytes of no row, or a parse error */
        }
        CU_ASSERT_EQUAL(out.n_rows, 1);
        CU_ASSERT_EQUAL(out.nnz, 1);
        CU_ASSERT_EQUAL(out.max_col, 2);
    }
    /* a non-finite value is refused as the text parser refuses it */
    uint8_t bad[256];
    memcpy(bad, blk, len);
    memset(bad + FSGD_ROWBLOCK_HEADER + 1, 0xFF, 8); /* row 0's label (after the 1-byte row count): a NaN */
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse_msg(&lib, bad, len, "p", &out, NULL, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "label is not a finite number");
    /* bytes after the last row */
    memcpy(bad, blk, len);
    bad[len] = 0;
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse_msg(&lib, bad, len + 1, "p", &out, NULL, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "1 bytes after the last row");
    /* skip_bad: a damaged block is one bad row, skipped whole */
    fsgd_libsvm_stats_t st = {0};
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse_msg(&skip, blk, len - 1, "q", &out, &st, err, sizeof err), 0);
    CU_ASSERT_EQUAL(st.bad_rows, 1);
    FSGD_ASSERT_CONTAINS(st.first_bad[0], "q: row block: ");
    CU_ASSERT_EQUAL(out.n_rows, 1);
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse_msg(&skip, blk, len, "q", &out, &st, err, sizeof err), 2);
    CU_ASSERT_EQUAL(st.rows, 2);
    CU_ASSERT_EQUAL(out.n_rows, 3);
    fsgd_csr_free(&rows);
    fsgd_csr_free(&out);
}

static void test_block_rows_rule(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    job.train.batch = 256;
    CU_ASSERT_EQUAL(fsgd_produce_block_rows(FSGD_JOB_DIST(&job), 12), 21); /* a step: one message a partition */
    CU_ASSERT_EQUAL(fsgd_produce_block_rows(FSGD_JOB_DIST(&job), 400), 1);
    job.train.batch = 1e6;
    CU_ASSERT_EQUAL(fsgd_produce_block_rows(FSGD_JOB_DIST(&job), 2), FSGD_PRODUCE_BLOCK_MAX_ROWS);
    job.train.batch = 0.01; /* a fraction: the default batch's rule */
    CU_ASSERT_EQUAL(fsgd_produce_block_rows(FSGD_JOB_DIST(&job), 12), 21);
    job.dist.block_rows = 7;
    CU_ASSERT_EQUAL(fsgd_produce_block_rows(FSGD_JOB_DIST(&job), 12), 7);
}

/* The bytes of a block, written out by hand from the layout in
 * fsgd/rowblock.h: an encoder that reads the same but writes other bytes
 * would change NAME.data for every reader. */
static void test_golden_bytes(void)
{
    fsgd_csr_t rows = {0};
    const uint32_t c0[] = {0, 5, 300}, c1[] = {2097155}, c3[] = {127, 128, 16511, 4294967295u};
    const float v0[] = {1, 1, 1}, v1[] = {0.5f}, v3[] = {1, 1, 1, 1};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&rows, 1.0, c0, v0, 3), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&rows, -1.5, c1, v1, 1), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&rows, 0.0, NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&rows, 2.0, c3, v3, 4), 0);
    static const uint8_t want[] = {
        0x00, 'F', 'R', 'B', 0x01, 0x44, 0x33, 0x22, 0x11, 0x04, /* magic, version, format id, 4 rows */
        0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x07, 0x00, 0x04, 0xA6, 0x02, /* 1.0; 3 ones; 0, +5, +295 */
        0, 0, 0, 0, 0, 0, 0xF8, 0xBF, 0x02, 0x83, 0x80, 0x80, 0x01, 0, 0, 0, 0x3F, /* -1.5; 1 value; 2097155; 0.5f */
        0, 0, 0, 0, 0, 0, 0, 0, 0x01,                                         /* 0.0; no nonzeros */
        0, 0, 0, 0, 0, 0, 0, 0x40, 0x09, 0x7F, 0x00, 0xFE, 0x7F,             /* 2.0; 4 ones; 127, +1, +16383 */
        0xFF, 0xFE, 0xFE, 0xFF, 0x0F,                                         /* +4294950784: 5 bytes */
    };
    uint8_t got[256];
    CU_ASSERT_TRUE_FATAL(fsgd_rowblock_bound(&rows, 0, 4) <= sizeof got);
    size_t len = fsgd_rowblock_encode(&rows, 0, 4, 0x11223344u, got);
    CU_ASSERT_EQUAL(len, sizeof want);
    CU_ASSERT_TRUE(len == sizeof want && !memcmp(got, want, len));
    /* rows [1, 3) alone: the same row bytes, after their own header */
    len = fsgd_rowblock_encode(&rows, 1, 2, 0x11223344u, got);
    CU_ASSERT_EQUAL(len, 10 + 13 + 4 + 9);
    CU_ASSERT_TRUE(got[9] == 2 && !memcmp(got + 10, want + 23, 13 + 4 + 9));
    fsgd_csr_free(&rows);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"a block holds the rows the text parser gives (LIBSVM, tsv, csv)", test_same_rows_as_text},
        {"a block's bytes, written out by hand", test_golden_bytes},
        {"another format's or a damaged block is refused whole; skip_bad skips it", test_refused_whole},
        {"rows a message: batch / partitions, or the job's block_rows", test_block_rows_rule},
        {NULL, NULL},
    };
    fsgd_test_suite("rowblock", cases);
}
