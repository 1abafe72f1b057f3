#include "fsgd/adam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/hugepages.h"
#include "fsgd/prefetch.h"
#include "sparse_table.h"
#include "train_pages.h"

/* A model-sized array of zeros, on huge pages where the kernel has them
 * (fsgd/hugepages.h): every step reads and writes it at random keys. */
static void *model_calloc(uint64_t dim, size_t size)
{
    size_t n = dim ? (size_t)dim : 1;
    void *p = calloc(n, size);
    fsgd_hugepages_advise(p, n * size);
    return p;
}

fsgd_adam_params_t fsgd_adam_defaults(void)
{
    return (fsgd_adam_params_t){.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

int fsgd_adam_init(fsgd_adam_t *a, uint64_t dim, const fsgd_adam_params_t *p)
{
    memset(a, 0, sizeof *a);
    a->p = p ? *p : fsgd_adam_defaults();
    a->dim = dim;
    a->theta = model_calloc(dim, sizeof *a->theta);
    a->m = model_calloc(dim, sizeof *a->m);
    a->v = model_calloc(dim, sizeof *a->v);
    if (!a->theta || !a->m || !a->v) {
        fsgd_adam_free(a);
        return FSGD_E_NOMEM;
    }
    return FSGD_E_OK;
}

int fsgd_adam_init_weights(fsgd_adam_t *a, uint64_t dim)
{
    memset(a, 0, sizeof *a);
    a->p = fsgd_adam_defaults();
    a->dim = dim;
    a->theta = model_calloc(dim, sizeof *a->theta);
    return a->theta ? FSGD_E_OK : FSGD_E_NOMEM;
}

/* p (n elements of size) realloc'd to dim elements, the new ones zero;
 * NULL when out of memory (p is unchanged then). */
static void *grown(void *p, uint64_t n, uint64_t dim, size_t size)
{
    uint8_t *q = realloc(p, (size_t)dim * size);
    if (!q)
        return NULL;
    memset(q + (size_t)n * size, 0, (size_t)(dim - n) * size);
    fsgd_hugepages_advise(q, (size_t)dim * size);
    return q;
}

int fsgd_adam_grow(fsgd_adam_t *a, uint64_t dim)
{
    if (dim <= a->dim)
        return 0;
    /* one array at a time: a failure leaves the ones before it longer, which is harmless */
    float *theta = grown(a->theta, a->dim, dim, sizeof *a->theta);
    if (!theta)
        return FSGD_E_NOMEM;
    a->theta = theta;
    if (a->m) {
        float *m = grown(a->m, a->dim, dim, sizeof *a->m);
        if (!m)
            return FSGD_E_NOMEM;
        a->m = m;
    }
    if (a->v) {
        float *v = grown(a->v, a->dim, dim, sizeof *a->v);
        if (!v)
            return FSGD_E_NOMEM;
        a->v = v;
    }
    if (a->keys) {
        fsgd_adam_key_t *k = grown(a->keys, a->dim, dim, sizeof *a->keys);
        if (!k)
            return FSGD_E_NOMEM;
        a->keys = k;
    }
    a->dim = dim;
    return 0;
}

void fsgd_adam_advance(fsgd_adam_t *a) { a->t++; }

/* Bias corrections from each key's own update count t_k instead of the
 * global step t. Lazy Adam leaves m and v alone between a key's touches, so
 * with the global t a key first touched late gets m = (1-β1)g and
 * v = (1-β2)g² divided by corrections near 1: a step of
 * (1-β1)/sqrt(1-β2) ≈ 3.2·lr, and up to ~6.5·lr by its 10th touch, on
 * exactly the rare keys that overfit. With t_k every key's steps are about
 * lr, as in dense Adam. */
/* apply_counted with key k's step lr·min(sqrt(rarity[k]), rarity_cap):
 * lr auto's 0.15/sqrt(steps an epoch) with the steps that touch k. Its own
 * loop, so that the common case's keeps its code. */
static void apply_counted_rarity(const fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n)
{
    const double b1 = a->p.beta1, b2 = a->p.beta2, lr = a->p.lr, eps = a->p.eps;
    const float *inv_c1 = a->corr, *inv_sqrt_c2 = a->corr + FSGD_ADAM_COUNT_MAX + 1;
    const float *rarity = a->rarity, cap = a->rarity_cap;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        fsgd_adam_key_t *s = &a->keys[k];
        unsigned tk = s->count < FSGD_ADAM_COUNT_MAX ? ++s->count : FSGD_ADAM_COUNT_MAX;
        double g = grad[i];
        double m = b1 * s->m + (1 - b1) * g;
        double v = b2 * s->v + (1 - b2) * g * g;
        s->m = (float)m;
        s->v = (float)v;
        float r = sqrtf(rarity[k]);
        double lr_k = lr * (r < cap ? r : cap);
        a->theta[k] = (float)(a->theta[k] - lr_k * (m * inv_c1[tk]) / (sqrt(v) * inv_sqrt_c2[tk] + eps));
    }
}

/* How far ahead a step's loop asks for a key's θ and state: 16 keys
 * (FSGD_PREFETCH_AHEAD) left it waiting on most keys' state; 64 took the
 * aggregator's step from 19 to 10 ns a key (bench_agg_capacity, P=2 S=1). */
#define STEP_AHEAD 64

/* θ and the optimizer state of key k, soon read and written. A counted
 * key's 10 packed bytes straddle two cache lines at one key in eight: its
 * last byte is asked for too, else that line is a miss the loop waits on.
 * A macro: GCC 12 finds a function of prefetches alone pure and drops its
 * calls. */
#define PREFETCH_KEY(a, k, counted)                                                                                  \
    do {                                                                                                              \
        FSGD_PREFETCH(&(a)->theta[k]);                                                                                \
        if (counted) {                                                                                                \
            FSGD_PREFETCH(&(a)->keys[k]);                                                                             \
            FSGD_PREFETCH((const char *)&(a)->keys[k] + sizeof *(a)->keys - 1);                                       \
        } else {                                                                                                      \
            FSGD_PREFETCH(&(a)->m[k]);                                                                                \
            FSGD_PREFETCH(&(a)->v[k]);                                                                                \
        }                                                                                                             \
    } while (0)

static void apply_counted(const fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n)
{
    const double b1 = a->p.beta1, b2 = a->p.beta2, lr = a->p.lr, eps = a->p.eps;
    const float *inv_c1 = a->corr, *inv_sqrt_c2 = a->corr + FSGD_ADAM_COUNT_MAX + 1;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        if (i + STEP_AHEAD < n)
            PREFETCH_KEY(a, keys[i + STEP_AHEAD], 1);
        fsgd_adam_key_t *s = &a->keys[k];
        /* counts saturate: past FSGD_ADAM_COUNT_MAX both corrections are 1 in float */
        unsigned tk = s->count < FSGD_ADAM_COUNT_MAX ? ++s->count : FSGD_ADAM_COUNT_MAX;
        double g = grad[i];
        double m = b1 * s->m + (1 - b1) * g;
        double v = b2 * s->v + (1 - b2) * g * g;
        s->m = (float)m;
        s->v = (float)v;
        a->theta[k] = (float)(a->theta[k] - lr * (m * inv_c1[tk]) / (sqrt(v) * inv_sqrt_c2[tk] + eps));
    }
}

