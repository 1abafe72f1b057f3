/* fsgd train's job on files (fsgd/train_files.h). */
#include "fsgd/train_files.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fsgd/clock.h"
#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "fsgd/outfile.h"
#include "fsgd/rowfmt.h"
#include "fsgd/rowlabel.h"
#include "train_cache.h"
#include "fsgd/vw.h"

/* A run in progress: the hooks, the row format, what the loads found. */
typedef struct files_ctx {
    fsgd_train_params_t *job;
    const fsgd_train_files_hooks_t *hooks;
    fsgd_train_files_run_t *r;
    fsgd_rowfmt_t fmt;
    double feature_share; /* the training file's features over its features and crosses (1: none) */
    int input_set;        /* model.input written: from then on a caller's thread may be writing the model */
} files_ctx_t;

static void note(const files_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const files_ctx_t *c, const char *fmt, ...)
{
    if (!c->hooks || !c->hooks->note)
        return;
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->hooks->note(c->hooks->note_ctx, line);
}

/* The training file's hashed columns: said, and kept for the metrics JSON. */
static void hashed_columns(files_ctx_t *c, const char *path, uint64_t rows, unsigned bits, uint64_t used,
                           uint64_t collided, const char *what)
{
    if (!c->job->quiet)
        note(c, "fsgd: %s: %llu rows hashed into 2^%u columns: %llu columns used, %llu of them shared by 2+ "
                "distinct %s (%.2f%%)",
             path, (unsigned long long)rows, bits, (unsigned long long)used, (unsigned long long)collided, what,
             used ? 100.0 * (double)collided / (double)used : 0.0);
    c->r->hash_used = used;
    c->r->hash_collided = collided;
}

/* VW text (fsgd/vw.h): its importance weights and tags are read beside
 * the rows; with is_train, the hashed columns' use said and kept, and the
 * share of features among features and crosses (lr auto). */
