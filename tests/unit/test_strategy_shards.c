/* Strategies on sharded aggregators (strategy/FORMAT.md, "Sharded
 * aggregators"): the refusals name the strategy and why, and per-shard
 * budgets add up to the job's k. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/strategy.h"
#include "testlib.h"

static void test_refusals(void)
{
    char err[512];
    static const char *const sharded[] = {"none", "fastsgd", "logquant", "topk", "sketchml", "efsign", "gtopk"};
    for (size_t i = 0; i < sizeof sharded / sizeof *sharded; i++)
        for (int S = 1; S <= 64; S *= 2)
            CU_ASSERT_EQUAL(fsgd_strategy_check_shards(sharded[i], S, err, sizeof err), 0);
    static const char *const refused[] = {"gradiveq", "mqgrad:bits0=4"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        CU_ASSERT_EQUAL(fsgd_strategy_check_shards(refused[i], 1, err, sizeof err), 0);
        CU_ASSERT_EQUAL(fsgd_strategy_check_shards(refused[i], 2, err, sizeof err), FSGD_E_ARG);
        char name[96];
        snprintf(name, sizeof name, "strategy %.*s cannot run on 2 shards", (int)strcspn(refused[i], ":"), refused[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, name));
    }
    CU_ASSERT_EQUAL(fsgd_strategy_check_shards("none", 0, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_strategy_check_shards("none", 65, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_strategy_check_shards("topk:k=3", 4, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "k=3 entries cannot be split over 4 shards"));
    CU_ASSERT_EQUAL(fsgd_strategy_check_shards("topk:k=x", 4, err, sizeof err), FSGD_E_ARG);
}

/* The k of shard i's spec, which must check as a strategy spec. */
static unsigned long long shard_k(const char *spec, uint64_t dim, uint32_t i, uint32_t S)
{
    char out[256], err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_strategy_shard_spec(spec, dim, i, S, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check(out, dim / S, err, sizeof err), 0);
    const char *k = strstr(out, "k=");
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    return strtoull(k + 2, NULL, 10);
}

static void test_budgets(void)
{
    const uint64_t dim = 1u << 20;
    for (uint32_t S = 2; S <= 8; S++) {
        unsigned long long sum_topk = 0, sum_gtopk = 0, sum_density = 0;
        for (uint32_t i = 0; i < S; i++) {
            sum_topk += shard_k("topk:k=1001", dim, i, S);
            sum_gtopk += shard_k("gtopk:k=77", dim, i, S);
            sum_density += shard_k("gtopk", dim, i, S); /* default density 0.001: k = 1049 */
        }
        CU_ASSERT_EQUAL(sum_topk, 1001);
        CU_ASSERT_EQUAL(sum_gtopk, 77);
        CU_ASSERT_EQUAL(sum_density, 1049);
    }
    /* S = 1: the spec as it is */
    char out[256], err[512];
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("gtopk:k=77", dim, 0, 1, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "gtopk:k=77");
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("gtopk", dim, 0, 1, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "gtopk");
    /* the other parameters stay as they are, in order */
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("topk:k=10,ratio=0", 100, 1, 4, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "topk:k=3,ratio=0");
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("fastsgd:b=1.2,tau=64", 100, 3, 4, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "fastsgd:b=1.2,tau=64");
    /* a budget below one entry a shard */
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("gtopk", 124, 0, 4, out, sizeof out, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "give k=N with N >= 4"));
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("none", 100, 4, 4, out, sizeof out, err, sizeof err), FSGD_E_ARG);
    /* a shard with no key: refused, not opened over a dim of 0 */
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("none", 3, 0, 8, out, sizeof out, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "8 shards for a model of 3 keys"));
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("none", 8, 7, 8, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_shard_spec("none", 100, 0, 2, out, 3, err, sizeof err), FSGD_E_ARG);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"gradiveq and mqgrad refused at shards > 1, the others run", test_refusals},
        {"per-shard budgets add up to k; other parameters kept", test_budgets},
        {NULL, NULL},
    };
    fsgd_test_suite("strategy_shards", cases);
}
