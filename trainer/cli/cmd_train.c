/* fsgd train: load LIBSVM data, train locally with worker threads, report
 * metrics, write the model and a metrics JSON. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/clock.h"
#include "fsgd/codec.h"
#include "fsgd/delim.h"
#include "fsgd/rowfmt.h"
#include "fsgd/rowlabel.h"
#include "fsgd/vw.h"
#include "fsgd/strategy.h"
#include "fsgd/job.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "fsgd/outfile.h"
#include "fsgd/progress.h"
#include "fsgd/train.h"
#include "fsgd/train_files.h"

static const char usage_line[] =
    "usage: fsgd train [JOB.yaml] [--data FILE] [--test FILE] [--model logistic|linear|svm] [options]\n"
    "Trains a sparse linear model with sparse Adam on one machine, worker threads standing in\n"
    "for distributed workers. Prints progress and test metrics; --out writes the model.";

/* fsgd train --help: the common options; --help all: every one and the defaults_note */
static const char usage_brief[] =
    "usage: fsgd train [JOB.yaml] [--data FILE] [--test FILE] [--model logistic|linear|svm] [options]\n"
    "Trains a sparse linear model with sparse Adam on one machine, worker threads standing in\n"
    "for distributed workers. Prints progress and test metrics; --out writes the model.\n"
    "The common options; every one, and why each default is what it is: fsgd train --help all;\n"
    "docs/train.md, docs/defaults.md.";
static const dcli_brief_t train_help_options[] = {
    {"--data", "training data, a file in the job's format"},
    {"--test", "test data, same format (without it, test_fraction of --data is the test set)"},
    {"--test-fraction", "fraction of the data held out as the test set when no --test is given"},
    {"--format", "libsvm, criteo, vw, or a column spec tsv:COLUMNS / csv:COLUMNS (docs/ctr-inputs.md)"},
    {"--model", NULL},
    {"--l2", "L2 strength on the mean loss; auto = 1/n_train (LIBLINEAR's C=1)"},
    {"--optimizer", "adam | ftrl"},
    {"--lr", "Adam learning rate; auto = 0.15/sqrt(steps per epoch) in [0.001, 0.02]"},
    {"--batch", "rows per step"},
    {"--epochs", "passes over the data; auto = until the holdout loss stops improving"},
    {"--holdout", "fraction of the training rows held out to stop early when epochs is auto"},
    {"--seed", NULL},
    {"--threads", NULL},
    {"--codec", "compression of the gradients, e.g. none, fastsgd, topk:ratio=0.01 (fsgd features)"},
    {"--out", "model file to write (- or /dev/stdout: stdout)"},
    {"--metrics-json", NULL},
    {"--quiet", NULL},
    {NULL, NULL},
};

