/* The aggregator's record of its run: the metrics JSON
 * (fsgd_agg_write_metrics), and each closed step's trace point and the
 * caller's step hook (agg_step_emit). */
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
#include "trace.h"

fsgd_agg_epoch_t *fsgd_agg_epoch_next(fsgd_agg_stats_t *s)
{
    if (s->n_epochs >= s->epochs_cap) {
        int cap = s->epochs_cap ? 2 * s->epochs_cap : 64;
        fsgd_agg_epoch_t *e = realloc(s->epochs, (size_t)cap * sizeof *e);
        if (!e)
            return NULL;
        s->epochs = e;
        s->epochs_cap = cap;
    }
    fsgd_agg_epoch_t *e = &s->epochs[s->n_epochs];
    memset(e, 0, sizeof *e);
    return e;
}

void fsgd_agg_stats_free(fsgd_agg_stats_t *s)
{
    if (!s)
        return;
    free(s->epochs);
    s->epochs = NULL;
    s->n_epochs = s->epochs_cap = 0;
}

/* A JSON number, or null when it was not measured (or is not finite). */
static void jnum(char *out, size_t cap, double x, int measured)
{
    if (measured && isfinite(x))
        snprintf(out, cap, "%.6f", x);
    else
        snprintf(out, cap, "null");
}

/* A finite number, or -1 where there is none (the version-1 readers' convention). */
static double finite_or(double x)
{
    return isfinite(x) ? x : -1.0;
}

/* Rows and the record of every epoch, with the seconds each part took in it. */
static void metrics_epochs(FILE *f, const fsgd_agg_stats_t *s, int svm)
{
    char auc[32], ll[32];
    fprintf(f, "  \"rows_per_epoch\": [");
    for (int i = 0; i < s->n_epochs; i++)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)s->epochs[i].rows);
    fprintf(f, "],\n  \"per_epoch\": [\n");
    for (int i = 0; i < s->n_epochs; i++) {
        const fsgd_agg_epoch_t *e = &s->epochs[i];
        jnum(auc, sizeof auc, e->test.auc, e->test.n);
        jnum(ll, sizeof ll, e->test.logloss, e->test.n && !svm);
        const double *t = e->t_at_end, *tp = i ? s->epochs[i - 1].t_at_end : NULL;
#define PART(j) (t[j] - (tp ? tp[j] : 0))
        fprintf(f, "    {\"epoch\": %d, \"seconds\": %.3f, \"seconds_from_step1\": %.3f, \"train_loss\": %.6f, "
                   "\"rows\": %llu, \"test_auc\": %s, \"test_logloss\": %s, \"seconds_parts\": {\"gradient\": %.6g, "
                   "\"encode\": %.6g, \"decode\": %.6g, \"comm_wait\": %.6g, \"update\": %.6g}}%s\n",
                e->epoch, e->seconds, e->seconds_from_step1, finite_or(e->train_loss), (unsigned long long)e->rows, auc,
                ll, PART(0), PART(1), PART(2), PART(3), PART(4), i + 1 < s->n_epochs ? "," : "");
#undef PART
    }
    fprintf(f, "  ],\n");
}

/* Where the seconds went: per step, in total, the update's parts, latencies. */
static void metrics_times(FILE *f, const fsgd_agg_stats_t *s, double steps)
{
    fprintf(f, "  \"per_step_seconds\": {\"gradient\": %.6g, \"encode\": %.6g, \"decode\": %.6g, \"comm_wait\": %.6g, "
               "\"update\": %.6g},\n",
            s->t_grad / steps, s->t_encode / steps, s->t_decode / steps, s->t_wait / steps, s->t_update / steps);
    fprintf(f, "  \"total_seconds\": {\"gradient\": %.6g, \"encode\": %.6g, \"decode\": %.6g, \"comm_wait\": %.6g, "
               "\"update\": %.6g},\n",
            s->t_grad, s->t_encode, s->t_decode, s->t_wait, s->t_update);
    fprintf(f, "  \"update_seconds\": {\"step\": %.6g, \"publish\": %.6g, \"look\": %.6g, \"epoch_end\": %.6g, "
               "\"checkpoint\": %.6g},\n",
            s->t_update_step, s->t_update_publish, s->t_update_look, s->t_update_epoch, s->t_update_ckpt);
    fprintf(f, "  \"step_latency_ms\": {\"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f},\n", s->step_ms_mean,
            s->step_ms_p50, s->step_ms_p99);
    fprintf(f, "  \"hop_latency_ms\": {\"grads_p50\": %.3f, \"grads_p99\": %.3f},\n", s->hop_grads_ms_p50,
            s->hop_grads_ms_p99);
}

