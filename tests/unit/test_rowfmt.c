/* The job's row format (fsgd/rowfmt.h): format/hash_bits/dim checks name
 * the job key; a buffer parses as the file's rows would (no header, line
 * numbers from first_line); skip_bad skips and reports a bad delimited row
 * alone, as LIBSVM does; the model's input spec is canonical. */
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/loss.h"
#include "fsgd/rowfmt.h"
#include "testlib.h"

static void test_init_and_dim(void)
{
    fsgd_rowfmt_t f;
    char err[512];
    uint64_t dim;
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "libsvm", 0, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(f.hashed, 0);
    CU_ASSERT_EQUAL(fsgd_rowfmt_dim(&f, 0, &dim, err, sizeof err), 0);
    CU_ASSERT_EQUAL(dim, 0);
    CU_ASSERT_EQUAL(fsgd_rowfmt_dim(&f, 123, &dim, err, sizeof err), 0);
    CU_ASSERT_EQUAL(dim, 123);
    /* hashed LIBSVM (--bits): 2^12 columns, recorded for predict, read back */
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "libsvm", 12, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(f.hashed, 0);
    CU_ASSERT_EQUAL(f.opts.hash_bits, 12);
    CU_ASSERT_EQUAL(fsgd_rowfmt_dim(&f, 0, &dim, err, sizeof err), 0);
    CU_ASSERT_EQUAL(dim, 4096);
    CU_ASSERT_EQUAL(fsgd_rowfmt_dim(&f, 100, &dim, err, sizeof err), FSGD_E_ARG);
    char rec[64];
    fsgd_rowfmt_input(&f, rec, sizeof rec);
    CU_ASSERT_STRING_EQUAL(rec, "libsvm:bits=12");
    const uint32_t plain_id = f.block_id;
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, rec, 0, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(f.opts.hash_bits, 12);
    CU_ASSERT_EQUAL(f.block_id, plain_id);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "libsvm", 0, 0, err, sizeof err), 0);
    CU_ASSERT_NOT_EQUAL(f.block_id, plain_id); /* hashed rows are other columns: other blocks */
    CU_ASSERT_EQUAL(fsgd_rowfmt_init(&f, "libsvm:bits=40", 0, 0, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "is not libsvm:bits=B");
    CU_ASSERT_EQUAL(fsgd_rowfmt_init(&f, "tsv:label,kat", 0, 0, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "format: ");
    FSGD_ASSERT_CONTAINS(err, "'kat' is not label, num, cat or skip");
    CU_ASSERT_EQUAL(fsgd_rowfmt_init(&f, "criteo", 33, 0, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "hash_bits: 33");

    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "criteo", 18, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(f.hashed, 1);
    CU_ASSERT_EQUAL(f.spec.bits, 18);
    CU_ASSERT_EQUAL(fsgd_rowfmt_dim(&f, 0, &dim, err, sizeof err), 0);
    CU_ASSERT_EQUAL(dim, 1u << 18);
    CU_ASSERT_EQUAL(fsgd_rowfmt_dim(&f, 1u << 18, &dim, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_rowfmt_dim(&f, 1000, &dim, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "dim 1000: a hashed format has 2^18 = 262144 columns (set hash_bits, not dim)");
    char in[FSGD_DELIM_SPEC_MAX];
    fsgd_rowfmt_input(&f, in, sizeof in);
    CU_ASSERT_STRING_EQUAL(in, "tsv:label,num*13,cat*26:header=0:bits=18:seed=0");
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "libsvm", 0, 0, err, sizeof err), 0);
    fsgd_rowfmt_input(&f, in, sizeof in);
    CU_ASSERT_STRING_EQUAL(in, "");
}

/* A header=1 spec: the file loses its first line, a buffer never does. */
static void test_buffer_rows_match_file(void)
{
    fsgd_rowfmt_t f;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "csv:label,cat,num:header=1", 12, 0, err, sizeof err), 0);
    const char *file = "click,site,n\n1,a,3\n0,b,\n";
    const char *path = fsgd_test_tmp("h.csv");
    fsgd_test_write_file(path, file, strlen(file));
    fsgd_csr_t a = {0}, b = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_load(&f, path, 1, &a, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(a.n_rows, 2);
    const char *rows = "1,a,3\n0,b,\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_parse(&f, rows, 6, FSGD_TEST_AT("m", NULL), &b, err, sizeof err), 1);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_parse(&f, rows + 6, 5, FSGD_TEST_AT("m", NULL), &b, err, sizeof err), 1);
    CU_ASSERT_EQUAL_FATAL(b.n_rows, 2);
    CU_ASSERT_EQUAL(a.nnz, b.nnz);
    CU_ASSERT_EQUAL(memcmp(a.row_ptr, b.row_ptr, 3 * sizeof *a.row_ptr), 0);
    CU_ASSERT_EQUAL(memcmp(a.col, b.col, a.nnz * sizeof *a.col), 0);
    CU_ASSERT_EQUAL(memcmp(a.label, b.label, 2 * sizeof *a.label), 0);
    /* the header sent as a row is a malformed row, named by src:line:col */
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse(&f, file, 12, FSGD_TEST_AT("topic t partition 1 offset 9", NULL), &b, err,
                                      sizeof err),
                    FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "topic t partition 1 offset 9:1:1: column 1 (label): expected a number, got 'click'");
    const fsgd_parse_ctx_t line7 = {.src = "f.csv", .first_line = 7};
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse(&f, "1,a,x", 5, &line7, &b, err, sizeof err), FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "f.csv:7:5: column 3 (num): expected a number, got 'x'");
    CU_ASSERT_EQUAL(b.n_rows, 2); /* no partial row */
    fsgd_csr_free(&a);
    fsgd_csr_free(&b);
}

