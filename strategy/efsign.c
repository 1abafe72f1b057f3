/* Strategy "efsign": dist-EF-blockSGDM (Zheng, Huang, Kwok, NeurIPS 2019,
 * Algorithm 4), two-way compressed with the blockwise scaled sign codec
 * (codec/efsign.c).
 *
 * Worker i, step t (paper lines 5-9), with the stepsize folded in:
 *   m      = mu·m + g                       (g = the step's gradient sum / rows)
 *   p      = lr·(mu·m + g) + e              (Nesterov; e is lr·e_paper)
 *   send     C(p)                           (efsign codec, ef=0)
 *   e      = p − C(p)                       (exactly what compression dropped)
 * Because C is homogeneous, C(lr·x) = lr·C(x): the message is lr times the
 * paper's Δ_{t,i}, and e is lr times the paper's e_{t,i}. The paper's
 * η_{t-1}/η_t factor is 1 for the constant stepsize used here.
 *
 * Aggregator (lines 10-12): sums the decoded messages; FSGD_OPT_APPLY makes
 * θ −= sum / M, the paper's average; the downlink codes Δ = θ − ρ with the
 * same codec, which is the server's compress(avg + ẽ) (strategy/FORMAT.md,
 * "efsign": the algebra).
 *
 * Sparse gradients: with lazy=1 (default) momentum and residual move only
 * on the keys of the step's gradient, as fsgd's sparse Adam does (the
 * paper's vectors are dense; a dense momentum makes every key ever seen part
 * of every message). A key last touched s steps ago has its momentum
 * decayed by mu^(s-1) first, the value the dense recurrence m = mu·m + 0
 * gives it (without that, a rare key would come back with momentum that
 * should have faded long ago); the moves dense momentum would have made in
 * between are not made. The residual is never decayed: it is mass owed.
 * lazy=0 is the paper verbatim: every key whose momentum or residual is
 * nonzero is in p, so the message covers them all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "strategy_internal.h"

enum { SP_MU, SP_LR, SP_LAZY, SP_N };
static const fsgd_sparam_def_t efsign_params[SP_N] = {
    /* mu 0.5, lr 0.5: measured (strategy/FORMAT.md, "efsign"); the paper's
     * mu = 0.9 with blocks over sparse keys diverged on the dist_net data */
    {"mu", 0, 0, 0.999, 0.5, "measured (strategy/FORMAT.md)"},
    {"lr", 0, 1e-9, 1e6, 0.5, "measured (strategy/FORMAT.md)"},
    {"lazy", 1, 0, 1, 1, "1: momentum moves on the step's keys only, as fsgd's sparse Adam"},
};

typedef struct efsign_worker {
    uint64_t dim;
    float mu, lr;
    int lazy;
    fsgd_codec_t *codec;
    float *m, *e;          /* dim each */
    uint32_t *last;        /* lazy=1: the step that last touched each key (0: never) */
    uint32_t *last_old;    /* over K, for undo */
    uint32_t t;            /* steps encoded (lazy=1) */
    uint32_t *sup, *sup_old; /* lazy=0: keys with m or e nonzero, increasing */
    size_t nsup, nsup_old;
    fsgd_sparse_t p;       /* this step's keys K and p over them */
    float *m_old, *e_old;  /* m, e over K before the step (undo) */
    size_t cap_old;
    fsgd_sparse_t dec;     /* own message decoded */
    size_t nres, nres_old; /* keys with e != 0 */
    int sent;
} efsign_worker_t;

/* Codec spec and strategy parameters of a strategy spec. */
static int efsign_split(const char *spec, double *ps, char *codec_spec, size_t sz, char *err, size_t errsz)
{
    char rest[160];
    FSGD_TRY(fsgd_sparams_parse("efsign", spec, efsign_params, SP_N, ps, NULL, rest, sizeof rest, err, errsz));
    if (strstr(rest, "ef="))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "strategy efsign: parameter ef: the strategy keeps its own error feedback");
    snprintf(codec_spec, sz, "efsign%s%s", rest[0] ? ":" : "", rest);
    return 0;
}

static int efsign_check(const char *spec, uint64_t dim, char *err, size_t errsz)
{
    double ps[SP_N];
    char cs[192];
    FSGD_TRY(efsign_split(spec, ps, cs, sizeof cs, err, errsz));
    fsgd_codec_t *c = fsgd_codec_new(cs, dim, err, errsz);
    if (!c)
        return FSGD_E_ARG;
    fsgd_codec_destroy(c);
    return 0;
}

static void efsign_worker_destroy(void *p)
{
    efsign_worker_t *w = p;
    if (!w)
        return;
    fsgd_codec_destroy(w->codec);
    free(w->m);
    free(w->e);
    free(w->sup);
    free(w->sup_old);
    free(w->m_old);
    free(w->e_old);
    free(w->last);
    free(w->last_old);
    fsgd_sparse_free(&w->p);
    fsgd_sparse_free(&w->dec);
    free(w);
}

