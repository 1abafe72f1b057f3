/* The CUDA backend: the gradient of a mini-batch with cuSPARSE's generic API.
 *
 * Per batch (once, then cached on the device under its batch_id):
 *   upload CSR X (n rows, nnz entries, columns in [0, dim)),
 *   touched = sort+unique(col)          (cub radix sort + unique, O(nnz))
 *   colc[i] = position of col[i] in touched (binary search), so X becomes
 *             the compact n x t matrix Xc over the t touched keys only,
 *   Xcᵀ     = csr2csc(Xc)              (cusparseCsr2cscEx2).
 * Per gradient call:
 *   θc[j] = θ[touched[j]]                        gather kernel
 *   m     = Xc θc                                 cusparseSpMV, NON_TRANSPOSE
 *   r_i   = loss'(m_i, y_i), loss += loss(m_i,y_i) loss kernel + fixed-order reduction
 *   gc    = Xcᵀ r                                 cusparseSpMV on the explicit transpose
 *   out_j = gc_j·scale + λ·θ[touched[j]]          output kernel, copied to the host
 *
 * Why compact, and why an explicit transpose:
 *  - The dense result of Xᵀr over the full model would cost O(dim) memory
 *    traffic per step (cuSPARSE writes every entry of y); over the touched
 *    keys it is O(t), and the "gather the touched keys" step is the identity.
 *  - cusparseSpMV with CUSPARSE_OPERATION_TRANSPOSE on CSR uses atomics and
 *    is not deterministic (CSR_ALG2 is deterministic only for NON_TRANSPOSE).
 *    A batch that stays cached is transposed once; then both products are
 *    NON_TRANSPOSE with CUSPARSE_SPMV_CSR_ALG2: bit-identical results on
 *    every run, and no atomics on the hot path.
 *
 * Precision: matrix values, θc, m, r and g are double (CUDA_R_64F throughout,
 * the uniform-precision case every SpMV algorithm supports); θ stays float
 * on the device as on the host. The CPU backend also accumulates in double,
 * so the two differ only by summation order (~1e-15 relative) before the
 * final rounding to float. Costs 24 bytes of device memory per nonzero
 * (X and Xᵀ, int32 index + double value each).
 *
 * Errors name the failing call and the CUDA / cuSPARSE message. After a
 * device fault (sticky CUDA error) the instance stays unusable; every later
 * call fails with the same message.
 *
 * This file is the whole of the CUDA plugin (lib/fsgd/backend_cuda.so,
 * Makefile): backend_cuda_plugin.c loads it, and cuSPARSE with it, only when
 * the cuda backend is asked for. The fsgd_* functions it calls come from the
 * executable that loads it. */
#include <cuda_runtime.h>
#include <cusparse.h>
#include <math_constants.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Outside extern "C": it includes <math.h>, which is C++ under nvcc. */
#include "fastsgd_device_math.h"

extern "C" {
#include "backend_cuda.h"
#include "fastsgd_device.h"
#include "backend_impl.h"
#include "fsgd/error.h"
#include "fsgd/loss.h"
#include "fsgd/loss_formulas.h"
}

/* ---------------------------------------------------------------- errors */

static int cuda_fail(char *err, size_t errsz, cudaError_t e, const char *call, int line)
{
    int code = e == cudaErrorMemoryAllocation ? FSGD_E_NOMEM : FSGD_E_DEVICE;
    int len = (int)strcspn(call, "(");
    return fsgd_err_fmt(err, errsz, code, "cuda: %.*s failed: %s (%s) [backend_cuda.cu:%d]", len, call,
                        cudaGetErrorString(e), cudaGetErrorName(e), line);
}

static int sparse_fail(char *err, size_t errsz, cusparseStatus_t s, const char *call, int line)
{
    int code = s == CUSPARSE_STATUS_ALLOC_FAILED ? FSGD_E_NOMEM : FSGD_E_DEVICE;
    int len = (int)strcspn(call, "(");
    return fsgd_err_fmt(err, errsz, code, "cuda: %.*s failed: %s (%s) [backend_cuda.cu:%d]", len, call,
                        cusparseGetErrorString(s), cusparseGetErrorName(s), line);
}

