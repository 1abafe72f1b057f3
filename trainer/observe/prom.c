/* The metrics registry and the Prometheus text exposition (prom.h).
 * One mutex guards every value: updates are a few stores, and a scrape
 * renders all of them at once, so a scrape never sees half of an update. */
#include "fsgd/prom.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "observe_testing.h"

typedef struct family {
    char *name, *help;
    fsgd_prom_type_t type;
} family_t;

typedef struct series {
    int family;
    char *labels; /* rendered: a="x",b="y" (empty: no labels) */
    double value;
    /* histogram */
    int nb;
    double bounds[FSGD_PROM_MAX_BUCKETS];
    unsigned long long counts[FSGD_PROM_MAX_BUCKETS + 1]; /* per bucket, not cumulative; last = +Inf */
    double sum;
    unsigned long long count;
} series_t;

struct fsgd_prom {
    pthread_mutex_t mu;
    family_t *fam;
    int nfam, capfam;
    series_t *ser;
    int nser, capser;
};

/* --- a growable string --- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf_t;

static void sb_put(sbuf_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 1024;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf_t *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_fmt(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_fmt(sbuf_t *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A sample value as Prometheus reads it (Go's ParseFloat): NaN, +Inf, -Inf,
 * integers without a fraction, else the shortest of %.15g / %.17g that
 * reads back exactly. */
static void sb_value(sbuf_t *b, double v)
{
    if (isnan(v)) {
        sb_str(b, "NaN");
        return;
    }
    if (isinf(v)) {
        sb_str(b, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        sb_fmt(b, "%.0f", v);
        return;
    }
    char t[64];
    snprintf(t, sizeof t, "%.15g", v);
    if (strtod(t, NULL) != v)
        snprintf(t, sizeof t, "%.17g", v);
    sb_str(b, t);
}

/* --- names --- */

static int name_ok(const char *s, int colon)
{
    if (!s || !*s)
        return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
        if (!alpha && !(p > s && c >= '0' && c <= '9'))
            return 0;
    }
    return 1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Escapes for a label value (\\, \", \n) or, with help set, for HELP text
 * (\\, \n). */
static void sb_escaped(sbuf_t *b, const char *s, int help)
{
    for (; *s; s++) {
        if (*s == '\\')
            sb_str(b, "\\\\");
        else if (*s == '\n')
            sb_str(b, "\\n");
        else if (*s == '"' && !help)
            sb_str(b, "\\\"");
        else
            sb_put(b, s, 1);
    }
}

/* --- registry --- */

fsgd_prom_t *fsgd_prom_new(void)
{
    fsgd_prom_t *r = calloc(1, sizeof *r);
    if (r && pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        r = NULL;
    }
    return r;
}

void fsgd_prom_destroy(fsgd_prom_t *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nfam; i++) {
        free(r->fam[i].name);
        free(r->fam[i].help);
    }
    for (int i = 0; i < r->nser; i++)
        free(r->ser[i].labels);
    free(r->fam);
    free(r->ser);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static const char *type_name(fsgd_prom_type_t t)
{
    return t == FSGD_PROM_COUNTER ? "counter" : t == FSGD_PROM_GAUGE ? "gauge" : "histogram";
}

/* Checks and renders the labels; 0 or FSGD_E_ARG/NOMEM. */
static int render_labels(const char *const *labels, fsgd_prom_type_t type, char **out, char *err, size_t errsz)
{
    sbuf_t b = {0};
    sb_str(&b, "");
    for (int i = 0; labels && labels[i]; i += 2) {
        const char *k = labels[i], *v = labels[i + 1];
        if (!v) {
            free(b.p);
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "label '%s' has no value", k);
        }
        if (!name_ok(k, 0) || !strncmp(k, "__", 2) || (type == FSGD_PROM_HISTOGRAM && !strcmp(k, "le"))) {
            free(b.p);
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "bad label name '%s'", k);
        }
        for (int j = 0; j < i; j += 2)
            if (!strcmp(labels[j], k)) {
                free(b.p);
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "label '%s' given twice", k);
            }
        if (i)
            sb_str(&b, ",");
        sb_str(&b, k);
        sb_str(&b, "=\"");
        sb_escaped(&b, v, 0);
        sb_str(&b, "\"");
    }
    if (b.oom) {
        free(b.p);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    }
    *out = b.p;
    return 0;
}

