/* --init MODEL for fsgd run / fsgd aggregator: the aggregator starts from a
 * saved model (its weights, and its optimizer state when the file has this
 * job's kind, fsgd train --save-state) instead of zeros, as fsgd train
 * --init does. A model of another loss, intercept, input format (hashing
 * spec) or dimension is refused, naming what differs. A checkpoint found
 * at start wins over it: a restarted aggregator goes on from its own state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_env.h"
#include "agg_model.h"
#include "fsgd/adam.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/ftrl.h"
#include "fsgd/model.h"
#include "fsgd/rowfmt.h"
#include "fsgd/train.h"

int agg_init_load(agg_model_state_t *ms, const agg_init_ctx_t *c, const agg_env_t *env)
{
    const fsgd_dist_job_t *job = c->job;
    fsgd_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_NOMEM, "init: out of memory");
    char e[FSGD_JOB_PATH_MAX + 256];
    int rc = fsgd_model_load(m, job->train->init, e, sizeof e);
    if (rc < 0) {
        free(m);
        return fsgd_err_fmt(env->err, env->errsz, rc, "init: %s", e);
    }
    char input[sizeof m->input];
    fsgd_rowfmt_input(c->fmt, input, sizeof input);
    uint64_t dim = *c->dim;
    /* without --dim (and a hashed format's 2^bits) the data's dim is what
     * the topic shows so far: the model's stands when it is not smaller */
    if (!job->train->dim && !input[0] && *c->dim <= m->dim)
        dim = m->dim;
    if (strcmp(m->input, input))
        rc = fsgd_err_fmt(env->err, env->errsz, FSGD_E_ARG,
                          "init: %s was trained on input %s, this job reads %s: its weights would belong to other "
                          "features",
                          job->train->init, m->input[0] ? m->input : "libsvm", input[0] ? input : "libsvm");
    else if ((rc = fsgd_train_check_init(job->train, dim, m, e, sizeof e)) < 0)
        rc = fsgd_err_fmt(env->err, env->errsz, rc, "init: %s: %s", job->train->init, e);
    if (rc < 0) {
        fsgd_model_free(m);
        free(m);
        return rc;
    }
    *c->dim = env->s->dim = dim;
    *c->mdim = *c->gweights = dim + (job->train->bias ? 1 : 0);
    ms->init = m;
    return 0;
}

int agg_init_apply(agg_model_state_t *ms, const agg_env_t *e, const fsgd_train_params_t *train, uint64_t mdim)
{
    fsgd_model_t *m = ms->init;
    const fsgd_model_state_t *st = &m->state;
    memcpy(ms->adam.theta, m->w, mdim * sizeof *ms->adam.theta);
    if (ms->ftrl_on)
        fsgd_ftrl_start_from(&ms->ftrl, ms->adam.theta); /* z gives the weights back */
    const int resume = st->kind != FSGD_MODEL_STATE_NONE && st->kind == fsgd_train_state_kind(train);
    for (uint64_t i = 0; resume && i < st->n; i++) {
        uint32_t k = st->keys[i];
        if (k >= mdim)
            continue; /* fsgd_model_load checked the keys against its dim */
        if (st->kind == FSGD_MODEL_STATE_FTRL) {
            ms->ftrl.z[k] = st->a[i];
            ms->ftrl.n[k] = st->b[i];
        } else if (st->kind == FSGD_MODEL_STATE_ADAM_COUNTED) {
            /* counts saturate (fsgd/adam.h): a file's larger one must not wrap */
            uint32_t c = st->c[i] > FSGD_ADAM_COUNT_MAX ? FSGD_ADAM_COUNT_MAX : st->c[i];
            ms->adam.keys[k] = (fsgd_adam_key_t){.m = st->a[i], .v = st->b[i], .count = (uint16_t)c};
        } else {
            ms->adam.m[k] = st->a[i];
            ms->adam.v[k] = st->b[i];
        }
    }
    if (resume && st->kind != FSGD_MODEL_STATE_FTRL)
        ms->adam.t = st->step;
    agg_env_log(e, "starting from %s: %llu nonzero weights of %llu, %s", train->init,
                (unsigned long long)fsgd_model_nnz(m), (unsigned long long)m->dim,
                resume ? "with its optimizer state"
                       : st->kind != FSGD_MODEL_STATE_NONE ? "its optimizer state is another kind: the optimizer starts afresh"
                                                           : "the optimizer starts afresh");
    e->s->init_state = resume;
    fsgd_model_free(m);
    free(m);
    ms->init = NULL;
    return 0;
}

void agg_init_free(agg_model_state_t *m)
{
    if (m->init) {
        fsgd_model_free(m->init);
        free(m->init);
        m->init = NULL;
    }
}
