/* Delimited-text input (fsgd/delim.h): specs round-trip, rows hash as
 * documented, fields sharing a column merge, collisions are counted, and
 * malformed rows name file:line:col. */
#include <string.h>

#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "testlib.h"
#include "data_testing.h"

static void test_spec_parse_format(void)
{
    fsgd_delim_spec_t s, back;
    char err[512], text[FSGD_DELIM_SPEC_MAX];
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("criteo", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL(s.sep, '\t');
    CU_ASSERT_EQUAL(s.n_cols, 40);
    CU_ASSERT_EQUAL(s.label_col, 0);
    CU_ASSERT_EQUAL(s.kind[13], FSGD_COL_NUM);
    CU_ASSERT_EQUAL(s.kind[14], FSGD_COL_CAT);
    CU_ASSERT_EQUAL(s.bits, 24);
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_format(&s, text, sizeof text), 0);
    CU_ASSERT_STRING_EQUAL(text, "tsv:label,num*13,cat*26:header=0:bits=24:seed=0");
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("csv:skip,label,cat*3,num:header=1:bits=12:seed=7", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL(s.sep, ',');
    CU_ASSERT_EQUAL(s.label_col, 1);
    CU_ASSERT_EQUAL(s.n_cols, 6);
    CU_ASSERT_EQUAL(s.header, 1);
    CU_ASSERT_EQUAL(s.seed, 7);
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_format(&s, text, sizeof text), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse(text, &back, err, sizeof err), 0);
    CU_ASSERT_EQUAL(memcmp(&s, &back, sizeof s), 0);
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("tsv:cat*3", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "no label column");
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("tsv:label,kat", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "'kat' is not label, num, cat or skip");
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("tsv:label,label", &s, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("tsv:label,cat:bits=33", &s, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("svm:label", &s, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("tsv:label,cat*0", &s, err, sizeof err), FSGD_E_ARG);
}

/* A row's columns are the documented hashes, sorted, with num fields
 * bucketed and a shared column merged into one entry of value 2. */
static void test_rows_hash_as_documented(void)
{
    fsgd_delim_spec_t s;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("tsv:label,num,cat,cat,skip:bits=20", &s, err, sizeof err), 0);
    const char *path = fsgd_test_tmp("rows.tsv");
    const char *text = "1\t100\tab\tcd\tzz\n"
                       "0\t\t\tcd\tzz\r\n"
                       "\n"
                       "-1\t2\tab\tab\t\n";
    fsgd_test_write_file(path, text, strlen(text));
    fsgd_csr_t m = {0};
    fsgd_delim_stats_t st;
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_load(path, &s, 1, &m, &st, err, sizeof err), 0);
    CU_ASSERT_EQUAL(m.n_rows, 3);
    CU_ASSERT_EQUAL(st.lines, 4);
    CU_ASSERT_EQUAL(m.label[0], 1);
    CU_ASSERT_EQUAL(m.label[2], -1);
    /* row 0: num 100 -> floor(ln(100)^2) = 21 */
    uint32_t want[3] = {fsgd_delim_hash(&s, 1, "b:21", 4), fsgd_delim_hash(&s, 2, "ab", 2),
                        fsgd_delim_hash(&s, 3, "cd", 2)};
    CU_ASSERT_EQUAL_FATAL(m.row_ptr[1], 3);
    for (int i = 0; i < 3; i++) {
        int found = 0;
        for (int k = 0; k < 3; k++)
            found |= m.col[k] == want[i];
        CU_ASSERT_TRUE(found);
        CU_ASSERT_EQUAL(m.val[i], 1.0f);
    }
    CU_ASSERT_TRUE(m.col[0] < m.col[1] && m.col[1] < m.col[2]);
    /* row 1: empty fields are missing; only cd */
    CU_ASSERT_EQUAL(m.row_ptr[2] - m.row_ptr[1], 1);
    CU_ASSERT_EQUAL(m.col[m.row_ptr[1]], want[2]);
    /* row 2: "ab" in columns 2 and 3 hashes with different seeds: two entries */
    CU_ASSERT_EQUAL(m.row_ptr[3] - m.row_ptr[2], 3);
    CU_ASSERT_EQUAL(st.slots_used, 5); /* b:21, ab@2, cd@3, b:2, ab@3 (distinct unless they collide) */
    CU_ASSERT_EQUAL(st.slots_collided, 0);
    fsgd_csr_free(&m);

    /* bits=1: two columns for 3+ distinct values, so some column is shared;
     * fields of one row that share it merge into value 2 */
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("csv:label,cat*4:bits=1", &s, err, sizeof err), 0);
    text = "1,a,b,c,d\n";
    fsgd_test_write_file(path, text, strlen(text));
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_load(path, &s, 1, &m, &st, err, sizeof err), 0);
    CU_ASSERT_TRUE(m.nnz >= 1 && m.nnz <= 2);
    float sum = 0;
    for (size_t i = 0; i < m.nnz; i++)
        sum += m.val[i];
    CU_ASSERT_EQUAL(sum, 4.0f);
    CU_ASSERT_TRUE(st.slots_collided >= 1);
    CU_ASSERT_EQUAL(st.slots_used, m.nnz);
    fsgd_csr_free(&m);
}

