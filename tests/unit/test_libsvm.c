/* LIBSVM reader: grammar quirks, exact error locations, skip_bad, chunked
 * reads, long rows, number parsing against strtod, and agreement with
 * scikit-learn's load_svmlight_file on the real datasets and on
 * scikit-learn's own test files. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/gen.h"
#include "fsgd/libsvm.h"
#include "testlib.h"

#define PY "/usr/bin/python3"
#define DUMP_PY "tests/tools/sklearn_dump.py"
#define SKL_DATA "/usr/lib/python3/dist-packages/sklearn/datasets/tests/data"

/* Parses text with fsgd_libsvm_parse under source name "t". */
static long parse(const char *text, const fsgd_libsvm_opts_t *o, fsgd_csr_t *m, fsgd_libsvm_stats_t *st,
                  char *err, size_t errsz)
{
    return fsgd_libsvm_parse(text, strlen(text), o, FSGD_TEST_AT("t", st), m, err, errsz);
}

/* Loads text through a file and the streaming reader with a given buffer size. */
static int load_text(const char *text, size_t len, size_t read_buf, const fsgd_libsvm_opts_t *base,
                     fsgd_csr_t *m, fsgd_libsvm_stats_t *st, char *err, size_t errsz)
{
    const char *path = fsgd_test_tmp("in.svm");
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, text, len), 0);
    fsgd_libsvm_opts_t o = base ? *base : (fsgd_libsvm_opts_t){0};
    o.read_buf = read_buf;
    return fsgd_libsvm_load(path, &o, m, st, err, errsz);
}

