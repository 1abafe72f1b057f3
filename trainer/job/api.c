/* fsgd/api.h: the bindings' API: models as opaque handles, and training
 * on a binding's CSR arrays through fsgd_train. */
#include "fsgd/api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/loss.h"
#include "fsgd/predict_file.h"
#include "fsgd/rowlabel.h"
#include "fsgd/strategy.h"
#include "fsgd/train.h"
#include "fsgd/train_files.h"

int fsgd_api_version(void)
{
    return FSGD_API_VERSION;
}

int fsgd_api_model_load(const char *path, fsgd_model_t **out, char *err, size_t errsz)
{
    *out = NULL;
    fsgd_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    int rc = fsgd_model_load(m, path, err, errsz);
    if (rc < 0) {
        fsgd_model_free(m);
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int fsgd_api_model_kind(const fsgd_model_t *m)
{
    return (int)m->kind;
}

uint64_t fsgd_api_model_dim(const fsgd_model_t *m)
{
    return m->dim;
}

int fsgd_api_model_has_bias(const fsgd_model_t *m)
{
    return m->has_bias;
}

float fsgd_api_model_bias_value(const fsgd_model_t *m)
{
    return m->bias;
}

const float *fsgd_api_model_weights(const fsgd_model_t *m)
{
    return m->w;
}

const char *fsgd_api_model_input(const fsgd_model_t *m)
{
    return m->input;
}

void fsgd_api_model_free(fsgd_model_t *m)
{
    if (!m)
        return;
    fsgd_model_free(m);
    free(m);
}

int fsgd_api_model_encode(const fsgd_model_t *m, void **out, size_t *len, char *err, size_t errsz)
{
    uint8_t *buf = NULL;
    *out = NULL;
    *len = 0;
    int rc = fsgd_model_encode(m, &buf, len, err, errsz);
    if (rc < 0)
        return rc;
    *out = buf;
    return 0;
}

/* Margins collected for fsgd_api_model_score_file. */
typedef struct api_scores {
    double *v;
    size_t n, cap;
} api_scores_t;

static int api_keep_score(void *ctx, const fsgd_predict_row_t *row)
{
    api_scores_t *sc = ctx;
    if (sc->n == sc->cap) {
        size_t nc = sc->cap ? 2 * sc->cap : 4096;
        double *nv = realloc(sc->v, nc * sizeof *nv);
        if (!nv)
            return FSGD_E_NOMEM;
        sc->v = nv;
        sc->cap = nc;
    }
    sc->v[sc->n++] = row->margin;
    return 0;
}

int fsgd_api_model_score_file(const fsgd_model_t *m, const char *path, int skip_bad, double **margins, size_t *n,
                              char *err, size_t errsz)
{
    *margins = NULL;
    *n = 0;
    fsgd_predict_t *rows;
    const fsgd_predict_opts_t o = {.skip_bad = skip_bad};
    FSGD_TRY(fsgd_predict_open(m, path, &o, &rows, err, errsz));
    api_scores_t sc = {0};
    int rc = fsgd_predict_run(rows, api_keep_score, &sc, err, errsz);
    if (rc == FSGD_E_NOMEM)
        rc = fsgd_err_fmt(err, errsz, rc, "%s: out of memory after %zu rows", path, sc.n);
    fsgd_predict_close(rows);
    if (rc < 0) {
        free(sc.v);
        return rc;
    }
    *margins = sc.v;
    *n = sc.n;
    return 0;
}

void fsgd_api_buffer_free(void *p)
{
    free(p);
}

struct fsgd_api_train {
    fsgd_job_t job;
    fsgd_csr_t rows, test;
    double *weight; /* one a training row, or NULL */
    size_t n_weight;
    int have_rows, have_test, ran;
    fsgd_train_stats_t stats;
    size_t n_train; /* training rows after the split */
    uint64_t dim;
    int files;      /* fsgd_api_train_new_files: the job's data and test are files */
    char *metrics;  /* files: the run's metrics JSON */
    size_t metrics_len;
};

int fsgd_api_train_new(fsgd_api_train_t **out, char *err, size_t errsz)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    fsgd_job_t *job = &(*out)->job;
    fsgd_job_train_defaults(job);
    long cores = sysconf(_SC_NPROCESSORS_ONLN); /* fsgd train's default */
    job->train.threads = cores > 0 ? (int)cores : 1;
    /* what messages name the rows by; no file is ever opened */
    snprintf(job->train.data, sizeof job->train.data, "arrays");
    return 0;
}

int fsgd_api_train_new_files(fsgd_api_train_t **out, char *err, size_t errsz)
{
    FSGD_TRY(fsgd_api_train_new(out, err, errsz));
    (*out)->files = 1;
    (*out)->job.train.data[0] = '\0';
    return 0;
}

/* The job fields a file would give: the arrays stand for them. */
static int api_file_keys_same(const fsgd_job_t *a, const fsgd_job_t *b)
{
    return !strcmp(a->train.format, b->train.format) && !strcmp(a->train.cache, b->train.cache) &&
           !strcmp(a->train.init, b->train.init) && a->train.hash_bits == b->train.hash_bits &&
           !strcmp(a->train.interactions, b->train.interactions);
}

int fsgd_api_train_set(fsgd_api_train_t *t, const char *key, const char *value, char *err, size_t errsz)
{
    fsgd_job_t before = t->job;
    int rc = !strcmp(key, "job") ? fsgd_job_load_yaml(&t->job, value, err, errsz)
                                 : fsgd_job_set(&t->job, key, value, err, errsz);
    /* a job file's outputs are the caller's to write; for arrays its data
     * and test are the arrays */
    memcpy(t->job.train.out, before.train.out, sizeof t->job.train.out);
    memcpy(t->job.train.metrics_json, before.train.metrics_json, sizeof t->job.train.metrics_json);
    if (!t->files) {
        memcpy(t->job.train.data, before.train.data, sizeof t->job.train.data);
        memcpy(t->job.train.test, before.train.test, sizeof t->job.train.test);
    }
    if (rc == 0 && !t->files && !api_file_keys_same(&before, &t->job))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                          "%s: rows given as arrays are numeric columns already: format, hash_bits, interactions, "
                          "cache and init are for rows read from files (fsgd train)",
                          key);
    if (rc < 0)
        t->job = before;
    return rc;
}