static void expect_error(const char *spec_text, const char *text, int code, const char *msg)
{
    fsgd_delim_spec_t s;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse(spec_text, &s, err, sizeof err), 0);
    const char *path = fsgd_test_tmp("bad.tsv");
    fsgd_test_write_file(path, text, strlen(text));
    fsgd_csr_t m = {0};
    CU_ASSERT_EQUAL(fsgd_delim_load(path, &s, 0, &m, NULL, err, sizeof err), code);
    FSGD_ASSERT_CONTAINS(err, path);
    FSGD_ASSERT_CONTAINS(err, msg);
    fsgd_csr_free(&m);
}

static void test_malformed_rows(void)
{
    expect_error("tsv:label,num,cat", "1\t2\tx\n0\t3\n", FSGD_E_PARSE, ":2: 2 fields, expected 3");
    expect_error("tsv:label,num,cat", "1\t2\tx\t\n", FSGD_E_PARSE, ":1: more than 3 fields");
    expect_error("tsv:label,num,cat", "1\t2\tx\n1\tabc\tx\n", FSGD_E_PARSE,
                 ":2:3: column 2 (num): expected a number, got 'abc'");
    expect_error("tsv:label,num,cat", "yes\t2\tx\n", FSGD_E_PARSE,
                 ":1:1: column 1 (label): expected a number, got 'yes'");
    expect_error("csv:label,cat:header=1", "click,site\n1,a\n,b\n", FSGD_E_PARSE,
                 ":3:1: column 1 (label): expected a number, got ''");
    fsgd_delim_spec_t s;
    char err[512];
    fsgd_csr_t m = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("criteo", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_delim_load(fsgd_test_tmp("none.tsv"), &s, 0, &m, NULL, err, sizeof err), FSGD_E_IO);
    FSGD_ASSERT_CONTAINS(err, "none.tsv");
}

/* Fields the fuzzer (fuzz_rowfmt) found mishandled: a NUL byte inside a label
 * or num field was cut off by strtod and the rest ignored ("1\0x" read as 1);
 * a num field below LLONG_MIN was converted to long long (undefined). */
static void test_nul_and_huge_negative_fields(void)
{
    fsgd_delim_spec_t s;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("csv:label,num,cat", &s, err, sizeof err), 0);
    static const char label_nul[] = "1\0x,3,a\n", num_nul[] = "1,3\0x,a\n";
    fsgd_csr_t m = {0};
    CU_ASSERT_EQUAL(fsgd_delim_parse_rows(label_nul, sizeof label_nul - 1, &s, "t", 1, &m, err, sizeof err),
                    FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "t:1:1: column 1 (label): expected a number");
    CU_ASSERT_EQUAL(fsgd_delim_parse_rows(num_nul, sizeof num_nul - 1, &s, "t", 1, &m, err, sizeof err),
                    FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "t:1:3: column 2 (num): expected a number");
    CU_ASSERT_EQUAL(m.n_rows, 0);
    /* A NUL in a cat field is part of the value. */
    static const char cat_nul[] = "1,3,a\0b\n";
    CU_ASSERT_EQUAL(fsgd_delim_parse_rows(cat_nul, sizeof cat_nul - 1, &s, "t", 1, &m, err, sizeof err), 1);
    CU_ASSERT_EQUAL(m.col[m.row_ptr[0]] == fsgd_delim_hash(&s, 2, "a\0b", 3) ||
                        m.col[m.row_ptr[0] + 1] == fsgd_delim_hash(&s, 2, "a\0b", 3),
                    1);
    fsgd_csr_free(&m);

    /* Below LLONG_MIN: one bucket, LLONG_MIN's; -2^63 itself is in range. */
    const char *text = "1,-1e300,a\n1,-9223372036854775808,a\n1,-1e19,a\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_parse_rows(text, strlen(text), &s, "t", 1, &m, err, sizeof err), 3);
    uint32_t want = fsgd_delim_hash(&s, 1, "b:-9223372036854775808", 22);
    for (size_t r = 0; r < 3; r++) {
        int found = 0;
        for (uint64_t j = m.row_ptr[r]; j < m.row_ptr[r + 1]; j++)
            found |= m.col[j] == want;
        CU_ASSERT_TRUE(found);
    }
    fsgd_csr_free(&m);
}

