/* The compressed downlink (fsgd/downlink.h): Δ = θ − ρ encoded with a lossy
 * codec, the decoded message added to the replica ρ. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/downlink.h"
#include "fsgd/hugepages.h"
#include "fsgd/le.h"
#include "fsgd/prefetch.h"
#include "codec_internal.h"
#include "codec_testing.h"

/* Priority bins for the budget's selection (select_budget). */
#define PRI_BIN_SHIFT 20
#define PRI_BINS (1u << (31 - PRI_BIN_SHIFT))

struct fsgd_downlink {
    fsgd_codec_t *codec;
    uint64_t dim;
    float *rho;
    fsgd_sparse_t delta; /* Δ over the selected keys, keys increasing */
    fsgd_sparse_t last;  /* the decoded message */
    float *pri;          /* priority of each Δ entry (see priority()) */
    float *mag;          /* scratch of the selection: the entries of one priority bin */
    size_t mag_cap;
    uint16_t *touched;   /* per key: encodes whose keys included it (saturating) */
    uint32_t hist[PRI_BINS]; /* priorities per pri_bin() */
};

/* codec_spec with any "ef=" parameter replaced by ef=0; the length written
 * (>= sz: too long). */
static int without_ef(const char *codec_spec, char *out, size_t sz)
{
    const char *colon = strchr(codec_spec, ':');
    size_t used = 0;
    int w = snprintf(out, sz, "%.*s:", (int)(colon ? (size_t)(colon - codec_spec) : strlen(codec_spec)), codec_spec);
    if (w < 0 || (size_t)w >= sz)
        return w;
    used = (size_t)w;
    for (const char *p = colon ? colon + 1 : NULL; p && *p;) {
        size_t len = strcspn(p, ",");
        if (!(len >= 3 && !strncmp(p, "ef=", 3))) {
            w = snprintf(out + used, sz - used, "%.*s,", (int)len, p);
            if (w < 0 || (size_t)w >= sz - used)
                return (int)sz;
            used += (size_t)w;
        }
        p += len + (p[len] == ',');
    }
    w = snprintf(out + used, sz - used, "ef=0");
    return w < 0 || (size_t)w >= sz - used ? (int)sz : (int)(used + (size_t)w);
}

fsgd_downlink_t *fsgd_downlink_new(const char *codec_spec, uint64_t dim, const float *theta, char *err,
                                   size_t errsz)
{
    fsgd_codec_t *probe = fsgd_codec_new(codec_spec, dim, err, errsz);
    if (!probe)
        return NULL;
    int lossless = fsgd_codec_is_lossless(probe);
    fsgd_codec_destroy(probe);
    if (lossless) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "downlink: codec '%s' is lossless; send the model itself", codec_spec);
        return NULL;
    }
    /* The codec's own error feedback would keep a second residual next to
     * θ − ρ and send that mass twice: turn it off. */
    char spec[256];
    int w = without_ef(codec_spec, spec, sizeof spec);
    if (w < 0 || (size_t)w >= sizeof spec) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "downlink: codec spec '%s' too long", codec_spec);
        return NULL;
    }
    fsgd_downlink_t *d = calloc(1, sizeof *d);
    if (!d) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "downlink: out of memory");
        return NULL;
    }
    d->dim = dim;
    d->codec = fsgd_codec_new(spec, dim, err, errsz);
    if (!d->codec) {
        free(d);
        return NULL;
    }
    d->rho = malloc((dim ? dim : 1) * sizeof *d->rho);
    d->touched = calloc(dim ? dim : 1, sizeof *d->touched);
    /* model-sized, read at random keys every step (fsgd/hugepages.h) */
    fsgd_hugepages_advise(d->rho, (dim ? dim : 1) * sizeof *d->rho);
    fsgd_hugepages_advise(d->touched, (dim ? dim : 1) * sizeof *d->touched);
    if (!d->rho || !d->touched) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "downlink: out of memory for a replica of %llu weights",
                     (unsigned long long)dim);
        fsgd_downlink_destroy(d);
        return NULL;
    }
    fsgd_downlink_sync(d, theta);
    return d;
}

