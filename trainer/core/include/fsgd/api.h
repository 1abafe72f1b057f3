/* The stable C API for bindings (the Python package, python/fsgd/_lib.py):
 * what a binding may rely on across releases of libfsgd.so without knowing
 * the layout of any struct. Models are opaque handles read through
 * accessors; a binding never mirrors fsgd_model_t (a field added there must
 * not break it).
 *
 * FSGD_API_VERSION counts incompatible changes to the functions below: a
 * binding built for version N refuses a library whose fsgd_api_version()
 * is not N. Functions added keep the version. */
#ifndef FSGD_API_H
#define FSGD_API_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/model.h"

#define FSGD_API_VERSION 1

/* FSGD_API_VERSION as the library was built. */
int fsgd_api_version(void);

/* Reads and checks the model file at path (fsgd_model_load) into a new
 * handle *out, which the caller releases with fsgd_api_model_free. Returns
 * 0, or an fsgd error (*out NULL) with err set. */
int fsgd_api_model_load(const char *path, fsgd_model_t **out, char *err, size_t errsz);

/* The model's loss (fsgd_loss_kind_t: 1 logistic, 2 squared, 3 hinge), its feature columns, whether it has an
 * intercept and that feature's value. */
int fsgd_api_model_kind(const fsgd_model_t *m);
uint64_t fsgd_api_model_dim(const fsgd_model_t *m);
int fsgd_api_model_has_bias(const fsgd_model_t *m);
float fsgd_api_model_bias_value(const fsgd_model_t *m);

/* Its weights: dim floats, then the intercept's weight when it has one.
 * Valid until fsgd_api_model_free. */
const float *fsgd_api_model_weights(const fsgd_model_t *m);

/* The input row format the model was trained on ("" for LIBSVM; a column
 * spec otherwise, fsgd/rowfmt.h). Valid until fsgd_api_model_free. */
const char *fsgd_api_model_input(const fsgd_model_t *m);

/* Releases a handle of fsgd_api_model_load; NULL is a no-op. */
void fsgd_api_model_free(fsgd_model_t *m);

#endif
