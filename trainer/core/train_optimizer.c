/* fsgd train's optimizer: its set-up for a run (λ, lr or FTRL's α, a warm
 * start) and the optimizer state a model file keeps (train_optimizer.h). */
#include "train_optimizer.h"

#include <math.h>
#include <string.h>

#include "fsgd/adam.h"
#include "fsgd/error.h"
#include "fsgd/ftrl.h"
#include "fsgd/loss.h"
#include "fsgd/strategy.h"

fsgd_model_state_kind_t fsgd_train_state_kind(const fsgd_train_params_t *job)
{
    return job->optimizer == FSGD_OPTIMIZER_FTRL ? FSGD_MODEL_STATE_FTRL
           : job->lr < 0                         ? FSGD_MODEL_STATE_ADAM_COUNTED
                                                 : FSGD_MODEL_STATE_ADAM;
}

/* --init with a state of this run's kind: the optimizer continues where the
 * saved run stopped (keys without state keep what fsgd_ftrl_start_from or
 * zero moments gave them). */
static void resume_state(trainer_t *t, const fsgd_model_state_t *st)
{
    for (uint64_t i = 0; i < st->n; i++) {
        uint32_t k = st->keys[i];
        if (st->kind == FSGD_MODEL_STATE_FTRL) {
            t->ftrl.z[k] = st->a[i];
            t->ftrl.n[k] = st->b[i];
        } else if (st->kind == FSGD_MODEL_STATE_ADAM_COUNTED) {
            t->adam.keys[k] = (fsgd_adam_key_t){
                .m = st->a[i], .v = st->b[i],
                .count = (uint16_t)(st->c[i] < FSGD_ADAM_COUNT_MAX ? st->c[i] : FSGD_ADAM_COUNT_MAX)};
        } else {
            t->adam.m[k] = st->a[i];
            t->adam.v[k] = st->b[i];
        }
    }
    t->adam.t = st->step;
}

/* --save-state: the optimizer's per-key state of every key that has any,
 * into the model (fsgd/model.h). */
int fsgd_train_save_state(const trainer_t *t, fsgd_model_state_kind_t kind, uint64_t model_dim, fsgd_model_t *model)
{
    uint64_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t i = 0;
        for (uint64_t k = 0; k < model_dim; k++) {
            float a, b;
            uint32_t c = 0;
            if (kind == FSGD_MODEL_STATE_FTRL) {
                a = t->ftrl.z[k], b = t->ftrl.n[k];
            } else if (kind == FSGD_MODEL_STATE_ADAM_COUNTED) {
                a = t->adam.keys[k].m, b = t->adam.keys[k].v, c = t->adam.keys[k].count;
            } else {
                a = t->adam.m[k], b = t->adam.v[k];
            }
            if (a == 0 && b == 0 && c == 0)
                continue;
            if (pass == 1) {
                model->state.keys[i] = (uint32_t)k;
                model->state.a[i] = a;
                model->state.b[i] = b;
                model->state.c[i] = c;
            }
            i++;
        }
        if (pass == 0) {
            n = i;
            FSGD_TRY(fsgd_model_state_alloc(model, kind, n));
        }
    }
    model->state.step = kind == FSGD_MODEL_STATE_FTRL ? 0 : t->adam.t;
    return FSGD_E_OK;
}

int fsgd_train_check_init(const fsgd_train_params_t *job, uint64_t dim, const fsgd_model_t *init, char *err, size_t errsz)
{
    if (init->dim != dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "init model has dim %llu, this job %llu",
                            (unsigned long long)init->dim, (unsigned long long)dim);
    if (init->kind != job->model)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "init model is %s, this job trains %s",
                            fsgd_loss_name(init->kind), fsgd_loss_name(job->model));
    if (init->has_bias != (job->bias ? 1 : 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "init model has %s, this job %s (bias)",
                            init->has_bias ? "an intercept" : "no intercept", job->bias ? "has one" : "has none");
    if (init->has_bias && init->bias != (float)job->bias_value)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "init model's intercept feature is %g, this job's %g (bias_value)",
                            (double)init->bias, job->bias_value);
    return FSGD_E_OK;
}

