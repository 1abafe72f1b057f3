/* Vowpal Wabbit text input (fsgd/vw.h): the columns of each row are the
 * indices VW 9.11 itself prints with --audit for the same file and options
 * (the golden table below, written by tests/unit/vw_golden_gen.py from
 * `python -m vowpalwabbit --audit --noconstant -d golden.vw -b 18` etc. in
 * the project's venv); tags and weights kept; errors name file:line:col. */
#include <math.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/vw.h"
#include "testlib.h"

/* The file VW read, byte for byte (one line holds UTF-8 names). */
static const char golden_vw[] = "1 2.5 'row1|a x y:2 123 |bcd:0.5 hello 7:3\n"
                                "-1 r2|a x |e 12 word:w\n"
                                "0 | 5 z :1.5 :2\n"
                                "1 |9ns 42 q:-0.25 |a x x:0\n"
                                "-1 'tagged |\xc3\x9cn\xc3\xaf" "code na\xc3\xaf" "ve_\xc3\xbc" "nicode 00017\n"
                                "1 |a x y z |b u v:2 |c k\n";

typedef struct {
    const char *spec;
    int row, n;
    struct {
        uint32_t idx;
        float val;
    } e[32];
} golden_t;

/* VW 9.11.9 --audit, a row's entries with one index summed, sorted. */
static const golden_t golden[] = {
    {"vw:bits=18", 0, 5, {{3101, 0.5f}, {9548, 1.5f}, {42847, 2.0f}, {55432, 1.0f}, {92717, 1.0f}}},
    {"vw:bits=18", 1, 3, {{17267, 1.0f}, {23876, 1.0f}, {55432, 1.0f}}},
    {"vw:bits=18", 2, 4, {{0, 1.5f}, {1, 2.0f}, {5, 1.0f}, {170519, 1.0f}}},
    {"vw:bits=18", 3, 3, {{55432, 1.0f}, {186800, 1.0f}, {237000, -0.25f}}},
    {"vw:bits=18", 4, 2, {{94317, 1.0f}, {113735, 1.0f}}},
    {"vw:bits=18", 5, 6, {{13125, 2.0f}, {40316, 1.0f}, {42847, 1.0f}, {55432, 1.0f}, {120972, 1.0f},
        {202246, 1.0f}}},
    {"vw:bits=24:seed=7", 0, 5, {{1407672, 2.0f}, {3425442, 1.5f}, {7038915, 0.5f}, {9588453, 1.0f},
        {14515874, 1.0f}}},
    {"vw:bits=24:seed=7", 1, 3, {{4349948, 1.0f}, {9588453, 1.0f}, {14720387, 1.0f}}},
    {"vw:bits=24:seed=7", 2, 4, {{3708038, 1.0f}, {13217476, 1.5f}, {13217477, 2.0f}, {13217481, 1.0f}}},
    {"vw:bits=24:seed=7", 3, 3, {{6793452, -0.25f}, {7199316, 1.0f}, {9588453, 1.0f}}},
    {"vw:bits=24:seed=7", 4, 2, {{11092049, 1.0f}, {12782811, 1.0f}}},
    {"vw:bits=24:seed=7", 5, 6, {{1407672, 1.0f}, {8680989, 2.0f}, {9588453, 1.0f}, {10195552, 1.0f},
        {14892628, 1.0f}, {15933447, 1.0f}}},
    {"vw:bits=18:interactions=ab,abc", 0, 11, {{3101, 0.5f}, {9548, 1.5f}, {42847, 2.0f}, {53765, 0.5f},
        {55432, 1.0f}, {64340, 1.5f}, {92717, 1.0f}, {131483, 1.5f}, {141514, 0.5f}, {221121, 3.0f}, {226960, 1.0f}}},
    {"vw:bits=18:interactions=ab,abc", 1, 3, {{17267, 1.0f}, {23876, 1.0f}, {55432, 1.0f}}},
    {"vw:bits=18:interactions=ab,abc", 2, 4, {{0, 1.5f}, {1, 2.0f}, {5, 1.0f}, {170519, 1.0f}}},
    {"vw:bits=18:interactions=ab,abc", 3, 3, {{55432, 1.0f}, {186800, 1.0f}, {237000, -0.25f}}},
    {"vw:bits=18:interactions=ab,abc", 4, 2, {{94317, 1.0f}, {113735, 1.0f}}},
    {"vw:bits=18:interactions=ab,abc", 5, 18, {{13125, 2.0f}, {17252, 1.0f}, {29163, 2.0f}, {40316, 1.0f},
        {42847, 1.0f}, {55432, 1.0f}, {60765, 2.0f}, {64852, 2.0f}, {83481, 2.0f}, {120972, 1.0f}, {202246, 1.0f},
        {210446, 1.0f}, {215496, 2.0f}, {235575, 2.0f}, {245894, 1.0f}, {249568, 1.0f}, {255985, 1.0f},
        {260335, 1.0f}}},
    {"vw:bits=20:interactions=::", 0, 20, {{9548, 1.5f}, {31047, 2.0f}, {53765, 0.5f}, {216826, 1.0f},
        {263824, 1.0f}, {354861, 1.0f}, {393627, 1.5f}, {472299, 0.75f}, {489104, 1.0f}, {515538, 4.0f},
        {579720, 1.0f}, {635957, 1.0f}, {665802, 0.5f}, {693224, 2.25f}, {728506, 0.25f}, {745409, 3.0f},
        {789533, 0.5f}, {829279, 2.0f}, {850772, 1.5f}, {921760, 2.0f}}},
    {"vw:bits=20:interactions=::", 1, 9, {{40299, 1.0f}, {159098, 1.0f}, {263824, 1.0f}, {286020, 1.0f},
        {557916, 1.0f}, {579720, 1.0f}, {684877, 1.0f}, {692040, 1.0f}, {803699, 1.0f}}},
    {"vw:bits=20:interactions=::", 2, 12, {{0, 3.75f}, {1, 5.0f}, {5, 1.0f}, {402, 4.0f}, {2010, 1.0f},
        {2014, 2.0f}, {2015, 1.5f}, {133154, 1.0f}, {299572, 2.0f}, {299573, 1.5f}, {432663, 1.0f}, {433608, 1.0f}}},
    {"vw:bits=20:interactions=::", 3, 9, {{112976, -0.25f}, {186800, 1.0f}, {195600, 0.0625f}, {263824, 1.0f},
        {288920, 1.0f}, {470488, -0.25f}, {579720, 1.0f}, {761288, -0.25f}, {944544, 1.0f}}},
    {"vw:bits=20:interactions=::", 4, 2, {{356461, 1.0f}, {375879, 1.0f}}},
    {"vw:bits=20:interactions=::", 5, 27, {{17252, 1.0f}, {31047, 1.0f}, {60765, 2.0f}, {93459, 2.0f},
        {202246, 1.0f}, {263824, 1.0f}, {383116, 1.0f}, {408808, 1.0f}, {472590, 1.0f}, {477640, 2.0f},
        {489288, 1.0f}, {497719, 2.0f}, {514417, 2.0f}, {515538, 1.0f}, {518129, 1.0f}, {552075, 1.0f},
        {558810, 4.0f}, {572788, 1.0f}, {579720, 1.0f}, {591508, 1.0f}, {799557, 2.0f}, {826748, 1.0f},
        {829279, 1.0f}, {930488, 1.0f}, {947198, 1.0f}, {958977, 1.0f}, {1034270, 1.0f}}},
};

