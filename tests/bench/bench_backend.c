/* Backend throughput.
 *
 * CPU: gradient rows/s and nonzeros/s per thread (1 thread, then one
 * backend per core on disjoint shards) on a9a, reuters and a generated
 * CTR-shaped batch (fsgd gen: Zipf 1.1, 20 nonzeros/row, 2^20 features).
 *
 * With a CUDA device, in the same run: device-to-device copy bandwidth,
 * SpMV throughput as a fraction of it, gradient rows/s of the device
 * (first epoch uploads, later epochs hit the batch cache) against the CPU,
 * and end-to-end epoch time (gradient, host update, apply) per backend,
 * each with its ratio to the CPU (> 1: the device is faster).
 * Without one it prints the CPU figures and a "skipped" line.
 *
 * Output: "bench <name> key=value ..." lines.
 * FSGD_BENCH_ROWS sets the generated rows (default 200000). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "fsgd/backend.h"
#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/gen.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "fsgd/sparse.h"

#define BATCH_ROWS 1024

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *err)
{
    fprintf(stderr, "bench_backend: %s: %s\n", what, err);
    exit(1);
}

typedef struct dataset {
    const char *name;
    fsgd_csr_t all;
    fsgd_csr_t *batches;
    size_t n_batches;
    uint64_t dim;
} dataset_t;

static void split(dataset_t *d)
{
    d->n_batches = (d->all.n_rows + BATCH_ROWS - 1) / BATCH_ROWS;
    d->batches = calloc(d->n_batches, sizeof *d->batches);
    if (!d->batches)
        die("split", "out of memory");
    for (size_t i = 0; i < d->n_batches; i++) {
        size_t first = i * BATCH_ROWS, n = d->all.n_rows - first < BATCH_ROWS ? d->all.n_rows - first : BATCH_ROWS;
        if (fsgd_csr_append_rows(&d->batches[i], &d->all, first, n) < 0)
            die("split", "out of memory");
    }
    d->dim = d->all.max_col;
}

static int load_file(dataset_t *d, const char *name)
{
    const char *dir = getenv("FSGD_DATA");
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "build/datasets", name);
    memset(d, 0, sizeof *d);
    d->name = name;
    if (fsgd_libsvm_load(path, NULL, &d->all, NULL, err, sizeof err) < 0) {
        printf("bench backend_data name=%s skipped=\"%s\"\n", name, err);
        return -1;
    }
    split(d);
    return 0;
}

static void generate(dataset_t *d, size_t rows)
{
    fsgd_gen_opts_t o;
    fsgd_gen_opts_default(&o);
    o.dim = (uint64_t)1 << 20;
    o.nnz = 20;
    o.real_values = 1;
    char err[256];
    fsgd_gen_t *g = fsgd_gen_new(&o, err, sizeof err);
    if (!g)
        die("gen", err);
    memset(d, 0, sizeof *d);
    d->name = "gen-zipf1.1-nnz20-2^20";
    size_t cap = fsgd_gen_max_row(g);
    uint32_t *col = malloc(cap * sizeof *col);
    float *val = malloc(cap * sizeof *val);
    if (!col || !val)
        die("gen", "out of memory");
    for (size_t r = 0; r < rows; r++) {
        double label;
        size_t n = fsgd_gen_next(g, col, val, &label, NULL);
        if (fsgd_csr_append_row(&d->all, label, col, val, n) < 0)
            die("gen", "out of memory");
    }
    free(col);
    free(val);
    fsgd_gen_destroy(g);
    split(d);
    d->dim = o.dim;
}

static void free_dataset(dataset_t *d)
{
    for (size_t i = 0; i < d->n_batches; i++)
        fsgd_csr_free(&d->batches[i]);
    free(d->batches);
    fsgd_csr_free(&d->all);
}

static float *make_theta(uint64_t dim)
{
    float *t = malloc(dim * sizeof *t);
    if (!t)
        die("theta", "out of memory");
    uint64_t x = 42;
    for (uint64_t k = 0; k < dim; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        t[k] = (float)((double)(x >> 40) / (double)(1 << 24) - 0.5) * 0.1f;
    }
    return t;
}

/* One pass of gradients over batches [lo, hi) with batch ids (cache keys). */
static double pass(fsgd_backend_t *b, const dataset_t *d, size_t lo, size_t hi, fsgd_sparse_t *g)
{
    char err[512];
    double loss = 0;
    for (size_t i = lo; i < hi; i++) {
        fsgd_grad_request_t req = {.batch = &d->batches[i],
                                   .batch_id = (int64_t)i,
                                   .loss = FSGD_LOSS_LOGISTIC,
                                   .scale = 1.0 / BATCH_ROWS,
                                   .l2 = 1e-6};
        int rc = fsgd_backend_gradient(b, &req, g, &loss, err, sizeof err);
        if (rc < 0)
            die(fsgd_backend_name(b), err);
    }
    return loss;
}