static void *efsign_worker_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    double ps[SP_N];
    char cs[192], cs2[200];
    if (efsign_split(spec, ps, cs, sizeof cs, err, errsz) < 0)
        return NULL;
    snprintf(cs2, sizeof cs2, "%s%sef=0", cs, strchr(cs, ':') ? "," : ":");
    efsign_worker_t *w = calloc(1, sizeof *w);
    if (!w) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy efsign: out of memory");
        return NULL;
    }
    w->dim = dim;
    w->mu = (float)ps[SP_MU];
    w->lr = (float)ps[SP_LR];
    w->lazy = (int)ps[SP_LAZY];
    w->codec = fsgd_codec_new(cs2, dim, err, errsz);
    if (!w->codec) {
        efsign_worker_destroy(w);
        return NULL;
    }
    w->m = calloc(dim ? dim : 1, sizeof *w->m);
    w->e = calloc(dim ? dim : 1, sizeof *w->e);
    if (w->lazy)
        w->last = calloc(dim ? dim : 1, sizeof *w->last);
    if (!w->m || !w->e || (w->lazy && !w->last)) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy efsign: out of memory for %llu weights",
                     (unsigned long long)dim);
        efsign_worker_destroy(w);
        return NULL;
    }
    return w;
}

static size_t efsign_bound(const void *p, size_t n)
{
    const efsign_worker_t *w = p;
    size_t k = n + (w->lazy ? 0 : w->nsup);
    return fsgd_codec_bound(w->codec, k > w->dim ? (size_t)w->dim : k);
}

/* Puts m and e over K back to what they were before the step. */
static void efsign_restore(efsign_worker_t *w, size_t nk)
{
    for (size_t i = 0; i < nk; i++) {
        w->m[w->p.keys[i]] = w->m_old[i];
        w->e[w->p.keys[i]] = w->e_old[i];
        if (w->lazy)
            w->last[w->p.keys[i]] = w->last_old[i];
    }
    w->nres = w->nres_old;
    if (w->lazy)
        w->t--;
}

/* Room for maxk entries in p and in the undo arrays. 0 or FSGD_E_NOMEM. */
static int efsign_reserve(efsign_worker_t *w, size_t maxk, char *err, size_t errsz)
{
    if (fsgd_sparse_reserve(&w->p, maxk) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy efsign: out of memory");
    if (maxk > w->cap_old) {
        float *a = realloc(w->m_old, (maxk + 1) * sizeof *a), *b = a ? realloc(w->e_old, (maxk + 1) * sizeof *b) : NULL;
        uint32_t *c = b ? realloc(w->last_old, (maxk + 1) * sizeof *c) : NULL;
        if (a)
            w->m_old = a;
        if (b)
            w->e_old = b;
        if (!c)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy efsign: out of memory");
        w->last_old = c;
        w->cap_old = maxk;
    }
    return 0;
}

/* K = keys(g) (lazy) or keys(g) ∪ support; the momentum step and p over K
 * (paper lines 5-6), each key's old m and e kept for efsign_restore. 0, or
 * FSGD_E_NONFINITE with the step undone. */
static int efsign_momentum(efsign_worker_t *w, const uint32_t *keys, const float *vals, size_t n, uint64_t rows,
                           char *err, size_t errsz)
{
    double inv = 1.0 / (double)(rows ? rows : 1);
    size_t i = 0, j = 0, nk = 0, ns = w->lazy ? 0 : w->nsup;
    w->nres_old = w->nres;
    if (w->lazy)
        w->t++;
    while (i < n || j < ns) {
        uint32_t k;
        float g = 0;
        if (j == ns || (i < n && keys[i] < w->sup[j])) {
            k = keys[i];
            g = (float)(vals[i++] * inv);
        } else if (i == n || w->sup[j] < keys[i]) {
            k = w->sup[j++];
        } else {
            k = keys[i];
            g = (float)(vals[i++] * inv);
            j++;
        }
        float mo = w->m[k], eo = w->e[k], md = mo;
        if (w->lazy) {
            uint32_t gap = w->last[k] ? w->t - w->last[k] : 1;
            if (gap > 1 && mo != 0)
                md = mo * powf(w->mu, (float)(gap - 1)); /* m = mu·m + 0 for the gap-1 steps missed */
            w->last_old[nk] = w->last[k];
            w->last[k] = w->t;
        }
        float mn = w->mu * md + g;
        float pv = w->lr * (w->mu * mn + g) + eo;
        w->p.keys[nk] = k;
        w->p.vals[nk] = pv;
        w->m_old[nk] = mo;
        w->e_old[nk++] = eo;
        w->m[k] = mn;
        if (!isfinite(pv) || !isfinite(mn)) {
            efsign_restore(w, nk);
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "strategy efsign: momentum step at key %u not finite",
                                k);
        }
    }
    w->p.n = nk;
    return 0;
}

