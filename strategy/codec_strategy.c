/* The codec strategies: none, fastsgd, logquant and topk are one codec on
 * the uplink (its error feedback in the codec's residual), decode + sum on
 * the aggregator, Adam on the sum, and the same codec on the downlink's Δ
 * when it is lossy. Other strategies reuse these pieces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy_internal.h"

static int codec_check(const char *spec, uint64_t dim, char *err, size_t errsz)
{
    fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, errsz);
    if (!c)
        return FSGD_E_ARG;
    fsgd_codec_destroy(c);
    return 0;
}

void *fsgd_codec_worker_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    fsgd_codec_worker_t *w = calloc(1, sizeof *w);
    if (!w) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy: out of memory");
        return NULL;
    }
    w->codec = fsgd_codec_new(spec, dim, err, errsz);
    if (!w->codec) {
        free(w);
        return NULL;
    }
    return w;
}

void fsgd_codec_worker_destroy(void *p)
{
    fsgd_codec_worker_t *w = p;
    if (!w)
        return;
    fsgd_codec_destroy(w->codec);
    free(w);
}

fsgd_codec_t *fsgd_codec_worker_device_codec(void *p)
{
    return ((fsgd_codec_worker_t *)p)->codec;
}

size_t fsgd_codec_worker_bound(const void *p, size_t n) { return fsgd_codec_bound(((const fsgd_codec_worker_t *)p)->codec, n); }

int fsgd_codec_worker_encode(void *p, const uint32_t *keys, const float *vals, size_t n, uint64_t rows,
                             fsgd_outbuf_t *out, char *err, size_t errsz)
{
    fsgd_codec_worker_t *w = p;
    return fsgd_codec_encode(w->codec, keys, vals, n, out, err, errsz);
}

int fsgd_codec_worker_after_step(void *p, int applied, const uint8_t *section, size_t len, char *err, size_t errsz)
{
    fsgd_codec_worker_t *w = p;
    /* A message that was not applied (rejected, stale, conflicting): its
     * rows come round again, so restore the residual it carried rather than
     * lose that mass (the codec knows whether an encode is there to undo). */
    return applied ? 0 : fsgd_codec_undo_last(w->codec);
}

int fsgd_codec_worker_reset(void *p)
{
    fsgd_codec_worker_t *w = p;
    int had = fsgd_codec_residual(w->codec)->n > 0;
    fsgd_codec_reset(w->codec);
    return had;
}

size_t fsgd_codec_worker_residual_entries(const void *p)
{
    return fsgd_codec_residual(((const fsgd_codec_worker_t *)p)->codec)->n;
}

void *fsgd_codec_agg_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    fsgd_codec_agg_t *a = calloc(1, sizeof *a);
    if (!a) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy: out of memory");
        return NULL;
    }
    a->dim = dim;
    a->probe = fsgd_codec_new(spec, dim, err, errsz);
    a->red = a->probe ? fsgd_reducer_new(dim) : NULL;
    if (!a->red) {
        if (a->probe)
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy: out of memory for a reducer of %llu weights",
                         (unsigned long long)dim);
        fsgd_codec_agg_destroy(a);
        return NULL;
    }
    /* as given (the downlink turns the codec's own error feedback off), but
     * topk's own selection would cut the downlink's budget of the largest
     * |Δ| down to its ratio of it a second time: it sends what it is given */
    snprintf(a->spec, sizeof a->spec, "%s", !strcmp(fsgd_codec_name(a->probe), "topk") ? "topk:ratio=1" : spec);
    return a;
}

void fsgd_codec_agg_destroy(void *p)
{
    fsgd_codec_agg_t *a = p;
    if (!a)
        return;
    fsgd_codec_destroy(a->probe);
    fsgd_reducer_destroy(a->red);
    fsgd_sparse_free(&a->dec);
    free(a);
}

int fsgd_codec_agg_decode(fsgd_codec_agg_t *a, const uint8_t *msg, size_t len, double value_bound, char *err,
                          size_t errsz)
{
    int rc = fsgd_codec_decode(msg, len, a->dim, &a->dec, err, errsz);
    if (rc == FSGD_E_NOMEM)
        return rc;
    if (rc < 0) /* whatever the decoder found (CRC, length, key range): it does not decode */
        return FSGD_E_FORMAT;
    for (size_t i = 0; i < a->dec.n; i++)
        if (!isfinite(a->dec.vals[i]) || fabs((double)a->dec.vals[i]) > value_bound) {
            rc = fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "value %g of key %u is beyond the bound %g",
                                  (double)a->dec.vals[i], a->dec.keys[i], value_bound);
            a->dec.n = 0;
            return rc;
        }
    return 0;
}

int fsgd_codec_agg_add(void *p, uint32_t sender, const uint8_t *msg, size_t len, double value_bound,
                       size_t *entries, char *err, size_t errsz)
{
    fsgd_codec_agg_t *a = p;
    FSGD_TRY(fsgd_codec_agg_decode(a, msg, len, value_bound, err, errsz));
    *entries = a->dec.n;
    if (fsgd_reducer_add(a->red, a->dec.keys, a->dec.vals, a->dec.n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory reducing a gradient");
    return 0;
}

fsgd_reducer_t *fsgd_codec_agg_take(void *p, const fsgd_step_info_t *info, char *err, size_t errsz)
{
    return ((fsgd_codec_agg_t *)p)->red;
}

const char *fsgd_codec_agg_downlink_spec(const void *p)
{
    const fsgd_codec_agg_t *a = p;
    return fsgd_codec_is_lossless(a->probe) ? NULL : a->spec;
}

#define CODEC_STRATEGY(NAME)                                                                                       \
    const fsgd_strategy_vt_t fsgd_strategy_vt_##NAME = {                                                           \
        .name = #NAME,                                                                                             \
        .check = codec_check,                                                                                      \
        .worker_new = fsgd_codec_worker_new,                                                                       \
        .worker_destroy = fsgd_codec_worker_destroy,                                                               \
        .device_codec = fsgd_codec_worker_device_codec,                                                            \
        .bound = fsgd_codec_worker_bound,                                                                          \
        .encode = fsgd_codec_worker_encode,                                                                        \
        .after_step = fsgd_codec_worker_after_step,                                                                \
        .reset = fsgd_codec_worker_reset,                                                                          \
        .residual_entries = fsgd_codec_worker_residual_entries,                                                    \
        .agg_new = fsgd_codec_agg_new,                                                                             \
        .agg_destroy = fsgd_codec_agg_destroy,                                                                     \
        .add = fsgd_codec_agg_add,                                                                                 \
        .take = fsgd_codec_agg_take,                                                                               \
        .optimizer = FSGD_OPT_ADAM,                                                                                \
        .downlink_spec = fsgd_codec_agg_downlink_spec,                                                             \
    }

CODEC_STRATEGY(none);
CODEC_STRATEGY(fastsgd);
CODEC_STRATEGY(logquant);
CODEC_STRATEGY(topk);
CODEC_STRATEGY(sketchml);
