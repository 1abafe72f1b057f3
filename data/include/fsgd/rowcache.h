/* A compact binary cache of training rows, written on the first pass over a
 * text file and read back sequentially every epoch (Vowpal Wabbit's cache
 * file idea), so training needs memory for one chunk of rows, not the file.
 *
 * File: a 32-byte header, then one record per row, all little-endian:
 *   header  magic "FSGDROWS" | u32 version (1) | u32 flags (0) |
 *           u64 rows | u64 max_col (1 + largest column)
 *   record  f32 label | u32 n | n x u32 column | n x f32 value
 *           (when bit 31 of n is set every value is 1 and none is stored:
 *           binary CTR rows take 4 bytes a nonzero)
 * rows and max_col are written when the writer is closed; a reader refuses
 * a file whose header does not match its length (an interrupted write). */
#ifndef FSGD_ROWCACHE_H
#define FSGD_ROWCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"

typedef struct fsgd_rowcache_writer fsgd_rowcache_writer_t;
typedef struct fsgd_rowcache_reader fsgd_rowcache_reader_t;

/* Creates (truncates) path. NULL with err set on failure. */
fsgd_rowcache_writer_t *fsgd_rowcache_create(const char *path, char *err, size_t errsz);

/* Appends every row of m. Returns 0 or FSGD_E_IO / FSGD_E_NOMEM. */
int fsgd_rowcache_append(fsgd_rowcache_writer_t *w, const fsgd_csr_t *m, char *err, size_t errsz);

/* Writes the header's counts, closes and frees w (also on error). Returns 0 or FSGD_E_IO. */
int fsgd_rowcache_close(fsgd_rowcache_writer_t *w, char *err, size_t errsz);

/* Opens a finished cache; *rows and *max_col (may be NULL) get its counts.
 * NULL with err set when the file is missing, not a cache, or cut short. */
fsgd_rowcache_reader_t *fsgd_rowcache_open(const char *path, uint64_t *rows, uint64_t *max_col, char *err,
                                           size_t errsz);

/* Clears out and reads up to max_rows rows into it. Returns rows read (0 at
 * the end) or a negative error naming the path and byte offset. */
long fsgd_rowcache_read(fsgd_rowcache_reader_t *r, fsgd_csr_t *out, size_t max_rows, char *err, size_t errsz);

/* Goes back to the first row. Returns 0 or FSGD_E_IO. */
int fsgd_rowcache_rewind(fsgd_rowcache_reader_t *r, char *err, size_t errsz);

/* Closes and frees r. NULL is a no-op. */
void fsgd_rowcache_free(fsgd_rowcache_reader_t *r);

#endif
