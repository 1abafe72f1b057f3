/* fsgd predict: score LIBSVM rows with a model file, one score per line, and
 * report metrics of the scores against the file's labels on stderr. */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/dist.h"
#include "fsgd/job.h"
#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/metrics.h"
#include "fsgd/model.h"
#include "fsgd/outfile.h"
#include "fsgd/predict_file.h"
#include "fsgd/rowfmt.h"
#include "fsgd/rowlabel.h"
#include "fsgd/vw.h"

static const char usage_text[] =
    "usage: fsgd predict --model M --data F [--out FILE] [--proba] [--skip-bad] [--row-weights] [--weights] [--quiet]\n"
    "       fsgd predict --brokers HOST:PORT --name JOB [--job-key-file FILE] --data F [...]\n"
    "Scores every row of the LIBSVM file F with the model file M (fsgd train --out). A model\n"
    "trained on raw delimited rows (--format criteo, tsv:..., csv:...) records how it hashed\n"
    "them, and F is read and hashed the same way.\n"
    "A model trained on VW text (--format vw) reads F as VW text with the model's bits, namespaces\n"
    "and crosses, and writes each row's tag after its score (\"score tag\", as vw -p does);\n"
    "--bits and crosses of any format are recorded too. F may be gzip or zstd compressed.\n"
    "  --model M    model file written by fsgd train\n"
    "  --brokers B, --name JOB  instead of --model: the job's newest model on its topic JOB.model\n"
    "               (a running job's too, e.g. fsgd run --follow: its last snapshot and the\n"
    "               updates after it, as fsgd model assemble --partial rebuilds it); the model's\n"
    "               step goes to stderr. --job-key-file: the job's key (fsgd run's topics are\n"
    "               authenticated)\n"
    "  --data F     LIBSVM rows to score ('-' for stdin)\n"
    "  --out FILE   one score per line: the margin x.w (+ bias), or with --proba the\n"
    "               probability of the positive class (logistic models only);\n"
    "               default '-' (stdout; /dev/stdout and /dev/null too). Written to a\n"
    "               temporary file renamed into place at the end: an error leaves an\n"
    "               existing FILE as it was. FILE must be absent or a regular file\n"
    "  --skip-bad   skip malformed rows (counted) instead of stopping at the first\n"
    "  --row-weights  LIBSVM rows may carry a weight, label:weight (fsgd train --row-weights);\n"
    "               read and left out: scores and metrics are unweighted\n"
    "  --weights    write each row's weight after its score (\"score weight [tag]\"): a VW row's\n"
    "               importance, a LIBSVM row's label:weight (implies --row-weights); 1 when\n"
    "               a row has none. Refused for criteo/tsv/csv rows, which carry no weight\n"
    "  --quiet      no metrics on stderr\n"
    "Features the model never saw (index > its dimension) count as zero. Metrics of the\n"
    "scores against the file's labels go to stderr: AUC, logloss and accuracy for\n"
    "classification (margin > 0 predicts the positive class), RMSE for regression.\n";

/* Scores kept for the metrics grow from this many rows. */
#define CHUNK_ROWS 65536

typedef struct predict_args {
    const char *model, *data, *out;
    const char *brokers, *name, *key_file; /* the model from a job's topic instead of a file */
    int proba, skip_bad, quiet, row_weights, weights;
} predict_args_t;


