/* LIBSVM parse speed: MB/s of fsgd's streaming reader into a CSR, beside
 * plain read() of the same file (same buffer size, page cache warm) in the
 * same run, on the real datasets and on a ~100 MB file from fsgd gen.
 * Prints: bench parse file=NAME mb=... rows=... nnz=... mb_s=... read_mb_s=... ratio=...
 * (ratio = parse MB/s / read MB/s; best of several passes each). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/csr.h"
#include "fsgd/gen.h"
#include "fsgd/libsvm.h"

#define BUF (4u << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double time_read(const char *path, char *buf)
{
    double t0 = now_s();
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    volatile unsigned char sink = 0;
    ssize_t n;
    while ((n = read(fd, buf, BUF)) > 0)
        sink ^= (unsigned char)buf[n - 1]; /* touch the data */
    close(fd);
    (void)sink;
    return now_s() - t0;
}

static double time_parse(const char *path, fsgd_csr_t *m)
{
    char err[512];
    double t0 = now_s();
    fsgd_csr_clear(m);
    fsgd_libsvm_reader_t *r = fsgd_libsvm_open(path, NULL, err, sizeof err);
    if (!r) {
        fprintf(stderr, "bench_parse: %s\n", err);
        return -1;
    }
    long n;
    while ((n = fsgd_libsvm_read(r, m, (size_t)1 << 16, err, sizeof err)) > 0)
        ;
    fsgd_libsvm_close(r);
    if (n < 0) {
        fprintf(stderr, "bench_parse: %s\n", err);
        return -1;
    }
    return now_s() - t0;
}

static int bench_file(const char *name, const char *path, char *buf)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "bench_parse: %s not found\n", path);
        return 1;
    }
    double mb = (double)st.st_size / 1e6;
    fsgd_csr_t m = {0};
    /* Warm the page cache and the CSR capacity once. */
    if (time_read(path, buf) < 0 || time_parse(path, &m) < 0) {
        fsgd_csr_free(&m);
        return 1;
    }
    double best_read = 1e30, best_parse = 1e30, spent = 0;
    for (int pass = 0; pass < 20 && (pass < 3 || spent < 1.0); pass++) {
        double tr = time_read(path, buf), tp = time_parse(path, &m);
        if (tr < 0 || tp < 0) {
            fsgd_csr_free(&m);
            return 1;
        }
        best_read = tr < best_read ? tr : best_read;
        best_parse = tp < best_parse ? tp : best_parse;
        spent += tr + tp;
    }
    double ps = mb / best_parse, rs = mb / best_read;
    printf("bench parse file=%s mb=%.1f rows=%zu nnz=%zu mb_s=%.0f read_mb_s=%.0f ratio=%.3f "
           "ns_per_nnz=%.1f\n",
           name, mb, m.n_rows, m.nnz, ps, rs, ps / rs, best_parse * 1e9 / (double)(m.nnz ? m.nnz : 1));
    fflush(stdout);
    fsgd_csr_free(&m);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("FSGD_DATA");
    if (!dir)
        dir = "build/datasets";
    char *buf = malloc(BUF);
    int rc = 0;
    const char *files[] = {"a9a", "a9a.t", "w8a", "ijcnn1", "ijcnn1.t", "reuters", "reuters.t"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        rc |= bench_file(files[i], path, buf);
    }
    /* ~100 MB of generated CTR-shaped data (binary values; dim 2^24). */
    const char *gen_path = "/tmp/fsgd-bench-gen.svm";
    fsgd_gen_opts_t o;
    fsgd_gen_opts_default(&o);
    o.dim = 1u << 24;
    o.nnz = 20;
    o.seed = 1;
    char err[256];
    fsgd_gen_t *g = fsgd_gen_new(&o, err, sizeof err);
    FILE *f = g ? fopen(gen_path, "wb") : NULL;
    uint64_t rows = argc > 1 ? strtoull(argv[1], NULL, 10) : 450000;
    double t0 = now_s();
    if (!f || fsgd_gen_write(g, f, rows, NULL, NULL, err, sizeof err) != 0 || fclose(f) != 0) {
        fprintf(stderr, "bench_parse: cannot write %s\n", gen_path);
        rc = 1;
    } else {
        double t = now_s() - t0;
        struct stat st;
        stat(gen_path, &st);
        printf("bench gen rows=%llu mb=%.1f seconds=%.2f mb_s=%.0f\n", (unsigned long long)rows,
               (double)st.st_size / 1e6, t, (double)st.st_size / 1e6 / t);
        rc |= bench_file("gen-dim2^24-nnz20", gen_path, buf);
    }
    fsgd_gen_destroy(g);
    unlink(gen_path);
    free(buf);
    return rc;
}
