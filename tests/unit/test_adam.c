/* Sparse Adam: bitwise equal to a dense Adam written here when every key is
 * touched every step; with partial touches it differs only where it should
 * (keys skipped in some steps), and there it equals a per-key "lazy" Adam. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fsgd/adam.h"
#include "fsgd/error.h"
#include "testlib.h"

static double urand(uint64_t *s) { return (double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0; }

/* Textbook dense Adam (Kingma & Ba, Algorithm 1) over the same storage
 * types as fsgd_adam_t (float θ, m, v; double arithmetic within a step):
 *   m = β1 m + (1-β1) g ; v = β2 v + (1-β2) g²
 *   m̂ = m / (1-β1^t) ; v̂ = v / (1-β2^t) ; θ -= lr m̂ / (sqrt(v̂) + ε)
 * g[k] is the gradient of every key; a key with g = 0 still moves while its
 * m is nonzero, which is exactly where lazy Adam differs. */
typedef struct dense_adam {
    size_t dim;
    uint64_t t;
    float *theta, *m, *v;
} dense_adam_t;

static void dense_step(dense_adam_t *a, const fsgd_adam_params_t *p, const float *g)
{
    a->t++;
    double c1 = 1 - pow(p->beta1, (double)a->t), c2 = 1 - pow(p->beta2, (double)a->t);
    for (size_t k = 0; k < a->dim; k++) {
        double gk = g[k];
        double m = p->beta1 * a->m[k] + (1 - p->beta1) * gk;
        double v = p->beta2 * a->v[k] + (1 - p->beta2) * gk * gk;
        a->m[k] = (float)m;
        a->v[k] = (float)v;
        double mhat = m / c1, vhat = v / c2;
        a->theta[k] = (float)(a->theta[k] - p->lr * mhat / (sqrt(vhat) + p->eps));
    }
}

/* Lazy Adam for one key: steps only when touched, with the global t. */
typedef struct lazy_key {
    float theta, m, v;
} lazy_key_t;

static void lazy_step(lazy_key_t *s, const fsgd_adam_params_t *p, uint64_t t, float g)
{
    double c1 = 1 - pow(p->beta1, (double)t), c2 = 1 - pow(p->beta2, (double)t);
    double m = p->beta1 * s->m + (1 - p->beta1) * (double)g;
    double v = p->beta2 * s->v + (1 - p->beta2) * (double)g * g;
    s->m = (float)m;
    s->v = (float)v;
    s->theta = (float)(s->theta - p->lr * (m / c1) / (sqrt(v / c2) + p->eps));
}

static int bits_equal(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void test_defaults(void)
{
    fsgd_adam_params_t p = fsgd_adam_defaults();
    CU_ASSERT_DOUBLE_EQUAL(p.beta1, 0.9, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.beta2, 0.999, 0);
    CU_ASSERT_DOUBLE_EQUAL(p.eps, 1e-8, 0);
    CU_ASSERT_TRUE(p.lr > 0);
    fsgd_adam_t a;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&a, 5, NULL), 0);
    CU_ASSERT_EQUAL(a.t, 0);
    CU_ASSERT_DOUBLE_EQUAL(a.p.beta2, 0.999, 0);
    for (int k = 0; k < 5; k++)
        CU_ASSERT_TRUE(a.theta[k] == 0 && a.m[k] == 0 && a.v[k] == 0);
    fsgd_adam_free(&a);
    fsgd_adam_free(NULL);
}

/* First step: m̂ = g, v̂ = g², so every key moves by lr·g/(|g|+ε) -- the bias
 * correction at work, independent of how the code arranges it. */
static void test_first_step(void)
{
    fsgd_adam_params_t p = fsgd_adam_defaults();
    p.lr = 0.05;
    fsgd_adam_t a;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&a, 4, &p), 0);
    uint32_t keys[3] = {0, 2, 3};
    float g[3] = {3.0f, -1e-3f, 250.0f};
    fsgd_adam_step(&a, keys, g, 3);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_DOUBLE_EQUAL(a.theta[keys[i]], -p.lr * g[i] / (fabs(g[i]) + p.eps), 1e-7);
    CU_ASSERT_EQUAL(a.theta[1], 0.0f);
    CU_ASSERT_EQUAL(a.t, 1);
    fsgd_adam_free(&a);
}