/* Bytes each way, the downlink, the messages taken and refused. */
static void metrics_traffic(FILE *f, const fsgd_agg_stats_t *s)
{
    fprintf(f, "  \"bytes\": {\"up\": %llu, \"down\": %llu, \"model_published\": %llu, \"gradient_raw\": %llu, "
               "\"gradient_encoded\": %llu},\n",
            (unsigned long long)s->bytes_up, (unsigned long long)s->bytes_down, (unsigned long long)s->bytes_model,
            (unsigned long long)s->raw_bytes, (unsigned long long)s->codec_bytes);
    fprintf(f, "  \"compression_ratio\": %.4f,\n",
            s->codec_bytes ? (double)s->raw_bytes / (double)s->codec_bytes : 0.0);
    /* Per worker per step: what one worker sends (a gradient message, the
     * mean over applied ones, and its pull in working-set mode) and receives
     * (the model delta message, and the answer to its pull). */
    fprintf(f, "  \"downlink\": {\"spec\": \"%s\", \"up_bytes_per_worker_step\": %.1f, "
               "\"down_bytes_per_worker_step\": %.1f, \"values_bytes_per_worker_step\": %.1f, \"replica_checks\": %llu, "
               "\"encode_seconds\": %.6g},\n",
            s->downlink, s->up_msgs ? (double)s->bytes_up / (double)s->up_msgs : 0.0,
            s->down_msgs ? (double)s->down_bytes_msg / (double)s->down_msgs : 0.0,
            s->up_msgs ? (double)s->bytes_values / (double)s->up_msgs : 0.0, (unsigned long long)s->replica_checks,
            s->t_down_encode);
    /* working-set pulls and key caching (pull_cache.h) */
    fprintf(f, "  \"pulls\": {\"answered\": %llu, \"by_id\": %llu, \"misses\": %llu, \"lists_kept\": %llu, "
               "\"bytes_kept\": %llu},\n",
            (unsigned long long)s->pulls_answered, (unsigned long long)s->pulls_by_id,
            (unsigned long long)s->pull_misses, (unsigned long long)s->pull_lists_kept,
            (unsigned long long)s->pull_bytes_kept);
    /* the first four counters are the version-1 names, kept for readers of them */
    fprintf(f, "  \"messages\": {\"accepted\": %llu, \"duplicates_dropped\": %llu, \"corrupt_rejected\": %llu, "
               "\"stale\": %llu, \"conflicts\": %llu, \"consumer_errors\": %llu, \"rejected\": {",
            (unsigned long long)s->grads_accepted, (unsigned long long)s->rejected[FSGD_AGG_REJ_DUPLICATE],
            (unsigned long long)s->rejected[FSGD_AGG_REJ_CORRUPT], (unsigned long long)s->rejected[FSGD_AGG_REJ_STALE],
            (unsigned long long)s->rejected[FSGD_AGG_REJ_CONFLICT], (unsigned long long)s->consumer_errors);
    for (int r = 0; r < FSGD_AGG_REJ_COUNT; r++)
        fprintf(f, "%s\"%s\": %llu", r ? ", " : "", fsgd_agg_reject_name(r), (unsigned long long)s->rejected[r]);
    fprintf(f, "}},\n");
}