static int load_vw(files_ctx_t *c, const char *path, int is_train, fsgd_csr_t *out, fsgd_vw_extra_t *vwx,
                   fsgd_libsvm_stats_t *st, char *err, size_t errsz)
{
    const fsgd_train_params_t *job = c->job;
    fsgd_rowfmt_t vf;
    int rc = fsgd_rowfmt_init(&vf, job->format, job->hash_bits, job->skip_bad, err, errsz);
    vwx->count_slots = is_train;
    /* binary rows until a value other than 1 (half the memory of rows of crosses) */
    if (rc == 0 && !out->col && fsgd_csr_init_binary(out, 0, 0) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
    if (rc == 0)
        rc = fsgd_vw_load(path, &vf.vw_spec, job->skip_bad, out, vwx, st, err, errsz);
    if (rc == 0 && is_train && vwx->slots_used) /* features and crosses in 2^bits columns, as for delimited rows */
        hashed_columns(c, path, out->n_rows, vf.vw_spec.bits, vwx->slots_used, vwx->slots_collided,
                       "features or crosses");
    if (rc == 0 && is_train && vwx->cross_entries)
        c->feature_share = (double)vwx->feature_entries / (double)(vwx->feature_entries + vwx->cross_entries);
    return rc;
}

/* A delimited file (criteo, tsv:, csv:): its hashed columns said and
 * counted for the summary. */
static int load_delim(files_ctx_t *c, const char *path, int is_train, fsgd_csr_t *out, char *err, size_t errsz)
{
    fsgd_delim_stats_t ds;
    int rc = fsgd_delim_load(path, &c->fmt.spec, is_train, out, &ds, err, errsz);
    if (rc == 0 && is_train) {
        hashed_columns(c, path, ds.rows, c->fmt.spec.bits, ds.slots_used, ds.slots_collided, "values");
        if (ds.cross_entries)
            c->feature_share = (double)ds.feature_entries / (double)(ds.feature_entries + ds.cross_entries);
    }
    return rc;
}

/* A LIBSVM file in the job's format as folded (fsgd_train_fold_input: its
 * bits, fields and crosses), parsed on the job's threads; with is_train
 * its hashed columns said and counted, as for hashed columns, and the
 * share of features among features and crosses (lr auto). */
static int load_libsvm(files_ctx_t *c, const char *path, int is_train, fsgd_libsvm_opts_t *opts, fsgd_csr_t *out,
                       fsgd_libsvm_stats_t *st, char *err, size_t errsz)
{
    const fsgd_train_params_t *job = c->job;
    fsgd_rowfmt_t lf;
    int rc = fsgd_rowfmt_init(&lf, job->format, job->hash_bits, job->skip_bad, err, errsz);
    if (rc == 0) {
        opts->hash_bits = lf.opts.hash_bits;
        opts->fields = lf.opts.fields;
        opts->slots = is_train ? fsgd_libsvm_slots_new(opts->hash_bits) : NULL;
        /* parsing is most of the load: split it over the job's threads */
        rc = fsgd_libsvm_load_threads(path, opts, job->threads, out, st, err, errsz);
        free(opts->slots);
        opts->slots = NULL;
    }
    if (rc == 0 && is_train && st->slots_used)
        hashed_columns(c, path, st->rows, opts->hash_bits, st->slots_used, st->slots_collided,
                       "indices or crosses");
    if (rc == 0 && is_train && st->cross_entries)
        c->feature_share = (double)st->feature_entries / (double)(st->feature_entries + st->cross_entries);
    return rc;
}

/* Labels that do not fit the model are an error before any training:
 * {1, 2} for logistic would train "silently" on one class. Any two values
 * are taken as LIBLINEAR takes them: the larger is the positive class. */
static int check_labels(files_ctx_t *c, const char *path, int is_train, fsgd_csr_t *out, char *err, size_t errsz)
{
    const fsgd_train_params_t *job = c->job;
    fsgd_label_set_t ls = {0};
    fsgd_label_set_add(&ls, out->label, out->n_rows);
    double lo, hi;
    char why[512];
    if (fsgd_loss_check_labels(job->model, &ls, why, sizeof why) == 0)
        return 0;
    if (job->model == FSGD_LOSS_SQUARED || !fsgd_rowlabel_map_two(out->label, out->n_rows, &lo, &hi))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: %s", path, why);
    if (!job->quiet || is_train)
        note(c, "fsgd: %s: labels {%g, %g}: %g is the positive class (+1), %g the negative (-1)", path, lo, hi, hi,
             lo);
    return 0;
}

/* Importance weights (VW rows, LIBSVM label:weight) and class weights ride
 * in the training rows' labels (fsgd/rowlabel.h); test rows are scored
 * unweighted. */
static int weigh_rows(files_ctx_t *c, const char *path, fsgd_csr_t *out, const double *row_w, char *err, size_t errsz)
{
    const fsgd_train_params_t *job = c->job;
    double pos = 1, neg = 1;
    int rc = fsgd_train_class_weight(job, &pos, &neg, err, errsz);
    if (rc < 0)
        return rc;
    if (!row_w && pos == 1 && neg == 1)
        return 0;
    if (job->model == FSGD_LOSS_SQUARED)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "%s: row and class weights are for classification models (logistic, svm), not linear",
                            path);
    if (strcmp(job->backend, "cpu")) /* the cuda backend reads a label's sign only */
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "%s: row and class weights are applied by the cpu backend: use --backend cpu", path);
    size_t dropped = fsgd_rowlabel_weigh(out, 0, row_w, pos, neg);
    if (!job->quiet)
        note(c, "fsgd: %s: rows weighted (%s%s%s)%s", path, row_w ? "importance" : "",
             row_w && (pos != 1 || neg != 1) ? " and " : "", pos != 1 || neg != 1 ? "class weights" : "",
             dropped ? "; rows of weight 0 left out" : "");
    return 0;
}

/* One file of rows in the job's format into out (with is_train, weighed). */
static int load(files_ctx_t *c, const char *path, int is_train, fsgd_csr_t *out, char *err, size_t errsz)
{
    const fsgd_train_params_t *job = c->job;
    /* binary rows held without their values: fsgd train reads such batches */
    fsgd_libsvm_weights_t lw = {0}; /* LIBSVM label:weight (row_weights) */
    fsgd_libsvm_opts_t opts = {.skip_bad = job->skip_bad,
                               .binary = 1,
                               .hash_bits = (unsigned)job->hash_bits,
                               .row_weights = job->row_weights,
                               .weights = is_train ? &lw : NULL};
    fsgd_libsvm_stats_t st = {0};
    fsgd_vw_extra_t vwx = {0};
    int rc;
    if (!strcmp(job->format, "vw") || !strncmp(job->format, "vw:", 3))
        rc = load_vw(c, path, is_train, out, &vwx, &st, err, errsz);
    else if (c->fmt.hashed)
        rc = load_delim(c, path, is_train, out, err, errsz);
    else
        rc = load_libsvm(c, path, is_train, &opts, out, &st, err, errsz);
    if (rc == 0 && st.bad_rows) {
        note(c, "fsgd: %s: skipped %llu malformed rows; first:", path, (unsigned long long)st.bad_rows);
        for (uint64_t i = 0; i < st.bad_rows && i < FSGD_LIBSVM_BAD_KEPT; i++)
            note(c, "  %s", st.first_bad[i]);
    }
    if (rc == 0)
        rc = check_labels(c, path, is_train, out, err, errsz);
    /* one weight a row from either reader (VW importance, LIBSVM label:weight) */
    const double *row_w = vwx.any_weight ? vwx.weight : lw.any && lw.n == out->n_rows ? lw.w : NULL;
    if (rc == 0 && is_train)
        rc = weigh_rows(c, path, out, row_w, err, errsz);
    fsgd_vw_extra_free(&vwx);
    fsgd_libsvm_weights_free(&lw);
    return rc;
}

