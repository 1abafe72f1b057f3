/* The downlink on the strategy's two sides: the aggregator side codes
 * Δ = θ − ρ against its replica, the worker side decodes and adds it, so
 * the roles never reach past the strategy for the model update. The
 * arithmetic is fsgd/downlink.h's; this file decides which codec and who
 * holds the replica. */
#include <stdio.h>
#include <string.h>

#include "strategy_internal.h"

int fsgd_sworker_downlink_decode(const uint8_t *msg, size_t len, uint64_t dim, fsgd_sparse_t *update, char *err,
                                 size_t errsz)
{
    return fsgd_codec_decode(msg, len, dim, update, err, errsz);
}

int fsgd_sworker_downlink_apply(float *theta, uint64_t dim, const fsgd_sparse_t *update, char *err, size_t errsz)
{
    return fsgd_downlink_apply(theta, dim, update, err, errsz);
}

int fsgd_sworker_downlink_verify(const float *theta, uint64_t dim, uint32_t check)
{
    return fsgd_downlink_checksum(theta, dim) == check;
}

int fsgd_sagg_downlink_open(fsgd_sagg_t *a, const char *job_downlink, const float *theta, char *used, size_t usedsz,
                            char *err, size_t errsz)
{
    const char *spec = job_downlink;
    if (spec && !strcmp(spec, "full"))
        spec = NULL;
    else if (spec && (!strcmp(spec, "auto") || !spec[0]))
        spec = fsgd_sagg_downlink_spec(a);
    snprintf(used, usedsz, "%s", spec ? spec : "full");
    if (!spec)
        return 0;
    char e[256];
    fsgd_downlink_t *d = fsgd_downlink_new(spec, a->dim, theta, e, sizeof e);
    if (!d)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "downlink '%s': %s", spec, e);
    fsgd_downlink_destroy(a->down);
    a->down = d;
    return 0;
}

int fsgd_sagg_downlink_coded(const fsgd_sagg_t *a) { return a->down != NULL; }

size_t fsgd_sagg_downlink_bound(const fsgd_sagg_t *a, size_t n) { return fsgd_downlink_bound(a->down, n); }

int fsgd_sagg_downlink_encode(fsgd_sagg_t *a, const float *theta, const uint32_t *keys, size_t n, size_t budget,
                              fsgd_outbuf_t *out, char *err, size_t errsz)
{
    return fsgd_downlink_encode(a->down, theta, keys, n, budget, out, err, errsz);
}

uint32_t fsgd_sagg_downlink_check(const fsgd_sagg_t *a)
{
    return fsgd_downlink_checksum(fsgd_downlink_replica(a->down), a->dim);
}

void fsgd_sagg_downlink_sync(fsgd_sagg_t *a, const float *theta) { fsgd_downlink_sync(a->down, theta); }
