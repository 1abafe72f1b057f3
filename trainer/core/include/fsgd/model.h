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
#include "fsgd/sparse.h"

/* Longest input spec a model records, terminator included. */
#define FSGD_MODEL_INPUT_MAX 512

/* The optimizer state a model file may carry (format version 3), so that
 * fsgd train --init resumes training where it stopped. */
typedef enum fsgd_model_state_kind {
    FSGD_MODEL_STATE_NONE = 0,
    FSGD_MODEL_STATE_ADAM = 1,         /* a = m, b = v, c = 0; step = Adam's global t */
    FSGD_MODEL_STATE_ADAM_COUNTED = 2, /* a = m, b = v, c = the key's update count (fsgd_adam_count_keys) */
    FSGD_MODEL_STATE_FTRL = 3          /* a = z, b = n (>= 0), c = 0 (fsgd/ftrl.h) */
} fsgd_model_state_kind_t;

/* Per-key state of the keys that have any (keys strictly increasing, below
 * dim + has_bias: the intercept's key is dim), in parallel arrays owned by
 * the model. */
typedef struct fsgd_model_state {
    fsgd_model_state_kind_t kind;
    uint64_t step;
    uint64_t n;
    uint32_t *keys;
    float *a, *b;
    uint32_t *c;
} fsgd_model_state_t;

typedef struct fsgd_model {
    fsgd_loss_kind_t kind;
    uint64_t dim;  /* feature columns (0-based cols < dim) */
    int has_bias;  /* 1: w has dim + 1 entries, w[dim] is the intercept weight */
    float bias;    /* value of the constant feature (usually 1) */
    float *w;
    /* How rows become columns, when not LIBSVM: the canonical delimited-text
     * spec (fsgd/delim.h, "tsv:label,num*13,cat*26:header=0:bits=24:seed=0")
     * that predict must hash with. "" for LIBSVM models (written as version 1). */
    char input[FSGD_MODEL_INPUT_MAX];
    /* Optimizer state (kind NONE: none, the file is version 1 or 2). */
    fsgd_model_state_t state;
} fsgd_model_t;

/* Allocates a zero model (dim + 1 weights). Returns 0, FSGD_E_RANGE (dim > 2^32)
 * or FSGD_E_NOMEM. */
int fsgd_model_init(fsgd_model_t *m, fsgd_loss_kind_t kind, uint64_t dim, int has_bias, float bias);

/* Allocates room for n state entries of the given kind (zeroed, state.n = n).
 * Returns 0 or FSGD_E_NOMEM. */
int fsgd_model_state_alloc(fsgd_model_t *m, fsgd_model_state_kind_t kind, uint64_t n);

/* "adam", "adam (per-key counts)", "ftrl" or "none". */
const char *fsgd_model_state_name(fsgd_model_state_kind_t kind);

/* Frees w and the state and zeroes the struct. NULL is a no-op. */
void fsgd_model_free(fsgd_model_t *m);

/* x·w (+ bias·w[dim]) for one row; columns >= dim are ignored (unseen features). */
double fsgd_model_margin(const fsgd_model_t *m, const uint32_t *col, const float *val, size_t n);

/* Writes the model file atomically through fsgd/outfile.h (temp file +
 * rename; a non-regular file or a link at path is refused with FSGD_E_ARG).
 * Returns 0 or an error naming the path. */
int fsgd_model_save(const fsgd_model_t *m, const char *path, char *err, size_t errsz);

/* The same file from weights given as pairs (a model too large to hold
 * dense: an aggregator shard's sparse tables, assembled): shape's kind,
 * dim, intercept, bias value and input spec (its w is not read; no
 * optimizer state), w's keys strictly increasing, at most dim (dim: the
 * intercept's weight). Zero weights are left out as fsgd_model_save does,
 * so a model saves to the same bytes either way. */
int fsgd_model_save_pairs(const fsgd_model_t *shape, const fsgd_sparse_t *w, const char *path, char *err,
                          size_t errsz);

/* Reads and checks a model file (magic, version, kind, lengths, CRC32C).
 * A truncated or corrupted file is FSGD_E_TRUNCATED / FSGD_E_CRC /
 * FSGD_E_FORMAT with err naming the path, field and byte offset. */
int fsgd_model_load(fsgd_model_t *m, const char *path, char *err, size_t errsz);

/* fsgd_model_load refusing a dimension above max_dim (0: no limit) with
 * FSGD_E_RANGE before the weights are allocated: a caller that cannot use a
 * larger model (LIBLINEAR export: INT_MAX) fails at once, not after
 * allocating and scanning 2^32 weights. */
int fsgd_model_load_max(fsgd_model_t *m, const char *path, uint64_t max_dim, char *err, size_t errsz);

/* Reads and checks a model from memory (the same bytes as a file); name
 * (may be NULL: "model") starts every error message. max_dim (0: no limit
 * beyond the format's 2^32) refuses larger dimensions with FSGD_E_RANGE before
 * anything is allocated, for callers reading untrusted bytes. On success m owns
 * a fresh w; on failure m is zeroed. */
int fsgd_model_load_mem(fsgd_model_t *m, const void *buf, size_t len, const char *name, uint64_t max_dim,
                        char *err, size_t errsz);

/* Encodes the model into a malloc'd buffer (*out, *len; the caller frees it).
 * Same bytes fsgd_model_save writes. Returns 0 or an error (non-finite weight,
 * bad dim or kind, FSGD_E_NOMEM). */
int fsgd_model_encode(const fsgd_model_t *m, uint8_t **out, size_t *len, char *err, size_t errsz);

/* The format version fsgd_model_save writes for m (1 to 4, trainer/MODEL_FORMAT.md). */
int fsgd_model_version(const fsgd_model_t *m);

/* Number of nonzero feature weights (the intercept not counted). */
uint64_t fsgd_model_nnz(const fsgd_model_t *m);

/* Writes the model in LIBLINEAR's text format (C locale, %.17g) so that
 * liblinear-predict gives the same predictions: logistic -> solver_type
 * L2R_LR and svm -> L2R_L2LOSS_SVC, both with "label 1 -1" (LIBLINEAR's
 * decision value is for the first label, so w is written as is: margin > 0
 * predicts 1); linear -> L2R_L2LOSS_SVR (no label line). nr_feature is dim;
 * bias is the bias value, or -1 without intercept. Written atomically.
 * dim > INT_MAX is FSGD_E_RANGE (LIBLINEAR counts features in an int). */
int fsgd_model_export_liblinear(const fsgd_model_t *m, const char *path, char *err, size_t errsz);

#endif
