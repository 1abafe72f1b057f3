/* The producer's input: a file (or stdin) read in chunks of whole lines and
 * parsed with the job's format on two threads while the caller sends the
 * rows of the chunk before, handed back in file order. Private to
 * trainer/distributed/ (producer.c). */
#ifndef FSGD_DIST_PRODUCE_READER_H
#define FSGD_DIST_PRODUCE_READER_H

#include <stdint.h>
#include <stdio.h>

#include "fsgd/csr.h"
#include "fsgd/libsvm.h"
#include "fsgd/rowfmt.h"

/* One chunk's rows, in file order, and what reading or parsing it said. */
typedef struct fsgd_produce_chunk {
    fsgd_csr_t rows;          /* the rows parsed before rc's error, if any */
    fsgd_libsvm_stats_t st;   /* this chunk's parse statistics (bad rows with skip_bad) */
    uint64_t bytes;           /* its text (a hashed spec's header left out) */
    uint64_t end_line;        /* the number of its last line */
    int rc;                   /* 0, or the error that ends the input (err says it) */
    char err[512];
} fsgd_produce_chunk_t;

typedef struct fsgd_produce_reader fsgd_produce_reader_t;

/* Starts reading f (owned by the caller, open until _destroy) named path
 * in errors ("path:LINE:COL: ..."), parsed as fmt (outlives the reader).
 * A hashed spec's header line is skipped. A line with no end within
 * FSGD_INPUT_MAX_LINE bytes ends the input with an error naming its line.
 * chunk_bytes: the text a chunk holds (0: 2 MiB). For tests and the
 * bench, FSGD_PRODUCE_CHUNK_KB in the environment overrides it, and
 * FSGD_PRODUCE_THREADS (0..2, default 2) sets the parsing threads (0: the
 * caller parses each chunk in _next). Returns NULL when out of memory. */
fsgd_produce_reader_t *fsgd_produce_reader_new(FILE *f, const char *path, const fsgd_rowfmt_t *fmt,
                                               size_t chunk_bytes);

/* The next chunk in file order, valid until the next call; NULL after the
 * last one (the end of the input, or a chunk whose rc is an error). */
const fsgd_produce_chunk_t *fsgd_produce_reader_next(fsgd_produce_reader_t *r);

/* Stops the threads (a chunk being parsed is finished first) and frees r.
 * NULL is a no-op. */
void fsgd_produce_reader_destroy(fsgd_produce_reader_t *r);

#endif
