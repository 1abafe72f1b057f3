/* The three losses, as functions of the margin m = x·θ and the label y.
 * Classification labels are mapped with fsgd_loss_label(): y > 0 -> +1,
 * otherwise -1, so "+1/-1" and "1/0" files both work. */
#ifndef FSGD_LOSS_H
#define FSGD_LOSS_H

#include <stddef.h>

typedef enum fsgd_loss_kind {
    FSGD_LOSS_LOGISTIC = 1, /* log(1 + exp(-y m)) */
    FSGD_LOSS_SQUARED = 2,  /* (m - y)^2 / 2, linear regression */
    FSGD_LOSS_HINGE = 3,    /* max(0, 1 - y m), linear SVM */
} fsgd_loss_kind_t;

/* "logistic", "linear", "svm" (the model names of the CLI and YAML). */
const char *fsgd_loss_name(fsgd_loss_kind_t k);

/* Parses "logistic" | "linear" | "svm" (also "squared", "hinge", "lr").
 * Returns the kind or 0 when the name is unknown. */
fsgd_loss_kind_t fsgd_loss_parse(const char *name);

/* Label as the loss sees it: ±1 for classification, y itself for regression. */
static inline double fsgd_loss_label(fsgd_loss_kind_t k, double y)
{
    return k == FSGD_LOSS_SQUARED ? y : (y > 0 ? 1.0 : -1.0);
}

/* The distinct labels of a data set, for fsgd_loss_check_labels: the first
 * few values seen and whether there were more. Plain data; zero it first. */
#define FSGD_LABELS_KEPT 4
typedef struct fsgd_label_set {
    double v[FSGD_LABELS_KEPT];
    int n;    /* distinct values kept */
    int more; /* 1: more distinct values than kept */
    int classes; /* set before adding: labels of weighted rows (fsgd/rowlabel.h, ±weight), each kept as
                    its class, +1 when > 0, else -1 */
} fsgd_label_set_t;

/* Adds the n labels y to s. */
void fsgd_label_set_add(fsgd_label_set_t *s, const double *y, size_t n);

/* Checks that a data set's labels suit the model kind. Classification
 * (logistic, svm) needs exactly two classes, labelled {0, 1} or {-1, 1}:
 * any other set ({1, 2}, {1}, {-1, 0, 1}) would be mapped to one class or
 * to a meaning the user did not intend, and AUC is undefined with one class.
 * Regression takes any labels. Returns 0 or FSGD_E_FORMAT with err saying
 * the set found and the sets allowed ("labels {1, 2}: ..."). */
int fsgd_loss_check_labels(fsgd_loss_kind_t k, const fsgd_label_set_t *s, char *err, size_t errsz);

/* Loss value; y must already be mapped by fsgd_loss_label. Numerically
 * stable for large |m|. */
double fsgd_loss_value(fsgd_loss_kind_t k, double m, double y);

#endif