/* The model it started from, continuous training's figures, the workers. */
static void metrics_end(FILE *f, const fsgd_dist_job_t *job, const fsgd_agg_stats_t *s)
{
    if (job->train->init[0]) { /* --init (agg_init.c) */
        fputs("  \"init\": \"", f);
        for (const char *c = job->train->init; *c; c++) /* a path: escape what JSON must */
            fprintf(f, (unsigned char)*c < 0x20 ? "\\u%04x" : *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
        fputs("\"", f);
        fprintf(f, ",\n  \"init_state\": %s,\n", s->init_state ? "true" : "false");
    }
    if (s->follow) { /* progressive validation (agg_follow.c): nothing measured yet is null, never -1 */
        char pv_ll[32], pv_auc[32], pv_wll[32];
        snprintf(pv_ll, sizeof pv_ll, isfinite(s->pv_logloss) ? "%.6f" : "null", s->pv_logloss);
        snprintf(pv_auc, sizeof pv_auc, isfinite(s->pv_auc) ? "%.6f" : "null", s->pv_auc);
        snprintf(pv_wll, sizeof pv_wll, isfinite(s->pv_window_logloss) ? "%.6f" : "null", s->pv_window_logloss);
        fprintf(f, "  \"follow\": {\"version\": %llu, \"progressive_rows\": %llu, \"progressive_logloss\": %s, "
                   "\"window_rows\": %llu, \"progressive_auc\": %s, \"window_logloss\": %s},\n",
                (unsigned long long)s->version, (unsigned long long)s->pv_rows, pv_ll,
                (unsigned long long)s->pv_window_rows, pv_auc, pv_wll);
    }
    fprintf(f, "  \"workers\": {\"live\": %llu, \"dropped\": %llu},\n  \"generation\": %u,\n  \"resumed_from_step\": %d\n}\n",
            (unsigned long long)s->workers_live, (unsigned long long)s->workers_dropped, s->gen,
            s->resumed_from_step);
}

int fsgd_agg_write_metrics(const fsgd_dist_job_t *job, const fsgd_agg_stats_t *s, const char *path, char *err,
                           size_t errsz)
{
    fsgd_outfile_t o;
    char why[FSGD_OUTFILE_PATH_MAX + 256];
    int rc = fsgd_outfile_open(&o, path, why, sizeof why);
    FILE *f = rc == 0 ? fsgd_outfile_stream(&o, why, sizeof why) : NULL;
    if (rc == 0 && !f) {
        fsgd_outfile_abort(&o);
        rc = FSGD_E_IO;
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "metrics: %s", why);
    double steps = s->adam_steps ? (double)s->adam_steps : 1;
    fprintf(f, "{\n  \"mode\": \"distributed\",\n  \"job\": \"%s\",\n  \"codec\": \"%s\",\n", job->dist->name, job->train->codec);
    /* Without test rows nothing was measured: null, never 0. The SVM's
     * scores are margins, so it has no logloss. */
    char auc[32], ll[32], loss[32], acc[32];
    const int svm = job->train->model == FSGD_LOSS_HINGE;
    jnum(auc, sizeof auc, s->test.auc, s->test.n);
    jnum(ll, sizeof ll, s->test.logloss, s->test.n && !svm);
    jnum(loss, sizeof loss, s->test.loss, s->test.n);
    jnum(acc, sizeof acc, s->test.accuracy, s->test.n);
    fprintf(f, "  \"test\": {\"n\": %zu, \"auc\": %s, \"logloss\": %s, \"loss\": %s, \"accuracy\": %s},\n", s->test.n,
            auc, ll, loss, acc);
    fprintf(f, "  \"train_seconds\": %.3f,\n  \"epochs\": %d,\n  \"steps\": %llu,\n  \"empty_steps\": %llu,\n",
            s->seconds, s->n_epochs, (unsigned long long)s->adam_steps, (unsigned long long)s->empty_steps);
    fprintf(f, "  \"dataset_rows\": %llu,\n  \"dim\": %llu,\n  \"partitions\": %d,\n",
            (unsigned long long)s->dataset_rows, (unsigned long long)s->dim, s->partitions);
    fprintf(f, "  \"rows_applied\": %llu,\n  \"rows_per_second\": %.1f,\n", (unsigned long long)s->rows_total,
            s->seconds > 0 ? s->rows_total / s->seconds : 0);
    metrics_epochs(f, s, svm);
    fprintf(f, "  \"assignment_wait_seconds\": %.3f,\n  \"assignment_settled\": %d,\n", s->assignment_wait_s,
            s->assignment_settled);
    fprintf(f, "  \"data_scan\": \"%s\",\n", s->data_from_summary ? "summary" : "topic");
    fprintf(f, "  \"checkpoints\": {\"written\": %llu, \"seconds\": %.3f},\n", (unsigned long long)s->checkpoints,
            s->checkpoint_s);
    fprintf(f, "  \"step1_at_seconds\": %.3f,\n  \"step1_clock_seconds\": %.6f,\n", s->step1_at, s->step1_clock);
    fprintf(f, "  \"loss_window_steps\": %d,\n  \"loss_moving_average\": %.6f,\n", FSGD_AGG_LOSS_WINDOW,
            finite_or(s->loss_ma));
    fprintf(f, "  \"target_loss\": %.6f,\n  \"time_to_target_loss_s\": %.3f,\n  \"target_loss_step\": %llu,\n",
            job->dist->target_loss, s->time_to_target, (unsigned long long)s->target_step);
    metrics_times(f, s, steps);
    metrics_traffic(f, s);
    fprintf(f, "  \"snapshot_every\": %llu,\n", (unsigned long long)s->snapshot_every);
    fprintf(f, "  \"batch\": %llu,\n", (unsigned long long)s->batch);
    /* entries_per_step: gradient entries a step, every worker's part: how busy the shard is */
    fprintf(f,
            "  \"shard\": {\"index\": %u, \"shards\": %u, \"weights_held\": %llu, \"entries_per_step\": %.1f, "
            "\"parts_missing\": %llu, \"table\": \"%s\", \"table_keys\": %llu},\n",
            s->shard, s->shards ? s->shards : 1, (unsigned long long)s->weights_held, (double)s->up_entries / steps,
            (unsigned long long)s->parts_missing, s->table_sparse ? "sparse" : "dense",
            (unsigned long long)(s->table_sparse ? s->table_keys : s->weights_held));
    fprintf(f, "  \"lr\": %.17g,\n  \"l2\": %.17g,\n  \"holdout_rows\": %llu,\n  \"holdout_looks\": %llu,\n",
            s->lr, s->l2, (unsigned long long)s->holdout_rows, (unsigned long long)s->looks);
    if (s->holdout_rows)
        fprintf(f, "  \"best_epoch\": %.4f,\n  \"holdout_loss\": %.17g,\n  \"epochs_run\": %.4f,\n  \"stopped_early\": %s,\n",
                s->best_epoch, s->holdout_loss, s->epochs_run, s->stopped_early ? "true" : "false");
    fprintf(f, "  \"staleness\": {\"tau\": %d, \"held_early\": %llu, \"stale_applied\": %llu, \"lag_max\": %u},\n",
            s->tau, (unsigned long long)s->grads_early, (unsigned long long)s->grads_stale, s->lag_max);
    fprintf(f, "  \"reassembly\": {\"held_bytes_max\": %llu, \"limit_bytes\": %llu},\n",
            (unsigned long long)s->held_bytes_max, (unsigned long long)s->held_limit);
    fputs("  ", f); /* the loss and bytes curves of fsgd plot */
    fsgd_trace_write_json(f, &s->trace, s->step1_at);
    fputs(",\n", f);
    metrics_end(f, job, s);
    if ((rc = fsgd_outfile_commit(&o, why, sizeof why)) < 0)
        return fsgd_err_fmt(err, errsz, rc, "metrics: %s", why);
    return 0;
}

void agg_step_emit(const agg_env_t *e, const fsgd_sagg_t *strat, double step_seconds)
{
    fsgd_agg_stats_t *s = e->s;
    fsgd_trace_point_t pt = {.seconds = s->seconds,
                             .loss = s->adam_steps ? s->loss_ma : NAN,
                             .step = s->steps,
                             .rows = s->rows_total,
                             .bytes_up = s->bytes_up,
                             .bytes_down = s->bytes_down,
                             .bits = strat ? fsgd_sagg_param(strat, "bits") : NAN,
                             .energy = strat ? fsgd_sagg_param(strat, "energy") : NAN};
    fsgd_trace_add(&s->trace, &pt);
    if (e->on_step)
        e->on_step(e->log_ctx, s, strat, step_seconds);
}
