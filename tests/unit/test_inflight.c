/* The worker's in-flight queue (trainer/distributed/inflight.h): where its
 * next step starts, and the gradients it must give up when the model's
 * positions show that one of them was refused without a word. */
#include <stdint.h>

#include "inflight.h"
#include "testlib.h"

#define NP 3

/* Step s's gradient: partitions 0 and 2 advanced from *at by 10 rows. */
static void push_step(inflight_queue_t *q, uint64_t s, uint64_t at)
{
    const fsgd_wire_range_t rg[2] = {{0, at, at + 10}, {2, at, at + 10}};
    CU_ASSERT_EQUAL(inflight_push(q, s, 7, 0, 20, rg, 2, (const uint8_t *)"g", 1), 0);
}

/* Steps 5, 6, 7 sent on top of each other; the model of step 4 says where
 * partitions stood: the next step starts after step 7's ranges. */
static void test_on_chain(void)
{
    inflight_queue_t q = {0};
    push_step(&q, 5, 100);
    push_step(&q, 6, 110);
    push_step(&q, 7, 120);
    const uint64_t base[NP] = {100, 50, 100};
    uint64_t pos[NP];
    CU_ASSERT_EQUAL(inflight_project(&q, 7, 4, base, NP, pos), 0);
    CU_ASSERT_EQUAL(pos[0], 130);
    CU_ASSERT_EQUAL(pos[1], 50);
    CU_ASSERT_EQUAL(pos[2], 130);
    /* the model of step 5 took step 5's gradient */
    const uint64_t after5[NP] = {110, 50, 110};
    CU_ASSERT_EQUAL(inflight_project(&q, 7, 5, after5, NP, pos), 0);
    CU_ASSERT_EQUAL(pos[0], 130);
    for (size_t i = 0; i < q.n; i++)
        CU_ASSERT_FALSE(q.e[i].doomed);
    inflight_free(&q);
}

/* The model of step 5 (a snapshot: no applied list) left partition 0 where
 * step 5's gradient started: that gradient was refused, so steps 6 and 7,
 * which start where it ended, will be too. Both are doomed and the next
 * step starts at the model's positions (before the fix the worker went on
 * from step 7's end for ever: every later gradient refused). */
static void test_refused_unseen(void)
{
    inflight_queue_t q = {0};
    push_step(&q, 5, 100);
    push_step(&q, 6, 110);
    push_step(&q, 7, 120);
    const uint64_t after5[NP] = {100, 50, 100};
    uint64_t pos[NP];
    CU_ASSERT_EQUAL(inflight_project(&q, 7, 5, after5, NP, pos), 2);
    CU_ASSERT_EQUAL(pos[0], 100);
    CU_ASSERT_EQUAL(pos[2], 100);
    CU_ASSERT_TRUE(q.e[1].doomed && q.e[2].doomed);
    /* a gradient sent after that, from the model's positions, is on the chain */
    push_step(&q, 8, 100);
    CU_ASSERT_EQUAL(inflight_project(&q, 7, 5, after5, NP, pos), 0);
    CU_ASSERT_EQUAL(pos[0], 110);
    CU_ASSERT_FALSE(q.e[3].doomed);
    inflight_free(&q);
}

/* Another worker took one of the partitions (a rebalance) and advanced it:
 * this worker's gradient that starts at the old position is refused. */
static void test_partition_moved(void)
{
    inflight_queue_t q = {0};
    push_step(&q, 5, 100);
    const uint64_t moved[NP] = {100, 50, 140};
    uint64_t pos[NP];
    CU_ASSERT_EQUAL(inflight_project(&q, 7, 4, moved, NP, pos), 1);
    CU_ASSERT_EQUAL(pos[2], 140);
    /* another generation's entries are not this model's business */
    inflight_queue_t other = {0};
    push_step(&other, 5, 0);
    CU_ASSERT_EQUAL(inflight_project(&other, 8, 4, moved, NP, pos), 0);
    CU_ASSERT_FALSE(other.e[0].doomed);
    inflight_free(&q);
    inflight_free(&other);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"gradients sent on top of each other project where the next starts", test_on_chain},
        {"a gradient refused without a word dooms those sent on top of it", test_refused_unseen},
        {"a partition another worker advanced dooms the gradient that starts behind", test_partition_moved},
        {NULL, NULL},
    };
    fsgd_test_suite("inflight", cases);
}