static void test_basic(void)
{
    fsgd_csr_t m = {0};
    char err[256] = "";
    const char *text = "+1 1:0.5 3:2 10:-1.25\n"
                       "-1 2:1\n"
                       "1 qid:7 4:1e-3\n"
                       "0\n"
                       "3.25 1:1 # a comment 5:5\n"
                       "# only a comment\n"
                       "\n"
                       "   \t \n"
                       "-0.5\t2:4\t\t7:.5 # tabs\n"
                       "1 1:2#glued comment\n"
                       "-2e1 5:-0.0";
    fsgd_libsvm_stats_t st = {0};
    long n = parse(text, NULL, &m, &st, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(n, 8);
    CU_ASSERT_EQUAL(st.lines, 11);
    CU_ASSERT_EQUAL(st.rows, 8);
    CU_ASSERT_EQUAL(st.bytes, strlen(text));
    double labels[] = {1, -1, 1, 0, 3.25, -0.5, 1, -20};
    uint64_t want_rp[] = {0, 3, 4, 5, 5, 6, 8, 9, 10};
    uint32_t cols[] = {0, 2, 9, 1, 3, 0, 1, 6, 0, 4};
    float vals[] = {0.5f, 2, -1.25f, 1, 1e-3f, 1, 4, 0.5f, 2, 0};
    CU_ASSERT_EQUAL_FATAL(m.n_rows, 8);
    CU_ASSERT_EQUAL_FATAL(m.nnz, 10);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(m.label[i], labels[i]);
    for (int i = 0; i < 9; i++)
        CU_ASSERT_EQUAL(m.row_ptr[i], want_rp[i]);
    for (int i = 0; i < 10; i++) {
        CU_ASSERT_EQUAL(m.col[i], cols[i]);
        CU_ASSERT_EQUAL(m.val[i], vals[i]);
    }
    CU_ASSERT_TRUE(signbit(m.val[9])); /* "-0.0": an explicit zero is kept, sign and all */
    CU_ASSERT_EQUAL(m.max_col, 10);
    fsgd_csr_free(&m);
}

static void test_crlf(void)
{
    fsgd_csr_t a = {0}, b = {0};
    char err[256];
    const char *lf = "1 1:1 2:0.5\n-1 3:2\n\n1\n";
    const char *crlf = "1 1:1 2:0.5\r\n-1 3:2\r\n\r\n1\r\n";
    CU_ASSERT_EQUAL(parse(lf, NULL, &a, NULL, err, sizeof err), 3);
    CU_ASSERT_EQUAL(load_text(crlf, strlen(crlf), 5, NULL, &b, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(b.n_rows, 3);
    CU_ASSERT_EQUAL(a.nnz, b.nnz);
    CU_ASSERT_EQUAL(memcmp(a.col, b.col, a.nnz * 4), 0);
    CU_ASSERT_EQUAL(memcmp(a.val, b.val, a.nnz * 4), 0);
    CU_ASSERT_EQUAL(memcmp(a.label, b.label, 3 * 8), 0);
    CU_ASSERT_EQUAL(memcmp(a.row_ptr, b.row_ptr, 4 * 8), 0);
    fsgd_csr_free(&a);
    fsgd_csr_free(&b);
}

typedef struct bad_case {
    const char *text;
    int code;
    const char *msg; /* exact message */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"1 1:1\n-1 2:x\n", FSGD_E_PARSE, "t:2:6: expected a finite number as feature value, got 'x'"},
    {"1 3\n", FSGD_E_PARSE, "t:1:3: expected index:value, got '3'"},
    {"1 3 :1\n", FSGD_E_PARSE, "t:1:3: expected index:value, got '3'"},
    {"1 :1\n", FSGD_E_PARSE, "t:1:3: expected index:value, got ':1'"},
    {"1 a:1\n", FSGD_E_PARSE, "t:1:3: expected index:value, got 'a:1'"},
    {"1 -3:1\n", FSGD_E_PARSE, "t:1:3: expected index:value, got '-3:1'"},
    {"1 0:1\n", FSGD_E_PARSE, "t:1:3: expected a feature index >= 1 (indices are 1-based), got '0:1'"},
    {"1 2:1 4294967297:1\n", FSGD_E_RANGE, "t:1:7: expected a feature index <= 4294967296, got '4294967297:1'"},
    {"1 99999999999999999999999:1\n", FSGD_E_RANGE,
     "t:1:3: expected a feature index <= 4294967296, got '99999999999999999999999:1'"},
    {"1 5:1 2:1\n", FSGD_E_PARSE,
     "t:1:7: expected a feature index > 5 (indices must be strictly increasing), got '2:1'"},
    {"1 5:1 5:2\n", FSGD_E_PARSE,
     "t:1:7: expected a feature index > 5 (indices must be strictly increasing), got '5:2'"},
    {"1 1:nan\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got 'nan'"},
    {"1 1:inf\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got 'inf'"},
    {"1 1:-Infinity\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got '-Infinity'"},
    {"1 1:1e39\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got '1e39'"},
    {"1 1:1e999\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got '1e999'"},
    {"1 1:2.5x\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got '2.5x'"},
    {"1 1:2.5:3\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got '2.5:3'"},
    {"1 1:1e\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got '1e'"},
    {"1 1:\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got ''"},
    {"1 1: 2\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got ''"},
    {"1 1:0x10\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got '0x10'"},
    {"python 2:2.5\n", FSGD_E_PARSE, "t:1:1: expected a label (a finite number), got 'python'"},
    {"1x 1:1\n", FSGD_E_PARSE, "t:1:1: expected a label (a finite number), got '1x'"},
    {"  nan 1:1\n", FSGD_E_PARSE, "t:1:3: expected a label (a finite number), got 'nan'"},
    {"1e999 1:1\n", FSGD_E_PARSE, "t:1:1: expected a label (a finite number), got '1e999'"},
    {"1,0 1:1\n", FSGD_E_PARSE, "t:1:1: expected a label (a finite number), got '1,0'"},
    {" 2:3.5 11:26\n", FSGD_E_PARSE, "t:1:2: expected a label (a finite number; no label? label:weight needs --row-weights), got '2:3.5'"},
    {"1 qid:x 1:1\n", FSGD_E_PARSE, "t:1:3: expected qid:<integer>, got 'qid:x'"},
    {"1 1:1 qid:3\n", FSGD_E_PARSE, "t:1:7: expected index:value, got 'qid:3'"},
    {"1 1:1\x01\n", FSGD_E_PARSE, "t:1:5: expected a finite number as feature value, got '1\\x01'"},
    {"\n\n# c\n1 1:1\r\n1 1:1 3:1 2:1\r\n", FSGD_E_PARSE,
     "t:5:11: expected a feature index > 3 (indices must be strictly increasing), got '2:1'"},
    {NULL, 0, NULL},
};

static void test_errors(void)
{
    for (const bad_case_t *c = bad_cases; c->text; c++) {
        fsgd_csr_t m = {0};
        char err[256] = "";
        long n = parse(c->text, NULL, &m, NULL, err, sizeof err);
        if (n != c->code || strcmp(err, c->msg) != 0)
            fprintf(stderr, "\n  input %s  got %ld \"%s\"\n  want %d \"%s\"\n", c->text, n, err, c->code, c->msg);
        CU_ASSERT_EQUAL(n, c->code);
        CU_ASSERT_STRING_EQUAL(err, c->msg);
        /* The same through the streaming reader, named by its path. */
        char err2[512] = "", want[512];
        fsgd_csr_free(&m);
        int rc = load_text(c->text, strlen(c->text), 3, NULL, &m, NULL, err2, sizeof err2);
        CU_ASSERT_EQUAL(rc, c->code);
        snprintf(want, sizeof want, "%s%s", fsgd_test_tmp("in.svm"), c->msg + 1);
        CU_ASSERT_STRING_EQUAL(err2, want);
        /* Rows before the bad one are complete; nothing partial. */
        CU_ASSERT_EQUAL(m.row_ptr[m.n_rows], m.nnz);
        fsgd_csr_free(&m);
    }
}

static void test_index_limits(void)
{
    fsgd_csr_t m = {0};
    char err[256] = "";
    CU_ASSERT_EQUAL(parse("1 1:1 4294967296:2\n", NULL, &m, NULL, err, sizeof err), 1);
    CU_ASSERT_EQUAL(m.col[1], 4294967295u);
    CU_ASSERT_EQUAL(m.max_col, 4294967296ull);
    fsgd_csr_free(&m);

    fsgd_libsvm_opts_t zb = {.zero_based = 1};
    CU_ASSERT_EQUAL(parse("1 0:1 3:2 4294967295:3\n", &zb, &m, NULL, err, sizeof err), 1);
    CU_ASSERT_EQUAL(m.col[0], 0);
    CU_ASSERT_EQUAL(m.col[1], 3);
    CU_ASSERT_EQUAL(m.col[2], 4294967295u);
    fsgd_csr_free(&m);
    CU_ASSERT_EQUAL(parse("1 4294967296:3\n", &zb, &m, NULL, err, sizeof err), FSGD_E_RANGE);
    CU_ASSERT_STRING_EQUAL(err, "t:1:3: expected a feature index <= 4294967295, got '4294967296:3'");
    fsgd_csr_free(&m);

    fsgd_libsvm_opts_t md = {.max_dim = 10};
    CU_ASSERT_EQUAL(parse("1 10:1\n", &md, &m, NULL, err, sizeof err), 1);
    CU_ASSERT_EQUAL(parse("1 3:1\n1 2:1 11:1\n", &md, &m, NULL, err, sizeof err), FSGD_E_RANGE);
    CU_ASSERT_STRING_EQUAL(err, "t:2:7: expected a feature index <= 10 (the dimension), got '11:1'");
    CU_ASSERT_EQUAL(m.n_rows, 2); /* the first call's row and "1 3:1" */
    CU_ASSERT_EQUAL(m.nnz, 2);
    fsgd_csr_free(&m);
    md.zero_based = 1;
    CU_ASSERT_EQUAL(parse("1 10:1\n", &md, &m, NULL, err, sizeof err), FSGD_E_RANGE);
    CU_ASSERT_STRING_EQUAL(err, "t:1:3: expected a feature index <= 9 (the dimension), got '10:1'");
    fsgd_csr_free(&m);
}

static void test_unsorted(void)
{
    fsgd_csr_t m = {0};
    char err[256] = "";
    fsgd_libsvm_opts_t o = {.allow_unsorted = 1};
    CU_ASSERT_EQUAL(parse("1 5:1 2:3 9:4 1:0.5\n-1 3:1\n", &o, &m, NULL, err, sizeof err), 2);
    uint32_t cols[] = {0, 1, 4, 8, 2};
    float vals[] = {0.5f, 3, 1, 4, 1};
    CU_ASSERT_EQUAL_FATAL(m.nnz, 5);
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(m.col[i], cols[i]);
        CU_ASSERT_EQUAL(m.val[i], vals[i]);
    }
    CU_ASSERT_EQUAL(m.max_col, 9);
    CU_ASSERT_EQUAL(parse("1 5:1 2:3 5:4\n", &o, &m, NULL, err, sizeof err), FSGD_E_PARSE);
    CU_ASSERT_STRING_EQUAL(err, "t:1:11: expected a feature index not seen before in the row, got '5:4'");
    CU_ASSERT_EQUAL(m.n_rows, 2);
    fsgd_csr_free(&m);
    /* A long unsorted row (qsort path) through the reader. */
    size_t k = 5000, cap = k * 24, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text, cap, "1");
    for (size_t i = 0; i < k; i++)
        len += (size_t)snprintf(text + len, cap - len, " %zu:%zu", (i * 7919) % k + 1, i);
    text[len++] = '\n';
    CU_ASSERT_EQUAL(load_text(text, len, 64, &o, &m, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(m.nnz, k);
    for (size_t i = 0; i < k; i++) {
        CU_ASSERT_EQUAL(m.col[i], i);
        size_t src = 0; /* entry j holds index (j*7919)%k+1 and value j */
        while ((src * 7919) % k != i)
            src++;
        if (m.val[i] != (float)src) {
            CU_FAIL("value not carried with its index");
            break;
        }
        if (i > 50)
            break; /* the search is quadratic; the first entries suffice */
    }
    free(text);
    fsgd_csr_free(&m);
}

static void test_skip_bad(void)
{
    const char *text = "1 1:1 2:1\n"       /* 1 ok */
                       "1 1:1 2:1 3:x\n"   /* 2 bad value */
                       "-1 4:1\n"          /* 3 ok */
                       "oops 1:1\n"        /* 4 bad label */
                       "1 2:1 1:1\n"       /* 5 unsorted */
                       "\n"                /* 6 blank */
                       "1 0:1\n"           /* 7 index 0 */
                       "1 1:1 5\n"         /* 8 missing ':' */
                       "1 1:nan\n"         /* 9 nan */
                       "0 7:2\n"           /* 10 ok */
                       "1 1:1e99\n";       /* 11 float overflow */
    for (int reader = 0; reader < 2; reader++) {
        fsgd_csr_t m = {0};
        char err[256] = "";
        fsgd_libsvm_opts_t o = {.skip_bad = 1};
        fsgd_libsvm_stats_t st = {0};
        if (reader) {
            CU_ASSERT_EQUAL(load_text(text, strlen(text), 8, &o, &m, &st, err, sizeof err), 0);
        } else {
            CU_ASSERT_EQUAL(parse(text, &o, &m, &st, err, sizeof err), 3);
        }
        CU_ASSERT_EQUAL(st.rows, 3);
        CU_ASSERT_EQUAL(st.bad_rows, 7);
        CU_ASSERT_EQUAL(st.lines, 11);
        CU_ASSERT_EQUAL_FATAL(m.n_rows, 3);
        CU_ASSERT_EQUAL(m.nnz, 4);
        CU_ASSERT_EQUAL(m.row_ptr[1], 2);
        CU_ASSERT_EQUAL(m.row_ptr[2], 3);
        CU_ASSERT_EQUAL(m.row_ptr[3], 4);
        CU_ASSERT_EQUAL(m.col[2], 3);
        CU_ASSERT_EQUAL(m.col[3], 6);
        CU_ASSERT_EQUAL(m.label[2], 0.0);
        CU_ASSERT_EQUAL(m.max_col, 7);
        const char *want[FSGD_LIBSVM_BAD_KEPT] = {
            ":2:13: expected a finite number as feature value, got 'x'",
            ":4:1: expected a label (a finite number), got 'oops'",
            ":5:7: expected a feature index > 2 (indices must be strictly increasing), got '1:1'",
            ":7:3: expected a feature index >= 1 (indices are 1-based), got '0:1'",
            ":8:7: expected index:value, got '5'",
        };
        for (int i = 0; i < FSGD_LIBSVM_BAD_KEPT; i++) {
            char full[512];
            snprintf(full, sizeof full, "%s%s", reader ? fsgd_test_tmp("in.svm") : "t", want[i]);
            CU_ASSERT_STRING_EQUAL(st.first_bad[i], full);
        }
        fsgd_csr_free(&m);
    }
}

static void test_strict_sticky(void)
{
    const char *text = "1 1:1\n1 2:1\n1 x:1\n1 3:1\n";
    const char *path = fsgd_test_tmp("sticky.svm");
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, text, strlen(text)), 0);
    char err[512] = "";
    fsgd_libsvm_reader_t *r = fsgd_libsvm_open(path, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    fsgd_csr_t m = {0};
    CU_ASSERT_EQUAL(fsgd_libsvm_read(r, &m, 1, err, sizeof err), 1);
    CU_ASSERT_EQUAL(fsgd_libsvm_read(r, &m, 10, err, sizeof err), FSGD_E_PARSE);
    CU_ASSERT_EQUAL(m.n_rows, 2);
    char want[512];
    snprintf(want, sizeof want, "%s:3:3: expected index:value, got 'x:1'", path);
    CU_ASSERT_STRING_EQUAL(err, want);
    err[0] = '\0';
    CU_ASSERT_EQUAL(fsgd_libsvm_read(r, &m, 10, err, sizeof err), FSGD_E_PARSE);
    CU_ASSERT_STRING_EQUAL(err, want);
    CU_ASSERT_EQUAL(m.n_rows, 2);
    fsgd_libsvm_close(r);
    fsgd_libsvm_close(NULL);
    fsgd_csr_free(&m);

    r = fsgd_libsvm_open("/nonexistent/x.svm", NULL, err, sizeof err);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_STRING_EQUAL(err, "cannot open '/nonexistent/x.svm': No such file or directory");
    CU_ASSERT_EQUAL(fsgd_libsvm_load("/nonexistent/x.svm", NULL, &m, NULL, err, sizeof err), FSGD_E_IO);
    fsgd_csr_free(&m);
}

static void test_parse_source(void)
{
    fsgd_csr_t m = {0};
    char err[256] = "";
    fsgd_libsvm_stats_t st = {0};
    const char *msg = "1 1:1\n1 2:1 2:1";
    const fsgd_parse_ctx_t at = {.src = "topic a9a.data partition 2 offset 17", .first_line = 100, .stats = &st};
    long n = fsgd_libsvm_parse(msg, strlen(msg), NULL, &at, &m, err, sizeof err);
    CU_ASSERT_EQUAL(n, FSGD_E_PARSE);
    CU_ASSERT_STRING_EQUAL(err, "topic a9a.data partition 2 offset 17:101:7: expected a feature index > 2 "
                                "(indices must be strictly increasing), got '2:1'");
    CU_ASSERT_EQUAL(m.n_rows, 1);
    /* Stats accumulate over calls; an empty buffer is fine. */
    CU_ASSERT_EQUAL(fsgd_libsvm_parse("", 0, NULL, FSGD_TEST_AT("x", &st), &m, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_libsvm_parse("-1 3:1", 6, NULL, FSGD_TEST_AT("x", &st), &m, err, sizeof err), 1);
    CU_ASSERT_EQUAL(st.rows, 2);
    CU_ASSERT_EQUAL(st.lines, 3);
    CU_ASSERT_EQUAL(m.n_rows, 2);
    /* A buffer that is not NUL terminated: parsing stops at len. */
    char buf[8] = {'1', ' ', '1', ':', '2', '5', '5', '5'};
    fsgd_csr_free(&m);
    CU_ASSERT_EQUAL(fsgd_libsvm_parse(buf, 5, NULL, FSGD_TEST_AT("x", NULL), &m, err, sizeof err), 1);
    CU_ASSERT_EQUAL(m.val[0], 2.0f);
    fsgd_csr_free(&m);
}

/* Random LIBSVM text (some long rows, CRLF, comments, blank lines). */
static char *random_text(uint64_t *rs, size_t rows, size_t *len_out)
{
    size_t cap = 1 << 16, len = 0;
    char *t = malloc(cap);
    for (size_t r = 0; r < rows; r++) {
        size_t k = fsgd_test_rand(rs) % 8 == 0 ? fsgd_test_rand(rs) % 3000 : fsgd_test_rand(rs) % 20;
        while (cap - len < k * 40 + 200) {
            cap *= 2;
            t = realloc(t, cap);
        }
        uint64_t kind = fsgd_test_rand(rs) % 10;
        if (kind == 0) {
            len += (size_t)snprintf(t + len, cap - len, "# comment %zu\n", r);
            continue;
        }
        if (kind == 1) {
            t[len++] = '\n';
            continue;
        }
        len += (size_t)snprintf(t + len, cap - len, "%s%d", kind == 2 ? "  " : "",
                                (int)(fsgd_test_rand(rs) % 3) - 1);
        uint64_t idx = 0;
        for (size_t i = 0; i < k; i++) {
            idx += 1 + fsgd_test_rand(rs) % 50;
            double v = ((double)(fsgd_test_rand(rs) % 2000001) - 1e6) / 1e4;
            len += (size_t)snprintf(t + len, cap - len, "%s%llu:%.*g", kind == 3 ? "\t" : " ",
                                    (unsigned long long)idx, (int)(1 + fsgd_test_rand(rs) % 9), v);
        }
        len += (size_t)snprintf(t + len, cap - len, "%s", kind == 4 ? "\r\n" : kind == 5 ? " # c\n" : "\n");
    }
    *len_out = len;
    return t;
}

static void csr_equal(const fsgd_csr_t *a, const fsgd_csr_t *b)
{
    CU_ASSERT_EQUAL_FATAL(a->n_rows, b->n_rows);
    CU_ASSERT_EQUAL_FATAL(a->nnz, b->nnz);
    CU_ASSERT_EQUAL(a->max_col, b->max_col);
    CU_ASSERT_EQUAL(memcmp(a->row_ptr, b->row_ptr, (a->n_rows + 1) * sizeof *a->row_ptr), 0);
    CU_ASSERT_EQUAL(memcmp(a->label, b->label, a->n_rows * sizeof *a->label), 0);
    if (a->nnz) {
        CU_ASSERT_EQUAL(memcmp(a->col, b->col, a->nnz * sizeof *a->col), 0);
        CU_ASSERT_EQUAL(memcmp(a->val, b->val, a->nnz * sizeof *a->val), 0);
    }
}

/* Rows split across buffer refills, buffers growing for long rows, and
 * read() called with small max_rows: all give what one parse gives. */
static void test_chunked(void)
{
    uint64_t rs = fsgd_test_seed() ^ 0x11;
    size_t len;
    char *text = random_text(&rs, 400, &len);
    fsgd_csr_t ref = {0};
    char err[256] = "";
    fsgd_libsvm_stats_t rst = {0};
    long n = fsgd_libsvm_parse(text, len, NULL, FSGD_TEST_AT("t", &rst), &ref, err, sizeof err);
    CU_ASSERT_FATAL(n > 0);
    const char *path = fsgd_test_tmp("chunked.svm");
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, text, len), 0);
    size_t bufs[] = {1, 2, 7, 16, 33, 1000, 4096, 65536, 0};
    size_t steps[] = {1, 3, 64, (size_t)-1};
    for (size_t bi = 0; bi < sizeof bufs / sizeof *bufs; bi++) {
        for (size_t si = 0; si < 4; si++) {
            fsgd_libsvm_opts_t o = {.read_buf = bufs[bi]};
            fsgd_libsvm_reader_t *r = fsgd_libsvm_open(path, &o, err, sizeof err);
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            fsgd_csr_t m = {0};
            long got, total = 0;
            while ((got = fsgd_libsvm_read(r, &m, steps[si], err, sizeof err)) > 0) {
                CU_ASSERT((size_t)got <= steps[si]);
                total += got;
            }
            CU_ASSERT_EQUAL(got, 0);
            CU_ASSERT_EQUAL(total, n);
            csr_equal(&ref, &m);
            const fsgd_libsvm_stats_t *st = fsgd_libsvm_stats(r);
            CU_ASSERT_EQUAL(st->bytes, len);
            CU_ASSERT_EQUAL(st->lines, rst.lines);
            CU_ASSERT_EQUAL(st->rows, (uint64_t)n);
            fsgd_libsvm_close(r);
            fsgd_csr_free(&m);
        }
    }
    free(text);
    fsgd_csr_free(&ref);
}

