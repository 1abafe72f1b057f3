/* Strategy "gradiveq" (Yu et al., "GradiVeQ: Vector Quantization for
 * Bandwidth-Efficient Gradient Aggregation in Distributed CNN Training").
 *
 * A linear PCA compressor on one dense slice of the model: the K keys that
 * the aggregator saw touched in the most uncompressed steps (ties: smaller
 * key), which in a sparse linear model are the frequent features every step
 * touches densely. Keys outside the slice always go through FastSGD.
 *
 * Cycle (sec. 3, "System Overview"; Fig. 6 with s = infinity):
 *   warm-up: `warmup` steps, whole gradient through FastSGD, keys counted;
 *   sampling: `lt` (L_t) steps, still FastSGD (the paper quantizes these
 *     rounds with QSGD and runs PCA on the quantized sums, sec. 4); the
 *     aggregated slice of each, divided by the step's rows, is a sample;
 *   PCA (gradiveq_pca.c): mu, U_d with d from the loss threshold lambda
 *     (eq. 6), capped at `components`; U goes to the workers in the feedback
 *     section of the step's model message, with a new basis id;
 *   compressed: `lc` (L_c) steps; worker n sends p_n = U_dᵀ g_n over the
 *     slice (d floats) and the rest of its gradient through FastSGD; the
 *     aggregator sums the p_n (compressed-domain aggregation, eq. 4) and
 *     decompresses once, ĝ = U_d Σp_n + R (I - U_d U_dᵀ) mu (eq. 5), R the
 *     rows of the projecting senders;
 *   then the slice is chosen again and a new sampling phase starts (U is
 *     recomputed every L_t + L_c steps, as the paper does).
 * Eq. (3)-(5) centre each worker's slice by mu/N; sending Uᵀg_n and adding
 * the centring back once at the aggregator gives the same ĝ for N senders
 * and needs no N on the workers (strategy/FORMAT.md). Messages and section:
 * strategy/FORMAT.md, "gradiveq". */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/le.h"
#include "gradiveq.h"
#include "gradiveq_pca.h"
#include "params.h"
#include "strategy_internal.h"

enum { P_SLICE, P_LT, P_LC, P_WARMUP, P_COMPONENTS, P_LAMBDA, P_N };

static const fsgd_sparam_def_t gv_defs[P_N] = {
    {"slice", 1, 1, FSGD_GV_MAX_K, 128, "K: ours (the paper's K = multiple of F*D, e.g. 768, sec. 3)"},
    {"lt", 1, 2, 100000, 100, "L_t = 100, sec. 3 and 4"},
    {"lc", 1, 1, 10000000, 400, "L_c = 400, sec. 3 and 4"},
    {"warmup", 1, 0, 10000000, 100, "ours (the paper: 2,500 of 45,000 CNN iterations, sec. 4)"},
    {"components", 1, 0, FSGD_GV_MAX_K, 0, "cap on d; 0: d from lambda alone (sec. 3)"},
    {"lambda", 0, 0, 0.999999, 0.01, "lambda = 0.01, sec. 4"},
};

#define INNER_SPEC "fastsgd"

static int gv_parse(const char *spec, double *v, char *err, size_t errsz)
{
    FSGD_TRY(fsgd_sparams_parse("gradiveq", spec, gv_defs, P_N, v, NULL, NULL, 0, err, errsz));
    if (v[P_COMPONENTS] > v[P_SLICE])
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy gradiveq: components=%g above slice=%g",
                            v[P_COMPONENTS], v[P_SLICE]);
    return 0;
}

static int gv_check(const char *spec, uint64_t dim, char *err, size_t errsz)
{
    double v[P_N];
    return gv_parse(spec, v, err, errsz);
}

/* ---- section: the mode of the next step, and a new basis when there is one ---- */

