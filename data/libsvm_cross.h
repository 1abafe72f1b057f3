/* Private to data/: the per-row side of LIBSVM fields (fsgd/libsvm_fields.h):
 * which field a column is in, and a row's crosses, for the LIBSVM reader. */
#ifndef FSGD_DATA_LIBSVM_CROSS_H
#define FSGD_DATA_LIBSVM_CROSS_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/libsvm_fields.h"

/* The field letter of 0-based column idx of a file whose indices start at
 * base (1, or 0 for zero_based files); 0 when it is in no field. */
char fsgd_libsvm_fields_of(const fsgd_libsvm_fields_t *f, uint64_t idx, uint64_t base);

/* One row's entries before hashing: idx[0..n) its 0-based columns, val
 * their values, field their letters (fsgd_libsvm_fields_of). */
typedef struct fsgd_libsvm_fields_row {
    const uint64_t *idx;
    const float *val;
    const char *field;
    size_t n;
} fsgd_libsvm_fields_row_t;

/* The crosses of one row: writes up to cap crosses to col (masked to
 * 2^bits; bits 0 = 32) and cval, and returns how many the row has (more
 * than cap: call again with room). */
size_t fsgd_libsvm_fields_cross(const fsgd_libsvm_fields_t *f, const fsgd_libsvm_fields_row_t *row, unsigned bits,
                                uint32_t *col, float *cval, size_t cap);

#endif
