/* LIBSVM fields and their crosses (fsgd/libsvm_fields.h): the --fields
 * spec, its canonical text through the row format a model records, the
 * crosses a row gets (VW's rules: pairs, a field with itself taken once a
 * combination, ::), and the errors a bad spec or an unknown field gives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/libsvm_fields.h"
#include "libsvm_cross.h"
#include "fsgd/rowfmt.h"
#include "testlib.h"

static void test_spec(void)
{
    fsgd_libsvm_fields_t f = {0};
    char err[256], r[256], t[64];
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_parse(&f, "a:1-14,b:15-100,user:101", err, sizeof err), 0);
    CU_ASSERT_EQUAL(f.n_ranges, 3);
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_add_terms(&f, "ab,uu,abu,::,ab", err, sizeof err), 0);
    CU_ASSERT_EQUAL(f.n_terms, 4); /* ab once */
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_format(&f, r, sizeof r, t, sizeof t), 0);
    CU_ASSERT_STRING_EQUAL(r, "a=1-14,b=15-100,u=101");
    CU_ASSERT_STRING_EQUAL(t, "ab,uu,abu,::");
    /* 1-based indices as written; 0-based columns in */
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_of(&f, 0, 1), 'a');
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_of(&f, 13, 1), 'a');
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_of(&f, 14, 1), 'b');
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_of(&f, 100, 1), 'u');
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_of(&f, 101, 1), 0);
    /* the spec a model records parses back to itself */
    fsgd_rowfmt_t fmt;
    const char *spec = "libsvm:bits=20:fields=a=1-14,b=15-100,u=101:interactions=ab,uu,abu,::";
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&fmt, spec, 0, 0, err, sizeof err), 0);
    char back[512];
    fsgd_rowfmt_input(&fmt, back, sizeof back);
    CU_ASSERT_STRING_EQUAL(back, spec);
    CU_ASSERT_EQUAL(fmt.opts.hash_bits, 20);
    /* crosses without bits: VW's 18 */
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&fmt, "libsvm:fields=a=1-2:interactions=aa", 0, 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fmt.opts.hash_bits, 18);
}

