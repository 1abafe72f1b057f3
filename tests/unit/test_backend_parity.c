/* Backend parity: every built backend that is available on this machine
 * gives the CPU backend's gradient (same keys, values within relative
 * 1e-5, same loss) on batches of real data (a9a, reuters) and of random
 * wide data, for all three losses, with and without device batch caching,
 * and after model deltas. The CPU backend itself is checked against a
 * naive dense reference written here from the formulas.
 *
 * The device comparisons are test cases of their own ("cuda parity ...")
 * that are reported as skipped without a CUDA device; the selection test
 * then asserts that selecting "cuda" fails clearly (FSGD_E_NOT_BUILT
 * without CUDA, FSGD_E_DEVICE with CUDA but no device) and that "auto"
 * picks the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "fsgd/backend.h"
#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "fsgd/sparse.h"
#include "testlib.h"
#include "loss_testing.h"

#define REL_TOL 1e-5

static const fsgd_loss_kind_t losses[] = {FSGD_LOSS_LOGISTIC, FSGD_LOSS_SQUARED, FSGD_LOSS_HINGE};

static int cuda_built(void) { return strstr(fsgd_backend_list(), "cuda") != NULL; }

/* 1 when a CUDA backend can be made here; why not in why. */
static int cuda_usable(char *why, size_t whysz)
{
    float theta = 0;
    fsgd_backend_t *b = fsgd_backend_new("cuda", 1, &theta, why, whysz);
    fsgd_backend_destroy(b);
    return b != NULL;
}

static double uniform(uint64_t *st) { return (double)(fsgd_test_rand(st) >> 11) * 0x1.0p-53; }