typedef struct thread_arg {
    const dataset_t *d;
    const float *theta;
    size_t lo, hi;
    int reps;
    double seconds;
} thread_arg_t;

static void *cpu_thread(void *p)
{
    thread_arg_t *a = p;
    char err[256];
    fsgd_backend_t *b = fsgd_backend_new("cpu", a->d->dim, a->theta, err, sizeof err);
    if (!b)
        die("cpu", err);
    fsgd_sparse_t g = {0};
    pass(b, a->d, a->lo, a->hi, &g); /* warm-up */
    double t0 = now();
    for (int r = 0; r < a->reps; r++)
        pass(b, a->d, a->lo, a->hi, &g);
    a->seconds = now() - t0;
    fsgd_sparse_free(&g);
    fsgd_backend_destroy(b);
    return NULL;
}

/* Repetitions so one thread's pass over the data takes about 0.3 s. */
static int reps_for(const dataset_t *d)
{
    double nnz = (double)d->all.nnz;
    int reps = (int)(3e7 / (nnz + 1));
    return reps < 1 ? 1 : reps > 50 ? 50 : reps;
}

/* Returns rows/s per thread. */
static double cpu_throughput(const dataset_t *d, const float *theta, int threads)
{
    pthread_t tid[64];
    thread_arg_t args[64];
    int reps = reps_for(d);
    for (int t = 0; t < threads; t++) {
        args[t] = (thread_arg_t){.d = d,
                                 .theta = theta,
                                 .lo = d->n_batches * (size_t)t / (size_t)threads,
                                 .hi = d->n_batches * (size_t)(t + 1) / (size_t)threads,
                                 .reps = reps};
        if (pthread_create(&tid[t], NULL, cpu_thread, &args[t]) != 0)
            die("pthread_create", "failed");
    }
    double slowest = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        if (args[t].seconds > slowest)
            slowest = args[t].seconds;
    }
    double rows = (double)d->all.n_rows * reps, nnz = (double)d->all.nnz * reps;
    printf("bench backend_cpu data=%s rows=%zu nnz=%zu batch=%d threads=%d rows_per_s_per_thread=%.4g "
           "nnz_per_s_per_thread=%.4g rows_per_s=%.4g\n",
           d->name, d->all.n_rows, d->all.nnz, BATCH_ROWS, threads, rows / slowest / threads,
           nnz / slowest / threads, rows / slowest);
    return rows / slowest / threads;
}

/* One epoch as a worker runs it: gradient, a host update on the touched
 * keys, apply to the backend. Returns seconds. */
static double epoch(fsgd_backend_t *b, const dataset_t *d, float *theta)
{
    char err[512];
    fsgd_sparse_t g = {0};
    double t0 = now();
    for (size_t i = 0; i < d->n_batches; i++) {
        pass(b, d, i, i + 1, &g);
        for (size_t j = 0; j < g.n; j++) {
            theta[g.keys[j]] -= 0.01f * g.vals[j];
            g.vals[j] = theta[g.keys[j]];
        }
        if (fsgd_backend_apply(b, g.keys, g.vals, g.n, err, sizeof err) < 0)
            die("apply", err);
    }
    double s = now() - t0;
    fsgd_sparse_free(&g);
    return s;
}

