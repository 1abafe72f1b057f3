/* fsgd train --shards S: S aggregator shards in one process (train_shards.h). */
#include "train_shards.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/reduce.h"
#include "fsgd/shard.h"
#include "fsgd/step.h"

typedef struct shard {
    uint64_t dim; /* local keys */
    fsgd_adam_t adam; /* this shard's θ, Adam's state and t */
    fsgd_ftrl_t ftrl;
    int ftrl_on;
    float *rarity, *l2_scale; /* the global factors of this shard's keys (NULL: none) */
    fsgd_sagg_t *agg;
    fsgd_sparse_t out, before;
} shard_t;

typedef struct shard_worker {
    fsgd_sparse_t parts[FSGD_SHARDS_MAX];
    fsgd_sworker_t *strat[FSGD_SHARDS_MAX];
    fsgd_outbuf_t msg[FSGD_SHARDS_MAX];
} shard_worker_t;

/* Which per-key state the global optimizer had (made again by store). */
enum { STATE_PLAIN, STATE_COUNTED, STATE_FTRL };

struct fsgd_shards {
    uint32_t S;
    int state;
    int W;
    uint64_t dim; /* global keys */
    double l2;
    shard_t *sh;
    shard_worker_t *w;
    /* the busiest shard's share: summed and max over steps with keys */
    uint64_t busy_steps;
    double busy_sum, busy_max, range_sum, range_max;
};

/* The global array's values of shard I's keys. */
static float *split_floats(const float *global, uint64_t ld, uint32_t I, uint32_t S)
{
    float *p = malloc((ld ? ld : 1) * sizeof *p);
    if (p)
        for (uint64_t l = 0; l < ld; l++)
            p[l] = global[fsgd_shard_global(l, I, S)];
    return p;
}

static int shard_open(fsgd_shards_t *s, const fsgd_shards_opt_t *o, uint32_t I, char *err, size_t errsz)
{
    shard_t *sh = &s->sh[I];
    const fsgd_adam_t *g = o->adam;
    const uint64_t ld = sh->dim = fsgd_shard_dim(s->dim, I, s->S);
    int rc;
    if (o->ftrl) {
        rc = fsgd_adam_init_weights(&sh->adam, ld);
        if (rc == 0 && (rc = fsgd_ftrl_init(&sh->ftrl, ld, &o->ftrl->p)) == 0) {
            sh->ftrl_on = 1;
            for (uint64_t l = 0; l < ld; l++) {
                sh->ftrl.z[l] = o->ftrl->z[fsgd_shard_global(l, I, s->S)];
                sh->ftrl.n[l] = o->ftrl->n[fsgd_shard_global(l, I, s->S)];
            }
        }
    } else if (g->keys) {
        rc = fsgd_adam_init_counted(&sh->adam, ld, &g->p);
        for (uint64_t l = 0; rc == 0 && l < ld; l++)
            sh->adam.keys[l] = g->keys[fsgd_shard_global(l, I, s->S)];
    } else {
        rc = fsgd_adam_init(&sh->adam, ld, &g->p);
        for (uint64_t l = 0; rc == 0 && l < ld; l++) {
            sh->adam.m[l] = g->m[fsgd_shard_global(l, I, s->S)];
            sh->adam.v[l] = g->v[fsgd_shard_global(l, I, s->S)];
        }
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "shard %u: out of memory for %llu keys' state", I,
                            (unsigned long long)ld);
    for (uint64_t l = 0; l < ld; l++)
        sh->adam.theta[l] = g->theta[fsgd_shard_global(l, I, s->S)];
    sh->adam.t = g->t;
    if ((g->rarity && !(sh->rarity = split_floats(g->rarity, ld, I, s->S))) ||
        (o->l2_scale && !(sh->l2_scale = split_floats(o->l2_scale, ld, I, s->S))))
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "shard %u: out of memory", I);
    sh->adam.rarity = sh->rarity;
    sh->adam.rarity_cap = g->rarity_cap;
    char spec[256], e[256];
    if (fsgd_strategy_shard_spec(o->spec, s->dim, I, s->S, spec, sizeof spec, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s", e);
    if (!(sh->agg = fsgd_sagg_new(spec, ld, o->seed + I, e, sizeof e)))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "shard %u: %s", I, e);
    for (int i = 0; i < s->W; i++)
        if (!(s->w[i].strat[I] = fsgd_sworker_new(spec, ld, o->seed + (uint64_t)i + ((uint64_t)I << 32), e, sizeof e)))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "shard %u, worker %d: %s", I, i, e);
    return 0;
}