/* θ and Adam's key state stay on 4 KiB pages. Transparent huge pages
 * (madvise) saved TLB misses, but on this VM a fresh huge page is far dearer
 * to zero when another process has just given its memory back: the 1M x
 * 2^24 CTR job right after Vowpal Wabbit took 2.77-2.87 s with them against
 * 2.11-2.26 s run after itself; on 4 KiB pages 2.35-2.51 s either way. */

/* The optimizer of fsgd train: λ and lr for n_fit rows in steps of B (auto
 * or the job's), Adam with per-key counts (lr auto) or FTRL-Proximal, and a
 * warm start from init. t->adam is allocated. FSGD_E_ARG with err for FTRL
 * parameters that make no sense; other errors without a message. */
int fsgd_train_setup_optimizer(trainer_t *t, uint64_t model_dim, size_t n_fit, size_t B, const fsgd_model_t *init,
                               fsgd_train_stats_t *stats, char *err, size_t errsz)
{
    const fsgd_train_params_t *job = t->job;
    const int ftrl = job->optimizer == FSGD_OPTIMIZER_FTRL;
    int rc = 0;
    t->l2 = fsgd_train_auto_l2(job, n_fit);
    stats->l2 = t->l2;
    /* --staleness τ, only when given (fsgd run's default is not fsgd train's), as the strategy runs it */
    t->delay = job->staleness_given ? fsgd_strategy_max_lag(job->codec, job->staleness) : 0;
    t->adam.p.lr = fsgd_train_auto_lr(job, n_fit, B, t->delay, t->row_l1);
    t->adam.p.beta1 = fsgd_train_auto_beta1(job, t->delay);
    stats->lr = t->adam.p.lr;
    /* Per-key bias corrections (fsgd/adam.h): rare keys take steps of about
     * lr instead of up to ~6·lr. They go with lr auto, which was chosen with
     * them; an explicit lr keeps the plain lazy Adam of fsgd run, so the two
     * trainers still agree on the same settings. */
    if (job->lr < 0 && !ftrl) {
        rc = fsgd_adam_count_keys(&t->adam);
    }
    if (rc == 0 && ftrl) {
        /* fsgd's objective is mean loss + l1|w|₁ + l2/2|w|²; FTRL's rounds
         * sum their rows' losses, so its λ1 and λ2 are those times the
         * training rows (l2 auto: λ2 = 1, LIBLINEAR's C = 1). */
        fsgd_ftrl_params_t fp = {.alpha = fsgd_train_auto_alpha(job, n_fit, B), .beta = job->beta,
                                 .l1 = job->l1 * (double)n_fit, .l2 = t->l2 * (double)n_fit};
        stats->alpha = fp.alpha;
        rc = fsgd_ftrl_init(&t->ftrl, model_dim, &fp);
        if (rc == FSGD_E_ARG)
            return fsgd_err_fmt(err, errsz, rc, "ftrl: alpha %g must be > 0, beta %g, l1 %g and l2 %g >= 0",
                                fp.alpha, job->beta, job->l1, t->l2);
        t->ftrl_on = rc == 0;
        stats->lr = NAN;
    }
    /* Warm start: the weights before the backends are made (a device
     * backend copies θ when it starts); FTRL's z is set to give them back. */
    if (rc == 0 && init) {
        memcpy(t->adam.theta, init->w, model_dim * sizeof *t->adam.theta);
        if (ftrl)
            fsgd_ftrl_start_from(&t->ftrl, t->adam.theta);
        if (init->state.kind == fsgd_train_state_kind(job)) {
            resume_state(t, &init->state);
            stats->init_state = 1;
        }
    }
    return rc < 0 ? FSGD_E_NOMEM : 0;
}