static void test_murmur3_vectors(void)
{
    /* MurmurHash3_x86_32's published test vectors */
    CU_ASSERT_EQUAL(fsgd_vw_murmur3("", 0, 0), 0u);
    CU_ASSERT_EQUAL(fsgd_vw_murmur3("", 0, 1), 0x514E28B7u);
    CU_ASSERT_EQUAL(fsgd_vw_murmur3("", 0, 0xffffffffu), 0x81F16F39u);
    CU_ASSERT_EQUAL(fsgd_vw_murmur3("\0\0\0\0", 4, 0), 0x2362F9DEu);
    CU_ASSERT_EQUAL(fsgd_vw_murmur3("aaaa", 4, 0x9747b28cu), 0x5A97808Au);
    CU_ASSERT_EQUAL(fsgd_vw_murmur3("abc", 3, 0), 0xB3DD93FAu);
    CU_ASSERT_EQUAL(fsgd_vw_murmur3("Hello, world!", 13, 0x9747b28cu), 0x24884CBAu);
    CU_ASSERT_EQUAL(fsgd_vw_murmur3("The quick brown fox jumps over the lazy dog", 43, 0x9747b28cu), 0x2FA826CDu);
    /* VW's hashstring: digits are their value plus the seed */
    CU_ASSERT_EQUAL(fsgd_vw_hash_string("123", 3, 10), 133u);
    CU_ASSERT_EQUAL(fsgd_vw_hash_string(" 12 ", 4, 0), 12u);
    CU_ASSERT_EQUAL(fsgd_vw_hash_string("12a", 3, 0), fsgd_vw_murmur3("12a", 3, 0));
}

