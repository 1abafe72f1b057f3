/* The strategy registry and the public wrappers: find the vtable by the
 * spec's name, then dispatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy_internal.h"
#include "strategy_testing.h"

extern const fsgd_strategy_vt_t fsgd_strategy_vt_mqgrad;   /* mqgrad.c */
extern const fsgd_strategy_vt_t fsgd_strategy_vt_gradiveq; /* gradiveq.c */
extern const fsgd_strategy_vt_t fsgd_strategy_vt_efsign;   /* efsign.c */
extern const fsgd_strategy_vt_t fsgd_strategy_vt_gtopk;    /* gtopk.c */
extern const fsgd_strategy_vt_t fsgd_strategy_vt_sketchml; /* codec_strategy.c */

static const fsgd_strategy_vt_t *const registry[] = {
    &fsgd_strategy_vt_fastsgd,
    &fsgd_strategy_vt_gradiveq,
    &fsgd_strategy_vt_mqgrad,
    &fsgd_strategy_vt_none,
    &fsgd_strategy_vt_logquant,
    &fsgd_strategy_vt_topk,
    &fsgd_strategy_vt_efsign,
    &fsgd_strategy_vt_gtopk,
    &fsgd_strategy_vt_sketchml,
};
#define N_STRATEGIES (sizeof registry / sizeof *registry)

static const fsgd_strategy_vt_t *find(const char *spec, char *err, size_t errsz);

const char *fsgd_strategy_list(void)
{
    static char names[256];
    if (!names[0])
        for (size_t i = 0; i < N_STRATEGIES; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "", registry[i]->name);
    return names;
}

int fsgd_strategy_max_lag(const char *spec, int staleness)
{
    char e[8];
    const fsgd_strategy_vt_t *vt = find(spec, e, sizeof e);
    return vt && vt->lockstep ? 0 : staleness;
}

int fsgd_strategy_workers_optimize(const char *spec)
{
    char e[8];
    const fsgd_strategy_vt_t *vt = find(spec, e, sizeof e);
    return vt && vt->optimizer == FSGD_OPT_APPLY;
}

int fsgd_strategy_spec_name(const char *spec, char *name, size_t sz)
{
    size_t len = strcspn(spec ? spec : "", ":");
    if (len == 0 || len >= sz)
        return FSGD_E_ARG;
    memcpy(name, spec, len);
    name[len] = '\0';
    return 0;
}

static const fsgd_strategy_vt_t *find(const char *spec, char *err, size_t errsz)
{
    char name[64];
    if (fsgd_strategy_spec_name(spec, name, sizeof name) < 0) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy: empty or overlong name in '%s'", spec ? spec : "");
        return NULL;
    }
    for (size_t i = 0; i < N_STRATEGIES; i++)
        if (!strcmp(registry[i]->name, name))
            return registry[i];
    fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unknown strategy '%s' (known: %s)", name, fsgd_strategy_list());
    return NULL;
}

int fsgd_strategy_check(const char *spec, uint64_t dim, char *err, size_t errsz)
{
    const fsgd_strategy_vt_t *vt = find(spec, err, errsz);
    return vt ? vt->check(spec, dim, err, errsz) : FSGD_E_ARG;
}

typedef void *(*state_new_fn)(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz);

/* A side of the strategy the spec names, in a zeroed allocation of size
 * bytes (a fsgd_sworker_t or fsgd_sagg_t). NULL with err on failure. */
static void *instance_new(size_t size, const char *spec, uint64_t dim, uint64_t seed, int agg, char *err,
                          size_t errsz)
{
    const fsgd_strategy_vt_t *vt = find(spec, err, errsz);
    if (!vt)
        return NULL;
    side_t *in = calloc(1, size);
    if (!in) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy %s: out of memory", vt->name);
        return NULL;
    }
    state_new_fn make = agg ? vt->agg_new : vt->worker_new;
    in->vt = vt;
    in->s = make(spec, dim, seed, err, errsz);
    if (!in->s) {
        free(in);
        return NULL;
    }
    return in;
}

fsgd_sworker_t *fsgd_sworker_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    return instance_new(sizeof(fsgd_sworker_t), spec, dim, seed, 0, err, errsz);
}