static void test_dense_equivalence(void)
{
    uint64_t s = fsgd_test_seed() ^ 0xADA;
    const size_t dim = 257;
    fsgd_adam_params_t p = fsgd_adam_defaults();
    p.lr = 0.003;
    fsgd_adam_t a;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&a, dim, &p), 0);
    dense_adam_t d = {dim, 0, calloc(dim, 4), calloc(dim, 4), calloc(dim, 4)};
    uint32_t *keys = malloc(dim * sizeof *keys);
    float *g = malloc(dim * sizeof *g);
    for (size_t k = 0; k < dim; k++)
        keys[k] = (uint32_t)k;
    size_t mismatches = 0;
    for (int step = 0; step < 300; step++) {
        for (size_t k = 0; k < dim; k++) {
            double u = urand(&s) - 0.5;
            /* mixed scales, some exact zeros */
            g[k] = (float)(k % 7 == 0 ? 0 : u * pow(10, (double)(k % 5) - 2));
        }
        fsgd_adam_step(&a, keys, g, dim);
        dense_step(&d, &p, g);
        for (size_t k = 0; k < dim; k++)
            mismatches += !bits_equal(a.theta[k], d.theta[k]) || !bits_equal(a.m[k], d.m[k]) ||
                          !bits_equal(a.v[k], d.v[k]);
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT_EQUAL(a.t, 300);
    fsgd_adam_free(&a);
    free(d.theta);
    free(d.m);
    free(d.v);
    free(keys);
    free(g);
}

static void test_lazy_differs_only_on_skipped_keys(void)
{
    uint64_t s = fsgd_test_seed() ^ 0x1A2;
    const size_t dim = 200;
    const int steps = 100;
    fsgd_adam_params_t p = fsgd_adam_defaults();
    fsgd_adam_t a;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&a, dim, &p), 0);
    dense_adam_t d = {dim, 0, calloc(dim, 4), calloc(dim, 4), calloc(dim, 4)};
    lazy_key_t *lazy = calloc(dim, sizeof *lazy);
    uint32_t *keys = malloc(dim * sizeof *keys);
    float *gs = malloc(dim * sizeof *gs), *gd = malloc(dim * sizeof *gd);
    /* keys 0..49 every step, 50..149 at random, 150..199 never */
    int *touched_steps = calloc(dim, sizeof *touched_steps);
    for (int step = 1; step <= steps; step++) {
        size_t n = 0;
        for (size_t k = 0; k < dim; k++) {
            int touch = k < 50 || (k < 150 && urand(&s) < 0.3);
            gd[k] = 0;
            if (!touch)
                continue;
            float g = (float)(urand(&s) - 0.45);
            keys[n] = (uint32_t)k;
            gs[n++] = g;
            gd[k] = g;
            touched_steps[k]++;
            lazy_step(&lazy[k], &p, (uint64_t)step, g);
        }
        fsgd_adam_step(&a, keys, gs, n);
        dense_step(&d, &p, gd);
    }
    size_t every_diff = 0, never_nonzero = 0, lazy_diff = 0, some_vs_dense_diff = 0, some = 0;
    for (size_t k = 0; k < dim; k++) {
        if (k < 50) {
            every_diff += !bits_equal(a.theta[k], d.theta[k]) || !bits_equal(a.m[k], d.m[k]) ||
                          !bits_equal(a.v[k], d.v[k]);
        } else if (k >= 150) {
            never_nonzero += a.theta[k] != 0 || a.m[k] != 0 || a.v[k] != 0 || d.theta[k] != 0;
        } else {
            lazy_diff += !bits_equal(a.theta[k], lazy[k].theta) || !bits_equal(a.m[k], lazy[k].m) ||
                         !bits_equal(a.v[k], lazy[k].v);
            if (touched_steps[k] < steps) {
                some++;
                some_vs_dense_diff += !bits_equal(a.theta[k], d.theta[k]);
            }
        }
    }
    CU_ASSERT_EQUAL(every_diff, 0);         /* touched every step: exactly dense Adam */
    CU_ASSERT_EQUAL(never_nonzero, 0);      /* never touched: untouched in both */
    CU_ASSERT_EQUAL(lazy_diff, 0);          /* sometimes touched: exactly per-key lazy Adam */
    CU_ASSERT_TRUE(some > 0);
    CU_ASSERT_EQUAL(some_vs_dense_diff, some); /* ... which is not dense Adam there */
    fsgd_adam_free(&a);
    free(d.theta);
    free(d.m);
    free(d.v);
    free(lazy);
    free(keys);
    free(gs);
    free(gd);
    free(touched_steps);
}

