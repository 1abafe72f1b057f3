/* fsgd aggregator: the aggregator of a distributed job. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/ckpt_set.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/kbus.h"
#include "fsgd/observe.h"
#include "fsgd/outfile.h"
#include "fsgd/progress.h"

static const char usage[] =
    "usage: fsgd aggregator [JOB.yaml] --brokers HOST:PORT [--name JOB] [--workers N] [--checkpoint FILE] [options]\n"
    "Gathers each step's gradients from the live workers, applies sparse Adam, publishes the model to\n"
    "NAME.model, evaluates on --test at epoch ends and writes --out and --metrics-json. Gradients are\n"
    "taken only from members of the job (workers that reported their partitions on NAME.ctl) for the\n"
    "step in progress; what is dropped is counted by reason and the first of each reason is printed.\n"
    "With --follow it trains until SIGTERM/SIGINT, which end it with a final model version, the checkpoint,\n"
    "--out and --metrics-json (progressive validation replaces the holdout: no epochs, no early stop).\n"
    "Aggregator-only options:\n"
    "  --shard I/S          run shard I (0 to S-1) of a job with S aggregator shards (job key shards): it owns\n"
    "                       the keys k with k mod S = I; shard 0 leads, the others follow its steps\n" DCLI_METRICS_HELP;

static uint64_t rejected_total(const fsgd_agg_stats_t *s)
{
    uint64_t n = 0;
    for (int r = 0; r < FSGD_AGG_REJ_COUNT; r++)
        n += s->rejected[r];
    return n;
}

/* A sharded job's "shard I/S (keys k mod S = I, N weights)  busy ..."
 * (empty unsharded): busy is the share of the training time spent in
 * decode + update, entries the gradient pairs taken per applied step. */
static void shard_text(char *out, size_t cap, const fsgd_agg_stats_t *s)
{
    out[0] = '\0';
    if (s->shards <= 1)
        return;
    double busy = s->seconds > 0 ? (s->t_decode + s->t_update) / s->seconds : -1;
    double entries = s->adam_steps ? (double)s->raw_bytes / 8.0 / (double)s->adam_steps : -1;
    fsgd_progress_fmt_shard(out, cap, s->shard, s->shards, s->weights_held, busy, entries);
}

typedef struct agg_cli {
    const fsgd_job_t *job;
    fsgd_progress_t *line; /* NULL: out of memory, prints nothing */
} agg_cli_t;

/* "test auc A logloss L" for what was measured: "no test set" without test
 * rows (never a made-up 0), and no logloss for the SVM, whose scores are
 * margins, not probabilities. */
static void test_text(char *out, size_t cap, const fsgd_job_t *job, const fsgd_metrics_t *t, int prec)
{
    if (!t->n)
        snprintf(out, cap, "test: no test set (give --test FILE)");
    else if (job->train.model == FSGD_LOSS_HINGE)
        snprintf(out, cap, "test auc %.*f accuracy %.*f", prec, t->auc, prec, t->accuracy);
    else
        snprintf(out, cap, "test auc %.*f logloss %.*f", prec, t->auc, prec, t->logloss);
}

static void on_progress(void *ctx, const fsgd_agg_stats_t *s, int end_of_epoch)
{
    agg_cli_t *c = ctx;
    if (c->job->train.quiet || !c->line)
        return;
    if (end_of_epoch) {
        const fsgd_agg_epoch_t *e = &s->epochs[s->n_epochs - 1];
        char l[512], t[128];
        test_text(t, sizeof t, c->job, &e->test, 5);
        snprintf(l, sizeof l, "fsgd: epoch %d done: %llu rows (dataset %llu), train loss %.5f, %s, %.2f s", e->epoch,
                 (unsigned long long)e->rows, (unsigned long long)s->dataset_rows, e->train_loss, t, e->seconds);
        fsgd_progress_println(c->line, l);
        return;
    }
    /* ETA from the rows applied since step 1 (the group join is not work) */
    double total = (double)s->dataset_rows * c->job->train.epochs;
    double done = (double)s->dataset_rows * (s->epoch - 1) + (double)s->rows_epoch;
    double steps = s->steps ? (double)s->steps : 1;
    char extra[448];
    shard_text(extra, sizeof extra, s); /* a sharded job's shard first: which process this line is */
    int n = (int)strlen(extra);
    if (n)
        n += snprintf(extra + n, sizeof extra - (size_t)n, "  ");
    if (s->follow) /* progressive validation: the newest rows, scored before they were trained on */
        n += snprintf(extra + n, sizeof extra - (size_t)n, "version %llu  progressive auc %.4f logloss %.4f  ",
                     (unsigned long long)s->version, s->pv_auc, s->pv_window_logloss);
    snprintf(extra + n, sizeof extra - (size_t)n, "step %.2f ms  workers %llu  rejected %llu", s->step_ms_p50,
             (unsigned long long)s->workers_live, (unsigned long long)rejected_total(s));
    fsgd_progress_info_t i = {.prefix = "fsgd: ",
                              .epoch = s->epoch,
                              .epochs = s->follow ? 0 : c->job->train.epochs,
                              .step = s->steps,
                              .rows_per_s = s->seconds > 0 ? s->rows_total / s->seconds : 0,
                              .loss = s->adam_steps ? s->loss_ma : NAN,
                              .bytes_per_step = (double)(s->bytes_up + s->bytes_down) / steps,
                              .eta_s = s->follow ? -1 : fsgd_progress_eta(s->seconds - s->step1_at, done, total),
                              .extra = extra};
    fsgd_progress_update(c->line, &i);
}

