/* Parameter lists of the learned strategies: see learned_params.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "learned_params.h"

int fsgd_lparams_parse(const char *name, const char *spec, const fsgd_lparam_def_t *defs, size_t n, double *vals,
                       char *err, size_t errsz)
{
    int given[FSGD_LPARAM_MAX] = {0};
    size_t nlen = strlen(name);
    for (size_t i = 0; i < n; i++)
        vals[i] = defs[i].def;
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
        if (i == n) {
            char known[256] = "";
            for (size_t j = 0; j < n; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", defs[j].name);
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: unknown parameter '%.*s' (known: %s)", name,
                                (int)klen, s, known);
        }
        if (!eq || len == klen + 1 || len - klen - 1 >= 64)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s: expected %s=value", name,
                                defs[i].name, defs[i].name);
        if (given[i]++)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s given twice", name, defs[i].name);
        char buf[64], *end;
        memcpy(buf, eq + 1, len - klen - 1);
        buf[len - klen - 1] = '\0';
        double v = strtod(buf, &end);
        if (end == buf || *end || !isfinite(v))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s: '%s' is not a number", name,
                                defs[i].name, buf);
        if (defs[i].integer && v != floor(v))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s: '%s' is not an integer", name,
                                defs[i].name, buf);
        if (v < defs[i].lo || v > defs[i].hi)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s=%s out of range [%g, %g]", name,
                                defs[i].name, buf, defs[i].lo, defs[i].hi);
        vals[i] = v;
        s = comma ? comma + 1 : NULL;
        if (comma && !*s)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: trailing ',' in spec", name);
    }
    return 0;
}

void fsgd_lparams_format(const char *name, const fsgd_lparam_def_t *defs, size_t n, const double *vals, char *buf,
                         size_t sz)
{
    size_t pos = (size_t)snprintf(buf, sz, "%s", name);
    for (size_t i = 0; i < n && pos < sz; i++)
        pos += (size_t)snprintf(buf + pos, sz - pos, "%c%s=%.9g", i ? ',' : ':', defs[i].name, vals[i]);
}
