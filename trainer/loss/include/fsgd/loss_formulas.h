/* The three losses' value and derivative as inline functions that compile
 * both as C (trainer/loss/loss.c, the CPU backend) and as CUDA device code
 * (trainer/backend/backend_cuda.cu), so every backend computes the same
 * formulas. A leaf: it needs only fsgd/loss.h, so the backends below core/
 * share it without including core/. Not an API: call fsgd_loss_value
 * (fsgd/loss.h) elsewhere. y must already be mapped (±1 for
 * classification). */
#ifndef FSGD_LOSS_FORMULAS_H
#define FSGD_LOSS_FORMULAS_H

#include <math.h>

#include "fsgd/loss.h"

#ifdef __CUDACC__
#define FSGD_LOSS_FN static inline __host__ __device__
#else
#define FSGD_LOSS_FN static inline
#endif

FSGD_LOSS_FN double fsgd_loss_formula_label(int kind, double y)
{
    return kind == FSGD_LOSS_SQUARED ? y : (y > 0 ? 1.0 : -1.0);
}

FSGD_LOSS_FN double fsgd_loss_formula_value(int kind, double m, double y)
{
    switch (kind) {
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

FSGD_LOSS_FN double fsgd_loss_formula_deriv(int kind, double m, double y)
{
    switch (kind) {
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

#endif