/* Each step's stats to /metrics (a no-op without --metrics-port). */
static void on_step(void *ctx, const fsgd_agg_stats_t *s, const fsgd_sagg_t *strat, double step_seconds)
{
    fsgd_observe_agg_step(s, strat, step_seconds);
}

/* Rejections and waits are printed even with --quiet: they say why a job
 * is slow or what was dropped. */
static void on_log(void *ctx, const char *line)
{
    agg_cli_t *c = ctx;
    char l[1024];
    snprintf(l, sizeof l, "fsgd: aggregator: %s", line);
    if (c->line)
        fsgd_progress_println(c->line, l); /* clears an in-place progress line first */
    else
        fprintf(stderr, "%s\n", l);
}

/* SIGTERM/SIGINT in a follow job: the aggregator finishes (fsgd_role_env_t.stop) */
static volatile sig_atomic_t follow_stop;

static void on_follow_signal(int sig)
{
    (void)sig;
    follow_stop = 1;
    fsgd_cli_cleanup_on_signal();
}

/* The job from the command line, its --shard I/S, and the paths it writes
 * checked before anything starts. 0, 1 after --help, or the exit status. */
static int agg_job_from_args(int argc, char **argv, fsgd_job_t *job)
{
    const char *shard_spec = dcli_take(&argc, argv, "--shard", 1, NULL, NULL);
    int rc = dcli_job(argc, argv, usage, job);
    if (rc)
        return rc;
    if (shard_spec) {
        unsigned si, sn;
        char tail;
        if (sscanf(shard_spec, "%u/%u%c", &si, &sn, &tail) != 2 || sn < 1 || sn > 64 || si >= sn) {
            fsgd_cli_error("aggregator: --shard '%s': expected I/S with 0 <= I < S <= 64, e.g. --shard 1/4",
                           shard_spec);
            return FSGD_EXIT_USAGE;
        }
        job->dist.shard = si;
        job->train.shards = (int)sn;
    }
    if (!job->cluster.brokers[0]) {
        fsgd_cli_error("aggregator: --brokers is required (fsgd run starts an embedded cluster and passes it)");
        return FSGD_EXIT_USAGE;
    }
    const fsgd_cli_path_t rd[] = {{"--data", job->train.data}, {"--test", job->train.test}, {"job file", job->train.job_file},
                                  {"--job-key-file", job->cluster.job_key_file}, {"--init", job->train.init}};
    /* this shard's files, the names derived for it included */
    int S = job->train.shards > 1 ? job->train.shards : 1, me = S > 1 ? job->dist.shard : 0;
    dcli_outputs_t wr;
    if (dcli_outputs(job, job->dist.checkpoint, S, me, me, &wr) < 0) {
        fsgd_cli_error("aggregator: out of memory");
        return FSGD_EXIT_INTERNAL;
    }
    rc = fsgd_cli_check_distinct("aggregator", wr.p, wr.n, rd, 5);
    dcli_outputs_free(&wr);
    if (rc != 0)
        return rc;
    const char *outs[] = {job->train.out, job->train.metrics_json, job->dist.checkpoint};
    return fsgd_cli_check_outputs("aggregator", outs, 3);
}

/* The result line and the files written, even with --quiet (which quiets
 * progress, not results). */