int fsgd_gv_section_parse(const uint8_t *s, size_t len, uint64_t dim, fsgd_gv_section_t *out, char *err,
                          size_t errsz)
{
    memset(out, 0, sizeof *out);
    if (len < FSGD_GV_SECTION_FIXED + 4)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field gradiveq.section at offset 0: %zu bytes < %d", len,
                            FSGD_GV_SECTION_FIXED + 4);
    if (s[0] != 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field gradiveq.version at offset 0: %u (supported: 1)", s[0]);
    uint32_t want = fsgd_le_get32(s + len - 4), got = fsgd_crc32c(0, s, len - 4);
    if (want != got)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field gradiveq.crc32c at offset %zu: stored %08x, computed %08x",
                            len - 4, want, got);
    if (s[1] > 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field gradiveq.mode at offset 1: %u (0 raw, 1 projections)",
                            s[1]);
    if (s[2] | s[3])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field gradiveq.reserved at offset 2: not zero");
    out->mode = s[1];
    out->basis = fsgd_le_get32(s + 4);
    out->K = fsgd_le_get32(s + 8);
    out->d = fsgd_le_get32(s + 12);
    if (out->mode == 1 && out->basis == 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field gradiveq.basis_id at offset 4: 0 in projection mode");
    if (out->K > FSGD_GV_MAX_K || (out->K > 0 && (out->mode != 1 || out->K > dim)))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field gradiveq.K at offset 8: %u (dim %llu, mode %u)", out->K,
                            (unsigned long long)dim, out->mode);
    if (out->K == 0 ? out->d != 0 : out->d == 0 || out->d > out->K)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field gradiveq.d at offset 12: %u with K = %u", out->d, out->K);
    uint64_t need = FSGD_GV_SECTION_FIXED + 4 * (uint64_t)out->K + 4 * (uint64_t)out->K * out->d + 4;
    if (need != len)
        return fsgd_err_fmt(err, errsz, need > len ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field gradiveq.K at offset 8: K = %u, d = %u need %llu bytes, section has %zu", out->K,
                            out->d, (unsigned long long)need, len);
    const uint8_t *kp = s + FSGD_GV_SECTION_FIXED;
    for (uint32_t i = 0; i < out->K; i++) {
        uint32_t k = fsgd_le_get32(kp + 4 * (size_t)i);
        if (k >= dim || (i > 0 && k <= fsgd_le_get32(kp + 4 * (size_t)(i - 1))))
            return fsgd_err_fmt(err, errsz, k >= dim ? FSGD_E_RANGE : FSGD_E_FORMAT,
                                "field gradiveq.keys at offset %zu: key %u not below dim %llu and above the previous",
                                FSGD_GV_SECTION_FIXED + 4 * (size_t)i, k, (unsigned long long)dim);
    }
    const uint8_t *up = kp + 4 * (size_t)out->K;
    for (uint64_t i = 0; i < (uint64_t)out->K * out->d; i++) {
        float u = fsgd_le_getf32(up + 4 * i);
        if (!(fabsf(u) <= 1.0f))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field gradiveq.U at offset %zu: %g is not a unit vector's entry",
                                (size_t)(up - s) + 4 * (size_t)i, (double)u);
    }
    out->keys_le = kp;
    out->U_le = up;
    return 0;
}

/* ---- uplink container ---- */

