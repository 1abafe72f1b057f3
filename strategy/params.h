/* Private to strategy/: the "name:key=value,..." parameter list of a
 * strategy spec, checked against a table of ranges as codec specs are
 * (fsgd/codec.h). A strategy that wraps a codec (efsign) passes the keys
 * it does not know on to the codec; the others refuse them. */
#ifndef FSGD_STRATEGY_PARAMS_H
#define FSGD_STRATEGY_PARAMS_H

#include <stddef.h>

typedef struct fsgd_sparam_def {
    const char *name;
    int integer;      /* 1: the value must be an integer */
    double lo, hi;    /* inclusive range */
    double def;
    const char *why;  /* where the default comes from (paper section, measurement) */
} fsgd_sparam_def_t;

#define FSGD_SPARAM_MAX 16

/* Parses spec ("name" or "name:k=v,k=v") for the strategy called name into
 * vals (defaults first, then the given values); given[i], when given is not
 * NULL, says whether key i was in the spec. Keys not in defs are appended,
 * comma separated, to rest (rest[0] = '\0' when none) when rest is not
 * NULL, and are an error otherwise. Repeated keys, non-numbers, non-integers
 * for integer keys and values out of range are errors naming the key.
 * Returns 0 or FSGD_E_ARG. */
int fsgd_sparams_parse(const char *name, const char *spec, const fsgd_sparam_def_t *defs, size_t n, double *vals,
                       int *given, char *rest, size_t restsz, char *err, size_t errsz);

#endif