static void print_agg_result(const fsgd_job_t *job, const fsgd_agg_stats_t *st)
{
    char t[128];
    test_text(t, sizeof t, job, &st->test, 6);
    /* follow mode has no epochs ("0 epochs" said nothing); epochs auto
     * stops part way through one ("3 epochs" when 3.85 ran) */
    char ep[48] = "";
    if (!job->dist.follow && st->epochs_run > 0)
        snprintf(ep, sizeof ep, "%.2f epochs, ", st->epochs_run);
    else if (!job->dist.follow)
        snprintf(ep, sizeof ep, "%d epochs, ", st->n_epochs);
    printf("%s | %s%llu steps, %.2f s, %.0f rows/s, step p50 %.2f ms | "
           "up %llu B down %llu B ratio %.2f | rejected",
           t, ep, (unsigned long long)st->adam_steps, st->seconds,
           st->seconds > 0 ? st->rows_total / st->seconds : 0, st->step_ms_p50, (unsigned long long)st->bytes_up,
           (unsigned long long)st->bytes_down, st->codec_bytes ? (double)st->raw_bytes / st->codec_bytes : 0);
    /* the reasons with a count only: nine zeros made a healthy run's
     * result line 230 characters (issue 40 item 9) */
    int rejected = 0;
    for (int r = 0; r < FSGD_AGG_REJ_COUNT; r++)
        if (st->rejected[r]) {
            printf(" %s %llu", fsgd_agg_reject_name(r), (unsigned long long)st->rejected[r]);
            rejected = 1;
        }
    printf("%s | dropped %llu", rejected ? "" : " none", (unsigned long long)st->workers_dropped);
    char sh[192];
    shard_text(sh, sizeof sh, st);
    printf("%s%s\n", sh[0] ? " | " : "", sh);
    /* shard I > 0 writes no model (shard 0 assembles it) and its
     * metrics to METRICS.shardI: name the files it wrote */
    int follower = job->train.shards > 1 && job->dist.shard > 0;
    if (job->train.out[0] && !follower)
        printf("model: %s\n", job->train.out);
    char metrics[FSGD_JOB_PATH_MAX + 16];
    fsgd_ckpt_set_path(job->train.metrics_json, follower ? job->dist.shard : 0, 0, metrics, sizeof metrics);
    if (job->train.metrics_json[0])
        printf("metrics: %s\n", metrics);
    fflush(stdout);
}

int fsgd_cmd_aggregator(int argc, char **argv)
{
    const char *maddr;
    int mport;
    int rc = dcli_metrics(&argc, argv, "aggregator", 0, &maddr, &mport);
    if (rc)
        return rc;
    fsgd_job_t job;
    rc = agg_job_from_args(argc, argv, &job);
    if (rc)
        return rc == 1 ? 0 : rc;
    char err[FSGD_OUTFILE_PATH_MAX + 512];
    if ((rc = dcli_kafka(&job, "aggregator")) != 0)
        return rc;
    if ((rc = dcli_auth(&job, "aggregator")) != 0 || (rc = dcli_connect(&job, "aggregator")) != 0)
        return rc;
    fsgd_cli_cleanup_on_signal();
    if (job.dist.follow) {
        /* SIGTERM/SIGINT end a follow job cleanly; a second one as before */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_follow_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
    }
    fsgd_agg_stats_t st = {0};
    /* fsgd run passes its embedded cluster's limit down (not a job key). */
    const char *maxw = getenv("FSGD_MAX_MODEL_WEIGHTS");
    if (maxw)
        job.dist.max_model_weights = strtoull(maxw, NULL, 10);
    if (mport >= 0) {
        int bound;
        if ((rc = fsgd_observe_start(FSGD_JOB_DIST(&job), "aggregator", 0, maddr, mport, &bound, err, sizeof err)) < 0) {
            fsgd_cli_error("aggregator: %s", err);
            return fsgd_cli_status(rc);
        }
        fprintf(stderr, "fsgd: aggregator metrics at http://%s%s%s:%d/metrics\n", strchr(maddr, ':') ? "[" : "",
                maddr, strchr(maddr, ':') ? "]" : "", bound);
    }
    agg_cli_t cli = {&job, fsgd_progress_new(stderr, -1)};
    fsgd_role_env_t env = {.stop = &follow_stop, .log = on_log, .ctx = &cli};
    if (!(env.bus = dcli_bus(job.cluster.brokers, "aggregator")))
        rc = FSGD_E_KAFKA;
    else
        rc = fsgd_aggregator_run(&env, FSGD_JOB_DIST(&job), job.dist.workers, &st, on_progress, on_step, err, sizeof err);
    fsgd_bus_destroy(env.bus);
    fsgd_progress_destroy(cli.line);
    fsgd_observe_stop();
    if (rc < 0) {
        fsgd_agg_stats_free(&st);
        fsgd_cli_error("aggregator: %s", err);
        return fsgd_cli_status(rc);
    }
    print_agg_result(&job, &st);
    fsgd_agg_stats_free(&st);
    return 0;
}
