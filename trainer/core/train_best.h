/* Private to trainer/core: the weights of early stopping's best look, kept
 * off the heap. fsgd train keeps θ at the lowest holdout loss so far and
 * ends with it; a second copy of θ in memory was 67 MB at 2^24 keys, a
 * fifth of Vowpal Wabbit's whole peak on the same set. The copy goes to an
 * unlinked temporary file instead (page cache, given back under pressure,
 * not the process's RSS; gone when the process ends, however it ends);
 * where no such file can be made or written, to memory as before. */
#ifndef FSGD_TRAIN_BEST_H
#define FSGD_TRAIN_BEST_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/train.h"

typedef struct fsgd_best {
    size_t n;    /* floats a copy holds */
    int fd;      /* the temporary file, when file */
    int file;
    float *mem;  /* the copy in memory where there is no file */
    int saved;   /* a copy has been saved */
} fsgd_best_t;

/* Ready for copies of n floats: a file in $TMPDIR (else /tmp), or memory.
 * Returns 0 or FSGD_E_NOMEM. */
int fsgd_best_open(fsgd_best_t *b, size_t n);
/* Keeps a copy of w (n floats), replacing the last. 0 or FSGD_E_NOMEM. */
int fsgd_best_save(fsgd_best_t *b, const float *w);
/* The last copy saved into out (n floats). 0, FSGD_E_IO (with the file's
 * error in err) or FSGD_E_ARG when none was saved. */
int fsgd_best_load(const fsgd_best_t *b, float *out, char *err, size_t errsz);
/* Closes the file, frees the memory; a zeroed or closed b is a no-op. */
void fsgd_best_close(fsgd_best_t *b);

/* Early stopping (epochs auto), one rule for rows in memory and from a
 * cache. */
typedef struct fsgd_early {
    double best_loss; /* INFINITY before the first look: the last loss that beat the one before by 1e-4 */
    double kept_loss; /* the lowest loss seen, whose weights best holds (INFINITY before the first look) */
    int since_best;   /* looks since best_loss */
    int patience;     /* looks in a row without a new best that stop the run */
    int stop;         /* set when they have */
} fsgd_early_t;

/* A look: the holdout's mean loss after `epochs` (fractional) epochs.
 * The weights of the lowest loss seen are kept in best (fsgd_best_save)
 * and stats->best_epoch set, as fsgd run's aggregator keeps them. Only a
 * loss that beats e->best_loss by a relative 1e-4 restarts the patience,
 * so that a plateau of noise does not keep training going forever: after
 * e->patience looks without one, e->stop is set. stats->holdout_loss gets
 * the lowest loss. 0, or FSGD_E_NOMEM with err set. */
int fsgd_early_look(fsgd_early_t *e, fsgd_best_t *best, const float *theta, double loss, double epochs,
                    fsgd_train_stats_t *stats, char *err, size_t errsz);

#endif