static void test_long_row(void)
{
    size_t k = 300000, cap = k * 16 + 64, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text, cap, "-1");
    for (size_t i = 0; i < k; i++)
        len += (size_t)snprintf(text + len, cap - len, " %zu:%zu.5", i * 3 + 1, i % 1000);
    len += (size_t)snprintf(text + len, cap - len, "\n1 2:1"); /* last line without '\n' */
    fsgd_csr_t m = {0};
    char err[256] = "";
    fsgd_libsvm_stats_t st;
    CU_ASSERT_EQUAL(load_text(text, len, 4096, NULL, &m, &st, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(m.n_rows, 2);
    CU_ASSERT_EQUAL(m.nnz, k + 1);
    CU_ASSERT_EQUAL(m.row_ptr[1], k);
    CU_ASSERT_EQUAL(m.col[k - 1], (k - 1) * 3);
    CU_ASSERT_EQUAL(m.val[k - 1], (float)((k - 1) % 1000) + 0.5f);
    CU_ASSERT_EQUAL(m.col[k], 1);
    CU_ASSERT_EQUAL(st.bytes, len);
    CU_ASSERT_EQUAL(st.lines, 2);
    fsgd_csr_free(&m);
    free(text);
}

/* Labels parse to exactly strtod's double, values to (float)strtod. */
static void test_numbers_vs_strtod(void)
{
    uint64_t rs = fsgd_test_seed() ^ 0x22;
    char line[256], a[80], b[80];
    fsgd_csr_t m = {0};
    char err[256];
    static const char *fixed[] = {
        "0",      "-0",     "+1",        "1.",       ".5",        "00012.5000", "1e0",        "1E+2",
        "1e-2",   "0.1",    "0.3",       "2.2250738585072014e-308", "4.9e-324", "1.7976931348623157e308",
        "123456789012345678901234567890", "0.000000000000000000000000000000123456789",
        "9007199254740993", "9007199254740992.5", "1e23",  "8.589973e9", "6.19282995422704E-02",
        "9.86899159742946E-02", "1.234567890123456e10", "3.4028234663852886e38", "1e-46",
        "0.000292", "-0.731854", "7.038531e-39", NULL};
    for (int i = 0; i < 20000; i++) {
        const char *sa, *sb;
        const size_t n_fixed = sizeof fixed / sizeof *fixed - 1;
        if ((size_t)i < n_fixed) {
            sa = sb = fixed[i];
        } else {
            int style = (int)(fsgd_test_rand(&rs) % 4);
            double mant = (double)(fsgd_test_rand(&rs) >> 11) / 9007199254740992.0;
            int ex = (int)(fsgd_test_rand(&rs) % 80) - 40;
            int prec = 1 + (int)(fsgd_test_rand(&rs) % 20);
            double v = (fsgd_test_rand(&rs) & 1 ? -1 : 1) * mant * pow(10, ex);
            if (style == 0)
                snprintf(a, sizeof a, "%.*g", prec, v);
            else if (style == 1)
                snprintf(a, sizeof a, "%.*e", prec, v);
            else if (style == 2)
                snprintf(a, sizeof a, "%.*f", prec % 12, v * 1e-30 * pow(10, 30 - ex % 10));
            else
                snprintf(a, sizeof a, "%llu", (unsigned long long)(fsgd_test_rand(&rs) >> (fsgd_test_rand(&rs) % 64)));
            snprintf(b, sizeof b, "%s", a);
            sa = a;
            sb = b;
        }
        double want_l = strtod(sa, NULL);
        float want_v = (float)strtod(sb, NULL);
        if (!isfinite(want_l) || !isfinite(want_v))
            continue;
        fsgd_csr_clear(&m);
        snprintf(line, sizeof line, "%s 1:%s\n", sa, sb);
        long n = fsgd_libsvm_parse(line, strlen(line), NULL, FSGD_TEST_AT("t", NULL), &m, err, sizeof err);
        if (n != 1) {
            fprintf(stderr, "\n  %s: %s\n", line, err);
            CU_FAIL("number rejected");
            break;
        }
        if (memcmp(&m.label[0], &want_l, 8) != 0 || memcmp(&m.val[0], &want_v, 4) != 0) {
            fprintf(stderr, "\n  %s -> label %.17g (strtod %.17g), value %.9g (strtod %.9g)\n", sa, m.label[0],
                    want_l, m.val[0], want_v);
            CU_FAIL("differs from strtod");
            break;
        }
    }
    fsgd_csr_free(&m);
}

/* The CTR fast paths (indices read 8 digits at a time where 8 bytes are
 * left in the line, a value "1" alone without parse_double) against the
 * numbers written: indices of 1 to 11 digits, leading zeros, at every
 * distance from the line's end, beside bytes just outside '0'..'9' and
 * values that start with "1" but are not 1. */
static void test_digits_fast_path(void)
{
    uint64_t rs = fsgd_test_seed() ^ 0x33;
    static const char *vals[] = {"1", "1.5", "10", "1e1", "1.", "2", "0.1", "1#"};
    static const float want_val[] = {1.0f, 1.5f, 10.0f, 10.0f, 1.0f, 2.0f, 0.1f, 1.0f};
    static const char *after[] = {"", " ", "\t", " #c", "\r"};
    char line[256], err[256];
    fsgd_csr_t m = {0};
    for (int i = 0; i < 20000; i++) {
        int digits = 1 + (int)(fsgd_test_rand(&rs) % 11);
        int zeros = fsgd_test_rand(&rs) % 4 == 0 ? (int)(fsgd_test_rand(&rs) % 4) : 0;
        uint64_t idx = 1;
        for (int d = 1; d < digits; d++)
            idx = idx * 10 + fsgd_test_rand(&rs) % 10;
        if (fsgd_test_rand(&rs) % 2)
            idx = 1 + idx % 4294967296ull; /* most within the limit */
        size_t vi = fsgd_test_rand(&rs) % (sizeof vals / sizeof *vals);
        const char *tail = after[fsgd_test_rand(&rs) % (sizeof after / sizeof *after)];
        if (strcmp(vals[vi], "1#") == 0)
            tail = ""; /* the comment runs to the line's end */
        int n = snprintf(line, sizeof line, "1 %0*llu:%s%s", zeros + digits, (unsigned long long)idx, vals[vi], tail);
        /* no newline: the line's end is the buffer's */
        fsgd_csr_clear(&m);
        long got = fsgd_libsvm_parse(line, (size_t)n, NULL, FSGD_TEST_AT("t", NULL), &m, err, sizeof err);
        if (idx > 4294967296ull) {
            if (got != FSGD_E_RANGE) {
                fprintf(stderr, "\n  '%s': %ld\n", line, got);
                CU_FAIL("index past the limit accepted");
                break;
            }
            continue;
        }
        if (got != 1 || m.nnz != 1 || m.col[0] != idx - 1 || m.val[0] != want_val[vi]) {
            fprintf(stderr, "\n  '%s': %ld %s col %u val %g\n", line, got, got < 0 ? err : "", m.nnz ? m.col[0] : 0,
                    m.nnz ? m.val[0] : 0.0);
            CU_FAIL("index or value misread");
            break;
        }
    }
    /* bytes on either side of the digits' range end an index like any other */
    static const char *bad[] = {"1 12345/7:1", "1 1234567:1:", "1 12\x80" "4567:1", "1 1234567;:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fsgd_csr_clear(&m);
        CU_ASSERT_EQUAL(fsgd_libsvm_parse(bad[i], strlen(bad[i]), NULL, FSGD_TEST_AT("t", NULL), &m, err, sizeof err),
                        FSGD_E_PARSE);
    }
    fsgd_csr_clear(&m);
    CU_ASSERT_EQUAL(
        fsgd_libsvm_parse("1 99999999:1 123456789:1", 24, NULL, FSGD_TEST_AT("t", NULL), &m, err, sizeof err), 1);
    CU_ASSERT_EQUAL(m.col[0], 99999998u);
    CU_ASSERT_EQUAL(m.col[1], 123456788u);
    fsgd_csr_free(&m);
}

static void test_real_files(void)
{
    struct {
        const char *name;
        size_t rows;
        uint64_t lines;
    } files[] = {{"a9a", 32561, 32561},     {"a9a.t", 16281, 16281},   {"w8a", 49749, 49750},
                 {"ijcnn1", 49990, 49990},  {"ijcnn1.t", 91701, 91701}, {"reuters", 7770, 7770},
                 {"reuters.t", 3299, 3299}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        FSGD_TEST_DATA(path, files[i].name);
        fsgd_csr_t m = {0};
        fsgd_libsvm_stats_t st;
        char err[512] = "";
        int rc = fsgd_libsvm_load(path, NULL, &m, &st, err, sizeof err);
        if (rc)
            fprintf(stderr, "\n  %s\n", err);
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_EQUAL(m.n_rows, files[i].rows);
        CU_ASSERT_EQUAL(st.lines, files[i].lines); /* w8a: the trailing blank line is a line, not a row */
        CU_ASSERT_EQUAL(st.bad_rows, 0);
        for (size_t r = 0; r < m.n_rows; r++)
            if (m.label[r] != 1.0 && m.label[r] != -1.0) {
                CU_FAIL("label not +-1");
                break;
            }
        if (!strncmp(files[i].name, "ijcnn1", 6)) {
            CU_ASSERT_EQUAL(m.label[0], -1.0); /* written "-1.0" */
        }
        fsgd_csr_free(&m);
    }
}

/* ---- agreement with scikit-learn ---- */

typedef struct skl {
    int ok;
    char error[512];
    uint64_t n_rows, nnz, n_cols;
    double *label;
    int64_t *indptr;
    uint32_t *indices;
    float *data;
    unsigned char *raw;
} skl_t;

static int skl_read(const char *path, skl_t *s)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s->raw = malloc((size_t)n + 1);
    if (fread(s->raw, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return -1;
    }
    fclose(f);
    s->raw[n] = 0;
    if (n >= 8 && !memcmp(s->raw, "FSGDSKLE", 8)) {
        snprintf(s->error, sizeof s->error, "%s", (char *)s->raw + 8);
        return 0;
    }
    if (n < 32 || memcmp(s->raw, "FSGDSKL1", 8))
        return -1;
    memcpy(&s->n_rows, s->raw + 8, 8);
    memcpy(&s->nnz, s->raw + 16, 8);
    memcpy(&s->n_cols, s->raw + 24, 8);
    size_t want = 32 + s->n_rows * 8 + (s->n_rows + 1) * 8 + s->nnz * 8;
    if ((size_t)n != want)
        return -1;
    unsigned char *p = s->raw + 32;
    s->label = (double *)(void *)p; /* malloc'd + 32: aligned for these types */
    p += s->n_rows * 8;
    s->indptr = (int64_t *)(void *)p;
    p += (s->n_rows + 1) * 8;
    s->indices = (uint32_t *)(void *)p;
    p += s->nnz * 4;
    s->data = (float *)(void *)p;
    s->ok = 1;
    return 0;
}

/* Compares our CSR with scikit-learn's, reporting the first difference. */
static int skl_compare(const char *name, const fsgd_csr_t *m, const skl_t *s)
{
    if (m->n_rows != s->n_rows || m->nnz != s->nnz || m->max_col != s->n_cols) {
        fprintf(stderr, "\n  %s: rows %zu/%llu nnz %zu/%llu cols %llu/%llu (fsgd/sklearn)\n", name, m->n_rows,
                (unsigned long long)s->n_rows, m->nnz, (unsigned long long)s->nnz,
                (unsigned long long)m->max_col, (unsigned long long)s->n_cols);
        return -1;
    }
    for (size_t r = 0; r < m->n_rows; r++) {
        if (memcmp(&m->label[r], &s->label[r], 8) || m->row_ptr[r + 1] != (uint64_t)s->indptr[r + 1]) {
            fprintf(stderr, "\n  %s: row %zu: label %.17g/%.17g, end %llu/%lld\n", name, r, m->label[r],
                    s->label[r], (unsigned long long)m->row_ptr[r + 1], (long long)s->indptr[r + 1]);
            return -1;
        }
        for (uint64_t j = m->row_ptr[r]; j < m->row_ptr[r + 1]; j++)
            if (m->col[j] != s->indices[j] || memcmp(&m->val[j], &s->data[j], 4)) {
                fprintf(stderr, "\n  %s: row %zu entry %llu: %u:%.9g vs sklearn %u:%.9g\n", name, r,
                        (unsigned long long)j, m->col[j], m->val[j], s->indices[j], s->data[j]);
                return -1;
            }
    }
    return 0;
}

static int run_sklearn(const char **inputs, const char **outputs, size_t n)
{
    char cmd[8192];
    size_t len = (size_t)snprintf(cmd, sizeof cmd, "%s %s", PY, DUMP_PY);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(cmd + len, sizeof cmd - len, " '%s' '%s'", inputs[i], outputs[i]);
    char out[4096];
    int rc = fsgd_test_run(cmd, out, sizeof out);
    if (rc != 0)
        fprintf(stderr, "\n  %s failed (%d): %s\n", cmd, rc, out);
    return rc;
}

static void test_sklearn_real(void)
{
    /* The real datasets, plus generated data with real values (3-decimal
     * values, labels from the linear model, ids up to 2^20). */
    const char *names[] = {"a9a", "a9a.t", "w8a", "ijcnn1", "ijcnn1.t", "reuters", "reuters.t", "gen"};
    const size_t n = sizeof names / sizeof *names;
    const char *in[8], *outp[8];
    char paths[8][2][512];
    for (size_t i = 0; i < n; i++) {
        const char *p;
        if (!strcmp(names[i], "gen")) {
            p = fsgd_test_tmp("gen.svm");
            fsgd_gen_opts_t o;
            fsgd_gen_opts_default(&o);
            o.dim = 1u << 20;
            o.real_values = 1;
            o.model = FSGD_GEN_LINEAR;
            o.noise = 0.5;
            o.seed = fsgd_test_seed();
            char gerr[256];
            fsgd_gen_t *g = fsgd_gen_new(&o, gerr, sizeof gerr);
            FILE *f = fopen(p, "wb");
            CU_ASSERT_FATAL(g && f);
            CU_ASSERT_EQUAL(fsgd_gen_write(g, f, 5000, NULL, NULL, gerr, sizeof gerr), 0);
            fclose(f);
            fsgd_gen_destroy(g);
        } else {
            p = fsgd_test_data(names[i]);
            if (!p)
                return; /* skipped */
        }
        snprintf(paths[i][0], 512, "%s", p);
        snprintf(paths[i][1], 512, "%s", fsgd_test_tmp(names[i]));
        strcat(paths[i][1], ".skl");
        in[i] = paths[i][0];
        outp[i] = paths[i][1];
    }
    CU_ASSERT_EQUAL_FATAL(run_sklearn(in, outp, n), 0);
    for (size_t i = 0; i < n; i++) {
        skl_t s;
        CU_ASSERT_EQUAL_FATAL(skl_read(outp[i], &s), 0);
        if (!s.ok)
            fprintf(stderr, "\n  sklearn could not load %s: %s\n", names[i], s.error);
        CU_ASSERT_TRUE_FATAL(s.ok);
        fsgd_csr_t m = {0};
        char err[512] = "";
        CU_ASSERT_EQUAL(fsgd_libsvm_load(in[i], NULL, &m, NULL, err, sizeof err), 0);
        CU_ASSERT_EQUAL(skl_compare(names[i], &m, &s), 0);
        /* Explicit zeros are kept by both (ijcnn1 has one). */
        size_t zeros = 0;
        for (size_t j = 0; j < m.nnz; j++)
            zeros += m.val[j] == 0.0f;
        if (!strcmp(names[i], "ijcnn1"))
            CU_ASSERT_TRUE(zeros > 0);
        printf("  sklearn agrees on %s: %zu rows, %zu stored entries (%zu explicit zeros)\n", names[i], m.n_rows,
               m.nnz, zeros);
        fsgd_csr_free(&m);
        free(s.raw);
    }
}

static void test_sklearn_own_files(void)
{
    struct {
        const char *file;
        const char *ours; /* NULL: valid; else the expected error suffix after the path */
        const char *theirs;
    } cases[] = {
        {"svmlight_classification.txt", NULL, NULL},
        {"svmlight_invalid.txt", ":1:1: expected a label (a finite number), got 'python'", "could not convert"},
        {"svmlight_invalid_order.txt",
         ":1:10: expected a feature index > 5 (indices must be strictly increasing), got '2:-5.2'",
         "sorted and unique"},
        {"svmlight_multilabel.txt", ":2:1: expected a label (a finite number), got '1,0'", "could not convert"},
    };
    const size_t n = sizeof cases / sizeof *cases;
    const char *in[4], *outp[4];
    char paths[4][2][512];
    for (size_t i = 0; i < n; i++) {
        snprintf(paths[i][0], 512, "%s/%s", SKL_DATA, cases[i].file);
        snprintf(paths[i][1], 512, "%s", fsgd_test_tmp(cases[i].file));
        in[i] = paths[i][0];
        outp[i] = paths[i][1];
    }
    CU_ASSERT_EQUAL_FATAL(run_sklearn(in, outp, n), 0);
    for (size_t i = 0; i < n; i++) {
        skl_t s;
        CU_ASSERT_EQUAL_FATAL(skl_read(outp[i], &s), 0);
        fsgd_csr_t m = {0};
        char err[512] = "";
        int rc = fsgd_libsvm_load(in[i], NULL, &m, NULL, err, sizeof err);
        if (!cases[i].ours) {
            CU_ASSERT_TRUE(s.ok);
            CU_ASSERT_EQUAL(rc, 0);
            if (s.ok && rc == 0) {
                CU_ASSERT_EQUAL(skl_compare(cases[i].file, &m, &s), 0);
                CU_ASSERT_EQUAL(m.n_rows, 6);
            }
        } else {
            CU_ASSERT_FALSE(s.ok); /* scikit-learn rejects it too */
            FSGD_ASSERT_CONTAINS(s.error, cases[i].theirs);
            CU_ASSERT_EQUAL(rc, FSGD_E_PARSE);
            char want[1024];
            snprintf(want, sizeof want, "%s%s", in[i], cases[i].ours);
            CU_ASSERT_STRING_EQUAL(err, want);
        }
        fsgd_csr_free(&m);
        free(s.raw);
    }
}

static int same_csr(const fsgd_csr_t *a, const fsgd_csr_t *b)
{
    return a->n_rows == b->n_rows && a->nnz == b->nnz && a->max_col == b->max_col &&
           !memcmp(a->row_ptr, b->row_ptr, (a->n_rows + 1) * sizeof *a->row_ptr) &&
           !memcmp(a->label, b->label, a->n_rows * sizeof *a->label) &&
           !memcmp(a->col, b->col, a->nnz * sizeof *a->col) && !memcmp(a->val, b->val, a->nnz * sizeof *a->val);
}

/* Loading with threads gives the rows, counts and errors of one thread,
 * over blocks small enough that lines straddle them. */
/* hash_bits: every index lands on its fsgd_libsvm_hash_col column, the
 * row sorted, entries that share a column summed; the file's index order
 * is still checked; the threaded loader agrees. */
static void test_hash_bits(void)
{
    char err[512];
    /* with 1 bit, indices 1..6 share 2 columns: collisions certain */
    const char *text = "1 1:1 2:2 3:3 4:4 5:5 6:6\n-1 4000000000:1.5\n";
    fsgd_libsvm_opts_t o = {.hash_bits = 1};
    fsgd_csr_t m = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_parse(text, strlen(text), &o, FSGD_TEST_AT("h", NULL), &m, err, sizeof err), 2);
    double sum[2] = {0, 0};
    for (uint64_t i = 1; i <= 6; i++)
        sum[fsgd_libsvm_hash_col(i - 1, 1)] += (double)i;
    CU_ASSERT_EQUAL(m.row_ptr[1], (sum[0] > 0) + (sum[1] > 0));
    for (uint64_t j = 0; j < m.row_ptr[1]; j++) {
        CU_ASSERT(m.col[j] < 2);
        CU_ASSERT_DOUBLE_EQUAL(m.val[j], sum[m.col[j]], 1e-6);
        if (j)
            CU_ASSERT(m.col[j] > m.col[j - 1]);
    }
    CU_ASSERT_EQUAL(m.col[m.row_ptr[1]], fsgd_libsvm_hash_col(3999999999ULL, 1));
    CU_ASSERT(m.max_col <= 2);
    fsgd_csr_free(&m);
    /* the mix spreads a stride: 4096 indices k*1024 over 2^12 columns */
    unsigned used = 0;
    static unsigned char seen[4096];
    memset(seen, 0, sizeof seen);
    for (uint64_t k = 0; k < 4096; k++) {
        uint32_t c = fsgd_libsvm_hash_col(k * 1024, 12);
        CU_ASSERT(c < 4096);
        used += !seen[c];
        seen[c] = 1;
    }
    CU_ASSERT(used > 2400); /* 1 - 1/e of 4096 ~ 2589 for a random map; the identity mod 2^12 gives 4 */
    /* the file's order is still the file's */
    o.hash_bits = 20;
    CU_ASSERT_EQUAL(fsgd_libsvm_parse("1 5:1 3:1\n", 10, &o, FSGD_TEST_AT("h", NULL), &m, err, sizeof err),
                    FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "h:1:7: expected a feature index > 5");
    fsgd_csr_free(&m);
    /* threads: the same rows as one thread */
    const char *path = fsgd_test_tmp("hashed.svm");
    char big[1 << 16];
    size_t n = 0;
    for (int r = 0; r < 1000; r++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%d %d:1 %d:2 %d:1\n", r & 1, r + 1, r + 7, 3 * r + 9);
    fsgd_test_write_file(path, big, n);
    fsgd_csr_t a = {0}, b = {0};
    o = (fsgd_libsvm_opts_t){.hash_bits = 6, .read_buf = 1024};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(path, &o, &a, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load_threads(path, &o, 3, &b, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(a.nnz, b.nnz);
    CU_ASSERT_EQUAL(memcmp(a.col, b.col, a.nnz * sizeof *a.col), 0);
    CU_ASSERT(a.max_col <= 64);
    fsgd_csr_free(&a);
    fsgd_csr_free(&b);
}

static void test_load_threads(void)
{
    FSGD_TEST_DATA(path, "a9a");
    char err[512], err1[512];
    fsgd_csr_t one = {0};
    fsgd_libsvm_stats_t s1, sn;
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(path, NULL, &one, &s1, err, sizeof err), 0);
    for (int t = 2; t <= 3; t++) {
        for (size_t block = 4096; block <= (size_t)64 << 20; block *= 16384) {
            fsgd_libsvm_opts_t o = {.read_buf = block};
            fsgd_csr_t many = {0};
            CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load_threads(path, &o, t, &many, &sn, err, sizeof err), 0);
            CU_ASSERT_TRUE(same_csr(&one, &many));
            CU_ASSERT_EQUAL(sn.lines, s1.lines);
            CU_ASSERT_EQUAL(sn.rows, s1.rows);
            CU_ASSERT_EQUAL(sn.bytes, s1.bytes);
            fsgd_csr_free(&many);
        }
    }
    /* a bad row late in the file: the same message, the rows before it kept */
    const char *bad = fsgd_test_tmp("late_bad.svm");
    FILE *f = fopen(bad, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 3000; i++)
        fprintf(f, "%s 1:%d 7:0.5\n", i % 2 ? "+1" : "-1", i % 5 + 1);
    fprintf(f, "+1 3:1 2:1\n+1 1:1\n");
    fclose(f);
    fsgd_csr_t a = {0}, b = {0};
    int r1 = fsgd_libsvm_load(bad, NULL, &a, &s1, err1, sizeof err1);
    fsgd_libsvm_opts_t o = {.read_buf = 8192};
    int r2 = fsgd_libsvm_load_threads(bad, &o, 3, &b, &sn, err, sizeof err);
    CU_ASSERT_TRUE(r1 < 0);
    CU_ASSERT_EQUAL(r2, r1);
    CU_ASSERT_STRING_EQUAL(err, err1);
    FSGD_ASSERT_CONTAINS(err, ":3001:");
    CU_ASSERT_TRUE(same_csr(&a, &b));
    fsgd_csr_free(&a);
    fsgd_csr_free(&b);
    /* a line longer than two blocks between short ones: its block grows
     * while the next is being read, the rows are those of one thread */
    const char *wide = fsgd_test_tmp("wide_line.svm");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f = fopen(wide, "w"));
    for (int i = 0; i < 500; i++)
        fprintf(f, "%s 1:%d 7:0.5\n", i % 2 ? "+1" : "-1", i % 5 + 1);
    fputs("+1", f);
    for (int k = 1; k <= 2000; k++)
        fprintf(f, " %d:0.25", k);
    fputs("\n", f);
    for (int i = 0; i < 500; i++)
        fprintf(f, "-1 2:%d\n", i % 3 + 1);
    fclose(f);
    fsgd_csr_t w1 = {0}, wn = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(wide, NULL, &w1, &s1, err1, sizeof err1), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load_threads(wide, &o, 2, &wn, &sn, err, sizeof err), 0);
    CU_ASSERT_EQUAL(w1.n_rows, 1001);
    CU_ASSERT_TRUE(same_csr(&w1, &wn));
    CU_ASSERT_EQUAL(sn.lines, s1.lines);
    fsgd_csr_free(&w1);
    fsgd_csr_free(&wn);
    fsgd_csr_free(&one);
}