/* The row format (fsgd/rowfmt.h, as for the distributed roles): a hashed
 * one has 2^bits columns, so dim must be 0 or that. */
static int open_row_format(files_ctx_t *c, char *err, size_t errsz)
{
    fsgd_train_params_t *job = c->job;
    int rc = fsgd_train_fold_input(job, err, errsz);
    if (rc == FSGD_E_PARSE || rc == FSGD_E_IO) /* a cross naming a column the file lacks; its header unreadable */
        return rc;
    if (rc < 0 || fsgd_rowfmt_init(&c->fmt, job->format, job->hash_bits, job->skip_bad, err, errsz) < 0 ||
        fsgd_rowfmt_dim(&c->fmt, job->dim, &job->dim, err, errsz) < 0)
        return FSGD_E_ARG;
    /* label:weight is LIBSVM's (VW rows carry their importance), and the
     * weights ride in rows held in memory, as VW importance does */
    if (job->row_weights && (c->fmt.hashed || c->fmt.vw || job->cache[0]))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "row_weights: label:weight is read from libsvm rows held in memory (format %s%s)",
                            job->format[0] ? job->format : "libsvm", job->cache[0] ? ", not streamed from --cache" : "");
    if (c->fmt.opts.fields.n_terms && job->cache[0]) /* the cache's reader hashes indices, it does not cross */
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "interactions: crosses of LIBSVM fields are built on rows in memory, not streamed from "
                            "--cache");
    return 0;
}

/* --init, before any data is read: loads the model to start from and
 * checks its input format (the trainer cannot), loss and intercept. */
static int load_init(files_ctx_t *c, fsgd_model_t *init, char *err, size_t errsz)
{
    const fsgd_train_params_t *job = c->job;
    char why[1024], input[FSGD_MODEL_INPUT_MAX];
    int rc = fsgd_model_load(init, job->init, why, sizeof why);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "init: %s", why);
    fsgd_rowfmt_input(&c->fmt, input, sizeof input);
    if (strcmp(init->input, input))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "init: %s was trained on input %s, this job reads %s: its weights would belong to other "
                            "features",
                            job->init, init->input[0] ? init->input : "libsvm", input[0] ? input : "libsvm");
    if (fsgd_train_check_init(job, init->dim, init, why, sizeof why) < 0) /* dim: see init_dim */
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "init: %s: %s", job->init, why);
    const fsgd_model_state_kind_t want = fsgd_train_state_kind(job), have = init->state.kind;
    char said[160];
    if (have == want)
        snprintf(said, sizeof said, "and its %s state (%llu keys, step %llu)", fsgd_model_state_name(have),
                 (unsigned long long)init->state.n, (unsigned long long)init->state.step);
    else if (have == FSGD_MODEL_STATE_NONE)
        snprintf(said, sizeof said, "weights only (no optimizer state in the file: --save-state writes it)");
    else
        snprintf(said, sizeof said, "weights only: its state is %s's, this run trains %s",
                 fsgd_model_state_name(have), fsgd_model_state_name(want));
    if (!job->quiet)
        note(c, "fsgd: starting from %s: %llu nonzero weights of %llu, %s", job->init,
             (unsigned long long)fsgd_model_nnz(init), (unsigned long long)init->dim, said);
    return 0;
}

/* --init, once the data is read: without --dim the model's dim stands, so a
 * day of data that lacks the highest features continues the same model;
 * data beyond it, or another --dim, is refused. */
static int init_dim(const fsgd_train_params_t *job, const fsgd_model_t *init, const fsgd_csr_t *train, uint64_t *dim,
                    char *err, size_t errsz)
{
    if (!job->dim && train->max_col <= init->dim)
        *dim = init->dim;
    if (*dim != init->dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "init: %s has dim %llu, this job %llu (%s)", job->init,
                            (unsigned long long)init->dim, (unsigned long long)*dim,
                            job->dim ? "dim" : "the data's largest feature index");
    return 0;
}

