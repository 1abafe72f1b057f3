#include "fsgd/loss.h"

#include <math.h>
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

double fsgd_loss_value(fsgd_loss_kind_t k, double m, double y)
{
    switch (k) {
    case FSGD_LOSS_LOGISTIC: {
        /* log(1 + e^z) with z = -y m, without overflow for large |z|. */
        double z = -y * m;
        return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
    }
    case FSGD_LOSS_SQUARED:
        return 0.5 * (m - y) * (m - y);
    case FSGD_LOSS_HINGE:
        return y * m < 1 ? 1 - y * m : 0;
    }
    return NAN;
}

double fsgd_loss_deriv(fsgd_loss_kind_t k, double m, double y)
{
    switch (k) {
    case FSGD_LOSS_LOGISTIC: {
        /* d/dm log(1 + e^{-ym}) = -y σ(-ym), σ evaluated stably. */
        double z = -y * m;
        double s = z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));
        return -y * s;
    }
    case FSGD_LOSS_SQUARED:
        return m - y;
    case FSGD_LOSS_HINGE:
        return y * m < 1 ? -y : 0;
    }
    return NAN;
}