void fsgd_sworker_destroy(fsgd_sworker_t *w)
{
    if (!w)
        return;
    w->side.vt->worker_destroy(w->side.s);
    free(w);
}

fsgd_codec_t *fsgd_sworker_device_codec(fsgd_sworker_t *w)
{
    return w->side.vt->device_codec ? w->side.vt->device_codec(w->side.s) : NULL;
}

size_t fsgd_sworker_bound(const fsgd_sworker_t *w, size_t n) { return w->side.vt->bound(w->side.s, n); }

int fsgd_sworker_encode(fsgd_sworker_t *w, const uint32_t *keys, const float *vals, size_t n, uint64_t rows,
                        fsgd_outbuf_t *out, char *err, size_t errsz)
{
    return w->side.vt->encode(w->side.s, keys, vals, n, rows, out, err, errsz);
}

/* A strategy that is one codec: that codec decides; the others (efsign,
 * gtopk) choose per message or per budget already split by shard. */
double fsgd_sworker_whole_scale(fsgd_sworker_t *w, const float *whole, size_t n)
{
    fsgd_codec_t *c = fsgd_sworker_device_codec(w);
    return c ? fsgd_codec_whole_scale(c, whole, n) : NAN;
}

void fsgd_sworker_set_whole(fsgd_sworker_t *w, double scale)
{
    fsgd_codec_t *c = fsgd_sworker_device_codec(w);
    if (c)
        fsgd_codec_set_whole(c, scale);
}

int fsgd_sworker_after_step(fsgd_sworker_t *w, int applied, const uint8_t *section, size_t len, char *err,
                            size_t errsz)
{
    return w->side.vt->after_step(w->side.s, applied, section, len, err, errsz);
}

int fsgd_sworker_reset(fsgd_sworker_t *w) { return w->side.vt->reset(w->side.s); }

size_t fsgd_sworker_residual_entries(const fsgd_sworker_t *w) { return w->side.vt->residual_entries(w->side.s); }

fsgd_sagg_t *fsgd_sagg_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    fsgd_sagg_t *a = instance_new(sizeof(fsgd_sagg_t), spec, dim, seed, 1, err, errsz);
    if (a)
        a->dim = dim;
    return a;
}

void fsgd_sagg_destroy(fsgd_sagg_t *a)
{
    if (!a)
        return;
    a->side.vt->agg_destroy(a->side.s);
    fsgd_downlink_destroy(a->down);
    free(a);
}

int fsgd_sagg_add(fsgd_sagg_t *a, uint32_t sender, const uint8_t *msg, size_t len, double value_bound,
                  size_t *entries, char *err, size_t errsz)
{
    size_t ignored;
    return a->side.vt->add(a->side.s, sender, msg, len, value_bound, entries ? entries : &ignored, err, errsz);
}

fsgd_reducer_t *fsgd_sagg_take(fsgd_sagg_t *a, const fsgd_step_info_t *info, char *err, size_t errsz)
{
    return a->side.vt->take(a->side.s, info, err, errsz);
}

const uint8_t *fsgd_sagg_section(const fsgd_sagg_t *a, size_t *len)
{
    *len = 0;
    return a->side.vt->section ? a->side.vt->section(a->side.s, len) : NULL;
}

int fsgd_sagg_plain_sum(const fsgd_sagg_t *a)
{
    return a->side.vt->add == fsgd_codec_agg_add && a->side.vt->take == fsgd_codec_agg_take && !a->side.vt->section &&
           a->side.vt->optimizer == FSGD_OPT_ADAM;
}

fsgd_optimizer_t fsgd_sagg_optimizer(const fsgd_sagg_t *a) { return a->side.vt->optimizer; }

fsgd_optimizer_t fsgd_sworker_optimizer(const fsgd_sworker_t *w) { return w->side.vt->optimizer; }

const char *fsgd_sagg_downlink_spec(const fsgd_sagg_t *a) { return a->side.vt->downlink_spec(a->side.s); }

double fsgd_sagg_param(const fsgd_sagg_t *a, const char *name)
{
    return a->side.vt->param ? a->side.vt->param(a->side.s, name) : (double)NAN;
}
