/* In-process simulation of one distributed run through the public strategy
 * API (fsgd/strategy.h), for the learned strategies' tests: P workers, each
 * taking its own B rows per step of a LIBSVM set, logistic loss; one
 * aggregator that adds every message, takes the sum, applies Adam and sends
 * the model down with fsgd/downlink.h (the strategy's downlink spec) and the
 * strategy's feedback section to every worker. The step time fed to the
 * strategy is a model, not the wall clock, so a run is deterministic:
 * compute_s + the largest uplink message at link_bps. */
#ifndef FSGD_STRATEGY_SIM_H
#define FSGD_STRATEGY_SIM_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/adam.h"
#include "fsgd/csr.h"
#include "fsgd/downlink.h"
#include "fsgd/libsvm.h"
#include "fsgd/metrics.h"
#include "fsgd/strategy.h"

typedef struct sim_cfg {
    const char *spec;
    int workers;
    size_t batch;          /* rows per worker per step */
    int epochs;
    uint64_t seed;
    double compute_s;      /* modelled compute time of a step */
    double link_bps;       /* modelled uplink, bits per second */
    const char *param;     /* a strategy parameter to record per step (may be NULL) */
    const char *param2;
} sim_cfg_t;

typedef struct sim_result {
    int ok;
    char err[256];
    double auc, final_loss;
    size_t steps;
    double bytes_up;       /* mean uplink bytes per worker per step */
    double bytes_down;     /* mean downlink bytes per step */
    double modelled_s;     /* Σ modelled step times */
    double *param, *param2; /* per step (steps entries, malloc'd) */
    double *loss;          /* per step mean training loss */
    double *tcum;          /* modelled time at the end of each step */
    float *theta;          /* final model (dim) */
    uint64_t dim;
} sim_result_t;

static void sim_free(sim_result_t *r)
{
    free(r->param), free(r->param2), free(r->loss), free(r->tcum), free(r->theta);
    memset(r, 0, sizeof *r);
}

static int sim_load(const char *path, fsgd_csr_t *m, char *err, size_t errsz)
{
    memset(m, 0, sizeof *m);
    return fsgd_libsvm_load(path, NULL, m, NULL, err, errsz);
}

/* Modelled seconds until the training loss averaged over the last 8 steps is
 * first <= target; -1 when never. */
static inline double sim_time_to(const sim_result_t *r, double target)
{
    double acc = 0;
    for (size_t s = 0; s < r->steps; s++) {
        acc += r->loss[s] - (s >= 8 ? r->loss[s - 8] : 0);
        if (s >= 7 && acc / 8 <= target)
            return r->tcum[s];
    }
    return -1;
}

static double sim_auc(const fsgd_csr_t *t, const float *theta, uint64_t dim)
{
    double *score = malloc(sizeof(double) * t->n_rows), *lab = malloc(sizeof(double) * t->n_rows);
    for (size_t i = 0; i < t->n_rows; i++) {
        double s = 0;
        for (uint64_t j = t->row_ptr[i]; j < t->row_ptr[i + 1]; j++)
            s += t->col[j] < dim ? theta[t->col[j]] * (double)t->val[j] : 0;
        score[i] = s;
        lab[i] = t->label[i] > 0 ? 1 : 0;
    }
    double auc = fsgd_auc(score, lab, t->n_rows);
    free(score), free(lab);
    return auc;
}

