/* Private to trainer/core: fsgd train's step batches in an unlinked
 * temporary file instead of on the heap. The rows are shuffled once and cut
 * into fixed batch slices (train.c); held in memory they were most of a
 * large run's RSS (1M-row CTR set: 180 MB of binary batches, against 268
 * MB for θ and Adam's state). Each slice is written once, as it is cut,
 * and read back by the thread that trains on it, one step at a time: the
 * page cache keeps them (given back under memory pressure, then read from
 * disk), the process holds one slice a thread. The steps see the same rows
 * in the same order, so the model is the same byte for byte. A slice that
 * cannot be written (no temporary file, disk full) stays in memory. */
#ifndef FSGD_TRAIN_SPILL_H
#define FSGD_TRAIN_SPILL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"

typedef struct fsgd_spill {
    int fd;
    int file;           /* fd is open */
    int binary;         /* slices are binary batches (fsgd/csr.h) */
    size_t n;           /* slices */
    int64_t *at;        /* slice i's offset in the file, -1 where it is in memory */
    atomic_uint_least64_t end; /* the file's length so far */
} fsgd_spill_t;

/* Bytes a slice of rows rows and nnz nonzeros takes, binary or not. */
uint64_t fsgd_spill_bytes(size_t rows, size_t nnz, int binary);
/* Ready for n slices: a file in $TMPDIR (else /tmp) when one can be made
 * (else every slice stays in memory). 0 or FSGD_E_NOMEM. */
int fsgd_spill_open(fsgd_spill_t *s, size_t n, int binary);
/* Writes slice i (its rows, which must be binary as s says) to the file
 * and frees its arrays, keeping n_rows, nnz and max_col; where it cannot be
 * written it keeps them. Thread safe for distinct i. */
void fsgd_spill_put(fsgd_spill_t *s, size_t i, fsgd_csr_t *slice);
/* The rows of slice i (slice: its entry as put left it): slice itself when
 * in memory, else buf filled from the file (buf's arrays are the caller's,
 * grown as needed, freed with fsgd_csr_free). Thread safe for distinct
 * bufs. 0 with *rows set, or FSGD_E_NOMEM / FSGD_E_IO with err. */
int fsgd_spill_get(const fsgd_spill_t *s, size_t i, const fsgd_csr_t *slice, fsgd_csr_t *buf,
                   const fsgd_csr_t **rows, char *err, size_t errsz);
/* Closes the file (its blocks are given back) and frees the offsets. */
void fsgd_spill_close(fsgd_spill_t *s);

#endif
