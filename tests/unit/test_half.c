/* binary16 conversions (fsgd/half.h): exact round trips, the nearest half
 * with ties to even, and the edges (subnormals, 65504, overflow, NaN). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/half.h"
#include "testlib.h"

static void test_every_half_round_trips(void)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = fsgd_half_to_float((uint16_t)h);
        if (isnan(f)) {
            CU_ASSERT_FATAL((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu));
            CU_ASSERT_FATAL(isnan(fsgd_half_to_float(fsgd_half_from_float(f))));
            continue;
        }
        CU_ASSERT_FATAL(fsgd_half_from_float(f) == h);
    }
}

static void test_edges(void)
{
    CU_ASSERT_EQUAL(fsgd_half_from_float(1.0f), 0x3c00);
    CU_ASSERT_EQUAL(fsgd_half_from_float(-2.0f), 0xc000);
    CU_ASSERT_EQUAL(fsgd_half_from_float(65504.0f), 0x7bff);
    CU_ASSERT_EQUAL(fsgd_half_from_float(65519.0f), 0x7bff);
    CU_ASSERT_EQUAL(fsgd_half_from_float(65520.0f), 0x7c00); /* the tie rounds to even: infinity */
    CU_ASSERT_EQUAL(fsgd_half_from_float(ldexpf(1, -24)), 0x0001);
    CU_ASSERT_EQUAL(fsgd_half_from_float(ldexpf(1, -25)), 0x0000);        /* tie to even: 0 */
    CU_ASSERT_EQUAL(fsgd_half_from_float(ldexpf(3, -25)), 0x0002);        /* tie to even: 2 */
    CU_ASSERT_EQUAL(fsgd_half_from_float(1.0f + ldexpf(1, -11)), 0x3c00); /* tie to even */
    CU_ASSERT_EQUAL(fsgd_half_from_float(1.0f + ldexpf(3, -11)), 0x3c02);
    CU_ASSERT_EQUAL(fsgd_half_from_float(ldexpf(4095, -25)), 0x0800); /* halfway from the top subnormal to 2^-14: even */
    CU_ASSERT_TRUE(isinf(fsgd_half_to_float(fsgd_half_from_float(1e9f))));
    CU_ASSERT_TRUE(fsgd_half_fits((const float[]){0.0f, -65519.0f, 3.0f}, 3));
    CU_ASSERT_FALSE(fsgd_half_fits((const float[]){1.0f, 65520.0f}, 2));
    CU_ASSERT_FALSE(fsgd_half_fits((const float[]){NAN}, 1));
}

/* Random floats: the half chosen is at least as near as both neighbours,
 * and on a tie the even one. */
static void test_nearest(void)
{
    srand(7);
    for (int i = 0; i < 200000; i++) {
        float f = ldexpf((float)rand() / (float)RAND_MAX, rand() % 40 - 26) * (rand() & 1 ? 1 : -1);
        uint16_t h = fsgd_half_from_float(f);
        float got = fsgd_half_to_float(h);
        CU_ASSERT_FATAL(isfinite(got));
        double d = fabs((double)got - f);
        for (int step = -1; step <= 1; step += 2) {
            uint16_t nb = (uint16_t)(h + step);
            if ((nb & 0x7fffu) >= 0x7c00u || ((h & 0x7fffu) == 0 && step < 0))
                continue;
            double dn = fabs((double)fsgd_half_to_float(nb) - f);
            CU_ASSERT_FATAL(d < dn || (d == dn && !(h & 1u)));
        }
#ifdef __FLT16_MAX__
        CU_ASSERT_FATAL(got == (float)(_Float16)f); /* the compiler's own conversion, where it has one */
#endif
    }
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"every half round-trips exactly", test_every_half_round_trips},
        {"edges: 65504, overflow, subnormals, ties to even", test_edges},
        {"random floats go to the nearest half", test_nearest},
        {NULL, NULL},
    };
    fsgd_test_suite("half", cases);
}