int fsgd_gv_msg_parse(const uint8_t *m, size_t len, uint64_t dim, fsgd_gv_msg_t *out, char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    if (len < FSGD_GV_MSG_FIXED + 4)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field header at offset 0: message of %zu bytes < %d", len,
                            FSGD_GV_MSG_FIXED + 4);
    if (memcmp(m, "FSGV", 4) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field magic at offset 0: not a gradiveq message");
    if (m[4] != 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_VERSION, "field version at offset 4: %u (supported: 1)", m[4]);
    uint32_t want = fsgd_le_get32(m + len - 4), got = fsgd_crc32c(0, m, len - 4);
    if (want != got)
        return fsgd_err_fmt(err, errsz, FSGD_E_CRC, "field crc32c at offset %zu: stored %08x, computed %08x", len - 4,
                            want, got);
    if (m[5] > 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mode at offset 5: %u (0 raw, 1 projections)", m[5]);
    if (fsgd_le_get16(m + 6) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field reserved at offset 6: not zero");
    uint64_t mdim = fsgd_le_get64(m + 8);
    if (mdim == 0 || mdim > (1ull << 32) || (dim && mdim != dim))
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "field dim at offset 8: %llu (expected %llu)",
                            (unsigned long long)mdim, (unsigned long long)dim);
    out->mode = m[5];
    out->basis = fsgd_le_get32(m + 16);
    out->d = fsgd_le_get32(m + 20);
    out->rows = fsgd_le_get64(m + 24);
    out->energy = fsgd_le_getf64(m + 32);
    uint32_t ilen = fsgd_le_get32(m + 40);
    if (out->mode == 0 ? out->basis != 0 || out->d != 0 || out->energy != 0
                       : out->basis == 0 || out->d == 0 || out->d > FSGD_GV_MAX_K)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field basis_id at offset 16: basis %u, d %u invalid in mode %u", out->basis, out->d,
                            out->mode);
    if (!(out->energy >= 0) || !isfinite(out->energy))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field energy at offset 32: %g", out->energy);
    uint64_t need = FSGD_GV_MSG_FIXED + (uint64_t)ilen + 4 * (uint64_t)out->d + 4;
    if (need != len)
        return fsgd_err_fmt(err, errsz, need > len ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field inner_len at offset 40: %u inner bytes and %u projections need %llu bytes, "
                            "message has %zu",
                            ilen, out->d, (unsigned long long)need, len);
    out->inner = m + FSGD_GV_MSG_FIXED;
    out->inner_len = ilen;
    out->proj_le = out->inner + ilen;
    for (uint32_t j = 0; j < out->d; j++) {
        float p = fsgd_le_getf32(out->proj_le + 4 * (size_t)j);
        if (!isfinite(p))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field projections at offset %zu: %g not finite",
                                FSGD_GV_MSG_FIXED + ilen + 4 * (size_t)j, (double)p);
    }
    return 0;
}

/* ---- worker ---- */

typedef struct gv_worker {
    fsgd_codec_worker_t *cw; /* FastSGD for everything outside the slice */
    uint64_t dim;
    int mode;                /* of the next encode */
    uint32_t basis, K, d;
    uint32_t *keys;          /* the slice, increasing */
    float *U;                /* K x d, column-major */
    float *x, *p;            /* scratch: the dense slice, its projections */
    fsgd_sparse_t rest;
    uint8_t *inner;          /* scratch for the inner message */
    size_t inner_cap;
} gv_worker_t;

static void gv_worker_destroy(void *p)
{
    gv_worker_t *w = p;
    if (!w)
        return;
    fsgd_codec_worker_destroy(w->cw);
    free(w->keys);
    free(w->U);
    free(w->x);
    free(w->p);
    free(w->inner);
    fsgd_sparse_free(&w->rest);
    free(w);
}

static void *gv_worker_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    double v[P_N];
    if (gv_parse(spec, v, err, errsz) < 0)
        return NULL;
    gv_worker_t *w = calloc(1, sizeof *w);
    if (!w) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gradiveq: out of memory");
        return NULL;
    }
    w->dim = dim;
    w->cw = fsgd_codec_worker_new(INNER_SPEC, dim, seed, err, errsz);
    if (!w->cw) {
        free(w);
        return NULL;
    }
    return w;
}

static size_t gv_bound(const void *p, size_t n)
{
    const gv_worker_t *w = p;
    return FSGD_GV_MSG_FIXED + fsgd_codec_worker_bound(w->cw, n) + 4 * (size_t)FSGD_GV_MAX_K + 4;
}

/* Makes the container around an inner message already at out + FIXED. */
static size_t gv_frame(uint8_t *out, uint64_t dim, int mode, uint32_t basis, uint32_t d, uint64_t rows, double energy,
                       size_t ilen, const float *proj)
{
    memcpy(out, "FSGV", 4);
    out[4] = 1;
    out[5] = (uint8_t)mode;
    fsgd_le_put16(out + 6, 0);
    fsgd_le_put64(out + 8, dim);
    fsgd_le_put32(out + 16, basis);
    fsgd_le_put32(out + 20, d);
    fsgd_le_put64(out + 24, rows);
    fsgd_le_putf64(out + 32, energy);
    fsgd_le_put32(out + 40, (uint32_t)ilen);
    size_t off = FSGD_GV_MSG_FIXED + ilen;
    for (uint32_t j = 0; j < d; j++)
        fsgd_le_putf32(out + off + 4 * (size_t)j, proj[j]);
    off += 4 * (size_t)d;
    fsgd_le_put32(out + off, fsgd_crc32c(0, out, off));
    return off + 4;
}