/* cpu1: rows/s of one CPU thread; cpun: of all threads (nthreads) together. */
static void device_part(const dataset_t *d, double cpu1, double cpun, int nthreads)
{
    char err[512];
    fsgd_cuda_probe_t p;
    int rc = fsgd_cuda_probe(&d->all, 20, &p, err, sizeof err);
    if (rc < 0)
        die("cuda probe", err);
    printf("bench backend_cuda_spmv data=%s device=\"%s\" rows=%zu nnz=%zu touched=%zu copy_GBps=%.1f "
           "spmv_ms=%.3f spmv_GBps=%.1f spmv_frac_of_copy=%.3f spmvT_ms=%.3f spmvT_GBps=%.1f "
           "spmvT_frac_of_copy=%.3f upload_ms=%.2f\n",
           d->name, p.device, p.n_rows, p.nnz, p.n_touched, p.copy_gbs, p.spmv_ms, p.spmv_gbs,
           p.spmv_gbs / p.copy_gbs, p.spmvt_ms, p.spmvt_gbs, p.spmvt_gbs / p.copy_gbs, p.upload_ms);

    float *theta = make_theta(d->dim);
    fsgd_backend_t *b = fsgd_backend_new("cuda", d->dim, theta, err, sizeof err);
    if (!b)
        die("cuda", err);
    fsgd_sparse_t g = {0};
    double t0 = now();
    pass(b, d, 0, d->n_batches, &g); /* epoch 1: every batch uploaded and cached */
    double first = now() - t0;
    int reps = reps_for(d);
    t0 = now();
    for (int r = 0; r < reps; r++)
        pass(b, d, 0, d->n_batches, &g);
    double cached = (now() - t0) / reps;
    double rows = (double)d->all.n_rows;
    printf("bench backend_cuda_grad data=%s batch=%d rows_per_s_upload=%.4g rows_per_s_cached=%.4g "
           "nnz_per_s_cached=%.4g vs_cpu_1thread=%.2f vs_cpu_%dthreads=%.2f\n",
           d->name, BATCH_ROWS, rows / first, rows / cached, (double)d->all.nnz / cached, rows / cached / cpu1,
           nthreads, rows / cached / cpun);
    fsgd_sparse_free(&g);
    fsgd_backend_destroy(b);

    /* End-to-end epochs, both backends from the same θ. */
    const char *names[] = {"cpu", "cuda"};
    double e1[2], e2[2];
    for (int i = 0; i < 2; i++) {
        /* θ carries on from the previous backend's epochs: same work either way. */
        fsgd_backend_t *e = fsgd_backend_new(names[i], d->dim, theta, err, sizeof err);
        if (!e)
            die(names[i], err);
        e1[i] = epoch(e, d, theta);
        e2[i] = epoch(e, d, theta);
        printf("bench backend_epoch data=%s backend=%s batch=%d epoch1_s=%.4f epoch2_s=%.4f\n", d->name, names[i],
               BATCH_ROWS, e1[i], e2[i]);
        fsgd_backend_destroy(e);
    }
    /* > 1: the device is faster; epoch 1 uploads every batch, epoch 2 hits the cache. */
    printf("bench backend_epoch_ratio data=%s batch=%d cpu_over_cuda_epoch1=%.2f cpu_over_cuda_epoch2=%.2f\n", d->name,
           BATCH_ROWS, e1[0] / e1[1], e2[0] / e2[1]);
    free(theta);
}

int main(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = ncpu > 1 ? (int)(ncpu > 64 ? 64 : ncpu) : 1;
    const char *rows_env = getenv("FSGD_BENCH_ROWS");
    size_t gen_rows = rows_env ? (size_t)strtoull(rows_env, NULL, 10) : 200000;
    if (gen_rows < BATCH_ROWS)
        gen_rows = BATCH_ROWS;

    dataset_t sets[3];
    size_t n_sets = 0;
    if (load_file(&sets[n_sets], "a9a") == 0)
        n_sets++;
    if (load_file(&sets[n_sets], "reuters") == 0)
        n_sets++;
    generate(&sets[n_sets++], gen_rows);

    char why[512] = "";
    float one = 0;
    fsgd_backend_t *probe = fsgd_backend_new("cuda", 1, &one, why, sizeof why);
    int have_device = probe != NULL;
    fsgd_backend_destroy(probe);

    for (size_t i = 0; i < n_sets; i++) {
        float *theta = make_theta(sets[i].dim);
        double cpu1 = cpu_throughput(&sets[i], theta, 1), cpun = cpu1;
        if (threads > 1)
            cpun = cpu_throughput(&sets[i], theta, threads) * threads;
        free(theta);
        if (have_device)
            device_part(&sets[i], cpu1, cpun, threads);
    }
    if (!have_device)
        printf("bench backend_cuda skipped=\"%s\"\n", why);
    for (size_t i = 0; i < n_sets; i++)
        free_dataset(&sets[i]);
    return 0;
}