/* Rows in memory: --init's model, the training rows, the test rows (--test,
 * or a fraction held out of --data) and the model's dim. */
static int load_rows(files_ctx_t *c, fsgd_model_t *init, fsgd_csr_t *train, fsgd_csr_t *test, char *err,
                     size_t errsz)
{
    fsgd_train_params_t *job = c->job;
    uint64_t *dim = &c->r->dim;
    int rc;
    if (job->init[0] && (rc = load_init(c, init, err, errsz)) != 0)
        return rc;
    if ((rc = load(c, job->data, 1, train, err, errsz)) != 0)
        return rc;
    job->lr_auto_share = c->feature_share;
    if (job->test[0]) {
        if ((rc = load(c, job->test, 0, test, err, errsz)) != 0)
            return rc;
    } else if (job->test_fraction > 0 && fsgd_train_split_test(train, job->test_fraction, job->seed, test) < 0) {
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory splitting the data");
    }
    *dim = job->dim ? job->dim : train->max_col;
    if (job->init[0] && (rc = init_dim(job, init, train, dim, err, errsz)) != 0)
        return rc;
    if (train->max_col > *dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s has feature index %llu > dim %llu", job->data,
                            (unsigned long long)train->max_col, (unsigned long long)*dim);
    if (!job->quiet)
        note(c, "fsgd: %zu train rows, %zu test rows%s, %llu features, %zu nonzeros; loaded in %.2fs", train->n_rows,
             test->n_rows,
             job->test[0] || !test->n_rows ? "" : " (held out of --data: no --test; --test-fraction 0 keeps all)",
             (unsigned long long)*dim, train->nnz, fsgd_clock_s() - c->r->t0);
    return 0;
}

/* The model's input spec, once: the caller may start writing the model
 * as soon as it is set (FSGD_TRAIN_MODEL_READY), so it is never written
 * again under that writer. */
static void set_input(files_ctx_t *c)
{
    if (c->input_set)
        return;
    fsgd_rowfmt_input(&c->fmt, c->r->model.input, sizeof c->r->model.input);
    c->input_set = 1;
}

/* fsgd_train's progress, with the model's input spec set before the
 * caller may start writing the model (FSGD_TRAIN_MODEL_READY). */
static void on_progress(void *p, const fsgd_train_stats_t *s, int end_of_epoch)
{
    files_ctx_t *c = p;
    if (end_of_epoch == FSGD_TRAIN_MODEL_READY)
        set_input(c);
    if (c->hooks && c->hooks->train.progress)
        c->hooks->train.progress(c->hooks->train.ctx, s, end_of_epoch);
}

/* Trains on rows in memory; the training metrics on the first rows. */
static int train_in_memory(files_ctx_t *c, char *err, size_t errsz)
{
    fsgd_train_params_t *job = c->job;
    fsgd_train_files_run_t *r = c->r;
    fsgd_model_t init = {0};
    fsgd_csr_t train = {0}, test = {0};
    int rc = load_rows(c, &init, &train, &test, err, errsz);
    r->n_train = train.n_rows;
    r->n_test = test.n_rows;
    /* only the rows scored for the training metrics are read after training */
    fsgd_train_input_t in = {.source = FSGD_TRAIN_ROWS_OWNED, .owned_rows = &train,
                             .keep_rows = FSGD_TRAIN_FILES_METRICS_ROWS, .owned_test = &test, .dim = r->dim};
    fsgd_train_hooks_t hooks = {.progress = on_progress, .ctx = c};
    char why[1024];
    if (rc == 0 && (rc = fsgd_train(job, &in, job->init[0] ? &init : NULL, &r->model, &r->st, &hooks, why,
                                    sizeof why)) < 0)
        fsgd_err_fmt(err, errsz, rc, "training failed: %s", why);
    fsgd_model_free(&init);
    if (rc == 0) {
        set_input(c);
        fsgd_csr_t head = train;
        if (head.n_rows > FSGD_TRAIN_FILES_METRICS_ROWS) {
            head.n_rows = FSGD_TRAIN_FILES_METRICS_ROWS;
            head.nnz = (size_t)head.row_ptr[FSGD_TRAIN_FILES_METRICS_ROWS];
        }
        fsgd_train_evaluate(&r->model, &head, &r->train_m);
    }
    fsgd_csr_free(&train);
    fsgd_csr_free(&test);
    return rc;
}

/* fsgd train --cache: the first pass writes the cache (holdout and test
 * split set aside in memory and in the cache's own sections), or a cache
 * made from the same input is reused without reading the text; every epoch
 * streams from it. The training rows are never all in memory, so they are
 * not scored at the end. */
