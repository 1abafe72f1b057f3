/* Scoring a file's rows with a model (fsgd/predict_file.h). */
#include "fsgd/predict_file.h"

#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "fsgd/rowfmt.h"
#include "fsgd/vw.h"

#define CHUNK_ROWS 65536

struct fsgd_predict {
    const fsgd_model_t *m;
    fsgd_predict_opts_t o;
    /* hashed (delimited) and VW rows are read whole into all; LIBSVM
     * rows (hashed LIBSVM too) stream through rd */
    int hashed, vw;
    fsgd_csr_t all;
    fsgd_vw_extra_t tags;
    fsgd_libsvm_weights_t lw; /* weights: a LIBSVM chunk's row weights */
    fsgd_libsvm_reader_t *rd;
};

/* A hashed model's recorded spec reads the whole file (the delimited
 * reader does not stream), VW rows too (each row's tag beside its score). */
static int open_whole(fsgd_predict_t *p, const char *path, char *err, size_t errsz)
{
    const char *input = p->m->input;
    char why[1024];
    int rc;
    if (p->vw) {
        fsgd_vw_spec_t vspec;
        rc = fsgd_vw_spec_parse(input, &vspec, why, sizeof why);
        if (rc == 0)
            rc = fsgd_vw_load(path, &vspec, p->o.skip_bad, &p->all, &p->tags, NULL, why, sizeof why);
    } else {
        fsgd_delim_spec_t spec;
        rc = fsgd_delim_spec_parse(input, &spec, why, sizeof why);
        if (rc == 0 && p->o.skip_bad)
            rc = fsgd_err_fmt(why, sizeof why, FSGD_E_ARG, "--skip-bad is for LIBSVM input only");
        if (rc == 0)
            rc = fsgd_delim_load(path, &spec, 0, &p->all, NULL, why, sizeof why);
    }
    if (!p->vw && p->o.weights && rc == 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "--weights: criteo/tsv/csv rows carry no weight (VW importance weights and LIBSVM "
                            "label:weight do); model input %s",
                            input);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s (model input %s)", why, input);
    return 0;
}

int fsgd_predict_open(const fsgd_model_t *m, const char *path, const fsgd_predict_opts_t *o, fsgd_predict_t **out,
                      char *err, size_t errsz)
{
    *out = NULL;
    fsgd_predict_t *p = calloc(1, sizeof *p);
    if (!p)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    p->m = m;
    p->o = *o;
    if (p->o.weights)
        p->o.row_weights = 1; /* LIBSVM's weights are read to be given */
    const char *input = m->input;
    char why[1024];
    fsgd_rowfmt_t lfmt = {0};
    int rc = 0;
    if (!strncmp(input, "libsvm:", 7) && fsgd_rowfmt_init(&lfmt, input, 0, p->o.skip_bad, why, sizeof why) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "model input %s: %s", input, why);
    p->hashed = input[0] != 0 && strncmp(input, "libsvm:", 7);
    p->vw = !strncmp(input, "vw:", 3);
    if (rc == 0 && p->hashed) {
        rc = open_whole(p, path, err, errsz);
    } else if (rc == 0) {
        /* label:weight rows (fsgd train --row-weights) are read, their
         * weights left out: scores are unweighted, as fsgd train's test rows */
        fsgd_libsvm_opts_t opts = lfmt.opts; /* the model's bits, fields and crosses */
        opts.skip_bad = p->o.skip_bad;
        opts.row_weights = p->o.row_weights;
        opts.weights = p->o.weights ? &p->lw : NULL;
        if (!(p->rd = fsgd_libsvm_open(path, &opts, err, errsz)))
            rc = FSGD_E_IO;
    }
    if (rc < 0) {
        fsgd_predict_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* A batch's rows through fn; w: their weights with opts.weights. */
static int score_batch(fsgd_predict_t *p, const fsgd_csr_t *batch, const double *w, fsgd_predict_row_fn fn,
                       void *ctx)
{
    for (size_t r = 0; r < batch->n_rows; r++) {
        uint64_t lo = batch->row_ptr[r];
        uint64_t t0 = p->vw && r ? p->tags.tag_end[r - 1] : 0, t1 = p->vw ? p->tags.tag_end[r] : 0;
        fsgd_predict_row_t row = {
            .margin = fsgd_model_margin(p->m, batch->col + lo, batch->val + lo, (size_t)(batch->row_ptr[r + 1] - lo)),
            .label = batch->label[r],
            .weight = w ? &w[r] : NULL,
            .tag = t1 > t0 ? p->tags.tags + t0 : NULL,
            .tag_len = (size_t)(t1 - t0)};
        int rc = fn(ctx, &row);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int fsgd_predict_run(fsgd_predict_t *p, fsgd_predict_row_fn fn, void *ctx, char *err, size_t errsz)
{
    fsgd_csr_t batch = {0};
    int rc = 0, whole_done = 0;
    for (;;) {
        fsgd_csr_clear(&batch);
        long got;
        if (p->hashed) {
            if (whole_done)
                break;
            whole_done = 1;
            fsgd_csr_free(&batch);
            batch = p->all; /* batch owns the rows from here */
            memset(&p->all, 0, sizeof p->all);
            got = (long)batch.n_rows;
        } else {
            got = fsgd_libsvm_read(p->rd, &batch, CHUNK_ROWS, err, errsz);
        }
        if (got <= 0) {
            rc = (int)got;
            break;
        }
        const double *w = NULL;
        if (p->o.weights)
            w = p->vw ? p->tags.weight : p->lw.w; /* VW: the whole file is the one batch */
        if (p->o.weights && (p->vw ? p->tags.n : p->lw.n) != batch.n_rows) {
            rc = fsgd_err_fmt(err, errsz, FSGD_E_STATE, "%zu row weights read for %zu rows",
                              p->vw ? p->tags.n : p->lw.n, (size_t)batch.n_rows);
            break;
        }
        if ((rc = score_batch(p, &batch, w, fn, ctx)) < 0)
            break;
        p->lw.n = 0; /* the next chunk's weights from the start */
    }
    fsgd_csr_free(&batch);
    return rc;
}

const fsgd_libsvm_stats_t *fsgd_predict_skipped(const fsgd_predict_t *p)
{
    return p->rd ? fsgd_libsvm_stats(p->rd) : NULL;
}

void fsgd_predict_close(fsgd_predict_t *p)
{
    if (!p)
        return;
    fsgd_vw_extra_free(&p->tags);
    fsgd_libsvm_weights_free(&p->lw);
    fsgd_csr_free(&p->all);
    fsgd_libsvm_close(p->rd);
    free(p);
}