static int parse_args(int argc, char **argv, predict_args_t *a)
{
    memset(a, 0, sizeof *a);
    a->out = "-";
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_text, stdout);
            fsgd_cli_print_exit_codes(stdout);
            return 1;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--model", &missing))) {
            a->model = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--brokers", &missing))) {
            a->brokers = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--name", &missing))) {
            a->name = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--job-key-file", &missing))) {
            a->key_file = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--data", &missing))) {
            a->data = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--out", &missing))) {
            a->out = v;
        } else if (!strcmp(argv[i], "--proba")) {
            a->proba = 1;
        } else if (!strcmp(argv[i], "--skip-bad")) {
            a->skip_bad = 1;
        } else if (!strcmp(argv[i], "--row-weights")) {
            a->row_weights = 1;
        } else if (!strcmp(argv[i], "--weights")) {
            a->weights = a->row_weights = 1; /* LIBSVM's weights are read to be written */
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            a->quiet = 1;
        } else if (missing) {
            fsgd_cli_error("predict: %s needs a value", argv[i]);
            return -1;
        } else {
            fsgd_cli_error("predict: unknown argument '%s' (fsgd predict --help)", argv[i]);
            return -1;
        }
    }
    if (a->model && (a->brokers || a->name)) {
        fsgd_cli_error("predict: --model or --brokers/--name, not both");
        return -1;
    }
    if (!a->model && (!a->brokers != !a->name)) {
        fsgd_cli_error("predict: --brokers and --name go together (the model of job NAME on those brokers)");
        return -1;
    }
    if ((!a->model && !a->brokers) || !a->data) {
        fsgd_cli_error("predict: %s is required (fsgd predict --help)", !a->data ? "--data" : "--model");
        return -1;
    }
    if (!a->model)
        a->model = a->name; /* how messages name the model */
    return 0;
}

static void print_metrics(const fsgd_model_t *m, const char *data, const double *margin, const double *label,
                          size_t n)
{
    fsgd_metrics_t r = fsgd_metrics_compute(m->kind, margin, label, n);
    if (m->kind == FSGD_LOSS_SQUARED) {
        fprintf(stderr, "fsgd predict: %s: %zu rows: rmse %.6f\n", data, n, r.rmse);
        return;
    }
    char auc[64];
    if (isnan(r.auc))
        snprintf(auc, sizeof auc, "n/a (labels have one class)");
    else
        snprintf(auc, sizeof auc, "%.6f", r.auc);
    if (m->kind == FSGD_LOSS_LOGISTIC)
        fprintf(stderr, "fsgd predict: %s: %zu rows: auc %s logloss %.6f accuracy %.6f\n", data, n, auc, r.logloss,
                r.accuracy);
    else
        fprintf(stderr, "fsgd predict: %s: %zu rows: auc %s hinge %.6f accuracy %.6f\n", data, n, auc, r.loss,
                r.accuracy);
}

/* The job key that checks the topic's tags (as fsgd model assemble). */
static int topic_auth(const predict_args_t *a)
{
    fsgd_job_t kj;
    fsgd_job_defaults(&kj);
    kj.train.quiet = !a->key_file; /* no key: nothing to say */
    if (a->key_file)
        snprintf(kj.cluster.job_key_file, sizeof kj.cluster.job_key_file, "%s", a->key_file);
    snprintf(kj.dist.name, sizeof kj.dist.name, "%s", a->name);
    int rc = dcli_kafka(&kj, "predict"); /* none: none from an earlier command either (Python) */
    return rc ? rc : dcli_auth(&kj, "predict");
}

/* One run of fsgd predict: the model, its rows (fsgd/predict_file.h), where
 * the scores go, and the scores and labels kept for the metrics. */
typedef struct predict_run {
    const predict_args_t *a;
    fsgd_model_t m;
    int streamed; /* --out "-", /dev/stdout, /dev/null: written directly */
    fsgd_predict_t *rows;
    fsgd_outfile_t of;
    FILE *out;
    double *margin, *label;
    size_t n, cap;
} predict_run_t;

/* The model, from --model or the job's topic; --proba needs a logistic one.
 * 0 or the exit status (error printed). */
static int open_model(const predict_args_t *a, fsgd_model_t *m)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    int rc, prc;
    if (a->brokers) {
        if ((prc = topic_auth(a)) != 0)
            return prc;
        uint64_t step = 0;
        fsgd_bus_t *bus = dcli_bus(a->brokers, "predict");
        if (!bus)
            return FSGD_EXIT_BROKER;
        rc = fsgd_model_assemble_topic(bus, a->name, 0, m, &step, err, sizeof err);
        fsgd_bus_destroy(bus);
        if (rc == 0 && !a->quiet)
            fprintf(stderr, "fsgd predict: the model of job %s at step %llu, from %s.model\n", a->name,
                    (unsigned long long)step, a->name);
        if (rc == 0 && !a->quiet && err[0]) /* messages of another key, or replayed, skipped */
            fprintf(stderr, "fsgd predict: %s.model: %s\n", a->name, err);
    } else {
        rc = fsgd_model_load(m, a->model, err, sizeof err);
    }
    if (rc < 0) {
        fsgd_cli_error("%s", err);
        return fsgd_cli_status(rc);
    }
    if (a->proba && m->kind != FSGD_LOSS_LOGISTIC) {
        fsgd_cli_error("predict: --proba needs a logistic model; %s is %s", a->model, fsgd_loss_name(m->kind));
        fsgd_model_free(m);
        return FSGD_EXIT_USAGE;
    }
    return 0;
}