/* The per-key state (zero) and the correction tables. */
static int alloc_counted(fsgd_adam_t *a)
{
    /* m, v and the count of a key side by side: one cache line a key
     * instead of three scattered arrays (most of a sparse step's cost is
     * these misses). */
    a->keys = model_calloc(a->dim, sizeof *a->keys);
    /* 1/(1-β1^t) and 1/sqrt(1-β2^t) for every t a count can hold: two
     * table reads instead of two expm1 calls per key and step */
    a->corr = malloc(2 * (FSGD_ADAM_COUNT_MAX + 1) * sizeof *a->corr);
    if (!a->keys || !a->corr) {
        free(a->keys);
        free(a->corr);
        a->keys = NULL;
        a->corr = NULL;
        return FSGD_E_NOMEM;
    }
    const double lb1 = log(a->p.beta1), lb2 = log(a->p.beta2);
    a->corr[0] = a->corr[FSGD_ADAM_COUNT_MAX + 1] = 1; /* t = 0 is never used */
    for (unsigned t = 1; t <= FSGD_ADAM_COUNT_MAX; t++) {
        a->corr[t] = (float)(1 / -expm1((double)t * lb1));
        a->corr[FSGD_ADAM_COUNT_MAX + 1 + t] = (float)(1 / sqrt(-expm1((double)t * lb2)));
    }
    return FSGD_E_OK;
}