/* A caller's CSR arrays, as fsgd_api_train_data takes them. */
typedef struct api_arrays {
    size_t n_rows;
    const int64_t *row_ptr;
    const uint32_t *col;
    const double *val, *label;
} api_arrays_t;

/* Copies a caller's CSR arrays into m, checked: row_ptr from 0 and never
 * decreasing, columns strictly increasing within a row, finite values and
 * labels. Rows whose values are all 1 are held binary, as fsgd train holds
 * such a file's. */
static int api_copy_rows(fsgd_csr_t *m, const char *what, const api_arrays_t *a, char *err, size_t errsz)
{
    const size_t n_rows = a->n_rows;
    const int64_t *row_ptr = a->row_ptr;
    const uint32_t *col = a->col;
    const double *val = a->val, *label = a->label;
    if (n_rows && (!row_ptr || !label))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s: row_ptr and label are required", what);
    if (n_rows && row_ptr[0] != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: row_ptr[0] is %lld, not 0", what, (long long)row_ptr[0]);
    for (size_t r = 0; r < n_rows; r++)
        if (row_ptr[r + 1] < row_ptr[r])
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: row %zu: row_ptr decreases (%lld after %lld)", what,
                                r, (long long)row_ptr[r + 1], (long long)row_ptr[r]);
    size_t nnz = n_rows ? (size_t)row_ptr[n_rows] : 0;
    if (nnz && !col)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s: col is required", what);
    int ones = 1;
    for (size_t i = 0; val && i < nnz && ones; i++)
        ones = val[i] == 1.0;
    int rc = ones ? fsgd_csr_init_binary(m, n_rows, nnz) : fsgd_csr_reserve(m, n_rows, nnz);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory for %zu rows", what, n_rows);
    for (size_t r = 0; r < n_rows; r++) {
        if (!isfinite(label[r]))
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "%s: row %zu: label %g", what, r, label[r]);
        m->label[r] = label[r];
        for (int64_t i = row_ptr[r]; i < row_ptr[r + 1]; i++) {
            if (i > row_ptr[r] && col[i] <= col[i - 1])
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                    "%s: row %zu: column %u after %u: columns must increase within a row (SciPy: "
                                    "X.sum_duplicates())",
                                    what, r, col[i], col[i - 1]);
            if (val && !isfinite(val[i]))
                return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "%s: row %zu: column %u: value %g", what, r, col[i],
                                    val[i]);
            m->col[i] = col[i];
            if (!ones)
                m->val[i] = val ? (float)val[i] : 1.0f;
            if ((uint64_t)col[i] + 1 > m->max_col)
                m->max_col = (uint64_t)col[i] + 1;
        }
        m->row_ptr[r + 1] = (uint64_t)row_ptr[r + 1];
    }
    m->n_rows = n_rows;
    m->nnz = nnz;
    return 0;
}

