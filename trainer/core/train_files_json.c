/* The metrics JSON of fsgd train (fsgd/train_files.h): one object, the
 * names fsgd_api_train_stat and the Python package read. */
#include <math.h>
#include <stdio.h>
#include <sys/resource.h>

#include "fsgd/clock.h"
#include "fsgd/train_files.h"

/* Peak resident set of this process so far, in MiB (Linux: ru_maxrss in KiB). */
static double peak_rss_mb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : NAN;
}

static void json_num(FILE *f, const char *key, double v, int comma)
{
    if (isnan(v) || isinf(v))
        fprintf(f, "\"%s\": null%s", key, comma ? ", " : "");
    else
        fprintf(f, "\"%s\": %.10g%s", key, v, comma ? ", " : "");
}

/* A JSON string: quotes, backslashes and control bytes escaped; "" as null. */
static void json_str(FILE *f, const char *s)
{
    if (!*s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_metrics(FILE *f, const fsgd_metrics_t *m)
{
    fprintf(f, "{\"n\": %zu, ", m->n);
    json_num(f, "auc", m->auc, 1);
    json_num(f, "logloss", m->logloss, 1);
    json_num(f, "accuracy", m->accuracy, 1);
    json_num(f, "rmse", m->rmse, 1);
    json_num(f, "loss", m->loss, 0);
    fputc('}', f);
}

void fsgd_train_files_metrics_json(const fsgd_train_params_t *job, const fsgd_train_files_run_t *r, void *file)
{
    FILE *f = file;
    const fsgd_train_stats_t *st = &r->st;
    fprintf(f, "{\"model\": \"%s\", \"codec\": \"%s\", \"backend\": \"%s\", \"threads\": %d, "
               "\"threads_requested\": %d, ",
            fsgd_loss_name(job->model), job->codec, st->backend, st->threads_used, job->threads);
    fprintf(f, "\"train_rows\": %zu, \"dim\": %llu, \"epochs\": %d, \"steps\": %llu, ", r->n_train,
            (unsigned long long)r->dim, job->epochs, (unsigned long long)st->steps);
    json_num(f, "epochs_run", st->epochs_run, 1);
    fprintf(f, "\"optimizer\": \"%s\", \"staleness\": %d, ", fsgd_optimizer_name(job->optimizer), st->staleness);
    /* --shards: the busiest shard's keys over the mean a step (interleaved keys), and what S contiguous
     * ranges would have had on the same steps */
    fprintf(f, "\"shards\": %d, ", st->shards > 1 ? st->shards : 1);
    json_num(f, "shard_busy_mean", st->shard_busy_mean, 1);
    json_num(f, "shard_busy_max", st->shard_busy_max, 1);
    json_num(f, "shard_range_busy_mean", st->shard_range_busy_mean, 1);
    json_num(f, "shard_range_busy_max", st->shard_range_busy_max, 1);
    if (job->optimizer == FSGD_OPTIMIZER_FTRL) {
        json_num(f, "alpha", st->alpha, 1);
        fprintf(f, "\"alpha_auto\": %s, ", job->alpha < 0 ? "true" : "false");
        json_num(f, "beta", job->beta, 1);
    }
    json_num(f, "l1", job->l1, 1);
    fprintf(f, "\"weights_nonzero\": %llu, \"weights_touched\": %llu, ", (unsigned long long)st->weights_nonzero,
            (unsigned long long)st->weights_touched);
    fprintf(f, "\"init\": ");
    json_str(f, job->init);
    fprintf(f, ", \"init_state\": %s, \"save_state\": %s, ", st->init_state ? "true" : "false",
            job->save_state ? "true" : "false");
    json_num(f, "lr", st->lr, 1);
    fprintf(f, "\"lr_auto\": %s, ", job->lr < 0 ? "true" : "false");
    json_num(f, "l2", st->l2, 1);
    fprintf(f, "\"l2_auto\": %s, \"holdout_rows\": %zu, \"stopped_early\": %s, ", job->l2 < 0 ? "true" : "false",
            st->holdout_rows, st->stopped_early ? "true" : "false");
    json_num(f, "holdout_rare_rows", st->holdout_rare, 1);
    json_num(f, "efsign_lr_auto", st->codec_lr > 0 ? st->codec_lr : NAN, 1);
    json_num(f, "holdout_loss", st->holdout_rows ? st->holdout_loss : NAN, 1);
    json_num(f, "best_epoch", st->holdout_rows ? st->best_epoch : NAN, 1);
    json_num(f, "peak_rss_mb", peak_rss_mb(), 1);
    json_num(f, "batch_mb", (double)st->batch_bytes / 1048576.0, 1);
    json_num(f, "batch_mb_on_disk", (double)st->batch_bytes_on_disk / 1048576.0, 1);
    fprintf(f, "\"batches_binary\": %s, ", st->batches_binary ? "true" : "false");
    fprintf(f, "\"streamed_from_cache\": %s, \"cache_reused\": %s, ", job->cache[0] ? "true" : "false",
            r->cache_reused ? "true" : "false");
    fprintf(f, "\"format\": \"%s\", \"hash_columns_used\": %llu, \"hash_columns_collided\": %llu, ",
            job->format, (unsigned long long)r->hash_used, (unsigned long long)r->hash_collided);
    json_num(f, "process_seconds", fsgd_clock_s() - r->t0, 1);
    fprintf(f, "\"test\": ");
    json_metrics(f, &st->test);
    fprintf(f, ", \"train\": ");
    json_metrics(f, &r->train_m);
    fprintf(f, ", ");
    json_num(f, "train_seconds", st->seconds, 1);
    json_num(f, "time_to_target_seconds", st->time_to_target >= 0 ? st->time_to_target : NAN, 1);
    json_num(f, "target_auc", job->target_auc > 0 ? job->target_auc : NAN, 1);
    /* the same moment from the start of fsgd train: parsing and setup included */
    json_num(f, "process_time_to_target_seconds", st->target_clock > 0 ? st->target_clock - r->t0 : NAN, 1);
    json_num(f, "rows_per_second", st->seconds > 0 ? (double)st->rows / st->seconds : NAN, 1);
    json_num(f, "nnz_per_second_per_thread", st->t_grad > 0 ? (double)st->nnz / st->t_grad : NAN, 1);
    fprintf(f, "\"raw_bytes\": %llu, \"wire_bytes\": %llu, ", (unsigned long long)st->raw_bytes,
            (unsigned long long)st->wire_bytes);
    json_num(f, "bytes_per_step", st->steps ? (double)st->wire_bytes / (double)st->steps : NAN, 1);
    json_num(f, "compression_ratio", st->wire_bytes ? (double)st->raw_bytes / (double)st->wire_bytes : NAN, 1);
    fprintf(f, "\"seconds\": {");
    json_num(f, "gradient", st->t_grad, 1);
    json_num(f, "encode", st->t_encode, 1);
    json_num(f, "decode", st->t_decode, 1);
    json_num(f, "update", st->t_update, 1);
    json_num(f, "gradient_round_wall", st->t_grad_round, 1);
    json_num(f, "holdout", st->t_holdout, 0);
    fprintf(f, "}}\n");
}