/* Issue 40 item 1: a 0-byte file loaded with threads gave a parse of no
 * part at all, and parse_part read an unset part (a segfault). It loads as
 * no rows, as the one-thread reader does. */
static void test_load_threads_empty(void)
{
    const char *path = fsgd_test_tmp("empty.svm");
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, "", 0), 0);
    char err[512];
    for (int t = 1; t <= 3; t++) {
        for (int binary = 0; binary <= 1; binary++) {
            fsgd_libsvm_opts_t o = {.binary = binary};
            fsgd_csr_t rows = {0};
            fsgd_libsvm_stats_t st;
            CU_ASSERT_EQUAL(fsgd_libsvm_load_threads(path, &o, t, &rows, &st, err, sizeof err), 0);
            CU_ASSERT_EQUAL(rows.n_rows, 0);
            CU_ASSERT_EQUAL(st.rows, 0);
            CU_ASSERT_EQUAL(st.lines, 0);
            fsgd_csr_free(&rows);
        }
    }
}

/* row_weights: "label:weight" gives the row its weight (1 when absent),
 * the label its value; a bad weight names file:line:column; without the
 * option the same row is an error that names it; a row the reader drops
 * (skip_bad) drops its weight too, and the threaded loader joins its
 * parts' weights in the rows' order. */