/* Runs cfg on train (scored on test). */
static sim_result_t sim_run(const sim_cfg_t *cfg, const fsgd_csr_t *train, const fsgd_csr_t *test)
{
    sim_result_t r = {0};
    uint64_t dim = train->max_col > test->max_col ? train->max_col : test->max_col;
    r.dim = dim;
    int P = cfg->workers;
    size_t per_step = (size_t)P * cfg->batch, steps = (train->n_rows / per_step) * (size_t)cfg->epochs;
    fsgd_sworker_t *w[16] = {0};
    fsgd_sagg_t *agg = fsgd_sagg_new(cfg->spec, dim, cfg->seed, r.err, sizeof r.err);
    for (int i = 0; i < P && agg; i++)
        if (!(w[i] = fsgd_sworker_new(cfg->spec, dim, cfg->seed + 1 + (uint64_t)i, r.err, sizeof r.err)))
            break;
    fsgd_adam_t adam = {0};
    fsgd_adam_params_t ap = fsgd_adam_defaults();
    fsgd_adam_init(&adam, dim, &ap);
    const char *dspec = agg ? fsgd_sagg_downlink_spec(agg) : NULL;
    /* a lossless strategy sends the model's values themselves: no downlink codec */
    fsgd_downlink_t *down = dspec ? fsgd_downlink_new(dspec, dim, adam.theta, r.err, sizeof r.err) : NULL;
    double *gd = calloc(dim, sizeof(double));
    uint32_t *keys = malloc(sizeof(uint32_t) * dim);
    float *vals = malloc(sizeof(float) * dim);
    uint8_t *touched = calloc(dim, 1);
    size_t cap = 0;
    uint8_t *msg = NULL, *dmsg = NULL;
    fsgd_sparse_t step = {0};
    r.param = calloc(steps + 1, sizeof(double));
    r.param2 = calloc(steps + 1, sizeof(double));
    r.loss = calloc(steps + 1, sizeof(double));
    r.tcum = calloc(steps + 1, sizeof(double));
    if (!agg || !w[P - 1] || (dspec && !down) || !gd || !keys || !vals || !touched || !r.param || !r.param2 || !r.loss || !r.tcum)
        goto out;
    cap = fsgd_sworker_bound(w[0], dim) + 64;
    msg = malloc(cap);
    size_t dcap = down ? fsgd_downlink_bound(down, dim) : 1;
    dmsg = malloc(dcap);
    double up_total = 0, down_total = 0;
    for (size_t s = 0; s < steps; s++) {
        const float *rho = down ? fsgd_downlink_replica(down) : adam.theta;
        double loss_sum = 0, max_bytes = 0;
        for (int i = 0; i < P; i++) {
            size_t row0 = ((s * (size_t)P + (size_t)i) * cfg->batch) % (train->n_rows - cfg->batch);
            size_t n = 0;
            for (size_t row = row0; row < row0 + cfg->batch; row++) {
                double m = 0, y = train->label[row] > 0 ? 1 : -1;
                for (uint64_t j = train->row_ptr[row]; j < train->row_ptr[row + 1]; j++)
                    m += rho[train->col[j]] * (double)train->val[j];
                double z = -y * m;
                loss_sum += z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
                double g = -y / (1 + exp(-z));
                for (uint64_t j = train->row_ptr[row]; j < train->row_ptr[row + 1]; j++) {
                    uint32_t k = train->col[j];
                    if (!touched[k]) {
                        touched[k] = 1;
                        keys[n++] = k;
                    }
                    gd[k] += g * train->val[j];
                }
            }
            /* keys increasing */
            size_t m = 0;
            for (uint32_t k = 0; k < dim && m < n; k++)
                if (touched[k]) {
                    keys[m] = k;
                    vals[m++] = (float)gd[k];
                    touched[k] = 0;
                    gd[k] = 0;
                }
            fsgd_outbuf_t up = {msg, cap, 0};
            if (fsgd_sworker_encode(w[i], keys, vals, n, cfg->batch, &up, r.err, sizeof r.err) < 0)
                goto out;
            size_t len = up.len;
            up_total += (double)len;
            max_bytes = len > max_bytes ? (double)len : max_bytes;
            if (fsgd_sagg_add(agg, (uint32_t)i, msg, len, 1e30, NULL, r.err, sizeof r.err) < 0)
                goto out;
        }
        double secs = cfg->compute_s + max_bytes * 8 / cfg->link_bps;
        r.modelled_s += secs;
        r.tcum[s] = r.modelled_s;
        fsgd_step_info_t info = {s + 1, per_step, loss_sum, secs, (uint32_t)P};
        fsgd_reducer_t *red = fsgd_sagg_take(agg, &info, r.err, sizeof r.err);
        if (!red || fsgd_reducer_take_step(red, 1.0 / (double)per_step, 0, adam.theta, &step) < 0)
            goto out;
        fsgd_adam_step(&adam, step.keys, step.vals, step.n);
        fsgd_outbuf_t dout = {dmsg, dcap, 8 * step.n};
        if (down && fsgd_downlink_encode(down, adam.theta, step.keys, step.n, 0, &dout, r.err, sizeof r.err) < 0)
            goto out;
        size_t dlen = dout.len;
        down_total += (double)dlen;
        size_t slen = 0;
        const uint8_t *sec = fsgd_sagg_section(agg, &slen);
        for (int i = 0; i < P; i++)
            if (fsgd_sworker_after_step(w[i], 1, sec, slen, r.err, sizeof r.err) < 0)
                goto out;
        r.loss[s] = loss_sum / (double)per_step;
        r.param[s] = cfg->param ? fsgd_sagg_param(agg, cfg->param) : NAN;
        r.param2[s] = cfg->param2 ? fsgd_sagg_param(agg, cfg->param2) : NAN;
    }
    r.steps = steps;
    r.bytes_up = up_total / (double)(steps * (size_t)P);
    r.bytes_down = down_total / (double)steps;
    r.final_loss = r.loss[steps - 1];
    const float *final = down ? fsgd_downlink_replica(down) : adam.theta;
    r.auc = sim_auc(test, final, dim);
    r.theta = malloc(sizeof(float) * dim);
    if (r.theta)
        memcpy(r.theta, final, sizeof(float) * dim);
    r.ok = r.theta != NULL;
out:
    for (int i = 0; i < P; i++)
        fsgd_sworker_destroy(w[i]);
    fsgd_sagg_destroy(agg);
    fsgd_downlink_destroy(down);
    fsgd_adam_free(&adam);
    fsgd_sparse_free(&step);
    free(gd), free(keys), free(vals), free(touched), free(msg), free(dmsg);
    return r;
}

#endif
