/* Private: device measurements for tests/bench/bench_backend.c.
 *
 * fsgd_cuda_probe is in backend_cuda_plugin.c, which always builds: it runs
 * the plugin's probe (backend_cuda.cu) when the plugin loads, and otherwise
 * returns the reason it did not (FSGD_E_NOT_BUILT in a build without CUDA),
 * so the benchmark links either way. Not part of the public API. */
#ifndef FSGD_BACKEND_CUDA_H
#define FSGD_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"

typedef struct fsgd_cuda_probe {
    char device[192];       /* "cuda: NVIDIA H100 ... (sm_90, 79.1 GiB, device 0)" */
    double copy_gbs;        /* cudaMemcpy device-to-device, (bytes read + written) / s */
    double copy_mib;        /* size of the copied buffer */
    double spmv_ms;         /* one margin SpMV m = X θ over the batch */
    double spmv_gbs;        /* its compulsory traffic / time (see CUDA.md) */
    double spmvt_ms;        /* one transposed product g = Xᵀ r (explicit Xᵀ, see CUDA.md) */
    double spmvt_gbs;
    double upload_ms;       /* host CSR -> device batch (sort, unique, compaction, Xᵀ) */
    size_t n_rows, nnz, n_touched;
} fsgd_cuda_probe_t;

/* Uploads X to the first device, then times reps device-to-device copies
 * and reps of each SpMV with CUDA events. Returns 0, FSGD_E_NOT_BUILT
 * (built without CUDA), or FSGD_E_DEVICE / FSGD_E_NOMEM with err naming
 * the failing call. */
int fsgd_cuda_probe(const fsgd_csr_t *X, int reps, fsgd_cuda_probe_t *out, char *err, size_t errsz);

#endif