static int add_locked(fsgd_prom_t *r, fsgd_prom_type_t type, const char *name, const char *help,
                      const char *const *labels, const double *bounds, int nb, char *err, size_t errsz)
{
    if (!name_ok(name, 1))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "bad metric name '%s'", name ? name : "(null)");
    if (type == FSGD_PROM_COUNTER && !ends_with(name, "_total"))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "counter '%s': a counter's name ends in _total", name);
    if (type != FSGD_PROM_COUNTER && ends_with(name, "_total"))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s '%s': only counters end in _total", type_name(type), name);
    if (type == FSGD_PROM_HISTOGRAM) {
        if (nb < 1 || nb > FSGD_PROM_MAX_BUCKETS)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "histogram '%s': %d buckets (1..%d)", name, nb,
                                FSGD_PROM_MAX_BUCKETS);
        for (int i = 0; i < nb; i++)
            if (!isfinite(bounds[i]) || (i && !(bounds[i] > bounds[i - 1])))
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "histogram '%s': bucket bounds must be finite and increasing", name);
    }
    int f = 0;
    while (f < r->nfam && strcmp(r->fam[f].name, name))
        f++;
    /* a family's generated names (x_bucket, x_sum, x_count) are taken too */
    for (int i = 0; i < r->nfam && f == r->nfam; i++) {
        const char *o = r->fam[i].name;
        size_t n = strlen(o);
        int clash = 0;
        if (r->fam[i].type == FSGD_PROM_HISTOGRAM && !strncmp(name, o, n))
            clash = !strcmp(name + n, "_bucket") || !strcmp(name + n, "_sum") || !strcmp(name + n, "_count");
        size_t m = strlen(name);
        if (type == FSGD_PROM_HISTOGRAM && !strncmp(o, name, m))
            clash |= !strcmp(o + m, "_bucket") || !strcmp(o + m, "_sum") || !strcmp(o + m, "_count");
        if (clash)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "metric '%s' clashes with histogram names of '%s'", name,
                                n > m ? name : o);
    }
    if (f < r->nfam && r->fam[f].type != type)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "metric '%s' is a %s, not a %s", name, type_name(r->fam[f].type),
                            type_name(type));
    char *lab = NULL;
    int rc = render_labels(labels, type, &lab, err, errsz);
    if (rc < 0)
        return rc;
    for (int i = 0; i < r->nser; i++)
        if (r->ser[i].family == f && f < r->nfam && !strcmp(r->ser[i].labels, lab)) {
            rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "metric %s{%s} added twice", name, lab);
            free(lab);
            return rc;
        }
    if (f == r->nfam) {
        if (r->nfam == r->capfam) {
            int nc = r->capfam ? 2 * r->capfam : 16;
            family_t *nf = realloc(r->fam, (size_t)nc * sizeof *nf);
            if (!nf)
                goto oom;
            r->fam = nf;
            r->capfam = nc;
        }
        family_t *fm = &r->fam[f];
        fm->name = strdup(name);
        fm->help = strdup(help ? help : "");
        fm->type = type;
        if (!fm->name || !fm->help) {
            free(fm->name);
            free(fm->help);
            goto oom;
        }
        r->nfam++;
    }
    if (r->nser == r->capser) {
        int nc = r->capser ? 2 * r->capser : 32;
        series_t *ns = realloc(r->ser, (size_t)nc * sizeof *ns);
        if (!ns)
            goto oom;
        r->ser = ns;
        r->capser = nc;
    }
    series_t *s = &r->ser[r->nser];
    memset(s, 0, sizeof *s);
    s->family = f;
    s->labels = lab;
    s->nb = type == FSGD_PROM_HISTOGRAM ? nb : 0;
    for (int i = 0; i < s->nb; i++)
        s->bounds[i] = bounds[i];
    return r->nser++;
oom:
    free(lab);
    return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
}

