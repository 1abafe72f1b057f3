/* The rows of a scoring request body (fsgd serve), parsed into a CSR batch
 * exactly as fsgd predict reads the same rows from a file, so that both
 * score them bit for bit the same.
 *
 * The rows are in the format the model was trained on, as its recorded
 * input says (fsgd/rowfmt.h: fsgd_rowfmt_init of the model's input): LIBSVM
 * lines ("label idx:val ...", the label read and ignored), their indices
 * hashed for a "libsvm:bits=B" model; the delimited rows of the model's spec
 * (fsgd/delim.h: a Criteo TSV row, label field first) for a hashed one; VW
 * text lines (fsgd/vw.h: the model's bits, namespaces and crosses) for a VW
 * one. No header line. JSON bodies are one object:
 *   {"rows": [{"indices": [3, 17], "values": [0.5, 1]}, ...]}
 * with 1-based strictly increasing indices as in LIBSVM and "values"
 * optional (all 1, one-hot rows) for a LIBSVM model (hashed as the text
 * is), or for a delimited one
 *   {"rows": [{"fields": ["1", "", "68fd1e64", ...]}, ...]}
 * with every column of the spec, or every column but the label; and for
 * every model {"rows": [{"line": "TEXT"}]}, one row as the text body
 * writes it (a VW model takes only this form). */
#ifndef FSGD_SERVE_ROWS_H
#define FSGD_SERVE_ROWS_H

#include <stddef.h>

#include "fsgd/csr.h"
#include "fsgd/rowfmt.h"
#include "fsgd/vw.h"

typedef enum fsgd_serve_body { FSGD_SERVE_BODY_TEXT = 0, FSGD_SERVE_BODY_JSON = 1 } fsgd_serve_body_t;

/* Parses body[0..len) (any bytes; not NUL-terminated) and appends its rows
 * to out. fmt: the model's row format (fsgd_rowfmt_init of its input, with
 * skip_bad 0), or NULL for plain LIBSVM rows. tags (may be NULL) gets a VW
 * model's rows' tags (and importance weights, which scoring ignores as
 * fsgd predict does). Returns the number of rows (> 0), or FSGD_E_PARSE /
 * FSGD_E_RANGE / FSGD_E_FORMAT with err naming the row and the field:
 * "body:LINE:COL: ..." as the file readers say it (the line of the body,
 * the byte of the field), or "rows[2].indices[0]: ..." for JSON; FSGD_E_ARG
 * for a body without rows, or FSGD_E_NOMEM. Rows before an error may stay
 * in out. Thread safe (no shared state). */
long fsgd_serve_rows_parse(const char *body, size_t len, fsgd_serve_body_t kind, const fsgd_rowfmt_t *fmt,
                           fsgd_csr_t *out, fsgd_vw_extra_t *tags, char *err, size_t errsz);

#endif
