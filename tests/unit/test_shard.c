/* Key shards (fsgd/shard.h): every key of [0, D) has exactly one shard and
 * local key, the shards' dims add up to D, and a split then merge gives the
 * vector back bit for bit, with each part's local keys increasing. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/shard.h"
#include "testlib.h"

static void test_dims_cover_keys(void)
{
    const uint64_t dims[] = {1, 2, 3, 7, 64, 1000, 1001, 123457};
    for (uint32_t S = 1; S <= 9; S++)
        for (size_t d = 0; d < sizeof dims / sizeof *dims; d++) {
            uint64_t D = dims[d], total = 0;
            uint64_t *seen = calloc(S, sizeof *seen);
            CU_ASSERT_PTR_NOT_NULL_FATAL(seen);
            for (uint64_t k = 0; k < D; k++) {
                uint32_t s = fsgd_shard_of(k, S);
                uint64_t l = fsgd_shard_local(k, S);
                CU_ASSERT(s < S);
                CU_ASSERT(l < fsgd_shard_dim(D, s, S));
                CU_ASSERT_EQUAL(fsgd_shard_global(l, s, S), k);
                seen[s]++;
            }
            for (uint32_t s = 0; s < S; s++) {
                CU_ASSERT_EQUAL(seen[s], fsgd_shard_dim(D, s, S));
                total += fsgd_shard_dim(D, s, S);
            }
            CU_ASSERT_EQUAL(total, D);
            free(seen);
        }
}

static void test_split_merge_round_trip(void)
{
    uint64_t rng = fsgd_test_seed();
    fsgd_sparse_t in = {0}, back = {0}, parts[FSGD_SHARDS_MAX];
    memset(parts, 0, sizeof parts);
    CU_ASSERT_EQUAL_FATAL(fsgd_sparse_reserve(&in, 5000), FSGD_E_OK);
    for (int round = 0; round < 50; round++) {
        uint32_t S = 1 + (uint32_t)(fsgd_test_rand(&rng) % 8);
        in.n = 0;
        for (uint32_t k = 0; k < 20000 && in.n < 5000; k++)
            if (fsgd_test_rand(&rng) % 7 == 0) {
                in.keys[in.n] = k;
                in.vals[in.n++] = (float)(fsgd_test_rand(&rng) % 2001) / 1000.0f - 1.0f;
            }
        CU_ASSERT_EQUAL_FATAL(fsgd_shard_split(&in, S, parts), FSGD_E_OK);
        size_t total = 0;
        for (uint32_t s = 0; s < S; s++) {
            total += parts[s].n;
            for (size_t i = 0; i < parts[s].n; i++) {
                if (i)
                    CU_ASSERT(parts[s].keys[i] > parts[s].keys[i - 1]);
                CU_ASSERT(parts[s].keys[i] < fsgd_shard_dim(20000, s, S));
            }
        }
        CU_ASSERT_EQUAL(total, in.n);
        CU_ASSERT_EQUAL_FATAL(fsgd_shard_merge(parts, S, &back), FSGD_E_OK);
        CU_ASSERT_EQUAL_FATAL(back.n, in.n);
        CU_ASSERT(memcmp(back.keys, in.keys, in.n * sizeof *in.keys) == 0);
        CU_ASSERT(memcmp(back.vals, in.vals, in.n * sizeof *in.vals) == 0);
    }
    CU_ASSERT_EQUAL(fsgd_shard_split(&in, 0, parts), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_shard_split(&in, FSGD_SHARDS_MAX + 1, parts), FSGD_E_ARG);
    fsgd_sparse_free(&in);
    fsgd_sparse_free(&back);
    for (int s = 0; s < FSGD_SHARDS_MAX; s++)
        fsgd_sparse_free(&parts[s]);
}

/* Zipf-popular low keys (the CTR shape) land evenly: keys 0..S*100 give
 * every shard the same count, where contiguous ranges would not. */
static void test_hot_low_keys_spread(void)
{
    fsgd_sparse_t in = {0}, parts[4];
    memset(parts, 0, sizeof parts);
    CU_ASSERT_EQUAL_FATAL(fsgd_sparse_reserve(&in, 400), FSGD_E_OK);
    for (uint32_t k = 0; k < 400; k++) {
        in.keys[k] = k;
        in.vals[k] = 1;
    }
    in.n = 400;
    CU_ASSERT_EQUAL_FATAL(fsgd_shard_split(&in, 4, parts), FSGD_E_OK);
    for (int s = 0; s < 4; s++) {
        CU_ASSERT_EQUAL(parts[s].n, 100);
        fsgd_sparse_free(&parts[s]);
    }
    fsgd_sparse_free(&in);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"every key one shard, dims add up", test_dims_cover_keys},
        {"split then merge is the identity", test_split_merge_round_trip},
        {"hot low keys spread evenly", test_hot_low_keys_spread},
        {NULL, NULL},
    };
    fsgd_test_suite("shard", cases);
}
