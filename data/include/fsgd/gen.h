/* Synthetic CTR-shaped LIBSVM data.
 *
 * Feature popularity follows a Zipf law over ranks 1..dim (P(rank k) ~ k^-s),
 * sampled by rejection-inversion (Hoermann & Derflinger 1996) in O(1) memory
 * and O(1) expected time per draw, so dim can be up to 2^32. Ranks are mapped
 * to feature ids by a seeded bijection of [0, dim) (cycle-walking over a
 * mixing permutation of the next power of two), so popular features are not
 * all low ids. Each row has 1..2*nnz-1 distinct features (uniform; mean
 * nnz), sorted. Labels come from a known sparse weight vector w (nonzero on
 * the w_nnz most popular features) and a bias: logistic -> +1/-1 drawn with
 * P(+1) = sigmoid(x.w + b + noise), linear -> x.w + b + noise.
 * Everything is a deterministic function of the options (seed included). */
#ifndef FSGD_GEN_H
#define FSGD_GEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum fsgd_gen_model { FSGD_GEN_LOGISTIC = 0, FSGD_GEN_LINEAR = 1 } fsgd_gen_model_t;

typedef struct fsgd_gen_opts {
    uint64_t dim;           /* feature ids 0..dim-1 (written 1-based); 1..2^32 */
    double nnz;             /* mean nonzeros per row, >= 1 (rows have 1..2*nnz-1) */
    double zipf;            /* popularity exponent s >= 0 (0: uniform) */
    uint64_t seed;
    fsgd_gen_model_t model;
    double noise;           /* stddev of Gaussian noise on the margin (logistic) or label (linear) */
    double bias;            /* intercept of the label model */
    uint64_t w_nnz;         /* nonzero weights on the w_nnz most popular features (0: min(dim, 1000)) */
    double w_scale;         /* weights ~ N(0, w_scale^2) (0: 2 / sqrt(nnz)) */
    int real_values;        /* values k/1000, k uniform in 1..1000, instead of 1 */
    uint32_t dense;         /* 0, or every row also has features 0..dense-1 with values k/1000 and
                             * weights ~ N(0, w_scale^2); the Zipf features are then ids dense..dim-1
                             * (numeric columns before one-hot ones, as in a CTR log); < dim, <= 4096 */
} fsgd_gen_opts_t;

/* dim 1000000, nnz 20, zipf 1.1, seed 1, logistic, noise 0, bias 0, defaults for the rest. */
void fsgd_gen_opts_default(fsgd_gen_opts_t *o);

typedef struct fsgd_gen fsgd_gen_t;

/* Validates opts and draws the weights. NULL with err set on bad options
 * ("dim 0 out of range 1..4294967296") or no memory. Not thread safe; use one
 * generator per thread. */
fsgd_gen_t *fsgd_gen_new(const fsgd_gen_opts_t *o, char *err, size_t errsz);

/* Frees g. NULL is a no-op. */
void fsgd_gen_destroy(fsgd_gen_t *g);

/* Largest number of entries a row can have (capacity for fsgd_gen_next). */
size_t fsgd_gen_max_row(const fsgd_gen_t *g);

/* Draws the next row: n strictly increasing 0-based columns into col and
 * their values into val (each with fsgd_gen_max_row() room), the label into
 * *label and, if margin is not NULL, x.w + b (before noise). Returns n >= 1. */
size_t fsgd_gen_next(fsgd_gen_t *g, uint32_t *col, float *val, double *label, double *margin);

/* Called every few thousand rows by fsgd_gen_write. */
typedef void (*fsgd_gen_progress_fn)(void *ctx, uint64_t rows_done, uint64_t bytes_done);

/* Writes rows more rows as LIBSVM text to out (labels "+1"/"-1" or %.9g).
 * Returns 0 or FSGD_E_IO with err set. progress may be NULL. */
int fsgd_gen_write(fsgd_gen_t *g, FILE *out, uint64_t rows, fsgd_gen_progress_fn progress, void *ctx,
                   char *err, size_t errsz);

/* Writes the true model as a comment line and one LIBSVM row: the label is
 * the bias, the entries the nonzero weights (1-based index:weight, %.9g, so
 * the floats round-trip). fsgd_libsvm_load reads it back. Returns 0 or FSGD_E_IO. */
int fsgd_gen_write_weights(const fsgd_gen_t *g, FILE *out, char *err, size_t errsz);

/* The 0-based id of the feature with popularity rank (0 = most popular). */
uint32_t fsgd_gen_feature(const fsgd_gen_t *g, uint64_t rank);

/* Zipf sampler over 1..n with P(k) ~ k^-s, by rejection-inversion. */
typedef struct fsgd_zipf {
    uint64_t n;
    double s, h_x1, h_n, sq;
} fsgd_zipf_t;

/* Returns 0, or FSGD_E_ARG for n == 0 or s < 0 / not finite. */
int fsgd_zipf_init(fsgd_zipf_t *z, uint64_t n, double s);

/* One draw in 1..n; *state is a splitmix64 state advanced by the call. */
uint64_t fsgd_zipf_sample(const fsgd_zipf_t *z, uint64_t *state);

#endif
