#include "fsgd/loss.h"

#include "loss_formulas.h"

#include <string.h>

const char *fsgd_loss_name(fsgd_loss_kind_t k)
{
    switch (k) {
    case FSGD_LOSS_LOGISTIC:
        return "logistic";
    case FSGD_LOSS_SQUARED:
        return "linear";
    case FSGD_LOSS_HINGE:
        return "svm";
    }
    return "unknown";
}

fsgd_loss_kind_t fsgd_loss_parse(const char *name)
{
    if (!strcmp(name, "logistic") || !strcmp(name, "lr"))
        return FSGD_LOSS_LOGISTIC;
    if (!strcmp(name, "linear") || !strcmp(name, "squared"))
        return FSGD_LOSS_SQUARED;
    if (!strcmp(name, "svm") || !strcmp(name, "hinge"))
        return FSGD_LOSS_HINGE;
    return (fsgd_loss_kind_t)0;
}

double fsgd_loss_value(fsgd_loss_kind_t k, double m, double y) { return fsgd_loss_formula_value(k, m, y); }

double fsgd_loss_deriv(fsgd_loss_kind_t k, double m, double y) { return fsgd_loss_formula_deriv(k, m, y); }