/* skip_bad: the bad line alone is skipped, counted and kept, in both formats. */
static void test_skip_bad(void)
{
    fsgd_rowfmt_t f;
    char err[512];
    fsgd_csr_t m = {0};
    fsgd_libsvm_stats_t st;
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "tsv:label,num,cat", 10, 1, err, sizeof err), 0);
    const char *buf = "1\t2\ta\n1\tzz\tb\n\n0\t\tc\n1\t2\n";
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse(&f, buf, strlen(buf), FSGD_TEST_AT("src", &st), &m, err, sizeof err), 2);
    CU_ASSERT_EQUAL(m.n_rows, 2);
    CU_ASSERT_EQUAL(st.bad_rows, 2);
    CU_ASSERT_EQUAL(st.rows, 2);
    FSGD_ASSERT_CONTAINS(st.first_bad[0], "src:2:3: column 2 (num): expected a number, got 'zz'");
    FSGD_ASSERT_CONTAINS(st.first_bad[1], "src:5: 2 fields, expected 3");
    fsgd_csr_clear(&m);
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "libsvm", 0, 1, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse(&f, "1 3:x\n-1 2:1\n", 13, FSGD_TEST_AT("src", &st), &m, err, sizeof err), 1);
    CU_ASSERT_EQUAL(st.bad_rows, 1);
    FSGD_ASSERT_CONTAINS(st.first_bad[0], "src:1:");
    fsgd_csr_free(&m);
}

/* row_weights=1 (fsgd run --row-weights): a buffer's rows come out weighted
 * (the weight in the label, fsgd/rowlabel.h: +w positive, -w negative),
 * rows of weight 0 dropped; the model's input spec leaves the key out, as it
 * says how rows are read, not what the model is. A label set of such rows
 * keeps their classes. */
static void test_row_weights(void)
{
    fsgd_rowfmt_t f;
    char err[512], in[128];
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "libsvm:row_weights=1:bits=12", 0, 0, err, sizeof err), 0);
    CU_ASSERT_TRUE(f.opts.row_weights);
    fsgd_rowfmt_input(&f, in, sizeof in);
    CU_ASSERT_STRING_EQUAL(in, "libsvm:bits=12");
    fsgd_rowfmt_t plain;
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&plain, "libsvm:bits=12", 0, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(f.block_id, plain.block_id); /* the same rows on NAME.data */
    fsgd_csr_t m = {0};
    const char *rows = "+1:2.5 3:1\n-1:4 2:1\n1:0 5:1\n0 7:1\n-1 1:1\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_parse(&f, rows, strlen(rows), FSGD_TEST_AT("m", NULL), &m, err, sizeof err), 4);
    const double want[] = {2.5, -4, -1, -1}; /* weight 0 dropped; a 0 label is the negative class */
    for (int i = 0; i < 4; i++)
        CU_ASSERT_DOUBLE_EQUAL(m.label[i], want[i], 0);
    fsgd_label_set_t ls = {.classes = 1};
    fsgd_label_set_add(&ls, m.label, m.n_rows);
    char why[200];
    CU_ASSERT_EQUAL(ls.n, 2);
    CU_ASSERT_EQUAL(fsgd_loss_check_labels(FSGD_LOSS_LOGISTIC, &ls, why, sizeof why), 0);
    fsgd_csr_free(&m);
    /* without the key, label:weight is a bad row naming the option */
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse(&plain, rows, strlen(rows), FSGD_TEST_AT("m", NULL), &m, err, sizeof err),
                    FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "m:1:1: expected a label (a finite number; no label? label:weight needs --row-weights)");
    fsgd_csr_free(&m);
    CU_ASSERT_EQUAL(fsgd_rowfmt_init(&f, "libsvm:row_weights=2", 0, 0, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "unknown libsvm key 'row_weights=2'");
}