static int gv_encode(void *p, const uint32_t *keys, const float *vals, size_t n, uint64_t rows, fsgd_outbuf_t *out,
                     char *err, size_t errsz)
{
    gv_worker_t *w = p;
    out->len = 0;
    if (out->cap < FSGD_GV_MSG_FIXED + 4)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "gradiveq: buffer of %zu bytes", out->cap);
    /* the codec's message inside ours */
    fsgd_outbuf_t inner = {out->dst + FSGD_GV_MSG_FIXED, out->cap - FSGD_GV_MSG_FIXED - 4, 0};
    int proj = w->mode == 1 && w->K > 0;
    double energy = 0;
    if (proj && inner.cap < 4 * (size_t)w->d)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "gradiveq: buffer of %zu bytes", out->cap);
    if (!proj) {
        FSGD_TRY(fsgd_codec_worker_encode(w->cw, keys, vals, n, rows, &inner, err, errsz));
        out->len = gv_frame(out->dst, w->dim, 0, 0, 0, rows, 0, inner.len, NULL);
    } else {
        if (fsgd_sparse_reserve(&w->rest, n) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradiveq: out of memory");
        memset(w->x, 0, sizeof(float) * w->K);
        size_t r = 0, j = 0;
        for (size_t i = 0; i < n; i++) { /* both increasing: one merge */
            while (j < w->K && w->keys[j] < keys[i])
                j++;
            if (j < w->K && w->keys[j] == keys[i]) {
                if (!isfinite(vals[i]))
                    return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "gradiveq: value %g at key %u",
                                        (double)vals[i], keys[i]);
                w->x[j] = vals[i];
                energy += (double)vals[i] * vals[i];
            } else {
                w->rest.keys[r] = keys[i];
                w->rest.vals[r++] = vals[i];
            }
        }
        w->rest.n = r;
        inner.cap -= 4 * (size_t)w->d; /* the projection follows the codec's message */
        FSGD_TRY(fsgd_codec_worker_encode(w->cw, w->rest.keys, w->rest.vals, r, rows, &inner, err, errsz));
        /* p = U_dᵀ x (the paper's eq. 3 without the centring, which the aggregator adds back) */
        cblas_sgemv(CblasColMajor, CblasTrans, (int)w->K, (int)w->d, 1.0f, w->U, (int)w->K, w->x, 1, 0.0f, w->p, 1);
        for (uint32_t k = 0; k < w->d; k++)
            if (!isfinite(w->p[k]))
                return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "gradiveq: projection %u overflows", k);
        out->len = gv_frame(out->dst, w->dim, 1, w->basis, w->d, rows, energy, inner.len, w->p);
    }
    return 0;
}

static int gv_after_step(void *p, int applied, const uint8_t *section, size_t len, char *err, size_t errsz)
{
    gv_worker_t *w = p;
    if (len > 0) {
        fsgd_gv_section_t s;
        if (fsgd_gv_section_parse(section, len, w->dim, &s, err, errsz) < 0)
            return FSGD_E_FORMAT; /* state unchanged (strategy/FORMAT.md) */
        if (s.K > 0) { /* a new basis */
            uint32_t *k = malloc(sizeof(uint32_t) * s.K);
            float *U = malloc(sizeof(float) * (size_t)s.K * s.d), *x = malloc(sizeof(float) * s.K),
                  *pp = malloc(sizeof(float) * s.d);
            if (!k || !U || !x || !pp) {
                free(k), free(U), free(x), free(pp);
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradiveq: out of memory for a basis");
            }
            for (uint32_t i = 0; i < s.K; i++)
                k[i] = fsgd_le_get32(s.keys_le + 4 * (size_t)i);
            for (size_t i = 0; i < (size_t)s.K * s.d; i++)
                U[i] = fsgd_le_getf32(s.U_le + 4 * i);
            free(w->keys), free(w->U), free(w->x), free(w->p);
            w->keys = k, w->U = U, w->x = x, w->p = pp;
            w->K = s.K, w->d = s.d, w->basis = s.basis;
        }
        /* Projections only with the basis the aggregator names; otherwise raw
         * (always accepted) until the next basis arrives. */
        w->mode = s.mode == 1 && w->K > 0 && s.basis == w->basis;
    }
    return fsgd_codec_worker_after_step(w->cw, applied, NULL, 0, err, errsz);
}

