/* fsgd/api.h: the models of the bindings' API as opaque handles. */
#include "fsgd/api.h"

#include <stdlib.h>

#include "fsgd/error.h"

int fsgd_api_version(void)
{
    return FSGD_API_VERSION;
}

int fsgd_api_model_load(const char *path, fsgd_model_t **out, char *err, size_t errsz)
{
    *out = NULL;
    fsgd_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    int rc = fsgd_model_load(m, path, err, errsz);
    if (rc < 0) {
        fsgd_model_free(m);
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int fsgd_api_model_kind(const fsgd_model_t *m)
{
    return (int)m->kind;
}

uint64_t fsgd_api_model_dim(const fsgd_model_t *m)
{
    return m->dim;
}

int fsgd_api_model_has_bias(const fsgd_model_t *m)
{
    return m->has_bias;
}

float fsgd_api_model_bias_value(const fsgd_model_t *m)
{
    return m->bias;
}

const float *fsgd_api_model_weights(const fsgd_model_t *m)
{
    return m->w;
}

const char *fsgd_api_model_input(const fsgd_model_t *m)
{
    return m->input;
}

void fsgd_api_model_free(fsgd_model_t *m)
{
    if (!m)
        return;
    fsgd_model_free(m);
    free(m);
}
