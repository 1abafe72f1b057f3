/* Metrics: the exact AUC against an O(n^2) pair count, edge cases, and the
 * loss-based metrics against their direct formulas. */
#include <math.h>
#include <stdlib.h>

#include "fsgd/metrics.h"
#include "testlib.h"

static double urand(uint64_t *s) { return (double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0; }

/* Mann-Whitney by definition: every (positive, negative) pair, ties 1/2. */
static double brute_auc(const double *score, const double *label, size_t n)
{
    double pairs = 0, np = 0, nn = 0;
    for (size_t i = 0; i < n; i++) {
        np += label[i] > 0;
        nn += !(label[i] > 0);
    }
    for (size_t i = 0; i < n; i++) {
        if (!(label[i] > 0))
            continue;
        for (size_t j = 0; j < n; j++) {
            if (label[j] > 0)
                continue;
            pairs += score[i] > score[j] ? 1.0 : score[i] == score[j] ? 0.5 : 0.0;
        }
    }
    return pairs / (np * nn);
}

static void test_auc_brute_force(void)
{
    uint64_t s = fsgd_test_seed() ^ 0xA0C;
    const size_t sizes[] = {2, 3, 10, 97, 1000, 3001};
    for (int si = 0; si < 6; si++)
        for (int rep = 0; rep < 20; rep++) {
            size_t n = sizes[si];
            double *sc = malloc(n * sizeof *sc), *lb = malloc(n * sizeof *lb);
            /* few distinct scores -> many ties; labels correlated with score; label
             * conventions mixed (+1/-1 and 1/0) */
            int levels = 1 + (int)(fsgd_test_rand(&s) % 8);
            double bias = urand(&s);
            for (size_t i = 0; i < n; i++) {
                int lv = (int)(fsgd_test_rand(&s) % (uint64_t)levels);
                sc[i] = rep % 2 ? lv * 0.25 - 1 : urand(&s) * levels; /* odd reps: tied, even: mostly distinct */
                if (rep % 4 == 3)
                    sc[i] = lv; /* integers */
                int pos = urand(&s) < (bias + (double)lv / levels) / 2;
                lb[i] = pos ? 1 : (rep % 3 ? -1 : 0);
            }
            lb[0] = 1;
            lb[n - 1] = -1; /* both classes present */
            double want = brute_auc(sc, lb, n), got = fsgd_auc(sc, lb, n);
            CU_ASSERT_DOUBLE_EQUAL(got, want, 1e-12);
            if (fabs(got - want) > 1e-12)
                fprintf(stderr, "\n  n %zu rep %d: auc %.17g, brute force %.17g\n", n, rep, got, want);
            free(sc);
            free(lb);
        }
}

static void test_auc_edges(void)
{
    double sc[6] = {0.3, 0.3, 0.3, 0.3, 0.3, 0.3};
    double lb[6] = {1, -1, 1, -1, -1, 1};
    CU_ASSERT_DOUBLE_EQUAL(fsgd_auc(sc, lb, 6), 0.5, 0); /* all ties */
    double one[6] = {1, 1, 1, 1, 1, 1};
    double s2[6] = {1, 2, 3, 4, 5, 6};
    CU_ASSERT_TRUE(isnan(fsgd_auc(s2, one, 6))); /* one class */
    double zero[6] = {0, -1, 0, -1, 0, 0};
    CU_ASSERT_TRUE(isnan(fsgd_auc(s2, zero, 6)));
    CU_ASSERT_TRUE(isnan(fsgd_auc(s2, lb, 0)));
    double ordered[6] = {-1, -1, -1, 1, 1, 1};
    CU_ASSERT_DOUBLE_EQUAL(fsgd_auc(s2, ordered, 6), 1.0, 0);
    double reversed[6] = {1, 1, 1, -1, -1, -1};
    CU_ASSERT_DOUBLE_EQUAL(fsgd_auc(s2, reversed, 6), 0.0, 0);
    /* one tie across the classes: 8 of 9 pairs ordered + one half */
    double s3[6] = {1, 2, 3, 3, 5, 6};
    double l3[6] = {-1, -1, -1, 1, 1, 1};
    CU_ASSERT_DOUBLE_EQUAL(fsgd_auc(s3, l3, 6), 8.5 / 9, 1e-15);
    /* NaN scores cannot be ranked */
    double s4[6] = {1, NAN, 3, 4, 5, 6};
    CU_ASSERT_TRUE(isnan(fsgd_auc(s4, ordered, 6)));
    /* infinite scores are ordinary extremes */
    double s5[6] = {-INFINITY, 2, 3, 4, 5, INFINITY};
    CU_ASSERT_DOUBLE_EQUAL(fsgd_auc(s5, ordered, 6), 1.0, 0);
}

static void test_auc_large(void)
{
    /* 2 million scores with 1000 distinct values: exact against a counting
     * computation over the value histogram (a different algorithm). */
    uint64_t s = fsgd_test_seed() ^ 0xB16;
    size_t n = 2000000;
    enum { V = 1000 };
    double *sc = malloc(n * sizeof *sc), *lb = malloc(n * sizeof *lb);
    static double pos[V], neg[V];
    for (int v = 0; v < V; v++)
        pos[v] = neg[v] = 0;
    for (size_t i = 0; i < n; i++) {
        int v = (int)(fsgd_test_rand(&s) % V);
        int p = urand(&s) < 0.2 + 0.6 * v / V;
        sc[i] = v;
        lb[i] = p ? 1 : -1;
        (p ? pos : neg)[v]++;
    }
    double pairs = 0, negs_below = 0, np = 0, nn = 0;
    for (int v = 0; v < V; v++) {
        pairs += pos[v] * negs_below + 0.5 * pos[v] * neg[v];
        negs_below += neg[v];
        np += pos[v];
        nn += neg[v];
    }
    CU_ASSERT_DOUBLE_EQUAL(fsgd_auc(sc, lb, n), pairs / (np * nn), 1e-12);
    free(sc);
    free(lb);
}

static void test_logloss_and_accuracy(void)
{
    uint64_t s = fsgd_test_seed() ^ 0x1055;
    size_t n = 500;
    double m[500], y[500];
    double ll = 0, correct = 0;
    for (size_t i = 0; i < n; i++) {
        m[i] = (urand(&s) - 0.5) * 12;
        y[i] = urand(&s) < 0.5 ? 1 : 0; /* 1/0 labels */
        double p = 1 / (1 + exp(-m[i]));
        ll += y[i] > 0 ? -log(p) : -log(1 - p);
        correct += (m[i] > 0) == (y[i] > 0);
    }
    fsgd_metrics_t r = fsgd_metrics_compute(FSGD_LOSS_LOGISTIC, m, y, n);
    CU_ASSERT_EQUAL(r.n, n);
    CU_ASSERT_DOUBLE_EQUAL(r.logloss, ll / n, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.loss, r.logloss, 0);
    CU_ASSERT_DOUBLE_EQUAL(r.accuracy, correct / n, 0);
    CU_ASSERT_DOUBLE_EQUAL(r.auc, brute_auc(m, y, n), 1e-12);
    CU_ASSERT_TRUE(isnan(r.rmse));

    /* stable for huge margins: no inf, no NaN, right limits */
    double bm[4] = {800, -800, 800, -800}, by[4] = {1, -1, -1, 1};
    r = fsgd_metrics_compute(FSGD_LOSS_LOGISTIC, bm, by, 4);
    CU_ASSERT_DOUBLE_EQUAL(r.logloss, (0 + 0 + 800 + 800) / 4.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.accuracy, 0.5, 0);

    /* margin exactly 0 predicts the negative class (as LIBLINEAR does) */
    double zm[2] = {0, 0}, zy[2] = {1, -1};
    r = fsgd_metrics_compute(FSGD_LOSS_HINGE, zm, zy, 2);
    CU_ASSERT_DOUBLE_EQUAL(r.accuracy, 0.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(r.loss, 1.0, 0);
    CU_ASSERT_TRUE(isnan(r.logloss));
    CU_ASSERT_DOUBLE_EQUAL(r.auc, 0.5, 0);
}

static void test_rmse(void)
{
    double m[4] = {1, 2, 3, 4}, y[4] = {1.5, 2, 2, 6};
    fsgd_metrics_t r = fsgd_metrics_compute(FSGD_LOSS_SQUARED, m, y, 4);
    CU_ASSERT_DOUBLE_EQUAL(r.rmse, sqrt((0.25 + 0 + 1 + 4) / 4), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(r.loss, (0.25 + 0 + 1 + 4) / 8, 1e-15);
    CU_ASSERT_TRUE(isnan(r.auc));
    CU_ASSERT_TRUE(isnan(r.accuracy));
    CU_ASSERT_TRUE(isnan(r.logloss));
    r = fsgd_metrics_compute(FSGD_LOSS_SQUARED, m, y, 0);
    CU_ASSERT_EQUAL(r.n, 0);
    CU_ASSERT_TRUE(isnan(r.rmse));
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"auc equals the O(n^2) pair count, with ties", test_auc_brute_force},
        {"auc edge cases: all ties, one class, NaN", test_auc_edges},
        {"auc on 2M scores equals a histogram count", test_auc_large},
        {"logloss and accuracy against direct formulas", test_logloss_and_accuracy},
        {"rmse for regression", test_rmse},
        {NULL, NULL},
    };
    fsgd_test_suite("metrics", cases);
}
