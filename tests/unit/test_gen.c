/* fsgd gen: Zipf sampler against exact probabilities, the rank->id
 * bijection, row shape bounds, determinism per seed, valid LIBSVM (read back
 * with the strict reader), measurable popularity skew, and the weights file
 * reproducing the label model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/gen.h"
#include "fsgd/libsvm.h"
#include "testlib.h"
#include "data_testing.h"

static void test_zipf_exact(void)
{
    const uint64_t n = 40;
    const double ss[] = {0.0, 0.7, 1.0, 1.1, 2.0};
    for (size_t si = 0; si < sizeof ss / sizeof *ss; si++) {
        fsgd_zipf_t z;
        CU_ASSERT_EQUAL_FATAL(fsgd_zipf_init(&z, n, ss[si]), 0);
        uint64_t state = fsgd_test_seed() + si;
        const int draws = 200000;
        long count[41] = {0};
        for (int i = 0; i < draws; i++) {
            uint64_t k = fsgd_zipf_sample(&z, &state);
            CU_ASSERT_FATAL(k >= 1 && k <= n);
            count[k]++;
        }
        double norm = 0;
        for (uint64_t k = 1; k <= n; k++)
            norm += pow((double)k, -ss[si]);
        double chi2 = 0;
        for (uint64_t k = 1; k <= n; k++) {
            double e = draws * pow((double)k, -ss[si]) / norm;
            chi2 += (count[k] - e) * (count[k] - e) / e;
        }
        /* 39 degrees of freedom: mean 39, P(chi2 > 90) ~ 5e-6. */
        if (chi2 >= 90)
            fprintf(stderr, "\n  zipf s=%g chi2=%.1f\n", ss[si], chi2);
        CU_ASSERT(chi2 < 90);
    }
    fsgd_zipf_t z;
    CU_ASSERT_EQUAL(fsgd_zipf_init(&z, 0, 1.1), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_zipf_init(&z, 10, -1), FSGD_E_ARG);
    /* Huge n: O(1) memory, draws in range, rank 1 about 1/zeta-ish often. */
    CU_ASSERT_EQUAL_FATAL(fsgd_zipf_init(&z, 1ull << 32, 1.1), 0);
    uint64_t state = 7, ones = 0;
    for (int i = 0; i < 100000; i++) {
        uint64_t k = fsgd_zipf_sample(&z, &state);
        CU_ASSERT_FATAL(k >= 1 && k <= (1ull << 32));
        ones += k == 1;
    }
    /* P(1) = 1 / H(2^32, 1.1) ~ 1/8.6 for s = 1.1 */
    CU_ASSERT(ones > 9000 && ones < 14000);
}

static void test_bijection(void)
{
    const uint64_t dims[] = {1, 2, 3, 777, 1024, 4099};
    for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
        fsgd_gen_opts_t o;
        fsgd_gen_opts_default(&o);
        o.dim = dims[di];
        o.nnz = 1;
        o.seed = fsgd_test_seed();
        char err[256];
        fsgd_gen_t *g = fsgd_gen_new(&o, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        unsigned char *seen = calloc(o.dim, 1);
        int ok = 1;
        uint64_t low = 0;
        for (uint64_t r = 0; r < o.dim; r++) {
            uint32_t id = fsgd_gen_feature(g, r);
            if (id >= o.dim || seen[id])
                ok = 0;
            else
                seen[id] = 1;
            if (r < 10 && id < 10)
                low++;
        }
        CU_ASSERT_TRUE(ok);
        if (o.dim >= 1000)
            CU_ASSERT(low < 5); /* the 10 most popular are not the 10 lowest ids */
        free(seen);
        fsgd_gen_destroy(g);
    }
}

