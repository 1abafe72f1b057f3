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

/* Hash-column use of the training file (hashed formats), for the metrics JSON. */
static uint64_t hash_used, hash_collided;

/* The training file's features over its features and crosses (job key
 * lr_auto_share; 1 without crosses). */
static double feature_share = 1;

/* fsgd train --cache found a cache made from the same input and read no text. */
static int cache_reused;

/* Rows of the training file scored for the "train auc" line. */
#define TRAIN_METRICS_ROWS 100000

/* How early stopping ended, for the summary line. */
static const char *stop_note(const fsgd_train_stats_t *st, char *buf, size_t cap)
{
    if (st->stopped_early)
        snprintf(buf, cap, "stopped at %.2f: no loss 1e-4 lower for %.2f epochs", st->epochs_run, st->patience_epochs);
    else
        snprintf(buf, cap, "max_epochs reached");
    return buf;
}

/* Peak resident set of this process so far, in MiB (Linux: ru_maxrss in KiB). */
static double peak_rss_mb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : NAN;
}

/* VW text (fsgd/vw.h): its importance weights and tags are read beside
 * the rows; with is_train, the hashed columns' use said and kept, and the
 * share of features among features and crosses (lr auto). */
static int load_vw(const char *path, const fsgd_job_t *job, int is_train, fsgd_csr_t *out, fsgd_vw_extra_t *vwx,
                   fsgd_libsvm_stats_t *st, char *err, size_t errsz)
{
    fsgd_rowfmt_t vf;
    int rc = fsgd_rowfmt_init(&vf, job->train.format, job->train.hash_bits, job->train.skip_bad, err, errsz);
    vwx->count_slots = is_train;
    /* binary rows until a value other than 1 (half the memory of rows of crosses) */
    if (rc == 0 && !out->col && fsgd_csr_init_binary(out, 0, 0) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
    if (rc == 0)
        rc = fsgd_vw_load(path, &vf.vw_spec, job->train.skip_bad, out, vwx, st, err, errsz);
    if (rc == 0 && is_train && vwx->slots_used) { /* features and crosses in 2^bits columns, as for delimited rows */
        if (!job->train.quiet)
            fprintf(stderr, "fsgd: %s: %zu rows hashed into 2^%u columns: %llu columns used, %llu of them "
                            "shared by 2+ distinct features or crosses (%.2f%%)\n",
                    path, out->n_rows, vf.vw_spec.bits, (unsigned long long)vwx->slots_used,
                    (unsigned long long)vwx->slots_collided,
                    100.0 * (double)vwx->slots_collided / (double)vwx->slots_used);
        hash_used = vwx->slots_used;
        hash_collided = vwx->slots_collided;
    }
    if (rc == 0 && is_train && vwx->cross_entries)
        feature_share = (double)vwx->feature_entries / (double)(vwx->feature_entries + vwx->cross_entries);
    return rc;
}

/* Loads a LIBSVM file, or a delimited one when spec is not NULL (collisions
 * counted and printed for the training file); 0 or the exit status to
 * return (the error printed). */
/* A delimited file (criteo, tsv:, csv:): its hashed columns said and
 * counted for the summary. */
static int load_delim(const char *path, const fsgd_job_t *job, const fsgd_delim_spec_t *spec, int is_train,
                      fsgd_csr_t *out, char *err, size_t errsz)
{
    fsgd_delim_stats_t ds;
    int rc = fsgd_delim_load(path, spec, is_train, out, &ds, err, errsz);
    if (rc == 0 && is_train && !job->train.quiet)
        fprintf(stderr, "fsgd: %s: %llu rows hashed into 2^%u columns: %llu columns used, %llu of them "
                        "shared by 2+ distinct values (%.2f%%)\n",
                path, (unsigned long long)ds.rows, spec->bits, (unsigned long long)ds.slots_used,
                (unsigned long long)ds.slots_collided,
                ds.slots_used ? 100.0 * (double)ds.slots_collided / (double)ds.slots_used : 0.0);
    if (rc == 0 && is_train) {
        hash_used = ds.slots_used;
        hash_collided = ds.slots_collided;
        if (ds.cross_entries)
            feature_share = (double)ds.feature_entries / (double)(ds.feature_entries + ds.cross_entries);
    }
    return rc;
}

/* A LIBSVM file in the job's format as folded (fsgd_job_fold_input: its
 * bits, fields and crosses), parsed on the job's threads; with is_train
 * its hashed columns said and counted, as for hashed columns, and the
 * share of features among features and crosses (lr auto). */
static int load_libsvm(const char *path, const fsgd_job_t *job, int is_train, fsgd_libsvm_opts_t *opts,
                       fsgd_csr_t *out, fsgd_libsvm_stats_t *st, char *err, size_t errsz)
{
    fsgd_rowfmt_t lf;
    int rc = fsgd_rowfmt_init(&lf, job->train.format, job->train.hash_bits, job->train.skip_bad, err, errsz);
    if (rc == 0) {
        opts->hash_bits = lf.opts.hash_bits;
        opts->fields = lf.opts.fields;
        opts->slots = is_train ? fsgd_libsvm_slots_new(opts->hash_bits) : NULL;
        /* parsing is most of the load: split it over the job's threads */
        rc = fsgd_libsvm_load_threads(path, opts, job->train.threads, out, st, err, errsz);
        free(opts->slots);
        opts->slots = NULL;
    }
    if (rc == 0 && is_train && st->slots_used) {
        if (!job->train.quiet)
            fprintf(stderr, "fsgd: %s: %llu rows hashed into 2^%u columns: %llu columns used, %llu of them "
                            "shared by 2+ distinct indices or crosses (%.2f%%)\n",
                    path, (unsigned long long)st->rows, opts->hash_bits, (unsigned long long)st->slots_used,
                    (unsigned long long)st->slots_collided, 100.0 * (double)st->slots_collided / (double)st->slots_used);
        hash_used = st->slots_used;
        hash_collided = st->slots_collided;
    }
    if (rc == 0 && is_train && st->cross_entries)
        feature_share = (double)st->feature_entries / (double)(st->feature_entries + st->cross_entries);
    return rc;
}

static int load(const char *path, const fsgd_job_t *job, const fsgd_delim_spec_t *spec, int is_train,
                fsgd_csr_t *out)
{
    /* binary rows held without their values: fsgd train reads such batches */
    fsgd_libsvm_weights_t lw = {0}; /* LIBSVM label:weight (row_weights) */
    fsgd_libsvm_opts_t opts = {.skip_bad = job->train.skip_bad,
                               .binary = 1,
                               .hash_bits = (unsigned)job->train.hash_bits,
                               .row_weights = job->train.row_weights,
                               .weights = is_train ? &lw : NULL};
    fsgd_libsvm_stats_t st = {0};
    fsgd_vw_extra_t vwx = {0};
    char err[512];
    int rc;
    if (!strcmp(job->train.format, "vw") || !strncmp(job->train.format, "vw:", 3)) {
        rc = load_vw(path, job, is_train, out, &vwx, &st, err, sizeof err);
    } else if (spec) {
        rc = load_delim(path, job, spec, is_train, out, err, sizeof err);
    } else {
        rc = load_libsvm(path, job, is_train, &opts, out, &st, err, sizeof err);
    }
    if (rc < 0) {
        fsgd_vw_extra_free(&vwx);
        fsgd_libsvm_weights_free(&lw);
        fsgd_cli_error("%s", err);
        return fsgd_cli_status(rc);
    }
    if (st.bad_rows) {
        fprintf(stderr, "fsgd: %s: skipped %llu malformed rows; first:\n", path, (unsigned long long)st.bad_rows);
        for (uint64_t i = 0; i < st.bad_rows && i < FSGD_LIBSVM_BAD_KEPT; i++)
            fprintf(stderr, "  %s\n", st.first_bad[i]);
    }
    /* Labels that do not fit the model are an error before any training:
     * {1, 2} for logistic would train "silently" on one class. */
    fsgd_label_set_t ls = {0};
    fsgd_label_set_add(&ls, out->label, out->n_rows);
    double lo, hi;
    if (fsgd_loss_check_labels(job->train.model, &ls, err, sizeof err) < 0) {
        /* any two values, as LIBLINEAR takes them: the larger is the positive class */
        if (job->train.model == FSGD_LOSS_SQUARED || !fsgd_rowlabel_map_two(out->label, out->n_rows, &lo, &hi)) {
            fsgd_vw_extra_free(&vwx);
            fsgd_libsvm_weights_free(&lw);
            fsgd_cli_error("%s: %s", path, err);
            return FSGD_EXIT_DATA;
        }
        if (!job->train.quiet || is_train)
            fprintf(stderr, "fsgd: %s: labels {%g, %g}: %g is the positive class (+1), %g the negative (-1)\n",
                    path, lo, hi, hi, lo);
    }
    /* Importance weights (VW rows) and class weights ride in the training
     * rows' labels (fsgd/rowlabel.h); test rows are scored unweighted. */
    double pos = 1, neg = 1;
    if (is_train && (fsgd_train_class_weight(&job->train, &pos, &neg, err, sizeof err) < 0)) {
        fsgd_vw_extra_free(&vwx);
        fsgd_libsvm_weights_free(&lw);
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    /* one weight a row from either reader (VW importance, LIBSVM label:weight) */
    const double *row_w = vwx.any_weight ? vwx.weight : lw.any && lw.n == out->n_rows ? lw.w : NULL;
    if (is_train && (row_w || pos != 1 || neg != 1)) {
        if (job->train.model == FSGD_LOSS_SQUARED) {
            fsgd_vw_extra_free(&vwx);
            fsgd_libsvm_weights_free(&lw);
            fsgd_cli_error("%s: row and class weights are for classification models (logistic, svm), not linear",
                           path);
            return FSGD_EXIT_USAGE;
        }
        if (strcmp(job->train.backend, "cpu")) { /* the cuda backend reads a label's sign only */
            fsgd_vw_extra_free(&vwx);
            fsgd_libsvm_weights_free(&lw);
            fsgd_cli_error("%s: row and class weights are applied by the cpu backend: use --backend cpu", path);
            return FSGD_EXIT_USAGE;
        }
        size_t dropped = fsgd_rowlabel_weigh(out, 0, row_w, pos, neg);
        if (!job->train.quiet)
            fprintf(stderr, "fsgd: %s: rows weighted (%s%s%s)%s\n", path, row_w ? "importance" : "",
                    row_w && (pos != 1 || neg != 1) ? " and " : "",
                    pos != 1 || neg != 1 ? "class weights" : "", dropped ? "; rows of weight 0 left out" : "");
    }
    fsgd_vw_extra_free(&vwx);
    fsgd_libsvm_weights_free(&lw);
    return 0;
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
    size_t n_train; /* rows per epoch, for the ETA */
    /* in memory: the model is written on a thread of its own from the moment
     * its weights are final (FSGD_TRAIN_MODEL_READY), while the trainer scores
     * the test rows and this thread the train line's */
    fsgd_model_t *model;
    const fsgd_rowfmt_t *fmt;
    model_write_t *mw;
    pthread_t writer;
    int writing;
} progress_ctx_t;

static void on_progress(void *p, const fsgd_train_stats_t *s, int end_of_epoch)
{
    progress_ctx_t *ctx = p;
    if (end_of_epoch == FSGD_TRAIN_MODEL_READY) {
        if (ctx->mw && ctx->job->train.out[0] && !ctx->writing) {
            fsgd_rowfmt_input(ctx->fmt, ctx->model->input, sizeof ctx->model->input);
            ctx->writing = pthread_create(&ctx->writer, NULL, write_model, ctx->mw) == 0;
        }
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
            d, sizeof d, fsgd_progress_eta(s->seconds, (double)s->rows, (double)ctx->n_train * ctx->job->train.epochs));
        snprintf(eta, sizeof eta, "  ETA %s", d);
    }
    fprintf(stderr, "%sepoch %d/%s  step %llu  %.0f rows/s  loss %.4f  %.0f B/step%s%s%s%s",
            ctx->tty ? "\r" : "", s->epoch, of, (unsigned long long)s->steps, rows_s, s->last_loss, bytes_step,
            ratio_text, eta, test, (end_of_epoch || !ctx->tty) ? "\n" : "\033[K");
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

static int write_metrics(const char *path, const fsgd_job_t *job, const fsgd_train_stats_t *s,
                         const fsgd_metrics_t *train_m, size_t n_train, uint64_t dim, double t0)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    fsgd_outfile_t o;
    FILE *f = NULL;
    int rc = fsgd_outfile_open(&o, path, err, sizeof err);
    if (rc == 0 && !(f = fsgd_outfile_stream(&o, err, sizeof err))) {
        fsgd_outfile_abort(&o);
        rc = FSGD_E_IO;
    }
    if (rc < 0) {
        fsgd_cli_error("metrics: %s", err);
        return rc;
    }
    fprintf(f, "{\"model\": \"%s\", \"codec\": \"%s\", \"backend\": \"%s\", \"threads\": %d, "
               "\"threads_requested\": %d, ",
            fsgd_loss_name(job->train.model), job->train.codec, s->backend, s->threads_used, job->train.threads);
    fprintf(f, "\"train_rows\": %zu, \"dim\": %llu, \"epochs\": %d, \"steps\": %llu, ", n_train,
            (unsigned long long)dim, job->train.epochs, (unsigned long long)s->steps);
    json_num(f, "epochs_run", s->epochs_run, 1);
    fprintf(f, "\"optimizer\": \"%s\", \"staleness\": %d, ", fsgd_optimizer_name(job->train.optimizer), s->staleness);
    /* --shards: the busiest shard's keys over the mean a step (interleaved keys), and what S contiguous
     * ranges would have had on the same steps */
    fprintf(f, "\"shards\": %d, ", s->shards > 1 ? s->shards : 1);
    json_num(f, "shard_busy_mean", s->shard_busy_mean, 1);
    json_num(f, "shard_busy_max", s->shard_busy_max, 1);
    json_num(f, "shard_range_busy_mean", s->shard_range_busy_mean, 1);
    json_num(f, "shard_range_busy_max", s->shard_range_busy_max, 1);
    if (job->train.optimizer == FSGD_OPTIMIZER_FTRL) {
        json_num(f, "alpha", s->alpha, 1);
        fprintf(f, "\"alpha_auto\": %s, ", job->train.alpha < 0 ? "true" : "false");
        json_num(f, "beta", job->train.beta, 1);
    }
    json_num(f, "l1", job->train.l1, 1);
    fprintf(f, "\"weights_nonzero\": %llu, \"weights_touched\": %llu, ", (unsigned long long)s->weights_nonzero,
            (unsigned long long)s->weights_touched);
    fprintf(f, "\"init\": ");
    json_str(f, job->train.init);
    fprintf(f, ", \"init_state\": %s, \"save_state\": %s, ", s->init_state ? "true" : "false",
            job->train.save_state ? "true" : "false");
    json_num(f, "lr", s->lr, 1);
    fprintf(f, "\"lr_auto\": %s, ", job->train.lr < 0 ? "true" : "false");
    json_num(f, "l2", s->l2, 1);
    fprintf(f, "\"l2_auto\": %s, \"holdout_rows\": %zu, \"stopped_early\": %s, ", job->train.l2 < 0 ? "true" : "false",
            s->holdout_rows, s->stopped_early ? "true" : "false");
    json_num(f, "holdout_rare_rows", s->holdout_rare, 1);
    json_num(f, "efsign_lr_auto", s->codec_lr > 0 ? s->codec_lr : NAN, 1);
    json_num(f, "holdout_loss", s->holdout_rows ? s->holdout_loss : NAN, 1);
    json_num(f, "best_epoch", s->holdout_rows ? s->best_epoch : NAN, 1);
    json_num(f, "peak_rss_mb", peak_rss_mb(), 1);
    json_num(f, "batch_mb", (double)s->batch_bytes / 1048576.0, 1);
    json_num(f, "batch_mb_on_disk", (double)s->batch_bytes_on_disk / 1048576.0, 1);
    fprintf(f, "\"batches_binary\": %s, ", s->batches_binary ? "true" : "false");
    fprintf(f, "\"streamed_from_cache\": %s, \"cache_reused\": %s, ", job->train.cache[0] ? "true" : "false",
            cache_reused ? "true" : "false");
    fprintf(f, "\"format\": \"%s\", \"hash_columns_used\": %llu, \"hash_columns_collided\": %llu, ",
            job->train.format, (unsigned long long)hash_used, (unsigned long long)hash_collided);
    json_num(f, "process_seconds", fsgd_clock_s() - t0, 1);
    fprintf(f, "\"test\": ");
    json_metrics(f, &s->test);
    fprintf(f, ", \"train\": ");
    json_metrics(f, train_m);
    fprintf(f, ", ");
    json_num(f, "train_seconds", s->seconds, 1);
    json_num(f, "time_to_target_seconds", s->time_to_target >= 0 ? s->time_to_target : NAN, 1);
    json_num(f, "target_auc", job->train.target_auc > 0 ? job->train.target_auc : NAN, 1);
    /* the same moment from the start of fsgd train: parsing and setup included */
    json_num(f, "process_time_to_target_seconds", s->target_clock > 0 ? s->target_clock - t0 : NAN, 1);
    json_num(f, "rows_per_second", s->seconds > 0 ? (double)s->rows / s->seconds : NAN, 1);
    json_num(f, "nnz_per_second_per_thread", s->t_grad > 0 ? (double)s->nnz / s->t_grad : NAN, 1);
    fprintf(f, "\"raw_bytes\": %llu, \"wire_bytes\": %llu, ", (unsigned long long)s->raw_bytes,
            (unsigned long long)s->wire_bytes);
    json_num(f, "bytes_per_step", s->steps ? (double)s->wire_bytes / (double)s->steps : NAN, 1);
    json_num(f, "compression_ratio", s->wire_bytes ? (double)s->raw_bytes / (double)s->wire_bytes : NAN, 1);
    fprintf(f, "\"seconds\": {");
    json_num(f, "gradient", s->t_grad, 1);
    json_num(f, "encode", s->t_encode, 1);
    json_num(f, "decode", s->t_decode, 1);
    json_num(f, "update", s->t_update, 1);
    json_num(f, "gradient_round_wall", s->t_grad_round, 1);
    json_num(f, "holdout", s->t_holdout, 0);
    fprintf(f, "}}\n");
    rc = fsgd_outfile_commit(&o, err, sizeof err);
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

/* fsgd train --cache: the first pass writes the cache (holdout and test
 * split set aside in memory and in the cache's own sections), or a cache
 * made from the same input is reused without reading the text; every epoch
 * streams from it. The training rows are never all in memory, so they are
 * not scored at the end. */
static int train_from_cache(fsgd_job_t *job, const fsgd_rowfmt_t *fmt, const fsgd_delim_spec_t *spec, double t0)
{
    char err[1024];
    fsgd_csr_t hold = {0}, test = {0};
    int rc = 0;
    if (job->train.shards > 1) {
        fsgd_cli_error("shards %d: fsgd train simulates shards on rows in memory, not streamed from a cache "
                       "(--cache): drop --cache or use --shards 1", job->train.shards);
        return fsgd_cli_status(FSGD_E_ARG);
    }
    if (job->test[0] && (rc = load(job->test, job, spec, 0, &test)) != 0)
        return rc;
    fsgd_train_cache_result_t cache;
    rc = fsgd_train_cache_prepare(&job->train, spec, job->test[0] ? 0 : job->train.test_fraction, &hold, &test, &cache, err,
                                  sizeof err);
    if (cache.rewritten[0])
        fprintf(stderr, "fsgd: %s: rewriting\n", cache.rewritten);
    if (cache.skipped_rows)
        fprintf(stderr, "fsgd: %s: skipped %llu malformed rows\n", job->train.data, (unsigned long long)cache.skipped_rows);
    uint64_t rows = cache.rows, max_col = cache.max_col;
    int reused = cache.reused;
    job->train.lr_auto_share = cache.feature_share;
    if (rc < 0) {
        fsgd_cli_error("%s", err);
        fsgd_csr_free(&hold);
        fsgd_csr_free(&test);
        return fsgd_cli_status(rc);
    }
    uint64_t dim = job->train.dim ? job->train.dim : (max_col > hold.max_col ? max_col : hold.max_col);
    /* said even with --quiet: whether the text was read is worth knowing */
    cache_reused = reused;
    if (reused)
        fprintf(stderr, "fsgd: reusing cache %s (written from %s, unchanged): %llu train rows, %zu holdout and %zu "
                        "test rows, %llu features; opened in %.2fs\n",
                job->train.cache, job->train.data, (unsigned long long)rows, hold.n_rows, test.n_rows, (unsigned long long)dim,
                fsgd_clock_s() - t0);
    else if (!job->train.quiet)
        fprintf(stderr, "fsgd: %llu train rows cached in %s, %zu holdout and %zu test rows in memory, %llu "
                        "features; first pass %.2fs\n",
                (unsigned long long)rows, job->train.cache, hold.n_rows, test.n_rows, (unsigned long long)dim, fsgd_clock_s() - t0);
    progress_ctx_t pctx = {.job = job, .tty = isatty(2), .n_train = (size_t)rows};
    fsgd_model_t model = {0};
    fsgd_train_stats_t st;
    fsgd_train_input_t in = {.source = FSGD_TRAIN_CACHE, .cache = job->train.cache, .hold = &hold, .test = &test,
                             .dim = dim};
    fsgd_train_hooks_t hooks = {.progress = on_progress, .ctx = &pctx};
    rc = fsgd_train(&job->train, &in, NULL, &model, &st, &hooks, err, sizeof err);
    fsgd_csr_free(&hold);
    if (rc < 0) {
        fsgd_cli_error("training failed: %s", err);
        fsgd_csr_free(&test);
        return fsgd_cli_status(rc);
    }
    print_cache_summary(job, &st, dim, test.n_rows);
    int status = 0;
    fsgd_rowfmt_input(fmt, model.input, sizeof model.input); /* delimited, hashed LIBSVM or VW */
    if (job->train.out[0]) {
        rc = fsgd_model_save(&model, job->train.out, err, sizeof err);
        if (rc < 0) {
            fsgd_cli_error("%s", err);
            status = fsgd_cli_status(rc);
        } else {
            printf("model written to %s\n", fsgd_cli_out_name(job->train.out));
        }
    }
    fsgd_metrics_t none = {.auc = NAN, .logloss = NAN, .accuracy = NAN, .rmse = NAN, .loss = NAN};
    if (job->train.metrics_json[0] && (rc = write_metrics(job->train.metrics_json, job, &st, &none, (size_t)rows, dim, t0)) < 0 &&
        !status)
        status = fsgd_cli_status(rc);
    fsgd_model_free(&model);
    fsgd_csr_free(&test);
    return status;
}

/* --init, before any data is read: loads the model to start from and
 * checks its input format (the trainer cannot), loss and intercept. 0 or
 * the exit status (error printed). */
static int load_init(const fsgd_job_t *job, const fsgd_rowfmt_t *fmt, fsgd_model_t *init)
{
    char err[1024], input[FSGD_MODEL_INPUT_MAX];
    int rc = fsgd_model_load(init, job->train.init, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("init: %s", err);
        return fsgd_cli_status(rc);
    }
    fsgd_rowfmt_input(fmt, input, sizeof input);
    if (strcmp(init->input, input)) {
        fsgd_cli_error("init: %s was trained on input %s, this job reads %s: its weights would belong to other "
                       "features", job->train.init, init->input[0] ? init->input : "libsvm",
                       input[0] ? input : "libsvm");
        return FSGD_EXIT_USAGE;
    }
    if (fsgd_train_check_init(&job->train, init->dim, init, err, sizeof err) < 0) { /* dim: see init_dim */
        fsgd_cli_error("init: %s: %s", job->train.init, err);
        return FSGD_EXIT_USAGE;
    }
    const fsgd_model_state_kind_t want = fsgd_train_state_kind(&job->train), have = init->state.kind;
    char note[160];
    if (have == want)
        snprintf(note, sizeof note, "and its %s state (%llu keys, step %llu)", fsgd_model_state_name(have),
                 (unsigned long long)init->state.n, (unsigned long long)init->state.step);
    else if (have == FSGD_MODEL_STATE_NONE)
        snprintf(note, sizeof note, "weights only (no optimizer state in the file: --save-state writes it)");
    else
        snprintf(note, sizeof note, "weights only: its state is %s's, this run trains %s",
                 fsgd_model_state_name(have), fsgd_model_state_name(want));
    if (!job->train.quiet)
        fprintf(stderr, "fsgd: starting from %s: %llu nonzero weights of %llu, %s\n", job->train.init,
                (unsigned long long)fsgd_model_nnz(init), (unsigned long long)init->dim, note);
    return 0;
}

/* --init, once the data is read: without --dim the model's dim stands, so a
 * day of data that lacks the highest features continues the same model;
 * data beyond it, or another --dim, is refused. 0 or the exit status. */
static int init_dim(const fsgd_job_t *job, const fsgd_model_t *init, const fsgd_csr_t *train, uint64_t *dim)
{
    if (!job->train.dim && train->max_col <= init->dim)
        *dim = init->dim;
    if (*dim != init->dim) {
        fsgd_cli_error("init: %s has dim %llu, this job %llu (%s)", job->train.init, (unsigned long long)init->dim,
                       (unsigned long long)*dim, job->train.dim ? "dim" : "the data's largest feature index");
        return FSGD_EXIT_USAGE;
    }
    return 0;
}

/* The row format (fsgd/rowfmt.h, as for the distributed roles): a hashed
 * one has 2^bits columns, so dim must be 0 or that. 0 or an exit status. */
static int open_row_format(fsgd_job_t *job, fsgd_rowfmt_t *fmt)
{
    char err[1024];
    int rc = fsgd_job_fold_input(job, err, sizeof err);
    if (rc == FSGD_E_PARSE || rc == FSGD_E_IO) { /* a cross naming a column the file lacks; its header unreadable */
        fsgd_cli_error("%s", err);
        return fsgd_cli_status(rc);
    }
    if (rc < 0 || fsgd_rowfmt_init(fmt, job->train.format, job->train.hash_bits, job->train.skip_bad, err, sizeof err) < 0 ||
        fsgd_rowfmt_dim(fmt, job->train.dim, &job->train.dim, err, sizeof err) < 0) {
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    /* label:weight is LIBSVM's (VW rows carry their importance), and the
     * weights ride in rows held in memory, as VW importance does */
    if (job->train.row_weights && (fmt->hashed || fmt->vw || job->train.cache[0])) {
        fsgd_cli_error("row_weights: label:weight is read from libsvm rows held in memory (format %s%s)",
                       job->train.format[0] ? job->train.format : "libsvm", job->train.cache[0] ? ", not streamed from --cache" : "");
        return FSGD_EXIT_USAGE;
    }
    if (fmt->opts.fields.n_terms && job->train.cache[0]) { /* the cache's reader hashes indices, it does not cross */
        fsgd_cli_error("interactions: crosses of LIBSVM fields are built on rows in memory, not streamed from --cache");
        return FSGD_EXIT_USAGE;
    }
    return 0;
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
    const fsgd_cli_path_t rd[] = {{"--data", job->train.data}, {"--test", job->test}, {"job file", job->job_file},
                                  {"--init", job->train.init}};
    if ((rc = fsgd_cli_check_distinct("train", wr, 3, rd, 4)) != 0)
        return rc;
    const char *outs[] = {job->train.out, job->train.metrics_json};
    return fsgd_cli_check_outputs("train", outs, 2);
}

/* Rows in memory: --init's model, the training rows, the test rows (--test,
 * or a fraction held out of --data) and the model's dim; t0 is when the
 * command began loading. 0 or the exit status (error printed); the caller
 * frees init, train and test either way. */
static int load_rows(fsgd_job_t *job, const fsgd_rowfmt_t *fmt, double t0, fsgd_model_t *init, fsgd_csr_t *train,
                     fsgd_csr_t *test, uint64_t *dim)
{
    const fsgd_delim_spec_t *spec = fmt->hashed ? &fmt->spec : NULL;
    int rc;
    if (job->train.init[0] && (rc = load_init(job, fmt, init)) != 0)
        return rc;
    if ((rc = load(job->train.data, job, spec, 1, train)) != 0)
        return rc;
    job->train.lr_auto_share = feature_share;
    if (job->test[0]) {
        if ((rc = load(job->test, job, spec, 0, test)) != 0)
            return rc;
    } else if (job->train.test_fraction > 0 && fsgd_train_split_test(train, job->train.test_fraction, job->train.seed, test) < 0) {
        fsgd_cli_error("out of memory splitting the data");
        return FSGD_EXIT_INTERNAL;
    }
    *dim = job->train.dim ? job->train.dim : train->max_col;
    if (job->train.init[0] && (rc = init_dim(job, init, train, dim)) != 0)
        return rc;
    if (train->max_col > *dim) {
        fsgd_cli_error("%s has feature index %llu > dim %llu", job->train.data, (unsigned long long)train->max_col,
                       (unsigned long long)*dim);
        return FSGD_EXIT_DATA;
    }
    if (!job->train.quiet)
        fprintf(stderr, "fsgd: %zu train rows, %zu test rows%s, %llu features, %zu nonzeros; loaded in %.2fs\n",
                train->n_rows, test->n_rows,
                job->test[0] || !test->n_rows ? "" : " (held out of --data: no --test; --test-fraction 0 keeps all)",
                (unsigned long long)*dim, train->nnz, fsgd_clock_s() - t0);
    return 0;
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
    const char *held = job->test[0] ? "" : ", held out of --data: no --test";
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

/* Trains on rows in memory: the model is written on a thread of its own
 * from the moment its weights are final while the training metrics are
 * scored (the two only read the model). 0 or the exit status. */
static int train_in_memory(fsgd_job_t *job, const fsgd_rowfmt_t *fmt, double t0)
{
    char err[1024] = "";
    fsgd_model_t init = {0};
    fsgd_csr_t train = {0}, test = {0};
    uint64_t dim = 0;
    int rc = load_rows(job, fmt, t0, &init, &train, &test, &dim);
    if (rc != 0) {
        fsgd_model_free(&init);
        fsgd_csr_free(&train);
        fsgd_csr_free(&test);
        return rc;
    }
    fsgd_model_t model = {0};
    model_write_t mw = {.model = &model, .path = job->train.out};
    progress_ctx_t pctx = {.job = job, .tty = isatty(2), .n_train = train.n_rows, .model = &model, .fmt = fmt,
                           .mw = &mw};
    fsgd_train_stats_t st;
    /* only the rows scored for the train line are read after training */
    const size_t n_train = train.n_rows, n_test = test.n_rows;
    fsgd_train_input_t in = {.source = FSGD_TRAIN_ROWS_OWNED, .owned_rows = &train, .keep_rows = TRAIN_METRICS_ROWS,
                             .owned_test = &test, .dim = dim};
    fsgd_train_hooks_t hooks = {.progress = on_progress, .ctx = &pctx};
    rc = fsgd_train(&job->train, &in, job->train.init[0] ? &init : NULL, &model, &st, &hooks, err, sizeof err);
    fsgd_model_free(&init);
    if (rc < 0) {
        if (pctx.writing)
            pthread_join(pctx.writer, NULL);
        fsgd_cli_error("training failed: %s", err);
        fsgd_csr_free(&train);
        fsgd_csr_free(&test);
        return fsgd_cli_status(rc);
    }
    /* where the trainer did not say when the model was ready (--save-state) */
    if (!pctx.writing) {
        fsgd_rowfmt_input(fmt, model.input, sizeof model.input);
        pctx.writing = job->train.out[0] && pthread_create(&pctx.writer, NULL, write_model, &mw) == 0;
    }
    /* Training metrics on at most TRAIN_METRICS_ROWS rows (the first,
     * the file's order): scoring and sorting all of a big file costs
     * seconds for an informational figure; the line and the JSON say n. */
    fsgd_metrics_t train_m;
    fsgd_csr_t head = train;
    if (head.n_rows > TRAIN_METRICS_ROWS) {
        head.n_rows = TRAIN_METRICS_ROWS;
        head.nnz = (size_t)head.row_ptr[TRAIN_METRICS_ROWS];
    }
    fsgd_train_evaluate(&model, &head, &train_m);
    print_results(job, &st, &train_m, n_train, n_test, dim);
    int status = finish_model_file(job, &pctx, &mw);
    if (job->train.metrics_json[0] && (rc = write_metrics(job->train.metrics_json, job, &st, &train_m, n_train, dim, t0)) < 0 &&
        !status)
        status = fsgd_cli_status(rc);
    fsgd_model_free(&model);
    fsgd_csr_free(&train);
    fsgd_csr_free(&test);
    return status;
}

static int train_command(int argc, char **argv)
{
    fsgd_job_t job;
    int rc = train_job_from_args(&job, argc, argv);
    if (rc != 0)
        return rc == TRAIN_HELP_PRINTED ? 0 : rc;
    fsgd_cli_cleanup_on_signal();
    fsgd_rowfmt_t fmt;
    if ((rc = open_row_format(&job, &fmt)) != 0)
        return rc;
    double t0 = fsgd_clock_s();
    if (job.train.cache[0])
        return train_from_cache(&job, &fmt, fmt.hashed ? &fmt.spec : NULL, t0);
    return train_in_memory(&job, &fmt, t0);
}

/* --out - and devices (/dev/stdout, /dev/null, a FIFO): fsgd_cli_run_streamed. */
int fsgd_cmd_train(int argc, char **argv) { return fsgd_cli_run_streamed(train_command, argc, argv, "train", 1); }