static void test_golden_indices_match_vw(void)
{
    char err[512];
    const char *last = "";
    fsgd_csr_t m = {0};
    fsgd_vw_extra_t x = {0};
    for (size_t g = 0; g < sizeof golden / sizeof *golden; g++) {
        const golden_t *want = &golden[g];
        if (strcmp(last, want->spec)) {
            fsgd_vw_spec_t s;
            CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse(want->spec, &s, err, sizeof err), 0);
            fsgd_csr_free(&m);
            fsgd_vw_extra_free(&x);
            CU_ASSERT_EQUAL_FATAL(fsgd_vw_parse(golden_vw, strlen(golden_vw), &s, FSGD_TEST_AT("golden.vw", NULL), &m,
                                                &x, err, sizeof err),
                                  6);
            last = want->spec;
        }
        const uint64_t lo = m.row_ptr[want->row], n = m.row_ptr[want->row + 1] - lo;
        CU_ASSERT_EQUAL(n, (uint64_t)want->n);
        if (n != (uint64_t)want->n) {
            fprintf(stderr, "%s row %d: %llu entries, VW has %d\n", want->spec, want->row, (unsigned long long)n,
                    want->n);
            continue;
        }
        for (int i = 0; i < want->n; i++) {
            CU_ASSERT_EQUAL(m.col[lo + i], want->e[i].idx);
            CU_ASSERT_DOUBLE_EQUAL(m.val[lo + i], want->e[i].val, 1e-6);
        }
    }
    /* labels, importance weights and tags */
    const double labels[] = {1, -1, 0, 1, -1, 1};
    const char *tags[] = {"row1", "r2", "", "", "tagged", ""};
    CU_ASSERT_EQUAL_FATAL(x.n, 6);
    for (size_t r = 0; r < 6; r++) {
        CU_ASSERT_EQUAL(m.label[r], labels[r]);
        CU_ASSERT_EQUAL(x.weight[r], r == 0 ? 2.5 : 1.0);
        uint64_t t0 = r ? x.tag_end[r - 1] : 0;
        CU_ASSERT_EQUAL(x.tag_end[r] - t0, strlen(tags[r]));
        CU_ASSERT_EQUAL(memcmp(x.tags + t0, tags[r], strlen(tags[r])), 0);
    }
    CU_ASSERT_TRUE(x.any_weight);
    fsgd_csr_free(&m);
    fsgd_vw_extra_free(&x);
}

