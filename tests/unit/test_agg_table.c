/* A shard's table, dense or sparse (job key table; trainer/distributed/
 * agg_table.c): the key parses; auto takes sparse only for a sharded
 * working-set job whose data's nonzeros could touch a small part of a
 * shard's weights; sparse asked where it cannot be is refused with the
 * reason, before any process starts (fsgd_agg_shards_check) as at the shard. */
#include <string.h>

#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/job.h"
#include "testlib.h"

#include "aggregator_internal.h"

static void test_table_key(void)
{
    fsgd_job_t job;
    char err[256];
    fsgd_job_dist_defaults(&job);
    CU_ASSERT_EQUAL(job.dist.table, FSGD_TABLE_AUTO);
    char *sparse[] = {"x", "--table", "sparse", NULL};
    CU_ASSERT_EQUAL_FATAL(fsgd_job_parse_args(&job, 3, sparse, err, sizeof err), 0);
    CU_ASSERT_EQUAL(job.dist.table, FSGD_TABLE_SPARSE);
    char *dense[] = {"x", "--table", "dense", NULL};
    CU_ASSERT_EQUAL_FATAL(fsgd_job_parse_args(&job, 3, dense, err, sizeof err), 0);
    CU_ASSERT_EQUAL(job.dist.table, FSGD_TABLE_DENSE);
    char *bad[] = {"x", "--table", "hash", NULL};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 3, bad, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "expected auto, dense or sparse, got 'hash'");
}

static void test_table_choice(void)
{
    fsgd_job_t job;
    char why[256];
    fsgd_job_dist_defaults(&job);
    job.dist.replica = FSGD_REPLICA_WORKING_SET;
    job.train.shards = 4;
    const fsgd_dist_job_t dj = fsgd_job_dist(&job);
    const uint64_t mdim = (uint64_t)1 << 28; /* a shard of a 2^30-weight model */
    /* 1M rows of 40 nonzeros over 4 shards: at most 10M keys of 268M */
    CU_ASSERT_EQUAL(agg_table_choose(&dj, 4, mdim, 40000000, why, sizeof why), 1);
    FSGD_ASSERT_CONTAINS(why, "table sparse: 268435456 weights a shard, at most 10000001 keys");
    /* 2^24 over 4 shards with the same rows: the keys could fill it */
    CU_ASSERT_EQUAL(agg_table_choose(&dj, 4, (uint64_t)1 << 22, 40000000, why, sizeof why), 0);
    FSGD_ASSERT_CONTAINS(why, "table dense");
    /* nonzeros unknown: dense */
    CU_ASSERT_EQUAL(agg_table_choose(&dj, 4, mdim, 0, why, sizeof why), 0);
    FSGD_ASSERT_CONTAINS(why, "not known");
    /* one aggregator, or full replicas: dense under auto, refused when asked */
    CU_ASSERT_EQUAL(agg_table_choose(&dj, 1, mdim, 40000000, why, sizeof why), 0);
    job.dist.table = FSGD_TABLE_SPARSE;
    CU_ASSERT_EQUAL(agg_table_choose(&dj, 1, mdim, 40000000, why, sizeof why), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(why, "--shards 2");
    job.dist.replica = FSGD_REPLICA_FULL;
    CU_ASSERT_EQUAL(agg_table_choose(&dj, 4, mdim, 40000000, why, sizeof why), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(why, "--replica working_set");
    char err[256];
    CU_ASSERT_EQUAL(fsgd_agg_shards_check(&dj, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "--replica working_set");
    job.dist.replica = FSGD_REPLICA_WORKING_SET;
    job.train.shards = 1;
    CU_ASSERT_EQUAL(fsgd_agg_shards_check(&dj, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "--shards 2");
    /* asked for, where it can be: sparse whatever the sizes; dense when asked */
    job.train.shards = 4;
    job.train.epochs = 2; /* epochs auto is not sharded */
    CU_ASSERT_EQUAL(fsgd_agg_shards_check(&dj, err, sizeof err), 0);
    CU_ASSERT_EQUAL(agg_table_choose(&dj, 4, 1000, 0, why, sizeof why), 1);
    job.dist.table = FSGD_TABLE_DENSE;
    CU_ASSERT_EQUAL(agg_table_choose(&dj, 4, mdim, 40000000, why, sizeof why), 0);
    /* a new table's room: the keys the data could touch, at most 2^20 */
    CU_ASSERT_EQUAL(agg_table_start_keys(mdim, 40000000, 4), (uint64_t)1 << 20);
    CU_ASSERT_EQUAL(agg_table_start_keys(mdim, 4000, 4), 1001);
    CU_ASSERT_EQUAL(agg_table_start_keys(500, 4000, 4), 500);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"job key table: auto, dense, sparse; anything else refused", test_table_key},
        {"dense or sparse: by size, and refused where it cannot be", test_table_choice},
        {NULL, NULL},
    };
    fsgd_test_suite("agg_table", cases);
}