/* The rows, read as the model's input says (fsgd/predict_file.h: a
 * delimited or VW file is read whole here). 0 or the exit status (error
 * printed). */
static int open_rows(predict_run_t *p)
{
    const predict_args_t *a = p->a;
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    const fsgd_predict_opts_t o = {.skip_bad = a->skip_bad, .row_weights = a->row_weights, .weights = a->weights};
    int rc = fsgd_predict_open(&p->m, a->data, &o, &p->rows, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("predict: %s", err);
        return fsgd_cli_status(rc);
    }
    return 0;
}

/* Where the scores go: a temporary file renamed over --out only when every
 * row was scored (a parse error half way leaves an existing file intact),
 * or the stream itself. 0 or the exit status (error printed). */
static int open_scores(predict_run_t *p)
{
    const char *path = p->a->out;
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    p->out = stdout;
    if (!p->streamed) {
        int rc = fsgd_outfile_open(&p->of, path, err, sizeof err);
        if (rc == 0 && !(p->out = fsgd_outfile_stream(&p->of, err, sizeof err))) {
            fsgd_outfile_abort(&p->of);
            rc = FSGD_E_IO;
        }
        if (rc < 0) {
            fsgd_cli_error("predict: %s", err);
            return fsgd_cli_status(rc);
        }
    } else if (!fsgd_cli_out_is_stdout(path) && !(p->out = fopen(path, "w"))) {
        fsgd_cli_error("predict: cannot write to %s: %s", path, strerror(errno));
        return FSGD_EXIT_IO;
    }
    return 0;
}

/* Room for n + more scores and labels; 0 or -1 (out of memory). */
static int reserve_scores(predict_run_t *p, size_t more)
{
    if (p->n + more <= p->cap)
        return 0;
    size_t nc = p->cap ? p->cap : CHUNK_ROWS;
    while (nc < p->n + more)
        nc *= 2;
    double *nm = realloc(p->margin, nc * sizeof *nm);
    if (nm)
        p->margin = nm;
    double *nl = realloc(p->label, nc * sizeof *nl);
    if (nl)
        p->label = nl;
    if (!nm || !nl)
        return -1;
    p->cap = nc;
    return 0;
}

/* A weight as the shortest text that reads back to it (2.5, 0.1, not
 * 0.10000000000000001). */
static void put_weight(FILE *out, double w)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", w);
    if (strtod(buf, NULL) != w)
        snprintf(buf, sizeof buf, "%.17g", w);
    fprintf(out, " %s", buf);
}

/* One row: its score written (with --weights its weight, and a VW row's
 * tag after it, as vw -p writes them), margin and label kept for the
 * metrics. */
static int put_row(void *ctx, const fsgd_predict_row_t *row)
{
    predict_run_t *p = ctx;
    if (reserve_scores(p, 1) < 0)
        return FSGD_E_NOMEM;
    const double s = row->margin;
    p->margin[p->n] = s;
    p->label[p->n] = row->label;
    p->n++;
    /* σ(s) computed without overflow for large |s| */
    double prob = s >= 0 ? 1 / (1 + exp(-s)) : exp(s) / (1 + exp(s));
    fprintf(p->out, "%.17g", p->a->proba ? prob : s);
    if (row->weight)
        put_weight(p->out, *row->weight);
    if (row->tag_len)
        fprintf(p->out, " %.*s", (int)row->tag_len, row->tag);
    fputc('\n', p->out);
    return 0;
}

/* Every row scored. 0 or the exit status (error printed). */
static int score_rows(predict_run_t *p)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    int rc = fsgd_predict_run(p->rows, put_row, p, err, sizeof err);
    if (rc == FSGD_E_NOMEM) {
        fsgd_cli_error("predict: out of memory after %zu rows", p->n);
        return FSGD_EXIT_INTERNAL;
    }
    if (rc < 0) {
        fsgd_cli_error("predict: %s", err);
        return fsgd_cli_status(rc);
    }
    return 0;
}

