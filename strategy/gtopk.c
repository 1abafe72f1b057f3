/* Strategy "gtopk": global top-k sparsification (Shi et al., "A Distributed
 * Synchronous SGD Algorithm with Global Top-k Sparsification for Low
 * Bandwidth Networks", Algorithm 4), with a central aggregator in place of
 * the tree (strategy/FORMAT.md gives the α-β cost of both shapes).
 *
 * Worker g, step i (Algorithm 4 lines 4-8):
 *   G   = G_residual + gradient                  (merged over the union of keys)
 *   thr = the k-th largest |G|; Mask = the k entries of largest |G|
 *         (ties to the smaller key; exact zeros never sent)
 *   send G ⊙ Mask exactly (topk codec: float32 keys and values)
 *   G_residual = G ⊙ ¬Mask
 * Aggregator (lines 9 and Definition 1 applied to all P messages at once):
 *   S = Σ_g sent_g in double; gMask = the k entries of largest |S| (ties to
 *   the smaller key, zeros never selected); the step applies S ⊙ gMask.
 *   The feedback section lists gMask's keys (fsgd/keys.h).
 * Worker after the step (line 10, the put-back):
 *   G_residual += sent ⊙ ¬gMask
 * so Σ residuals + Σ applied = Σ gradients: no mass is lost.
 *
 * k: k=N entries, or density=D of the model dimension (k = ceil(D·dim),
 * default D = 0.001 as in the paper's experiments); the same k locally and
 * globally ("the final k is equal to the local k", section III-C). The sum
 * is applied by the aggregator's Adam (sum / rows), as for topk, so the
 * comparison with FastSGD's set is like for like. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/keys.h"
#include "fsgd/le.h"
#include "params.h"
#include "strategy_internal.h"

#define GTK_MAGIC "GTK"
#define GTK_HDR 8 /* u8 version, "GTK", u32 k (strategy/FORMAT.md) */

enum { SP_K, SP_DENSITY, SP_N };
static const fsgd_sparam_def_t gtopk_params[SP_N] = {
    {"k", 1, 1, 4294967296.0, 0, "a count of entries"},
    {"density", 0, 1e-9, 1, 0.001, "k = density x dim; 0.001 as in the paper's experiments"},
};

static int gtopk_k(const char *spec, uint64_t dim, size_t *k, char *err, size_t errsz)
{
    double v[SP_N];
    int given[SP_N];
    FSGD_TRY(fsgd_sparams_parse("gtopk", spec, gtopk_params, SP_N, v, given, NULL, 0, err, errsz));
    if (given[SP_K] && given[SP_DENSITY])
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy gtopk: give k or density, not both");
    double kk = given[SP_K] ? v[SP_K] : ceil(v[SP_DENSITY] * (double)dim);
    *k = (size_t)(kk < 1 ? 1 : kk > (double)dim ? (double)dim : kk);
    return 0;
}

static int gtopk_check(const char *spec, uint64_t dim, char *err, size_t errsz)
{
    size_t k;
    return gtopk_k(spec, dim, &k, err, errsz);
}

/* ---- worker ---- */

typedef struct gtopk_worker {
    uint64_t dim;
    size_t k;
    fsgd_codec_t *codec;  /* topk:k=K,ef=0: the selection and the wire format */
    fsgd_sparse_t res;    /* G_residual, keys increasing */
    fsgd_sparse_t res_old;/* before the last encode (undo) */
    fsgd_sparse_t merged; /* G */
    fsgd_sparse_t sent;   /* what the last message carried */
    fsgd_sparse_t tmp;
    uint32_t *sel;        /* the section's keys */
    size_t sel_cap;
    int sent_pending;
} gtopk_worker_t;

static void gtopk_worker_destroy(void *p)
{
    gtopk_worker_t *w = p;
    if (!w)
        return;
    fsgd_codec_destroy(w->codec);
    fsgd_sparse_free(&w->res);
    fsgd_sparse_free(&w->res_old);
    fsgd_sparse_free(&w->merged);
    fsgd_sparse_free(&w->sent);
    fsgd_sparse_free(&w->tmp);
    free(w->sel);
    free(w);
}

static void *gtopk_worker_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    size_t k;
    if (gtopk_k(spec, dim, &k, err, errsz) < 0)
        return NULL;
    gtopk_worker_t *w = calloc(1, sizeof *w);
    if (!w) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
        return NULL;
    }
    char cs[64];
    snprintf(cs, sizeof cs, "topk:k=%zu,ef=0", k);
    w->dim = dim;
    w->k = k;
    w->codec = fsgd_codec_new(cs, dim, err, errsz);
    if (!w->codec) {
        gtopk_worker_destroy(w);
        return NULL;
    }
    return w;
}

