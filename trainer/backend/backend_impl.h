/* Private: the backend vtable every backend implements. */
#ifndef FSGD_BACKEND_IMPL_H
#define FSGD_BACKEND_IMPL_H

#include "fsgd/backend.h"

typedef struct fsgd_backend_ops {
    const char *name;
    /* 1 when usable on this machine (device present); writes why not into err. */
    int (*available)(char *err, size_t errsz);
    void *(*create)(uint64_t dim, const float *host_theta, char *err, size_t errsz);
    void (*destroy)(void *state);
    const char *(*device)(void *state);
    int (*gradient)(void *state, const fsgd_grad_request_t *req, fsgd_sparse_t *out, double *loss_sum,
                    char *err, size_t errsz);
    int (*apply)(void *state, const uint32_t *keys, const float *vals, size_t n, char *err, size_t errsz);
    /* fsgd_backend_gradient_encoded; NULL: backend.c computes the gradient
     * and encodes it on the host. */
    int (*gradient_encoded)(void *state, const fsgd_grad_request_t *req, fsgd_codec_t *codec, fsgd_outbuf_t *out,
                            double *loss_sum, char *err, size_t errsz);
    /* 1 when gradient_encoded runs codec's encoder on the device; NULL: 0. */
    int (*encodes_on_device)(void *state, const fsgd_codec_t *codec);
} fsgd_backend_ops_t;

extern const fsgd_backend_ops_t fsgd_backend_cpu_ops;

/* The CUDA backend (backend_cuda_plugin.c): its vtable, from the plugin
 * loaded on first call when built with CUDA; otherwise, or when the plugin
 * cannot be loaded, one whose available() says why. */
const fsgd_backend_ops_t *fsgd_backend_cuda(void);

/* 1 when the CUDA plugin was built with this binary. */
extern const int fsgd_backend_cuda_built;

/* Bumped whenever fsgd_backend_ops_t or the plugin's symbols change, so a
 * stale plugin is refused by name instead of called through the wrong table. */
#define FSGD_CUDA_PLUGIN_ABI 2

#endif