/* A new aggregator generation: its basis ids start again at 1, so a basis
 * held from the old one must go (raw messages until the new one arrives). */
static int gv_reset(void *p)
{
    gv_worker_t *w = p;
    int had = w->K > 0;
    w->K = w->d = w->basis = 0;
    w->mode = 0;
    return fsgd_codec_worker_reset(w->cw) | had;
}
static size_t gv_residual(const void *p) { return fsgd_codec_worker_residual_entries(((const gv_worker_t *)p)->cw); }

/* ---- aggregator ---- */

enum { PH_WARMUP = 0, PH_SAMPLE = 1, PH_COMPRESS = 2 };

typedef struct gv_agg {
    fsgd_codec_agg_t *ca;   /* decodes the inner messages, owns the reducer */
    uint64_t dim;
    double v[P_N];
    int phase;
    uint64_t steps, in_phase;
    /* key counts over uncompressed steps: sorted keys, counts */
    uint32_t *ck, *cn;
    size_t n_counts, cap_counts;
    /* the slice and its basis */
    uint32_t K, d, basis;
    uint32_t *keys;
    float *U;               /* K x d column-major */
    double *cvec;           /* (I - U Uᵀ) mu per row */
    double *samples;        /* lt x K */
    double *mu, *eig;
    /* the step being reduced */
    double *P;              /* d sums of projections */
    uint64_t proj_rows;
    uint32_t n_proj;
    double e_in, e_kept;    /* Σ slice energy, Σ ||p_n||² of projecting senders */
    float *ghat;
    /* reports of the step last taken */
    double r_energy, r_ratio, r_lambda_energy;
    uint32_t r_proj;
    uint8_t *section;
    size_t section_len, section_cap;
    char err[160];
} gv_agg_t;

static void gv_agg_destroy(void *p)
{
    gv_agg_t *a = p;
    if (!a)
        return;
    fsgd_codec_agg_destroy(a->ca);
    free(a->ck), free(a->cn), free(a->keys), free(a->U), free(a->cvec), free(a->samples), free(a->mu), free(a->eig);
    free(a->P), free(a->ghat), free(a->section);
    free(a);
}

static void *gv_agg_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    gv_agg_t *a = calloc(1, sizeof *a);
    if (!a) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gradiveq: out of memory");
        return NULL;
    }
    if (gv_parse(spec, a->v, err, errsz) < 0) {
        free(a);
        return NULL;
    }
    a->dim = dim;
    a->ca = fsgd_codec_agg_new(INNER_SPEC, dim, seed, err, errsz);
    if (!a->ca) {
        free(a);
        return NULL;
    }
    size_t K = (size_t)a->v[P_SLICE], L = (size_t)a->v[P_LT];
    a->keys = malloc(sizeof(uint32_t) * K);
    a->U = malloc(sizeof(float) * K * K);
    a->cvec = calloc(K, sizeof(double));
    a->samples = malloc(sizeof(double) * L * K);
    a->mu = malloc(sizeof(double) * K);
    a->eig = malloc(sizeof(double) * K);
    a->P = calloc(K, sizeof(double));
    a->ghat = malloc(sizeof(float) * K);
    a->section_cap = FSGD_GV_SECTION_FIXED + 4 * K + 4 * K * K + 4;
    a->section = malloc(a->section_cap);
    if (!a->keys || !a->U || !a->cvec || !a->samples || !a->mu || !a->eig || !a->P || !a->ghat || !a->section) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gradiveq: out of memory for slice %zu, lt %zu", K, L);
        gv_agg_destroy(a);
        return NULL;
    }
    a->phase = a->v[P_WARMUP] > 0 ? PH_WARMUP : PH_SAMPLE;
    a->r_energy = a->r_lambda_energy = NAN;
    a->r_ratio = 1;
    return a;
}

/* The slice of a key (index into a->keys) or -1. */
static long slice_index(const gv_agg_t *a, uint32_t key)
{
    size_t lo = 0, hi = a->K;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->K && a->keys[lo] == key ? (long)lo : -1;
}