static size_t gtopk_bound(const void *p, size_t n)
{
    const gtopk_worker_t *w = p;
    return fsgd_codec_bound(w->codec, w->k < n + w->res.n ? w->k : n + w->res.n);
}

/* out = a + b over the union of keys (both increasing). */
static int sparse_add(fsgd_sparse_t *out, const uint32_t *ak, const float *av, size_t an, const fsgd_sparse_t *b)
{
    if (fsgd_sparse_reserve(out, an + b->n) < 0)
        return FSGD_E_NOMEM;
    size_t i = 0, j = 0, o = 0;
    while (i < an || j < b->n) {
        if (j == b->n || (i < an && ak[i] < b->keys[j])) {
            out->keys[o] = ak[i];
            out->vals[o++] = av[i++];
        } else if (i == an || b->keys[j] < ak[i]) {
            out->keys[o] = b->keys[j];
            out->vals[o++] = b->vals[j++];
        } else {
            out->keys[o] = ak[i];
            out->vals[o++] = av[i++] + b->vals[j++];
        }
    }
    out->n = o;
    return 0;
}

static int gtopk_encode(void *pw, const uint32_t *keys, const float *vals, size_t n, uint64_t rows,
                        fsgd_outbuf_t *out, char *err, size_t errsz)
{
    gtopk_worker_t *w = pw;
    out->len = 0;
    if (sparse_add(&w->merged, keys, vals, n, &w->res) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
    /* Lines 5-7: the codec keeps the k largest |G| exactly. */
    FSGD_TRY(fsgd_codec_encode(w->codec, w->merged.keys, w->merged.vals, w->merged.n, out, err, errsz));
    int rc = fsgd_codec_decode(out->dst, out->len, w->dim, &w->sent, err, errsz);
    if (rc < 0 || fsgd_sparse_reserve(&w->res_old, w->merged.n) < 0) {
        out->len = 0;
        return rc < 0 ? rc : fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
    }
    /* Line 8: G_residual = G ⊙ ¬Mask; the residual before is kept for undo. */
    fsgd_sparse_t t = w->res_old;
    w->res_old = w->res;
    w->res = t;
    size_t j = 0, o = 0;
    for (size_t i = 0; i < w->merged.n; i++) {
        if (j < w->sent.n && w->sent.keys[j] == w->merged.keys[i]) {
            j++;
            continue;
        }
        if (w->merged.vals[i] != 0) {
            w->res.keys[o] = w->merged.keys[i];
            w->res.vals[o++] = w->merged.vals[i];
        }
    }
    w->res.n = o;
    w->sent_pending = 1;
    return 0;
}

/* Reads a section into keys (grown); 0 or FSGD_E_FORMAT naming the field. */
static int gtopk_section_read(gtopk_worker_t *w, const uint8_t *s, size_t len, uint32_t *n, char *err, size_t errsz)
{
    if (len < GTK_HDR + 4)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gtopk section: field header at offset 0: %zu bytes < %d", len,
                            GTK_HDR + 4);
    if (s[0] != 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gtopk section: field version at offset 0: %u (supported: 1)",
                            s[0]);
    if (memcmp(s + 1, GTK_MAGIC, 3))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gtopk section: field magic at offset 1: not a gtopk section");
    uint32_t want = fsgd_le_get32(s + len - 4), got = fsgd_crc32c(0, s, len - 4);
    if (want != got)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "gtopk section: field crc32c at offset %zu: stored %08x, computed %08x", len - 4, want, got);
    uint32_t k = fsgd_le_get32(s + 4), kn = 0;
    size_t size = 0;
    char kerr[160];
    if (fsgd_keys_peek(s + GTK_HDR, len - GTK_HDR - 4, w->dim, &kn, &size, kerr, sizeof kerr) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gtopk section: field keys at offset %d: %s", GTK_HDR, kerr);
    if (kn != k || size != len - GTK_HDR - 4)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "gtopk section: field k at offset 4: %u, the key block holds %u keys in %zu of %zu bytes", k,
                            kn, size, len - GTK_HDR - 4);
    if (kn > w->sel_cap) {
        uint32_t *ns = realloc(w->sel, (kn + 1) * sizeof *ns);
        if (!ns)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gtopk section: out of memory");
        w->sel = ns;
        w->sel_cap = kn;
    }
    int rc = fsgd_keys_decode(s + GTK_HDR, size, w->dim, w->sel, kn, n, kerr, sizeof kerr);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "gtopk section: field keys at offset %d: %s", GTK_HDR, kerr);
    return 0;
}

