/* Private to data/: joining the row weights of a file's parts (the
 * threaded LIBSVM loader reads parts apart, fsgd/libsvm.h). */
#ifndef FSGD_DATA_LIBSVM_WEIGHTS_H
#define FSGD_DATA_LIBSVM_WEIGHTS_H

#include "fsgd/libsvm.h"

/* Appends src's weights to dst. Returns 0 or FSGD_E_NOMEM (dst unchanged). */
int fsgd_libsvm_weights_append(fsgd_libsvm_weights_t *dst, const fsgd_libsvm_weights_t *src);

#endif
