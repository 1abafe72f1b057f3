/* The reducer: whichever way a step goes (sorted adds merged, or a dense
 * accumulator after an unsorted add or too many adds), every key's sum is
 * the double sum of its values in the order they were added, bit for bit,
 * and the reducer is empty again after take/clear. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/reduce.h"
#include "testlib.h"
#include "common_testing.h"

#define DIM 5000

/* n distinct random keys below DIM, increasing; values with mixed signs
 * and magnitudes, so the order of additions changes rounded sums. */
static size_t random_sorted(uint64_t *s, uint32_t *keys, float *vals, size_t n)
{
    size_t m = 0;
    for (uint32_t k = 0; k < DIM && m < n; k++)
        if (fsgd_test_rand(s) % (DIM / n + 1) == 0)
            keys[m++] = k;
    for (size_t i = 0; i < m; i++) {
        double mag = ldexp(1.0, (int)(fsgd_test_rand(s) % 40) - 20);
        vals[i] = (float)((fsgd_test_rand(s) & 1 ? 1 : -1) * mag * (1 + (double)(fsgd_test_rand(s) % 1000) / 1000));
    }
    return m;
}

static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Adds `adds` vectors (vector `unsorted_at` shuffled, if < adds) and checks
 * every way of reading the sum against a reference summed here. */
static void check_run(uint64_t *s, fsgd_reducer_t *r, size_t adds, size_t unsorted_at)
{
    static double want[DIM];
    static uint8_t seen[DIM];
    memset(want, 0, sizeof want);
    memset(seen, 0, sizeof seen);
    uint32_t keys[DIM];
    float vals[DIM];
    for (size_t a = 0; a < adds; a++) {
        size_t n = random_sorted(s, keys, vals, 1 + fsgd_test_rand(s) % 900);
        for (size_t i = 0; i < n; i++) {
            want[keys[i]] += vals[i];
            seen[keys[i]] = 1;
        }
        if (a == unsorted_at && n > 1) { /* reverse: no longer increasing */
            for (size_t i = 0; i < n / 2; i++) {
                uint32_t tk = keys[i];
                float tv = vals[i];
                keys[i] = keys[n - 1 - i], vals[i] = vals[n - 1 - i];
                keys[n - 1 - i] = tk, vals[n - 1 - i] = tv;
            }
        }
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_add(r, keys, vals, n), FSGD_E_OK);
    }
    size_t touched = 0;
    for (size_t k = 0; k < DIM; k++)
        touched += seen[k];
    CU_ASSERT_EQUAL(fsgd_reducer_count(r), touched);
    for (size_t k = 0; k < DIM; k += 7)
        CU_ASSERT(same_double(fsgd_reducer_sum(r, (uint32_t)k), want[k]));
    const uint32_t *sk;
    const double *ss;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(fsgd_reducer_sorted(r, &sk, &ss, &n), FSGD_E_OK);
    CU_ASSERT_EQUAL_FATAL(n, touched);
    for (size_t i = 0, k = 0; k < DIM; k++) {
        if (!seen[k])
            continue;
        CU_ASSERT_EQUAL_FATAL(sk[i], k);
        CU_ASSERT(same_double(ss[i], want[k]));
        i++;
    }
    fsgd_sparse_t out = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_reducer_take(r, -0.5, &out), FSGD_E_OK);
    CU_ASSERT_EQUAL_FATAL(out.n, touched);
    for (size_t i = 0; i < out.n; i++)
        CU_ASSERT_EQUAL(out.vals[i], (float)(want[out.keys[i]] * -0.5));
    fsgd_sparse_free(&out);
    CU_ASSERT_EQUAL(fsgd_reducer_count(r), 0);
    for (size_t k = 0; k < DIM; k++)
        if (seen[k]) { /* a key that had a sum has none now */
            CU_ASSERT_EQUAL(fsgd_reducer_sum(r, (uint32_t)k), 0.0);
            break;
        }
}

static void test_sorted_adds_merge(void)
{
    uint64_t s = fsgd_test_seed();
    fsgd_reducer_t *r = fsgd_reducer_new(DIM);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    for (size_t adds = 1; adds <= 6; adds++)
        check_run(&s, r, adds, SIZE_MAX);
    fsgd_reducer_destroy(r);
}

static void test_unsorted_add_goes_dense(void)
{
    uint64_t s = fsgd_test_seed() ^ 1;
    fsgd_reducer_t *r = fsgd_reducer_new(DIM);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    for (size_t at = 0; at < 4; at++) /* first, middle, last add unsorted; each step after a dense one */
        check_run(&s, r, 4, at);
    check_run(&s, r, 3, SIZE_MAX); /* and merged again after clear */
    fsgd_reducer_destroy(r);
}

