/* The rows of a scoring request body (fsgd serve), parsed into a CSR batch
 * exactly as fsgd predict reads the same rows from a file, so that both
 * score them bit for bit the same.
 *
 * Text bodies are lines of the format the model was trained on: LIBSVM
 * lines ("label idx:val ...", the label read and ignored) for a model
 * without hashing, or the delimited rows of the model's recorded spec
 * (fsgd/delim.h: a Criteo TSV row, label field first) for a hashed one; no
 * header line in either. JSON bodies are one object:
 *   {"rows": [{"indices": [3, 17], "values": [0.5, 1]}, ...]}
 * with 1-based strictly increasing indices as in LIBSVM and "values"
 * optional (all 1, one-hot rows), or for a hashed model
 *   {"rows": [{"fields": ["1", "", "68fd1e64", ...]}, ...]}
 * with every column of the spec, or every column but the label. */
#ifndef FSGD_SERVE_ROWS_H
#define FSGD_SERVE_ROWS_H

#include <stddef.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"

typedef enum fsgd_serve_body { FSGD_SERVE_BODY_TEXT = 0, FSGD_SERVE_BODY_JSON = 1 } fsgd_serve_body_t;

/* Parses body[0..len) (any bytes; not NUL-terminated) and appends its rows
 * to out. spec: the model's hashing, or NULL for LIBSVM rows. Returns the
 * number of rows (> 0), or FSGD_E_PARSE / FSGD_E_RANGE / FSGD_E_FORMAT
 * with err naming the row and the field: "body:LINE:COL: ..." as the
 * file readers say it (the line of the body, the byte of the field), or
 * "rows[2].indices[0]: ..." for JSON; FSGD_E_ARG for a body
 * without rows, or FSGD_E_NOMEM. Rows before an error may stay in out.
 * Thread safe (no shared state). */
long fsgd_serve_rows_parse(const char *body, size_t len, fsgd_serve_body_t kind, const fsgd_delim_spec_t *spec,
                           fsgd_csr_t *out, char *err, size_t errsz);

#endif
