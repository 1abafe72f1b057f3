/* FTRL-Proximal, McMahan et al. KDD'13 Algorithm 1 (fsgd/ftrl.h). */
#include "fsgd/ftrl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/hugepages.h"
#include "fsgd/prefetch.h"
#include "core_testing.h"

int fsgd_ftrl_init(fsgd_ftrl_t *f, uint64_t dim, const fsgd_ftrl_params_t *p)
{
    memset(f, 0, sizeof *f);
    if (!(p->alpha > 0) || !isfinite(p->alpha) || !(p->beta >= 0) || !isfinite(p->beta) || !(p->l1 >= 0) ||
        !isfinite(p->l1) || !(p->l2 >= 0) || !isfinite(p->l2))
        return FSGD_E_ARG;
    f->p = *p;
    f->dim = dim;
    size_t n = dim ? (size_t)dim : 1;
    f->z = calloc(n, sizeof *f->z);
    f->n = calloc(n, sizeof *f->n);
    /* model-sized, touched at random keys every step (fsgd/hugepages.h) */
    fsgd_hugepages_advise(f->z, n * sizeof *f->z);
    fsgd_hugepages_advise(f->n, n * sizeof *f->n);
    if (!f->z || !f->n) {
        fsgd_ftrl_free(f);
        return FSGD_E_NOMEM;
    }
    return FSGD_E_OK;
}

int fsgd_ftrl_init_over(fsgd_ftrl_t *f, uint64_t dim, const fsgd_ftrl_params_t *p, float *z, float *n)
{
    memset(f, 0, sizeof *f);
    if (!(p->alpha > 0) || !isfinite(p->alpha) || !(p->beta >= 0) || !isfinite(p->beta) || !(p->l1 >= 0) ||
        !isfinite(p->l1) || !(p->l2 >= 0) || !isfinite(p->l2))
        return FSGD_E_ARG;
    f->p = *p;
    f->dim = dim;
    f->z = z;
    f->n = n;
    return FSGD_E_OK;
}

/* Algorithm 1, the weight of coordinate i from z_i and n_i. */
static inline double weight(double alpha, double beta, double l1, double l2, double z, double n)
{
    if (fabs(z) <= l1)
        return 0;
    return -(z - copysign(l1, z)) / ((beta + sqrt(n)) / alpha + l2);
}

float fsgd_ftrl_weight(const fsgd_ftrl_params_t *p, float z, float n)
{
    return (float)weight(p->alpha, p->beta, p->l1, p->l2, z, n);
}

void fsgd_ftrl_apply(const fsgd_ftrl_t *f, float *w, const uint32_t *keys, const float *grad, size_t n)
{
    const double alpha = f->p.alpha, beta = f->p.beta, l1 = f->p.l1, l2 = f->p.l2;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        if (i + FSGD_PREFETCH_AHEAD < n) { /* three scattered misses a key otherwise */
            FSGD_PREFETCH(&f->z[keys[i + FSGD_PREFETCH_AHEAD]]);
            FSGD_PREFETCH(&f->n[keys[i + FSGD_PREFETCH_AHEAD]]);
            FSGD_PREFETCH(&w[keys[i + FSGD_PREFETCH_AHEAD]]);
        }
        double g = grad[i], nk = f->n[k];
        /* w[k] is w_{t,i}: the closed form of the current z_k, n_k, stored
         * when the key was last updated (nothing else changes them). */
        double sigma = (sqrt(nk + g * g) - sqrt(nk)) / alpha; /* σ_i = (√(n_i+g_i²) − √n_i)/α */
        double z = f->z[k] + g - sigma * w[k];                /* z_i += g_i − σ_i w_{t,i} */
        nk += g * g;                                          /* n_i += g_i² */
        f->z[k] = (float)z;
        f->n[k] = (float)nk;
        w[k] = (float)weight(alpha, beta, l1, l2, f->z[k], f->n[k]);
    }
}

void fsgd_ftrl_start_from(fsgd_ftrl_t *f, const float *w)
{
    const double d = f->p.beta / f->p.alpha + f->p.l2;
    for (uint64_t k = 0; k < f->dim; k++) {
        f->n[k] = 0;
        f->z[k] = w[k] == 0 ? 0.0f : (float)(-(double)w[k] * d - copysign(f->p.l1, (double)w[k]));
    }
}

uint64_t fsgd_ftrl_touched(const fsgd_ftrl_t *f, uint64_t n_keys)
{
    uint64_t c = 0;
    for (uint64_t k = 0; k < f->dim && k < n_keys; k++)
        c += f->n[k] > 0;
    return c;
}

void fsgd_ftrl_free(fsgd_ftrl_t *f)
{
    if (!f)
        return;
    free(f->z);
    free(f->n);
    f->z = f->n = NULL;
}
