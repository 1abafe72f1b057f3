/* Linear models and their binary file format (trainer/MODEL_FORMAT.md).
 *
 * A model is a loss kind, a feature dimension and dense weights; with an
 * intercept, w[dim] is the bias weight applied to a constant feature of
 * value `bias` (LIBLINEAR's -B). Plain data: the struct owns w. */
#ifndef FSGD_MODEL_H
#define FSGD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/loss.h"

typedef struct fsgd_model {
    fsgd_loss_kind_t kind;
    uint64_t dim;  /* feature columns (0-based cols < dim) */
    int has_bias;  /* 1: w has dim + 1 entries, w[dim] is the intercept weight */
    float bias;    /* value of the constant feature (usually 1) */
    float *w;
} fsgd_model_t;

/* Allocates a zero model. Returns 0 or FSGD_E_NOMEM. */
int fsgd_model_init(fsgd_model_t *m, fsgd_loss_kind_t kind, uint64_t dim, int has_bias, float bias);

/* Frees w and zeroes the struct. NULL is a no-op. */
void fsgd_model_free(fsgd_model_t *m);

/* x·w (+ bias·w[dim]) for one row; columns >= dim are ignored (unseen features). */
double fsgd_model_margin(const fsgd_model_t *m, const uint32_t *col, const float *val, size_t n);

/* Writes the model file atomically (temp file + rename). Returns 0 or an
 * error naming the path. */
int fsgd_model_save(const fsgd_model_t *m, const char *path, char *err, size_t errsz);

/* Reads and checks a model file (magic, version, kind, lengths, CRC32C).
 * A truncated or corrupted file is FSGD_E_TRUNCATED / FSGD_E_CRC /
 * FSGD_E_FORMAT with err naming the path, field and byte offset. */
int fsgd_model_load(fsgd_model_t *m, const char *path, char *err, size_t errsz);

/* Writes the model in LIBLINEAR's text format so liblinear-predict gives
 * the same predictions. Logistic -> solver_type L2R_LR, svm -> L2R_L2LOSS_SVC_DUAL
 * style (label order "1 -1"), linear -> L2R_L2LOSS_SVR. */
int fsgd_model_export_liblinear(const fsgd_model_t *m, const char *path, char *err, size_t errsz);

#endif
