/* Closing a step: the optimizer update, epoch accounting and evaluation,
 * the next step's quotas (step latency statistics: agg_clock.c). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aggregator_internal.h"
#include "fsgd/step.h"
#include "fsgd/train.h"

void agg_set_quota(fsgd_wire_state_t *st, uint64_t B)
{
    /* B rows per step split over the partitions that still have rows, so a
     * step holds B rows however partitions are spread over workers. */
    uint32_t active = 0;
    for (uint32_t p = 0; p < st->nparts; p++)
        active += st->pos[p] < st->end[p];
    uint32_t i = 0;
    for (uint32_t p = 0; p < st->nparts; p++) {
        if (st->pos[p] >= st->end[p]) {
            st->quota[p] = 0;
            continue;
        }
        uint64_t q = B / active + (i < B % active);
        st->quota[p] = (uint32_t)(q ? q : 0);
        i++;
    }
}

void agg_begin_step(agg_t *a)
{
    a->members.ngot = 0;
    agg_open_begin(&a->open, &a->st, a->step + 1);
    a->clock.step_start = agg_now();
}

/* 1 when the positions reached every partition's end (follow: the data
 * never ends; dry windows move on). */
static int agg_epoch_ends(const agg_t *a)
{
    int end = !a->follow;
    for (uint32_t p = 0; end && p < a->st.nparts; p++)
        end = a->st.pos[p] == a->st.end[p];
    return end;
}

/* The epoch that the step ended: its record, the test evaluation, the
 * epoch_end event; the next epoch starts unless it was the last (*final;
 * t0 is when the step's update began). */
static int agg_end_epoch(agg_t *a, double t0, int *final)
{
    if (a->open.rows_epoch != a->s->dataset_rows)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE,
                            "epoch %u applied %llu rows but the data has %llu: exactly-once violated", a->st.epoch,
                            (unsigned long long)a->open.rows_epoch, (unsigned long long)a->s->dataset_rows);
    fsgd_agg_epoch_t *ep = fsgd_agg_epoch_next(a->s);
    if (!ep)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "epoch %u: out of memory", a->st.epoch);
    ep->epoch = (int)a->st.epoch;
    ep->seconds = a->clock.seconds_before + agg_now() - a->clock.t0;
    ep->seconds_from_step1 = agg_now() - a->clock.t_step1;
    ep->train_loss = a->open.loss_epoch / (double)a->open.rows_epoch;
    ep->rows = a->open.rows_epoch;
    const double parts[5] = {a->s->t_grad, a->s->t_encode, a->s->t_decode, a->s->t_wait,
                             a->s->t_update + agg_now() - t0};
    memcpy(ep->t_at_end, parts, sizeof parts);
    const agg_env_t env = agg_env(a);
    FSGD_TRY(agg_evaluate(a->job->train, a->dim, a->model.adam.theta, a->have_test ? &a->test : NULL, &ep->test,
                          &env));
    a->s->test = ep->test;
    const agg_ctl_ctx_t cc = agg_ctl_ctx(a);
    agg_ctl_begin(&cc, "epoch_end");
    fsgd_cj_u64(&a->cj, "epoch", a->st.epoch);
    fsgd_cj_u64(&a->cj, "step", a->step);
    fsgd_cj_u64(&a->cj, "rows", a->open.rows_epoch);
    fsgd_cj_u64(&a->cj, "dataset_rows", a->s->dataset_rows);
    fsgd_cj_f64(&a->cj, "train_loss", ep->train_loss);
    fsgd_cj_u64(&a->cj, "test_rows", ep->test.n);
    fsgd_cj_f64(&a->cj, "test_auc", ep->test.n ? ep->test.auc : NAN);
    fsgd_cj_f64(&a->cj, "test_logloss", ep->test.n ? ep->test.logloss : NAN);
    fsgd_cj_f64(&a->cj, "seconds", ep->seconds);
    fsgd_cj_f64(&a->cj, "seconds_from_step1", ep->seconds_from_step1);
    fsgd_cj_u64(&a->cj, "workers_live", a->members.nlive);
    agg_ctl_emit(&cc, "epoch_end");
    a->s->n_epochs++;
    *final |= (int)a->st.epoch >= (a->job->train->epochs ? a->job->train->epochs : a->job->train->max_epochs);
    if (!*final) {
        a->st.epoch++;
        memcpy(a->st.pos, a->st.start, a->st.nparts * sizeof *a->st.pos);
        a->open.rows_epoch = 0;
        a->open.loss_epoch = 0;
    }
    return 0;
}

/* The step of R rows is applied: its rows, loss and data positions are the
 * job's, the step count moves on. Returns the keys it touched. */
static size_t step_taken(agg_t *a, uint64_t R)
{
    size_t nt = 0;
    if (R > 0) {
        nt = a->open.g.n;
        a->s->adam_steps++;
        a->s->last_loss = a->open.loss_step / (double)R;
    } else {
        a->s->empty_steps++;
    }
    memcpy(a->st.pos, a->open.newpos, a->st.nparts * sizeof *a->open.newpos);
    a->open.rows_epoch += R;
    a->open.loss_epoch += a->open.loss_step;
    a->s->rows_total += R;
    a->step++;
    a->s->steps = a->step;
    return nt;
}