/* Adam on a separable quadratic Σ c_k (θ_k - t_k)² reaches the optimum. */
static void test_converges(void)
{
    const size_t dim = 16;
    fsgd_adam_params_t p = fsgd_adam_defaults();
    p.lr = 0.01;
    fsgd_adam_t a;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&a, dim, &p), 0);
    uint32_t keys[16];
    float g[16];
    for (size_t k = 0; k < dim; k++)
        keys[k] = (uint32_t)k;
    for (int step = 0; step < 5000; step++) {
        for (size_t k = 0; k < dim; k++) {
            double c = 0.1 + (double)k, target = (double)k / 4 - 2;
            g[k] = (float)(2 * c * (a.theta[k] - target));
        }
        fsgd_adam_step(&a, keys, g, dim);
    }
    for (size_t k = 0; k < dim; k++)
        CU_ASSERT_DOUBLE_EQUAL(a.theta[k], (double)k / 4 - 2, 1e-2);
    fsgd_adam_free(&a);
}

/* Per-key counts: a key first touched at global step 1000 moves by lr (as
 * dense Adam's first step), where the global-t corrections give ~2.5·lr;
 * its later steps use its own count (checked against the formula). */
static void test_counted_keys(void)
{
    fsgd_adam_params_t p = fsgd_adam_defaults();
    fsgd_adam_t plain, counted;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&plain, 4, &p), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&counted, 4, &p), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_count_keys(&counted), 0);
    uint32_t k0 = 0, k3 = 3;
    float g = 0.5f;
    for (int t = 0; t < 999; t++) {
        fsgd_adam_step(&plain, &k0, &g, 1);
        fsgd_adam_step(&counted, &k0, &g, 1);
    }
    fsgd_adam_step(&plain, &k3, &g, 1);
    fsgd_adam_step(&counted, &k3, &g, 1);
    CU_ASSERT_DOUBLE_EQUAL(counted.theta[3], -p.lr, 1e-7);
    double b1 = p.beta1, b2 = p.beta2;
    double plain_step = p.lr * ((1 - b1) * g / (1 - pow(b1, 1000))) / (sqrt((1 - b2) * g * g / (1 - pow(b2, 1000))) + p.eps);
    CU_ASSERT_DOUBLE_EQUAL(plain.theta[3], -plain_step, 1e-6);
    CU_ASSERT_TRUE(plain_step > 2.5 * p.lr); /* sqrt(1 - 0.999^1000) / (sqrt(0.001) / 0.1) = 2.51 */
    /* second touch of key 3: corrections of t_k = 2 */
    float g2 = -0.25f;
    double th = counted.theta[3];
    fsgd_adam_step(&counted, &k3, &g2, 1);
    double m = b1 * (1 - b1) * g + (1 - b1) * g2, v = b2 * (1 - b2) * g * g + (1 - b2) * g2 * g2;
    double want = th - p.lr * (m / (1 - b1 * b1)) / (sqrt(v / (1 - b2 * b2)) + p.eps);
    CU_ASSERT_DOUBLE_EQUAL(counted.theta[3], want, 1e-6);
    CU_ASSERT_EQUAL(counted.keys[3].count, 2);
    CU_ASSERT_EQUAL(counted.keys[0].count, 999);
    /* key 0, touched every step, matches plain Adam (t_k = t) */
    CU_ASSERT_DOUBLE_EQUAL(counted.theta[0], plain.theta[0], 1e-6);
    fsgd_adam_free(&plain);
    fsgd_adam_free(&counted);
}