static float *random_theta(uint64_t dim, uint64_t *st)
{
    float *t = malloc((dim ? dim : 1) * sizeof *t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    for (uint64_t k = 0; k < dim; k++)
        t[k] = (float)(uniform(st) - 0.5);
    return t;
}

/* |a - b| <= REL_TOL·max(|a|, |b|); exact zeros must match exactly. */
static int close_rel(double a, double b, double tol)
{
    double d = fabs(a - b), m = fmax(fabs(a), fabs(b));
    return d <= tol * m || d == 0;
}

/* Compares two sparse gradients; prints the first difference. */
static int same_grad(const char *what, const fsgd_sparse_t *ref, const fsgd_sparse_t *got)
{
    if (ref->n != got->n) {
        fprintf(stderr, "\n  %s: %zu keys, reference %zu\n", what, got->n, ref->n);
        return 0;
    }
    for (size_t i = 0; i < ref->n; i++) {
        if (ref->keys[i] != got->keys[i]) {
            fprintf(stderr, "\n  %s: key[%zu] = %u, reference %u\n", what, i, got->keys[i], ref->keys[i]);
            return 0;
        }
        if (!close_rel(ref->vals[i], got->vals[i], REL_TOL)) {
            fprintf(stderr, "\n  %s: key %u value %.9g, reference %.9g\n", what, ref->keys[i], got->vals[i],
                    ref->vals[i]);
            return 0;
        }
    }
    return 1;
}

/* The definition, densely: g_k = scale·Σ_i loss'(x_i·θ, y_i)·x_ik + λθ_k
 * over the keys present in the batch. */
static void reference_grad(const fsgd_csr_t *X, const float *theta, uint64_t dim, fsgd_loss_kind_t loss,
                           double scale, double l2, fsgd_sparse_t *out, double *loss_sum)
{
    double *acc = calloc(dim, sizeof *acc);
    char *seen = calloc(dim, 1);
    CU_ASSERT_FATAL(acc && seen);
    for (size_t r = 0; r < X->n_rows; r++) {
        double m = 0;
        for (uint64_t i = X->row_ptr[r]; i < X->row_ptr[r + 1]; i++)
            m += (double)theta[X->col[i]] * X->val[i];
        double y = fsgd_loss_label(loss, X->label[r]);
        /* a classification label's magnitude is the row's weight (fsgd/rowlabel.h) */
        double w = loss == FSGD_LOSS_SQUARED || X->label[r] == 0 ? 1.0 : fabs(X->label[r]);
        *loss_sum += w * fsgd_loss_value(loss, m, y);
        double d = w * fsgd_loss_deriv(loss, m, y);
        for (uint64_t i = X->row_ptr[r]; i < X->row_ptr[r + 1]; i++) {
            acc[X->col[i]] += d * X->val[i];
            seen[X->col[i]] = 1;
        }
    }
    size_t n = 0;
    for (uint64_t k = 0; k < dim; k++)
        n += seen[k];
    CU_ASSERT_FATAL(fsgd_sparse_reserve(out, n) == 0);
    n = 0;
    for (uint64_t k = 0; k < dim; k++)
        if (seen[k]) {
            out->keys[n] = (uint32_t)k;
            out->vals[n++] = (float)(acc[k] * scale + l2 * theta[k]);
        }
    out->n = n;
    free(acc);
    free(seen);
}

/* 1 with *out loaded; 0 when the data set is missing (the test is skipped). */
static int load(const char *name, fsgd_csr_t *out)
{
    fsgd_csr_t X;
    memset(&X, 0, sizeof X);
    const char *path = fsgd_test_data(name);
    if (!path)
        return 0;
    char err[256] = "";
    int rc = fsgd_libsvm_load(path, NULL, &X, NULL, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "\n  load %s: %s\n", path, err);
    CU_ASSERT_FATAL(rc == 0);
    *out = X;
    return 1;
}

/* Random rows over a wide model: columns spread over all 32 bits of [0, dim),
 * a few empty rows, real labels (regression; for classification, a class and
 * a weight) mapped by the losses. */
static fsgd_csr_t random_csr(size_t rows, uint64_t dim, size_t max_per_row, uint64_t *st)
{
    fsgd_csr_t X;
    memset(&X, 0, sizeof X);
    uint32_t *col = malloc(max_per_row * sizeof *col);
    float *val = malloc(max_per_row * sizeof *val);
    CU_ASSERT_FATAL(col && val);
    for (size_t r = 0; r < rows; r++) {
        size_t n = (r % 17 == 5) ? 0 : 1 + fsgd_test_rand(st) % max_per_row;
        size_t k = 0;
        for (size_t j = 0; j < n; j++) {
            /* half the entries from a small hot set, so keys repeat across rows */
            uint32_t c = (fsgd_test_rand(st) & 1) ? (uint32_t)(fsgd_test_rand(st) % 64)
                                                   : (uint32_t)(fsgd_test_rand(st) % dim);
            size_t p = k;
            while (p > 0 && col[p - 1] > c)
                p--;
            if (p > 0 && col[p - 1] == c)
                continue;
            memmove(col + p + 1, col + p, (k - p) * sizeof *col);
            col[p] = c;
            k++;
        }
        for (size_t j = 0; j < k; j++)
            val[j] = (float)(uniform(st) * 4 - 2);
        CU_ASSERT_FATAL(fsgd_csr_append_row(&X, uniform(st) * 6 - 3, col, val, k) == 0);
    }
    free(col);
    free(val);
    return X;
}

/* Rows [first, first+count) of src as their own batch. */
static fsgd_csr_t slice(const fsgd_csr_t *src, size_t first, size_t count)
{
    fsgd_csr_t b;
    memset(&b, 0, sizeof b);
    CU_ASSERT_FATAL(fsgd_csr_append_rows(&b, src, first, count) == 0);
    if (count == 0)
        CU_ASSERT_FATAL(fsgd_csr_reserve(&b, 0, 0) == 0);
    return b;
}

static int grad_of(fsgd_backend_t *b, const fsgd_csr_t *X, int64_t id, fsgd_loss_kind_t loss, double scale,
                   double l2, fsgd_sparse_t *out, double *loss_sum)
{
    fsgd_grad_request_t req = {.batch = X, .batch_id = id, .loss = loss, .scale = scale, .l2 = l2};
    char err[512] = "";
    *loss_sum = 0;
    int rc = fsgd_backend_gradient(b, &req, out, loss_sum, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "\n  %s gradient: %s: %s\n", fsgd_backend_name(b), fsgd_err_name(rc), err);
    return rc;
}

/* The CPU backend against the dense reference, on every batch. */
static void check_cpu(const fsgd_csr_t *batches, size_t nb, uint64_t dim, const float *theta)
{
    char err[256];
    fsgd_backend_t *cpu = fsgd_backend_new("cpu", dim, theta, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cpu);
    fsgd_sparse_t ref = {0}, got = {0};
    for (size_t li = 0; li < 3; li++)
        for (size_t bi = 0; bi < nb; bi++) {
            double l2 = bi % 2 ? 1e-3 : 0, scale = 1.0 / (double)(batches[bi].n_rows + 1);
            double ls_ref = 0, ls = 0;
            reference_grad(&batches[bi], theta, dim, losses[li], scale, l2, &ref, &ls_ref);
            CU_ASSERT_FATAL(grad_of(cpu, &batches[bi], -1, losses[li], scale, l2, &got, &ls) == 0);
            char what[96];
            snprintf(what, sizeof what, "cpu vs reference, %s, batch %zu", fsgd_loss_name(losses[li]), bi);
            CU_ASSERT_TRUE(same_grad(what, &ref, &got));
            CU_ASSERT_TRUE(close_rel(ls_ref, ls, 1e-9));
        }
    fsgd_sparse_free(&ref);
    fsgd_sparse_free(&got);
    fsgd_backend_destroy(cpu);
}

/* The CPU backend sums a batch of up to 2^20 nonzeros in a hash table when
 * the dense array is at least 16 times the table's size, and otherwise in
 * the dense array; both must give the reference bit for bit (the same
 * additions in the same order), also on a table reused by a smaller batch
 * after a larger one. At 2^21 weights the 300-row batch (~12k nonzeros, a
 * 512 KiB table against 16 MiB) takes the table, the big one the array. */
static void test_cpu_accumulators_bitwise(void)
{
    uint64_t st = fsgd_test_seed() ^ 0xACC;
    const uint64_t dim = 1 << 21;
    float *theta = random_theta(dim, &st);
    /* 2^20 / 40 rows of up to 80 nonzeros: past the table's limit */
    fsgd_csr_t big = random_csr(40000, dim, 80, &st), small = slice(&big, 0, 300);
    CU_ASSERT_FATAL(big.nnz > ((size_t)1 << 20));
    char err[256];
    fsgd_backend_t *cpu = fsgd_backend_new("cpu", dim, theta, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cpu);
    fsgd_sparse_t ref = {0}, got = {0};
    const fsgd_csr_t *order[] = {&small, &big, &small};
    for (size_t i = 0; i < 3; i++) {
        double ls_ref = 0, ls = 0;
        reference_grad(order[i], theta, dim, FSGD_LOSS_LOGISTIC, 0.5, 1e-3, &ref, &ls_ref);
        CU_ASSERT_FATAL(grad_of(cpu, order[i], -1, FSGD_LOSS_LOGISTIC, 0.5, 1e-3, &got, &ls) == 0);
        CU_ASSERT_EQUAL_FATAL(got.n, ref.n);
        CU_ASSERT_EQUAL(memcmp(got.keys, ref.keys, ref.n * sizeof *ref.keys), 0);
        CU_ASSERT_EQUAL(memcmp(got.vals, ref.vals, ref.n * sizeof *ref.vals), 0);
    }
    fsgd_sparse_free(&ref);
    fsgd_sparse_free(&got);
    fsgd_backend_destroy(cpu);
    fsgd_csr_free(&big);
    fsgd_csr_free(&small);
    free(theta);
}

/* Every other available backend against the CPU: uncached, cached (first
 * call uploads, later calls hit), after deltas applied to θ, and again
 * through a second instance whose cache budget forces evictions. */
static void check_devices(const char *label, const fsgd_csr_t *batches, size_t nb, uint64_t dim, float *theta,
                          uint64_t *st)
{
    char err[512] = "";
    fsgd_backend_t *cpu = fsgd_backend_new("cpu", dim, theta, err, sizeof err);
    fsgd_backend_t *dev = fsgd_backend_new("cuda", dim, theta, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cpu);
    if (!dev)
        fprintf(stderr, "\n  cuda backend: %s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
    printf("\n  %s: comparing %s with cpu\n", label, fsgd_backend_device(dev));
    fsgd_sparse_t ref = {0}, got = {0}, again = {0};
    for (int round = 0; round < 3; round++) {
        for (size_t li = 0; li < 3; li++)
            for (size_t bi = 0; bi < nb; bi++) {
                double l2 = (bi + li) % 2 ? 1e-3 : 0, scale = 1.0 / (double)(batches[bi].n_rows + 1);
                double ls_ref = 0, ls = 0, ls2 = 0;
                CU_ASSERT_FATAL(grad_of(cpu, &batches[bi], -1, losses[li], scale, l2, &ref, &ls_ref) == 0);
                /* uncached */
                CU_ASSERT_FATAL(grad_of(dev, &batches[bi], -1, losses[li], scale, l2, &got, &ls) == 0);
                char what[128];
                snprintf(what, sizeof what, "%s round %d %s batch %zu uncached", label, round,
                         fsgd_loss_name(losses[li]), bi);
                CU_ASSERT_TRUE(same_grad(what, &ref, &got));
                CU_ASSERT_TRUE(close_rel(ls_ref, ls, 1e-9));
                /* cached under its id: uploaded in round 0, hit afterwards */
                CU_ASSERT_FATAL(grad_of(dev, &batches[bi], (int64_t)bi, losses[li], scale, l2, &again, &ls2) == 0);
                snprintf(what, sizeof what, "%s round %d %s batch %zu cached", label, round,
                         fsgd_loss_name(losses[li]), bi);
                CU_ASSERT_TRUE(same_grad(what, &ref, &again));
                CU_ASSERT_TRUE(close_rel(ls_ref, ls2, 1e-9));
                /* the device result is deterministic: cached == uncached bit for bit */
                CU_ASSERT_TRUE(got.n == again.n && !memcmp(got.vals, again.vals, got.n * sizeof *got.vals));
            }
        /* A model delta on the keys of the last gradient: host θ changes in
         * place (what the CPU backend reads), the device follows by apply. */
        for (size_t i = 0; i < ref.n; i++) {
            theta[ref.keys[i]] = (float)(uniform(st) - 0.5);
            ref.vals[i] = theta[ref.keys[i]];
        }
        CU_ASSERT_FATAL(fsgd_backend_apply(dev, ref.keys, ref.vals, ref.n, err, sizeof err) == 0);
        CU_ASSERT_FATAL(fsgd_backend_apply(cpu, ref.keys, ref.vals, ref.n, err, sizeof err) == 0);
    }
    /* A key outside the model is refused. */
    uint32_t bad_key = (uint32_t)dim;
    float bad_val = 1;
    if (dim <= UINT32_MAX)
        CU_ASSERT_EQUAL(fsgd_backend_apply(dev, &bad_key, &bad_val, 1, err, sizeof err), FSGD_E_RANGE);
    fsgd_backend_destroy(dev);

    /* A ~20 KiB cache: large batches go through the scratch area, small ones
     * under 4 ids each overflow it, so batches are evicted and uploaded
     * again; none of that may change a result. This instance also takes its
     * memory with plain cudaMalloc/cudaFree instead of the stream-ordered pool
     * (FSGD_CUDA_POOL=0), the path of devices without pools. */
    setenv("FSGD_CUDA_CACHE_MB", "0.02", 1);
    setenv("FSGD_CUDA_POOL", "0", 1);
    dev = fsgd_backend_new("cuda", dim, theta, err, sizeof err);
    unsetenv("FSGD_CUDA_CACHE_MB");
    unsetenv("FSGD_CUDA_POOL");
    if (!dev)
        fprintf(stderr, "\n  cuda backend with a small cache: %s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
    for (int round = 0; round < 2; round++)
        for (int alias = 0; alias < 4; alias++)
            for (size_t bi = 0; bi < nb; bi++) {
                double ls_ref = 0, ls = 0;
                int64_t id = (int64_t)(bi + nb * (size_t)alias);
                CU_ASSERT_FATAL(grad_of(cpu, &batches[bi], -1, FSGD_LOSS_LOGISTIC, 1e-2, 0, &ref, &ls_ref) == 0);
                CU_ASSERT_FATAL(grad_of(dev, &batches[bi], id, FSGD_LOSS_LOGISTIC, 1e-2, 0, &got, &ls) == 0);
                char what[96];
                snprintf(what, sizeof what, "%s small cache batch %zu id %lld", label, bi, (long long)id);
                CU_ASSERT_TRUE(same_grad(what, &ref, &got));
                CU_ASSERT_TRUE(close_rel(ls_ref, ls, 1e-9));
            }
    fsgd_backend_destroy(dev);
    fsgd_backend_destroy(cpu);
    fsgd_sparse_free(&ref);
    fsgd_sparse_free(&got);
    fsgd_sparse_free(&again);
}

/* fsgd_backend_gradient_encoded gives fsgd_codec_encode's message (bytes,
 * statistics, error feedback state) of the backend's own gradient: on the
 * CPU through the codec library, on a device by the device encoder for
 * fastsgd (ef=0), with the Σ|v| decided by the device tree and, forced, by
 * the CPU-lane fallback (with_device; the caller has checked there is one). */
static void check_encoded(const char *label, const fsgd_csr_t *batches, size_t nb, uint64_t dim, const float *theta,
                          int with_device)
{
    static const char *const specs[] = {"fastsgd", "fastsgd:levels=optimal,l=3", "fastsgd:b=1.01,tau=255,l=1",
                                        "fastsgd:b=2,tau=20,l=5", "fastsgd:ef=1", "none"};
    const size_t nspecs = sizeof specs / sizeof *specs;
    char err[512] = "";
    int have_dev = with_device;
    for (int bk = 0; bk < (have_dev ? 3 : 1); bk++) { /* cpu, cuda, cuda with the lane fallback forced */
        if (bk == 2)
            setenv("FSGD_FASTSGD_DEVICE_LANES", "1", 1);
        fsgd_backend_t *b = fsgd_backend_new(bk ? "cuda" : "cpu", dim, theta, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        size_t compared = 0, on_dev = 0;
        for (size_t si = 0; si < nspecs; si++) {
            fsgd_codec_t *ca = fsgd_codec_new(specs[si], dim, err, sizeof err);
            fsgd_codec_t *cb = fsgd_codec_new(specs[si], dim, err, sizeof err);
            CU_ASSERT_FATAL(ca && cb);
            int want_dev = bk && strncmp(specs[si], "fastsgd", 7) == 0 && !strstr(specs[si], "ef=1");
            CU_ASSERT_EQUAL(fsgd_backend_encodes_on_device(b, cb), want_dev);
            fsgd_sparse_t g = {0};
            for (int round = 0; round < 2; round++)
                for (size_t bi = 0; bi < nb; bi++) {
                    fsgd_loss_kind_t loss = losses[(bi + si) % 3];
                    double scale = 1.0 / (double)(batches[bi].n_rows + 1), l2 = bi % 2 ? 1e-3 : 0;
                    double ls_a = 0, ls_b = 0;
                    CU_ASSERT_FATAL(grad_of(b, &batches[bi], (int64_t)bi, loss, scale, l2, &g, &ls_a) == 0);
                    size_t cap = fsgd_backend_encoded_bound(cb, &batches[bi]);
                    CU_ASSERT_TRUE(cap >= fsgd_codec_bound(ca, g.n));
                    uint8_t *ma = malloc(cap), *mb = malloc(cap);
                    CU_ASSERT_FATAL(ma && mb);
                    size_t la = 0, lb = 0;
                    fsgd_outbuf_t oba = {ma, cap, 0};
                    CU_ASSERT_FATAL(fsgd_codec_encode(ca, g.keys, g.vals, g.n, &oba, err, sizeof err) == 0);
                    la = oba.len;
                    fsgd_grad_request_t req = {.batch = &batches[bi], .batch_id = (int64_t)bi, .loss = loss,
                                               .scale = scale, .l2 = l2};
                    fsgd_outbuf_t obb = {mb, cap, 0};
                    int rc = fsgd_backend_gradient_encoded(b, &req, cb, &obb, &ls_b, err, sizeof err);
                    lb = obb.len;
                    if (rc < 0)
                        fprintf(stderr, "\n  %s gradient_encoded %s: %s: %s\n", fsgd_backend_name(b), specs[si],
                                fsgd_err_name(rc), err);
                    CU_ASSERT_EQUAL_FATAL(rc, 0);
                    fsgd_codec_stats_t sa, sb;
                    fsgd_codec_last_stats(ca, &sa);
                    fsgd_codec_last_stats(cb, &sb);
                    int same = la == lb && memcmp(ma, mb, la) == 0 && memcmp(&sa, &sb, sizeof sa) == 0;
                    if (!same)
                        fprintf(stderr, "\n  %s %s %s batch %zu: encoded message differs (%zu vs %zu bytes)\n",
                                label, fsgd_backend_name(b), specs[si], bi, la, lb);
                    CU_ASSERT_TRUE(same);
                    CU_ASSERT_TRUE(close_rel(ls_a, ls_b, 1e-12));
                    compared++;
                    on_dev += (size_t)want_dev;
                    free(ma);
                    free(mb);
                }
            fsgd_sparse_free(&g);
            fsgd_codec_destroy(ca);
            fsgd_codec_destroy(cb);
        }
        printf("\n  %s: %s%s: %zu encoded messages equal to fsgd_codec_encode's (%zu by the device encoder)\n",
               label, fsgd_backend_device(b), bk == 2 ? " (lane fallback forced)" : "", compared, on_dev);
        fsgd_backend_destroy(b);
        if (bk == 2)
            unsetenv("FSGD_FASTSGD_DEVICE_LANES");
    }
}

/* Batches of several sizes from a dataset: single rows, small and large
 * steps, and the whole file. */
static int device_or_skip(void)
{
    char why[512] = "", msg[600];
    if (cuda_usable(why, sizeof why))
        return 1;
    snprintf(msg, sizeof msg, "no CUDA device (%s)", why);
    fsgd_test_skip(msg);
    return 0;
}

/* device 0: the CPU against the reference and the codec library; 1: every
 * device against the CPU (skipped without one). */
static void run_dataset(const char *name, int device)
{
    if (device && !device_or_skip())
        return;
    fsgd_csr_t all;
    if (!load(name, &all))
        return;
    uint64_t st = fsgd_test_seed() ^ 0x5eed;
    uint64_t dim = all.max_col + 3; /* a model a little wider than the data */
    float *theta = random_theta(dim, &st);
    size_t sizes[] = {1, 7, 256, 4096};
    fsgd_csr_t batches[6];
    size_t nb = 0;
    for (size_t i = 0; i < 4; i++) {
        size_t first = (size_t)(fsgd_test_rand(&st) % (all.n_rows - sizes[i]));
        batches[nb++] = slice(&all, first, sizes[i]);
    }
    batches[nb++] = slice(&all, 0, all.n_rows);
    if (device) {
        check_devices(name, batches, nb, dim, theta, &st);
        check_encoded(name, batches, nb, dim, theta, 1);
    } else {
        check_cpu(batches, nb, dim, theta);
        check_encoded(name, batches, nb, dim, theta, 0);
    }
    for (size_t i = 0; i < nb; i++)
        fsgd_csr_free(&batches[i]);
    fsgd_csr_free(&all);
    free(theta);
}

static void test_parity_a9a(void) { run_dataset("a9a", 0); }

static void test_parity_reuters(void) { run_dataset("reuters", 0); }

static void test_device_parity_a9a(void) { run_dataset("a9a", 1); }

static void test_device_parity_reuters(void) { run_dataset("reuters", 1); }

/* Wide random data: keys across the whole uint32 range of a large model
 * would need a 4 GiB θ, so use 2^22 keys (all radix digits of the columns
 * used) plus a batch of only empty rows and a batch with no rows. */
static void random_wide(int device)
{
    if (device && !device_or_skip())
        return;
    uint64_t st = fsgd_test_seed() ^ 0xc0ffee;
    uint64_t dim = (uint64_t)1 << 22;
    float *theta = random_theta(dim, &st);
    fsgd_csr_t batches[5];
    batches[0] = random_csr(1, dim, 5, &st);
    batches[1] = random_csr(300, dim, 40, &st);
    batches[2] = random_csr(3000, dim, 200, &st);
    memset(&batches[3], 0, sizeof batches[3]);
    for (int r = 0; r < 4; r++)
        CU_ASSERT_FATAL(fsgd_csr_append_row(&batches[3], r % 2 ? 1 : -1, NULL, NULL, 0) == 0);
    batches[4] = slice(&batches[1], 0, 0);
    if (device) {
        check_devices("random wide", batches, 5, dim, theta, &st);
        check_encoded("random wide", batches, 5, dim, theta, 1);
    } else {
        check_cpu(batches, 5, dim, theta);
        check_encoded("random wide", batches, 5, dim, theta, 0);
    }
    for (size_t i = 0; i < 5; i++)
        fsgd_csr_free(&batches[i]);
    free(theta);
}

static void test_parity_random_wide(void) { random_wide(0); }

static void test_device_parity_random_wide(void) { random_wide(1); }

/* A worker that joins late or resyncs: its device backend was made over a
 * zeroed θ, then a snapshot lands in the host array and fsgd_backend_load
 * copies it in. Its gradients must then be the CPU's over the snapshot, not
 * over zeros (skipped without a device). */
static void test_device_loads_snapshot(void)
{
    if (!device_or_skip())
        return;
    uint64_t st = fsgd_test_seed() ^ 0x10ad;
    uint64_t dim = 5000;
    float *host = calloc(dim, sizeof *host);
    float *snap = random_theta(dim, &st);
    fsgd_csr_t X = random_csr(200, dim, 30, &st);
    char err[512] = "";
    fsgd_backend_t *dev = fsgd_backend_new("cuda", dim, host, err, sizeof err);
    fsgd_backend_t *cpu = fsgd_backend_new("cpu", dim, snap, err, sizeof err);
    CU_ASSERT_FATAL(host && dev && cpu);
    memcpy(host, snap, dim * sizeof *host);
    CU_ASSERT_EQUAL_FATAL(fsgd_backend_load(dev, host, dim, err, sizeof err), 0);
    fsgd_grad_request_t req = {.batch = &X, .batch_id = -1, .loss = FSGD_LOSS_LOGISTIC, .scale = 1.0};
    fsgd_sparse_t gd = {0}, gc = {0};
    double ld = 0, lc = 0;
    CU_ASSERT_EQUAL_FATAL(fsgd_backend_gradient(dev, &req, &gd, &ld, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_backend_gradient(cpu, &req, &gc, &lc, err, sizeof err), 0);
    CU_ASSERT_DOUBLE_EQUAL(ld, lc, 1e-3 * (1 + fabs(lc)));
    CU_ASSERT_EQUAL_FATAL(gd.n, gc.n);
    for (size_t i = 0; i < gc.n; i++) {
        CU_ASSERT_EQUAL(gd.keys[i], gc.keys[i]);
        CU_ASSERT_DOUBLE_EQUAL(gd.vals[i], gc.vals[i], 1e-3 * (1 + fabs(gc.vals[i])));
    }
    fsgd_sparse_free(&gd);
    fsgd_sparse_free(&gc);
    fsgd_backend_destroy(dev);
    fsgd_backend_destroy(cpu);
    fsgd_csr_free(&X);
    free(host);
    free(snap);
}

/* Every backend refuses a batch wider than its model with FSGD_E_RANGE. */
static void test_column_beyond_dim(void)
{
    uint64_t st = fsgd_test_seed();
    fsgd_csr_t X = random_csr(20, 1000, 10, &st);
    float theta[10] = {0};
    const char *names[] = {"cpu", "cuda"};
    for (size_t i = 0; i < 2; i++) {
        char err[256] = "";
        fsgd_backend_t *b = fsgd_backend_new(names[i], 10, theta, err, sizeof err);
        if (!b)
            continue; /* cuda not usable here: covered by test_selection */
        fsgd_sparse_t g = {0};
        double ls = 0;
        fsgd_grad_request_t req = {.batch = &X, .batch_id = 1, .loss = FSGD_LOSS_LOGISTIC, .scale = 1, .l2 = 0};
        CU_ASSERT_EQUAL(fsgd_backend_gradient(b, &req, &g, &ls, err, sizeof err), FSGD_E_RANGE);
        FSGD_ASSERT_CONTAINS(err, ">= model dim 10");
        fsgd_sparse_free(&g);
        fsgd_backend_destroy(b);
    }
    fsgd_csr_free(&X);
}

/* "cuda" without a usable device fails with a message that says why, the
 * private probe returns the matching code, and "auto" picks what exists. */
static void test_selection(void)
{
    char err[512] = "", why[512] = "";
    float theta[4] = {0};
    fsgd_cuda_probe_t probe;
    fsgd_csr_t one;
    memset(&one, 0, sizeof one);
    uint32_t c = 0;
    float v = 1;
    CU_ASSERT_FATAL(fsgd_csr_append_row(&one, 1, &c, &v, 1) == 0);

    CU_ASSERT_EQUAL(strncmp(fsgd_backend_list(), "cpu", 3), 0);
    fsgd_backend_t *b = fsgd_backend_new("nosuch", 4, theta, err, sizeof err);
    CU_ASSERT_PTR_NULL(b);
    FSGD_ASSERT_CONTAINS(err, "unknown backend 'nosuch'");

    int usable = cuda_usable(why, sizeof why);
    fsgd_backend_t *a = fsgd_backend_new("auto", 4, theta, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    if (!cuda_built()) {
        CU_ASSERT_FALSE(usable);
        FSGD_ASSERT_CONTAINS(why, "cuda: built without CUDA");
        CU_ASSERT_EQUAL(fsgd_cuda_probe(&one, 1, &probe, err, sizeof err), FSGD_E_NOT_BUILT);
        CU_ASSERT_STRING_EQUAL(fsgd_backend_name(a), "cpu");
        printf("\n  no CUDA device (built without CUDA): cuda fails clearly, auto -> %s\n", fsgd_backend_name(a));
    } else if (!usable) {
        FSGD_ASSERT_CONTAINS(why, "cuda: no device (cudaGetDeviceCount: ");
        CU_ASSERT_EQUAL(fsgd_cuda_probe(&one, 1, &probe, err, sizeof err), FSGD_E_DEVICE);
        FSGD_ASSERT_CONTAINS(err, "cuda: no device");
        CU_ASSERT_STRING_EQUAL(fsgd_backend_name(a), "cpu");
        CU_ASSERT_STRING_EQUAL(fsgd_backend_device(a), "cpu");
        printf("\n  no CUDA device (%s): cuda fails clearly, auto -> %s\n", why, fsgd_backend_name(a));
    } else {
        CU_ASSERT_STRING_EQUAL(fsgd_backend_name(a), "cuda");
        FSGD_ASSERT_CONTAINS(fsgd_backend_device(a), "cuda: ");
        printf("\n  cuda device: %s; auto -> %s\n", fsgd_backend_device(a), fsgd_backend_name(a));
    }
    fsgd_backend_destroy(a);
    fsgd_csr_free(&one);
}

/* `fsgd features` lists exactly what was built in. */
static void test_features_lists_backends(void)
{
    char cmd[600], out[4096];
    snprintf(cmd, sizeof cmd, "%s features", fsgd_test_bin());
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 0);
    char want[64];
    snprintf(want, sizeof want, "backends: %s\n", cuda_built() ? "cpu cuda" : "cpu");
    FSGD_ASSERT_CONTAINS(out, want);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"selection: cuda errors clearly, auto picks what exists", test_selection},
        {"fsgd features lists the built backends", test_features_lists_backends},
        {"parity on a9a (3 losses, cached/uncached, deltas)", test_parity_a9a},
        {"parity on reuters (3 losses, cached/uncached, deltas)", test_parity_reuters},
        {"parity on random wide batches, empty rows, no rows", test_parity_random_wide},
        {"cuda parity on a9a (3 losses, cached/uncached, deltas, encoder)", test_device_parity_a9a},
        {"cuda parity on reuters (3 losses, cached/uncached, deltas, encoder)", test_device_parity_reuters},
        {"cuda parity on random wide batches", test_device_parity_random_wide},
        {"a column beyond the model dim is refused", test_column_beyond_dim},
        {"cpu: hashed and dense accumulators give the reference bit for bit", test_cpu_accumulators_bitwise},
        {"cuda backend over a zeroed model computes on the snapshot it is loaded with", test_device_loads_snapshot},
        {NULL, NULL},
    };
    fsgd_test_suite("backend_parity", cases);
}
