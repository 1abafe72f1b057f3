/* The key -> slot table (keyslots.h, private to trainer/core): slots in order of first sight,
 * the same slot every time, growth far past the initial size, keys near
 * 2^32 (the table's empty mark is not a key), and the sorted listing. */
#include <stdlib.h>
#include <string.h>

#include "keyslots.h"
#include "testlib.h"

static void test_slots_in_order_of_first_sight(void)
{
    fsgd_keyslots_t t;
    CU_ASSERT_EQUAL_FATAL(fsgd_keyslots_init(&t, 2), 0);
    const uint32_t keys[] = {7, 0, UINT32_MAX, 7, 123456789, 0, UINT32_MAX - 1};
    uint32_t slots[7];
    CU_ASSERT_EQUAL_FATAL(fsgd_keyslots_map(&t, keys, 7, slots), 0);
    const uint32_t want[] = {0, 1, 2, 0, 3, 1, 4};
    CU_ASSERT_EQUAL(memcmp(slots, want, sizeof want), 0);
    CU_ASSERT_EQUAL(t.n, 5);
    CU_ASSERT_EQUAL(fsgd_keyslots_find(&t, UINT32_MAX), 2);
    CU_ASSERT_EQUAL(fsgd_keyslots_find(&t, 8), FSGD_KEYSLOT_NONE);
    uint32_t sk[5], ss[5];
    CU_ASSERT_EQUAL(fsgd_keyslots_sorted(&t, sk, ss), 0);
    const uint32_t wk[] = {0, 7, 123456789, UINT32_MAX - 1, UINT32_MAX}, ws[] = {1, 0, 3, 4, 2};
    CU_ASSERT_EQUAL(memcmp(sk, wk, sizeof wk), 0);
    CU_ASSERT_EQUAL(memcmp(ss, ws, sizeof ws), 0);
    fsgd_keyslots_free(&t);
    fsgd_keyslots_free(&t); /* a freed table frees again harmlessly */
    fsgd_keyslots_free(NULL);
}

/* 200k random keys (with repeats) into a table made for 1: every key keeps
 * its first slot through every growth; the listing is increasing and each
 * entry's slot is its key's. */
static void test_growth_keeps_every_slot(void)
{
    uint64_t seed = fsgd_test_seed();
    enum { N = 200000 };
    uint32_t *keys = malloc(N * sizeof *keys), *slots = malloc(N * sizeof *slots);
    CU_ASSERT_PTR_NOT_NULL_FATAL(keys);
    CU_ASSERT_PTR_NOT_NULL_FATAL(slots);
    for (size_t i = 0; i < N; i++) /* a stride, as a shard's local keys, and repeats */
        keys[i] = (uint32_t)(fsgd_test_rand(&seed) % 150000) * 64u;
    fsgd_keyslots_t t;
    CU_ASSERT_EQUAL_FATAL(fsgd_keyslots_init(&t, 1), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_keyslots_map(&t, keys, N / 2, slots), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_keyslots_map(&t, keys + N / 2, N - N / 2, slots + N / 2), 0);
    for (size_t i = 0; i < N; i++) {
        CU_ASSERT_EQUAL_FATAL(t.keys[slots[i]], keys[i]);
        CU_ASSERT_EQUAL_FATAL(fsgd_keyslots_find(&t, keys[i]), slots[i]);
    }
    CU_ASSERT(t.n > 100000 && t.n <= 150000);
    CU_ASSERT(((size_t)1 << t.bits) >= 2 * (size_t)t.n); /* at most half full */
    uint32_t *sk = malloc(t.n * sizeof *sk), *ss = malloc(t.n * sizeof *ss);
    CU_ASSERT_EQUAL_FATAL(fsgd_keyslots_sorted(&t, sk, ss), 0);
    for (uint32_t i = 0; i < t.n; i++) {
        CU_ASSERT_FATAL(i == 0 || sk[i] > sk[i - 1]);
        CU_ASSERT_EQUAL_FATAL(t.keys[ss[i]], sk[i]);
    }
    free(sk);
    free(ss);
    free(keys);
    free(slots);
    fsgd_keyslots_free(&t);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"slots in order of first sight; keys up to 2^32 - 1; sorted listing", test_slots_in_order_of_first_sight},
        {"growth from 1 to 150k keys keeps every slot", test_growth_keeps_every_slot},
        {NULL, NULL},
    };
    fsgd_test_suite("keyslots", cases);
}