fsgd_shards_t *fsgd_shards_new(const fsgd_shards_opt_t *o, int *rc, char *err, size_t errsz)
{
    if ((*rc = fsgd_strategy_check_shards(o->spec, (int)o->shards, err, errsz)) < 0)
        return NULL;
    if (o->shards < 2 || o->workers < 1) {
        *rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%u shards, %d workers: at least 2 and 1", o->shards, o->workers);
        return NULL;
    }
    fsgd_shards_t *s = calloc(1, sizeof *s);
    if (!s || !(s->sh = calloc(o->shards, sizeof *s->sh)) || !(s->w = calloc((size_t)o->workers, sizeof *s->w))) {
        if (s)
            free(s->sh);
        free(s);
        *rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory for %u shards", o->shards);
        return NULL;
    }
    s->S = o->shards;
    s->W = o->workers;
    s->dim = o->adam->dim;
    s->l2 = o->l2;
    for (uint32_t I = 0; I < s->S; I++)
        if ((*rc = shard_open(s, o, I, err, errsz)) < 0) {
            fsgd_shards_destroy(s);
            return NULL;
        }
    /* the shards hold the per-key state now: the global copy goes until
     * fsgd_shards_store (2^24 keys: 168 MB of Adam's) */
    s->state = o->ftrl ? STATE_FTRL : o->adam->keys ? STATE_COUNTED : STATE_PLAIN;
    if (o->ftrl)
        fsgd_ftrl_free(o->ftrl);
    free(o->adam->keys);
    free(o->adam->m);
    free(o->adam->v);
    o->adam->keys = NULL;
    o->adam->m = o->adam->v = NULL;
    return s;
}

void fsgd_shards_destroy(fsgd_shards_t *s)
{
    if (!s)
        return;
    for (uint32_t I = 0; I < s->S; I++) {
        shard_t *sh = &s->sh[I];
        fsgd_adam_free(&sh->adam);
        fsgd_ftrl_free(&sh->ftrl);
        free(sh->rarity);
        free(sh->l2_scale);
        fsgd_sagg_destroy(sh->agg);
        fsgd_sparse_free(&sh->out);
        fsgd_sparse_free(&sh->before);
        for (int i = 0; i < s->W; i++) {
            fsgd_sparse_free(&s->w[i].parts[I]);
            fsgd_sworker_destroy(s->w[i].strat[I]);
            free(s->w[i].msg[I].dst);
        }
    }
    free(s->sh);
    free(s->w);
    free(s);
}

int fsgd_shards_encode(fsgd_shards_t *s, int worker, const fsgd_sparse_t *grad, uint64_t rows,
                       uint64_t *raw_bytes, uint64_t *wire_bytes, char *err, size_t errsz)
{
    shard_worker_t *w = &s->w[worker];
    if (fsgd_shard_split(grad, s->S, w->parts) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory splitting %zu entries", grad->n);
    /* every shard runs the same spec: the whole's scale once for all parts */
    double whole = fsgd_sworker_whole_scale(w->strat[0], grad->vals, grad->n);
    for (uint32_t I = 0; I < s->S; I++) {
        const fsgd_sparse_t *p = &w->parts[I];
        size_t bound = fsgd_sworker_bound(w->strat[I], p->n);
        fsgd_outbuf_t *msg = &w->msg[I];
        if (bound > msg->cap) {
            uint8_t *b = realloc(msg->dst, bound);
            if (!b)
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory for a %zu-byte message", bound);
            msg->dst = b;
            msg->cap = bound;
        }
        char e[256];
        fsgd_sworker_set_whole(w->strat[I], whole);
        int rc = fsgd_sworker_encode(w->strat[I], p->keys, p->vals, p->n, rows, msg, e, sizeof e);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "shard %u: %s", I, e);
        *raw_bytes += 8 * (uint64_t)p->n;
        *wire_bytes += msg->len;
    }
    return 0;
}