/* The scores' file committed (or dropped after an error, status), the
 * skipped rows and the metrics said. The exit status. */
static int finish_scores(predict_run_t *p, int status)
{
    const predict_args_t *a = p->a;
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    int rc;
    const fsgd_libsvm_stats_t *st = p->rows ? fsgd_predict_skipped(p->rows) : NULL;
    if (status == 0 && st && st->bad_rows) {
        fprintf(stderr, "fsgd predict: %s: skipped %llu malformed rows; first:\n", a->data,
                (unsigned long long)st->bad_rows);
        for (uint64_t i = 0; i < st->bad_rows && i < FSGD_LIBSVM_BAD_KEPT; i++)
            fprintf(stderr, "  %s\n", st->first_bad[i]);
    }
    FILE *out = p->out;
    if (p->streamed && (fflush(out) != 0 || ferror(out) || (out != stdout && fclose(out) != 0))) {
        fsgd_cli_error("predict: write to %s failed: %s", fsgd_cli_out_is_stdout(a->out) ? "stdout" : a->out,
                       strerror(errno));
        status = FSGD_EXIT_IO;
    } else if (!p->streamed && status != 0) {
        fsgd_outfile_abort(&p->of);
    } else if (!p->streamed && (rc = fsgd_outfile_commit(&p->of, err, sizeof err)) < 0) {
        fsgd_cli_error("predict: %s", err);
        status = fsgd_cli_status(rc);
    }
    const size_t n = p->n;
    double lo, hi; /* labels of any two values, as fsgd train maps them: the larger is the positive class */
    if (status == 0 && !a->quiet && n > 0 && p->m.kind != FSGD_LOSS_SQUARED &&
        fsgd_rowlabel_map_two(p->label, n, &lo, &hi))
        fprintf(stderr, "fsgd predict: %s: labels {%g, %g}: %g is the positive class, %g the negative\n", a->data, lo,
                hi, hi, lo);
    if (status == 0 && !a->quiet && n > 0)
        print_metrics(&p->m, a->data, p->margin, p->label, n);
    if (status == 0 && n == 0 && !a->quiet)
        fprintf(stderr, "fsgd predict: %s: no rows\n", a->data);
    return status;
}

/* The checks of the output path before anything is read; 0 or the exit status. */
static int check_out_path(const predict_args_t *a)
{
    const fsgd_cli_path_t wr[] = {{"--out", a->out}};
    const fsgd_cli_path_t rd[] = {{"--model", a->model}, {"--data", a->data}};
    int rc = fsgd_cli_check_distinct("predict", wr, 1, rd, 2);
    if (rc != 0)
        return rc;
    const char *outs[] = {a->out};
    if ((rc = fsgd_cli_check_outputs("predict", outs, 1)) != 0)
        return rc;
    fsgd_cli_cleanup_on_signal();
    return 0;
}

int fsgd_cmd_predict(int argc, char **argv)
{
    predict_args_t a;
    int prc = parse_args(argc, argv, &a);
    if (prc != 0)
        return prc > 0 ? 0 : FSGD_EXIT_USAGE;
    predict_run_t p = {.a = &a, .streamed = fsgd_cli_out_is_stream(a.out)};
    if (!p.streamed && (prc = check_out_path(&a)) != 0)
        return prc;
    if ((prc = open_model(&a, &p.m)) != 0)
        return prc;
    int status = open_rows(&p);
    if (status == 0)
        status = open_scores(&p);
    if (status == 0) {
        /* Scores in the C locale whatever the process locale (thread-local switch). */
        locale_t c_loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        locale_t old_loc = c_loc ? uselocale(c_loc) : (locale_t)0;
        status = finish_scores(&p, score_rows(&p));
        if (c_loc) {
            uselocale(old_loc);
            freelocale(c_loc);
        }
    }
    free(p.margin);
    free(p.label);
    fsgd_predict_close(p.rows);
    fsgd_model_free(&p.m);
    return status;
}
