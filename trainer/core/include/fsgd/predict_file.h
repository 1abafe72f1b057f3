/* Scoring the rows of a file with a model, read as the model's recorded
 * input says (LIBSVM, hashed LIBSVM with its fields and crosses, delimited
 * criteo/tsv/csv rows, VW text): fsgd predict and the Python package score
 * raw rows through here. LIBSVM rows stream in chunks; delimited and VW
 * files are read whole. Nothing here prints. */
#ifndef FSGD_PREDICT_FILE_H
#define FSGD_PREDICT_FILE_H

#include <stddef.h>

#include "fsgd/libsvm.h"
#include "fsgd/model.h"

typedef struct fsgd_predict_opts {
    int skip_bad;    /* LIBSVM rows: skip malformed ones (counted: fsgd_predict_skipped) */
    int row_weights; /* LIBSVM rows may carry label:weight (read, left out of the score) */
    int weights;     /* give each row's weight (VW importance, LIBSVM label:weight; implies row_weights) */
} fsgd_predict_opts_t;

/* One row scored. */
typedef struct fsgd_predict_row {
    double margin;       /* x.w + bias */
    double label;        /* as the file gives it */
    const double *weight; /* with opts.weights: the row's weight (1 when it has none); else NULL */
    const char *tag;     /* a VW row's tag, tag_len bytes (0: none) */
    size_t tag_len;
} fsgd_predict_row_t;

/* Called for every row in file order; a negative return stops the run and
 * is returned by fsgd_predict_run. */
typedef int (*fsgd_predict_row_fn)(void *ctx, const fsgd_predict_row_t *row);

typedef struct fsgd_predict fsgd_predict_t;

/* Opens path's rows for m (which must outlive the reader): *out, or an
 * error with err set: FSGD_E_FORMAT for a model input spec that cannot be
 * read, FSGD_E_ARG for options the rows cannot honour (skip_bad or weights
 * of delimited rows), FSGD_E_IO for a file that cannot be opened, the
 * readers' own errors otherwise. */
int fsgd_predict_open(const fsgd_model_t *m, const char *path, const fsgd_predict_opts_t *o, fsgd_predict_t **out,
                      char *err, size_t errsz);

/* Scores every row through fn. Returns 0, fn's negative answer, or a
 * reader's error with err set. */
int fsgd_predict_run(fsgd_predict_t *p, fsgd_predict_row_fn fn, void *ctx, char *err, size_t errsz);

/* LIBSVM rows' counts (malformed rows skipped: bad_rows, first_bad);
 * NULL for other inputs. */
const fsgd_libsvm_stats_t *fsgd_predict_skipped(const fsgd_predict_t *p);

/* NULL is a no-op. */
void fsgd_predict_close(fsgd_predict_t *p);

#endif