static void test_many_adds_go_dense(void)
{
    uint64_t s = fsgd_test_seed() ^ 2;
    fsgd_reducer_t *r = fsgd_reducer_new(DIM);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    check_run(&s, r, 40, SIZE_MAX);
    check_run(&s, r, 2, SIZE_MAX);
    fsgd_reducer_destroy(r);
}

/* Empty adds (a worker whose rows touched none of a shard's keys, gTop-k's
 * empty parts) are adds like any other, on a fresh reducer too, whose run
 * buffers do not exist yet. */
static void test_empty_adds(void)
{
    fsgd_reducer_t *r = fsgd_reducer_new(10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    uint32_t k[] = {1, 2};
    float v[] = {0.5f, 0.25f};
    for (int round = 0; round < 2; round++) {
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_add(r, k, v, 1), FSGD_E_OK);
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_add(r, k, v, 0), FSGD_E_OK);
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_add(r, k, v, 2), FSGD_E_OK);
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_add(r, k, v, 0), FSGD_E_OK);
        CU_ASSERT_EQUAL(fsgd_reducer_count(r), 2);
        CU_ASSERT(same_double(fsgd_reducer_sum(r, 1), 0.0 + 0.5 + 0.5));
        CU_ASSERT(same_double(fsgd_reducer_sum(r, 2), 0.0 + 0.25));
        fsgd_reducer_clear(r);
    }
    fsgd_reducer_t *fresh = fsgd_reducer_new(10); /* only empty adds */
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh);
    CU_ASSERT_EQUAL(fsgd_reducer_add(fresh, k, v, 0), FSGD_E_OK);
    CU_ASSERT_EQUAL(fsgd_reducer_add(fresh, k, v, 0), FSGD_E_OK);
    CU_ASSERT_EQUAL(fsgd_reducer_count(fresh), 0);
    fsgd_reducer_destroy(fresh);
    fsgd_reducer_destroy(r);
}

static void test_range_and_clear(void)
{
    fsgd_reducer_t *r = fsgd_reducer_new(10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    uint32_t k[] = {1, 3, 10};
    float v[] = {1, 2, 3};
    CU_ASSERT_EQUAL(fsgd_reducer_add(r, k, v, 3), FSGD_E_RANGE);
    CU_ASSERT_EQUAL(fsgd_reducer_count(r), 0); /* nothing of a refused add kept */
    CU_ASSERT_EQUAL(fsgd_reducer_add(r, k, v, 2), FSGD_E_OK);
    uint32_t k2[] = {3, 1};
    CU_ASSERT_EQUAL(fsgd_reducer_add(r, k2, v, 2), FSGD_E_OK);
    CU_ASSERT_EQUAL(fsgd_reducer_sum(r, 1), 3.0);
    CU_ASSERT_EQUAL(fsgd_reducer_sum(r, 3), 3.0);
    CU_ASSERT_EQUAL(fsgd_reducer_sum(r, 99), 0.0);
    fsgd_reducer_clear(r);
    CU_ASSERT_EQUAL(fsgd_reducer_count(r), 0);
    CU_ASSERT_EQUAL(fsgd_reducer_sum(r, 1), 0.0);
    CU_ASSERT_EQUAL(fsgd_reducer_add(r, k, v, 0), FSGD_E_OK);
    size_t n = 9;
    fsgd_reducer_sorted_keys(r, &n);
    CU_ASSERT_EQUAL(n, 0);
    fsgd_reducer_destroy(r);
}

/* Lazy merging (adds kept as runs, summed at the first read) checked against
 * a reference that sums each key's values in add order from 0.0: every
 * (key, add, value) an add passes is kept, then sorted by (key, add). */
typedef struct entry {
    uint32_t key, add;
    float val;
} entry_t;

typedef struct trace {
    entry_t *e;
    size_t n, cap;
    uint32_t *keys; /* the reference's sorted keys and sums */
    double *sums;
    size_t n_keys;
} trace_t;

static int entry_order(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->add < y->add ? -1 : x->add > y->add;
}

static void trace_sum(trace_t *t)
{
    entry_t *e = malloc((t->n ? t->n : 1) * sizeof *e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    memcpy(e, t->e, t->n * sizeof *e);
    qsort(e, t->n, sizeof *e, entry_order);
    free(t->keys), free(t->sums);
    t->keys = malloc((t->n ? t->n : 1) * sizeof *t->keys);
    t->sums = malloc((t->n ? t->n : 1) * sizeof *t->sums);
    CU_ASSERT_FATAL(t->keys && t->sums);
    t->n_keys = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!t->n_keys || t->keys[t->n_keys - 1] != e[i].key) {
            t->keys[t->n_keys] = e[i].key;
            t->sums[t->n_keys++] = 0.0;
        }
        t->sums[t->n_keys - 1] += (double)e[i].val;
    }
    free(e);
}