void fsgd_downlink_destroy(fsgd_downlink_t *d)
{
    if (!d)
        return;
    fsgd_codec_destroy(d->codec);
    free(d->rho);
    fsgd_sparse_free(&d->delta);
    fsgd_sparse_free(&d->last);
    free(d->pri);
    free(d->mag);
    free(d->touched);
    free(d);
}

void fsgd_downlink_sync(fsgd_downlink_t *d, const float *theta)
{
    memcpy(d->rho, theta, d->dim * sizeof *d->rho);
}

size_t fsgd_downlink_bound(const fsgd_downlink_t *d, size_t n) { return fsgd_codec_bound(d->codec, n); }

const fsgd_sparse_t *fsgd_downlink_last(const fsgd_downlink_t *d) { return &d->last; }

const float *fsgd_downlink_replica(const fsgd_downlink_t *d) { return d->rho; }

/* The k-th smallest of a[0..n) (0-based, n > k), a reordered: quickselect
 * with a three-way partition, so runs of equal values cannot stall it. */
static float select_kth(float *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        float p = a[lo + (hi - lo) / 2], t;
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (a[i] < p) {
                t = a[lt], a[lt++] = a[i], a[i++] = t;
            } else if (a[i] > p) {
                t = a[--gt], a[gt] = a[i], a[i] = t;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return p;
    }
    return a[lo];
}

/* Priorities are floats >= 0, whose bit patterns order as they do: the top
 * bits (exponent, 3 mantissa bits) put each in one of PRI_BINS bins, counted
 * while the priorities are computed. The bin holding the budget-th largest
 * is found from the counts, and only that bin's entries go through
 * select_kth: a pass over the priorities instead of quickselect's several
 * (which was half of the aggregator's downlink encode). */
static inline uint32_t pri_bin(float p)
{
    uint32_t u;
    memcpy(&u, &p, sizeof u);
    return u >> PRI_BIN_SHIFT;
}

/* The budget-th largest of pri[0..m) (m > budget > 0), given the bin counts;
 * *above: how many are strictly larger. mag is scratch for m floats. */
static float select_budget(const float *pri, size_t m, size_t budget, const uint32_t *hist, float *mag,
                           size_t *above)
{
    size_t larger = 0;
    uint32_t b = PRI_BINS - 1;
    while (larger + hist[b] < budget)
        larger += hist[b--];
    size_t c = 0;
    for (size_t i = 0; i < m; i++) {
        mag[c] = pri[i];
        c += pri_bin(pri[i]) == b;
    }
    float thr = select_kth(mag, c, c - (budget - larger)); /* budget - larger of the bin are >= thr */
    for (size_t i = 0; i < c; i++)
        larger += mag[i] > thr;
    *above = larger;
    return thr;
}

/* Which pending Δ to send first: a key's pending Δ hurts each time a worker
 * computes a gradient on the stale replica, and workers read a key about as
 * often as steps touch it, so |Δ| is weighted by how many steps touched the
 * key. With |Δ| alone (Adam makes every touched key's step about lr), the
 * budget kept hot keys pending as often as rare ones: 0.030 test AUC lost at
 * 2^22 weights, none with this weight (strategy/FORMAT.md). */
static inline float priority(float delta, uint16_t touched) { return fabsf(delta) * (float)touched; }

static int reserve_scratch(fsgd_downlink_t *d, size_t n, char *err, size_t errsz)
{
    if (fsgd_sparse_reserve(&d->delta, n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "downlink: out of memory");
    if (n <= d->mag_cap)
        return 0;
    float *np = realloc(d->pri, n * sizeof *np);
    if (np)
        d->pri = np;
    float *nm = np ? realloc(d->mag, n * sizeof *nm) : NULL;
    if (!nm)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "downlink: out of memory");
    d->mag = nm;
    d->mag_cap = n;
    return 0;
}