/* Applies the gathered step; sets *done at the end of the last epoch. */
int agg_apply_step(agg_t *a, int *done, fsgd_agg_progress_fn progress, void *ctx)
{
    double t0 = agg_now();
    a->s->t_wait += a->clock.step_wait;
    uint64_t R = a->open.rows_step;
    fsgd_step_info_t info = {.step = a->step + 1, .rows = R, .loss_sum = a->open.loss_step,
                             .seconds = t0 - a->clock.step_start, .n_senders = (uint32_t)a->open.napplied};
    char e[256];
    /* the step function fsgd train runs too (fsgd/step.h) */
    fsgd_step_opt_t opt = {.adam = &a->model.adam, .ftrl = a->model.ftrl_on ? &a->model.ftrl : NULL, .l2 = a->tune.l2,
                           .before = a->tune.track ? &a->tune.before : NULL, .table = a->model.table};
    const agg_follow_ctx_t fc = agg_follow_ctx(a);
    agg_env_t env = agg_env(a);
    if (a->follow) /* progressive validation: before θ moves */
        FSGD_TRY(agg_follow_score(a->follow, &fc, &a->st, &a->open, &a->data, a->model.adam.theta, &env));
    double ts = agg_now();
    int src = fsgd_step_apply(&opt, a->model.strat, &info, &a->open.g, e, sizeof e);
    a->s->t_update_step += agg_now() - ts;
    a->s->table_keys = a->model.table ? fsgd_sparse_table_size(a->model.table) : 0;
    if (src < 0)
        return fsgd_err_fmt(a->err, a->errsz, src, "aggregator: codec %s: %s", a->job->train->codec, e);
    size_t nt = step_taken(a, R);
    /* The workers wait for this step's model: send it before the
     * bookkeeping below (a holdout look, the loss window, an epoch's end)
     * whenever none of that can change it: no epoch ends, no look can stop
     * the job, no snapshot or follow version is due. The message is the same
     * bytes as after them. */
    int published = 0;
    if (!a->follow && a->step % a->model.snap_every != 0 && !agg_auto_look_due(&a->tune, R) && !agg_epoch_ends(a)) {
        a->st.adam_t = a->model.adam.t;
        agg_set_quota(&a->st, agg_tune_batch(&a->tune, a->job->train, a->s->dataset_rows));
        ts = agg_now();
        const agg_publish_ctx_t pc = agg_publish_ctx(a);
        FSGD_TRY(agg_publish(&pc, &env, 0, 0, a->open.g.keys, nt));
        a->s->t_update_publish += agg_now() - ts;
        published = 1;
    }
    agg_clock_track_loss(&a->clock, a->s, a->open.loss_step, R, a->step, a->job->dist->target_loss);
    a->s->rows_epoch = a->open.rows_epoch;
    int stop = 0; /* epochs auto: the holdout loss stopped improving */
    ts = agg_now();
    double epochs_done = a->tune.track ? agg_auto_epochs(a->st.epoch, a->open.rows_epoch, a->s->dataset_rows) : 0;
    FSGD_TRY(agg_auto_look(&a->tune, &env, a->job->train, a->model.adam.theta, a->mdim, epochs_done, R, &stop));
    a->s->t_update_look += agg_now() - ts;
    int epoch_end = agg_epoch_ends(a);
    if (a->follow)
        FSGD_TRY(agg_follow_after_step(a->follow, &fc, &a->st, &a->open, &a->data, &env));
    int final = stop;
    ts = agg_now();
    if (epoch_end)
        FSGD_TRY(agg_end_epoch(a, t0, &final));
    if (final && a->tune.track) {
        agg_auto_finish(&a->tune, a->s, a->job->train, a->model.adam.theta, a->st.epoch, a->open.rows_epoch); /* the best weights are the job's model */
        FSGD_TRY(agg_evaluate(a->job->train, a->dim, a->model.adam.theta, a->have_test ? &a->test : NULL,
                              &a->s->test, &env));
    }
    a->s->t_update_epoch += agg_now() - ts;
    a->s->epoch = (int)a->st.epoch;
    a->st.adam_t = a->model.adam.t;
    agg_set_quota(&a->st, agg_tune_batch(&a->tune, a->job->train, a->s->dataset_rows));
    int snap = final || a->step % a->model.snap_every == 0 ||
               (a->follow && agg_follow_version_due(a->follow, a->s->rows_total, a->job->dist->version_seconds));
    ts = agg_now();
    if (!published) {
        const agg_publish_ctx_t pc = agg_publish_ctx(a);
        FSGD_TRY(agg_publish(&pc, &env, snap, final, a->open.g.keys, nt));
    }
    a->s->t_update_publish += agg_now() - ts;
    if (a->follow && snap)
        FSGD_TRY(agg_follow_published(a->follow, &fc, &a->st, a->step, a->model.adam.theta, &env));
    /* a follow version comes with its checkpoint (a restart resumes from
     * the two together); otherwise checkpoints are paced by their cost */
    ts = agg_now();
    if (!final && (snap || epoch_end) && (a->follow || agg_ckpt_due(&a->ckpt, a->clock.t0, a->mdim, a->shards))) {
        const agg_ckpt_ctx_t ckpt = agg_ckpt_ctx(a);
        FSGD_TRY(agg_ckpt_write(&ckpt, &env));
    }
    a->s->t_update_ckpt += agg_now() - ts;
    a->s->t_update += agg_now() - t0;
    if (R > 0)
        agg_clock_step_done(&a->clock);
    a->s->seconds = a->clock.seconds_before + agg_now() - a->clock.t0;
    a->s->workers_live = a->members.nlive;
    if (epoch_end && progress) {
        agg_clock_latency_stats(&a->clock, a->s);
        progress(ctx, a->s, 1);
    }
    agg_step_emit(&env, a->model.strat, R > 0 ? agg_now() - a->clock.step_start : -1); /* trace, the caller's hook (/metrics) */
    *done = final;
    agg_begin_step(a);
    return 0;
}

