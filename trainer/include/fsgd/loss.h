/* The three losses, as functions of the margin m = x·θ and the label y.
 * Classification labels are mapped with fsgd_loss_label(): y > 0 -> +1,
 * otherwise -1, so "+1/-1" and "1/0" files both work. */
#ifndef FSGD_LOSS_H
#define FSGD_LOSS_H

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

/* Loss value; y must already be mapped by fsgd_loss_label. Numerically
 * stable for large |m|. */
double fsgd_loss_value(fsgd_loss_kind_t k, double m, double y);

/* d loss / d m (a subgradient for hinge: 0 at the kink). */
double fsgd_loss_deriv(fsgd_loss_kind_t k, double m, double y);

#endif
