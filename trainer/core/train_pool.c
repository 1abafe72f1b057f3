/* train_pool.h: the step engine of fsgd train (train_engine.h) for
 * fsgd_train_stream, which brings its own rows each step. */
#include "train_pool.h"

#include <stdlib.h>

#include "fsgd/clock.h"
#include "fsgd/error.h"
#include "train_engine.h"

struct fsgd_train_pool {
    trainer_t t;
    int started; /* threads running, this one included */
};

fsgd_train_pool_t *fsgd_train_pool_new(const fsgd_train_params_t *job, uint64_t model_dim, const fsgd_adam_params_t *ap,
                                       int count_keys, const fsgd_ftrl_params_t *ftrl, double l2, int threads,
                                       char *err, size_t errsz)
{
    if (threads < 1 || threads > 64) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%d threads: 1 to 64", threads);
        return NULL;
    }
    fsgd_train_pool_t *p = calloc(1, sizeof *p);
    if (!p) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
        return NULL;
    }
    trainer_t *t = &p->t;
    t->job = job;
    t->l2 = l2;
    t->n_workers = threads;
    p->started = 1;
    int rc;
    if (ftrl) {
        rc = fsgd_adam_init_weights(&t->adam, model_dim);
        if (rc == 0)
            rc = fsgd_ftrl_init(&t->ftrl, model_dim, ftrl);
        t->ftrl_on = rc == 0;
    } else {
        rc = fsgd_adam_init(&t->adam, model_dim, ap);
        if (rc == 0 && count_keys)
            rc = fsgd_adam_count_keys(&t->adam);
    }
    if (rc == 0 && !(t->workers = calloc((size_t)threads, sizeof *t->workers)))
        rc = FSGD_E_NOMEM;
    if (rc < 0) {
        fsgd_err_fmt(err, errsz, rc, "out of memory setting up training (model dim %llu)",
                     (unsigned long long)model_dim);
        fsgd_train_pool_free(p);
        return NULL;
    }
    /* the streaming step: CPU backend, codec none (a plain decode-and-sum) */
    for (int i = 0; i < threads && rc == 0; i++) {
        worker_t *w = &t->workers[i];
        w->t = t;
        w->batch_id = -1;
        if (!(w->backend = fsgd_backend_new("cpu", model_dim, t->adam.theta, err, errsz)) ||
            !(w->strat = fsgd_sworker_new("none", model_dim, job->seed + (uint64_t)i, err, errsz)))
            rc = FSGD_E_ARG;
    }
    if (rc == 0 && !(t->agg = fsgd_sagg_new("none", model_dim, job->seed, err, errsz)))
        rc = FSGD_E_ARG;
    if (rc == 0 && !(t->plain = fsgd_sagg_plain_sum(t->agg)))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_STATE, "codec none is not a plain sum");
    t->direct = t->plain;
    if (rc == 0 && fsgd_trainer_start(t, &p->started) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cannot start worker thread %d", p->started);
    if (rc < 0) {
        fsgd_train_pool_free(p);
        return NULL;
    }
    return p;
}

fsgd_adam_t *fsgd_train_pool_adam(fsgd_train_pool_t *p)
{
    return &p->t.adam;
}

uint64_t fsgd_train_pool_touched(const fsgd_train_pool_t *p, uint64_t n_keys)
{
    return p->t.ftrl_on ? fsgd_ftrl_touched(&p->t.ftrl, n_keys) : fsgd_adam_touched(&p->t.adam, n_keys);
}

int fsgd_train_pool_step(fsgd_train_pool_t *p, fsgd_train_pool_fill_fn fill, void *ctx, size_t rows,
                         double *loss, size_t *nnz, double *t_round, char *err, size_t errsz)
{
    trainer_t *t = &p->t;
    const int W = t->n_workers;
    double s0 = fsgd_clock_s();
    t->fill = fill;
    t->fill_ctx = ctx;
    fsgd_trainer_round(t, PHASE_GRADIENT);
    t->fill = NULL;
    *t_round = fsgd_clock_s() - s0;
    *loss = 0;
    *nnz = 0;
    for (int i = 0; i < W; i++) {
        if (t->workers[i].rc < 0)
            return fsgd_err_fmt(err, errsz, t->workers[i].rc, "worker %d: %s", i, t->workers[i].err);
        *loss += t->workers[i].loss;
        *nnz += t->workers[i].own.nnz;
    }
    t->inv_rows = 1.0 / (double)rows;
    fsgd_trainer_split_keys(t, t->adam.dim);
    fsgd_adam_advance(&t->adam);
    fsgd_trainer_round(t, PHASE_UPDATE);
    for (int i = 0; i < W; i++)
        if (t->workers[i].rc < 0)
            return fsgd_err_fmt(err, errsz, t->workers[i].rc, "worker %d: %s", i, t->workers[i].err);
    return FSGD_E_OK;
}

void fsgd_train_pool_stats(const fsgd_train_pool_t *p, fsgd_train_stats_t *stats)
{
    fsgd_trainer_sum_stats(&p->t, stats);
}

void fsgd_train_pool_free(fsgd_train_pool_t *p)
{
    if (!p)
        return;
    fsgd_trainer_stop(&p->t, p->started);
    fsgd_trainer_free(&p->t);
    free(p);
}