static void test_errors(void)
{
    static const struct {
        const char *fields, *terms, *want;
    } bad[] = {
        {"a:1-14,b:10-20", NULL, "fields: 'b:10-20' overlaps a:1-14 (an index belongs to one field)"},
        {"a:9-3", NULL, "fields: 'a:9-3': the range ends before it starts"},
        {"a1-3", NULL, "fields: 'a1-3' is not NAME:FIRST-LAST or NAME:INDEX"},
        {"a:1-x", NULL, "the range's last index is not a number"},
        {"a:1-2,", NULL, "fields: '' is not NAME:FIRST-LAST"},
        {"", NULL, "fields: empty"},
        {"a:1-14,b:15-20", "ax", "interactions: 'ax': no field 'x' in fields a, b"},
        {"a:1-14", "a", "interactions: 'a' (a cross of LIBSVM fields joins 2 to 4"},
        {"a:1-14", "aaaaa", "joins 2 to 4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fsgd_libsvm_fields_t f = {0};
        char err[256] = "";
        int rc = fsgd_libsvm_fields_parse(&f, bad[i].fields, err, sizeof err);
        if (rc == 0 && bad[i].terms)
            rc = fsgd_libsvm_fields_add_terms(&f, bad[i].terms, err, sizeof err);
        CU_ASSERT_EQUAL(rc, FSGD_E_ARG);
        FSGD_ASSERT_CONTAINS(err, bad[i].want);
    }
    fsgd_libsvm_fields_t none = {0};
    char err[256];
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_add_terms(&none, "::", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "'::' crosses fields, and there are none");
    fsgd_rowfmt_t fmt;
    CU_ASSERT_EQUAL(fsgd_rowfmt_init(&fmt, "libsvm:bits=18:fields=a=1-2:interactions=ab", 0, 0, err, sizeof err),
                    FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "no field 'b'");
    CU_ASSERT_EQUAL(fsgd_rowfmt_init(&fmt, "libsvm:bits=18:crosses=ab", 0, 0, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "unknown libsvm key 'crosses=ab'");
}

/* The sorted values of row 0 of text parsed with fields and terms. */
static size_t crossed(const char *fields, const char *terms, const char *text, float *vals, size_t cap,
                      fsgd_libsvm_stats_t *st)
{
    fsgd_libsvm_opts_t o = {.hash_bits = 24};
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_parse(&o.fields, fields, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_add_terms(&o.fields, terms, err, sizeof err), 0);
    fsgd_csr_t m = {0};
    memset(st, 0, sizeof *st);
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_parse(text, strlen(text), &o, FSGD_TEST_AT("t", st), &m, err, sizeof err), 1);
    size_t n = m.nnz < cap ? m.nnz : cap;
    for (size_t i = 0; i < n; i++) {
        vals[i] = m.val[i];
        if (i)
            CU_ASSERT_TRUE(m.col[i] > m.col[i - 1]); /* sorted, unique */
    }
    for (size_t i = 1; i < n; i++) /* insertion sort of the values */
        for (size_t j = i; j > 0 && vals[j] < vals[j - 1]; j--) {
            float x = vals[j];
            vals[j] = vals[j - 1];
            vals[j - 1] = x;
        }
    fsgd_csr_free(&m);
    return n;
}

static void test_crosses(void)
{
    float v[32];
    fsgd_libsvm_stats_t st;
    /* ab: each a with each b, values multiplied; 99 is in no field */
    size_t n = crossed("a:1-14,b:15-100", "ab", "1 1:2 2:3 15:5 101:7\n", v, 32, &st);
    const float want_ab[] = {2, 3, 5, 7, 10, 15};
    CU_ASSERT_EQUAL_FATAL(n, 6);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(v[i], want_ab[i]);
    CU_ASSERT_EQUAL(st.feature_entries, 4);
    CU_ASSERT_EQUAL(st.cross_entries, 2);
    /* aa: unordered combinations, x*x included (VW's rule) */
    n = crossed("a:1-14", "aa", "1 1:2 2:3\n", v, 32, &st);
    const float want_aa[] = {2, 3, 4, 6, 9};
    CU_ASSERT_EQUAL_FATAL(n, 5);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(v[i], want_aa[i]);
    /* ::: aa, ab, bb (each pair of fields once; a field's ranges count as one) */
    n = crossed("a:1-2,b:3-4,a:9", "::", "1 1:2 3:3 9:5\n", v, 32, &st);
    CU_ASSERT_EQUAL(st.cross_entries, 3 /* aa */ + 2 /* ab */ + 1 /* bb */);
    CU_ASSERT_EQUAL(n, 3 + 6);
    /* ab and ba are different crosses; abc a triple */
    n = crossed("a:1,b:2,c:3", "ab,ba,abc", "1 1:2 2:3 3:5\n", v, 32, &st);
    CU_ASSERT_EQUAL(n, 6);
    CU_ASSERT_EQUAL(v[5], 30);
    /* a cross whose product leaves a float is an error, not inf */
    fsgd_libsvm_opts_t o = {.hash_bits = 24};
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_parse(&o.fields, "a:1-2", err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_add_terms(&o.fields, "aa", err, sizeof err), 0);
    fsgd_csr_t m = {0};
    const char *big = "1 1:1\n1 1:1e30\n";
    CU_ASSERT_EQUAL(fsgd_libsvm_parse(big, strlen(big), &o, FSGD_TEST_AT("t", NULL), &m, err, sizeof err),
                    FSGD_E_RANGE);
    FSGD_ASSERT_CONTAINS(err, "t:2: expected entries that fit a float once crossed");
    CU_ASSERT_EQUAL(m.n_rows, 1);
    fsgd_csr_free(&m);
}

/* --fields @FILE: an index (or a range) a line; consecutive indices of a
 * field on consecutive lines make one range; errors name file:line:col. */
static void test_map(void)
{
    fsgd_libsvm_fields_t f = {0};
    char err[256], r[256], t[8];
    const char *map = "# index field\n1 age\n2 age\n3\tage  # trailing\n\n4-9 work\r\n10 age\n12 b\n11 b\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_parse_map(&f, map, strlen(map), "m.txt", err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_libsvm_fields_format(&f, r, sizeof r, t, sizeof t), 0);
    CU_ASSERT_STRING_EQUAL(r, "a=1-3,w=4-9,a=10,b=12,b=11");
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"1 a\nx b\n", "fields: m.txt:2:1: expected 'INDEX NAME' or 'FIRST-LAST NAME' (e.g. '7 age'), got 'x b'"},
        {"1 a\n  2\n", "fields: m.txt:2:3: expected 'INDEX NAME'"},
        {"1 a b\n", "m.txt:1:1: expected"},
        {"1-5 a\n3 b\n", "fields: m.txt:2: 3-3 overlaps a:1-5 (an index belongs to one field)"},
        {"1 a\n2 a\n2 a\n", "fields: m.txt:3: 2-2 overlaps a:1-2"},
        {"9-3 a\n", "fields: m.txt:1: the range ends before it starts"},
        {"# nothing\n\n", "fields: m.txt maps no index to a field"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fsgd_libsvm_fields_t g = {0};
        CU_ASSERT_EQUAL(fsgd_libsvm_fields_parse_map(&g, bad[i].text, strlen(bad[i].text), "m.txt", err, sizeof err),
                        FSGD_E_ARG);
        FSGD_ASSERT_CONTAINS(err, bad[i].want);
    }
}

/* Columns counted as for hashed columns (opts.slots): each distinct index
 * and cross once, however many rows hold it; at 2^28 columns five
 * identities in five columns, none shared; at 2^2 the indices alone as a
 * brute count over fsgd_libsvm_hash_col says; a file read on 1 or 4
 * threads sharing one table gives the same counts. */