static int train_from_cache(files_ctx_t *c, char *err, size_t errsz)
{
    fsgd_train_params_t *job = c->job;
    fsgd_train_files_run_t *r = c->r;
    const fsgd_delim_spec_t *spec = c->fmt.hashed ? &c->fmt.spec : NULL;
    fsgd_csr_t hold = {0}, test = {0};
    int rc = 0;
    r->streamed = 1;
    r->train_m = (fsgd_metrics_t){.auc = NAN, .logloss = NAN, .accuracy = NAN, .rmse = NAN, .loss = NAN};
    if (job->shards > 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "shards %d: fsgd train simulates shards on rows in memory, not streamed from a cache "
                            "(--cache): drop --cache or use --shards 1",
                            job->shards);
    if (job->test[0] && (rc = load(c, job->test, 0, &test, err, errsz)) != 0)
        return rc;
    fsgd_train_cache_result_t cache;
    rc = fsgd_train_cache_prepare(job, spec, job->test[0] ? 0 : job->test_fraction, &hold, &test, &cache, err, errsz);
    if (cache.rewritten[0])
        note(c, "fsgd: %s: rewriting", cache.rewritten);
    if (cache.skipped_rows)
        note(c, "fsgd: %s: skipped %llu malformed rows", job->data, (unsigned long long)cache.skipped_rows);
    job->lr_auto_share = cache.feature_share;
    if (rc == 0) {
        uint64_t dim = job->dim ? job->dim : (cache.max_col > hold.max_col ? cache.max_col : hold.max_col);
        r->dim = dim;
        r->n_train = (size_t)cache.rows;
        r->n_test = test.n_rows;
        r->cache_reused = cache.reused;
        /* said even with --quiet: whether the text was read is worth knowing */
        if (cache.reused)
            note(c, "fsgd: reusing cache %s (written from %s, unchanged): %llu train rows, %zu holdout and %zu test "
                    "rows, %llu features; opened in %.2fs",
                 job->cache, job->data, (unsigned long long)cache.rows, hold.n_rows, test.n_rows,
                 (unsigned long long)dim, fsgd_clock_s() - r->t0);
        else if (!job->quiet)
            note(c, "fsgd: %llu train rows cached in %s, %zu holdout and %zu test rows in memory, %llu features; "
                    "first pass %.2fs",
                 (unsigned long long)cache.rows, job->cache, hold.n_rows, test.n_rows, (unsigned long long)dim,
                 fsgd_clock_s() - r->t0);
        fsgd_train_input_t in = {.source = FSGD_TRAIN_CACHE, .cache = job->cache, .hold = &hold, .test = &test,
                                 .dim = dim};
        fsgd_train_hooks_t hooks = {.progress = on_progress, .ctx = c};
        char why[1024];
        if ((rc = fsgd_train(job, &in, NULL, &r->model, &r->st, &hooks, why, sizeof why)) < 0)
            fsgd_err_fmt(err, errsz, rc, "training failed: %s", why);
        else
            set_input(c); /* delimited, hashed LIBSVM or VW */
    }
    fsgd_csr_free(&hold);
    fsgd_csr_free(&test);
    return rc;
}

/* The cache is the one file a run writes: it never replaces an input. */
static int check_cache_path(const fsgd_train_params_t *job, char *err, size_t errsz)
{
    const struct {
        const char *key, *path;
    } ins[] = {{"data", job->data}, {"test", job->test}, {"init", job->init}, {"job file", job->job_file}};
    for (size_t i = 0; job->cache[0] && i < sizeof ins / sizeof ins[0]; i++)
        if (ins[i].path[0] && fsgd_outfile_same(job->cache, ins[i].path))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "cache '%s' is the same file as %s '%s': an output never replaces an input; name "
                                "another cache",
                                job->cache, ins[i].key, ins[i].path);
    return 0;
}

int fsgd_train_files(fsgd_train_params_t *job, const fsgd_train_files_hooks_t *hooks, fsgd_train_files_run_t *r, char *err,
                     size_t errsz)
{
    memset(r, 0, sizeof *r);
    files_ctx_t c = {.job = job, .hooks = hooks, .r = r, .feature_share = 1};
    int rc = check_cache_path(job, err, errsz);
    if (rc == 0)
        rc = open_row_format(&c, err, errsz);
    if (rc < 0)
        return rc;
    r->t0 = fsgd_clock_s();
    return job->cache[0] ? train_from_cache(&c, err, errsz) : train_in_memory(&c, err, errsz);
}

void fsgd_train_files_free(fsgd_train_files_run_t *r)
{
    fsgd_model_free(&r->model);
}
