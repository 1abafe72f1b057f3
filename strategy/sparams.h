/* Private to strategy/: splitting a strategy spec "name:a=1,b=2" into the
 * parameters the strategy itself reads and the rest (passed on to a codec). */
#ifndef FSGD_STRATEGY_SPARAMS_H
#define FSGD_STRATEGY_SPARAMS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"

typedef struct sparam {
    const char *name;
    double lo, hi; /* inclusive */
    double def;
    double val;    /* out */
    int given;     /* out */
} sparam_t;

/* Reads the parameters of spec named in ps[0..np) into ps[i].val (default
 * when absent); the other "k=v" items are appended, comma separated, to
 * rest (rest[0] = '\0' when none). 0, or FSGD_E_ARG with err naming the
 * parameter. */
static inline int sparams_parse(const char *what, const char *spec, sparam_t *ps, size_t np, char *rest,
                                size_t restsz, char *err, size_t errsz)
{
    rest[0] = '\0';
    for (size_t i = 0; i < np; i++) {
        ps[i].val = ps[i].def;
        ps[i].given = 0;
    }
    const char *s = strchr(spec, ':');
    if (!s)
        return 0;
    s++;
    if (!*s)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: empty parameter list after ':'", what);
    while (*s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        size_t klen = eq ? (size_t)(eq - s) : len;
        size_t i = 0;
        for (; i < np; i++)
            if (strlen(ps[i].name) == klen && !memcmp(ps[i].name, s, klen))
                break;
        if (i < np) {
            char buf[64], *end;
            size_t vlen = len - klen - (eq ? 1 : 0);
            if (!eq || vlen == 0 || vlen >= sizeof buf)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s: expected %s=value", what,
                                    ps[i].name, ps[i].name);
            if (ps[i].given)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s given twice", what,
                                    ps[i].name);
            memcpy(buf, eq + 1, vlen);
            buf[vlen] = '\0';
            double v = strtod(buf, &end);
            if (end == buf || *end || !isfinite(v) || v < ps[i].lo || v > ps[i].hi)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: parameter %s=%s out of range [%g, %g]",
                                    what, ps[i].name, buf, ps[i].lo, ps[i].hi);
            ps[i].val = v;
            ps[i].given = 1;
        } else {
            size_t r = strlen(rest);
            if (r + len + 2 > restsz)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: spec too long", what);
            if (r)
                rest[r++] = ',';
            memcpy(rest + r, s, len);
            rest[r + len] = '\0';
        }
        if (!comma)
            break;
        s = comma + 1;
        if (!*s)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s: trailing ',' in spec", what);
    }
    return 0;
}

#endif