/* Why the defaults are what they are; printed after the key list. */
static const char defaults_note[] =
    "\nDefaults of fsgd train (fsgd run and its roles take the same auto defaults: docs/defaults.md), and why:\n"
    "  l2 auto      λ = 1/n_train: LIBLINEAR's default C = 1 (it minimises |w|²/2 + C·Σloss; fsgd the\n"
    "               mean loss + λ|w|²/2, the same objective divided by C·n), so the penalty shrinks as\n"
    "               the data grows.\n"
    "  epochs auto  a holdout fraction (10%, at most 50k rows) of the training rows is set aside;\n"
    "               its mean loss is computed 4 times an epoch or every 50k training rows, whichever\n"
    "               is more often; training stops after 4 looks, or a quarter epoch if that is more,\n"
    "               without a new best (by a relative 1e-4: one epoch on small data, 200k rows on 1M\n"
    "               rows) or at max_epochs, and the weights of the best look are the model. A number\n"
    "               of epochs trains exactly that many on all rows, with no holdout and no early\n"
    "               stopping. A holdout that would hold fewer than 200 rows of the rarer class (27k\n"
    "               rows with 1% positives: ~27) is too noisy a judge: then nothing is held out and\n"
    "               max(10, 250k rows / n) epochs run on all rows, a rare key's step lr·sqrt(steps\n"
    "               an epoch / its steps an epoch), at most 0.1.\n"
    "  lr auto      0.15 / sqrt(steps per epoch), within [0.001, 0.02]: Adam moves a touched weight\n"
    "               by about lr a step whatever the gradient's scale, so the step must shrink as an\n"
    "               epoch gets more steps (SGD's 1/sqrt(T) for about one epoch). 0.01-0.02 on the\n"
    "               shipped sets, 0.0025 on 1M-row CTR data, where 0.01 overfits the rare features\n"
    "               within a quarter epoch. With lr auto, Adam's bias corrections count each key's\n"
    "               own updates (a rare key's steps stay about lr); an explicit lr is plain lazy\n"
    "               Adam, as fsgd run does with the same --l2, --lr and --epochs. With feature\n"
    "               crosses (-q, --interactions) it is multiplied by the rows' share of features\n"
    "               among features and crosses, a row's margin moving as its features' alone\n"
    "               (a9a -q aa: 14 of 119, lr 0.00166); fsgd run does not: give it --lr.\n"
    "               Under a bounded delay τ (--staleness here, fsgd run's staleness) it is kept to\n"
    "               0.8 / ((τ+1)·a row's mean Σ|x|, intercept included): the τ+1 updates a\n"
    "               gradient does not see then move a row's margin by at most 0.8 (CTR rows of 40\n"
    "               binary features at τ 2: 0.0065); beta1 auto is 0 with it, else 0.9.\n"
    "               Also with lr auto: a logistic model's intercept starts at the log-odds of the\n"
    "               positive share, not at 0; when no rows are held out (epochs auto, above), a\n"
    "               key's λθ, added only in the steps that touch it, is scaled by steps an epoch /\n"
    "               its steps an epoch, so every key gets the objective's λ (rare keys went nearly\n"
    "               unregularized); --codec efsign (momentum SGD on the workers) gets a stepsize of\n"
    "               2 / sqrt(steps per epoch), within [0.01, 1], unless its spec gives lr.\n"
    "  alpha auto   (--optimizer ftrl) 2 / sqrt(steps per epoch), within [0.01, 0.5]: FTRL's step takes\n"
    "               the sum of the step's rows' gradients, so as with lr a longer epoch needs a smaller\n"
    "               rate (0.033 on 1M-row CTR data, 0.15-0.4 on the shipped sets). l1 and l2 stay on\n"
    "               the mean loss; FTRL's λ1, λ2 are them times the training rows.\n";

/* How early stopping ended, for the summary line. */
static const char *stop_note(const fsgd_train_stats_t *st, char *buf, size_t cap)
{
    if (st->stopped_early)
        snprintf(buf, cap, "stopped at %.2f: no loss 1e-4 lower for %.2f epochs", st->epochs_run, st->patience_epochs);
    else
        snprintf(buf, cap, "max_epochs reached");
    return buf;
}

typedef struct model_write {
    const fsgd_model_t *model;
    const char *path;
    int rc;
    char err[1024];
} model_write_t;

static void *write_model(void *arg)
{
    model_write_t *mw = arg;
    mw->rc = fsgd_model_save(mw->model, mw->path, mw->err, sizeof mw->err);
    return NULL;
}

typedef struct progress_ctx {
    const fsgd_job_t *job;
    int tty;
    /* the run: its rows an epoch (for the ETA) and its model, written on a
     * thread of its own from the moment its weights are final
     * (FSGD_TRAIN_MODEL_READY) while the trainer scores the test rows and
     * the training rows; a run streamed from --cache writes it at the end */
    const fsgd_train_files_run_t *run;
    model_write_t *mw;
    pthread_t writer;
    int writing;
} progress_ctx_t;