int fsgd_downlink_encode(fsgd_downlink_t *d, const float *theta, const uint32_t *keys, size_t n, size_t budget,
                         fsgd_outbuf_t *out, char *err, size_t errsz)
{
    out->len = 0;
    d->last.n = 0;
    FSGD_TRY(reserve_scratch(d, n, err, errsz));
    /* One pass over the dim-sized arrays (each key a random access into
     * three of them); the selection below reads only the compact Δ. */
    size_t m = 0;
    memset(d->hist, 0, sizeof d->hist);
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        if (i + FSGD_PREFETCH_AHEAD < n && keys[i + FSGD_PREFETCH_AHEAD] < d->dim) {
            uint32_t f = keys[i + FSGD_PREFETCH_AHEAD];
            FSGD_PREFETCH(&d->touched[f]);
            FSGD_PREFETCH(&theta[f]);
            FSGD_PREFETCH(&d->rho[f]);
        }
        if (k >= d->dim || (i && k <= keys[i - 1]))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "downlink: key %u at %zu not increasing or >= dim %llu", k,
                                i, (unsigned long long)d->dim);
        if (d->touched[k] < UINT16_MAX)
            d->touched[k]++;
        float v = theta[k] - d->rho[k];
        if (v != 0.0f) {
            float p = priority(v, d->touched[k]);
            d->delta.keys[m] = k;
            d->delta.vals[m] = v;
            d->pri[m++] = p;
            d->hist[pri_bin(p)]++;
        }
    }
    if (budget && m > budget) {
        /* Keep the budget largest priorities; the rest stays in θ − ρ. */
        size_t above;
        float thr = select_budget(d->pri, m, budget, d->hist, d->mag, &above);
        size_t ties = budget - above, o = 0;
        /* Branch-free: which entries pass is as good as random. */
        for (size_t i = 0; i < m; i++) {
            float a = d->pri[i];
            size_t tie = a == thr && ties > 0;
            ties -= tie;
            d->delta.keys[o] = d->delta.keys[i];
            d->delta.vals[o] = d->delta.vals[i];
            o += (a > thr) | tie;
        }
        m = o;
    }
    d->delta.n = m;
    /* ρ moves by exactly what the workers will decode and add. */
    FSGD_TRY(fsgd_codec_encode_sent(d->codec, d->delta.keys, d->delta.vals, m, out, &d->last, err, errsz));
    return fsgd_downlink_apply(d->rho, d->dim, &d->last, err, errsz);
}

int fsgd_downlink_apply(float *rho, uint64_t dim, const fsgd_sparse_t *u, char *err, size_t errsz)
{
    for (size_t i = 0; i < u->n; i++) {
        if (i + FSGD_PREFETCH_AHEAD < u->n && u->keys[i + FSGD_PREFETCH_AHEAD] < dim)
            FSGD_PREFETCH(&rho[u->keys[i + FSGD_PREFETCH_AHEAD]]);
        if (u->keys[i] >= dim || !isfinite(rho[u->keys[i]] + u->vals[i]))
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "downlink: key %u: weight %g + update %g is not finite",
                                u->keys[i], u->keys[i] < dim ? rho[u->keys[i]] : 0.0, u->vals[i]);
    }
    for (size_t i = 0; i < u->n; i++) {
        if (i + FSGD_PREFETCH_AHEAD < u->n)
            FSGD_PREFETCH(&rho[u->keys[i + FSGD_PREFETCH_AHEAD]]);
        rho[u->keys[i]] += u->vals[i];
    }
    return 0;
}

uint32_t fsgd_downlink_checksum(const float *rho, uint64_t dim)
{
    return fsgd_downlink_checksum_strided(rho, dim, 1, 0);
}

uint32_t fsgd_downlink_checksum_strided(const float *rho, uint64_t n, uint64_t stride, uint64_t offset)
{
    uint8_t buf[4096];
    uint32_t crc = 0;
    uint64_t i = 0;
    while (i < n) {
        size_t k = 0;
        for (; k < sizeof buf / 4 && i < n; k++, i++)
            fsgd_le_putf32(buf + 4 * k, rho[offset + i * stride]);
        crc = fsgd_crc32c(crc, buf, 4 * k);
    }
    return crc;
}