int fsgd_adam_count_keys(fsgd_adam_t *a)
{
    if (a->keys)
        return FSGD_E_OK;
    FSGD_TRY(alloc_counted(a));
    /* keep any state already there; only its nonzero entries are written,
     * so a fresh state's pages stay unmapped (zero) until a key's first
     * update instead of all 12 bytes a key being resident at once (2^24
     * keys: 201 MB while the rows are still being cut into batches) */
    for (uint64_t k = 0; k < a->dim; k++)
        if (a->m[k] != 0 || a->v[k] != 0) {
            a->keys[k].m = a->m[k];
            a->keys[k].v = a->v[k];
        }
    /* the separate m and v are not needed any more */
    free(a->m);
    free(a->v);
    a->m = a->v = NULL;
    return FSGD_E_OK;
}

int fsgd_adam_init_counted(fsgd_adam_t *a, uint64_t dim, const fsgd_adam_params_t *p)
{
    memset(a, 0, sizeof *a);
    a->p = p ? *p : fsgd_adam_defaults();
    a->dim = dim;
    a->theta = model_calloc(dim, sizeof *a->theta);
    if (!a->theta || alloc_counted(a) < 0) {
        fsgd_adam_free(a);
        return FSGD_E_NOMEM;
    }
    return FSGD_E_OK;
}