static void test_spec_ignore_keep(void)
{
    char err[512], text[FSGD_VW_SPEC_MAX];
    fsgd_vw_spec_t s, back;
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL(s.bits, 18);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw:bits=22:seed=3:ignore=ba:keep=c:interactions=ab,abc,::", &s, err,
                                             sizeof err), 0);
    CU_ASSERT_EQUAL(s.n_terms, 3);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_format(&s, text, sizeof text), 0);
    CU_ASSERT_STRING_EQUAL(text, "vw:bits=22:seed=3:ignore=ab:keep=c:interactions=ab,abc,::");
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse(text, &back, err, sizeof err), 0);
    CU_ASSERT_EQUAL(memcmp(&s, &back, sizeof s), 0);
    CU_ASSERT_EQUAL(fsgd_vw_spec_parse("vw:bits=33", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "bits '33' is not in 1..32");
    CU_ASSERT_EQUAL(fsgd_vw_spec_parse("vw:interactions=a", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "'a' crosses fewer than 2 namespaces");
    CU_ASSERT_EQUAL(fsgd_vw_spec_parse("vw:interactions=a:", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "the wildcard is '::' alone");
    CU_ASSERT_EQUAL(fsgd_vw_spec_parse("vw:colour=red", &s, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "unknown key 'colour'");

    /* ignore drops a namespace, keep keeps only its own */
    const char *row = "1 |a x |b y |c z\n";
    fsgd_csr_t all = {0}, m = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_parse(row, strlen(row), &s, FSGD_TEST_AT("r", NULL), &all, NULL, err, sizeof err), 1);
    CU_ASSERT_EQUAL(all.nnz, 3);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw:ignore=b", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_parse(row, strlen(row), &s, FSGD_TEST_AT("r", NULL), &m, NULL, err, sizeof err), 1);
    CU_ASSERT_EQUAL(m.nnz, 2);
    fsgd_csr_clear(&m);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw:keep=b", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_parse(row, strlen(row), &s, FSGD_TEST_AT("r", NULL), &m, NULL, err, sizeof err), 1);
    CU_ASSERT_EQUAL_FATAL(m.nnz, 1);
    CU_ASSERT_EQUAL(m.col[0], fsgd_vw_hash_string("y", 1, fsgd_vw_hash_string("b", 1, 0)) & ((1u << 18) - 1));
    fsgd_csr_free(&m);
    fsgd_csr_free(&all);
}

static void test_errors_name_line_col(void)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"1 |a x\n1 a x\n", "e.vw:2:6: expected '|' and a namespace"},
        {"|a x\n", "e.vw:1:1: expected a label before the first '|'"},
        {"one |a x\n", "e.vw:1:1: expected a label (a finite number), got 'one'"},
        {"1 heavy 'id |a x\n", "e.vw:1:3: expected an importance weight (a finite number >= 0), got 'heavy'"},
        {"1 -2 |a x\n", "e.vw:1:3: expected an importance weight (a finite number >= 0), got '-2'"},
        {"1 2 3 'id |a x\n", "e.vw:1:5: expected '|' or a tag after label and importance"},
        {"1 |a x:1e999\n", "e.vw:1:8: expected a feature value (a finite number) or a string, got '1e999'"},
        {"1 |a x:2abc\n", "e.vw:1:8: expected a feature value (a finite number) or a string, got '2abc'"},
        {"1 |a x:nan\n", "e.vw:1:8: expected a feature value (a finite number) or a string, got 'nan'"},
        {"1 |a:z x\n", "e.vw:1:6: expected a namespace value (a finite number), got 'z'"},
        {"1 |:a x\n", "e.vw:1:4: expected a namespace name after '|'"},
        {"1 |a x:\n", "e.vw:1:8: expected a feature value (a finite number) or a string, got 'end of line'"},
    };
    char err[512];
    fsgd_vw_spec_t s;
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw", &s, err, sizeof err), 0);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fsgd_csr_t m = {0};
        long n = fsgd_vw_parse(cases[i].text, strlen(cases[i].text), &s, FSGD_TEST_AT("e.vw", NULL), &m, NULL, err,
                               sizeof err);
        CU_ASSERT_EQUAL(n, FSGD_E_PARSE);
        if (!strstr(err, cases[i].want))
            fprintf(stderr, "case %zu: got \"%s\"\n", i, err);
        FSGD_ASSERT_CONTAINS(err, cases[i].want);
        fsgd_csr_free(&m);
        /* skip_bad: the bad row skipped and counted, the good ones kept */
        fsgd_libsvm_stats_t st = {0};
        const fsgd_parse_ctx_t skipping = {.src = "e.vw", .first_line = 1, .skip_bad = 1, .stats = &st};
        n = fsgd_vw_parse(cases[i].text, strlen(cases[i].text), &s, &skipping, &m, NULL, err, sizeof err);
        CU_ASSERT(n >= 0);
        CU_ASSERT_EQUAL(st.bad_rows, 1);
        fsgd_csr_free(&m);
    }
    /* CRLF and blank lines */
    const char *crlf = "1 |a x\r\n\r\n   \n-1 'r |b y\r\n";
    fsgd_csr_t m = {0};
    fsgd_vw_extra_t x = {0};
    CU_ASSERT_EQUAL(fsgd_vw_parse(crlf, strlen(crlf), &s, FSGD_TEST_AT("c", NULL), &m, &x, err, sizeof err), 2);
    CU_ASSERT_EQUAL(x.tag_end[1] - x.tag_end[0], 1);
    fsgd_csr_free(&m);
    fsgd_vw_extra_free(&x);
}