/* e = p − C(p) (line 9): the decoded message's keys are a subset of K. */
static void efsign_residual(efsign_worker_t *w)
{
    size_t d = 0;
    for (size_t t = 0; t < w->p.n; t++) {
        uint32_t k = w->p.keys[t];
        float c = 0;
        if (d < w->dec.n && w->dec.keys[d] == k)
            c = w->dec.vals[d++];
        float en = w->p.vals[t] - c;
        w->nres += (en != 0) - (w->e_old[t] != 0);
        w->e[k] = en;
    }
}

/* Not lazy: the next support is K's keys whose m or e is nonzero (the
 * previous one kept for an undo). 0 or -1 (out of memory). */
static int efsign_next_support(efsign_worker_t *w)
{
    const size_t nk = w->p.n;
    uint32_t *ns2 = malloc((nk + 1) * sizeof *ns2);
    if (!ns2)
        return -1;
    size_t o = 0;
    for (size_t t = 0; t < nk; t++)
        if (w->m[w->p.keys[t]] != 0 || w->e[w->p.keys[t]] != 0)
            ns2[o++] = w->p.keys[t];
    free(w->sup_old);
    w->sup_old = w->sup;
    w->nsup_old = w->nsup;
    w->sup = ns2;
    w->nsup = o;
    return 0;
}

static int efsign_encode(void *pw, const uint32_t *keys, const float *vals, size_t n, uint64_t rows,
                         fsgd_outbuf_t *out, char *err, size_t errsz)
{
    efsign_worker_t *w = pw;
    out->len = 0;
    for (size_t i = 0; i < n; i++)
        if (keys[i] >= w->dim || (i && keys[i] <= keys[i - 1]) || !isfinite(vals[i]))
            return fsgd_err_fmt(err, errsz, isfinite(vals[i]) ? FSGD_E_ARG : FSGD_E_NONFINITE,
                                "strategy efsign: entry %zu (key %u, value %g) not increasing, >= dim or not finite",
                                i, keys[i], (double)vals[i]);
    FSGD_TRY(efsign_reserve(w, n + (w->lazy ? 0 : w->nsup), err, errsz));
    FSGD_TRY(efsign_momentum(w, keys, vals, n, rows, err, errsz));
    const size_t nk = w->p.n;
    int rc = fsgd_codec_encode(w->codec, w->p.keys, w->p.vals, nk, out, err, errsz);
    if (rc == 0)
        rc = fsgd_codec_decode(out->dst, out->len, w->dim, &w->dec, err, errsz);
    if (rc < 0) {
        efsign_restore(w, nk);
        out->len = 0;
        return rc;
    }
    efsign_residual(w);
    if (!w->lazy && efsign_next_support(w) < 0) {
        efsign_restore(w, nk);
        out->len = 0;
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy efsign: out of memory");
    }
    w->sent = 1;
    return 0;
}

static int efsign_after_step(void *p, int applied, const uint8_t *section, size_t len, char *err, size_t errsz)
{
    efsign_worker_t *w = p;
    int restored = 0;
    if (w->sent && !applied) {
        /* The message was not applied: its rows come round again, so the
         * step never happened for momentum and residual either. */
        efsign_restore(w, w->p.n);
        if (!w->lazy) {
            uint32_t *t = w->sup;
            w->sup = w->sup_old;
            w->nsup = w->nsup_old;
            w->sup_old = t;
        }
        restored = 1;
    }
    w->sent = 0;
    return restored;
}

static int efsign_reset(void *p)
{
    efsign_worker_t *w = p;
    int had = w->nres > 0;
    memset(w->m, 0, w->dim * sizeof *w->m);
    memset(w->e, 0, w->dim * sizeof *w->e);
    if (w->lazy)
        memset(w->last, 0, w->dim * sizeof *w->last);
    w->t = 0;
    w->nres = 0;
    w->nsup = 0;
    w->sent = 0;
    return had;
}

static size_t efsign_residual_entries(const void *p) { return ((const efsign_worker_t *)p)->nres; }

static void *efsign_agg_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    double ps[SP_N];
    char cs[192];
    if (efsign_split(spec, ps, cs, sizeof cs, err, errsz) < 0)
        return NULL;
    fsgd_codec_agg_t *a = fsgd_codec_agg_new(cs, dim, seed, err, errsz);
    if (a) /* the downlink's codec: the same compressor, without "ef" (the downlink sets ef=0) */
        snprintf(a->spec, sizeof a->spec, "%s", cs);
    return a;
}

const fsgd_strategy_vt_t fsgd_strategy_vt_efsign = {
    .name = "efsign",
    .check = efsign_check,
    .worker_new = efsign_worker_new,
    .worker_destroy = efsign_worker_destroy,
    .device_codec = NULL,
    .bound = efsign_bound,
    .encode = efsign_encode,
    .lockstep = 1,
    .after_step = efsign_after_step,
    .reset = efsign_reset,
    .residual_entries = efsign_residual_entries,
    .agg_new = efsign_agg_new,
    .agg_destroy = fsgd_codec_agg_destroy,
    .add = fsgd_codec_agg_add,
    .take = fsgd_codec_agg_take,
    .optimizer = FSGD_OPT_APPLY,
    .downlink_spec = fsgd_codec_agg_downlink_spec,
};