#define CU_TRY(call)                                                     \
    do {                                                                 \
        cudaError_t cu_e_ = (call);                                      \
        if (cu_e_ != cudaSuccess)                                        \
            return cuda_fail(err, errsz, cu_e_, #call, __LINE__);        \
    } while (0)

#define SP_TRY(call)                                                     \
    do {                                                                 \
        cusparseStatus_t sp_s_ = (call);                                 \
        if (sp_s_ != CUSPARSE_STATUS_SUCCESS)                            \
            return sparse_fail(err, errsz, sp_s_, #call, __LINE__);      \
    } while (0)

/* A kernel launch reports configuration errors through cudaGetLastError. */
#define LAUNCH_TRY(name)                                                 \
    do {                                                                 \
        cudaError_t cu_e_ = cudaGetLastError();                          \
        if (cu_e_ != cudaSuccess)                                        \
            return cuda_fail(err, errsz, cu_e_, "launch " name, __LINE__); \
    } while (0)

#define FWD(expr)                                                        \
    do {                                                                 \
        int fwd_rc_ = (expr);                                            \
        if (fwd_rc_ < 0)                                                 \
            return fwd_rc_;                                              \
    } while (0)

/* --------------------------------------------------------------- kernels */

enum { THREADS = 256, MAX_BLOCKS = 4096, LOSS_BLOCKS = 1024 };

static unsigned blocks_for(size_t n, unsigned cap)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b == 0)
        b = 1;
    return (unsigned)(b < cap ? b : cap);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* colc[i] = index of col[i] in the sorted unique keys; values widened.
 * A column missing from touched (only possible when the batch's max_col is
 * wrong, which narrowed the radix sort) sets *bad. */
__global__ void k_compact(const uint32_t *col, const float *valf, size_t nnz, const uint32_t *touched, int t,
                          int *colc, double *val, int *bad)
{
    GRID_STRIDE(i, nnz)
    {
        uint32_t c = col[i];
        int lo = 0, hi = t;
        while (lo < hi) {
            int mid = (int)(((unsigned)lo + (unsigned)hi) >> 1);
            if (touched[mid] < c)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo >= t || touched[lo] != c) {
            atomicExch(bad, 1);
            lo = 0;
        }
        colc[i] = lo;
        val[i] = (double)valf[i];
    }
}

__global__ void k_gather(const float *theta, const uint32_t *touched, size_t t, double *theta_c)
{
    GRID_STRIDE(j, t) theta_c[j] = (double)theta[touched[j]];
}

/* The formulas of trainer/loss/loss.c, shared through fsgd/loss_formulas.h. */
__device__ static double d_label(int kind, double y) { return fsgd_loss_formula_label(kind, y); }
__device__ static double d_loss_value(int kind, double m, double y) { return fsgd_loss_formula_value(kind, m, y); }
__device__ static double d_loss_deriv(int kind, double m, double y) { return fsgd_loss_formula_deriv(kind, m, y); }

/* r_i = loss'(m_i, y_i); part[block] = Σ loss over the block's rows, summed
 * in a fixed tree order so the total is the same on every run. */
__global__ void k_loss(int kind, size_t n, const double *m, const double *label, double *r, double *part)
{
    __shared__ double sh[THREADS];
    double acc = 0;
    GRID_STRIDE(i, n)
    {
        double y = d_label(kind, label[i]);
        /* a classification label's magnitude is the row's weight (fsgd/rowlabel.h), as on the cpu */
        double w = kind == FSGD_LOSS_SQUARED || label[i] == 0 ? 1.0 : fabs(label[i]);
        acc += w * d_loss_value(kind, m[i], y);
        r[i] = w * d_loss_deriv(kind, m[i], y);
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = sh[0];
}

/* One block: out = Σ part[0..np), fixed order. */
__global__ void k_sum(const double *part, unsigned np, double *out)
{
    __shared__ double sh[THREADS];
    double acc = 0;
    for (unsigned i = threadIdx.x; i < np; i += THREADS)
        acc += part[i];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *out = sh[0];
}

/* out_j = g_j·scale + λ·θ_k, k = touched[j] (the CPU backend's expression). */
__global__ void k_output(const double *g, const float *theta, const uint32_t *touched, size_t t, double scale,
                         double l2, float *out)
{
    GRID_STRIDE(j, t) out[j] = (float)(g[j] * scale + l2 * (double)theta[touched[j]]);
}

__global__ void k_scatter(const uint32_t *keys, const float *vals, size_t n, float *theta)
{
    GRID_STRIDE(i, n) theta[keys[i]] = vals[i];
}

/* ------------------------------------------------------------------ state */

typedef struct dbuf {
    void *p;
    size_t cap;
} dbuf_t;

/* A batch on the device. All arrays live in one allocation (blob). */
typedef struct entry {
    int64_t id; /* -1: the scratch entry for uncached batches */
    uint64_t last_used;
    size_t n_rows, nnz, n_touched;
    uint64_t max_col;
    void *blob;
    size_t blob_bytes;
    int *rowptr;       /* n_rows + 1 */
    int *colc;         /* nnz, compact column */
    double *val;       /* nnz */
    double *label;     /* n_rows */
    uint32_t *touched; /* n_touched, sorted unique columns */
    int *trowptr;      /* n_touched + 1, Xcᵀ */
    int *tcol;         /* nnz */
    double *tval;      /* nnz */
    uint32_t *h_touched;
    size_t h_cap;
    cusparseSpMatDescr_t X, Xt;
} entry_t;

typedef struct cuda_state {
    uint64_t dim;
    int device;
    char desc[192];
    float *theta;
    cudaStream_t stream;
    cudaMemPool_t pool; /* NULL: plain cudaMalloc/cudaFree (see d_malloc) */
    cusparseHandle_t sp;
    entry_t scratch;
    entry_t **cache;
    size_t n_cache, cap_cache;
    size_t cache_bytes, cache_budget;
    uint64_t clock;
    entry_t *pinned; /* in use by the current call: never evicted */
    /* per-call work buffers, grown as needed */
    dbuf_t theta_c, m, r, g, outv, part, loss, spmv_ws;
    /* upload work buffers */
    dbuf_t col_raw, sorted, uniq, valf, nsel, cub_ws, conv_ws;
    /* apply staging */
    dbuf_t akeys, avals;
    /* FastSGD device encoder: summary + level table + partials, per-value
     * arrays, cub scan workspace, key words; host gradient for other codecs */
    dbuf_t enc_small, enc_arr, enc_ws, enc_words;
    fsgd_sparse_t host_grad;
    int32_t *h_rowptr;
    size_t h_rowptr_cap;
} cuda_state_t;

static size_t align_up(size_t x) { return (x + 255) & ~(size_t)255; }

/* Device memory comes from the instance's own stream-ordered pool: cudaFree
 * synchronises the whole device, so threads sharing one waited on each
 * other's frees (4 threads: half the gradient time with the pool, CUDA.md),
 * and an evicted batch's memory is reused without a cudaMalloc. Everything
 * runs on s->stream, so memory freed there is reused in order, unsynced. The
 * pool keeps up to the cache budget of what is freed (its release threshold)
 * and hands the rest back to the device at synchronisations. Without pool
 * support, or with FSGD_CUDA_POOL=0, plain cudaMalloc/cudaFree. */
static cudaError_t d_malloc(cuda_state_t *s, void **p, size_t bytes)
{
    if (s->pool)
        return cudaMallocFromPoolAsync(p, bytes, s->pool, s->stream);
    return cudaMalloc(p, bytes);
}

static cudaError_t d_free(cuda_state_t *s, void *p)
{
    if (!p)
        return cudaSuccess;
    return s->pool ? cudaFreeAsync(p, s->stream) : cudaFree(p);
}

static void entry_release(cuda_state_t *s, entry_t *e)
{
    if (e->X)
        cusparseDestroySpMat(e->X);
    if (e->Xt)
        cusparseDestroySpMat(e->Xt);
    e->X = e->Xt = NULL;
    d_free(s, e->blob);
    e->blob = NULL;
    e->blob_bytes = 0;
    free(e->h_touched);
    e->h_touched = NULL;
    e->h_cap = 0;
}

static void cache_drop(cuda_state_t *s, size_t i)
{
    entry_t *e = s->cache[i];
    s->cache_bytes -= e->blob_bytes;
    entry_release(s, e);
    free(e);
    s->cache[i] = s->cache[--s->n_cache];
}

/* Drops every cached batch except the pinned one. */
static void cache_drop_unpinned(cuda_state_t *s)
{
    for (size_t i = s->n_cache; i-- > 0;)
        if (s->cache[i] != s->pinned)
            cache_drop(s, i);
}

/* Evicts least recently used batches until need more bytes fit the budget. */
static void cache_make_room(cuda_state_t *s, size_t need)
{
    while (s->cache_bytes + need > s->cache_budget) {
        size_t lru = SIZE_MAX;
        for (size_t i = 0; i < s->n_cache; i++)
            if (s->cache[i] != s->pinned && (lru == SIZE_MAX || s->cache[i]->last_used < s->cache[lru]->last_used))
                lru = i;
        if (lru == SIZE_MAX)
            return;
        cache_drop(s, lru);
    }
}

/* d_malloc that frees cached batches and retries once when memory is short. */
static int dev_alloc(cuda_state_t *s, void **p, size_t bytes, char *err, size_t errsz)
{
    cudaError_t e = d_malloc(s, p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation && s->n_cache) {
        (void)cudaGetLastError();
        cache_drop_unpinned(s);
        e = d_malloc(s, p, bytes ? bytes : 1);
    }
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        int code = e == cudaErrorMemoryAllocation ? FSGD_E_NOMEM : FSGD_E_DEVICE;
        return fsgd_err_fmt(err, errsz, code, "cuda: cudaMalloc of %zu bytes failed: %s (%s)", bytes,
                            cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return FSGD_E_OK;
}

static int grow(cuda_state_t *s, dbuf_t *b, size_t bytes, char *err, size_t errsz)
{
    if (b->p && b->cap >= bytes)
        return FSGD_E_OK;
    if (b->p) {
        if (!s->pool) /* queued work may still use it (a pool frees in stream order) */
            CU_TRY(cudaStreamSynchronize(s->stream));
        CU_TRY(d_free(s, b->p));
        b->p = NULL;
        b->cap = 0;
    }
    size_t n = bytes + bytes / 2 + 256;
    FWD(dev_alloc(s, &b->p, n, err, errsz));
    b->cap = n;
    return FSGD_E_OK;
}

static void dbuf_free(cuda_state_t *s, dbuf_t *b)
{
    d_free(s, b->p);
    b->p = NULL;
    b->cap = 0;
}

static size_t entry_bytes(size_t n, size_t nnz, size_t t)
{
    return align_up((n + 1) * sizeof(int)) + align_up(nnz * sizeof(int)) + align_up(nnz * sizeof(double)) +
           align_up(n * sizeof(double)) + align_up(t * sizeof(uint32_t)) + align_up((t + 1) * sizeof(int)) +
           align_up(nnz * sizeof(int)) + align_up(nnz * sizeof(double));
}

static void entry_carve(entry_t *e)
{
    char *p = (char *)e->blob;
    size_t n = e->n_rows, nnz = e->nnz, t = e->n_touched;
    e->rowptr = (int *)p;
    p += align_up((n + 1) * sizeof(int));
    e->colc = (int *)p;
    p += align_up(nnz * sizeof(int));
    e->val = (double *)p;
    p += align_up(nnz * sizeof(double));
    e->label = (double *)p;
    p += align_up(n * sizeof(double));
    e->touched = (uint32_t *)p;
    p += align_up(t * sizeof(uint32_t));
    e->trowptr = (int *)p;
    p += align_up((t + 1) * sizeof(int));
    e->tcol = (int *)p;
    p += align_up(nnz * sizeof(int));
    e->tval = (double *)p;
}

/* Steps 3-4 of upload: everything after the touched keys are known. */
static int fill(cuda_state_t *s, const fsgd_csr_t *X, entry_t *e, const uint32_t *uniq, const uint32_t *col_raw,
                char *err, size_t errsz)
{
    size_t n = e->n_rows, nnz = e->nnz, t = e->n_touched;
    cudaStream_t st = s->stream;
    /* 3. Keys, rows, labels, compact columns. */
    if (e->h_cap < t) {
        uint32_t *h = (uint32_t *)realloc(e->h_touched, t * sizeof *h);
        if (!h)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cuda: out of host memory for %zu keys", t);
        e->h_touched = h;
        e->h_cap = t;
    }
    if (s->h_rowptr_cap < n + 1) {
        int32_t *h = (int32_t *)realloc(s->h_rowptr, (n + 1) * sizeof *h);
        if (!h)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cuda: out of host memory for %zu row offsets", n);
        s->h_rowptr = h;
        s->h_rowptr_cap = n + 1;
    }
    for (size_t r = 0; r <= n; r++)
        s->h_rowptr[r] = (int32_t)X->row_ptr[r];
    CU_TRY(cudaMemcpyAsync(e->touched, uniq, t * sizeof(uint32_t), cudaMemcpyDeviceToDevice, st));
    CU_TRY(cudaMemcpyAsync(e->rowptr, s->h_rowptr, (n + 1) * sizeof(int), cudaMemcpyHostToDevice, st));
    CU_TRY(cudaMemcpyAsync(e->label, X->label, n * sizeof(double), cudaMemcpyHostToDevice, st));
    int *bad = (int *)s->nsel.p + 1;
    CU_TRY(cudaMemsetAsync(bad, 0, sizeof(int), st));
    k_compact<<<blocks_for(nnz, MAX_BLOCKS), THREADS, 0, st>>>(col_raw, (const float *)s->valf.p, nnz, e->touched,
                                                               (int)t, e->colc, e->val, bad);
    LAUNCH_TRY("k_compact");

    /* 4. Xcᵀ, so both products run NON_TRANSPOSE (deterministic). */
    size_t conv_bytes = 0;
    SP_TRY(cusparseCsr2cscEx2_bufferSize(s->sp, (int)n, (int)t, (int)nnz, e->val, e->rowptr, e->colc, e->tval,
                                         e->trowptr, e->tcol, CUDA_R_64F, CUSPARSE_ACTION_NUMERIC,
                                         CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1, &conv_bytes));
    FWD(grow(s, &s->conv_ws, conv_bytes, err, errsz));
    SP_TRY(cusparseCsr2cscEx2(s->sp, (int)n, (int)t, (int)nnz, e->val, e->rowptr, e->colc, e->tval, e->trowptr,
                              e->tcol, CUDA_R_64F, CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO,
                              CUSPARSE_CSR2CSC_ALG1, s->conv_ws.p));
    SP_TRY(cusparseCreateCsr(&e->X, (int64_t)n, (int64_t)t, (int64_t)nnz, e->rowptr, e->colc, e->val,
                             CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    SP_TRY(cusparseCreateCsr(&e->Xt, (int64_t)t, (int64_t)n, (int64_t)nnz, e->trowptr, e->tcol, e->tval,
                             CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    int h_bad = 0;
    CU_TRY(cudaMemcpyAsync(&h_bad, bad, sizeof(int), cudaMemcpyDeviceToHost, st));
    CU_TRY(cudaMemcpyAsync(e->h_touched, e->touched, t * sizeof(uint32_t), cudaMemcpyDeviceToHost, st));
    CU_TRY(cudaStreamSynchronize(st));
    if (h_bad)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "cuda: batch has a column >= its max_col %llu (inconsistent CSR)",
                            (unsigned long long)X->max_col);
    return FSGD_E_OK;
}

/* Uploads X (nnz > 0) into an entry: cached under id when id >= 0 and it
 * fits the budget, the scratch entry otherwise. */
static int upload(cuda_state_t *s, const fsgd_csr_t *X, int64_t id, entry_t **out, char *err, size_t errsz)
{
    size_t n = X->n_rows, nnz = X->nnz;
    if (X->max_col == 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "cuda: batch has %zu nonzeros but max_col 0 (inconsistent CSR)",
                            nnz);
    if (n >= (size_t)INT_MAX || nnz > (size_t)INT_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                            "cuda: batch of %zu rows, %zu nonzeros exceeds the 32-bit indices of the device "
                            "batch (split it)",
                            n, nnz);
    cudaStream_t st = s->stream;

    /* 1. touched = sort + unique of the columns. */
    FWD(grow(s, &s->col_raw, nnz * sizeof(uint32_t), err, errsz));
    FWD(grow(s, &s->sorted, nnz * sizeof(uint32_t), err, errsz));
    FWD(grow(s, &s->uniq, nnz * sizeof(uint32_t), err, errsz));
    FWD(grow(s, &s->valf, nnz * sizeof(float), err, errsz));
    FWD(grow(s, &s->nsel, 2 * sizeof(int), err, errsz));
    uint32_t *col_raw = (uint32_t *)s->col_raw.p, *sorted = (uint32_t *)s->sorted.p, *uniq = (uint32_t *)s->uniq.p;
    CU_TRY(cudaMemcpyAsync(col_raw, X->col, nnz * sizeof(uint32_t), cudaMemcpyHostToDevice, st));
    CU_TRY(cudaMemcpyAsync(s->valf.p, X->val, nnz * sizeof(float), cudaMemcpyHostToDevice, st));
    int end_bit = 1;
    while (end_bit < 32 && (X->max_col - 1) >> end_bit)
        end_bit++;
    size_t sort_bytes = 0, uniq_bytes = 0;
    CU_TRY(cub::DeviceRadixSort::SortKeys(NULL, sort_bytes, col_raw, sorted, (int)nnz, 0, end_bit, st));
    CU_TRY(cub::DeviceSelect::Unique(NULL, uniq_bytes, sorted, uniq, (int *)s->nsel.p, (int)nnz, st));
    FWD(grow(s, &s->cub_ws, sort_bytes > uniq_bytes ? sort_bytes : uniq_bytes, err, errsz));
    sort_bytes = uniq_bytes = s->cub_ws.cap;
    CU_TRY(cub::DeviceRadixSort::SortKeys(s->cub_ws.p, sort_bytes, col_raw, sorted, (int)nnz, 0, end_bit, st));
    CU_TRY(cub::DeviceSelect::Unique(s->cub_ws.p, uniq_bytes, sorted, uniq, (int *)s->nsel.p, (int)nnz, st));
    int t_int = 0;
    CU_TRY(cudaMemcpyAsync(&t_int, s->nsel.p, sizeof(int), cudaMemcpyDeviceToHost, st));
    CU_TRY(cudaStreamSynchronize(st));
    if (t_int <= 0 || (size_t)t_int > nnz)
        return fsgd_err_fmt(err, errsz, FSGD_E_DEVICE, "cuda: unique of %zu columns gave %d keys", nnz, t_int);
    size_t t = (size_t)t_int;

    /* 2. Where the batch lives: a new cache entry or the scratch entry. */
    size_t bytes = entry_bytes(n, nnz, t);
    entry_t *e = NULL;
    if (id >= 0 && bytes <= s->cache_budget) {
        cache_make_room(s, bytes);
        if (s->n_cache == s->cap_cache) {
            size_t nc = s->cap_cache ? 2 * s->cap_cache : 64;
            entry_t **c = (entry_t **)realloc(s->cache, nc * sizeof *c);
            if (!c)
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cuda: out of host memory for the batch cache");
            s->cache = c;
            s->cap_cache = nc;
        }
        e = (entry_t *)calloc(1, sizeof *e);
        if (!e)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cuda: out of host memory for the batch cache");
        void *blob = NULL;
        if (dev_alloc(s, &blob, bytes, err, errsz) < 0) {
            free(e);
            e = NULL; /* does not fit after all: fall back to the scratch entry */
        } else {
            e->blob = blob;
            e->blob_bytes = bytes;
            s->cache[s->n_cache++] = e;
            s->cache_bytes += bytes;
        }
    }
    if (!e) {
        e = &s->scratch;
        if (e->X)
            cusparseDestroySpMat(e->X);
        if (e->Xt)
            cusparseDestroySpMat(e->Xt);
        e->X = e->Xt = NULL;
        if (e->blob_bytes < bytes) {
            if (e->blob) {
                CU_TRY(d_free(s, e->blob));
                e->blob = NULL;
                e->blob_bytes = 0;
            }
            size_t cap = bytes + bytes / 4;
            FWD(dev_alloc(s, &e->blob, cap, err, errsz));
            e->blob_bytes = cap;
        }
        id = -1;
    }
    e->id = -2; /* not findable until complete */
    e->n_rows = n;
    e->nnz = nnz;
    e->n_touched = t;
    e->max_col = X->max_col;
    entry_carve(e);
    if (e != &s->scratch)
        s->pinned = e;
    int rc = fill(s, X, e, uniq, col_raw, err, errsz);
    if (rc < 0) {
        for (size_t i = 0; i < s->n_cache; i++)
            if (s->cache[i] == e) {
                s->pinned = NULL;
                cache_drop(s, i);
                break;
            }
        return rc;
    }
    e->id = id;
    *out = e;
    return FSGD_E_OK;
}

static entry_t *cache_find(cuda_state_t *s, const fsgd_csr_t *X, int64_t id)
{
    for (size_t i = 0; i < s->n_cache; i++) {
        entry_t *e = s->cache[i];
        if (e->id != id)
            continue;
        /* Same id, different shape: the caller reused an id; forget the old batch. */
        if (e->n_rows != X->n_rows || e->nnz != X->nnz || e->max_col != X->max_col) {
            cache_drop(s, i);
            return NULL;
        }
        return e;
    }
    return NULL;
}

/* ------------------------------------------------------------ the vtable */

static int cuda_available(char *err, size_t errsz)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fsgd_err_fmt(err, errsz, FSGD_E_DEVICE, "cuda: no device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
        return 0;
    }
    if (n <= 0) {
        fsgd_err_fmt(err, errsz, FSGD_E_DEVICE, "cuda: no device (cudaGetDeviceCount: 0 devices)");
        return 0;
    }
    return 1;
}

static void cuda_destroy(void *p)
{
    cuda_state_t *s = (cuda_state_t *)p;
    if (!s)
        return;
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    s->pinned = NULL;
    cache_drop_unpinned(s);
    free(s->cache);
    entry_release(s, &s->scratch);
    dbuf_t *bufs[] = {&s->theta_c, &s->m,   &s->r,    &s->g,      &s->outv,   &s->part,    &s->loss,
                      &s->spmv_ws, &s->col_raw, &s->sorted, &s->uniq, &s->valf, &s->nsel, &s->cub_ws,
                      &s->conv_ws, &s->akeys, &s->avals, &s->enc_small, &s->enc_arr, &s->enc_ws,
                      &s->enc_words};
    fsgd_sparse_free(&s->host_grad);
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        dbuf_free(s, bufs[i]);
    d_free(s, s->theta);
    if (s->sp)
        cusparseDestroy(s->sp);
    if (s->stream) {
        cudaStreamSynchronize(s->stream); /* the frees above, before the pool goes */
        cudaStreamDestroy(s->stream);
    }
    if (s->pool)
        cudaMemPoolDestroy(s->pool);
    free(s->h_rowptr);
    free(s);
}

static int create_in(cuda_state_t *s, uint64_t dim, const float *host_theta, char *err, size_t errsz)
{
    if (dim > (uint64_t)UINT32_MAX + 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "cuda: model dim %llu exceeds 2^32 keys",
                            (unsigned long long)dim);
    s->dim = dim;
    CU_TRY(cudaGetDevice(&s->device));
    cudaDeviceProp prop;
    CU_TRY(cudaGetDeviceProperties(&prop, s->device));
    snprintf(s->desc, sizeof s->desc, "cuda: %.120s (sm_%d%d, %.1f GiB, device %d)", prop.name, prop.major, prop.minor,
             (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024), s->device);
    CU_TRY(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    int pools = 0;
    const char *pool_env = getenv("FSGD_CUDA_POOL");
    CU_TRY(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, s->device));
    if (pools && !(pool_env && !strcmp(pool_env, "0"))) {
        cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = s->device;
        CU_TRY(cudaMemPoolCreate(&s->pool, &props));
    }
    SP_TRY(cusparseCreate(&s->sp));
    SP_TRY(cusparseSetStream(s->sp, s->stream));
    FWD(dev_alloc(s, (void **)&s->theta, (size_t)dim * sizeof(float), err, errsz));
    /* On s->stream: memory from the pool is valid there, in stream order. */
    if (host_theta && dim)
        CU_TRY(cudaMemcpyAsync(s->theta, host_theta, (size_t)dim * sizeof(float), cudaMemcpyHostToDevice,
                               s->stream));
    else if (dim)
        CU_TRY(cudaMemsetAsync(s->theta, 0, (size_t)dim * sizeof(float), s->stream));
    CU_TRY(cudaStreamSynchronize(s->stream));
    /* Cache budget: FSGD_CUDA_CACHE_MB, or half the memory free now. */
    const char *env = getenv("FSGD_CUDA_CACHE_MB");
    if (env && *env) {
        char *end;
        double mb = strtod(env, &end);
        if (*end || !(mb >= 0 && mb < 1e9))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "cuda: FSGD_CUDA_CACHE_MB='%s' is not a number of MiB", env);
        s->cache_budget = (size_t)(mb * 1048576.0);
    } else {
        size_t free_b = 0, total_b = 0;
        CU_TRY(cudaMemGetInfo(&free_b, &total_b));
        s->cache_budget = free_b / 2;
    }
    if (s->pool) {
        uint64_t keep = s->cache_budget;
        CU_TRY(cudaMemPoolSetAttribute(s->pool, cudaMemPoolAttrReleaseThreshold, &keep));
    }
    s->scratch.id = -1;
    return FSGD_E_OK;
}

static void *cuda_create(uint64_t dim, const float *host_theta, char *err, size_t errsz)
{
    cuda_state_t *s = (cuda_state_t *)calloc(1, sizeof *s);
    if (!s) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cuda: out of host memory");
        return NULL;
    }
    if (create_in(s, dim, host_theta, err, errsz) < 0) {
        cuda_destroy(s);
        return NULL;
    }
    return s;
}

static const char *cuda_device(void *p) { return ((cuda_state_t *)p)->desc; }

/* Checks the request; for a batch without nonzeros (no key touched, every
 * margin 0) computes its loss on the host and sets *empty. */
static int grad_check(cuda_state_t *s, const fsgd_grad_request_t *req, int *empty, double *loss_out, char *err,
                      size_t errsz)
{
    const fsgd_csr_t *X = req->batch;
    int kind = (int)req->loss;
    *empty = 0;
    if (kind != FSGD_LOSS_LOGISTIC && kind != FSGD_LOSS_SQUARED && kind != FSGD_LOSS_HINGE)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "cuda: unknown loss %d", kind);
    if (X->max_col > s->dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "batch has column %llu >= model dim %llu",
                            (unsigned long long)(X->max_col - 1), (unsigned long long)s->dim);
    if (X->nnz == 0) {
        double loss = 0;
        for (size_t r = 0; r < X->n_rows; r++)
            loss += (req->loss == FSGD_LOSS_SQUARED || X->label[r] == 0 ? 1.0 : fabs(X->label[r])) *
                    fsgd_loss_value(req->loss, 0, fsgd_loss_label(req->loss, X->label[r]));
        *loss_out = loss;
        *empty = 1;
    }
    return FSGD_E_OK;
}

/* The gradient on the device, up to its float values: afterwards s->outv
 * holds the t gradient values (float) for the keys e->touched (device) /
 * e->h_touched (host), and s->loss the batch's loss (device double); both
 * still in flight on s->stream. Needs X->nnz > 0 (grad_check). */
static int grad_run(cuda_state_t *s, const fsgd_grad_request_t *req, entry_t **e_out, char *err, size_t errsz)
{
    const fsgd_csr_t *X = req->batch;
    int kind = (int)req->loss;
    s->pinned = NULL;
    entry_t *e = req->batch_id >= 0 ? cache_find(s, X, req->batch_id) : NULL;
    if (!e)
        FWD(upload(s, X, req->batch_id, &e, err, errsz));
    /* Work buffers below may evict cached batches to find memory, never this one. */
    s->pinned = e == &s->scratch ? NULL : e;
    e->last_used = ++s->clock;
    size_t n = e->n_rows, t = e->n_touched;
    cudaStream_t st = s->stream;
    unsigned nb = blocks_for(n, LOSS_BLOCKS);
    FWD(grow(s, &s->theta_c, t * sizeof(double), err, errsz));
    FWD(grow(s, &s->g, t * sizeof(double), err, errsz));
    FWD(grow(s, &s->outv, t * sizeof(float), err, errsz));
    FWD(grow(s, &s->m, n * sizeof(double), err, errsz));
    FWD(grow(s, &s->r, n * sizeof(double), err, errsz));
    FWD(grow(s, &s->part, nb * sizeof(double), err, errsz));
    FWD(grow(s, &s->loss, sizeof(double), err, errsz));
    int rc = 0;

    double *theta_c = (double *)s->theta_c.p, *m = (double *)s->m.p, *r = (double *)s->r.p, *g = (double *)s->g.p;
    k_gather<<<blocks_for(t, MAX_BLOCKS), THREADS, 0, st>>>(s->theta, e->touched, t, theta_c);
    LAUNCH_TRY("k_gather");
    CU_TRY(cudaMemsetAsync(m, 0, n * sizeof(double), st));
    CU_TRY(cudaMemsetAsync(g, 0, t * sizeof(double), st));

    cusparseDnVecDescr_t vt = NULL, vm = NULL, vr = NULL, vg = NULL;
    const double one = 1.0, zero = 0.0;
    size_t ws1 = 0, ws2 = 0;
    cusparseStatus_t ss;
    int line = 0;
    const char *call = NULL;
#define SP_STEP(expr)                     \
    if (ss == CUSPARSE_STATUS_SUCCESS) {  \
        ss = (expr);                      \
        call = #expr;                     \
        line = __LINE__;                  \
    }
    ss = CUSPARSE_STATUS_SUCCESS;
    SP_STEP(cusparseCreateDnVec(&vt, (int64_t)t, theta_c, CUDA_R_64F));
    SP_STEP(cusparseCreateDnVec(&vm, (int64_t)n, m, CUDA_R_64F));
    SP_STEP(cusparseCreateDnVec(&vr, (int64_t)n, r, CUDA_R_64F));
    SP_STEP(cusparseCreateDnVec(&vg, (int64_t)t, g, CUDA_R_64F));
    SP_STEP(cusparseSpMV_bufferSize(s->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, e->X, vt, &zero, vm, CUDA_R_64F,
                                    CUSPARSE_SPMV_CSR_ALG2, &ws1));
    SP_STEP(cusparseSpMV_bufferSize(s->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, e->Xt, vr, &zero, vg,
                                    CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG2, &ws2));
    if (ss == CUSPARSE_STATUS_SUCCESS)
        rc = grow(s, &s->spmv_ws, ws1 > ws2 ? ws1 : ws2, err, errsz);
    if (rc == 0) {
        /* m = Xc θc */
        SP_STEP(cusparseSpMV(s->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, e->X, vt, &zero, vm, CUDA_R_64F,
                             CUSPARSE_SPMV_CSR_ALG2, s->spmv_ws.p));
        if (ss == CUSPARSE_STATUS_SUCCESS) {
            k_loss<<<nb, THREADS, 0, st>>>(kind, n, m, e->label, r, (double *)s->part.p);
            k_sum<<<1, THREADS, 0, st>>>((const double *)s->part.p, nb, (double *)s->loss.p);
            cudaError_t le = cudaGetLastError();
            if (le != cudaSuccess)
                rc = cuda_fail(err, errsz, le, "launch k_loss/k_sum", __LINE__);
        }
        /* gc = Xcᵀ r */
        if (rc == 0)
            SP_STEP(cusparseSpMV(s->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, e->Xt, vr, &zero, vg, CUDA_R_64F,
                                 CUSPARSE_SPMV_CSR_ALG2, s->spmv_ws.p));
    }
#undef SP_STEP
    if (vt)
        cusparseDestroyDnVec(vt);
    if (vm)
        cusparseDestroyDnVec(vm);
    if (vr)
        cusparseDestroyDnVec(vr);
    if (vg)
        cusparseDestroyDnVec(vg);
    if (ss != CUSPARSE_STATUS_SUCCESS)
        return sparse_fail(err, errsz, ss, call, line);
    if (rc < 0)
        return rc;

    k_output<<<blocks_for(t, MAX_BLOCKS), THREADS, 0, st>>>(g, s->theta, e->touched, t, req->scale, req->l2,
                                                            (float *)s->outv.p);
    LAUNCH_TRY("k_output");
    *e_out = e;
    return FSGD_E_OK;
}

static int cuda_gradient(void *p, const fsgd_grad_request_t *req, fsgd_sparse_t *out, double *loss_sum, char *err,
                         size_t errsz)
{
    cuda_state_t *s = (cuda_state_t *)p;
    int empty = 0;
    double loss = 0;
    FWD(grad_check(s, req, &empty, &loss, err, errsz));
    if (empty) {
        out->n = 0;
        *loss_sum += loss;
        return FSGD_E_OK;
    }
    entry_t *e = NULL;
    FWD(grad_run(s, req, &e, err, errsz));
    size_t t = e->n_touched;
    cudaStream_t st = s->stream;
    int rc = fsgd_sparse_reserve(out, t);
    if (rc < 0) {
        (void)cudaStreamSynchronize(st);
        return fsgd_err_fmt(err, errsz, rc, "cuda: out of host memory for %zu gradient entries", t);
    }
    CU_TRY(cudaMemcpyAsync(out->vals, s->outv.p, t * sizeof(float), cudaMemcpyDeviceToHost, st));
    CU_TRY(cudaMemcpyAsync(&loss, s->loss.p, sizeof(double), cudaMemcpyDeviceToHost, st));
    CU_TRY(cudaStreamSynchronize(st));
    memcpy(out->keys, e->h_touched, t * sizeof(uint32_t));
    out->n = t;
    *loss_sum += loss;
    return FSGD_E_OK;
}

static int cuda_apply(void *p, const uint32_t *keys, const float *vals, size_t n, char *err, size_t errsz)
{
    cuda_state_t *s = (cuda_state_t *)p;
    if (n == 0)
        return FSGD_E_OK;
    for (size_t i = 0; i < n; i++)
        if (keys[i] >= s->dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "cuda: apply: key %u at %zu >= model dim %llu", keys[i], i,
                                (unsigned long long)s->dim);
    FWD(grow(s, &s->akeys, n * sizeof(uint32_t), err, errsz));
    FWD(grow(s, &s->avals, n * sizeof(float), err, errsz));
    CU_TRY(cudaMemcpyAsync(s->akeys.p, keys, n * sizeof(uint32_t), cudaMemcpyHostToDevice, s->stream));
    CU_TRY(cudaMemcpyAsync(s->avals.p, vals, n * sizeof(float), cudaMemcpyHostToDevice, s->stream));
    k_scatter<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, s->stream>>>((const uint32_t *)s->akeys.p,
                                                                    (const float *)s->avals.p, n, s->theta);
    LAUNCH_TRY("k_scatter");
    CU_TRY(cudaStreamSynchronize(s->stream));
    return FSGD_E_OK;
}

/* ---------------------------------------------- FastSGD on the device
 *
 * fsgd_backend_gradient_encoded for codec fastsgd (ef=0, paper or optimal
 * lengths): the gradient stays on the device and only the message comes
 * back. The steps, and why each gives fs_encode's (codec/fastsgd.c) bytes,
 * are in CUDA.md; the per-element code is fastsgd_device_math.h, shared with
 * fastsgd_device.c, whose emulation of these kernels the CPU unit test
 * test_cuda_encoder_host compares with fsgd_codec_encode byte for byte. */

/* Layout of enc_small: the summary, the level table, the block partials. */
typedef struct fsd_small {
    fsd_summary_t sum;
    uint32_t nonfinite_not; /* ~(first non-finite index), 0: none (atomicMax) */
    uint32_t pad;
    double part[FSD_SUM_BLOCKS];
    float pmax[FSD_SUM_BLOCKS];
    float f[256];
} fsd_small_t;

/* The key tables, passed by value. */
typedef struct fsd_keytab {
    uint8_t lens[32];
    uint8_t flag[33];
    int l;
} fsd_keytab_t;

/* Σ|v| per block over the fixed grid (FSD_SUM_BLOCKS x FSD_THREADS, each
 * thread a grid-stride sequential sum, then a tree), largest |v|, first
 * non-finite index. */
__global__ void __launch_bounds__(FSD_THREADS) k_fsd_values(const float *v, size_t n, fsd_small_t *sm)
{
    __shared__ double sh[FSD_THREADS];
    __shared__ float shm[FSD_THREADS];
    unsigned t = threadIdx.x;
    double acc = 0;
    float mx = 0;
    for (size_t i = (size_t)blockIdx.x * FSD_THREADS + t; i < n; i += FSD_GRID) {
        float a = fabsf(v[i]);
        acc += (double)a;
        mx = a > mx ? a : mx;
        if (fsd_nonfinite(v[i]))
            atomicMax(&sm->nonfinite_not, ~(uint32_t)i);
    }
    sh[t] = acc;
    shm[t] = mx;
    __syncthreads();
    for (unsigned w = FSD_THREADS / 2; w > 0; w >>= 1) {
        if (t < w) {
            sh[t] += sh[t + w];
            shm[t] = shm[t + w] > shm[t] ? shm[t + w] : shm[t];
        }
        __syncthreads();
    }
    if (t == 0) {
        sm->part[blockIdx.x] = sh[0];
        sm->pmax[blockIdx.x] = shm[0];
    }
}

/* One block: the partials' tree → D and the largest |v|; S decided from D
 * (fsd_sum_decide) or, when D cannot decide it, by the CPU's four lanes on
 * threads 0-3; then the level table and the kept levels (thread 0). */
__global__ void __launch_bounds__(FSD_THREADS) k_fsd_setup(const float *v, size_t n, double b, int tau, int force_lanes,
                                                        fsd_small_t *sm)
{
    __shared__ double sh[FSD_THREADS];
    __shared__ float shm[FSD_THREADS];
    __shared__ double lanes[4];
    __shared__ int amb;
    unsigned t = threadIdx.x;
    double acc = 0;
    float mx = 0;
    for (unsigned i = t; i < FSD_SUM_BLOCKS; i += FSD_THREADS) {
        acc += sm->part[i];
        mx = sm->pmax[i] > mx ? sm->pmax[i] : mx;
    }
    sh[t] = acc;
    shm[t] = mx;
    __syncthreads();
    for (unsigned w = FSD_THREADS / 2; w > 0; w >>= 1) {
        if (t < w) {
            sh[t] += sh[t + w];
            shm[t] = shm[t + w] > shm[t] ? shm[t + w] : shm[t];
        }
        __syncthreads();
    }
    fsd_summary_t *s = &sm->sum;
    if (t == 0) {
        s->dsum = sh[0];
        s->mx = shm[0];
        s->nonfinite = sm->nonfinite_not ? ~sm->nonfinite_not : UINT32_MAX;
        float S = 0;
        amb = s->nonfinite == UINT32_MAX && (force_lanes || !fsd_sum_decide(sh[0], n, &S));
        s->S = S;
        s->ambiguous = amb;
    }
    __syncthreads();
    if (amb && t < 4)
        lanes[t] = fsd_lane_sum(v, n, (int)t);
    __syncthreads();
    if (t == 0) {
        if (amb)
            s->S = fsd_sum_to_float(fsd_lanes_combine(lanes[0], lanes[1], lanes[2], lanes[3]));
        s->lbase = 0;
        s->lhi = -1;
        if (s->nonfinite == UINT32_MAX)
            fsd_kept_levels(s->S, s->mx, b, tau, sm->f, &s->lbase, &s->lhi);
    }
}

__global__ void k_fsd_keep(const float *v, size_t n, const fsd_small_t *sm, uint32_t *keep)
{
    int lbase = sm->sum.lbase, lhi = sm->sum.lhi;
    GRID_STRIDE(i, n) keep[i] = (uint32_t)fsd_keep(fabsf(v[i]), sm->f, lbase, lhi);
}

/* Compaction by the exclusive scan pos: kept keys and value bytes. */
__global__ void __launch_bounds__(FSD_THREADS) k_fsd_emit(const float *v, const uint32_t *keys, size_t n,
                                                       const uint32_t *keep, const uint32_t *pos, fsd_small_t *sm,
                                                       uint32_t *ckeys, uint8_t *codes)
{
    __shared__ float f[256];
    for (unsigned i = threadIdx.x; i < 256; i += blockDim.x)
        f[i] = sm->f[i];
    __syncthreads();
    int lbase = sm->sum.lbase, lhi = sm->sum.lhi;
    GRID_STRIDE(i, n)
    {
        if (keep[i]) {
            float a = fabsf(v[i]);
            ckeys[pos[i]] = keys[i];
            codes[pos[i]] = fsd_value_code(v[i], fsd_level_of(a, f, lbase, lhi), lbase);
        }
        if (i == n - 1)
            sm->sum.count = pos[i] + keep[i];
    }
}

/* Key deltas (the first key is itself), their OR and bit-length histogram. */
__global__ void __launch_bounds__(FSD_THREADS) k_fsd_delta(const uint32_t *ckeys, fsd_small_t *sm, uint32_t *delta)
{
    __shared__ unsigned int hist[33];
    __shared__ unsigned int orall;
    for (unsigned i = threadIdx.x; i < 33; i += blockDim.x)
        hist[i] = 0;
    if (threadIdx.x == 0)
        orall = 0;
    __syncthreads();
    size_t d = sm->sum.count;
    uint32_t o = 0;
    GRID_STRIDE(j, d)
    {
        uint32_t dk = ckeys[j] - (j ? ckeys[j - 1] : 0);
        delta[j] = dk;
        o |= dk;
        atomicAdd(&hist[fsd_bitlen(dk)], 1u);
    }
    atomicOr(&orall, o);
    __syncthreads();
    for (unsigned i = threadIdx.x; i < 33; i += blockDim.x)
        if (hist[i])
            atomicAdd(&sm->sum.hist[i], (unsigned long long)hist[i]);
    if (threadIdx.x == 0 && orall)
        atomicOr(&sm->sum.orall, orall);
}

__global__ void k_fsd_nbits(const uint32_t *delta, size_t d, fsd_keytab_t tab, unsigned long long *nbits)
{
    GRID_STRIDE(j, d) nbits[j] = fsd_key_nbits(delta[j], tab.l, tab.lens, tab.flag);
}

/* Each key's code OR-ed into the zeroed 32-bit words at its bit offset. */
__global__ void k_fsd_pack(const uint32_t *delta, size_t d, fsd_keytab_t tab, const unsigned long long *offs,
                           unsigned int *words)
{
    GRID_STRIDE(j, d)
    {
        uint32_t w[3];
        uint64_t off = offs[j];
        fsd_key_place(fsd_key_code(delta[j], tab.l, tab.flag), off, w);
        size_t wi = (size_t)(off >> 5);
        for (int k = 0; k < 3; k++)
            if (w[k])
                atomicOr(&words[wi + k], w[k]);
    }
}

/* The host path for codecs the device does not encode. */
static int encode_on_host(cuda_state_t *s, const fsgd_grad_request_t *req, fsgd_codec_t *codec, fsgd_outbuf_t *out,
                          double *loss_sum, char *err, size_t errsz)
{
    double loss = 0;
    FWD(cuda_gradient(s, req, &s->host_grad, &loss, err, errsz));
    FWD(fsgd_codec_encode(codec, s->host_grad.keys, s->host_grad.vals, s->host_grad.n, out, err, errsz));
    *loss_sum += loss;
    return FSGD_E_OK;
}

static int cuda_encodes_on_device(void *p, const fsgd_codec_t *codec)
{
    (void)p;
    fsgd_fastsgd_params_t prm;
    return fsgd_fsd_params(codec, &prm, NULL, 0) == 0;
}

/* FSGD_FASTSGD_DEVICE_LANES=1 forces the CPU-lane sum (tests the fallback). */
static int force_lanes(void)
{
    const char *e = getenv("FSGD_FASTSGD_DEVICE_LANES");
    return e && *e == '1';
}

static int cuda_gradient_encoded(void *p, const fsgd_grad_request_t *req, fsgd_codec_t *codec, fsgd_outbuf_t *msg,
                                 double *loss_sum, char *err, size_t errsz)
{
    cuda_state_t *s = (cuda_state_t *)p;
    msg->len = 0;
    uint8_t *out = msg->dst;
    size_t cap = msg->cap;
    fsgd_fastsgd_params_t prm;
    if (fsgd_fsd_params(codec, &prm, NULL, 0) < 0)
        return encode_on_host(s, req, codec, msg, loss_sum, err, errsz);
    int empty = 0;
    double loss = 0;
    FWD(grad_check(s, req, &empty, &loss, err, errsz));
    if (empty) { /* no key touched: the empty message, on the host */
        FWD(fsgd_codec_encode(codec, NULL, NULL, 0, msg, err, errsz));
        *loss_sum += loss;
        return FSGD_E_OK;
    }
    entry_t *e = NULL;
    FWD(grad_run(s, req, &e, err, errsz));
    size_t n = e->n_touched;
    if (n > prm.dim) /* fsgd_codec_encode's first check; touched keys are < dim */
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec fastsgd: %zu entries for dim %llu", n,
                            (unsigned long long)prm.dim);
    cudaStream_t st = s->stream;
    const float *v = (const float *)s->outv.p;

    /* Per-value arrays in one allocation: keep, pos, ckeys, delta (u32),
     * nbits, offs (u64), codes (u8); and the cub workspace for both scans. */
    size_t a32 = align_up(n * 4), a64 = align_up(n * 8);
    FWD(grow(s, &s->enc_small, sizeof(fsd_small_t), err, errsz));
    FWD(grow(s, &s->enc_arr, 4 * a32 + 2 * a64 + align_up(n), err, errsz));
    char *base = (char *)s->enc_arr.p;
    uint32_t *keep = (uint32_t *)base, *pos = (uint32_t *)(base + a32), *ckeys = (uint32_t *)(base + 2 * a32);
    uint32_t *delta = (uint32_t *)(base + 3 * a32);
    unsigned long long *nbits = (unsigned long long *)(base + 4 * a32);
    unsigned long long *offs = (unsigned long long *)(base + 4 * a32 + a64);
    uint8_t *codes = (uint8_t *)(base + 4 * a32 + 2 * a64);
    size_t ws1 = 0, ws2 = 0;
    CU_TRY(cub::DeviceScan::ExclusiveSum(NULL, ws1, keep, pos, (int)n, st));
    CU_TRY(cub::DeviceScan::ExclusiveSum(NULL, ws2, nbits, offs, (int)n, st));
    FWD(grow(s, &s->enc_ws, ws1 > ws2 ? ws1 : ws2, err, errsz));
    fsd_small_t *sm = (fsd_small_t *)s->enc_small.p;

    /* Values: Σ|v|, S, levels, keep flags, scan, compaction, deltas. */
    CU_TRY(cudaMemsetAsync(sm, 0, sizeof *sm, st));
    k_fsd_values<<<FSD_SUM_BLOCKS, FSD_THREADS, 0, st>>>(v, n, sm);
    k_fsd_setup<<<1, FSD_THREADS, 0, st>>>(v, n, prm.b, prm.tau, force_lanes(), sm);
    k_fsd_keep<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, st>>>(v, n, sm, keep);
    LAUNCH_TRY("k_fsd_values/k_fsd_setup/k_fsd_keep");
    size_t ws = s->enc_ws.cap;
    CU_TRY(cub::DeviceScan::ExclusiveSum(s->enc_ws.p, ws, keep, pos, (int)n, st));
    k_fsd_emit<<<blocks_for(n, MAX_BLOCKS), FSD_THREADS, 0, st>>>(v, e->touched, n, keep, pos, sm, ckeys, codes);
    k_fsd_delta<<<blocks_for(n, MAX_BLOCKS), FSD_THREADS, 0, st>>>(ckeys, sm, delta);
    LAUNCH_TRY("k_fsd_emit/k_fsd_delta");
    fsd_summary_t sum;
    CU_TRY(cudaMemcpyAsync(&sum, &sm->sum, sizeof sum, cudaMemcpyDeviceToHost, st));
    CU_TRY(cudaMemcpyAsync(&loss, s->loss.p, sizeof(double), cudaMemcpyDeviceToHost, st));
    CU_TRY(cudaStreamSynchronize(st));

    /* Host: lengths (paper, or the codec's optimal programme), sizes, checks. */
    float bad = 0;
    if (sum.nonfinite != UINT32_MAX)
        CU_TRY(cudaMemcpy(&bad, v + sum.nonfinite, sizeof bad, cudaMemcpyDeviceToHost));
    fsd_plan_t pl;
    FWD(fsgd_fsd_plan_make(&prm, &sum, e->h_touched, &bad, cap, &pl, err, errsz));
    size_t d = sum.count;
    uint8_t *body = out + FSGD_CODEC_FRAME_HEADER;
    if (d) {
        /* Keys: bit counts, exclusive scan → offsets, OR-packing. */
        fsd_keytab_t tab;
        memcpy(tab.lens, pl.lens, sizeof tab.lens);
        memcpy(tab.flag, pl.flag, sizeof tab.flag);
        tab.l = prm.l;
        size_t nwords = (size_t)((pl.key_bits + 31) / 32) + 3;
        FWD(grow(s, &s->enc_words, nwords * 4, err, errsz));
        CU_TRY(cudaMemsetAsync(s->enc_words.p, 0, nwords * 4, st));
        k_fsd_nbits<<<blocks_for(d, MAX_BLOCKS), THREADS, 0, st>>>(delta, d, tab, nbits);
        LAUNCH_TRY("k_fsd_nbits");
        ws = s->enc_ws.cap;
        CU_TRY(cub::DeviceScan::ExclusiveSum(s->enc_ws.p, ws, nbits, offs, (int)d, st));
        k_fsd_pack<<<blocks_for(d, MAX_BLOCKS), THREADS, 0, st>>>(delta, d, tab, offs,
                                                                   (unsigned int *)s->enc_words.p);
        LAUNCH_TRY("k_fsd_pack");
        /* Only the message crosses PCIe: value bytes and key bytes. */
        CU_TRY(cudaMemcpyAsync(body + pl.hdr, codes, d, cudaMemcpyDeviceToHost, st));
        CU_TRY(cudaMemcpyAsync(body + pl.hdr + d, s->enc_words.p, pl.key_bytes, cudaMemcpyDeviceToHost, st));
        CU_TRY(cudaStreamSynchronize(st));
    }
    fsgd_fsd_write_header(body, &prm, &sum, &pl);
    msg->len = fsgd_fastsgd_finish(codec, out, pl.body_len, (uint32_t)d, n, pl.key_bits);
    *loss_sum += loss;
    return FSGD_E_OK;
}

#ifndef FSGD_CUDA_TOOLKIT
#define FSGD_CUDA_TOOLKIT "unknown"
#endif
#define FSGD_STR_(x) #x
#define FSGD_STR(x) FSGD_STR_(x)
/* Compile-time versions: what the plugin was built against, not what the
 * driver at run time offers (fsgd features asks the device separately). */
extern "C" const char fsgd_cuda_plugin_build_info[] =
    "toolkit " FSGD_CUDA_TOOLKIT ", cuSPARSE " FSGD_STR(CUSPARSE_VER_MAJOR) "." FSGD_STR(CUSPARSE_VER_MINOR) "." FSGD_STR(
        CUSPARSE_VER_PATCH) ", CUDA runtime API " FSGD_STR(CUDART_VERSION);

/* What backend_cuda_plugin.c looks up after dlopen (FSGD_CUDA_PLUGIN_ABI). */
extern "C" const int fsgd_cuda_plugin_abi = FSGD_CUDA_PLUGIN_ABI;
extern "C" const fsgd_backend_ops_t fsgd_cuda_plugin_ops = {
    "cuda", cuda_available, cuda_create, cuda_destroy, cuda_device, cuda_gradient, cuda_apply,
    cuda_gradient_encoded, cuda_encodes_on_device,
};

/* --------------------------------------------------------------- probing */

static int time_spmv(cuda_state_t *s, cusparseSpMatDescr_t A, const double *x, int64_t nx, double *y, int64_t ny,
                     int reps, cudaEvent_t ev0, cudaEvent_t ev1, double *ms_out, char *err, size_t errsz)
{
    cusparseDnVecDescr_t vx = NULL, vy = NULL;
    const double one = 1.0, zero = 0.0;
    size_t ws = 0;
    SP_TRY(cusparseCreateDnVec(&vx, nx, (void *)x, CUDA_R_64F));
    cusparseStatus_t ss = cusparseCreateDnVec(&vy, ny, y, CUDA_R_64F);
    if (ss != CUSPARSE_STATUS_SUCCESS) {
        cusparseDestroyDnVec(vx);
        return sparse_fail(err, errsz, ss, "cusparseCreateDnVec", __LINE__);
    }
    int rc = 0;
    ss = cusparseSpMV_bufferSize(s->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_64F,
                                 CUSPARSE_SPMV_CSR_ALG2, &ws);
    if (ss != CUSPARSE_STATUS_SUCCESS)
        rc = sparse_fail(err, errsz, ss, "cusparseSpMV_bufferSize", __LINE__);
    if (rc == 0)
        rc = grow(s, &s->spmv_ws, ws, err, errsz);
    for (int i = -1; rc == 0 && i < reps; i++) { /* i = -1: warm-up */
        if (i == 0 && cudaEventRecord(ev0, s->stream) != cudaSuccess)
            rc = cuda_fail(err, errsz, cudaGetLastError(), "cudaEventRecord", __LINE__);
        ss = cusparseSpMV(s->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vx, &zero, vy, CUDA_R_64F,
                          CUSPARSE_SPMV_CSR_ALG2, s->spmv_ws.p);
        if (ss != CUSPARSE_STATUS_SUCCESS)
            rc = sparse_fail(err, errsz, ss, "cusparseSpMV", __LINE__);
    }
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    FWD(rc);
    CU_TRY(cudaEventRecord(ev1, s->stream));
    CU_TRY(cudaEventSynchronize(ev1));
    float ms = 0;
    CU_TRY(cudaEventElapsedTime(&ms, ev0, ev1));
    *ms_out = ms / reps;
    return FSGD_E_OK;
}

static int probe_in(cuda_state_t *s, const fsgd_csr_t *X, int reps, fsgd_cuda_probe_t *out, cudaEvent_t ev0,
                    cudaEvent_t ev1, char *err, size_t errsz)
{
    if (X->nnz == 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "cuda probe: empty batch");
    snprintf(out->device, sizeof out->device, "%s", s->desc);
    /* Copy bandwidth: a buffer well above the last-level cache. */
    size_t free_b = 0, total_b = 0;
    CU_TRY(cudaMemGetInfo(&free_b, &total_b));
    size_t bytes = (size_t)512 << 20;
    while (bytes > ((size_t)16 << 20) && 2 * bytes > free_b / 2)
        bytes /= 2;
    void *a = NULL, *b = NULL;
    FWD(dev_alloc(s, &a, bytes, err, errsz));
    int rc = dev_alloc(s, &b, bytes, err, errsz);
    if (rc == 0) {
        cudaError_t e = cudaMemsetAsync(a, 1, bytes, s->stream);
        for (int i = -1; e == cudaSuccess && i < reps; i++) {
            if (i == 0)
                e = cudaEventRecord(ev0, s->stream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s->stream);
        }
        if (e == cudaSuccess)
            e = cudaEventRecord(ev1, s->stream);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(ev1);
        float ms = 0;
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&ms, ev0, ev1);
        if (e != cudaSuccess)
            rc = cuda_fail(err, errsz, e, "cudaMemcpyAsync device-to-device", __LINE__);
        else
            out->copy_gbs = 2.0 * (double)bytes * reps / (ms * 1e-3) / 1e9;
        out->copy_mib = (double)bytes / (1 << 20);
    }
    d_free(s, a);
    d_free(s, b);
    FWD(rc);

    /* An untimed upload first: the first use of each kernel and of cuSPARSE
     * loads its code (lazy module loading), tens of ms on a9a. */
    entry_t *e = NULL;
    FWD(upload(s, X, -1, &e, err, errsz));
    CU_TRY(cudaEventRecord(ev0, s->stream));
    FWD(upload(s, X, -1, &e, err, errsz));
    CU_TRY(cudaEventRecord(ev1, s->stream));
    CU_TRY(cudaEventSynchronize(ev1));
    float up_ms = 0;
    CU_TRY(cudaEventElapsedTime(&up_ms, ev0, ev1));
    out->upload_ms = up_ms;
    size_t n = e->n_rows, nnz = e->nnz, t = e->n_touched;
    out->n_rows = n;
    out->nnz = nnz;
    out->n_touched = t;
    FWD(grow(s, &s->theta_c, t * sizeof(double), err, errsz));
    FWD(grow(s, &s->m, n * sizeof(double), err, errsz));
    FWD(grow(s, &s->g, t * sizeof(double), err, errsz));
    CU_TRY(cudaMemsetAsync(s->theta_c.p, 0, t * sizeof(double), s->stream));
    CU_TRY(cudaMemsetAsync(s->m.p, 0, n * sizeof(double), s->stream));
    /* Compulsory traffic: row offsets, (index, value) per nonzero, x read
     * once per touched key at best, y written once. */
    FWD(time_spmv(s, e->X, (const double *)s->theta_c.p, (int64_t)t, (double *)s->m.p, (int64_t)n, reps, ev0, ev1,
                  &out->spmv_ms, err, errsz));
    double traffic = (double)(n + 1) * 4 + (double)nnz * 12 + (double)t * 8 + (double)n * 8;
    out->spmv_gbs = traffic / (out->spmv_ms * 1e-3) / 1e9;
    FWD(time_spmv(s, e->Xt, (const double *)s->m.p, (int64_t)n, (double *)s->g.p, (int64_t)t, reps, ev0, ev1,
                  &out->spmvt_ms, err, errsz));
    double traffic_t = (double)(t + 1) * 4 + (double)nnz * 12 + (double)n * 8 + (double)t * 8;
    out->spmvt_gbs = traffic_t / (out->spmvt_ms * 1e-3) / 1e9;
    return FSGD_E_OK;
}

extern "C" int fsgd_cuda_plugin_probe(const fsgd_csr_t *X, int reps, fsgd_cuda_probe_t *out, char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    if (!cuda_available(err, errsz))
        return FSGD_E_DEVICE;
    if (reps < 1)
        reps = 1;
    cuda_state_t *s = (cuda_state_t *)cuda_create(X->max_col, NULL, err, errsz);
    if (!s)
        return FSGD_E_DEVICE;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    int rc = 0;
    cudaError_t ce = cudaEventCreate(&ev0);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&ev1);
    if (ce != cudaSuccess)
        rc = cuda_fail(err, errsz, ce, "cudaEventCreate", __LINE__);
    if (rc == 0)
        rc = probe_in(s, X, reps, out, ev0, ev1, err, errsz);
    if (ev0)
        cudaEventDestroy(ev0);
    if (ev1)
        cudaEventDestroy(ev1);
    cuda_destroy(s);
    return rc;
}
