/* Closing a step: the optimizer update, epoch accounting and evaluation,
 * the next step's quotas, and step latency statistics. */
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

void agg_set_quota(agg_t *a)
{
    /* B rows per step split over the partitions that still have rows, so a
     * step holds B rows however partitions are spread over workers. */
    /* a fraction follows the data (continuous training: it grows); auto
     * was fixed with lr at the start */
    uint64_t B = a->job->batch > 0 && a->job->batch < 1 ? fsgd_train_auto_batch(a->job, a->s->dataset_rows, 1)
                                                        : a->tune.batch;
    uint32_t active = 0;
    for (uint32_t p = 0; p < a->st.nparts; p++)
        active += a->st.pos[p] < a->st.end[p];
    uint32_t i = 0;
    for (uint32_t p = 0; p < a->st.nparts; p++) {
        if (a->st.pos[p] >= a->st.end[p]) {
            a->st.quota[p] = 0;
            continue;
        }
        uint64_t q = B / active + (i < B % active);
        a->st.quota[p] = (uint32_t)(q ? q : 0);
        i++;
    }
}

void agg_begin_step(agg_t *a)
{
    a->members.ngot = 0;
    a->open.napplied = 0;
    a->open.up_entries_step = 0;
    a->open.up_bytes_step = 0;
    memset(a->open.claimed, 0, a->st.nparts);
    memcpy(a->open.newpos, a->st.pos, a->st.nparts * sizeof *a->open.newpos);
    a->open.rows_step = 0;
    a->open.loss_step = 0;
    a->clock.step_start = agg_now();
    fsgd_kasm_prune(a->open.as, a->step + 1);
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

void agg_latency_stats(agg_t *a)
{
    a->s->hop_grads_ms_p50 = fsgd_klat_quantile(&a->clock.lat_grads, 0.5);
    a->s->hop_grads_ms_p99 = fsgd_klat_quantile(&a->clock.lat_grads, 0.99);
    if (!a->clock.n_step_ms)
        return;
    double *c = malloc(a->clock.n_step_ms * sizeof *c);
    if (!c)
        return;
    memcpy(c, a->clock.step_ms, a->clock.n_step_ms * sizeof *c);
    qsort(c, a->clock.n_step_ms, sizeof *c, cmp_d);
    double sum = 0;
    for (size_t i = 0; i < a->clock.n_step_ms; i++)
        sum += c[i];
    a->s->step_ms_mean = sum / a->clock.n_step_ms;
    a->s->step_ms_p50 = c[a->clock.n_step_ms / 2];
    a->s->step_ms_p99 = c[(size_t)(0.99 * (a->clock.n_step_ms - 1))];
    free(c);
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

/* Time from step 1, and the moving-average training loss that
 * time-to-target is measured on (the group join and data loading before
 * step 1 are left out). */
static void agg_track_loss(agg_t *a, uint64_t R)
{
    double tnow = agg_now();
    if (a->clock.t_step1 == 0) {
        a->clock.t_step1 = tnow;
        a->s->step1_at = tnow - a->clock.t0;
    }
    if (R == 0)
        return;
    a->clock.win_loss[a->clock.win_i % FSGD_AGG_LOSS_WINDOW] = a->open.loss_step;
    a->clock.win_rows[a->clock.win_i % FSGD_AGG_LOSS_WINDOW] = R;
    a->clock.win_i++;
    double ls = 0;
    uint64_t rs = 0;
    for (unsigned i = 0; i < FSGD_AGG_LOSS_WINDOW && i < a->clock.win_i; i++) {
        ls += a->clock.win_loss[i];
        rs += a->clock.win_rows[i];
    }
    a->s->loss_ma = ls / (double)rs;
    if (a->job->target_loss > 0 && a->s->time_to_target < 0 && a->s->loss_ma <= a->job->target_loss) {
        a->s->time_to_target = tnow - a->clock.t_step1;
        a->s->target_step = a->step;
    }
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
    FSGD_TRY(agg_evaluate(a, &ep->test));
    a->s->test = ep->test;
    agg_ctl_begin(a, "epoch_end");
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
    agg_ctl_emit(a, "epoch_end");
    a->s->n_epochs++;
    *final |= (int)a->st.epoch >= (a->job->epochs ? a->job->epochs : a->job->max_epochs);
    if (!*final) {
        a->st.epoch++;
        memcpy(a->st.pos, a->st.start, a->st.nparts * sizeof *a->st.pos);
        a->open.rows_epoch = 0;
        a->open.loss_epoch = 0;
    }
    return 0;
}

/* A step's wall time from its start, for the latency percentiles (kept
 * while memory allows). */
static void agg_record_step_ms(agg_t *a)
{
    if (a->clock.n_step_ms == a->clock.cap_step_ms) {
        size_t nc = a->clock.cap_step_ms ? 2 * a->clock.cap_step_ms : 1024;
        double *ns = realloc(a->clock.step_ms, nc * sizeof *ns);
        if (ns) {
            a->clock.step_ms = ns;
            a->clock.cap_step_ms = nc;
        }
    }
    if (a->clock.n_step_ms < a->clock.cap_step_ms)
        a->clock.step_ms[a->clock.n_step_ms++] = (agg_now() - a->clock.step_start) * 1e3;
}

/* Applies the gathered step; sets *done at the end of the last epoch. */
int agg_apply_step(agg_t *a, int *done, fsgd_agg_progress_fn progress, void *ctx)
{
    double t0 = agg_now();
    a->s->t_wait += a->clock.step_wait;
    uint64_t R = a->open.rows_step;
    size_t nt = 0;
    fsgd_step_info_t info = {.step = a->step + 1, .rows = R, .loss_sum = a->open.loss_step,
                             .seconds = t0 - a->clock.step_start, .n_senders = (uint32_t)a->open.napplied};
    char e[256];
    /* the step function fsgd train runs too (fsgd/step.h) */
    fsgd_step_opt_t opt = {.adam = &a->model.adam, .ftrl = a->model.ftrl_on ? &a->model.ftrl : NULL, .l2 = a->tune.l2,
                           .before = a->tune.track ? &a->tune.before : NULL};
    if (a->follow)
        FSGD_TRY(agg_follow_score(a)); /* progressive validation: before θ moves */
    double ts = agg_now();
    int src = fsgd_step_apply(&opt, a->model.strat, &info, &a->open.g, e, sizeof e);
    a->s->t_update_step += agg_now() - ts;
    if (src < 0)
        return fsgd_err_fmt(a->err, a->errsz, src, "aggregator: codec %s: %s", a->job->codec, e);
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
    /* The workers wait for this step's model: send it before the
     * bookkeeping below (a holdout look, the loss window, an epoch's end)
     * whenever none of that can change it: no epoch ends, no look can stop
     * the job, no snapshot or follow version is due. The message is the same
     * bytes as after them. */
    int published = 0;
    if (!a->follow && a->step % a->model.snap_every != 0 && !agg_auto_look_due(a, R) && !agg_epoch_ends(a)) {
        a->st.adam_t = a->model.adam.t;
        agg_set_quota(a);
        ts = agg_now();
        FSGD_TRY(agg_publish(a, 0, 0, a->open.g.keys, nt));
        a->s->t_update_publish += agg_now() - ts;
        published = 1;
    }
    agg_track_loss(a, R);
    a->s->rows_epoch = a->open.rows_epoch;
    int stop = 0; /* epochs auto: the holdout loss stopped improving */
    ts = agg_now();
    FSGD_TRY(agg_auto_look(a, R, &stop));
    a->s->t_update_look += agg_now() - ts;
    int epoch_end = agg_epoch_ends(a);
    if (a->follow)
        FSGD_TRY(agg_follow_after_step(a));
    int final = stop;
    ts = agg_now();
    if (epoch_end)
        FSGD_TRY(agg_end_epoch(a, t0, &final));
    if (final && a->tune.track) {
        agg_auto_finish(a); /* the best weights are the job's model */
        FSGD_TRY(agg_evaluate(a, &a->s->test));
    }
    a->s->t_update_epoch += agg_now() - ts;
    a->s->epoch = (int)a->st.epoch;
    a->st.adam_t = a->model.adam.t;
    agg_set_quota(a);
    int snap = final || a->step % a->model.snap_every == 0 || (a->follow && agg_follow_version_due(a));
    ts = agg_now();
    if (!published)
        FSGD_TRY(agg_publish(a, snap, final, a->open.g.keys, nt));
    a->s->t_update_publish += agg_now() - ts;
    if (a->follow && snap)
        FSGD_TRY(agg_follow_published(a));
    /* a follow version comes with its checkpoint (a restart resumes from
     * the two together); otherwise checkpoints are paced by their cost */
    ts = agg_now();
    if (!final && (snap || epoch_end) && (a->follow || agg_ckpt_due(a)))
        FSGD_TRY(agg_ckpt_write(a));
    a->s->t_update_ckpt += agg_now() - ts;
    a->s->t_update += agg_now() - t0;
    if (R > 0)
        agg_record_step_ms(a);
    a->s->seconds = a->clock.seconds_before + agg_now() - a->clock.t0;
    a->s->workers_live = a->members.nlive;
    if (epoch_end && progress) {
        agg_latency_stats(a);
        progress(ctx, a->s, 1);
    }
    agg_step_emit(a, R > 0 ? agg_now() - a->clock.step_start : -1); /* trace, the caller's hook (/metrics) */
    *done = final;
    agg_begin_step(a);
    return 0;
}

