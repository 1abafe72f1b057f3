/* What fsgd serve's watcher pays to load a new version and free the old
 * one (issue 38: p99 during swaps under a saturating load): a 2^24-weight
 * logistic model with 170k weights at random keys (the size of the one
 * tests/bench/serve.sh trains: a 1.4 MB file, 64 MiB of weights once
 * loaded), encoded once, then loaded from its bytes (fsgd_model_load_mem:
 * CRC, checks, the dense weights) and freed, 5 times. The first load of a
 * process may pay the kernel's compaction for its first huge pages.
 * Prints: bench model_swap dim=... nnz=... file_bytes=... load_ms=...
 *         load_cpu_ms=... load_faults=... free_ms=... (medians) first_load_ms=... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "fsgd/clock.h"
#include "fsgd/model.h"

#define DIM (1u << 24)
#define NNZ 170000
#define ROUNDS 5

static double cpu_s(long *faults)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    *faults = r.ru_minflt;
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    fsgd_model_t m;
    char err[512];
    if (fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, DIM, 1, 1.0f) < 0)
        return 1;
    uint64_t x = 88172645463325252ull; /* xorshift: the same keys every run */
    for (int i = 0; i < NNZ; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        m.w[x % DIM] = 0.25f + (float)(i % 7);
    }
    uint8_t *buf;
    size_t len;
    if (fsgd_model_encode(&m, &buf, &len, err, sizeof err) < 0) {
        fprintf(stderr, "bench_model_swap: %s\n", err);
        return 1;
    }
    uint64_t nnz = fsgd_model_nnz(&m);
    fsgd_model_free(&m);
    double load[ROUNDS], cpu[ROUNDS], faults[ROUNDS], freed[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        long f0, f1, f2;
        double c0 = cpu_s(&f0), t0 = fsgd_clock_s();
        if (fsgd_model_load_mem(&m, buf, len, "bench", 0, err, sizeof err) < 0) {
            fprintf(stderr, "bench_model_swap: %s\n", err);
            return 1;
        }
        double t1 = fsgd_clock_s(), c1 = cpu_s(&f1);
        fsgd_model_free(&m);
        double t2 = fsgd_clock_s();
        cpu_s(&f2);
        load[r] = (t1 - t0) * 1e3;
        cpu[r] = (c1 - c0) * 1e3;
        faults[r] = (double)(f1 - f0);
        freed[r] = (t2 - t1) * 1e3;
    }
    double first = load[0];
    qsort(load, ROUNDS, sizeof *load, by_value);
    qsort(cpu, ROUNDS, sizeof *cpu, by_value);
    qsort(faults, ROUNDS, sizeof *faults, by_value);
    qsort(freed, ROUNDS, sizeof *freed, by_value);
    printf("bench model_swap dim=%u nnz=%llu file_bytes=%zu load_ms=%.2f load_cpu_ms=%.2f load_faults=%.0f "
           "free_ms=%.2f first_load_ms=%.2f\n",
           DIM, (unsigned long long)nnz, len, load[ROUNDS / 2], cpu[ROUNDS / 2], faults[ROUNDS / 2],
           freed[ROUNDS / 2], first);
    free(buf);
    return 0;
}