/* interactions=A*B[*C]: one feature per present cross, the same column for
 * the same values, another for other values, none when a field is empty;
 * the spec round-trips; bad terms are named. */
/* Crosses by name: a header's fields first, then Criteo's I<k>/C<k> by
 * kind; numbers as written; terms without '*' left for add_crosses to
 * name; unknown or doubled names FSGD_E_PARSE naming term, name and file. */
static void test_crosses_by_name(void)
{
    fsgd_delim_spec_t c, h;
    char err[512], out[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("criteo", &c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_delim_crosses_by_name(&c, "C1*C2,I3*C7*40,15*16,I1*C26", NULL, "t", out, sizeof out, err,
                                               sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "15*16,4*21*40,15*16,2*40");
    CU_ASSERT_EQUAL(fsgd_delim_crosses_by_name(&c, "ab,C1", NULL, "t", out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "ab,C1"); /* not crosses: fsgd_delim_spec_add_crosses says so */
    CU_ASSERT_EQUAL(fsgd_delim_crosses_by_name(&c, "C1*C27", NULL, "t", out, sizeof out, err, sizeof err),
                    FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "interactions: 'C1*C27': no column named 'C27' among Criteo's names I1..I13, C1..C26");
    CU_ASSERT_EQUAL(fsgd_delim_crosses_by_name(&c, "I0*C1", NULL, "t", out, sizeof out, err, sizeof err),
                    FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "no column named 'I0'");
    CU_ASSERT_EQUAL(fsgd_delim_crosses_by_name(&c, "C1*C2", NULL, "t", out, 4, err, sizeof err), FSGD_E_RANGE);

    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("csv:skip,label,num,cat*2:header=1", &h, err, sizeof err), 0);
    const char *hdr = "id,y,age,C2,dev\r";
    CU_ASSERT_EQUAL(fsgd_delim_crosses_by_name(&h, "age*dev,C2*C1,I1*C2*5", hdr, "f.csv", out,
                                               sizeof out, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "3*5,4*4,3*4*5"); /* the header's C2 is column 4; C1 Criteo's first cat */
    CU_ASSERT_EQUAL(fsgd_delim_crosses_by_name(&h, "age*devv", hdr, "f.csv", out, sizeof out, err,
                                               sizeof err), FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "interactions: 'age*devv': no column named 'devv' in the header of f.csv (id,y,age,C2,dev");
    const char *twice = "id,y,a,a,dev";
    CU_ASSERT_EQUAL(fsgd_delim_crosses_by_name(&h, "a*dev", twice, "f.csv", out, sizeof out, err,
                                               sizeof err), FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "two columns of f.csv's header are named 'a'");

    /* the header line of a file, without its CR LF; a line past cap is an error */
    const char *path = fsgd_test_tmp("named.csv");
    const char *text = "id,y,age\r\n1,2,3\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, text, strlen(text)), 0);
    char line[64];
    size_t len = 99;
    CU_ASSERT_EQUAL(fsgd_delim_read_header(path, line, sizeof line, &len, err, sizeof err), 0);
    CU_ASSERT_EQUAL(len, 8);
    CU_ASSERT_STRING_EQUAL(line, "id,y,age");
    CU_ASSERT_EQUAL(fsgd_delim_read_header(path, line, 5, &len, err, sizeof err), FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, ":1: the header is longer than 5 bytes");
    CU_ASSERT_EQUAL(fsgd_delim_read_header(fsgd_test_tmp("no/such.csv"), line, sizeof line, &len, err, sizeof err),
                    FSGD_E_IO);
}

static void test_crosses(void)
{
    fsgd_delim_spec_t s, back;
    char err[512], text[FSGD_DELIM_SPEC_MAX];
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("tsv:label,cat,cat,num:bits=20:interactions=2*3,2*3*4", &s, err,
                                                sizeof err), 0);
    CU_ASSERT_EQUAL(s.n_crosses, 2);
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_format(&s, text, sizeof text), 0);
    CU_ASSERT_STRING_EQUAL(text, "tsv:label,cat*2,num:header=0:bits=20:seed=0:interactions=2*3,2*3*4");
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse(text, &back, err, sizeof err), 0);
    CU_ASSERT_EQUAL(memcmp(&s, &back, sizeof s), 0);
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("tsv:label,cat:interactions=1*2", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "column 1 is the label");
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("tsv:label,cat:interactions=2*5", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "'2*5' is not A*B or A*B*C");
    CU_ASSERT_EQUAL(fsgd_delim_spec_parse("tsv:label,cat:interactions=2", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "crosses fewer than 2 columns");

    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("tsv:label,cat,cat,num:bits=20:interactions=2*3", &s, err,
                                                sizeof err), 0);
    fsgd_delim_spec_t lin = s;
    lin.n_crosses = 0;
    const char *rows = "1\tx\ty\t5\n0\tx\ty\t7\n1\tx\tz\t5\n0\tx\t\t5\n";
    fsgd_csr_t m = {0}, l = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_parse_rows(rows, strlen(rows), &s, "r", 1, &m, err, sizeof err), 4);
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_parse_rows(rows, strlen(rows), &lin, "r", 1, &l, err, sizeof err), 4);
    for (size_t r = 0; r < 3; r++)
        CU_ASSERT_EQUAL(m.row_ptr[r + 1] - m.row_ptr[r], l.row_ptr[r + 1] - l.row_ptr[r] + 1);
    CU_ASSERT_EQUAL(m.row_ptr[4] - m.row_ptr[3], l.row_ptr[4] - l.row_ptr[3]); /* an empty field: no cross */
    /* the cross column of a row: its one column that the linear row lacks */
    uint32_t cx[3];
    for (size_t r = 0; r < 3; r++) {
        for (uint64_t j = m.row_ptr[r]; j < m.row_ptr[r + 1]; j++) {
            int in_lin = 0;
            for (uint64_t k = l.row_ptr[r]; k < l.row_ptr[r + 1]; k++)
                in_lin |= l.col[k] == m.col[j];
            if (!in_lin)
                cx[r] = m.col[j];
        }
    }
    CU_ASSERT_EQUAL(cx[0], cx[1]);     /* (x, y) twice */
    CU_ASSERT_NOT_EQUAL(cx[0], cx[2]); /* (x, z) */
    fsgd_csr_free(&m);
    fsgd_csr_free(&l);
    /* the load counts fields and crosses (fsgd train's lr auto takes their share) */
    const char *path = fsgd_test_tmp("crosses.tsv");
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, rows, strlen(rows)), 0);
    fsgd_delim_stats_t st;
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_load(path, &s, 0, &m, &st, err, sizeof err), 0);
    CU_ASSERT_EQUAL(st.feature_entries, 11);
    CU_ASSERT_EQUAL(st.cross_entries, 3);
    fsgd_csr_free(&m);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"specs parse, format and round-trip; bad specs named", test_spec_parse_format},
        {"rows hash as documented; shared columns merge; collisions counted", test_rows_hash_as_documented},
        {"malformed rows name file:line:col", test_malformed_rows},
        {"interactions: crosses of columns, round-trip, errors", test_crosses},
        {"interactions by name: a header's, Criteo's I/C, errors; the header line", test_crosses_by_name},
        {"a NUL in a label or num field is an error; num below LLONG_MIN buckets as LLONG_MIN",
         test_nul_and_huge_negative_fields},
        {NULL, NULL},
    };
    fsgd_test_suite("delim", cases);
}