static int gtopk_after_step(void *p, int applied, const uint8_t *section, size_t len, char *err, size_t errsz)
{
    gtopk_worker_t *w = p;
    if (!w->sent_pending)
        return 0;
    if (!applied) {
        /* Not applied: the rows come round again; the residual is as before. */
        fsgd_sparse_t t = w->res;
        w->res = w->res_old;
        w->res_old = t;
        w->sent_pending = 0;
        return 1;
    }
    uint32_t ns = 0;
    FSGD_TRY(gtopk_section_read(w, section, len, &ns, err, errsz));
    /* Line 10: the put-back, G_residual += sent ⊙ ¬gMask. The residual has
     * none of the sent keys, so this is a merge of disjoint key sets. */
    fsgd_sparse_t *u = &w->merged; /* reused: the unselected sent entries */
    if (fsgd_sparse_reserve(u, w->sent.n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
    size_t j = 0, o = 0;
    for (size_t i = 0; i < w->sent.n; i++) {
        uint32_t k = w->sent.keys[i];
        while (j < ns && w->sel[j] < k)
            j++;
        if (j < ns && w->sel[j] == k)
            continue;
        u->keys[o] = k;
        u->vals[o++] = w->sent.vals[i];
    }
    u->n = o;
    if (o) {
        if (sparse_add(&w->tmp, w->res.keys, w->res.vals, w->res.n, u) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
        fsgd_sparse_t t = w->res;
        w->res = w->tmp;
        w->tmp = t;
    }
    w->sent_pending = 0;
    return 0;
}

static int gtopk_reset(void *p)
{
    gtopk_worker_t *w = p;
    int had = w->res.n > 0;
    w->res.n = 0;
    w->sent_pending = 0;
    return had;
}

static size_t gtopk_residual_entries(const void *p) { return ((const gtopk_worker_t *)p)->res.n; }

/* ---- aggregator ---- */

typedef struct gtopk_agg {
    fsgd_codec_agg_t *base;   /* decode + bound check; base->red is what take returns */
    size_t k;
    fsgd_reducer_t *all;      /* S over every sent key */
    fsgd_sparse_t *msgs;      /* the step's decoded messages */
    size_t nmsgs, msgs_cap;
    uint32_t *sel;            /* gMask's keys, increasing */
    struct ranked *rank;
    size_t sel_cap;
    uint8_t *section;
    size_t section_len, section_cap;
} gtopk_agg_t;

static void gtopk_agg_destroy(void *p)
{
    gtopk_agg_t *a = p;
    if (!a)
        return;
    fsgd_codec_agg_destroy(a->base);
    fsgd_reducer_destroy(a->all);
    for (size_t i = 0; i < a->msgs_cap; i++)
        fsgd_sparse_free(&a->msgs[i]);
    free(a->msgs);
    free(a->sel);
    free(a->rank);
    free(a->section);
    free(a);
}

static void *gtopk_agg_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    size_t k;
    if (gtopk_k(spec, dim, &k, err, errsz) < 0)
        return NULL;
    gtopk_agg_t *a = calloc(1, sizeof *a);
    if (!a) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
        return NULL;
    }
    a->k = k;
    a->base = fsgd_codec_agg_new("topk", dim, seed, err, errsz);
    a->all = a->base ? fsgd_reducer_new(dim) : NULL;
    if (!a->all) {
        if (a->base)
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
        gtopk_agg_destroy(a);
        return NULL;
    }
    return a;
}

static int gtopk_add(void *p, uint32_t sender, const uint8_t *msg, size_t len, double value_bound, size_t *entries,
                     char *err, size_t errsz)
{
    gtopk_agg_t *a = p;
    FSGD_TRY(fsgd_codec_agg_decode(a->base, msg, len, value_bound, err, errsz));
    if (a->nmsgs == a->msgs_cap) {
        size_t nc = a->msgs_cap ? 2 * a->msgs_cap : 8;
        fsgd_sparse_t *nm = realloc(a->msgs, nc * sizeof *nm);
        if (!nm)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
        memset(nm + a->msgs_cap, 0, (nc - a->msgs_cap) * sizeof *nm);
        a->msgs = nm;
        a->msgs_cap = nc;
    }
    if (fsgd_sparse_copy(&a->msgs[a->nmsgs], &a->base->dec) < 0 ||
        fsgd_reducer_add(a->all, a->base->dec.keys, a->base->dec.vals, a->base->dec.n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
    a->nmsgs++;
    *entries = a->base->dec.n;
    return 0;
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

typedef struct ranked {
    double mag; /* |S| */
    uint32_t key;
} ranked_t;

/* Larger |S| first, then the smaller key (the topk codec's tie rule). */
static int cmp_ranked(const void *x, const void *y)
{
    const ranked_t *a = x, *b = y;
    if (a->mag != b->mag)
        return a->mag > b->mag ? -1 : 1;
    return (a->key > b->key) - (a->key < b->key);
}

static fsgd_reducer_t *gtopk_take(void *p, const fsgd_step_info_t *info, char *err, size_t errsz)
{
    gtopk_agg_t *a = p;
    size_t n = 0;
    const uint32_t *keys;
    const double *sums;
    if (fsgd_reducer_sorted(a->all, &keys, &sums, &n) < 0) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
        return NULL;
    }
    if (n + 1 > a->sel_cap) {
        uint32_t *ns = realloc(a->sel, (n + 1) * sizeof *ns);
        ranked_t *nr = ns ? realloc(a->rank, (n + 1) * sizeof *nr) : NULL;
        if (ns)
            a->sel = ns;
        if (!nr) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
            return NULL;
        }
        a->rank = nr;
        a->sel_cap = n + 1;
    }
    /* The exact k largest |S|, S summed in double (m <= P·k entries). */
    ranked_t *r = a->rank;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        double v = sums[i];
        if (v != 0) {
            r[m].mag = fabs(v);
            r[m++].key = keys[i];
        }
    }
    size_t ksel = a->k < m ? a->k : m;
    qsort(r, m, sizeof *r, cmp_ranked);
    for (size_t i = 0; i < ksel; i++)
        a->sel[i] = r[i].key;
    qsort(a->sel, ksel, sizeof *a->sel, cmp_u32);
    /* The applied sum: each sender's selected entries, summed afresh in
     * double in the output reducer (the same sum S over gMask). */
    for (size_t s = 0; s < a->nmsgs; s++) {
        fsgd_sparse_t *g = &a->msgs[s];
        size_t j = 0, o = 0;
        for (size_t i = 0; i < g->n; i++) {
            while (j < ksel && a->sel[j] < g->keys[i])
                j++;
            if (j < ksel && a->sel[j] == g->keys[i]) {
                g->keys[o] = g->keys[i];
                g->vals[o++] = g->vals[i];
            }
        }
        if (fsgd_reducer_add(a->base->red, g->keys, g->vals, o) < 0) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
            return NULL;
        }
        g->n = 0;
    }
    a->nmsgs = 0;
    fsgd_reducer_clear(a->all);
    /* The section: the selected keys (strategy/FORMAT.md). */
    size_t need = GTK_HDR + fsgd_keys_bound(ksel) + 4, kl = 0;
    if (need > a->section_cap) {
        uint8_t *nsct = realloc(a->section, need);
        if (!nsct) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy gtopk: out of memory");
            return NULL;
        }
        a->section = nsct;
        a->section_cap = need;
    }
    a->section[0] = 1;
    memcpy(a->section + 1, GTK_MAGIC, 3);
    fsgd_le_put32(a->section + 4, (uint32_t)ksel);
    if (fsgd_keys_encode(a->sel, ksel, a->section + GTK_HDR, need - GTK_HDR - 4, &kl, err, errsz) < 0)
        return NULL;
    fsgd_le_put32(a->section + GTK_HDR + kl, fsgd_crc32c(0, a->section, GTK_HDR + kl));
    a->section_len = GTK_HDR + kl + 4;
    return a->base->red;
}

static const uint8_t *gtopk_section(const void *p, size_t *len)
{
    const gtopk_agg_t *a = p;
    *len = a->section_len;
    return a->section_len ? a->section : NULL;
}

static const char *gtopk_downlink_spec(const void *p) { return NULL; }

const fsgd_strategy_vt_t fsgd_strategy_vt_gtopk = {
    .name = "gtopk",
    .check = gtopk_check,
    .worker_new = gtopk_worker_new,
    .worker_destroy = gtopk_worker_destroy,
    .device_codec = NULL,
    .bound = gtopk_bound,
    .encode = gtopk_encode,
    .lockstep = 1,
    .after_step = gtopk_after_step,
    .reset = gtopk_reset,
    .residual_entries = gtopk_residual_entries,
    .agg_new = gtopk_agg_new,
    .agg_destroy = gtopk_agg_destroy,
    .add = gtopk_add,
    .take = gtopk_take,
    .section = gtopk_section,
    .optimizer = FSGD_OPT_ADAM,
    .downlink_spec = gtopk_downlink_spec,
};