/* A file: the same rows as the buffer, gzip too, errors with the path. */
static void test_load_file(void)
{
    char err[512];
    fsgd_vw_spec_t s;
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw:interactions=ab", &s, err, sizeof err), 0);
    const char *path = fsgd_test_tmp("g.vw");
    fsgd_test_write_file(path, golden_vw, strlen(golden_vw));
    fsgd_csr_t a = {0}, b = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_parse(golden_vw, strlen(golden_vw), &s, FSGD_TEST_AT("g", NULL), &a, NULL, err,
                                        sizeof err),
                          6);
    fsgd_libsvm_stats_t st;
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_load(path, &s, 0, &b, NULL, &st, err, sizeof err), 0);
    CU_ASSERT_EQUAL(st.rows, 6);
    CU_ASSERT_EQUAL_FATAL(a.nnz, b.nnz);
    CU_ASSERT_EQUAL(memcmp(a.col, b.col, a.nnz * sizeof *a.col), 0);
    fsgd_csr_free(&b);
    const char *bad = fsgd_test_tmp("bad.vw");
    fsgd_test_write_file(bad, "1 |a x\n1 |a x:2q\n", 17);
    CU_ASSERT_EQUAL(fsgd_vw_load(bad, &s, 0, &b, NULL, NULL, err, sizeof err), FSGD_E_PARSE);
    FSGD_ASSERT_CONTAINS(err, "bad.vw:2:8: expected a feature value");
    fsgd_csr_free(&a);
    fsgd_csr_free(&b);

    /* columns counted: one feature seen twice is one column, no collision;
     * 3 distinct features and a cross in 2 columns collide */
    const char *cnt = fsgd_test_tmp("count.vw");
    fsgd_test_write_file(cnt, "1 |a x\n0 |a x\n", 14);
    fsgd_vw_extra_t x = {.count_slots = 1};
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_load(cnt, &s, 0, &a, &x, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(x.slots_used, 1);
    CU_ASSERT_EQUAL(x.slots_collided, 0);
    fsgd_vw_extra_free(&x);
    fsgd_csr_free(&a);
    fsgd_test_write_file(cnt, "1 |a x y z |b u\n", 16);
    x = (fsgd_vw_extra_t){.count_slots = 1};
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw:bits=1:interactions=ab", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_load(cnt, &s, 0, &a, &x, NULL, err, sizeof err), 0);
    CU_ASSERT(x.slots_used >= 1 && x.slots_used <= 2);
    CU_ASSERT(x.slots_collided >= 1 && x.slots_collided <= x.slots_used);
    fsgd_vw_extra_free(&x);
    fsgd_csr_free(&a);
}

