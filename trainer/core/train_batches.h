/* The step batches of fsgd train in memory (private to core). */
#ifndef FSGD_TRAIN_BATCHES_H
#define FSGD_TRAIN_BATCHES_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "train_engine.h"

/* How fsgd_train_cut_slices cuts, and what it made. */
typedef struct fsgd_train_cut {
    size_t n_hold;     /* rows of t->perm held out first, not cut */
    size_t B;          /* rows a batch (t->batch_rows says each batch's) */
    uint64_t dim;      /* columns >= dim dropped; the intercept's feature is dim */
    int bias;
    float bv;          /* the intercept feature's value */
    int binary;        /* slices without values (fsgd/csr.h) */
    int helper;        /* 1: a second thread may cut (the job's threads > 1) */
    uint64_t bytes;    /* out: the slices' bytes */
    uint64_t on_disk;  /* out: of those, the bytes put in the spill file */
} fsgd_train_cut_t;

/* Cuts train's rows, in t->perm's order after the first n_hold, into
 * t->slices (t->n_batches batches of t->n_workers slices, each batch of
 * t->batch_rows rows), through the spill file when t->spill has one. The
 * slices are the same whoever cuts them. 0 or FSGD_E_NOMEM (no message). */
int fsgd_train_cut_slices(trainer_t *t, const fsgd_csr_t *train, fsgd_train_cut_t *cut);

/* λ's factor for each key from the slices' key counts (see train_batches.c:
 * the lazy λθ of rare keys); malloc'd, NULL when out of memory. */
float *fsgd_train_key_l2_scale(const trainer_t *t, uint64_t model_dim);

#endif