/* fsgd_adam_init_counted is fsgd_adam_init + fsgd_adam_count_keys without
 * the separate m and v: the same updates, bit for bit. */
static void test_init_counted(void)
{
    enum { DIM = 300, STEPS = 40 };
    fsgd_adam_params_t p = fsgd_adam_defaults();
    p.lr = 0.05;
    fsgd_adam_t x, y;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init(&x, DIM, &p), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_count_keys(&x), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init_counted(&y, DIM, &p), 0);
    CU_ASSERT(y.m == NULL && y.v == NULL && y.keys != NULL);
    uint64_t seed = fsgd_test_seed();
    uint32_t keys[DIM];
    float g[DIM];
    for (int t = 0; t < STEPS; t++) {
        size_t n = 0;
        for (uint32_t k = 0; k < DIM; k++)
            if (fsgd_test_rand(&seed) % 4 == 0) {
                keys[n] = k;
                g[n++] = (float)((double)(fsgd_test_rand(&seed) % 2001) / 1000.0 - 1.0);
            }
        fsgd_adam_step(&x, keys, g, n);
        fsgd_adam_step(&y, keys, g, n);
    }
    CU_ASSERT_EQUAL(memcmp(x.theta, y.theta, DIM * sizeof *x.theta), 0);
    CU_ASSERT_EQUAL(memcmp(x.keys, y.keys, DIM * sizeof *x.keys), 0);
    fsgd_adam_free(&x);
    fsgd_adam_free(&y);
}

/* Pages resident according to mincore, of the whole pages in [p, p + bytes). */
static size_t resident_pages(const void *p, size_t bytes, size_t *whole)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + pg - 1) & ~(pg - 1), hi = ((uintptr_t)p + bytes) & ~(pg - 1);
    size_t n = hi > lo ? (hi - lo) / pg : 0, r = 0;
    unsigned char *vec = malloc(n ? n : 1);
    *whole = n;
    if (!vec || mincore((void *)lo, hi - lo, vec) != 0) {
        free(vec);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        r += vec[i] & 1;
    free(vec);
    return r;
}

/* fsgd_adam_map_pages: every page of θ and the key states resident
 * afterwards, no byte changed, and the steps after it the same as without. */
static void test_map_pages(void)
{
    enum { DIM = 1 << 21, STEPS = 5 };
    fsgd_adam_params_t p = fsgd_adam_defaults();
    fsgd_adam_t x, y;
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init_counted(&x, DIM, &p), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_adam_init_counted(&y, DIM, &p), 0);
    uint32_t keys[64];
    float g[64];
    uint64_t seed = 11;
    for (int t = 0; t < STEPS; t++) {
        for (size_t i = 0; i < 64; i++) {
            keys[i] = (uint32_t)(i * (DIM / 64) + fsgd_test_rand(&seed) % (DIM / 64));
            g[i] = (float)((double)(fsgd_test_rand(&seed) % 2001) / 1000.0 - 1.0);
        }
        if (t == 2) {
            size_t whole;
            int mapped = fsgd_adam_map_pages(&x);
            if (mapped) {
                CU_ASSERT_EQUAL(resident_pages(x.theta, DIM * sizeof *x.theta, &whole), whole);
                CU_ASSERT_EQUAL(resident_pages(x.keys, DIM * sizeof *x.keys, &whole), whole);
            }
            CU_ASSERT_EQUAL(memcmp(x.theta, y.theta, DIM * sizeof *x.theta), 0);
        }
        fsgd_adam_step(&x, keys, g, 64);
        fsgd_adam_step(&y, keys, g, 64);
    }
    CU_ASSERT_EQUAL(memcmp(x.theta, y.theta, DIM * sizeof *x.theta), 0);
    CU_ASSERT_EQUAL(memcmp(x.keys, y.keys, DIM * sizeof *x.keys), 0);
    fsgd_adam_free(&x);
    fsgd_adam_free(&y);
}

/* fsgd_adam_step_reduced: the bits of fsgd_reducer_take_step +
 * fsgd_adam_step, plain and counted, with λ and without, θ before kept. */