/* Up to max distinct increasing keys below dim, in a span that is narrow,
 * wide or the whole dim, sometimes with 0 and dim - 1; values from 2^-50 to
 * 2^50, either sign, some -0. */
static size_t random_add(uint64_t *s, uint64_t dim, uint32_t *keys, float *vals, size_t max)
{
    uint64_t spans[] = {64, 4096, 1u << 17, dim};
    uint64_t span = spans[fsgd_test_rand(s) % 4];
    span = span < dim ? span : dim;
    /* mostly at one of three places, so many keys are in 3 adds or more
     * (where the order of additions shows in the bits) */
    uint64_t places[] = {0, (dim - span) / 3, dim - span, fsgd_test_rand(s) % (dim - span + 1)};
    uint64_t lo = places[fsgd_test_rand(s) % 4];
    size_t want = 1 + fsgd_test_rand(s) % max, n = 0;
    for (size_t i = 0; i < want; i++)
        keys[i] = (uint32_t)(lo + fsgd_test_rand(s) % span);
    if (fsgd_test_rand(s) % 8 == 0)
        keys[0] = (uint32_t)(lo + span - 1);
    for (size_t i = 1; i < want; i++) /* insertion sort, then distinct */
        for (size_t j = i; j && keys[j - 1] > keys[j]; j--) {
            uint32_t k = keys[j];
            keys[j] = keys[j - 1], keys[j - 1] = k;
        }
    for (size_t i = 0; i < want; i++)
        if (!n || keys[n - 1] != keys[i])
            keys[n++] = keys[i];
    for (size_t i = 0; i < n; i++) {
        double mag = ldexp(1.0 + (double)(fsgd_test_rand(s) % 1000) / 1000, (int)(fsgd_test_rand(s) % 101) - 50);
        vals[i] = fsgd_test_rand(s) % 64 == 0 ? -0.0f : (float)(fsgd_test_rand(s) & 1 ? mag : -mag);
    }
    return n;
}

/* Every way of reading the sum agrees with the reference, bit for bit. */
static void check_trace(fsgd_reducer_t *r, trace_t *t, uint64_t *s)
{
    trace_sum(t);
    switch (fsgd_test_rand(s) % 4) { /* the first read of the sum, which merges the runs */
    case 0:
        CU_ASSERT_EQUAL(fsgd_reducer_count(r), t->n_keys);
        break;
    case 1: {
        size_t n;
        const uint32_t *k = fsgd_reducer_sorted_keys(r, &n);
        CU_ASSERT_EQUAL_FATAL(n, t->n_keys);
        CU_ASSERT(n == 0 || memcmp(k, t->keys, n * sizeof *k) == 0);
        break;
    }
    case 2:
        if (t->n_keys) {
            size_t i = fsgd_test_rand(s) % t->n_keys;
            CU_ASSERT(same_double(fsgd_reducer_sum(r, t->keys[i]), t->sums[i]));
        }
        break;
    default:
        break;
    }
    const uint32_t *k;
    const double *sums;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(fsgd_reducer_sorted(r, &k, &sums, &n), FSGD_E_OK);
    CU_ASSERT_EQUAL_FATAL(n, t->n_keys);
    CU_ASSERT(n == 0 || memcmp(k, t->keys, n * sizeof *k) == 0);
    CU_ASSERT(n == 0 || memcmp(sums, t->sums, n * sizeof *sums) == 0);
    CU_ASSERT_EQUAL(fsgd_reducer_count(r), t->n_keys);
    for (size_t i = 0; i < n; i += 1 + n / 16)
        CU_ASSERT(same_double(fsgd_reducer_sum(r, t->keys[i]), t->sums[i]));
}

/* One step of `adds` adds (add `unsorted_at` reversed, if < adds), a read
 * after an add with chance 1/read_every (0: never) and at the end; the
 * step ends with take or clear. */
