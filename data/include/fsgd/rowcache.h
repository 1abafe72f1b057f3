/* A compact binary cache of training rows, written on the first pass over a
 * text file and read back sequentially every epoch (Vowpal Wabbit's cache
 * file idea), so training needs memory for one chunk of rows, not the file.
 * A later run reuses the cache when its metadata says it was made from the
 * same input (fsgd train --cache compares it; this module only stores it).
 *
 * Format version 2 (version 1, fsgd before caches were reused, had a 32-byte
 * header and the training rows only; it is refused as "version 1"). All
 * little-endian:
 *   header  magic "FSGDROWS" | u32 version (2) | u32 meta_len |
 *           3 sections (train, holdout, test), each
 *             u64 rows | u64 max_col (1 + largest column) | u64 bytes | u64 sum |
 *           u64 FNV-1a 64 of the 112 bytes before it, then of the metadata
 *           (120 bytes in all)
 *   records the train section's rows, then the holdout's, then the test's,
 *           each row: f32 label | u32 n | n x u32 column | n x f32 value
 *           (when bit 31 of n is set every value is 1 and none is stored:
 *           binary CTR rows take 4 bytes a nonzero)
 *   meta    meta_len bytes of text, given when the writer is closed (fsgd
 *           train: "key=value" lines saying what the cache was made from)
 * A section's bytes are its records' size; sum is a Fletcher-style sum of
 * its records as u32 words (s1 += w, s2 += s1; sum = s1 ^ (s2 rotated 32)).
 * The header is written last; until then the version field is 0.
 * A reader refuses, naming the file and the reason: another magic, another
 * version, a header checksum that does not match, a length other than the
 * header's sections add up to (cut short or extended), and, while reading,
 * a record that overruns its section, a column >= the section's max_col, or
 * a section whose sum does not match once it has been read to its end. */
#ifndef FSGD_ROWCACHE_H
#define FSGD_ROWCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fsgd/csr.h"

#define FSGD_ROWCACHE_VERSION 2

typedef struct fsgd_rowcache_writer fsgd_rowcache_writer_t;
typedef struct fsgd_rowcache_reader fsgd_rowcache_reader_t;

/* The sections of a cache. */
typedef enum { FSGD_ROWCACHE_TRAIN, FSGD_ROWCACHE_HOLD, FSGD_ROWCACHE_TEST, FSGD_ROWCACHE_SECTIONS } fsgd_rowcache_section_t;

/* What open reads from the header. */
typedef struct fsgd_rowcache_info {
    uint64_t rows[FSGD_ROWCACHE_SECTIONS];
    uint64_t max_col[FSGD_ROWCACHE_SECTIONS];
    const char *meta; /* NUL-terminated copy of the metadata, owned by the reader */
} fsgd_rowcache_info_t;

/* Creates a cache in an open, empty, seekable stream that the caller owns
 * (and closes after fsgd_rowcache_close); name is for messages. NULL with
 * err set on failure. */
fsgd_rowcache_writer_t *fsgd_rowcache_create_stream(FILE *f, const char *name, char *err, size_t errsz);

/* Appends every row of m (a binary batch too, fsgd/csr.h) to the train section.
 * Returns 0 or FSGD_E_IO / FSGD_E_NOMEM. */
int fsgd_rowcache_append(fsgd_rowcache_writer_t *w, const fsgd_csr_t *m, char *err, size_t errsz);

/* Writes hold and test (either may be NULL: empty) as their sections, meta
 * (may be NULL: none; at most 1 MiB), then the header; flushes, closes the file when create opened it, and frees w
 * (also on error). Returns 0 or FSGD_E_IO. */
int fsgd_rowcache_close(fsgd_rowcache_writer_t *w, const fsgd_csr_t *hold, const fsgd_csr_t *test,
                        const char *meta, char *err, size_t errsz);

/* Frees w without finishing the file (an error elsewhere). NULL is a no-op. */
void fsgd_rowcache_discard(fsgd_rowcache_writer_t *w);

/* Opens a finished cache, positioned at the first train row; info (may be
 * NULL) gets its header. NULL with err set and *why (may be NULL) set to
 * FSGD_E_IO (cannot open), FSGD_E_FORMAT (not a row cache: another magic),
 * FSGD_E_VERSION (another format version), FSGD_E_CRC (the header's checksum)
 * or FSGD_E_TRUNCATED (the length is not what the header says). */
fsgd_rowcache_reader_t *fsgd_rowcache_open(const char *path, fsgd_rowcache_info_t *info, int *why, char *err,
                                           size_t errsz);

/* Clears out and reads up to max_rows rows of the current section into it.
 * Returns rows read (0 at the section's end) or a negative error naming the
 * path, the section and what is wrong. */
long fsgd_rowcache_read(fsgd_rowcache_reader_t *r, fsgd_csr_t *out, size_t max_rows, char *err, size_t errsz);

/* Goes to the first row of section s. Returns 0 or FSGD_E_IO. */
int fsgd_rowcache_seek(fsgd_rowcache_reader_t *r, fsgd_rowcache_section_t s, char *err, size_t errsz);

/* fsgd_rowcache_seek to the train section. */
int fsgd_rowcache_rewind(fsgd_rowcache_reader_t *r, char *err, size_t errsz);

/* Closes and frees r. NULL is a no-op. */
void fsgd_rowcache_free(fsgd_rowcache_reader_t *r);

#endif