static int gv_add(void *p, uint32_t sender, const uint8_t *msg, size_t len, double value_bound, size_t *entries,
                  char *err, size_t errsz)
{
    gv_agg_t *a = p;
    fsgd_gv_msg_t m;
    if (fsgd_gv_msg_parse(msg, len, a->dim, &m, err, errsz) < 0)
        return FSGD_E_FORMAT; /* whatever the reason, it does not decode (fsgd/strategy.h) */
    if (m.mode == 1 && (a->phase != PH_COMPRESS || m.basis != a->basis || m.d != a->d))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field basis_id at offset 16: projections on basis %u (d %u); the aggregator %s", m.basis,
                            m.d, a->phase == PH_COMPRESS ? "holds another basis" : "is not compressing");
    double bound = value_bound * sqrt((double)(a->K ? a->K : 1));
    for (uint32_t j = 0; j < m.d; j++) {
        float pj = fsgd_le_getf32(m.proj_le + 4 * (size_t)j);
        if (fabs((double)pj) > bound)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "field projections at offset %zu: %g beyond the bound %g",
                                (size_t)(m.proj_le - msg) + 4 * (size_t)j, (double)pj, bound);
    }
    if (m.mode == 1 && m.energy > value_bound * value_bound * a->K)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "field energy at offset 32: %g beyond the bound", m.energy);
    char e[200];
    int rc = fsgd_codec_agg_decode(a->ca, m.inner, m.inner_len, value_bound, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "field inner at offset %d: %s", FSGD_GV_MSG_FIXED, e);
    if (m.mode == 1)
        for (size_t i = 0; i < a->ca->dec.n; i++)
            if (slice_index(a, a->ca->dec.keys[i]) >= 0) {
                a->ca->dec.n = 0;
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field inner at offset %d: key %u is in the slice",
                                    FSGD_GV_MSG_FIXED, a->ca->dec.keys[i]);
            }
    if (fsgd_reducer_add(a->ca->red, a->ca->dec.keys, a->ca->dec.vals, a->ca->dec.n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradiveq: out of memory reducing a gradient");
    *entries = a->ca->dec.n + m.d;
    if (m.mode == 1) { /* compressed-domain aggregation, eq. (4) */
        double kept = 0;
        for (uint32_t j = 0; j < m.d; j++) {
            double pj = fsgd_le_getf32(m.proj_le + 4 * (size_t)j);
            a->P[j] += pj;
            kept += pj * pj;
        }
        a->proj_rows += m.rows;
        a->n_proj++;
        a->e_in += m.energy;
        a->e_kept += kept;
    }
    return 0;
}

/* Adds the step's touched keys to the counts (a merge of two sorted lists). */
static int count_keys(gv_agg_t *a, const uint32_t *keys, size_t n)
{
    size_t need = a->n_counts + n;
    if (need > a->cap_counts) {
        size_t cap = a->cap_counts ? a->cap_counts : 1024;
        while (cap < need)
            cap *= 2;
        uint32_t *k = realloc(a->ck, sizeof(uint32_t) * cap);
        if (!k)
            return FSGD_E_NOMEM;
        a->ck = k;
        uint32_t *c = realloc(a->cn, sizeof(uint32_t) * cap);
        if (!c)
            return FSGD_E_NOMEM;
        a->cn = c;
        a->cap_counts = cap;
    }
    /* merge from the back, in place */
    size_t i = a->n_counts, j = n, o = need;
    while (j > 0) {
        if (i > 0 && a->ck[i - 1] > keys[j - 1]) {
            o--, i--;
            a->ck[o] = a->ck[i], a->cn[o] = a->cn[i];
        } else if (i > 0 && a->ck[i - 1] == keys[j - 1]) {
            o--, i--, j--;
            a->ck[o] = a->ck[i], a->cn[o] = a->cn[i] + 1;
        } else {
            o--, j--;
            a->ck[o] = keys[j], a->cn[o] = 1;
        }
    }
    /* o - i slots were left by merged duplicates: close the gap */
    if (o > i) {
        memmove(a->ck + i, a->ck + o, sizeof(uint32_t) * (need - o));
        memmove(a->cn + i, a->cn + o, sizeof(uint32_t) * (need - o));
    }
    a->n_counts = need - (o - i);
    return 0;
}

static int cmp_hot(const void *x, const void *y, void *ctx)
{
    const gv_agg_t *a = ctx;
    uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    if (a->cn[i] != a->cn[j])
        return a->cn[i] > a->cn[j] ? -1 : 1;
    return a->ck[i] < a->ck[j] ? -1 : a->ck[i] > a->ck[j];
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    return i < j ? -1 : i > j;
}

/* The slice: the K most counted keys, then sorted by key. */
static int pick_slice(gv_agg_t *a)
{
    size_t K = (size_t)a->v[P_SLICE];
    if (K > a->n_counts)
        K = a->n_counts;
    if (K == 0) {
        a->K = 0;
        return 0;
    }
    uint32_t *idx = malloc(sizeof(uint32_t) * a->n_counts);
    if (!idx)
        return FSGD_E_NOMEM;
    for (size_t i = 0; i < a->n_counts; i++)
        idx[i] = (uint32_t)i;
    qsort_r(idx, a->n_counts, sizeof *idx, cmp_hot, a);
    for (size_t i = 0; i < K; i++)
        a->keys[i] = a->ck[idx[i]];
    free(idx);
    qsort(a->keys, K, sizeof *a->keys, cmp_u32);
    a->K = (uint32_t)K;
    return 0;
}

static void write_section(gv_agg_t *a, int mode, int with_basis)
{
    uint8_t *s = a->section;
    uint32_t K = with_basis ? a->K : 0, d = with_basis ? a->d : 0;
    s[0] = 1;
    s[1] = (uint8_t)mode;
    s[2] = s[3] = 0;
    fsgd_le_put32(s + 4, mode ? a->basis : 0);
    fsgd_le_put32(s + 8, K);
    fsgd_le_put32(s + 12, d);
    size_t off = FSGD_GV_SECTION_FIXED;
    for (uint32_t i = 0; i < K; i++, off += 4)
        fsgd_le_put32(s + off, a->keys[i]);
    for (size_t i = 0; i < (size_t)K * d; i++, off += 4)
        fsgd_le_putf32(s + off, a->U[i]);
    fsgd_le_put32(s + off, fsgd_crc32c(0, s, off));
    a->section_len = off + 4;
}

/* PCA over the samples: U, d, and the per-row centring (I - U Uᵀ) mu. */
static int learn_basis(gv_agg_t *a, char *err, size_t errsz)
{
    size_t d = 0, K = a->K;
    FSGD_TRY(fsgd_gv_pca(a->samples, (size_t)a->v[P_LT], K, a->v[P_LAMBDA], (size_t)a->v[P_COMPONENTS], a->mu, a->eig,
                         a->U, &d, err, errsz));
    a->d = (uint32_t)d;
    double total = 0, kept = 0;
    for (size_t k = 0; k < K; k++) {
        total += a->eig[k];
        kept += k < d ? a->eig[k] : 0;
    }
    a->r_lambda_energy = total > 0 ? kept / total : 1;
    for (size_t i = 0; i < K; i++)
        a->cvec[i] = a->mu[i];
    for (size_t j = 0; j < d; j++) { /* cvec -= U_j (U_jᵀ mu), with the float U both sides use */
        double dot = 0;
        for (size_t i = 0; i < K; i++)
            dot += (double)a->U[i + K * j] * a->mu[i];
        for (size_t i = 0; i < K; i++)
            a->cvec[i] -= (double)a->U[i + K * j] * dot;
    }
    a->basis++;
    return 0;
}

static fsgd_reducer_t *gv_take(void *p, const fsgd_step_info_t *info, char *err, size_t errsz)
{
    gv_agg_t *a = p;
    fsgd_reducer_t *red = a->ca->red;
    uint64_t rows = info ? info->rows : 0;
    /* Decompress once (eq. 5) into the reducer. */
    a->r_proj = a->n_proj;
    a->r_energy = a->n_proj ? (a->e_in > 0 ? a->e_kept / a->e_in : 1) : NAN;
    a->r_ratio = a->n_proj ? (double)a->K / a->d : 1;
    if (a->n_proj) {
        size_t K = a->K;
        for (size_t i = 0; i < K; i++) {
            double g = (double)a->proj_rows * a->cvec[i];
            for (size_t j = 0; j < a->d; j++)
                g += (double)a->U[i + K * j] * a->P[j];
            a->ghat[i] = (float)g;
        }
        if (fsgd_reducer_add(red, a->keys, a->ghat, K) < 0) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradiveq: out of memory decompressing");
            return NULL;
        }
    }
    memset(a->P, 0, sizeof(double) * (a->d ? a->d : 1));
    a->n_proj = 0;
    a->proj_rows = 0;
    a->e_in = a->e_kept = 0;
    a->steps++;
    a->in_phase++;
    int mode = a->phase == PH_COMPRESS, with_basis = 0;
    if (a->phase != PH_COMPRESS) {
        size_t n = 0;
        const uint32_t *keys = fsgd_reducer_sorted_keys(red, &n);
        if (count_keys(a, keys, n) < 0) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradiveq: out of memory counting keys");
            return NULL;
        }
    }
    if (a->phase == PH_SAMPLE && a->K > 0 && rows > 0) {
        double *s = a->samples + (a->in_phase - 1) * a->K;
        for (size_t i = 0; i < a->K; i++)
            s[i] = fsgd_reducer_sum(red, a->keys[i]) / (double)rows;
    } else if (a->phase == PH_SAMPLE) {
        a->in_phase--; /* not a sample: no slice yet, or no rows */
    }
    if (a->phase == PH_WARMUP && a->in_phase >= (uint64_t)a->v[P_WARMUP]) {
        a->phase = PH_SAMPLE, a->in_phase = 0;
    }
    if (a->phase == PH_SAMPLE && a->K == 0) { /* choose the slice (or again, if nothing was seen) */
        if (pick_slice(a) < 0) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradiveq: out of memory choosing the slice");
            return NULL;
        }
        a->in_phase = 0;
    } else if (a->phase == PH_SAMPLE && a->in_phase >= (uint64_t)a->v[P_LT]) {
        if (learn_basis(a, a->err, sizeof a->err) == 0) {
            a->phase = PH_COMPRESS, a->in_phase = 0;
            mode = 1, with_basis = 1;
        } else { /* LAPACK failed: sample again */
            a->in_phase = 0;
        }
    } else if (a->phase == PH_COMPRESS && a->in_phase >= (uint64_t)a->v[P_LC]) {
        a->phase = PH_SAMPLE, a->in_phase = 0, mode = 0;
        if (pick_slice(a) < 0) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradiveq: out of memory choosing the slice");
            return NULL;
        }
    }
    write_section(a, mode, with_basis);
    return red;
}

