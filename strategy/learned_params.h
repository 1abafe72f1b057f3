/* Private to strategy/: the "name:key=value,..." parameter lists of the
 * learned strategies (mqgrad, gradiveq), checked against a table of ranges
 * as codec specs are (fsgd/codec.h). */
#ifndef FSGD_LEARNED_PARAMS_H
#define FSGD_LEARNED_PARAMS_H

#include <stddef.h>

typedef struct fsgd_lparam_def {
    const char *name;
    int integer;      /* 1: the value must be an integer */
    double lo, hi;    /* inclusive range */
    double def;
    const char *why;  /* where the default comes from (paper section), for FORMAT.md and errors */
} fsgd_lparam_def_t;

#define FSGD_LPARAM_MAX 16

/* Parses spec ("name" or "name:k=v,k=v") for the strategy called name into
 * vals (defaults first, then the given values). Unknown keys, repeated keys,
 * non-numbers and values out of range are FSGD_E_ARG with err naming the
 * key. Returns 0 or FSGD_E_ARG. */
int fsgd_lparams_parse(const char *name, const char *spec, const fsgd_lparam_def_t *defs, size_t n, double *vals,
                       char *err, size_t errsz);

/* Writes the canonical spec (every key spelled out) into buf. */
void fsgd_lparams_format(const char *name, const fsgd_lparam_def_t *defs, size_t n, const double *vals, char *buf,
                         size_t sz);

#endif
