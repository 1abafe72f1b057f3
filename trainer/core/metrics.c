/* Evaluation metrics. AUC is the Mann-Whitney statistic: the fraction of
 * (positive, negative) pairs the scores order correctly, a tied pair counting
 * 1/2. Sorting by score and walking tied groups gives it exactly in
 * O(n log n): a group with p positives and q negatives, above `neg_below`
 * negatives of lower score, contributes p·neg_below + p·q/2 pairs. */
#include "fsgd/metrics.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SIZEOF_INT128__)
__extension__ typedef unsigned __int128 acc_t;
#else
typedef long double acc_t;
#endif

typedef struct scored {
    double s;
    int pos;
} scored_t;

static int cmp_score(const void *a, const void *b)
{
    double x = ((const scored_t *)a)->s, y = ((const scored_t *)b)->s;
    return (x > y) - (x < y);
}

double fsgd_auc(const double *score, const double *label, size_t n)
{
    size_t n_pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(score[i]))
            return NAN; /* no order to count pairs by */
        n_pos += label[i] > 0;
    }
    size_t n_neg = n - n_pos;
    if (n_pos == 0 || n_neg == 0)
        return NAN;
    scored_t *v = malloc(n * sizeof *v);
    if (!v)
        return NAN;
    for (size_t i = 0; i < n; i++) {
        v[i].s = score[i];
        v[i].pos = label[i] > 0;
    }
    qsort(v, n, sizeof *v, cmp_score);
    /* Pair counts are integers (and halves); keep twice the count in 128 bits
     * where available so n up to 2^32 stays exact. */
    acc_t twice = 0;
    uint64_t neg_below = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint64_t p = 0, q = 0;
        while (j < n && v[j].s == v[i].s) {
            p += (uint64_t)v[j].pos;
            q += (uint64_t)!v[j].pos;
            j++;
        }
        twice += 2 * (acc_t)p * neg_below + (acc_t)p * q;
        neg_below += q;
        i = j;
    }
    free(v);
    return (double)((long double)twice / 2 / ((long double)n_pos * (long double)n_neg));
}

fsgd_metrics_t fsgd_metrics_compute(fsgd_loss_kind_t kind, const double *margin, const double *label, size_t n)
{
    fsgd_metrics_t r = {.n = n, .loss = NAN, .logloss = NAN, .auc = NAN, .accuracy = NAN, .rmse = NAN};
    if (n == 0)
        return r;
    double loss = 0, sq = 0;
    size_t correct = 0;
    for (size_t i = 0; i < n; i++) {
        double y = fsgd_loss_label(kind, label[i]);
        loss += fsgd_loss_value(kind, margin[i], y);
        if (kind == FSGD_LOSS_SQUARED) {
            double d = margin[i] - y;
            sq += d * d;
        } else {
            /* margin 0 predicts the negative class, as LIBLINEAR does */
            correct += (margin[i] > 0 ? 1.0 : -1.0) == y;
        }
    }
    r.loss = loss / (double)n;
    if (kind == FSGD_LOSS_SQUARED) {
        r.rmse = sqrt(sq / (double)n);
        return r;
    }
    if (kind == FSGD_LOSS_LOGISTIC)
        r.logloss = r.loss;
    r.accuracy = (double)correct / (double)n;
    r.auc = fsgd_auc(margin, label, n);
    return r;
}
