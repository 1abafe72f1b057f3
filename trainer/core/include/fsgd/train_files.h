/* fsgd train's job on files, as a library call: the job's --data and
 * --test (LIBSVM, VW or delimited rows; --cache streams the training rows
 * from a binary cache), its --init model, fsgd_train, the training rows'
 * metrics, and the metrics JSON that --metrics-json holds. `fsgd train` and
 * the Python package (fsgd/api.h) both train files through here, so a file
 * gives the same model bit for bit whichever calls it.
 *
 * Nothing here prints: what fsgd train says on its way (rows hashed, rows
 * skipped, labels mapped, a cache reused) goes to the caller's note hook,
 * line by line; errors go to the caller's buffer. */
#ifndef FSGD_TRAIN_FILES_H
#define FSGD_TRAIN_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/train_params.h"
#include "fsgd/metrics.h"
#include "fsgd/model.h"
#include "fsgd/train.h"

/* Rows of the training file scored for the training metrics (the first,
 * the file's order): scoring and sorting all of a big file costs seconds
 * for an informational figure. */
#define FSGD_TRAIN_FILES_METRICS_ROWS 100000

/* One line fsgd train says on stderr (without its newline). */
typedef void (*fsgd_train_note_fn)(void *ctx, const char *line);

typedef struct fsgd_train_files_hooks {
    fsgd_train_hooks_t train; /* fsgd_train's progress; at FSGD_TRAIN_MODEL_READY model.input is set */
    fsgd_train_note_fn note;  /* NULL: silent */
    void *note_ctx;
} fsgd_train_files_hooks_t;

/* A run and what it gave. */
typedef struct fsgd_train_files_run {
    fsgd_model_t model;       /* the trained model, its input spec set */
    fsgd_train_stats_t st;    /* fsgd_train's figures */
    fsgd_metrics_t train_m;   /* the first FSGD_TRAIN_FILES_METRICS_ROWS training rows (n 0, NaN: streamed) */
    size_t n_train, n_test;   /* rows trained on an epoch, rows tested */
    uint64_t dim;             /* the model's feature columns */
    double t0;                /* fsgd_clock_s() when loading began */
    uint64_t hash_used;       /* hashed formats: columns the training rows used */
    uint64_t hash_collided;   /* ... of them shared by two or more features */
    int cache_reused;         /* --cache: a cache made from the same input was reused, no text read */
    int streamed;             /* the training rows came from --cache */
} fsgd_train_files_run_t;

/* Trains job (its data, test, cache and init files; job->lr_auto_share
 * and job->dim are set from the data) into r, which the caller releases
 * with fsgd_train_files_free whatever the result. Returns 0, or an fsgd
 * error with err set: FSGD_E_ARG for a job the data does not fit (weights
 * of a regression, an init of other features), FSGD_E_FORMAT for labels or
 * feature indices the model cannot take, the readers' own otherwise. */
int fsgd_train_files(fsgd_train_params_t *job, const fsgd_train_files_hooks_t *hooks, fsgd_train_files_run_t *r, char *err,
                     size_t errsz);

/* The metrics JSON of a run (what fsgd train --metrics-json writes) into
 * f. */
void fsgd_train_files_metrics_json(const fsgd_train_params_t *job, const fsgd_train_files_run_t *r, void *f /* FILE* */);

void fsgd_train_files_free(fsgd_train_files_run_t *r);

#endif
