/* FTRL-Proximal against a direct implementation of McMahan et al. (KDD'13)
 * Algorithm 1, written here in double precision, on logistic regression
 * with one row a round, as in the paper; then the properties L1 must give. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/ftrl.h"
#include "testlib.h"
#include "core_testing.h"

static double urand(uint64_t *s) { return (double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0; }

/* Algorithm 1, "Per-Coordinate FTRL-Proximal with L1 and L2 Regularization
 * for Logistic Regression", line by line, on dense double arrays. */
typedef struct direct {
    size_t dim;
    double alpha, beta, l1, l2;
    double *z, *n, *w;
} direct_t;

static double direct_weight(const direct_t *d, size_t i)
{
    if (fabs(d->z[i]) <= d->l1)
        return 0;
    double sgn = d->z[i] < 0 ? -1 : 1;
    return -(d->z[i] - sgn * d->l1) / ((d->beta + sqrt(d->n[i])) / d->alpha + d->l2);
}

/* One round t: the row (idx, x), label y in {0, 1}. */
static void direct_round(direct_t *d, const uint32_t *idx, const double *x, size_t nnz, double y)
{
    double dot = 0;
    for (size_t j = 0; j < nnz; j++) { /* for i in I: compute w_{t,i}; p_t = σ(x_t · w) */
        d->w[idx[j]] = direct_weight(d, idx[j]);
        dot += d->w[idx[j]] * x[j];
    }
    double p = 1 / (1 + exp(-dot));
    for (size_t j = 0; j < nnz; j++) { /* for all i in I */
        size_t i = idx[j];
        double g = (p - y) * x[j];
        double sigma = (sqrt(d->n[i] + g * g) - sqrt(d->n[i])) / d->alpha;
        d->z[i] += g - sigma * d->w[i];
        d->n[i] += g * g;
    }
}

