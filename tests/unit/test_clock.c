/* The one monotonic clock (fsgd/clock.h): it never goes back, and its two
 * units read the same clock. */
#include "fsgd/clock.h"
#include "testlib.h"

static void test_never_goes_back(void)
{
    double last = fsgd_clock_s();
    for (int i = 0; i < 100000; i++) {
        double t = fsgd_clock_s();
        CU_ASSERT_FATAL(t >= last);
        last = t;
    }
}

static void test_units_agree(void)
{
    for (int i = 0; i < 1000; i++) {
        double before = fsgd_clock_s(), ms = fsgd_clock_ms(), after = fsgd_clock_s();
        /* one clock: ms lies between the two readings in seconds (rounding aside) */
        CU_ASSERT_FATAL(ms >= before * 1e3 - 1e-6 && ms <= after * 1e3 + 1e-6);
    }
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"never goes back", test_never_goes_back},
        {"seconds and milliseconds agree", test_units_agree},
        {NULL, NULL},
    };
    fsgd_test_suite("clock", cases);
}
