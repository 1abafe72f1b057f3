/* The one step function (fsgd/step.h) that fsgd train and the aggregator
 * share, against the update written out here from its parts: the strategy
 * none's exact sum, then Adam with the mean gradient + λθ, FTRL on the sum,
 * or efsign's mean of the senders' steps; and a step of no rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/adam.h"
#include "fsgd/error.h"
#include "fsgd/ftrl.h"
#include "fsgd/step.h"
#include "fsgd/strategy.h"
#include "testlib.h"

#define DIM 64
#define SENDERS 3

/* SENDERS random sparse gradients, summed into sum[DIM] (keys < DIM);
 * touched[k]: some sender has key k (its sum may be 0). */
static int touched[DIM];

static void make_grads(uint64_t *seed, fsgd_sparse_t g[SENDERS], double sum[DIM])
{
    memset(sum, 0, DIM * sizeof *sum);
    memset(touched, 0, sizeof touched);
    for (int s = 0; s < SENDERS; s++) {
        CU_ASSERT_EQUAL_FATAL(fsgd_sparse_reserve(&g[s], DIM), 0);
        g[s].n = 0;
        for (uint32_t k = 0; k < DIM; k++)
            if (fsgd_test_rand(seed) % 3 == 0) {
                float v = (float)((double)(fsgd_test_rand(seed) % 2001) / 1000.0 - 1.0);
                g[s].keys[g[s].n] = k;
                g[s].vals[g[s].n++] = v;
                sum[k] += v;
                touched[k] = 1;
            }
    }
}

/* Feeds the senders' messages of strategy spec to a fresh aggregator side. */
static fsgd_sagg_t *reduce(const char *spec, const fsgd_sparse_t g[SENDERS])
{
    char err[256];
    fsgd_sagg_t *a = fsgd_sagg_new(spec, DIM, 1, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    for (int s = 0; s < SENDERS; s++) {
        fsgd_sworker_t *w = fsgd_sworker_new(spec, DIM, 7 + (uint64_t)s, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        size_t cap = fsgd_sworker_bound(w, g[s].n), len = 0;
        uint8_t *msg = malloc(cap);
        fsgd_outbuf_t ob = {msg, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w, g[s].keys, g[s].vals, g[s].n, 10, &ob, err, sizeof err), 0);
        len = ob.len;
        CU_ASSERT_EQUAL_FATAL(fsgd_sagg_add(a, (uint32_t)s, msg, len, 1e9, NULL, err, sizeof err), 0);
        free(msg);
        fsgd_sworker_destroy(w);
    }
    return a;
}

static void test_adam_and_empty(void)
{
    uint64_t seed = fsgd_test_seed();
    fsgd_sparse_t g[SENDERS] = {{0}}, out = {0};
    double sum[DIM];
    make_grads(&seed, g, sum);
    fsgd_adam_params_t p = fsgd_adam_defaults();
    fsgd_adam_t got, want;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&got, DIM, &p), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&want, DIM, &p), 0);
    for (int k = 0; k < DIM; k++)
        got.theta[k] = want.theta[k] = (float)(k % 7) / 10.0f;
    const double l2 = 0.01, rows = 30;
    fsgd_sagg_t *a = reduce("none", g);
    fsgd_step_opt_t o = {.adam = &got, .l2 = l2};
    fsgd_step_info_t info = {.step = 1, .rows = (uint64_t)rows, .n_senders = SENDERS};
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_step_apply(&o, a, &info, &out, err, sizeof err), 0);
    /* by hand: the mean gradient plus λθ on the touched keys, then Adam */
    uint32_t keys[DIM];
    float vals[DIM];
    size_t n = 0;
    for (uint32_t k = 0; k < DIM; k++)
        if (touched[k]) {
            keys[n] = k;
            vals[n++] = fsgd_adam_step_grad(sum[k], 1.0 / rows, l2, want.theta[k]);
        }
    fsgd_adam_step(&want, keys, vals, n);
    CU_ASSERT_EQUAL_FATAL(out.n, n);
    for (size_t i = 0; i < n; i++) { /* what Adam took: exactly these */
        CU_ASSERT_EQUAL(out.keys[i], keys[i]);
        CU_ASSERT_EQUAL(out.vals[i], vals[i]);
    }
    CU_ASSERT_EQUAL(got.t, 1);
    for (int k = 0; k < DIM; k++)
        CU_ASSERT_DOUBLE_EQUAL(got.theta[k], want.theta[k], 1e-6);
    /* a step of no rows: nothing moves, t stays */
    float before[DIM];
    memcpy(before, got.theta, sizeof before);
    fsgd_step_info_t none = {.step = 2, .rows = 0};
    CU_ASSERT_EQUAL(fsgd_step_apply(&o, a, &none, &out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(out.n, 0);
    CU_ASSERT_EQUAL(got.t, 1);
    CU_ASSERT_EQUAL(memcmp(before, got.theta, sizeof before), 0);
    fsgd_sagg_destroy(a);
    fsgd_adam_free(&got);
    fsgd_adam_free(&want);
    for (int s = 0; s < SENDERS; s++)
        fsgd_sparse_free(&g[s]);
    fsgd_sparse_free(&out);
}

static void test_ftrl_takes_the_sum(void)
{
    uint64_t seed = fsgd_test_seed() + 1;
    fsgd_sparse_t g[SENDERS] = {{0}}, out = {0};
    double sum[DIM];
    make_grads(&seed, g, sum);
    fsgd_adam_params_t p = fsgd_adam_defaults();
    fsgd_adam_t adam;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&adam, DIM, &p), 0);
    fsgd_ftrl_params_t fp = {.alpha = 0.1, .beta = 1, .l1 = 0.5, .l2 = 1};
    fsgd_ftrl_t f, want;
    CU_ASSERT_EQUAL_FATAL(fsgd_ftrl_init(&f, DIM, &fp), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_ftrl_init(&want, DIM, &fp), 0);
    float wtheta[DIM] = {0};
    fsgd_sagg_t *a = reduce("none", g);
    fsgd_step_opt_t o = {.adam = &adam, .ftrl = &f};
    fsgd_step_info_t info = {.step = 1, .rows = 30, .n_senders = SENDERS};
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_step_apply(&o, a, &info, &out, err, sizeof err), 0);
    uint32_t keys[DIM];
    float vals[DIM];
    size_t n = 0;
    for (uint32_t k = 0; k < DIM; k++)
        if (touched[k]) {
            keys[n] = k;
            vals[n++] = (float)sum[k];
        }
    fsgd_ftrl_apply(&want, wtheta, keys, vals, n);
    for (int k = 0; k < DIM; k++)
        CU_ASSERT_DOUBLE_EQUAL(adam.theta[k], wtheta[k], 1e-6);
    CU_ASSERT_EQUAL(adam.t, 1);
    fsgd_sagg_destroy(a);
    fsgd_ftrl_free(&f);
    fsgd_ftrl_free(&want);
    fsgd_adam_free(&adam);
    for (int s = 0; s < SENDERS; s++)
        fsgd_sparse_free(&g[s]);
    fsgd_sparse_free(&out);
}

