/* fsgd aggregator: the aggregator of a distributed job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/dist.h"

static const char usage[] =
    "usage: fsgd aggregator [JOB.yaml] --brokers HOST:PORT [--name JOB] [--workers N] [--checkpoint FILE] [options]\n"
    "Gathers each step's gradients from the live workers, applies sparse Adam, publishes the model to\n"
    "NAME.model, evaluates on --test at epoch ends and writes --out and --metrics-json.";

static void on_progress(void *ctx, const fsgd_agg_stats_t *s, int end_of_epoch)
{
    const fsgd_job_t *job = ctx;
    if (job->quiet)
        return;
    if (end_of_epoch) {
        const fsgd_agg_epoch_t *e = &s->epochs[s->n_epochs - 1];
        fprintf(stderr, "fsgd: epoch %d done: %llu rows (dataset %llu), train loss %.5f, test auc %.5f logloss %.5f, %.2f s\n",
                e->epoch, (unsigned long long)e->rows, (unsigned long long)s->dataset_rows, e->train_loss,
                e->test.n ? e->test.auc : NAN, e->test.n ? e->test.logloss : NAN, e->seconds);
        return;
    }
    fprintf(stderr,
            "fsgd: epoch %d step %llu rows %llu/%llu loss %.5f %.0f rows/s step %.2f ms workers %llu dup %llu "
            "corrupt %llu\n",
            s->epoch, (unsigned long long)s->steps, (unsigned long long)s->rows_epoch,
            (unsigned long long)s->dataset_rows, s->last_loss, s->seconds > 0 ? s->rows_total / s->seconds : 0,
            s->step_ms_p50, (unsigned long long)s->workers_live, (unsigned long long)s->duplicates,
            (unsigned long long)s->corrupt);
}

int fsgd_cmd_aggregator(int argc, char **argv)
{
    fsgd_job_t job;
    int rc = dcli_job(argc, argv, usage, &job);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!job.brokers[0]) {
        fsgd_cli_error("aggregator: --brokers is required (fsgd run starts an embedded cluster and passes it)");
        return 2;
    }
    fsgd_agg_stats_t st;
    char err[512];
    /* fsgd run passes its embedded cluster's limit down (not a job key). */
    const char *maxw = getenv("FSGD_MAX_MODEL_WEIGHTS");
    if (maxw)
        job.max_model_weights = strtoull(maxw, NULL, 10);
    rc = fsgd_aggregator_run(&job, job.workers, &st, on_progress, &job, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("aggregator: %s", err);
        return fsgd_cli_status(rc);
    }
    if (!job.quiet) {
        printf("test auc %.6f logloss %.6f | %d epochs, %llu steps, %.2f s, %.0f rows/s, step p50 %.2f ms | "
               "up %llu B down %llu B ratio %.2f | dup %llu corrupt %llu stale %llu conflicts %llu dropped %llu\n",
               st.test.auc, st.test.logloss, st.n_epochs, (unsigned long long)st.adam_steps, st.seconds,
               st.seconds > 0 ? st.rows_total / st.seconds : 0, st.step_ms_p50, (unsigned long long)st.bytes_up,
               (unsigned long long)st.bytes_down, st.codec_bytes ? (double)st.raw_bytes / st.codec_bytes : 0,
               (unsigned long long)st.duplicates, (unsigned long long)st.corrupt, (unsigned long long)st.stale,
               (unsigned long long)st.conflicts, (unsigned long long)st.workers_dropped);
        if (job.out[0])
            printf("model: %s\n", job.out);
        if (job.metrics_json[0])
            printf("metrics: %s\n", job.metrics_json);
        fflush(stdout);
    }
    return 0;
}