/* Rows of hundreds of keys (the in-row sort's quicksort and heapsort paths):
 * descending digit names (index = value + seed, so sorted backwards) and
 * -q aa over them at 12 bits, where crosses collide, against the columns
 * summed here from VW's hashing. */
static void test_long_rows_sorted_and_summed(void)
{
    enum { NF = 400, BITS = 12 };
    static char line[8 * NF + 16];
    size_t len = (size_t)snprintf(line, sizeof line, "1 |a");
    for (int i = NF - 1; i >= 0; i--)
        len += (size_t)snprintf(line + len, sizeof line - len, " %d", i * 7);
    line[len++] = '\n';
    const uint32_t mask = (1u << BITS) - 1, seed = fsgd_vw_hash_string("a", 1, 0);
    uint32_t idx[NF];
    for (int i = 0; i < NF; i++) {
        char name[16];
        int n = snprintf(name, sizeof name, "%d", (NF - 1 - i) * 7);
        idx[i] = fsgd_vw_hash_string(name, (size_t)n, seed) & mask;
    }
    for (int crossed = 0; crossed < 2; crossed++) {
        static double want[1u << BITS];
        memset(want, 0, sizeof want);
        for (int i = 0; i < NF; i++) {
            want[idx[i]] += 1;
            for (int j = i; crossed && j < NF; j++)
                want[(uint32_t)(((uint64_t)idx[i] * 16777619u) ^ idx[j]) & mask] += 1;
        }
        char err[512];
        fsgd_vw_spec_t s;
        CU_ASSERT_EQUAL_FATAL(
            fsgd_vw_spec_parse(crossed ? "vw:bits=12:interactions=aa" : "vw:bits=12", &s, err, sizeof err), 0);
        fsgd_csr_t m = {0};
        CU_ASSERT_EQUAL_FATAL(fsgd_vw_parse(line, len, &s, FSGD_TEST_AT("long.vw", NULL), &m, NULL, err, sizeof err),
                              1);
        uint64_t k = 0;
        for (uint32_t c = 0; c <= mask; c++) {
            if (want[c] == 0)
                continue;
            CU_ASSERT_FATAL(k < m.nnz);
            CU_ASSERT_EQUAL(m.col[k], c);
            CU_ASSERT_DOUBLE_EQUAL(m.val[k], want[c], 1e-3);
            k++;
        }
        CU_ASSERT_EQUAL(k, m.nnz);
        fsgd_csr_free(&m);
    }
}

/* A binary out (fsgd_csr_init_binary) stays without values while every
 * summed value is 1, and gets them, the rows before included, at the first
 * other value. */
static void test_binary_rows_until_a_value(void)
{
    char err[512];
    fsgd_vw_spec_t s;
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw:bits=18", &s, err, sizeof err), 0);
    fsgd_csr_t m;
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_init_binary(&m, 0, 0), 0);
    const char ones[] = "1 |a x y\n-1 |b z\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_parse(ones, strlen(ones), &s, FSGD_TEST_AT("b.vw", NULL), &m, NULL, err, sizeof err),
                          2);
    CU_ASSERT_PTR_NULL(m.val);
    CU_ASSERT_EQUAL(m.nnz, 3);
    const char twos[] = "1 |a x x:0.5 y\n";
    const fsgd_parse_ctx_t line3 = {.src = "b.vw", .first_line = 3};
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_parse(twos, strlen(twos), &s, &line3, &m, NULL, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m.val);
    CU_ASSERT_EQUAL_FATAL(m.nnz, 5);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_DOUBLE_EQUAL(m.val[i], 1.0, 0);
    CU_ASSERT(m.val[3] * m.val[4] == 1.5f && m.val[3] + m.val[4] == 2.5f); /* x and x:0.5 summed; y */
    fsgd_csr_free(&m);
}