static void on_progress(void *p, const fsgd_train_stats_t *s, int end_of_epoch)
{
    progress_ctx_t *ctx = p;
    if (end_of_epoch == FSGD_TRAIN_MODEL_READY) {
        if (ctx->job->train.out[0] && !ctx->run->streamed && !ctx->writing)
            ctx->writing = pthread_create(&ctx->writer, NULL, write_model, ctx->mw) == 0;
        return;
    }
    if (ctx->job->train.quiet)
        return;
    if (end_of_epoch < 0) {
        fprintf(stderr, "fsgd: backend %s%s, codec %s, %d thread%s", s->backend,
                strcmp(ctx->job->train.backend, "auto") ? "" : " (picked by backend: auto)", ctx->job->train.codec,
                s->threads_used, s->threads_used == 1 ? "" : "s");
        if (s->threads_used < ctx->job->train.threads)
            /* no advice to raise --batch: that changes the model, not only the speed */
            fprintf(stderr, " of %d (a step has ~%.0f nonzeros; a thread pays for its synchronisation from %d)",
                    ctx->job->train.threads, s->nnz_per_step, FSGD_TRAIN_MIN_NNZ_PER_THREAD);
        fputc('\n', stderr);
        return;
    }
    double rows_s = s->seconds > 0 ? (double)s->rows / s->seconds : 0;
    double ratio = s->wire_bytes ? (double)s->raw_bytes / (double)s->wire_bytes : 0;
    double bytes_step = s->steps ? (double)s->wire_bytes / (double)s->steps : 0;
    char test[128] = "";
    if (s->test.n && end_of_epoch) {
        if (ctx->job->train.model == FSGD_LOSS_SQUARED)
            snprintf(test, sizeof test, "  test rmse %.4f", s->test.rmse);
        else if (ctx->job->train.model == FSGD_LOSS_HINGE) /* no probabilities: no logloss */
            snprintf(test, sizeof test, "  test auc %.4f", s->test.auc);
        else
            snprintf(test, sizeof test, "  test auc %.4f logloss %.4f", s->test.auc, s->test.logloss);
    }
    /* One process sends nothing: a ratio only says something with a codec */
    char ratio_text[32] = "";
    if (strcmp(ctx->job->train.codec, "none") != 0)
        snprintf(ratio_text, sizeof ratio_text, "  ratio %.2fx", ratio);
    char of[16];
    if (ctx->job->train.epochs > 0)
        snprintf(of, sizeof of, "%d", ctx->job->train.epochs);
    else
        snprintf(of, sizeof of, "auto");
    /* epochs auto: no ETA. One to max_epochs (50) said "ETA <= 1m19s" of
     * a run that stopped early after 1.7 s (issue 40 item 11). */
    char eta[48] = "", d[32]; /* fsgd/progress.h */
    if (ctx->job->train.epochs > 0) {
        fsgd_progress_fmt_duration(
            d, sizeof d, fsgd_progress_eta(s->seconds, (double)s->rows, (double)ctx->run->n_train * ctx->job->train.epochs));
        snprintf(eta, sizeof eta, "  ETA %s", d);
    }
    fprintf(stderr, "%sepoch %d/%s  step %llu  %.0f rows/s  loss %.4f  %.0f B/step%s%s%s%s",
            ctx->tty ? "\r" : "", s->epoch, of, (unsigned long long)s->steps, rows_s, s->last_loss, bytes_step,
            ratio_text, eta, test, (end_of_epoch || !ctx->tty) ? "\n" : "\033[K");
}

static int write_metrics(const fsgd_job_t *job, const fsgd_train_files_run_t *run)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    fsgd_outfile_t o;
    FILE *f = NULL;
    int rc = fsgd_outfile_open(&o, job->train.metrics_json, err, sizeof err);
    if (rc == 0 && !(f = fsgd_outfile_stream(&o, err, sizeof err))) {
        fsgd_outfile_abort(&o);
        rc = FSGD_E_IO;
    }
    if (rc == 0) {
        fsgd_train_files_metrics_json(&job->train, run, f);
        rc = fsgd_outfile_commit(&o, err, sizeof err);
    }
    if (rc < 0)
        fsgd_cli_error("metrics: %s", err);
    return rc;
}