/* fsgd_step_apply with λ's per-key factor (Adam on a plain sum, fsgd
 * train's key_l2_scale), which the step function has no room for: the same
 * arithmetic as the unsharded trainer's reduction. */
static int step_scaled(shard_t *sh, double l2, const fsgd_step_info_t *info, int keep, char *err, size_t errsz)
{
    char e[256];
    fsgd_reducer_t *red = fsgd_sagg_take(sh->agg, info, e, sizeof e);
    if (!red)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy: %s", e);
    sh->out.n = 0;
    sh->before.n = 0;
    if (info->rows == 0) {
        fsgd_reducer_clear(red);
        return 0;
    }
    const uint32_t *keys;
    const double *sums;
    size_t n;
    FSGD_TRY(fsgd_reducer_sorted(red, &keys, &sums, &n));
    FSGD_TRY(fsgd_sparse_reserve(&sh->out, n));
    if (keep)
        FSGD_TRY(fsgd_sparse_reserve(&sh->before, n));
    const double inv_rows = 1.0 / (double)info->rows;
    for (size_t i = 0; i < n; i++) {
        float th = sh->adam.theta[keys[i]];
        sh->out.keys[i] = keys[i];
        sh->out.vals[i] = fsgd_adam_step_grad(sums[i], inv_rows, l2 * sh->l2_scale[keys[i]], th);
        if (keep) {
            sh->before.keys[i] = keys[i];
            sh->before.vals[i] = th;
        }
    }
    sh->out.n = n;
    sh->before.n = keep ? n : 0;
    fsgd_reducer_clear(red);
    fsgd_adam_step(&sh->adam, sh->out.keys, sh->out.vals, n);
    return 0;
}

/* The share of the busiest of S contiguous key ranges among keys (sorted). */
static double range_share(const fsgd_sparse_t *keys, uint64_t dim, uint32_t S)
{
    size_t lo = 0, most = 0;
    for (uint32_t I = 0; I < S; I++) {
        uint64_t hi_key = dim * (I + 1) / S;
        size_t hi = lo;
        while (hi < keys->n && keys->keys[hi] < hi_key)
            hi++;
        if (hi - lo > most)
            most = hi - lo;
        lo = hi;
    }
    return (double)most * S / (double)keys->n;
}

int fsgd_shards_step_shard(fsgd_shards_t *s, uint32_t I, fsgd_adam_t *global, const fsgd_step_info_t *info,
                           int keep_before, char *err, size_t errsz)
{
    char e[256];
    shard_t *sh = &s->sh[I];
    /* the parts in worker order, as the one aggregator takes the messages */
    for (int i = 0; i < s->W; i++) {
        int rc = fsgd_sagg_add(sh->agg, (uint32_t)i, s->w[i].msg[I].dst, s->w[i].msg[I].len, INFINITY, NULL, e, sizeof e);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "shard %u, worker %d: %s", I, i, e);
    }
    int rc;
    if (sh->l2_scale && !sh->ftrl_on && fsgd_sagg_optimizer(sh->agg) == FSGD_OPT_ADAM) {
        rc = step_scaled(sh, s->l2, info, keep_before, e, sizeof e);
    } else {
        fsgd_step_opt_t opt = {.adam = &sh->adam, .ftrl = sh->ftrl_on ? &sh->ftrl : NULL, .l2 = s->l2,
                               .before = keep_before ? &sh->before : NULL};
        rc = fsgd_step_apply(&opt, sh->agg, info, &sh->out, e, sizeof e);
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "shard %u: %s", I, e);
    /* the global replica, as a worker applies the shard's downlink (this
     * shard's keys only: shards on other threads write other keys) */
    for (size_t j = 0; j < sh->out.n; j++)
        global->theta[fsgd_shard_global(sh->out.keys[j], I, s->S)] = sh->adam.theta[sh->out.keys[j]];
    size_t slen;
    const uint8_t *sec = fsgd_sagg_section(sh->agg, &slen);
    for (int i = 0; i < s->W; i++)
        if ((rc = fsgd_sworker_after_step(s->w[i].strat[I], 1, sec, slen, e, sizeof e)) < 0)
            return fsgd_err_fmt(err, errsz, rc, "shard %u, worker %d: feedback: %s", I, i, e);
    return 0;
}