static const uint8_t *gv_section(const void *p, size_t *len)
{
    const gv_agg_t *a = p;
    *len = a->section_len;
    return a->section_len ? a->section : NULL;
}

static const char *gv_downlink(const void *p) { return INNER_SPEC; }

static double gv_param(const void *p, const char *name)
{
    const gv_agg_t *a = p;
    if (!strcmp(name, "energy")) /* Σ||p_n||² / Σ||g_n,slice||² of the step last taken */
        return a->r_energy;
    if (!strcmp(name, "ratio")) /* K / d when the step was compressed, else 1 */
        return a->r_ratio;
    if (!strcmp(name, "pca_energy")) /* Σ_{k<d} s_k / Σ s_k of the current basis, eq. (6) */
        return a->r_lambda_energy;
    if (!strcmp(name, "d"))
        return a->d;
    if (!strcmp(name, "K"))
        return a->K;
    if (!strcmp(name, "basis"))
        return a->basis;
    if (!strcmp(name, "phase")) /* of the next step: 0 warm-up, 1 sampling, 2 compressed */
        return a->phase;
    if (!strcmp(name, "proj_senders"))
        return a->r_proj;
    return NAN;
}

const fsgd_strategy_vt_t fsgd_strategy_vt_gradiveq = {
    .name = "gradiveq",
    .check = gv_check,
    .worker_new = gv_worker_new,
    .worker_destroy = gv_worker_destroy,
    .device_codec = NULL,
    .bound = gv_bound,
    .encode = gv_encode,
    .lockstep = 1,
    .after_step = gv_after_step,
    .reset = gv_reset,
    .residual_entries = gv_residual,
    .agg_new = gv_agg_new,
    .agg_destroy = gv_agg_destroy,
    .add = gv_add,
    .take = gv_take,
    .section = gv_section,
    .optimizer = FSGD_OPT_ADAM,
    .downlink_spec = gv_downlink,
    .param = gv_param,
};