static int api_rows(fsgd_api_train_t *t, int test, const api_arrays_t *a, char *err, size_t errsz)
{
    const char *what = test ? "test rows" : "training rows";
    if (t->ran || (test ? t->have_test : t->have_rows))
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "%s given twice (a handle trains once)", what);
    fsgd_csr_t *m = test ? &t->test : &t->rows;
    int rc = api_copy_rows(m, what, a, err, errsz);
    if (rc < 0) {
        fsgd_csr_free(m);
        return rc;
    }
    *(test ? &t->have_test : &t->have_rows) = 1;
    return 0;
}

int fsgd_api_train_data(fsgd_api_train_t *t, size_t n_rows, const int64_t *row_ptr, const uint32_t *col,
                        const double *val, const double *label, char *err, size_t errsz)
{
    const api_arrays_t a = {n_rows, row_ptr, col, val, label};
    return api_rows(t, 0, &a, err, errsz);
}

int fsgd_api_train_test(fsgd_api_train_t *t, size_t n_rows, const int64_t *row_ptr, const uint32_t *col,
                        const double *val, const double *label, char *err, size_t errsz)
{
    const api_arrays_t a = {n_rows, row_ptr, col, val, label};
    return api_rows(t, 1, &a, err, errsz);
}

int fsgd_api_train_weights(fsgd_api_train_t *t, const double *weight, size_t n, char *err, size_t errsz)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(weight[i]) || weight[i] < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "weights: row %zu: %g is not a finite number >= 0", i,
                                weight[i]);
    double *w = malloc((n ? n : 1) * sizeof *w);
    if (!w)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "weights: out of memory");
    if (n)
        memcpy(w, weight, n * sizeof *w);
    free(t->weight);
    t->weight = w;
    t->n_weight = n;
    return 0;
}

/* Labels as fsgd train checks a file's: those the loss takes, or any two
 * values mapped onto -1/+1 (the larger positive). */
static int api_labels(const fsgd_job_t *job, fsgd_csr_t *m, const char *what, char *err, size_t errsz)
{
    fsgd_label_set_t ls = {0};
    fsgd_label_set_add(&ls, m->label, m->n_rows);
    double lo, hi;
    char why[512];
    if (fsgd_loss_check_labels(job->train.model, &ls, why, sizeof why) < 0 &&
        (job->train.model == FSGD_LOSS_SQUARED || !fsgd_rowlabel_map_two(m->label, m->n_rows, &lo, &hi)))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: %s", what, why);
    return 0;
}

/* Row weights and class_weight ride in the training labels (fsgd/rowlabel.h), as fsgd train's. */
static int api_weigh(fsgd_api_train_t *t, char *err, size_t errsz)
{
    double pos = 1, neg = 1;
    FSGD_TRY(fsgd_train_class_weight(&t->job.train, &pos, &neg, err, errsz));
    if (!t->weight && pos == 1 && neg == 1)
        return 0;
    if (t->weight && t->n_weight != t->rows.n_rows)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "weights: %zu of them for %zu training rows", t->n_weight,
                            t->rows.n_rows);
    if (t->job.train.model == FSGD_LOSS_SQUARED)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "row and class weights are for classification models (logistic, svm), not linear");
    if (strcmp(t->job.train.backend, "cpu"))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "row and class weights are applied by the cpu backend: backend cpu");
    fsgd_rowlabel_weigh(&t->rows, 0, t->weight, pos, neg);
    if (!t->rows.n_rows)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "training rows: every row has weight 0");
    return 0;
}

/* The metrics JSON of a run on files, as fsgd train --metrics-json writes it. */
static int api_metrics_json(fsgd_api_train_t *t, const fsgd_train_files_run_t *r, char *err, size_t errsz)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "metrics: out of memory");
    fsgd_train_files_metrics_json(&t->job.train, r, f);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "metrics: out of memory");
    }
    t->metrics = buf;
    t->metrics_len = len;
    return 0;
}

