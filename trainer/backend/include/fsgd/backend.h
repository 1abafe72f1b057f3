/* Compute backends: the gradient of a loss over a CSR mini-batch.
 *
 * A backend instance holds (or borrows) the model θ of dimension dim and
 * computes, for a batch X with labels y:
 *   margins  m = X θ
 *   residual r_i = loss'(m_i, y_i)
 *   gradient g = scale · Xᵀ r  (+ λ θ_k on the batch's touched keys k)
 * restricted to the touched keys (the union of the batch's columns), keys
 * strictly increasing. The CPU backend is always built; "cuda" exists when
 * built with nvcc and fails with FSGD_E_NOT_BUILT otherwise.
 *
 * Instances are not thread safe; use one per thread. */
#ifndef FSGD_BACKEND_H
#define FSGD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/codec.h"
#include "fsgd/csr.h"
#include "fsgd/loss.h"
#include "fsgd/sparse.h"

typedef struct fsgd_backend fsgd_backend_t;

/* Makes a backend by name: "cpu", "cuda", or "auto" (cuda when a device is
 * present and built in, otherwise cpu). host_theta is the caller's model
 * vector of dim floats: the CPU backend reads it in place (it must stay
 * valid and unchanged during fsgd_backend_gradient); device backends copy it
 * now and follow later changes through fsgd_backend_apply. Returns NULL with
 * err set ("cuda: built without CUDA", "cuda: no device"). */
fsgd_backend_t *fsgd_backend_new(const char *name, uint64_t dim, const float *host_theta, char *err,
                                 size_t errsz);

/* Frees the backend. NULL is a no-op. */
void fsgd_backend_destroy(fsgd_backend_t *b);

/* "cpu" or "cuda" (what was picked, for "auto"). Static string. */
const char *fsgd_backend_name(const fsgd_backend_t *b);

/* A short description of the device ("cpu", "cuda: NVIDIA H100 ..."). Owned by b. */
const char *fsgd_backend_device(const fsgd_backend_t *b);

typedef struct fsgd_grad_request {
    const fsgd_csr_t *batch;
    int64_t batch_id;       /* stable id of an immutable batch so a device may cache it; -1: no caching */
    fsgd_loss_kind_t loss;
    double scale;           /* usually 1 / (rows in the whole step) */
    double l2;              /* λ, added as λθ_k on touched keys (times 1, not scale) */
} fsgd_grad_request_t;

/* Computes the sparse gradient into out (replaced) and adds the sum of the
 * batch's losses (unregularized) to *loss_sum. Returns 0 or a negative error
 * with err set (device errors name the failing call). */
int fsgd_backend_gradient(fsgd_backend_t *b, const fsgd_grad_request_t *req, fsgd_sparse_t *out,
                          double *loss_sum, char *err, size_t errsz);

/* Tells the backend θ changed at keys (new absolute values). The CPU backend
 * reads host_theta directly and ignores this. Returns 0 or an error. */
int fsgd_backend_apply(fsgd_backend_t *b, const uint32_t *keys, const float *vals, size_t n, char *err,
                       size_t errsz);

/* The gradient of fsgd_backend_gradient, encoded with codec: the same
 * message, codec state and statistics as fsgd_codec_encode(codec, g.keys,
 * g.vals, g.n, out) on that gradient, and the same errors.
 * Adds the batch's loss to *loss_sum on success only. The CUDA backend runs
 * codec fastsgd (ef=0; paper or optimal lengths) on the device and copies
 * back only the message (trainer/backend/CUDA.md); other codecs, and
 * fastsgd with ef=1, are encoded on the host. Size out with
 * fsgd_backend_encoded_bound. Returns 0 or a negative error with err set. */
int fsgd_backend_gradient_encoded(fsgd_backend_t *b, const fsgd_grad_request_t *req, fsgd_codec_t *codec,
                                  fsgd_outbuf_t *out, double *loss_sum, char *err, size_t errsz);

/* A capacity for fsgd_backend_gradient_encoded on batch (touched keys <= nnz). */
size_t fsgd_backend_encoded_bound(const fsgd_codec_t *codec, const fsgd_csr_t *batch);

/* 1 when fsgd_backend_gradient_encoded encodes with codec on the device
 * (only the message crosses the bus), 0 when it encodes on the host. */
int fsgd_backend_encodes_on_device(const fsgd_backend_t *b, const fsgd_codec_t *codec);

/* Loads all of θ (n weights, the whole model) into the backend, as after a
 * snapshot; a backend that reads the host array in place does nothing. */
int fsgd_backend_load(fsgd_backend_t *b, const float *theta, uint64_t n, char *err, size_t errsz);

/* Space separated names of the backends built in ("cpu cuda"). Static. */
const char *fsgd_backend_list(void);

/* How the CUDA backend was built: "toolkit 13.0.88 at /usr/local/cuda,
 * cuSPARSE 12.6.3, CUDA runtime API 13000", or "not built (...)". Static. */
const char *fsgd_backend_cuda_build(void);

/* 1 when the named backend can run here now; 0 with the reason in err
 * ("cuda: no device (cudaGetDeviceCount: ...)", "cuda: built without CUDA"). */
int fsgd_backend_available(const char *name, char *err, size_t errsz);

#endif