/* "lr 0.0025 (auto)" for Adam, "ftrl alpha 0.1 beta 1 l1 2e-06" for FTRL. */
static const char *optimizer_note(const fsgd_job_t *job, const fsgd_train_stats_t *st, char *buf, size_t cap)
{
    if (job->train.optimizer == FSGD_OPTIMIZER_FTRL)
        snprintf(buf, cap, "ftrl alpha %.3g%s beta %.3g l1 %.3g", st->alpha, job->train.alpha < 0 ? " (auto)" : "",
                 job->train.beta, job->train.l1);
    else
        snprintf(buf, cap, "lr %.3g%s", st->lr, job->train.lr < 0 ? " (auto)" : "");
    return buf;
}

/* How sparse the model is: what L1 buys. */
static void print_weights(const fsgd_train_stats_t *st)
{
    if (st->weights_nonzero <= st->weights_touched && st->weights_touched)
        printf("weights: %llu nonzero of %llu touched (%.1f%%)\n", (unsigned long long)st->weights_nonzero,
               (unsigned long long)st->weights_touched,
               100.0 * (double)st->weights_nonzero / (double)st->weights_touched);
    else /* a warm start's weights need no touch to be nonzero */
        printf("weights: %llu nonzero, %llu touched in this run\n", (unsigned long long)st->weights_nonzero,
               (unsigned long long)st->weights_touched);
}

/* The lines both paths print: the model, its weights, shards, efsign's
 * stepsize, the holdout, and the speed line, left open for what a path
 * adds to it. */
static void print_training(const fsgd_job_t *job, const fsgd_train_stats_t *st, uint64_t dim)
{
    char note[96];
    char opt[160];
    printf("model %s, %llu features%s, %.2f epochs, %llu steps, codec %s, %d threads, %s, l2 %.3g%s\n",
           fsgd_loss_name(job->train.model), (unsigned long long)dim, job->train.bias ? " + intercept" : "", st->epochs_run,
           (unsigned long long)st->steps, job->train.codec, st->threads_used, optimizer_note(job, st, opt, sizeof opt),
           st->l2, job->train.l2 < 0 ? " (auto: 1/n)" : "");
    print_weights(st);
    if (st->shards > 1)
        printf("shards: %d (key k to shard k mod %d), busiest shard's keys a step %.3fx the mean (max %.3fx; "
               "contiguous ranges would have %.3fx)\n",
               st->shards, st->shards, st->shard_busy_mean, st->shard_busy_max, st->shard_range_busy_mean);
    if (st->codec_lr > 0)
        printf("efsign: stepsize %.4g (auto: 2/sqrt(steps per epoch))\n", st->codec_lr);
    if (st->holdout_rare > 0)
        printf("epochs: no holdout (it would hold ~%.0f rows of the rarer class, a noisy judge): "
               "%.0f epochs on all rows\n",
               st->holdout_rare, st->epochs_run);
    if (st->holdout_rows)
        printf("early stopping: %zu holdout rows, best loss %.5f after %.2f epochs, %s\n", st->holdout_rows,
               st->holdout_loss, st->best_epoch, stop_note(st, note, sizeof note));
    printf("train: %.2fs, %.0f rows/s, %.3g nonzeros/s per thread", st->seconds,
           st->seconds > 0 ? st->rows / st->seconds : 0.0, st->t_grad > 0 ? st->nnz / st->t_grad : 0.0);
}

/* The summary of a run streamed from --cache (its training rows are not
 * scored: they were never all in memory); --shards is refused there. */