/* Writes rows to a temp file and loads them with the strict reader. */
static void gen_to_csr(const fsgd_gen_opts_t *o, uint64_t rows, const char *name, fsgd_csr_t *m)
{
    char err[512];
    fsgd_gen_t *g = fsgd_gen_new(o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const char *path = fsgd_test_tmp(name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fsgd_gen_write(g, f, rows, NULL, NULL, err, sizeof err), 0);
    fclose(f);
    fsgd_gen_destroy(g);
    fsgd_libsvm_opts_t lo = {.max_dim = o->dim};
    fsgd_libsvm_stats_t st;
    int rc = fsgd_libsvm_load(path, &lo, m, &st, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n  %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(m->n_rows, rows);
    CU_ASSERT_EQUAL(st.bad_rows, 0);
}

static void test_shape(void)
{
    fsgd_gen_opts_t o;
    fsgd_gen_opts_default(&o);
    o.dim = 100000;
    o.nnz = 15;
    o.seed = fsgd_test_seed();
    fsgd_csr_t m = {0};
    const uint64_t rows = 20000;
    gen_to_csr(&o, rows, "shape.svm", &m);
    size_t kmin = (size_t)-1, kmax = 0;
    for (size_t r = 0; r < m.n_rows; r++) {
        size_t k = (size_t)(m.row_ptr[r + 1] - m.row_ptr[r]);
        kmin = k < kmin ? k : kmin;
        kmax = k > kmax ? k : kmax;
        CU_ASSERT_FATAL(m.label[r] == 1.0 || m.label[r] == -1.0);
    }
    CU_ASSERT_EQUAL(kmin, 1);
    CU_ASSERT_EQUAL(kmax, 29);
    double mean = (double)m.nnz / (double)m.n_rows;
    printf("  mean nnz %.2f (want 15), rows 1..%zu\n", mean, kmax);
    CU_ASSERT(fabs(mean - 15) < 0.5);
    CU_ASSERT(m.max_col <= o.dim);
    for (size_t j = 0; j < m.nnz; j++)
        CU_ASSERT_FATAL(m.val[j] == 1.0f);

    /* Popularity skew: a Zipf(1.1) over 1e5 features puts the top 1% of
     * features (by count) at well over half of all occurrences; uniform
     * would give ~1%. */
    uint32_t *cnt = calloc(o.dim, sizeof *cnt);
    for (size_t j = 0; j < m.nnz; j++)
        cnt[m.col[j]]++;
    /* top 1000 counts by partial selection: count histogram */
    uint64_t hist_top = 0;
    uint32_t maxc = 0;
    for (uint64_t i = 0; i < o.dim; i++)
        maxc = cnt[i] > maxc ? cnt[i] : maxc;
    uint64_t *byc = calloc((size_t)maxc + 1, sizeof *byc);
    for (uint64_t i = 0; i < o.dim; i++)
        byc[cnt[i]]++;
    uint64_t taken = 0;
    for (int64_t c = maxc; c > 0 && taken < 1000; c--) {
        uint64_t t = byc[c] < 1000 - taken ? byc[c] : 1000 - taken;
        taken += t;
        hist_top += t * (uint64_t)c;
    }
    double share = (double)hist_top / (double)m.nnz;
    printf("  top 1%% of features hold %.1f%% of occurrences\n", 100 * share);
    CU_ASSERT(share > 0.5);
    free(byc);
    free(cnt);
    fsgd_csr_free(&m);

    /* zipf 0: uniform, no skew */
    o.zipf = 0;
    o.dim = 1000;
    gen_to_csr(&o, 5000, "uniform.svm", &m);
    uint32_t c2[1000] = {0};
    for (size_t j = 0; j < m.nnz; j++)
        c2[m.col[j]]++;
    uint32_t mx = 0;
    for (int i = 0; i < 1000; i++)
        mx = c2[i] > mx ? c2[i] : mx;
    CU_ASSERT((double)mx < 2.0 * (double)m.nnz / 1000);
    fsgd_csr_free(&m);

    /* tiny dim: rows capped at dim distinct features */
    o.dim = 3;
    o.zipf = 2;
    o.nnz = 10;
    gen_to_csr(&o, 500, "tiny.svm", &m);
    for (size_t r = 0; r < m.n_rows; r++)
        CU_ASSERT_FATAL(m.row_ptr[r + 1] - m.row_ptr[r] <= 3);
    fsgd_csr_free(&m);

    /* dim 2^32, real values */
    fsgd_gen_opts_default(&o);
    o.dim = 1ull << 32;
    o.real_values = 1;
    o.seed = fsgd_test_seed();
    gen_to_csr(&o, 2000, "huge.svm", &m);
    uint64_t high = 0;
    for (size_t j = 0; j < m.nnz; j++) {
        CU_ASSERT_FATAL(m.val[j] > 0 && m.val[j] <= 1);
        high += m.col[j] >= (1u << 31);
    }
    CU_ASSERT(high > m.nnz / 4); /* ids spread over the whole range */
    fsgd_csr_free(&m);
}

static void test_determinism(void)
{
    fsgd_gen_opts_t o;
    fsgd_gen_opts_default(&o);
    o.seed = fsgd_test_seed();
    o.noise = 0.3;
    o.real_values = 1;
    char err[256];
    fsgd_gen_t *a = fsgd_gen_new(&o, err, sizeof err), *b = fsgd_gen_new(&o, err, sizeof err);
    o.seed++;
    fsgd_gen_t *c = fsgd_gen_new(&o, err, sizeof err);
    CU_ASSERT_FATAL(a && b && c);
    size_t cap = fsgd_gen_max_row(a);
    uint32_t *ca = malloc(cap * 4), *cb = malloc(cap * 4);
    float *va = malloc(cap * 4), *vb = malloc(cap * 4);
    int same_c = 1;
    for (int r = 0; r < 2000; r++) {
        double la, lb, ma, mb;
        size_t na = fsgd_gen_next(a, ca, va, &la, &ma);
        size_t nb = fsgd_gen_next(b, cb, vb, &lb, &mb);
        CU_ASSERT_FATAL(na == nb && la == lb && ma == mb);
        CU_ASSERT_FATAL(!memcmp(ca, cb, na * 4) && !memcmp(va, vb, na * 4));
        size_t nc = fsgd_gen_next(c, cb, vb, &lb, &mb);
        if (nc != na || memcmp(ca, cb, na * 4))
            same_c = 0;
    }
    CU_ASSERT_FALSE(same_c);
    free(ca);
    free(cb);
    free(va);
    free(vb);
    fsgd_gen_destroy(a);
    fsgd_gen_destroy(b);
    fsgd_gen_destroy(c);

    /* The CLI: same seed, same bytes; parseable. */
    char cmd[1024], o1[256], o2[4096];
    const char *f1 = fsgd_test_tmp("cli1.svm"), *f2 = fsgd_test_tmp("cli2.svm");
    snprintf(cmd, sizeof cmd, "%s gen --rows 3000 --dim 2^20 --nnz 7 --seed 42 --quiet --out %s && %s gen "
             "--rows=3000 --dim=1048576 --nnz=7 --seed=42 > %s && cmp %s %s && echo SAME",
             fsgd_test_bin(), f1, fsgd_test_bin(), f2, f1, f2);
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, o1, sizeof o1), 0);
    FSGD_ASSERT_CONTAINS(o1, "SAME");
    fsgd_csr_t m = {0};
    CU_ASSERT_EQUAL(fsgd_libsvm_load(f1, NULL, &m, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(m.n_rows, 3000);
    fsgd_csr_free(&m);
    snprintf(cmd, sizeof cmd, "%s gen --dim 0", fsgd_test_bin());
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, o2, sizeof o2), 2);
    FSGD_ASSERT_CONTAINS(o2, "--dim 0 out of range 1..4294967296");
    snprintf(cmd, sizeof cmd, "%s gen --rows abc", fsgd_test_bin());
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, o2, sizeof o2), 2);
    FSGD_ASSERT_CONTAINS(o2, "--rows expects a whole number");
    snprintf(cmd, sizeof cmd, "%s gen --bogus 1", fsgd_test_bin());
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, o2, sizeof o2), 2);
    FSGD_ASSERT_CONTAINS(o2, "unknown option '--bogus'");
    snprintf(cmd, sizeof cmd, "%s gen --help", fsgd_test_bin());
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, o2, sizeof o2), 0);
    FSGD_ASSERT_CONTAINS(o2, "--weights-out");
}

