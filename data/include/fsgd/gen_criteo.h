/* Synthetic rows shaped like Criteo's display-ad logs: TSV with a 0/1 label,
 * 13 integer columns and 26 categorical columns of 8 hex digits, with
 * missing (empty) fields, as `fsgd train --format criteo` reads them.
 *
 * Categorical column j draws a value rank from a Zipf law (exponent zipf)
 * over its own vocabulary (sizes from 4 to ~2^(vocab_bits) across columns,
 * as Criteo's columns range from a handful of values to millions); the value
 * is a seeded 32-bit mix of (j, rank) in hex. Integer columns are rounded
 * log-normal counts (column 2 is sometimes -1, as in Criteo). Each field is
 * missing with a per-column probability up to 45%. The label is 1 with
 * probability sigmoid(bias + Σ weight(j, value) + Σ c_j·ln(1+count)), each
 * categorical value's weight a seeded N(0, w_scale²) draw, so rare values
 * carry weights a model cannot learn well, as in real logs. Everything is a
 * deterministic function of the options. */
#ifndef FSGD_GEN_CRITEO_H
#define FSGD_GEN_CRITEO_H

#include <stdint.h>
#include <stdio.h>

#include "fsgd/gen.h"

typedef struct fsgd_gen_criteo_opts {
    uint64_t seed;
    double zipf;        /* value popularity exponent in each categorical column (default 1.1) */
    unsigned vocab_bits; /* the largest column has about 2^vocab_bits values (default 20) */
    double bias;        /* label model intercept (default -1.2: about a quarter positives) */
    double w_scale;     /* categorical weights ~ N(0, w_scale^2) (default 0.35) */
} fsgd_gen_criteo_opts_t;

void fsgd_gen_criteo_opts_default(fsgd_gen_criteo_opts_t *o);

/* Writes rows rows of Criteo TSV to out. Returns 0, FSGD_E_ARG (bad options)
 * or FSGD_E_IO, with err set. progress may be NULL. */
int fsgd_gen_criteo_write(const fsgd_gen_criteo_opts_t *o, FILE *out, uint64_t rows, fsgd_gen_progress_fn progress,
                          void *ctx, char *err, size_t errsz);

#endif