static void test_collision_counts(void)
{
    char err[256];
    fsgd_libsvm_opts_t o = {.hash_bits = 28};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_parse(&o.fields, "a:1-2,b:3-4", err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_add_terms(&o.fields, "ab", err, sizeof err), 0);
    /* indices 1, 3, 4 and the crosses (1,3), (1,4); each row again */
    const char *rows = "1 1:1 3:1\n-1 1:1 4:1\n1 1:1 3:1\n-1 1:1 4:1\n";
    o.slots = fsgd_libsvm_slots_new(28);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o.slots);
    fsgd_csr_t m = {0};
    fsgd_libsvm_stats_t st = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_parse(rows, strlen(rows), &o, FSGD_TEST_AT("m", &st), &m, err, sizeof err), 4);
    CU_ASSERT_EQUAL(st.slots_used, 5);
    CU_ASSERT_EQUAL(st.slots_collided, 0);
    CU_ASSERT_EQUAL(m.nnz, 12); /* 2 indices and a cross a row */
    /* the columns are the uncounted reader's */
    fsgd_libsvm_opts_t plain = o;
    plain.slots = NULL;
    fsgd_csr_t p = {0};
    fsgd_libsvm_stats_t ps = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_parse(rows, strlen(rows), &plain, FSGD_TEST_AT("m", &ps), &p, err, sizeof err),
                          4);
    CU_ASSERT_EQUAL(ps.slots_used, 0);
    CU_ASSERT_EQUAL_FATAL(p.nnz, m.nnz);
    CU_ASSERT_EQUAL(memcmp(p.col, m.col, m.nnz * sizeof *m.col), 0);
    free(o.slots);
    fsgd_csr_free(&m);
    fsgd_csr_free(&p);

    /* indices only, 4 columns: the brute count */
    fsgd_libsvm_opts_t h = {.hash_bits = 2};
    h.slots = fsgd_libsvm_slots_new(2);
    const char *hr = "1 1:1 2:1 3:1 4:1 5:1\n-1 6:1 7:1 8:1 9:1\n1 2:1 9:1\n";
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_parse(hr, strlen(hr), &h, FSGD_TEST_AT("m", &st), &m, err, sizeof err), 3);
    unsigned per[4] = {0};
    for (uint64_t i = 0; i < 9; i++)
        per[fsgd_libsvm_hash_col(i, 2)]++;
    uint64_t used = 0, shared = 0;
    for (int k = 0; k < 4; k++) {
        used += per[k] > 0;
        shared += per[k] > 1;
    }
    CU_ASSERT_EQUAL(st.slots_used, used);
    CU_ASSERT_EQUAL(st.slots_collided, shared);
    CU_ASSERT_TRUE(shared > 0);
    free(h.slots);
    fsgd_csr_free(&m);
    CU_ASSERT_PTR_NULL(fsgd_libsvm_slots_new(29)); /* 2 GiB: not counted */

    /* threads share one table: the same counts */
    const char *path = fsgd_test_tmp("fields_counts.svm");
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
    for (int r = 0; r < 4000; r++)
        fprintf(mem, "%d %d:1 %d:1 %d:1\n", r % 2 ? 1 : -1, 1 + r % 2, 3 + r % 40, 50 + (r * 7) % 300);
    fclose(mem);
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, text, len), 0);
    free(text);
    fsgd_libsvm_opts_t t = {.hash_bits = 10};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_parse(&t.fields, "a:1-2,b:3-42,c:50-400", err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_fields_add_terms(&t.fields, "ab,bc", err, sizeof err), 0);
    uint64_t got[2][2];
    for (int k = 0; k < 2; k++) {
        t.slots = fsgd_libsvm_slots_new(10);
        fsgd_libsvm_stats_t ts = {0};
        CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load_threads(path, &t, k ? 4 : 1, &m, &ts, err, sizeof err), 0);
        got[k][0] = ts.slots_used;
        got[k][1] = ts.slots_collided;
        free(t.slots);
        fsgd_csr_free(&m);
    }
    CU_ASSERT_TRUE(got[0][0] > 0 && got[0][1] > 0); /* 2 + 40 + 300 indices, 80 + 12000 crosses in 1024 */
    CU_ASSERT_EQUAL(got[1][0], got[0][0]);
    CU_ASSERT_EQUAL(got[1][1], got[0][1]);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"spec: ranges, letters, canonical text through the row format", test_spec},
        {"errors: overlaps, syntax, unknown fields in a cross", test_errors},
        {"crosses: pairs, a field with itself, ::, products that overflow", test_crosses},
        {"map file: an index a line, ranges merged, errors name file:line:col", test_map},
        {"collision counts: distinct indices and crosses, any thread count", test_collision_counts},
        {NULL, NULL},
    };
    fsgd_test_suite("libsvm_fields", cases);
}