int fsgd_shards_step_close(fsgd_shards_t *s, fsgd_adam_t *global, fsgd_sparse_t *before, fsgd_sparse_t *upd,
                           char *err, size_t errsz)
{
    size_t most = 0, total = 0;
    fsgd_sparse_t outs[FSGD_SHARDS_MAX], befores[FSGD_SHARDS_MAX];
    for (uint32_t I = 0; I < s->S; I++) {
        outs[I] = s->sh[I].out;
        befores[I] = s->sh[I].before;
        total += outs[I].n;
        if (outs[I].n > most)
            most = outs[I].n;
    }
    global->t = s->sh[0].adam.t;
    if (fsgd_shard_merge(outs, s->S, upd) < 0 || (before && fsgd_shard_merge(befores, s->S, before) < 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory merging the shards' updates");
    if (total) {
        double share = (double)most * s->S / (double)total, range = range_share(upd, s->dim, s->S);
        s->busy_steps++;
        s->busy_sum += share;
        s->range_sum += range;
        if (share > s->busy_max)
            s->busy_max = share;
        if (range > s->range_max)
            s->range_max = range;
    }
    return 0;
}

uint32_t fsgd_shards_count(const fsgd_shards_t *s) { return s->S; }

int fsgd_shards_store(const fsgd_shards_t *s, fsgd_adam_t *adam, fsgd_ftrl_t *ftrl)
{
    size_t n = adam->dim ? (size_t)adam->dim : 1;
    int ok = 1;
    if (s->state == STATE_FTRL && ftrl && !ftrl->z)
        ok = (ftrl->z = calloc(n, sizeof *ftrl->z)) && (ftrl->n = calloc(n, sizeof *ftrl->n));
    else if (s->state == STATE_COUNTED && !adam->keys)
        ok = (adam->keys = calloc(n, sizeof *adam->keys)) != NULL;
    else if (s->state == STATE_PLAIN && !adam->m)
        ok = (adam->m = calloc(n, sizeof *adam->m)) && (adam->v = calloc(n, sizeof *adam->v));
    if (!ok)
        return FSGD_E_NOMEM;
    for (uint32_t I = 0; I < s->S; I++) {
        const shard_t *sh = &s->sh[I];
        for (uint64_t l = 0; l < sh->dim; l++) {
            uint64_t k = fsgd_shard_global(l, I, s->S);
            if (adam->theta)
                adam->theta[k] = sh->adam.theta[l];
            if (sh->ftrl_on && ftrl && ftrl->z) {
                ftrl->z[k] = sh->ftrl.z[l];
                ftrl->n[k] = sh->ftrl.n[l];
            } else if (adam->keys && sh->adam.keys) {
                adam->keys[k] = sh->adam.keys[l];
            } else if (adam->m && sh->adam.m) {
                adam->m[k] = sh->adam.m[l];
                adam->v[k] = sh->adam.v[l];
            }
        }
    }
    adam->t = s->sh[0].adam.t;
    return 0;
}

void fsgd_shards_busy(const fsgd_shards_t *s, double *mean, double *max, double *range_mean, double *range_max)
{
    double n = s->busy_steps ? (double)s->busy_steps : NAN;
    *mean = s->busy_sum / n;
    *max = s->busy_steps ? s->busy_max : NAN;
    *range_mean = s->range_sum / n;
    *range_max = s->busy_steps ? s->range_max : NAN;
}
