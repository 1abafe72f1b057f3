/* Without CUDA the "cuda" backend still links and says why it cannot run.
 * With FSGD_HAVE_CUDA=1 backend_cuda.cu defines these symbols instead and
 * this file compiles to nothing. */
#include "backend_cuda.h"
#include "backend_impl.h"
#include "fsgd/error.h"

#if !FSGD_HAVE_CUDA
#include <string.h>

const int fsgd_backend_cuda_built = 0;
const char fsgd_backend_cuda_build_info[] = "not built (no complete CUDA toolkit found, or CUDA=0)";

static int cuda_unavailable(char *err, size_t errsz)
{
    fsgd_err_fmt(err, errsz, FSGD_E_NOT_BUILT, "cuda: built without CUDA (rebuild with nvcc, make CUDA=1)");
    return 0;
}

const fsgd_backend_ops_t fsgd_backend_cuda_ops = {
    .name = "cuda",
    .available = cuda_unavailable,
};

int fsgd_cuda_probe(const fsgd_csr_t *X, int reps, fsgd_cuda_probe_t *out, char *err, size_t errsz)
{
    (void)X;
    (void)reps;
    memset(out, 0, sizeof *out);
    return fsgd_err_fmt(err, errsz, FSGD_E_NOT_BUILT, "cuda: built without CUDA (rebuild with nvcc, make CUDA=1)");
}
#endif
