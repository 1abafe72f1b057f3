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

void fsgd_adam_apply(const fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n)
{
    const double b1 = a->p.beta1, b2 = a->p.beta2;
    /* Bias corrections of step t (Kingma & Ba, Alg. 1), folded into the step size. */
    const double c1 = 1 - pow(b1, (double)a->t);
    const double c2 = 1 - pow(b2, (double)a->t);
    const double lr = a->p.lr, eps = a->p.eps;
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
    a->theta = a->m = a->v = NULL;
}

int fsgd_reducer_take_step(fsgd_reducer_t *r, double scale, double l2, const float *theta, fsgd_sparse_t *out)
{
    size_t n;
    const uint32_t *keys = fsgd_reducer_sorted_keys(r, &n);
    FSGD_TRY(fsgd_sparse_reserve(out, n));
    for (size_t i = 0; i < n; i++) {
        out->keys[i] = keys[i];
        out->vals[i] = fsgd_adam_step_grad(fsgd_reducer_sum(r, keys[i]), scale, l2, theta ? theta[keys[i]] : 0.0f);
    }
    out->n = n;
    fsgd_reducer_clear(r);
    return FSGD_E_OK;
}
