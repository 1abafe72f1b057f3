/* The bytes of an input file, decompressed when it is gzip or zstd: every row
 * reader takes its input through here, so `--data train.svm.gz` (or .zst, or
 * a compressed stream on stdin) reads as the text it holds. The codec is told
 * by the first bytes (gzip 1f 8b, zstd 28 b5 2f fd), never by the name; any
 * other file is read as it is. Concatenated gzip members and zstd frames are
 * read one after the other, as zcat and zstdcat do.
 *
 * A compressed file is streamed (never memory-mapped): a corrupt stream is
 * an FSGD_E_FORMAT error and a stream that ends inside a member or frame is
 * FSGD_E_TRUNCATED, both naming the file and the compressed byte offset. */
#ifndef FSGD_ZSOURCE_H
#define FSGD_ZSOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef enum fsgd_zsource_codec {
    FSGD_ZSOURCE_PLAIN = 0,
    FSGD_ZSOURCE_GZIP = 1,
    FSGD_ZSOURCE_ZSTD = 2,
} fsgd_zsource_codec_t;

typedef struct fsgd_zsource fsgd_zsource_t;

/* Opens path ("-": stdin, which is not closed) and reads its first bytes to
 * tell the codec. Returns NULL with err set ("cannot open 'x': ...") on
 * failure. One thread at a time may use a source. */
fsgd_zsource_t *fsgd_zsource_open(const char *path, char *err, size_t errsz);

/* Reads up to cap decompressed bytes into buf. Returns the count (> 0), 0 at
 * the end of the input, or a negative fsgd_err_t with err set ("x.gz: corrupt
 * gzip stream at byte 1234 (invalid distance too far back)"); after an error
 * every later call returns the same error. */
ssize_t fsgd_zsource_read(fsgd_zsource_t *z, void *buf, size_t cap, char *err, size_t errsz);

/* The codec the first bytes told. */
fsgd_zsource_codec_t fsgd_zsource_codec(const fsgd_zsource_t *z);

/* "plain", "gzip" or "zstd". */
const char *fsgd_zsource_codec_name(fsgd_zsource_codec_t c);

/* 1 when the underlying file is not a regular file (stdin, a FIFO): the
 * readers bound what they take from one (fsgd/input.h). */
int fsgd_zsource_is_stream(const fsgd_zsource_t *z);

/* Closes the file (not stdin) and frees z. NULL is a no-op. */
void fsgd_zsource_close(fsgd_zsource_t *z);

/* Decompresses a regular gzip or zstd file to its end, keeping nothing:
 * 0 when the whole stream is sound (and at once for a plain file or a
 * stream, which cannot be read twice), else the error fsgd_zsource_read
 * would give. text_bytes (may be NULL) gets the decompressed size, 0 for a
 * plain file or a stream. For writers that cannot take back what they sent
 * (fsgd produce) and for sizing what the text needs (fsgd run). */
int fsgd_zsource_check(const char *path, uint64_t *text_bytes, char *err, size_t errsz);

/* The same source as a read-only stdio stream (fopencookie), for readers
 * built on fread; fclose closes it. NULL with err set on failure. A failed
 * read sets the stream's error flag; fsgd_zsource_file_error then gives the
 * error of the last failed read on the calling thread. */
FILE *fsgd_zsource_fopen(const char *path, char *err, size_t errsz);

/* The code (negative fsgd_err_t) and message of the last read of a
 * fsgd_zsource_fopen stream that failed on this thread, or 0 when none did. */
int fsgd_zsource_file_error(char *err, size_t errsz);

#endif