static void lazy_step(fsgd_reducer_t *r, uint64_t dim, uint64_t *s, size_t adds, size_t unsorted_at,
                      unsigned read_every)
{
    enum { MAX_N = 3000 };
    static uint32_t keys[MAX_N];
    static float vals[MAX_N];
    trace_t t = {0};
    for (size_t a = 0; a < adds; a++) {
        size_t n = random_add(s, dim, keys, vals, MAX_N);
        if (t.n + n > t.cap) {
            t.cap = 2 * (t.n + n);
            t.e = realloc(t.e, t.cap * sizeof *t.e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(t.e);
        }
        for (size_t i = 0; i < n; i++)
            t.e[t.n++] = (entry_t){keys[i], (uint32_t)a, vals[i]};
        if (a == unsorted_at)
            for (size_t i = 0; i < n / 2; i++) {
                uint32_t tk = keys[i];
                float tv = vals[i];
                keys[i] = keys[n - 1 - i], vals[i] = vals[n - 1 - i];
                keys[n - 1 - i] = tk, vals[n - 1 - i] = tv;
            }
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_add(r, keys, vals, n), FSGD_E_OK);
        if (read_every && fsgd_test_rand(s) % read_every == 0)
            check_trace(r, &t, s);
    }
    check_trace(r, &t, s);
    if (fsgd_test_rand(s) % 2) {
        fsgd_sparse_t out = {0};
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_take(r, 0.25, &out), FSGD_E_OK);
        CU_ASSERT_EQUAL_FATAL(out.n, t.n_keys);
        for (size_t i = 0; i < out.n; i++) {
            float want = (float)(t.sums[i] * 0.25);
            CU_ASSERT(out.keys[i] == t.keys[i] && memcmp(&out.vals[i], &want, sizeof want) == 0);
        }
        fsgd_sparse_free(&out);
    } else {
        fsgd_reducer_clear(r);
    }
    CU_ASSERT_EQUAL(fsgd_reducer_count(r), 0);
    free(t.e), free(t.keys), free(t.sums);
}

/* A step cleared with its runs never read: nothing of it must remain. */
static void cleared_step(fsgd_reducer_t *r, uint64_t dim, uint64_t *s, size_t adds)
{
    static uint32_t keys[500];
    static float vals[500];
    for (size_t a = 0; a < adds; a++) {
        size_t n = random_add(s, dim, keys, vals, 500);
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_add(r, keys, vals, n), FSGD_E_OK);
    }
    fsgd_reducer_clear(r);
}

/* 1..16 adds merged lazily, with and without reads between adds, on one
 * reducer steps after steps; keys over many merge windows. */
static void test_lazy_merge_add_order(void)
{
    uint64_t s = fsgd_test_seed() ^ 3;
    const uint64_t dim = 1u << 20;
    fsgd_reducer_t *r = fsgd_reducer_new(dim);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    for (int round = 0; round < 3; round++)
        for (size_t adds = 1; adds <= 16; adds++) {
            lazy_step(r, dim, &s, adds, SIZE_MAX, 0);
            cleared_step(r, dim, &s, adds);
            lazy_step(r, dim, &s, adds, SIZE_MAX, 3);
        }
    fsgd_reducer_destroy(r);
}

/* The 17th add, or an unsorted one with runs waiting, goes dense with the
 * same sums; merged again after the step. */
static void test_lazy_then_dense(void)
{
    uint64_t s = fsgd_test_seed() ^ 4;
    const uint64_t dim = 1u << 20;
    fsgd_reducer_t *r = fsgd_reducer_new(dim);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    for (int round = 0; round < 2; round++) {
        for (size_t adds = 17; adds <= 19; adds++) {
            lazy_step(r, dim, &s, adds, SIZE_MAX, 0);
            lazy_step(r, dim, &s, adds, SIZE_MAX, 4);
        }
        for (size_t at = 0; at < 8; at++) {
            lazy_step(r, dim, &s, 8, at, 0);
            lazy_step(r, dim, &s, 8, at, 3);
        }
        lazy_step(r, dim, &s, 5, SIZE_MAX, 2);
    }
    fsgd_reducer_destroy(r);
}

/* Keys up to 2^32 - 1 (the window's end past UINT32_MAX), 2..16 adds. */
static void test_lazy_merge_top_keys(void)
{
    uint64_t s = fsgd_test_seed() ^ 5;
    const uint64_t dim = (uint64_t)1 << 32;
    fsgd_reducer_t *r = fsgd_reducer_new(dim);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    for (size_t adds = 2; adds <= 16; adds += 2)
        lazy_step(r, dim, &s, adds, SIZE_MAX, 3);
    fsgd_reducer_destroy(r);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"sorted adds: merged sums equal the sums in add order", test_sorted_adds_merge},
        {"an unsorted add: dense, same sums", test_unsorted_add_goes_dense},
        {"many adds: dense, same sums", test_many_adds_go_dense},
        {"out of range, clear, empty", test_range_and_clear},
        {"empty adds, on a fresh reducer too", test_empty_adds},
        {"lazy merge: 1..16 adds, reads between, bits of add order", test_lazy_merge_add_order},
        {"lazy merge: 17th or unsorted add goes dense, same bits", test_lazy_then_dense},
        {"lazy merge: keys up to 2^32 - 1", test_lazy_merge_top_keys},
        {NULL, NULL},
    };
    fsgd_test_suite("reduce", cases);
}
