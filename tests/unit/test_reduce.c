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

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"sorted adds: merged sums equal the sums in add order", test_sorted_adds_merge},
        {"an unsorted add: dense, same sums", test_unsorted_add_goes_dense},
        {"many adds: dense, same sums", test_many_adds_go_dense},
        {"out of range, clear, empty", test_range_and_clear},
        {NULL, NULL},
    };
    fsgd_test_suite("reduce", cases);
}
