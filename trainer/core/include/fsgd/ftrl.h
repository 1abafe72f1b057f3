/* FTRL-Proximal with per-coordinate learning rates, L1 and L2
 * (McMahan et al., "Ad click prediction: a view from the trenches", KDD'13,
 * §3.1, Algorithm 1).
 *
 * Each key k keeps z_k and n_k (sum of squared gradients); its weight is a
 * closed form of them:
 *   w_k = 0                                                  if |z_k| <= λ1
 *   w_k = -(z_k - sgn(z_k) λ1) / ((β + sqrt(n_k)) / α + λ2)  otherwise
 * and a step with gradient g_k on key k does
 *   σ = (sqrt(n_k + g_k²) - sqrt(n_k)) / α
 *   z_k += g_k - σ w_k ;  n_k += g_k²
 * then recomputes w_k. One step is one round of the paper: the gradient is
 * that of the round's loss, the SUM over the step's rows (a mini-batch is
 * one round whose loss is the sum of its rows' losses), so α, β, λ1 and λ2
 * mean what they mean in the paper. Only touched keys are updated; w of an
 * untouched key does not change (it depends on z_k and n_k alone), so the
 * sparse update is exact.
 *
 * The weights live in a caller's array (the trainer's θ, which the
 * backends read); this state holds z and n, 8 bytes a key. */
#ifndef FSGD_FTRL_H
#define FSGD_FTRL_H

#include <stddef.h>
#include <stdint.h>

typedef struct fsgd_ftrl_params {
    double alpha; /* α, > 0: per-coordinate rate α / (β + sqrt(n_k)) */
    double beta;  /* β, >= 0 */
    double l1;    /* λ1, >= 0: |z_k| <= λ1 keeps w_k exactly 0 */
    double l2;    /* λ2, >= 0 */
} fsgd_ftrl_params_t;

/* fsgd train's default β: the paper's (α is picked from the data,
 * fsgd_train_auto_alpha). */
#define FSGD_FTRL_BETA 1.0

typedef struct fsgd_ftrl {
    fsgd_ftrl_params_t p;
    uint64_t dim;
    float *z;
    float *n;
} fsgd_ftrl_t;

/* Allocates z and n of dim zeros (every weight 0). Returns 0, FSGD_E_ARG
 * (α <= 0, or β, λ1, λ2 negative or not finite) or FSGD_E_NOMEM. */
int fsgd_ftrl_init(fsgd_ftrl_t *f, uint64_t dim, const fsgd_ftrl_params_t *p);

/* fsgd_ftrl_init over the caller's zeroed arrays z and n (dim floats each),
 * which stay the caller's: fsgd_ftrl_free must not be called. The Kafka
 * aggregator keeps z and n where Adam's m and v are, so its checkpoint
 * carries them as it carries m and v. Returns 0 or FSGD_E_ARG. */
int fsgd_ftrl_init_over(fsgd_ftrl_t *f, uint64_t dim, const fsgd_ftrl_params_t *p, float *z, float *n);

/* One step: for each of the n keys (strictly increasing, < dim) with
 * gradient grad[i], updates z, n and w[key] (w holds the weights, dim
 * entries). Thread safe on disjoint key ranges. */
void fsgd_ftrl_apply(const fsgd_ftrl_t *f, float *w, const uint32_t *keys, const float *grad, size_t n);

/* Sets the state so that every weight equals w[k] before any step, for a
 * warm start from weights without FTRL state: n_k = 0 and z_k the value
 * whose closed form gives w_k (z_k = -w_k (β/α + λ2) - sgn(w_k) λ1). */
void fsgd_ftrl_start_from(fsgd_ftrl_t *f, const float *w);

/* Keys below n_keys touched so far (n_k > 0): n_keys = the feature count
 * leaves the intercept's key out. */
uint64_t fsgd_ftrl_touched(const fsgd_ftrl_t *f, uint64_t n_keys);

/* Frees z and n. NULL is a no-op. */
void fsgd_ftrl_free(fsgd_ftrl_t *f);

#endif
