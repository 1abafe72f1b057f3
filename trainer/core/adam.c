#include "fsgd/adam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"

fsgd_adam_params_t fsgd_adam_defaults(void)
{
    return (fsgd_adam_params_t){.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

int fsgd_adam_init(fsgd_adam_t *a, uint64_t dim, const fsgd_adam_params_t *p)
{
    memset(a, 0, sizeof *a);
    a->p = p ? *p : fsgd_adam_defaults();
    a->dim = dim;
    size_t n = dim ? (size_t)dim : 1;
    a->theta = calloc(n, sizeof *a->theta);
    a->m = calloc(n, sizeof *a->m);
    a->v = calloc(n, sizeof *a->v);
    if (!a->theta || !a->m || !a->v) {
        fsgd_adam_free(a);
        return FSGD_E_NOMEM;
    }
    return FSGD_E_OK;
}

void fsgd_adam_advance(fsgd_adam_t *a) { a->t++; }

/* Bias corrections from each key's own update count t_k instead of the
 * global step t. Lazy Adam leaves m and v alone between a key's touches, so
 * with the global t a key first touched late gets m = (1-β1)g and
 * v = (1-β2)g² divided by corrections near 1: a step of
 * (1-β1)/sqrt(1-β2) ≈ 3.2·lr, and up to ~6.5·lr by its 10th touch, on
 * exactly the rare keys that overfit. With t_k every key's steps are about
 * lr, as in dense Adam. */
static void apply_counted(const fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n)
{
    const double b1 = a->p.beta1, b2 = a->p.beta2, lr = a->p.lr, eps = a->p.eps;
    const double lb1 = log(b1), lb2 = log(b2);
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        uint32_t tk = ++a->count[k];
        double g = grad[i];
        double m = b1 * a->m[k] + (1 - b1) * g;
        double v = b2 * a->v[k] + (1 - b2) * g * g;
        a->m[k] = (float)m;
        a->v[k] = (float)v;
        double c1 = -expm1((double)tk * lb1), c2 = -expm1((double)tk * lb2);
        a->theta[k] = (float)(a->theta[k] - lr * (m / c1) / (sqrt(v / c2) + eps));
    }
}

int fsgd_adam_count_keys(fsgd_adam_t *a)
{
    if (a->count)
        return FSGD_E_OK;
    a->count = calloc(a->dim ? (size_t)a->dim : 1, sizeof *a->count);
    return a->count ? FSGD_E_OK : FSGD_E_NOMEM;
}

void fsgd_adam_apply(const fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n)
{
    const double b1 = a->p.beta1, b2 = a->p.beta2;
    /* Bias corrections of step t (Kingma & Ba, Alg. 1), folded into the step size. */
    const double c1 = 1 - pow(b1, (double)a->t);
    const double c2 = 1 - pow(b2, (double)a->t);
    const double lr = a->p.lr, eps = a->p.eps;
    if (a->count) {
        apply_counted(a, keys, grad, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        double g = grad[i];
        double m = b1 * a->m[k] + (1 - b1) * g;
        double v = b2 * a->v[k] + (1 - b2) * g * g;
        a->m[k] = (float)m;
        a->v[k] = (float)v;
        a->theta[k] = (float)(a->theta[k] - lr * (m / c1) / (sqrt(v / c2) + eps));
    }
}

void fsgd_adam_step(fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n)
{
    fsgd_adam_advance(a);
    fsgd_adam_apply(a, keys, grad, n);
}

void fsgd_adam_free(fsgd_adam_t *a)
{
    if (!a)
        return;
    free(a->theta);
    free(a->m);
    free(a->v);
    free(a->count);
    a->count = NULL;
    a->theta = a->m = a->v = NULL;
}
