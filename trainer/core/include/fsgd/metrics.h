/* Evaluation metrics over (score, label) pairs. Pure functions. */
#ifndef FSGD_METRICS_H
#define FSGD_METRICS_H

#include <stddef.h>

#include "fsgd/loss.h"

typedef struct fsgd_metrics {
    size_t n;
    double loss;     /* mean loss of the model's kind (logloss for logistic) */
    double logloss;  /* logistic models: mean log loss; NAN otherwise */
    double auc;      /* classification: exact ROC AUC, ties count 1/2; NAN if one class */
    double accuracy; /* classification: sign(margin) == label */
    double rmse;     /* regression: root mean squared error; NAN otherwise */
} fsgd_metrics_t;

/* Exact ROC AUC of scores against binary labels (y > 0 positive), ties in
 * score counted as 1/2 (Mann-Whitney). O(n log n); allocates a scratch copy.
 * Returns NAN when a class is empty or on allocation failure. */
double fsgd_auc(const double *score, const double *label, size_t n);

/* All metrics of a model kind from margins and raw labels. */
fsgd_metrics_t fsgd_metrics_compute(fsgd_loss_kind_t kind, const double *margin, const double *label, size_t n);

#endif
