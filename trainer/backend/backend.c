/* Backend registry and dispatch: picks an implementation by name and
 * forwards calls through its vtable. */
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "fsgd/error.h"

struct fsgd_backend {
    const fsgd_backend_ops_t *ops;
    void *state;
    fsgd_sparse_t grad; /* host gradient for backends without gradient_encoded */
};

static const fsgd_backend_ops_t *find_ops(const char *name) 
{
    if (!strcmp(name, "cpu"))
        return &fsgd_backend_cpu_ops;
    if (!strcmp(name, "cuda"))
        return fsgd_backend_cuda();
    return NULL;
}

fsgd_backend_t *fsgd_backend_new(const char *name, uint64_t dim, const float *host_theta, char *err,
                                 size_t errsz)
{
    const fsgd_backend_ops_t *ops;
    if (!strcmp(name, "auto")) {
        char why[256];
        const fsgd_backend_ops_t *cuda = fsgd_backend_cuda();
        ops = cuda->available(why, sizeof why) ? cuda : &fsgd_backend_cpu_ops;
    } else {
        ops = find_ops(name);
        if (!ops) {
            fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unknown backend '%s' (built: %s, or auto)", name,
                         fsgd_backend_list());
            return NULL;
        }
        if (!ops->available(err, errsz))
            return NULL;
    }
    fsgd_backend_t *b = calloc(1, sizeof *b);
    if (!b) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "backend %s: out of memory", ops->name);
        return NULL;
    }
    b->ops = ops;
    b->state = ops->create(dim, host_theta, err, errsz);
    if (!b->state) {
        free(b);
        return NULL;
    }
    return b;
}

void fsgd_backend_destroy(fsgd_backend_t *b)
{
    if (!b)
        return;
    b->ops->destroy(b->state);
    fsgd_sparse_free(&b->grad);
    free(b);
}

const char *fsgd_backend_name(const fsgd_backend_t *b) { return b->ops->name; }

const char *fsgd_backend_device(const fsgd_backend_t *b) { return b->ops->device(b->state); }

int fsgd_backend_gradient(fsgd_backend_t *b, const fsgd_grad_request_t *req, fsgd_sparse_t *out,
                          double *loss_sum, char *err, size_t errsz)
{
    return b->ops->gradient(b->state, req, out, loss_sum, err, errsz);
}

int fsgd_backend_apply(fsgd_backend_t *b, const uint32_t *keys, const float *vals, size_t n, char *err,
                       size_t errsz)
{
    return b->ops->apply(b->state, keys, vals, n, err, errsz);
}

int fsgd_backend_gradient_encoded(fsgd_backend_t *b, const fsgd_grad_request_t *req, fsgd_codec_t *codec,
                                  fsgd_outbuf_t *out, double *loss_sum, char *err, size_t errsz)
{
    out->len = 0;
    if (b->ops->gradient_encoded)
        return b->ops->gradient_encoded(b->state, req, codec, out, loss_sum, err, errsz);
    double loss = 0;
    FSGD_TRY(b->ops->gradient(b->state, req, &b->grad, &loss, err, errsz));
    FSGD_TRY(fsgd_codec_encode(codec, b->grad.keys, b->grad.vals, b->grad.n, out, err, errsz));
    *loss_sum += loss;
    return FSGD_E_OK;
}

size_t fsgd_backend_encoded_bound(const fsgd_codec_t *codec, const fsgd_csr_t *batch)
{
    return fsgd_codec_bound(codec, batch->nnz);
}

int fsgd_backend_encodes_on_device(const fsgd_backend_t *b, const fsgd_codec_t *codec)
{
    return b->ops->encodes_on_device ? b->ops->encodes_on_device(b->state, codec) : 0;
}

int fsgd_backend_load(fsgd_backend_t *b, const float *theta, uint64_t n, char *err, size_t errsz)
{
    /* Through apply, key block by key block: no backend needs a second way
     * in, and no key array the size of the model is built. */
    uint32_t keys[4096];
    for (uint64_t lo = 0; lo < n; lo += 4096) {
        size_t m = n - lo < 4096 ? (size_t)(n - lo) : 4096;
        for (size_t i = 0; i < m; i++)
            keys[i] = (uint32_t)(lo + i);
        FSGD_TRY(b->ops->apply(b->state, keys, theta + lo, m, err, errsz));
    }
    return 0;
}

const char *fsgd_backend_list(void) { return fsgd_backend_cuda_built ? "cpu cuda" : "cpu"; }

int fsgd_backend_available(const char *name, char *err, size_t errsz)
{
    const fsgd_backend_ops_t *ops = find_ops(name);
    if (!ops)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unknown backend '%s' (built: %s)", name, fsgd_backend_list()), 0;
    return ops->available(err, errsz);
}