void fsgd_adam_apply(const fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n)
{
    const double b1 = a->p.beta1, b2 = a->p.beta2;
    /* Bias corrections of step t (Kingma & Ba, Alg. 1), folded into the step size. */
    const double c1 = 1 - pow(b1, (double)a->t);
    const double c2 = 1 - pow(b2, (double)a->t);
    const double lr = a->p.lr, eps = a->p.eps;
    if (a->keys) {
        if (a->rarity)
            apply_counted_rarity(a, keys, grad, n);
        else
            apply_counted(a, keys, grad, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        if (i + FSGD_PREFETCH_AHEAD < n) { /* as in apply_counted */
            FSGD_PREFETCH(&a->m[keys[i + FSGD_PREFETCH_AHEAD]]);
            FSGD_PREFETCH(&a->v[keys[i + FSGD_PREFETCH_AHEAD]]);
            FSGD_PREFETCH(&a->theta[keys[i + FSGD_PREFETCH_AHEAD]]);
        }
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

uint64_t fsgd_adam_touched(const fsgd_adam_t *a, uint64_t n_keys)
{
    uint64_t c = 0, n = n_keys < a->dim ? n_keys : a->dim;
    if (a->keys)
        for (uint64_t k = 0; k < n; k++)
            c += a->keys[k].count > 0;
    else if (a->v)
        for (uint64_t k = 0; k < n; k++)
            c += a->v[k] > 0;
    return c;
}

int fsgd_adam_map_pages(const fsgd_adam_t *a)
{
    size_t n = a->dim ? (size_t)a->dim : 1;
    int ok = fsgd_pages_map(a->theta, n * sizeof *a->theta);
    if (a->keys)
        ok &= fsgd_pages_map(a->keys, n * sizeof *a->keys);
    if (a->m)
        ok &= fsgd_pages_map(a->m, n * sizeof *a->m);
    if (a->v)
        ok &= fsgd_pages_map(a->v, n * sizeof *a->v);
    return ok;
}

void fsgd_adam_free(fsgd_adam_t *a)
{
    if (!a)
        return;
    free(a->theta);
    free(a->m);
    free(a->v);
    free(a->keys);
    free(a->corr);
    a->keys = NULL;
    a->corr = NULL;
    a->theta = a->m = a->v = NULL;
}

int fsgd_reducer_take_step(fsgd_reducer_t *r, double scale, double l2, const float *theta, fsgd_sparse_t *out)
{
    const uint32_t *keys;
    const double *sums;
    size_t n;
    FSGD_TRY(fsgd_reducer_sorted(r, &keys, &sums, &n));
    FSGD_TRY(fsgd_sparse_reserve(out, n));
    for (size_t i = 0; i < n; i++) {
        if (theta && l2 != 0 && i + FSGD_PREFETCH_AHEAD < n)
            FSGD_PREFETCH(&theta[keys[i + FSGD_PREFETCH_AHEAD]]);
        out->keys[i] = keys[i];
        /* l2 = 0: θ's term is 0·θ, so θ (a miss a key) is not read */
        out->vals[i] = fsgd_adam_step_grad(sums[i], scale, l2, theta && l2 != 0 ? theta[keys[i]] : 0.0f);
    }
    out->n = n;
    fsgd_reducer_clear(r);
    return FSGD_E_OK;
}

/* One key of fsgd_adam_step_reduced: the step gradient, then Adam, as
 * fsgd_reducer_take_step + fsgd_adam_step compute them (same operations in
 * the same order, so the same bits). counted: per-key corrections. */
static inline float reduced_key(const fsgd_adam_t *a, uint32_t k, double sum, double scale, double l2, int counted,
                                double c1, double c2, float *before)
{
    const double b1 = a->p.beta1, b2 = a->p.beta2, lr = a->p.lr, eps = a->p.eps;
    float th = a->theta[k];
    if (before)
        *before = th;
    float gk = fsgd_adam_step_grad(sum, scale, l2, l2 != 0 ? th : 0.0f);
    double g = gk;
    if (counted) {
        const float *inv_c1 = a->corr, *inv_sqrt_c2 = a->corr + FSGD_ADAM_COUNT_MAX + 1;
        fsgd_adam_key_t *s = &a->keys[k];
        unsigned tk = s->count < FSGD_ADAM_COUNT_MAX ? ++s->count : FSGD_ADAM_COUNT_MAX;
        double m = b1 * s->m + (1 - b1) * g;
        double v = b2 * s->v + (1 - b2) * g * g;
        s->m = (float)m;
        s->v = (float)v;
        a->theta[k] = (float)(th - lr * (m * inv_c1[tk]) / (sqrt(v) * inv_sqrt_c2[tk] + eps));
    } else {
        double m = b1 * a->m[k] + (1 - b1) * g;
        double v = b2 * a->v[k] + (1 - b2) * g * g;
        a->m[k] = (float)m;
        a->v[k] = (float)v;
        a->theta[k] = (float)(th - lr * (m / c1) / (sqrt(v / c2) + eps));
    }
    return gk;
}

int fsgd_adam_step_reduced(fsgd_adam_t *a, fsgd_reducer_t *r, const uint32_t *at, double scale, double l2,
                           fsgd_sparse_t *out, fsgd_sparse_t *before)
{
    if (at && a->rarity)
        return FSGD_E_ARG; /* rarity is indexed by key: fsgd train's, never a table's */
    if (a->keys && a->rarity) { /* its own loop (apply_counted_rarity): the two passes */
        FSGD_TRY(fsgd_reducer_take_step(r, scale, l2, a->theta, out));
        if (before) {
            FSGD_TRY(fsgd_sparse_reserve(before, out->n));
            for (size_t i = 0; i < out->n; i++) {
                before->keys[i] = out->keys[i];
                before->vals[i] = a->theta[out->keys[i]];
            }
            before->n = out->n;
        }
        fsgd_adam_step(a, out->keys, out->vals, out->n);
        return FSGD_E_OK;
    }
    const uint32_t *keys;
    const double *sums;
    size_t n;
    FSGD_TRY(fsgd_reducer_sorted(r, &keys, &sums, &n));
    FSGD_TRY(fsgd_sparse_reserve(out, n));
    if (before)
        FSGD_TRY(fsgd_sparse_reserve(before, n));
    fsgd_adam_advance(a);
    const double c1 = 1 - pow(a->p.beta1, (double)a->t), c2 = 1 - pow(a->p.beta2, (double)a->t);
    const int counted = a->keys != NULL;
    /* One pass: a key's θ and its optimizer state are fetched together, so
     * their misses overlap (the two passes had one miss outstanding a key). */
    const uint32_t *idx = at ? at : keys;
    for (size_t i = 0; i < n; i++) {
        if (i + STEP_AHEAD < n)
            PREFETCH_KEY(a, idx[i + STEP_AHEAD], counted);
        uint32_t k = keys[i];
        out->keys[i] = k;
        if (before)
            before->keys[i] = k;
        out->vals[i] = reduced_key(a, idx[i], sums[i], scale, l2, counted, c1, c2, before ? &before->vals[i] : NULL);
    }
    out->n = n;
    if (before)
        before->n = n;
    fsgd_reducer_clear(r);
    return FSGD_E_OK;
}
