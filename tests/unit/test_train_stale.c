/* fsgd train --staleness: the ring of the last τ updates rewinds θ to what it
 * was τ updates ago and replays it to now, exactly, whichever keys the
 * updates share (trainer/core/train_stale.h). */
#include <string.h>

#include "train_stale.h"
#include "fsgd/error.h"
#include "testlib.h"

#define DIM 32
#define STEPS 9

static void test_rewind_replay(void)
{
    for (int tau = 1; tau <= 4; tau++) {
        uint64_t seed = fsgd_test_seed() + (uint64_t)tau;
        float theta[DIM], hist[STEPS + 1][DIM];
        for (int k = 0; k < DIM; k++)
            theta[k] = (float)k;
        memcpy(hist[0], theta, sizeof theta);
        fsgd_stale_t s;
        CU_ASSERT_EQUAL_FATAL(fsgd_stale_init(&s, tau), 0);
        fsgd_sparse_t before = {0};
        CU_ASSERT_EQUAL_FATAL(fsgd_sparse_reserve(&before, DIM), 0);
        for (int step = 1; step <= STEPS; step++) {
            before.n = 0; /* a random key set, overlapping the others' */
            for (uint32_t k = 0; k < DIM; k++)
                if (fsgd_test_rand(&seed) % 3 == 0) {
                    before.keys[before.n] = k;
                    before.vals[before.n++] = theta[k];
                    theta[k] += (float)(fsgd_test_rand(&seed) % 100) - 50.0f;
                }
            CU_ASSERT_EQUAL_FATAL(fsgd_stale_push(&s, &before, theta), 0);
            memcpy(hist[step], theta, sizeof theta);
            fsgd_stale_rewind(&s, theta);
            int back = step < tau ? 0 : step - tau;
            CU_ASSERT_EQUAL(memcmp(theta, hist[back], sizeof theta), 0);
            fsgd_stale_replay(&s, theta);
            CU_ASSERT_EQUAL(memcmp(theta, hist[step], sizeof theta), 0);
        }
        fsgd_sparse_free(&before);
        fsgd_stale_free(&s);
    }
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"rewinds tau updates and replays them exactly", test_rewind_replay},
        {NULL, NULL},
    };
    fsgd_test_suite("train_stale", cases);
}