/* A sparse table's step is the dense step on the keys' slots: several
 * steps of random gradients, with counted keys (lr auto) and without, give
 * the dense θ bit for bit, and a key never touched has no slot and reads 0. */
static void test_sparse_table_is_the_dense_step(void)
{
    for (int counted = 0; counted < 2; counted++) {
        uint64_t seed = fsgd_test_seed() + 2 + (uint64_t)counted;
        fsgd_adam_params_t p = fsgd_adam_defaults();
        fsgd_adam_t dense, sparse;
        fsgd_sparse_table_t *table = fsgd_sparse_table_new(4);
        CU_ASSERT_PTR_NOT_NULL_FATAL(table);
        CU_ASSERT_EQUAL_FATAL((counted ? fsgd_adam_init_counted : fsgd_adam_init)(&dense, DIM, &p), 0);
        /* room for 4 keys: the table and the arrays must grow */
        CU_ASSERT_EQUAL_FATAL((counted ? fsgd_adam_init_counted : fsgd_adam_init)(&sparse, 4, &p), 0);
        fsgd_sparse_t g[SENDERS] = {{0}}, out_d = {0}, out_s = {0}, before = {0};
        int ever[DIM] = {0};
        char err[256];
        for (int step = 1; step <= 5; step++) {
            double sum[DIM];
            make_grads(&seed, g, sum);
            for (int k = 0; k < DIM; k++)
                ever[k] |= touched[k];
            fsgd_step_info_t info = {.step = (uint64_t)step, .rows = 20, .n_senders = SENDERS};
            fsgd_sagg_t *ad = reduce("none", g), *as = reduce("none", g);
            fsgd_step_opt_t od = {.adam = &dense, .l2 = 0.01};
            fsgd_step_opt_t os = {.adam = &sparse, .l2 = 0.01, .table = table, .before = &before};
            CU_ASSERT_EQUAL_FATAL(fsgd_step_apply(&od, ad, &info, &out_d, err, sizeof err), 0);
            CU_ASSERT_EQUAL_FATAL(fsgd_step_apply(&os, as, &info, &out_s, err, sizeof err), 0);
            /* the same keys and step gradients out, θ before on the keys */
            CU_ASSERT_EQUAL_FATAL(out_s.n, out_d.n);
            CU_ASSERT_EQUAL(memcmp(out_s.keys, out_d.keys, out_d.n * sizeof *out_d.keys), 0);
            CU_ASSERT_EQUAL(memcmp(out_s.vals, out_d.vals, out_d.n * sizeof *out_d.vals), 0);
            CU_ASSERT_EQUAL_FATAL(before.n, out_d.n);
            CU_ASSERT_EQUAL(memcmp(before.keys, out_d.keys, out_d.n * sizeof *out_d.keys), 0);
            fsgd_sagg_destroy(ad);
            fsgd_sagg_destroy(as);
        }
        CU_ASSERT_EQUAL(sparse.t, dense.t);
        uint32_t n_ever = 0;
        for (uint32_t k = 0; k < DIM; k++) {
            float w = fsgd_sparse_table_theta(table, &sparse, k);
            CU_ASSERT_EQUAL(memcmp(&w, &dense.theta[k], sizeof w), 0); /* bit for bit */
            n_ever += (uint32_t)ever[k];
        }
        /* it holds exactly the keys ever touched, listed in order */
        CU_ASSERT_EQUAL_FATAL(fsgd_sparse_table_size(table), n_ever);
        CU_ASSERT(sparse.dim >= n_ever);
        uint32_t keys[DIM], slots[DIM], i = 0;
        CU_ASSERT_EQUAL(fsgd_sparse_table_sorted(table, keys, slots), 0);
        for (uint32_t k = 0; k < DIM; k++)
            if (ever[k]) {
                CU_ASSERT_EQUAL(keys[i], k);
                CU_ASSERT_EQUAL(fsgd_sparse_table_keys(table)[slots[i]], k);
                i++;
            }
        fsgd_sparse_table_destroy(table);
        fsgd_adam_free(&dense);
        fsgd_adam_free(&sparse);
        for (int s = 0; s < SENDERS; s++)
            fsgd_sparse_free(&g[s]);
        fsgd_sparse_free(&out_d);
        fsgd_sparse_free(&out_s);
        fsgd_sparse_free(&before);
    }
}