/* Exact AUC of scores against +-1 labels (ties count half). */
static int cmp_pair(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static double auc(const double *score, const double *label, size_t n)
{
    double *p = malloc(n * 2 * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        p[2 * i] = score[i];
        p[2 * i + 1] = label[i];
    }
    qsort(p, n, 2 * sizeof *p, cmp_pair);
    double pos = 0, neg = 0, sum = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double tp = 0, tn = 0;
        while (j < n && p[2 * j] == p[2 * i]) {
            if (p[2 * j + 1] > 0)
                tp++;
            else
                tn++;
            j++;
        }
        sum += tp * (neg + tn / 2);
        pos += tp;
        neg += tn;
        i = j;
    }
    free(p);
    return sum / (pos * neg);
}

static void test_weights(void)
{
    for (int model = 0; model < 2; model++) {
        fsgd_gen_opts_t o;
        fsgd_gen_opts_default(&o);
        o.dim = 50000;
        o.nnz = 12;
        o.seed = fsgd_test_seed();
        o.model = model ? FSGD_GEN_LINEAR : FSGD_GEN_LOGISTIC;
        o.noise = model ? 0.1 : 0;
        o.bias = 0.25;
        o.w_nnz = 300;
        o.real_values = model;
        char err[512];
        fsgd_gen_t *g = fsgd_gen_new(&o, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        const char *wpath = fsgd_test_tmp("w.svm");
        FILE *f = fopen(wpath, "wb");
        CU_ASSERT_EQUAL(fsgd_gen_write_weights(g, f, err, sizeof err), 0);
        fclose(f);
        fsgd_csr_t w = {0};
        CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(wpath, NULL, &w, NULL, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(w.n_rows, 1);
        CU_ASSERT_EQUAL(w.label[0], 0.25);
        CU_ASSERT_EQUAL(w.nnz, 300);
        float *dense = calloc(o.dim, sizeof *dense);
        for (size_t j = 0; j < w.nnz; j++)
            dense[w.col[j]] = w.val[j];
        for (size_t j = 0; j < 20; j++)
            CU_ASSERT_EQUAL(fsgd_gen_weight(g, w.col[j]), w.val[j]);
        /* The most popular feature carries a weight. */
        CU_ASSERT(dense[fsgd_gen_feature(g, 0)] != 0.0f);

        size_t n = 20000, cap = fsgd_gen_max_row(g);
        uint32_t *col = malloc(cap * 4);
        float *val = malloc(cap * 4);
        double *margin = malloc(n * sizeof *margin), *label = malloc(n * sizeof *label);
        double pos = 0, resid2 = 0, expected_pos = 0;
        int margins_ok = 1;
        for (size_t r = 0; r < n; r++) {
            size_t k = fsgd_gen_next(g, col, val, &label[r], &margin[r]);
            double mw = w.label[0];
            for (size_t j = 0; j < k; j++)
                mw += (double)dense[col[j]] * val[j];
            if (fabs(mw - margin[r]) > 1e-9)
                margins_ok = 0;
            pos += label[r] > 0;
            expected_pos += 1 / (1 + exp(-margin[r]));
            resid2 += (label[r] - margin[r]) * (label[r] - margin[r]);
        }
        CU_ASSERT_TRUE(margins_ok); /* the weights file reproduces x.w + b */
        if (model == 0) {
            double a = auc(margin, label, n);
            printf("  logistic: positives %.1f%% (model expects %.1f%%), AUC of the true margin %.3f\n",
                   100 * pos / n, 100 * expected_pos / n, a);
            /* Labels are Bernoulli(σ(margin)): the positive rate matches the
             * model's mean probability within sampling error (sd < 0.4 %),
             * whatever the base rate of this seed's weights. */
            CU_ASSERT(fabs(pos - expected_pos) / n < 0.02);
            CU_ASSERT(pos / n > 0.05 && pos / n < 0.95);
            CU_ASSERT(a > 0.7);
        } else {
            double sd = sqrt(resid2 / n);
            printf("  linear: residual stddev %.4f (noise 0.1)\n", sd);
            CU_ASSERT(fabs(sd - 0.1) < 0.01);
        }
        free(col);
        free(val);
        free(margin);
        free(label);
        free(dense);
        fsgd_csr_free(&w);
        fsgd_gen_destroy(g);
    }
}

/* --dense D: every row starts with features 0..D-1, real values in (0, 1]
 * that differ from row to row; the Zipf features follow, binary, at ids
 * >= D; the weights file holds the dense weights and still reproduces the
 * margin. */
static void test_dense(void)
{
    fsgd_gen_opts_t o;
    fsgd_gen_opts_default(&o);
    o.dim = 50000;
    o.nnz = 12;
    o.seed = fsgd_test_seed();
    o.w_nnz = 300;
    o.dense = 25;
    char err[512];
    fsgd_gen_t *g = fsgd_gen_new(&o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(fsgd_gen_max_row(g), 23 + 25);
    const char *wpath = fsgd_test_tmp("wd.svm");
    FILE *f = fopen(wpath, "wb");
    CU_ASSERT_EQUAL(fsgd_gen_write_weights(g, f, err, sizeof err), 0);
    fclose(f);
    fsgd_csr_t w = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(wpath, NULL, &w, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(w.nnz, 300 + 25);
    float *wd = calloc(o.dim, sizeof *wd);
    for (size_t j = 0; j < w.nnz; j++)
        wd[w.col[j]] = w.val[j];
    for (uint32_t j = 0; j < 25; j++)
        CU_ASSERT_EQUAL(fsgd_gen_weight(g, j), wd[j]);
    CU_ASSERT_TRUE(fsgd_gen_feature(g, 0) >= 25);
    size_t cap = fsgd_gen_max_row(g);
    uint32_t *col = malloc(cap * 4);
    float *val = malloc(cap * 4);
    int shape_ok = 1, margins_ok = 1;
    double first_sum = 0;
    for (int r = 0; r < 2000; r++) {
        double label, margin;
        size_t k = fsgd_gen_next(g, col, val, &label, &margin);
        shape_ok &= k > 25;
        double mw = w.label[0];
        for (size_t j = 0; j < k; j++) {
            if (j < 25)
                shape_ok &= col[j] == j && val[j] > 0 && val[j] <= 1;
            else
                shape_ok &= col[j] >= 25 && col[j] > col[j - 1] && val[j] == 1.0f;
            mw += (double)wd[col[j]] * val[j];
        }
        first_sum += val[0];
        margins_ok &= fabs(mw - margin) < 1e-9;
    }
    CU_ASSERT_TRUE(shape_ok);
    CU_ASSERT_TRUE(margins_ok);
    CU_ASSERT_DOUBLE_EQUAL(first_sum / 2000, 0.5, 0.03); /* k/1000, k uniform: mean 0.5005 */
    o.dense = 50000; /* all dense: no Zipf feature left */
    CU_ASSERT_PTR_NULL(fsgd_gen_new(&o, err, sizeof err));
    FSGD_ASSERT_CONTAINS(err, "dense 50000 out of range");
    free(col);
    free(val);
    free(wd);
    fsgd_csr_free(&w);
    fsgd_gen_destroy(g);
}

static void test_bad_opts(void)
{
    fsgd_gen_opts_t o;
    char err[256];
    fsgd_gen_opts_default(&o);
    o.dim = (1ull << 32) + 1;
    CU_ASSERT_PTR_NULL(fsgd_gen_new(&o, err, sizeof err));
    CU_ASSERT_STRING_EQUAL(err, "dim 4294967297 out of range 1..4294967296");
    fsgd_gen_opts_default(&o);
    o.nnz = 0.5;
    CU_ASSERT_PTR_NULL(fsgd_gen_new(&o, err, sizeof err));
    FSGD_ASSERT_CONTAINS(err, "nnz 0.5 out of range");
    fsgd_gen_opts_default(&o);
    o.zipf = NAN;
    CU_ASSERT_PTR_NULL(fsgd_gen_new(&o, err, sizeof err));
    FSGD_ASSERT_CONTAINS(err, "zipf exponent");
    fsgd_gen_destroy(NULL);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"zipf sampler matches exact probabilities", test_zipf_exact},
        {"rank->id is a bijection that spreads popular ids", test_bijection},
        {"rows: valid LIBSVM, nnz bounds, skew", test_shape},
        {"deterministic per seed (library and CLI)", test_determinism},
        {"weights file reproduces the label model", test_weights},
        {"dense real-valued features before the Zipf ones", test_dense},
        {"bad options are rejected", test_bad_opts},
        {NULL, NULL},
    };
    fsgd_test_suite("gen", cases);
}