static void test_step_reduced(void)
{
    enum { DIM = 4096, STEPS = 30, ADDS = 3 };
    for (int mode = 0; mode < 4; mode++) {
        int counted = mode & 1;
        double l2 = mode & 2 ? 1e-3 : 0;
        fsgd_adam_params_t p = fsgd_adam_defaults();
        fsgd_adam_t x, y;
        CU_ASSERT_EQUAL_FATAL(counted ? fsgd_adam_init_counted(&x, DIM, &p) : fsgd_adam_init(&x, DIM, &p), 0);
        CU_ASSERT_EQUAL_FATAL(counted ? fsgd_adam_init_counted(&y, DIM, &p) : fsgd_adam_init(&y, DIM, &p), 0);
        fsgd_reducer_t *rx = fsgd_reducer_new(DIM), *ry = fsgd_reducer_new(DIM);
        fsgd_sparse_t ox = {0}, oy = {0}, bx = {0};
        uint32_t keys[DIM];
        float g[DIM];
        uint64_t seed = 5 + (uint64_t)mode;
        for (int t = 0; t < STEPS; t++) {
            for (int a = 0; a < ADDS; a++) {
                size_t n = 0;
                for (uint32_t k = 0; k < DIM; k++)
                    if (fsgd_test_rand(&seed) % 8 == 0) {
                        keys[n] = k;
                        g[n++] = (float)((double)(fsgd_test_rand(&seed) % 2001) / 1000.0 - 1.0);
                    }
                CU_ASSERT_EQUAL(fsgd_reducer_add(rx, keys, g, n), 0);
                CU_ASSERT_EQUAL(fsgd_reducer_add(ry, keys, g, n), 0);
            }
            float th[DIM];
            memcpy(th, x.theta, sizeof th);
            CU_ASSERT_EQUAL(fsgd_adam_step_reduced(&x, rx, NULL, 1.0 / 64, l2, &ox, &bx), 0);
            CU_ASSERT_EQUAL(fsgd_reducer_take_step(ry, 1.0 / 64, l2, y.theta, &oy), 0);
            fsgd_adam_step(&y, oy.keys, oy.vals, oy.n);
            CU_ASSERT_EQUAL_FATAL(ox.n, oy.n);
            CU_ASSERT_EQUAL(memcmp(ox.keys, oy.keys, ox.n * sizeof *ox.keys), 0);
            CU_ASSERT_EQUAL(memcmp(ox.vals, oy.vals, ox.n * sizeof *ox.vals), 0);
            CU_ASSERT_EQUAL_FATAL(bx.n, ox.n);
            for (size_t i = 0; i < bx.n; i++)
                CU_ASSERT_EQUAL(memcmp(&bx.vals[i], &th[bx.keys[i]], sizeof *th), 0);
        }
        CU_ASSERT_EQUAL(x.t, y.t);
        CU_ASSERT_EQUAL(memcmp(x.theta, y.theta, DIM * sizeof *x.theta), 0);
        if (counted) {
            CU_ASSERT_EQUAL(memcmp(x.keys, y.keys, DIM * sizeof *x.keys), 0);
        } else {
            CU_ASSERT(!memcmp(x.m, y.m, DIM * sizeof *x.m) && !memcmp(x.v, y.v, DIM * sizeof *x.v));
        }
        fsgd_reducer_destroy(rx), fsgd_reducer_destroy(ry);
        fsgd_sparse_free(&ox), fsgd_sparse_free(&oy), fsgd_sparse_free(&bx);
        fsgd_adam_free(&x), fsgd_adam_free(&y);
    }
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"defaults and init", test_defaults},
        {"first step is lr*g/(|g|+eps)", test_first_step},
        {"all keys every step: bitwise dense Adam", test_dense_equivalence},
        {"partial touches: differs only on skipped keys", test_lazy_differs_only_on_skipped_keys},
        {"converges on a quadratic", test_converges},
        {"per-key counts: a late key's first step is lr", test_counted_keys},
        {"init counted: the same updates as init + count_keys", test_init_counted},
        {"map pages: resident, unchanged, same steps", test_map_pages},
        {"step reduced: the bits of take_step + step", test_step_reduced},
        {NULL, NULL},
    };
    fsgd_test_suite("adam", cases);
}