int fsgd_prom_add(fsgd_prom_t *r, fsgd_prom_type_t type, const char *name, const char *help,
                  const char *const *labels, char *err, size_t errsz)
{
    if (type == FSGD_PROM_HISTOGRAM)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "histogram '%s': use fsgd_prom_add_histogram", name);
    pthread_mutex_lock(&r->mu);
    int rc = add_locked(r, type, name, help, labels, NULL, 0, err, errsz);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int fsgd_prom_add_histogram(fsgd_prom_t *r, const char *name, const char *help, const char *const *labels,
                            const double *bounds, int n, char *err, size_t errsz)
{
    pthread_mutex_lock(&r->mu);
    int rc = add_locked(r, FSGD_PROM_HISTOGRAM, name, help, labels, bounds, n, err, errsz);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static series_t *scalar(fsgd_prom_t *r, int id)
{
    if (id < 0 || id >= r->nser || r->fam[r->ser[id].family].type == FSGD_PROM_HISTOGRAM)
        return NULL;
    return &r->ser[id];
}

void fsgd_prom_set(fsgd_prom_t *r, int id, double v)
{
    pthread_mutex_lock(&r->mu);
    series_t *s = scalar(r, id);
    if (s && (r->fam[s->family].type == FSGD_PROM_GAUGE || v > s->value))
        s->value = v;
    pthread_mutex_unlock(&r->mu);
}

void fsgd_prom_inc(fsgd_prom_t *r, int id, double d)
{
    pthread_mutex_lock(&r->mu);
    series_t *s = scalar(r, id);
    if (s && (r->fam[s->family].type == FSGD_PROM_GAUGE || d > 0))
        s->value += d;
    pthread_mutex_unlock(&r->mu);
}

double fsgd_prom_get(fsgd_prom_t *r, int id)
{
    pthread_mutex_lock(&r->mu);
    series_t *s = scalar(r, id);
    double v = s ? s->value : NAN;
    pthread_mutex_unlock(&r->mu);
    return v;
}

void fsgd_prom_observe(fsgd_prom_t *r, int id, double v)
{
    if (isnan(v))
        return;
    pthread_mutex_lock(&r->mu);
    if (id >= 0 && id < r->nser && r->fam[r->ser[id].family].type == FSGD_PROM_HISTOGRAM) {
        series_t *s = &r->ser[id];
        int b = 0;
        while (b < s->nb && v > s->bounds[b]) /* le: v <= bound */
            b++;
        s->counts[b]++;
        s->count++;
        s->sum += v;
    }
    pthread_mutex_unlock(&r->mu);
}

/* name{labels[,extra]} with braces only when there is a label. */
static void sb_series(sbuf_t *b, const char *name, const char *suffix, const char *labels, const char *extra)
{
    sb_str(b, name);
    sb_str(b, suffix);
    if (*labels || extra) {
        sb_str(b, "{");
        sb_str(b, labels);
        if (extra) {
            if (*labels)
                sb_str(b, ",");
            sb_str(b, extra);
        }
        sb_str(b, "}");
    }
    sb_str(b, " ");
}

int fsgd_prom_render(fsgd_prom_t *r, char **out, size_t *len)
{
    sbuf_t b = {0};
    sb_str(&b, "");
    pthread_mutex_lock(&r->mu);
    for (int f = 0; f < r->nfam; f++) {
        const family_t *fm = &r->fam[f];
        sb_fmt(&b, "# HELP %s ", fm->name);
        sb_escaped(&b, fm->help, 1);
        sb_fmt(&b, "\n# TYPE %s %s\n", fm->name, type_name(fm->type));
        for (int i = 0; i < r->nser; i++) {
            const series_t *s = &r->ser[i];
            if (s->family != f)
                continue;
            if (fm->type != FSGD_PROM_HISTOGRAM) {
                sb_series(&b, fm->name, "", s->labels, NULL);
                sb_value(&b, s->value);
                sb_str(&b, "\n");
                continue;
            }
            unsigned long long cum = 0;
            for (int k = 0; k <= s->nb; k++) {
                cum += s->counts[k];
                sbuf_t le = {0};
                sb_str(&le, "le=\"");
                if (k < s->nb)
                    sb_value(&le, s->bounds[k]);
                else
                    sb_str(&le, "+Inf");
                sb_str(&le, "\"");
                if (le.oom)
                    b.oom = 1;
                else
                    sb_series(&b, fm->name, "_bucket", s->labels, le.p);
                free(le.p);
                sb_fmt(&b, "%llu\n", cum);
            }
            sb_series(&b, fm->name, "_sum", s->labels, NULL);
            sb_value(&b, s->sum);
            sb_str(&b, "\n");
            sb_series(&b, fm->name, "_count", s->labels, NULL);
            sb_fmt(&b, "%llu\n", s->count);
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (b.oom) {
        free(b.p);
        return FSGD_E_NOMEM;
    }
    *out = b.p;
    *len = b.n;
    return 0;
}