typedef struct chunks {
    fsgd_csr_t all;
    int n, bad;
    size_t most_rows;
} chunks_t;

static int take(void *ctx, const fsgd_csr_t *rows, const fsgd_vw_extra_t *x, char *err, size_t errsz)
{
    (void)err, (void)errsz;
    chunks_t *c = ctx;
    c->n++;
    c->bad |= !x || x->n != rows->n_rows;
    if (rows->n_rows > c->most_rows)
        c->most_rows = rows->n_rows;
    return fsgd_csr_append_rows(&c->all, rows, 0, rows->n_rows);
}

/* fsgd_vw_load_chunks: chunks of at most chunk_rows (whole 64 KiB pieces of
 * text aside) whose rows, in order, are fsgd_vw_load's; crosses counted. */
static void test_load_chunks(void)
{
    char err[512];
    const char *path = fsgd_test_tmp("chunks.vw");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int r = 0; r < 20000; r++)
        fprintf(f, "%d |a x%d y%d |b z%d\n", r % 3 ? 1 : -1, r % 97, r % 13, r % 7);
    fclose(f);
    fsgd_vw_spec_t s;
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_spec_parse("vw:bits=18:interactions=ab", &s, err, sizeof err), 0);
    fsgd_csr_t whole = {0}, chunk = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_load(path, &s, 0, &whole, NULL, NULL, err, sizeof err), 0);
    chunks_t c = {0};
    fsgd_vw_extra_t x = {0};
    const fsgd_vw_chunks_t to = {1000, take, &c};
    CU_ASSERT_EQUAL_FATAL(fsgd_vw_load_chunks(path, &s, NULL, &chunk, &x, &to, err, sizeof err), 0);
    CU_ASSERT(c.n >= 2 && !c.bad);
    CU_ASSERT(c.most_rows < 1000 + 65536 / 17 + 2); /* a piece of text: 64 KiB and a line, lines >= 17 bytes */
    CU_ASSERT_EQUAL(x.feature_entries, 60000);
    CU_ASSERT_EQUAL(x.cross_entries, 40000);
    CU_ASSERT_EQUAL_FATAL(c.all.n_rows, whole.n_rows);
    CU_ASSERT_EQUAL_FATAL(c.all.nnz, whole.nnz);
    CU_ASSERT(memcmp(c.all.col, whole.col, whole.nnz * sizeof *whole.col) == 0);
    CU_ASSERT(memcmp(c.all.row_ptr, whole.row_ptr, (whole.n_rows + 1) * sizeof *whole.row_ptr) == 0);
    CU_ASSERT(memcmp(c.all.label, whole.label, whole.n_rows * sizeof *whole.label) == 0);
    fsgd_vw_extra_free(&x);
    fsgd_csr_free(&c.all);
    fsgd_csr_free(&chunk);
    fsgd_csr_free(&whole);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"murmur3 and VW's hashstring on their known values", test_murmur3_vectors},
        {"columns are VW 9.11's --audit indices (-b 18/24, --hash_seed, -q, --cubic, -q ::)",
         test_golden_indices_match_vw},
        {"specs round-trip; --ignore and --keep", test_spec_ignore_keep},
        {"malformed rows name file:line:col; skip_bad; CRLF and blanks", test_errors_name_line_col},
        {"files read as buffers; errors name the path; columns and collisions counted", test_load_file},
        {"rows of hundreds of keys come out sorted, shared columns summed", test_long_rows_sorted_and_summed},
        {"binary rows stay binary until a summed value is not 1", test_binary_rows_until_a_value},
        {"a file in chunks: the rows of the whole, chunks bounded", test_load_chunks},
        {NULL, NULL},
    };
    fsgd_test_suite("vw", cases);
}
