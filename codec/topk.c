/* Codec "topk": local top-k sparsification. Sends the k entries of largest
 * magnitude exactly (float32), ties broken towards smaller keys, in key
 * order; with error feedback (the default, "residual memory") what was not
 * sent is added to the stream's next gradient. k is given directly (k=N) or
 * as a fraction of the entries of each call (ratio=R, rounded up). */
#include <math.h>
#include <string.h>

#include "codec_internal.h"

enum { P_K, P_RATIO, P_EF };
static const codec_param_def_t topk_params[] = {
    {"k", PARAM_INT, 0, 4294967296.0, 0, 0, NULL},
    {"ratio", PARAM_REAL, 0, 1, 0, 0.01, NULL},
};

static int topk_check(fsgd_codec_t *c, char *err, size_t errsz)
{
    int has_k = c->p[P_K] >= 1, has_ratio = c->p[P_RATIO] > 0;
    if (has_k && c->given[P_RATIO] && has_ratio)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec topk: give k or ratio, not both");
    if (has_k) {
        c->p[P_RATIO] = 0;
        return 0;
    }
    if (!has_ratio || (c->given[P_K] && !c->given[P_RATIO]))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, c->given[P_RATIO] ? "codec topk: parameter ratio must be in (0, 1]"
                                                                       : "codec topk: parameter k must be >= 1");
    return 0;
}

static size_t topk_bound(const fsgd_codec_t *c, size_t n) { return 8 * n; }

/* Sort keys: |v| bits (monotone for non-negative floats) above the reversed
 * index, so larger magnitude first, then smaller index. */
static inline uint64_t rank_key(const float *vals, size_t i)
{
    uint32_t u;
    memcpy(&u, &vals[i], 4);
    return (uint64_t)(u & 0x7fffffffu) << 32 | (uint32_t)(UINT32_MAX - (uint32_t)i);
}

/* The k-th largest of a[0..n) (1 <= k <= n, values distinct); reorders a.
 * Quickselect (Lomuto partition, descending) with median-of-three pivots. */
static uint64_t kth_largest(uint64_t *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t x = a[lo], y = a[mid], z = a[hi];
        size_t pi = x > y ? (y > z ? mid : (x > z ? hi : lo)) : (x > z ? lo : (y > z ? hi : mid));
        uint64_t piv = a[pi], t;
        a[pi] = a[hi];
        a[hi] = piv;
        size_t store = lo;
        for (size_t i = lo; i < hi; i++)
            if (a[i] > piv) {
                t = a[i];
                a[i] = a[store];
                a[store++] = t;
            }
        a[hi] = a[store];
        a[store] = piv;
        if (want == store)
            return piv;
        if (want < store)
            hi = store - 1;
        else
            lo = store + 1;
    }
    return a[want];
}

static int topk_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                       size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                       size_t errsz)
{
    size_t k = c->p[P_K] >= 1 ? (size_t)c->p[P_K] : (size_t)ceil(c->p[P_RATIO] * (double)n);
    if (k > n)
        k = n;
    uint64_t thr = UINT64_MAX;
    if (k > 0) {
        if (fsgd_codec_scratch(c, n * 8) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "topk: out of memory");
        uint64_t *r = c->scratch;
        for (size_t i = 0; i < n; i++)
            r[i] = rank_key(vals, i);
        thr = kth_largest(r, n, k);
    }
    size_t d = 0;
    for (size_t i = 0; i < n; i++) /* counted first so the size check precedes any write */
        d += rank_key(vals, i) >= thr && vals[i] != 0;
    if (8 * d > cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "topk: need %zu body bytes, buffer has %zu", 8 * d, cap);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (rank_key(vals, i) >= thr && vals[i] != 0) {
            fsgd_le_put32(body + 4 * o, keys[i]);
            fsgd_le_putf32(body + 4 * d + 4 * o, vals[i]);
            if (sent) {
                sent->keys[o] = keys[i];
                sent->vals[o] = vals[i];
            }
            o++;
        }
    }
    if (sent)
        sent->n = d;
    *body_len = 8 * d;
    *count = (uint32_t)d;
    c->last.key_bits = c->last.value_bits = 32 * (uint64_t)d;
    c->last.header_bytes = 0;
    return 0;
}

static int topk_decode(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                       fsgd_sparse_t *out, char *err, size_t errsz)
{
    if (8 * (uint64_t)count != blen)
        return fsgd_err_fmt(err, errsz, blen < 8 * (uint64_t)count ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field count at offset 16: %u entries need %llu body bytes, body has %zu", count,
                            (unsigned long long)(8 * (uint64_t)count), blen);
    FSGD_TRY(codec_reserve(out, count, err, errsz));
    return fsgd_codec_take_pairs(msg + off, off, count, dim, "topk", out, err, errsz);
}

const fsgd_codec_vt_t fsgd_codec_vt_topk = {
    .name = "topk",
    .id = CODEC_ID_TOPK,
    .lossy = 1,
    .ef_default = 1,
    .params = topk_params,
    .n_params = 2,
    .check = topk_check,
    .bound = topk_bound,
    .encode = topk_encode,
    .decode = topk_decode,
};