static void test_row_weights(void)
{
    char err[512];
    fsgd_libsvm_weights_t w = {0};
    fsgd_libsvm_opts_t o = {.row_weights = 1, .weights = &w};
    fsgd_csr_t m = {0};
    CU_ASSERT_EQUAL(parse("+1:2.5 3:1\n-1 2:1\n0:0 qid:3 5:1 # c\n2:1e-1 1:1\n", &o, &m, NULL, err, sizeof err), 4);
    CU_ASSERT_EQUAL_FATAL(w.n, 4);
    CU_ASSERT_TRUE(w.any);
    const double want_w[] = {2.5, 1, 0, 0.1}, want_l[] = {1, -1, 0, 2};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_DOUBLE_EQUAL(w.w[i], want_w[i], 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(m.label[i], want_l[i], 0);
    }
    fsgd_csr_free(&m);
    fsgd_libsvm_weights_free(&w);
    /* weights all 1 are not "any" */
    CU_ASSERT_EQUAL(parse("1:1 2:1\n-1 3:1\n", &o, &m, NULL, err, sizeof err), 2);
    CU_ASSERT_EQUAL(w.n, 2);
    CU_ASSERT_FALSE(w.any);
    fsgd_csr_free(&m);
    fsgd_libsvm_weights_free(&w);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"1 2:1\n+1:x 3:1\n", "t:2:4: expected a row weight (a finite number >= 0) after 'label:', got 'x'"},
        {"-1:-2 3:1\n", "t:1:4: expected a row weight (a finite number >= 0) after 'label:', got '-2'"},
        {"1:nan 3:1\n", "t:1:3: expected a row weight"},
        {"1:2:3 3:1\n", "t:1:3: expected a row weight"},
        {"1: 3:1\n", "t:1:3: expected a row weight"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CU_ASSERT_EQUAL(parse(bad[i].text, &o, &m, NULL, err, sizeof err), FSGD_E_PARSE);
        FSGD_ASSERT_CONTAINS(err, bad[i].want);
        CU_ASSERT_EQUAL(w.n, m.n_rows); /* no weight of a row not committed */
        fsgd_csr_free(&m);
        fsgd_libsvm_weights_free(&w);
    }
    fsgd_libsvm_opts_t plain = {0};
    CU_ASSERT_EQUAL(parse("+1:2 3:1\n", &plain, &m, NULL, err, sizeof err), FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "t:1:1: expected a label (a finite number; no label? label:weight needs --row-weights), got '+1:2'");
    fsgd_csr_free(&m);
    /* skip_bad: the bad row and its weight both left out */
    o.skip_bad = 1;
    CU_ASSERT_EQUAL(parse("1:3 1:1\n1:x 2:1\n-1:4 2:1\n", &o, &m, NULL, err, sizeof err), 2);
    CU_ASSERT_EQUAL_FATAL(w.n, 2);
    CU_ASSERT_DOUBLE_EQUAL(w.w[0], 3, 0);
    CU_ASSERT_DOUBLE_EQUAL(w.w[1], 4, 0);
    fsgd_csr_free(&m);
    fsgd_libsvm_weights_free(&w);
    o.skip_bad = 0;
    /* threads: the weights of every part, in the rows' order */
    const char *path = fsgd_test_tmp("weighted.svm");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 5000; i++)
        fprintf(f, "%s:%d %d:1\n", i % 2 ? "+1" : "-1", i % 7, i % 50 + 1);
    fclose(f);
    for (int t = 1; t <= 3; t++) {
        fsgd_libsvm_opts_t to = {.row_weights = 1, .weights = &w, .read_buf = 8192, .binary = 1};
        fsgd_libsvm_stats_t st;
        CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load_threads(path, &to, t, &m, &st, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(m.n_rows, 5000);
        CU_ASSERT_EQUAL_FATAL(w.n, 5000);
        int ok = 1;
        for (int i = 0; i < 5000; i++)
            ok &= w.w[i] == i % 7 && m.label[i] == (i % 2 ? 1 : -1);
        CU_ASSERT_TRUE(ok);
        fsgd_csr_free(&m);
        fsgd_libsvm_weights_free(&w);
    }
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"threads: same rows, counts and errors as one thread", test_load_threads},
        {"threads: a 0-byte file is no rows, not a crash", test_load_threads_empty},
        {"hash_bits: indices hashed, shared columns summed, order still checked", test_hash_bits},
        {"row_weights: label:weight, strict errors, skip_bad, threads in order", test_row_weights},
        {"grammar: labels, qid, comments, blanks, tabs", test_basic},
        {"CRLF equals LF", test_crlf},
        {"errors name file:line:column", test_errors},
        {"index limits, zero_based, max_dim", test_index_limits},
        {"allow_unsorted sorts and rejects duplicates", test_unsorted},
        {"skip_bad counts and keeps locations", test_skip_bad},
        {"strict mode stops and stays stopped", test_strict_sticky},
        {"parse(): source name, first line, stats", test_parse_source},
        {"chunked reads equal one parse", test_chunked},
        {"long rows grow the buffer", test_long_row},
        {"numbers equal strtod", test_numbers_vs_strtod},
        {"indices a word at a time, values of 1 alone", test_digits_fast_path},
        {"real datasets load (w8a blank line, ijcnn1 -1.0)", test_real_files},
        {NULL, NULL},
    };
    static const fsgd_test_case_t skl_cases[] = {
        {"agrees with sklearn on the real datasets", test_sklearn_real},
        {"sklearn's own test files: valid agree, invalid rejected", test_sklearn_own_files},
        {NULL, NULL},
    };
    fsgd_test_suite("libsvm", cases);
    fsgd_test_suite("libsvm-sklearn", skl_cases);
}