static void print_cache_summary(const fsgd_job_t *job, const fsgd_train_stats_t *st, uint64_t dim, size_t test_rows)
{
    print_training(job, st, dim);
    putchar('\n');
    if (test_rows && job->train.model == FSGD_LOSS_SQUARED)
        printf("test  rmse %.5f (%zu rows)\n", st->test.rmse, test_rows);
    else if (test_rows && job->train.model == FSGD_LOSS_HINGE) /* no probabilities: no logloss */
        printf("test  auc %.5f  accuracy %.5f (%zu rows)\n", st->test.auc, st->test.accuracy, test_rows);
    else if (test_rows)
        printf("test  auc %.5f  logloss %.5f  accuracy %.5f (%zu rows)\n", st->test.auc, st->test.logloss,
               st->test.accuracy, test_rows);
}

/* --help was printed: the command succeeds without training. */
#define TRAIN_HELP_PRINTED (-1)

/* The job from the command line and the job file, checked before any data
 * is read: a bad codec spec or an output that cannot be written fails at
 * once. 0 to go on, TRAIN_HELP_PRINTED, or the exit status. */
static int train_job_from_args(fsgd_job_t *job, int argc, char **argv)
{
    fsgd_job_train_defaults(job);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    job->train.threads = cores > 0 ? (int)cores : 1;
    char err[1024] = "";
    int rc = fsgd_job_parse_args(job, argc, argv, err, sizeof err);
    if (rc == 1) {
        if (dcli_help_all(argc, argv)) {
            fsgd_job_print_help_with(usage_line, job, stdout);
            fputs(defaults_note, stdout);
        } else {
            dcli_print_job_help(usage_brief, job, train_help_options, stdout);
        }
        fsgd_cli_print_exit_codes(stdout);
        return TRAIN_HELP_PRINTED;
    }
    if (rc == 0)
        rc = fsgd_job_check_train(job, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    if (fsgd_strategy_check(job->train.codec, 1u << 20, err, sizeof err) < 0) {
        fsgd_cli_error("codec: %s", err);
        return FSGD_EXIT_USAGE;
    }
    const fsgd_cli_path_t wr[] = {{"--out", job->train.out}, {"--metrics-json", job->train.metrics_json}, {"--cache", job->train.cache}};
    const fsgd_cli_path_t rd[] = {{"--data", job->train.data}, {"--test", job->train.test}, {"job file", job->train.job_file},
                                  {"--init", job->train.init}};
    if ((rc = fsgd_cli_check_distinct("train", wr, 3, rd, 4)) != 0)
        return rc;
    const char *outs[] = {job->train.out, job->train.metrics_json};
    return fsgd_cli_check_outputs("train", outs, 2);
}

/* The summary of a run on rows in memory: the model, its shards, codec,
 * holdout and speed, then the train (first TRAIN_METRICS_ROWS rows) and
 * test metrics. */
static void print_results(const fsgd_job_t *job, const fsgd_train_stats_t *st, const fsgd_metrics_t *train_m,
                          size_t n_train, size_t n_test, uint64_t dim)
{
    print_training(job, st, dim);
    if (strcmp(job->train.codec, "none") != 0) /* one process sends nothing: only a codec's figures mean something */
        printf("; bytes %.0f/step, compression %.2fx", st->steps ? (double)st->wire_bytes / st->steps : 0.0,
               st->wire_bytes ? (double)st->raw_bytes / st->wire_bytes : 0.0);
    putchar('\n');
    /* issue 40 item 4: the rows tested on were taken from --data, said where the figure is */
    const char *held = job->train.test[0] ? "" : ", held out of --data: no --test";
    if (job->train.model == FSGD_LOSS_SQUARED) {
        printf("train rmse %.5f\n", train_m->rmse);
        if (n_test)
            printf("test  rmse %.5f (%zu rows%s)\n", st->test.rmse, n_test, held);
    } else if (job->train.model == FSGD_LOSS_HINGE) { /* no probabilities: no logloss */
        printf("train auc %.5f  accuracy %.5f (%zu rows%s)\n", train_m->auc, train_m->accuracy, train_m->n,
               train_m->n < n_train ? ", the first" : "");
        if (n_test)
            printf("test  auc %.5f  accuracy %.5f (%zu rows%s)\n", st->test.auc, st->test.accuracy, n_test, held);
    } else {
        printf("train auc %.5f  logloss %.5f  accuracy %.5f (%zu rows%s)\n", train_m->auc, train_m->logloss,
               train_m->accuracy, train_m->n, train_m->n < n_train ? ", the first" : "");
        if (n_test)
            printf("test  auc %.5f  logloss %.5f  accuracy %.5f (%zu rows%s)\n", st->test.auc, st->test.logloss,
                   st->test.accuracy, n_test, held);
    }
    if (job->train.target_auc > 0) {
        if (st->time_to_target >= 0)
            printf("reached test auc %.4f after %.3fs\n", job->train.target_auc, st->time_to_target);
        else
            printf("did not reach test auc %.4f\n", job->train.target_auc);
    }
}

/* Waits for the model's writer thread (or writes the model here when none
 * started) and says where it went. 0 or the exit status. */
static int finish_model_file(const fsgd_job_t *job, progress_ctx_t *pctx, model_write_t *mw)
{
    if (pctx->writing)
        pthread_join(pctx->writer, NULL);
    else if (job->train.out[0])
        write_model(mw);
    if (!job->train.out[0]) {
        printf("model not saved (--out FILE saves it)\n"); /* issue 40 item 11: it said nothing */
        return 0;
    }
    if (mw->rc < 0) {
        fsgd_cli_error("%s", mw->err);
        return fsgd_cli_status(mw->rc);
    }
    printf("model written to %s\n", fsgd_cli_out_name(job->train.out));
    return 0;
}

static void note_stderr(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

/* A run streamed from --cache: its model written now (its training rows
 * were never all in memory, so nothing was scored while it could be). */
static int save_streamed_model(const fsgd_job_t *job, const fsgd_model_t *model)
{
    char err[1024];
    if (!job->train.out[0])
        return 0;
    int rc = fsgd_model_save(model, job->train.out, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("%s", err);
        return fsgd_cli_status(rc);
    }
    printf("model written to %s\n", fsgd_cli_out_name(job->train.out));
    return 0;
}

static int train_command(int argc, char **argv)
{
    fsgd_job_t job;
    int rc = train_job_from_args(&job, argc, argv);
    if (rc != 0)
        return rc == TRAIN_HELP_PRINTED ? 0 : rc;
    fsgd_cli_cleanup_on_signal();
    fsgd_train_files_run_t run;
    model_write_t mw = {.model = &run.model, .path = job.train.out};
    progress_ctx_t pctx = {.job = &job, .tty = isatty(2), .run = &run, .mw = &mw};
    fsgd_train_files_hooks_t hooks = {.train = {.progress = on_progress, .ctx = &pctx}, .note = note_stderr};
    char err[2048];
    rc = fsgd_train_files(&job.train, &hooks, &run, err, sizeof err);
    if (rc < 0) {
        if (pctx.writing)
            pthread_join(pctx.writer, NULL);
        fsgd_cli_error("%s", err);
        fsgd_train_files_free(&run);
        return fsgd_cli_status(rc);
    }
    int status;
    if (run.streamed) {
        print_cache_summary(&job, &run.st, run.dim, run.n_test);
        status = save_streamed_model(&job, &run.model);
    } else {
        /* where the trainer did not say when the model was ready (--save-state) */
        if (!pctx.writing)
            pctx.writing = job.train.out[0] && pthread_create(&pctx.writer, NULL, write_model, &mw) == 0;
        print_results(&job, &run.st, &run.train_m, run.n_train, run.n_test, run.dim);
        status = finish_model_file(&job, &pctx, &mw);
    }
    if (job.train.metrics_json[0] && (rc = write_metrics(&job, &run)) < 0 && !status)
        status = fsgd_cli_status(rc);
    fsgd_train_files_free(&run);
    return status;
}

/* --out - and devices (/dev/stdout, /dev/null, a FIFO): fsgd_cli_run_streamed. */
int fsgd_cmd_train(int argc, char **argv) { return fsgd_cli_run_streamed(train_command, argc, argv, "train", 1); }
