/* A loaded model's weights ask for transparent huge pages when its weights
 * touch most of the array's 4 KiB pages anyway (fsgd_model_load_mem): a
 * 2^24-weight model's load was 16k page faults, most of its time, and fsgd
 * serve loads a version at every swap. A sparse file keeps 4 KiB pages, so
 * its memory follows its bytes, not the dim it declares. Checked in
 * /proc/self/smaps (THPeligible) where the kernel's THP mode is madvise:
 * elsewhere the advice changes nothing to see, and the test says skipped. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/model.h"
#include "testlib.h"

#define DIM (1u << 22) /* 16 MiB of weights */

/* 1 when THP is in madvise mode ("always [madvise] never"). */
static int thp_madvise(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    return strstr(line, "[madvise]") != NULL;
}

/* THPeligible of the mapping that holds p: 1, 0, or -1 when not found. */
static int thp_eligible(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int in = 0, found = -1;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = a >= lo && a < hi;
        else if (in && !strncmp(line, "THPeligible:", 12)) {
            found = atoi(line + 12);
            break;
        }
    }
    fclose(f);
    return found;
}

/* A model with nnz weights spread over DIM, loaded from its bytes: its
 * weights' THPeligible. */
static int loaded_eligible(uint32_t nnz)
{
    fsgd_model_t m, back;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, DIM, 1, 1.0f), 0);
    for (uint32_t i = 0; i < nnz; i++)
        m.w[(uint64_t)i * (DIM / nnz)] = 0.5f;
    uint8_t *buf;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &buf, &len, err, sizeof err), 0);
    fsgd_model_free(&m);
    CU_ASSERT_EQUAL_FATAL(fsgd_model_load_mem(&back, buf, len, "m", 0, err, sizeof err), 0);
    free(buf);
    int e = thp_eligible(back.w + DIM / 2); /* inside the whole 2 MiB pages the advice covers */
    CU_ASSERT_EQUAL(back.w[0], 0.5f);
    fsgd_model_free(&back);
    return e;
}

static void test_dense_enough_asks_huge_pages(void)
{
    if (!thp_madvise() || thp_eligible(&thp_madvise) < 0) {
        fsgd_test_skip("transparent huge pages are not in madvise mode here (or no /proc/self/smaps)");
        return;
    }
    /* every array of this size a mapping of its own (glibc would move a
     * freed size's next ones into the heap, which keeps an earlier advice) */
    (void)mallopt(M_MMAP_THRESHOLD, 1 << 20); /* 0 under ASan, whose allocator maps large arrays anyway */
    CU_ASSERT_EQUAL(loaded_eligible(DIM / 64), 1); /* a weight in every 4 KiB page */
    CU_ASSERT_EQUAL(loaded_eligible(DIM / 4096), 0); /* one page in four: 4 KiB pages */
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"a loaded model's weights: huge pages when dense enough, 4 KiB pages when sparse",
         test_dense_enough_asks_huge_pages},
        {NULL, NULL},
    };
    fsgd_test_suite("model_hugepages", cases);
}