/* The weight keys fsgd run folds into a job's format (fsgd_train_fold_weights):
 * VW importance (row_weights=1) times the class's weight (class_weight=P,N)
 * in each parsed row's label, rows of weight 0 dropped, in any format; the
 * model's input and the row blocks' format id as without the keys. Without
 * row_weights a VW row's importance is refused, not trained at weight 1. */
static void test_weight_keys(void)
{
    fsgd_rowfmt_t f, plain;
    char err[512], in[128], in2[128];
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "vw:row_weights=1:class_weight=5,0.5:bits=12", 0, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&plain, "vw:bits=12", 0, 0, err, sizeof err), 0);
    CU_ASSERT_TRUE(f.vw && f.weigh_rows && fsgd_rowfmt_weighs(&f));
    CU_ASSERT_FALSE(fsgd_rowfmt_weighs(&plain));
    CU_ASSERT_DOUBLE_EQUAL(f.class_pos, 5, 0);
    CU_ASSERT_DOUBLE_EQUAL(f.class_neg, 0.5, 0);
    fsgd_rowfmt_input(&f, in, sizeof in);
    fsgd_rowfmt_input(&plain, in2, sizeof in2);
    CU_ASSERT_STRING_EQUAL(in, in2);
    CU_ASSERT_EQUAL(f.block_id, plain.block_id);
    fsgd_csr_t m = {0};
    const char *rows = "1 2 |a x\n-1 |a y\n1 0 |a z\n-1 3 t|a w\n1 |a v\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_parse(&f, rows, strlen(rows), FSGD_TEST_AT("m", NULL), &m, err, sizeof err), 4);
    const double want[] = {10, -0.5, -1.5, 5}; /* importance x class weight; weight 0 dropped */
    for (int i = 0; i < 4; i++)
        CU_ASSERT_DOUBLE_EQUAL(m.label[i], want[i], 1e-12);
    CU_ASSERT_EQUAL(m.nnz, 4);
    fsgd_csr_free(&m);
    CU_ASSERT_EQUAL(fsgd_rowfmt_parse(&plain, rows, strlen(rows), FSGD_TEST_AT("m", NULL), &m, err, sizeof err),
                    FSGD_E_UNSUPPORTED);
    FSGD_ASSERT_CONTAINS(err, "m: rows with importance weights");
    fsgd_csr_free(&m);
    /* class weights alone, on LIBSVM and delimited rows */
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "libsvm:class_weight=2,0.25", 0, 0, err, sizeof err), 0);
    CU_ASSERT_TRUE(fsgd_rowfmt_weighs(&f) && !f.opts.row_weights);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_parse(&f, "+1 3:1\n0 2:1\n", 13, FSGD_TEST_AT("m", NULL), &m, err, sizeof err),
                          2);
    CU_ASSERT_DOUBLE_EQUAL(m.label[0], 2, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.label[1], -0.25, 0);
    fsgd_csr_free(&m);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&f, "tsv:class_weight=3,1:label,cat", 10, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_parse(&f, "1\ta\n0\tb\n", 8, FSGD_TEST_AT("m", NULL), &m, err, sizeof err), 2);
    CU_ASSERT_DOUBLE_EQUAL(m.label[0], 3, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.label[1], -1, 0);
    fsgd_csr_free(&m);
    CU_ASSERT_EQUAL(fsgd_rowfmt_init(&f, "vw:class_weight=1,0:bits=12", 0, 0, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "class_weight is not POS,NEG");
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"format, hash_bits and dim checks name the job key; input spec", test_init_and_dim},
        {"a buffer's rows are the file's rows (no header); errors name src:line:col", test_buffer_rows_match_file},
        {"skip_bad skips and reports a bad row alone, both formats", test_skip_bad},
        {"row_weights: weighted rows from a buffer, the input spec without the key", test_row_weights},
        {"weight keys: VW importance and class weights in the labels, any format", test_weight_keys},
        {NULL, NULL},
    };
    fsgd_test_suite("rowfmt", cases);
}
