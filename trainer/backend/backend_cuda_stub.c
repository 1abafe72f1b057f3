/* Without CUDA the "cuda" backend still links and says why it cannot run. */
#include "backend_impl.h"
#include "fsgd/error.h"

#if !FSGD_HAVE_CUDA
const int fsgd_backend_cuda_built = 0;

static int cuda_unavailable(char *err, size_t errsz)
{
    fsgd_err_fmt(err, errsz, FSGD_E_NOT_BUILT, "cuda: built without CUDA (rebuild with nvcc, make CUDA=1)");
    return 0;
}

const fsgd_backend_ops_t fsgd_backend_cuda_ops = {
    .name = "cuda",
    .available = cuda_unavailable,
};
#endif
