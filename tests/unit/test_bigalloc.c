#include <stdint.h>
#include <string.h>

#include "fsgd/bigalloc.h"
#include "testlib.h"

/* 2 MiB aligned (so that huge pages can back it), zeroed, writable end to
 * end; sizes from none to several huge pages; NULL on overflow. */
static void test_aligned_zeroed(void)
{
    const size_t sizes[] = {0, 1, 4096, ((size_t)2 << 20) - 1, (size_t)2 << 20, ((size_t)5 << 20) + 3};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        unsigned char *p = fsgd_big_calloc(sizes[s], 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL((uintptr_t)p % ((size_t)2 << 20), 0);
        size_t nz = 0;
        for (size_t i = 0; i < sizes[s]; i++)
            nz += p[i] != 0;
        CU_ASSERT_EQUAL(nz, 0);
        memset(p, 0xAB, sizes[s] ? sizes[s] : 1);
        fsgd_big_free(p);
    }
    CU_ASSERT_PTR_NULL(fsgd_big_calloc(SIZE_MAX / 2, 4));
    fsgd_big_free(NULL);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"2 MiB aligned, zeroed, writable; NULL on overflow", test_aligned_zeroed},
        {NULL, NULL},
    };
    fsgd_test_suite("bigalloc", cases);
}