/* A random row: nnz distinct sorted keys (popular keys more often), values in (0, 1]. */
static size_t random_row(uint64_t *s, size_t dim, uint32_t *idx, double *x)
{
    size_t nnz = 1 + (size_t)(urand(s) * 6);
    size_t got = 0;
    while (got < nnz) {
        uint32_t k = (uint32_t)(dim * urand(s) * urand(s)); /* skewed towards small keys */
        int dup = 0;
        for (size_t j = 0; j < got; j++)
            dup |= idx[j] == k;
        if (!dup)
            idx[got++] = k;
    }
    for (size_t a = 1; a < got; a++) /* insertion sort: keys must increase */
        for (size_t b = a; b > 0 && idx[b - 1] > idx[b]; b--) {
            uint32_t t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
    for (size_t j = 0; j < got; j++)
        x[j] = urand(s) < 0.5 ? 1.0 : 0.001 + urand(s);
    return got;
}

/* Runs `rounds` rows through both implementations from a known true model
 * and compares every weight; returns how many keys are nonzero in fsgd's. */
static size_t compare_with_direct(const fsgd_ftrl_params_t *p, size_t dim, int rounds, uint64_t seed)
{
    direct_t d = {.dim = dim, .alpha = p->alpha, .beta = p->beta, .l1 = p->l1, .l2 = p->l2};
    d.z = calloc(dim, sizeof *d.z);
    d.n = calloc(dim, sizeof *d.n);
    d.w = calloc(dim, sizeof *d.w);
    double *truth = malloc(dim * sizeof *truth);
    float *w = calloc(dim, sizeof *w);
    fsgd_ftrl_t f;
    CU_ASSERT_EQUAL_FATAL(fsgd_ftrl_init(&f, dim, p), 0);
    uint64_t s = seed;
    for (size_t i = 0; i < dim; i++)
        truth[i] = i % 3 == 0 ? 2 * urand(&s) - 1 : 0;
    uint32_t idx[8];
    double x[8];
    float xf[8], g[8];
    for (int t = 0; t < rounds; t++) {
        size_t nnz = random_row(&s, dim, idx, x);
        double m = 0;
        for (size_t j = 0; j < nnz; j++)
            m += truth[idx[j]] * x[j];
        double y = urand(&s) < 1 / (1 + exp(-3 * m)) ? 1 : 0;
        direct_round(&d, idx, x, nnz, y);
        /* fsgd's side: the gradient of the round's loss at its own weights */
        double dot = 0;
        for (size_t j = 0; j < nnz; j++) {
            xf[j] = (float)x[j];
            dot += (double)w[idx[j]] * xf[j];
        }
        double pr = 1 / (1 + exp(-dot));
        for (size_t j = 0; j < nnz; j++)
            g[j] = (float)((pr - y) * xf[j]);
        fsgd_ftrl_apply(&f, w, idx, g, nnz);
    }
    size_t nonzero = 0, mismatched = 0, zero_disagree = 0;
    for (size_t i = 0; i < dim; i++) {
        double want = direct_weight(&d, i);
        nonzero += w[i] != 0;
        /* float state against double: relative 1e-3 after thousands of rounds */
        if (fabs((double)w[i] - want) > 1e-3 * (fabs(want) + 1e-3))
            mismatched++;
        /* L1's zeros must agree, except where |z| is within rounding of λ1 */
        if ((w[i] == 0) != (want == 0) && fabs(fabs(d.z[i]) - p->l1) > 1e-4 * (p->l1 + 1))
            zero_disagree++;
    }
    CU_ASSERT_EQUAL(mismatched, 0);
    CU_ASSERT_EQUAL(zero_disagree, 0);
    if (mismatched || zero_disagree)
        fprintf(stderr, "ftrl vs Algorithm 1 (α %g β %g λ1 %g λ2 %g, seed %llu): %zu weights differ, %zu zeros\n",
                p->alpha, p->beta, p->l1, p->l2, (unsigned long long)seed, mismatched, zero_disagree);
    fsgd_ftrl_free(&f);
    free(d.z);
    free(d.n);
    free(d.w);
    free(truth);
    free(w);
    return nonzero;
}

static void test_matches_algorithm_1(void)
{
    const size_t dim = 400;
    uint64_t seed = fsgd_test_seed();
    const fsgd_ftrl_params_t cases[] = {
        {.alpha = 0.1, .beta = 1, .l1 = 0, .l2 = 0},
        {.alpha = 0.5, .beta = 1, .l1 = 1, .l2 = 1},
        {.alpha = 0.05, .beta = 0.1, .l1 = 0.3, .l2 = 0},
        {.alpha = 1, .beta = 0, .l1 = 0, .l2 = 5},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        compare_with_direct(&cases[c], dim, 20000, seed + c);
}

/* λ1 makes the model sparse, and more so as it grows; without λ1 every
 * touched weight is nonzero. */
static void test_l1_sparsity(void)
{
    const size_t dim = 400;
    uint64_t seed = fsgd_test_seed() ^ 0xF7;
    size_t none = compare_with_direct(&(fsgd_ftrl_params_t){.alpha = 0.2, .beta = 1}, dim, 5000, seed);
    size_t some = compare_with_direct(&(fsgd_ftrl_params_t){.alpha = 0.2, .beta = 1, .l1 = 1}, dim, 5000, seed);
    size_t more = compare_with_direct(&(fsgd_ftrl_params_t){.alpha = 0.2, .beta = 1, .l1 = 10}, dim, 5000, seed);
    size_t all = compare_with_direct(&(fsgd_ftrl_params_t){.alpha = 0.2, .beta = 1, .l1 = 1e9}, dim, 5000, seed);
    CU_ASSERT_TRUE(none > dim / 2); /* 5000 rows touch most of 400 keys */
    CU_ASSERT_TRUE(some < none);
    CU_ASSERT_TRUE(more < some);
    CU_ASSERT_EQUAL(all, 0);
}

/* The first step of a key from z = n = 0: σ = |g|/α, z = g, n = g², so
 * w = -(g - sgn(g)λ1) / ((β + |g|)/α + λ2) -- and untouched keys stay 0. */
static void test_first_step(void)
{
    fsgd_ftrl_params_t p = {.alpha = 0.25, .beta = 1, .l1 = 0.1, .l2 = 2};
    fsgd_ftrl_t f;
    CU_ASSERT_EQUAL_FATAL(fsgd_ftrl_init(&f, 6, &p), 0);
    float w[6] = {0};
    uint32_t keys[] = {1, 4, 5};
    float g[] = {0.5f, -2.0f, 0.05f};
    fsgd_ftrl_apply(&f, w, keys, g, 3);
    for (int j = 0; j < 2; j++) {
        double gj = g[j], sgn = gj < 0 ? -1 : 1;
        double want = -(gj - sgn * p.l1) / ((p.beta + fabs(gj)) / p.alpha + p.l2);
        CU_ASSERT_DOUBLE_EQUAL(w[keys[j]], want, 1e-7);
        CU_ASSERT_DOUBLE_EQUAL(f.z[keys[j]], gj, 1e-7);
        CU_ASSERT_DOUBLE_EQUAL(f.n[keys[j]], gj * gj, 1e-7);
    }
    CU_ASSERT_EQUAL(w[5], 0.0f); /* |z| = 0.05 <= λ1 */
    CU_ASSERT_TRUE(w[0] == 0 && w[2] == 0 && w[3] == 0 && f.z[0] == 0 && f.n[3] == 0);
    CU_ASSERT_EQUAL(fsgd_ftrl_touched(&f, 6), 3);
    CU_ASSERT_EQUAL(fsgd_ftrl_touched(&f, 5), 2); /* key 5 left out */
    fsgd_ftrl_free(&f);
    fsgd_ftrl_free(NULL);
}

/* Warm start: after fsgd_ftrl_start_from the closed form gives back each
 * weight, so a first step continues from it rather than from 0. */
static void test_start_from(void)
{
    fsgd_ftrl_params_t p = {.alpha = 0.1, .beta = 1, .l1 = 0.5, .l2 = 1};
    fsgd_ftrl_t f;
    CU_ASSERT_EQUAL_FATAL(fsgd_ftrl_init(&f, 5, &p), 0);
    float w[5] = {0.3f, -1.25f, 0, 4e-3f, -7.0f};
    fsgd_ftrl_start_from(&f, w);
    for (int k = 0; k < 5; k++)
        CU_ASSERT_DOUBLE_EQUAL(fsgd_ftrl_weight(&p, f.z[k], f.n[k]), w[k], 1e-6 * (1 + fabs(w[k])));
    CU_ASSERT_EQUAL(fsgd_ftrl_touched(&f, 5), 0);
    /* a small gradient moves a warm weight a little against it, not back to 0 */
    uint32_t k1 = 1;
    float g = 1e-3f;
    fsgd_ftrl_apply(&f, w, &k1, &g, 1);
    CU_ASSERT_TRUE(w[1] < -1.25f && w[1] > -1.26f);
    fsgd_ftrl_free(&f);
}

static void test_bad_params(void)
{
    fsgd_ftrl_t f;
    const fsgd_ftrl_params_t bad[] = {
        {.alpha = 0, .beta = 1}, {.alpha = -1, .beta = 1}, {.alpha = 0.1, .beta = -1},
        {.alpha = 0.1, .beta = 1, .l1 = -1}, {.alpha = 0.1, .beta = 1, .l2 = NAN}, {.alpha = INFINITY, .beta = 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CU_ASSERT_EQUAL(fsgd_ftrl_init(&f, 4, &bad[i]), FSGD_E_ARG);
        CU_ASSERT_PTR_NULL(f.z);
    }
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"first step and untouched keys", test_first_step},
        {"equals a direct Algorithm 1 on logistic rounds", test_matches_algorithm_1},
        {"L1 zeros weights, more as it grows", test_l1_sparsity},
        {"warm start keeps the weights", test_start_from},
        {"bad parameters refused", test_bad_params},
        {NULL, NULL},
    };
    fsgd_test_suite("ftrl", cases);
}