/* fsgd train's job on the files the keys name (fsgd/train_files.h). */
static int api_train_files(fsgd_api_train_t *t, fsgd_model_t **model, char *err, size_t errsz)
{
    fsgd_job_t *job = &t->job;
    if (!job->train.data[0])
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "data: no training file given");
    FSGD_TRY(fsgd_job_check_train(job, err, errsz));
    char why[512];
    if (fsgd_strategy_check(job->train.codec, 1u << 20, why, sizeof why) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec: %s", why);
    fsgd_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    t->ran = 1;
    fsgd_train_files_run_t r;
    int rc = fsgd_train_files(&job->train, NULL, &r, err, errsz);
    if (rc == 0)
        rc = api_metrics_json(t, &r, err, errsz);
    if (rc == 0) {
        t->stats = r.st;
        t->n_train = r.n_train;
        t->dim = r.dim;
        *m = r.model; /* the handle takes the run's model */
        memset(&r.model, 0, sizeof r.model);
        *model = m;
    } else {
        free(m);
    }
    fsgd_train_files_free(&r);
    return rc;
}

int fsgd_api_train_run(fsgd_api_train_t *t, fsgd_model_t **model, char *err, size_t errsz)
{
    *model = NULL;
    fsgd_job_t *job = &t->job;
    if (t->ran)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "this handle has trained already (a handle trains once)");
    if (t->files)
        return api_train_files(t, model, err, errsz);
    if (!t->rows.n_rows)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "no training rows");
    FSGD_TRY(fsgd_job_check_train(job, err, errsz));
    char why[512];
    if (fsgd_strategy_check(job->train.codec, 1u << 20, why, sizeof why) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec: %s", why);
    FSGD_TRY(api_labels(job, &t->rows, "training rows", err, errsz));
    if (t->test.n_rows)
        FSGD_TRY(api_labels(job, &t->test, "test rows", err, errsz));
    FSGD_TRY(api_weigh(t, err, errsz));
    if (!t->test.n_rows && job->train.test_fraction > 0 &&
        fsgd_train_split_test(&t->rows, job->train.test_fraction, job->train.seed, &t->test) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory splitting the rows");
    t->dim = job->train.dim ? job->train.dim : t->rows.max_col;
    if (t->rows.max_col > t->dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "training rows have column %llu, beyond dim %llu",
                            (unsigned long long)t->rows.max_col - 1, (unsigned long long)t->dim);
    t->n_train = t->rows.n_rows;
    fsgd_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    t->ran = 1;
    fsgd_train_input_t in = {.source = FSGD_TRAIN_ROWS_OWNED, .owned_rows = &t->rows, .owned_test = &t->test,
                             .dim = t->dim};
    int rc = fsgd_train(&job->train, &in, NULL, m, &t->stats, NULL, err, errsz);
    fsgd_csr_free(&t->rows);
    fsgd_csr_free(&t->test);
    if (rc < 0) {
        fsgd_api_model_free(m);
        return rc;
    }
    *model = m;
    return 0;
}

double fsgd_api_train_stat(const fsgd_api_train_t *t, const char *name)
{
    const fsgd_train_stats_t *s = &t->stats;
    if (!t->ran)
        return NAN;
    const struct {
        const char *name;
        double value;
    } table[] = {
        {"train_rows", (double)t->n_train},
        {"dim", (double)t->dim},
        {"steps", (double)s->steps},
        {"epochs_run", s->epochs_run},
        {"best_epoch", s->holdout_rows ? s->best_epoch : NAN},
        {"stopped_early", s->stopped_early},
        {"holdout_rows", (double)s->holdout_rows},
        {"holdout_loss", s->holdout_rows ? s->holdout_loss : NAN},
        {"lr", s->lr},
        {"l2", s->l2},
        {"alpha", s->alpha},
        {"l1", t->job.train.l1},
        {"ftrl", t->job.train.optimizer == FSGD_OPTIMIZER_FTRL},
        {"threads", s->threads_used},
        {"weights_nonzero", (double)s->weights_nonzero},
        {"weights_touched", (double)s->weights_touched},
        {"train_seconds", s->seconds},
        {"test_n", (double)s->test.n},
        {"test_auc", s->test.auc},
        {"test_logloss", s->test.logloss},
        {"test_accuracy", s->test.accuracy},
        {"test_rmse", s->test.rmse},
        {"test_loss", s->test.loss},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name))
            return table[i].value;
    return NAN;
}

int fsgd_api_train_metrics(const fsgd_api_train_t *t, const char **json, size_t *len)
{
    *json = t->metrics;
    *len = t->metrics ? t->metrics_len : 0;
    return t->metrics ? 0 : FSGD_E_STATE;
}

void fsgd_api_train_free(fsgd_api_train_t *t)
{
    if (!t)
        return;
    free(t->metrics);
    fsgd_csr_free(&t->rows);
    fsgd_csr_free(&t->test);
    free(t->weight);
    free(t);
}
