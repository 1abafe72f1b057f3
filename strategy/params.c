/* Strategy parameter lists: see params.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "params.h"

/* Appends item[0..len) to the comma-separated list in rest. */
static int pass_on(const char *name, char *rest, size_t restsz, const char *item, size_t len, char *err,
                   size_t errsz)
{
    size_t r = strlen(rest);
    if (r + len + 2 > restsz)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: spec too long", name);
    if (r)
        rest[r++] = ',';
    memcpy(rest + r, item, len);
    rest[r + len] = '\0';
    return 0;
}

/* The value of "key=value" (item[0..len), key of klen bytes) for def d. */
static int value_of(const char *name, const fsgd_sparam_def_t *d, const char *item, size_t len, size_t klen,
                    double *out, char *err, size_t errsz)
{
    char buf[64], *end;
    if (klen == len || len == klen + 1 || len - klen - 1 >= sizeof buf)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s: expected %s=value", name, d->name,
                            d->name);
    memcpy(buf, item + klen + 1, len - klen - 1);
    buf[len - klen - 1] = '\0';
    double v = strtod(buf, &end);
    if (end == buf || *end || !isfinite(v))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s: '%s' is not a number", name, d->name,
                            buf);
    if (d->integer && v != floor(v))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s: '%s' is not an integer", name,
                            d->name, buf);
    if (v < d->lo || v > d->hi)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s=%s out of range [%g, %g]", name,
                            d->name, buf, d->lo, d->hi);
    *out = v;
    return 0;
}

int fsgd_sparams_parse(const char *name, const char *spec, const fsgd_sparam_def_t *defs, size_t n, double *vals,
                       int *given, char *rest, size_t restsz, char *err, size_t errsz)
{
    int seen[FSGD_SPARAM_MAX] = {0};
    size_t nlen = strlen(name);
    if (n > FSGD_SPARAM_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: %zu parameters, at most %d", name, n,
                            FSGD_SPARAM_MAX);
    for (size_t i = 0; i < n; i++) {
        vals[i] = defs[i].def;
        if (given)
            given[i] = 0;
    }
    if (rest && restsz)
        rest[0] = '\0';
    if (!spec || strncmp(spec, name, nlen) != 0 || (spec[nlen] != '\0' && spec[nlen] != ':'))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: spec '%s' does not name it", name,
                            spec ? spec : "");
    if (spec[nlen] == '\0')
        return 0;
    const char *s = spec + nlen + 1;
    if (!*s)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: empty parameter list after ':'", name);
    while (s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        size_t klen = eq ? (size_t)(eq - s) : len;
        size_t i = 0;
        while (i < n && !(strlen(defs[i].name) == klen && memcmp(defs[i].name, s, klen) == 0))
            i++;
        if (i == n && rest && restsz) {
            FSGD_TRY(pass_on(name, rest, restsz, s, len, err, errsz));
        } else if (i == n) {
            char known[256] = "";
            for (size_t j = 0; j < n; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", defs[j].name);
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: unknown parameter '%.*s' (known: %s)", name,
                                (int)klen, s, known);
        } else {
            if (seen[i]++)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s given twice", name,
                                    defs[i].name);
            FSGD_TRY(value_of(name, &defs[i], s, len, klen, &vals[i], err, errsz));
            if (given)
                given[i] = 1;
        }
        s = comma ? comma + 1 : NULL;
        if (comma && !*s)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: trailing ',' in spec", name);
    }
    return 0;
}