/* FTRL indexes θ by key: a table refuses it, and says why. */
static void test_sparse_table_refuses_ftrl(void)
{
    uint64_t seed = fsgd_test_seed() + 4;
    fsgd_sparse_t g[SENDERS] = {{0}}, out = {0};
    double sum[DIM];
    make_grads(&seed, g, sum);
    fsgd_adam_params_t p = fsgd_adam_defaults();
    fsgd_adam_t adam;
    fsgd_sparse_table_t *table = fsgd_sparse_table_new(4);
    fsgd_ftrl_params_t fp = {.alpha = 0.1, .beta = 1, .l1 = 0.5, .l2 = 1};
    fsgd_ftrl_t f;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&adam, 4, &p), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(table);
    CU_ASSERT_EQUAL_FATAL(fsgd_ftrl_init(&f, DIM, &fp), 0);
    fsgd_sagg_t *a = reduce("none", g);
    fsgd_step_opt_t o = {.adam = &adam, .ftrl = &f, .table = table};
    fsgd_step_info_t info = {.step = 1, .rows = 30, .n_senders = SENDERS};
    char err[256] = "";
    CU_ASSERT_EQUAL(fsgd_step_apply(&o, a, &info, &out, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "Adam");
    CU_ASSERT_EQUAL(adam.t, 0);
    fsgd_sagg_destroy(a);
    fsgd_ftrl_free(&f);
    fsgd_sparse_table_destroy(table);
    fsgd_adam_free(&adam);
    for (int s = 0; s < SENDERS; s++)
        fsgd_sparse_free(&g[s]);
    fsgd_sparse_free(&out);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"Adam: mean gradient + l2 theta; no rows, no step", test_adam_and_empty},
        {"FTRL takes the summed gradient", test_ftrl_takes_the_sum},
        {"a sparse table's step is the dense step, bit for bit", test_sparse_table_is_the_dense_step},
        {"a sparse table refuses FTRL", test_sparse_table_refuses_ftrl},
        {NULL, NULL},
    };
    fsgd_test_suite("step", cases);
}
