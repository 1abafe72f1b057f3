/* The first pass of fsgd train --cache; see train_cache.h. */
#include "train_cache.h"

#include <stdio.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "fsgd/rowcache.h"
#include "fsgd/train.h"

typedef struct pass {
    const fsgd_job_t *job;
    fsgd_rowcache_writer_t *w;
    fsgd_csr_t *hold, *test, keep;
    double hold_p, test_p;
    uint64_t row, seed, rows, max_col;
    fsgd_label_set_t labels;
} pass_t;

static double uniform(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (double)(x >> 11) / 9007199254740992.0;
}

/* One chunk of rows: each row to test, hold or the cache by one uniform
 * draw from (seed, row number), so the split does not depend on chunking. */
static int take_chunk(void *ctx, const fsgd_csr_t *rows, char *err, size_t errsz)
{
    pass_t *p = ctx;
    fsgd_csr_clear(&p->keep);
    fsgd_label_set_add(&p->labels, rows->label, rows->n_rows);
    for (size_t r = 0; r < rows->n_rows; r++, p->row++) {
        double u = uniform(p->seed ^ (p->row * 0xD1B54A32D192ED03ull));
        fsgd_csr_t *to = &p->keep;
        if (u < p->test_p && p->test->n_rows < FSGD_TRAIN_CACHE_SET_ASIDE_MAX)
            to = p->test;
        else if (u >= p->test_p && u < p->test_p + p->hold_p && p->hold->n_rows < FSGD_TRAIN_HOLDOUT_MAX)
            to = p->hold;
        if (fsgd_csr_append_rows(to, rows, r, 1) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory reading %s", p->job->data);
    }
    FSGD_TRY(fsgd_rowcache_append(p->w, &p->keep, err, errsz));
    p->rows += p->keep.n_rows;
    if (p->keep.max_col > p->max_col)
        p->max_col = p->keep.max_col;
    return FSGD_E_OK;
}

int fsgd_train_cache_write(const fsgd_job_t *job, const fsgd_delim_spec_t *spec, double test_fraction,
                           fsgd_csr_t *hold, fsgd_csr_t *test, uint64_t *rows, uint64_t *max_col, char *err,
                           size_t errsz)
{
    pass_t p = {.job = job, .hold = hold, .test = test, .seed = job->seed ^ 0x5DEECE66DULL};
    p.test_p = test_fraction;
    p.hold_p = job->epochs <= 0 ? job->holdout : 0;
    p.w = fsgd_rowcache_create(job->cache, err, errsz);
    if (!p.w)
        return FSGD_E_IO;
    fsgd_csr_t chunk = {0};
    int rc = FSGD_E_OK;
    if (spec) {
        rc = fsgd_delim_load_chunks(job->data, spec, 0, &chunk, 65536, take_chunk, &p, NULL, err, errsz);
    } else {
        fsgd_libsvm_opts_t opts = {.skip_bad = job->skip_bad};
        fsgd_libsvm_reader_t *rd = fsgd_libsvm_open(job->data, &opts, err, errsz);
        if (!rd)
            rc = FSGD_E_IO;
        for (long got = 1; rc == 0 && got > 0;) {
            fsgd_csr_clear(&chunk);
            got = fsgd_libsvm_read(rd, &chunk, 65536, err, errsz);
            if (got < 0)
                rc = (int)got;
            else if (got > 0)
                rc = take_chunk(&p, &chunk, err, errsz);
        }
        if (rd && fsgd_libsvm_stats(rd)->bad_rows)
            fprintf(stderr, "fsgd: %s: skipped %llu malformed rows\n", job->data,
                    (unsigned long long)fsgd_libsvm_stats(rd)->bad_rows);
        fsgd_libsvm_close(rd);
    }
    fsgd_csr_free(&chunk);
    fsgd_csr_free(&p.keep);
    int crc = fsgd_rowcache_close(p.w, rc < 0 ? NULL : err, rc < 0 ? 0 : errsz);
    if (rc == 0)
        rc = crc;
    char why[256];
    if (rc == 0 && fsgd_loss_check_labels(job->model, &p.labels, why, sizeof why) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: %s", job->data, why);
    *rows = p.rows;
    *max_col = p.max_col;
    return rc;
}
