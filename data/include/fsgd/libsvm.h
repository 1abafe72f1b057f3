/* Streaming LIBSVM reader: text in, CSR batches out.
 *
 * Grammar per line: label (index:value)* [# comment], with optional
 * "qid:N" right after the label (ignored); fields are separated by spaces,
 * tabs, \r, \v or \f (so CRLF works); '#' anywhere ends the line; blank and
 * comment-only lines are skipped (but counted as lines). With row_weights
 * the label may carry an importance weight, "label:weight" (XGBoost's
 * LIBSVM extension; VW's importance): a finite number >= 0, 1 when absent.
 * Indices are
 * 1-based and strictly increasing unless the options say otherwise; they
 * become 0-based uint32 columns (so the largest index is 2^32). Labels are any
 * finite decimal real ("+1", "-1", "0", "1.0", "3.25e-1"), parsed to exactly
 * the double strtod gives; values are finite decimals rounded to float
 * (NaN, inf, hex and |v| > FLT_MAX are errors). Explicit zeros ("3:0") are
 * kept as stored entries, as scikit-learn's load_svmlight_file does.
 *
 * Strict by default: the first malformed row stops reading with
 * "file:line:col: expected ..., got '...'" in err (col is 1-based, in bytes,
 * at the offending token). With skip_bad, malformed rows are skipped and
 * counted (fsgd_libsvm_stats), the first few locations kept. A malformed
 * row never leaves a partial row in the CSR; rows before it stay. */
#ifndef FSGD_LIBSVM_H
#define FSGD_LIBSVM_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/libsvm_fields.h"

typedef struct fsgd_libsvm_opts {
    int zero_based;     /* indices start at 0 (default 0: 1-based) */
    int allow_unsorted; /* accept non-increasing indices within a row; the row is then sorted
                           (duplicates still rejected) */
    int skip_bad;       /* skip malformed rows instead of failing */
    uint64_t max_dim;   /* when nonzero, an index whose 0-based column is >= max_dim is an error */
    size_t read_buf;    /* initial read buffer of a reader in bytes (0: 4 MiB); it grows to hold
                           the longest line */
    unsigned hash_bits; /* 1..32: each 0-based index i becomes column fsgd_libsvm_hash_col(i, hash_bits), so any
                           index fits 2^hash_bits weights (VW's -b); entries of a row that land on one column
                           are summed, as VW adds colliding features; 0: indices kept */
    int binary;         /* fsgd_libsvm_load_threads into an empty out: out is a binary batch
                           (fsgd/csr.h, no values) while every value read is 1, half the
                           memory of CTR rows; the caller must accept one */
    int row_weights;    /* a label may be "label:weight" (weight a finite number >= 0; 1 when absent);
                           without it "1:2" as a label is an error naming the option */
    struct fsgd_libsvm_weights *weights; /* row_weights: when not NULL, each row's weight is appended here,
                                            in the rows' order (one a row appended to the CSR) */
    fsgd_libsvm_fields_t fields; /* fields.n_terms > 0: each row gets the crosses of its fields
                                    (fsgd/libsvm_fields.h), hashed into 2^hash_bits columns and
                                    summed with the features that share a column */
    uint32_t *slots;    /* hash_bits: when not NULL, the caller's zeroed table of 2^hash_bits fingerprints,
                           one a column (fsgd_libsvm_slots_new), which counts the columns the rows' distinct
                           indices and crosses use into the stats' slots_used and slots_collided; threads
                           reading parts of one file may share it (updated atomically; the counts are
                           the same on any number of threads) */
} fsgd_libsvm_opts_t;

/* The row weights a reader read (opts.row_weights): w[i] is the weight of
 * the i-th row appended since the struct was empty. Owned by the caller;
 * fsgd_libsvm_weights_free releases it. */
typedef struct fsgd_libsvm_weights {
    double *w;
    size_t n, cap;
    int any; /* a weight other than 1 was read */
} fsgd_libsvm_weights_t;

/* Frees the array and zeroes the struct. NULL is a no-op. */
void fsgd_libsvm_weights_free(fsgd_libsvm_weights_t *w);

#define FSGD_LIBSVM_BAD_KEPT 5 /* how many bad-row locations are remembered */

typedef struct fsgd_libsvm_stats {
    uint64_t lines;     /* lines read so far */
    uint64_t rows;      /* rows produced */
    uint64_t bad_rows;  /* rows skipped (skip_bad only) */
    uint64_t bytes;     /* bytes consumed */
    uint64_t feature_entries, cross_entries; /* fields crosses: the rows' features and crosses */
    uint64_t slots_used;     /* opts.slots: distinct columns that got an index or a cross */
    uint64_t slots_collided; /* of those, columns that two or more distinct indices or crosses hashed to */
    char first_bad[FSGD_LIBSVM_BAD_KEPT][160]; /* "file:line:col: why" of the first bad rows */
} fsgd_libsvm_stats_t;

/* Where a buffer of rows comes from and what a parse does with a bad row:
 * the arguments the parsers of every format share (fsgd_libsvm_parse,
 * fsgd_vw_parse, fsgd_rowfmt_parse, fsgd_vw_load_chunks). A parser reads
 * it once a call, never per row. */
typedef struct fsgd_parse_ctx {
    const char *src;            /* the origin in error messages ("topic a9a.data partition 2 offset 17");
                                   NULL: "<buffer>" */
    uint64_t first_line;        /* the line number of the buffer's first line */
    int skip_bad;               /* skip malformed rows (counted in stats) instead of failing; a format's
                                   own options may ask for it too (fsgd_libsvm_opts_t.skip_bad) */
    fsgd_libsvm_stats_t *stats; /* updated; NULL: not kept */
} fsgd_parse_ctx_t;

/* skip_bad: counts a malformed row in st and keeps msg among the first
 * FSGD_LIBSVM_BAD_KEPT (cut to the slot, ending "...", when longer). For
 * readers of other formats that report into the same statistics. */
void fsgd_libsvm_note_bad(fsgd_libsvm_stats_t *st, const char *msg);

/* The column of 0-based index i in 2^bits hashed columns (1 <= bits <= 32):
 * the 64-bit finaliser of MurmurHash3 (fmix64) of i, low bits kept, so that
 * indices with a common stride do not share a column. */
uint32_t fsgd_libsvm_hash_col(uint64_t i, unsigned bits);

/* A zeroed fingerprint table for opts.slots of 2^bits columns (4·2^bits
 * bytes), or NULL when bits is 0 or above 28 (not counted) or out of
 * memory; the caller frees it (free). */
uint32_t *fsgd_libsvm_slots_new(unsigned bits);

typedef struct fsgd_libsvm_reader fsgd_libsvm_reader_t;

/* Opens path for streaming ("-" is stdin). opts may be NULL for defaults.
 * Returns NULL with err set ("cannot open 'x': No such file or directory"). */
fsgd_libsvm_reader_t *fsgd_libsvm_open(const char *path, const fsgd_libsvm_opts_t *opts, char *err,
                                       size_t errsz);

/* Reads up to max_rows (> 0) more rows, appending them to out. Returns the
 * number of rows appended (0 at end of input) or a negative fsgd_err_t with err
 * set to "file:line:col: ..." (FSGD_E_PARSE, FSGD_E_RANGE for index bounds,
 * FSGD_E_IO, FSGD_E_NOMEM); rows read before the error stay in out, and
 * later calls return the same error. Does not allocate per row (out and the
 * read buffer grow geometrically). One reader per thread. */
long fsgd_libsvm_read(fsgd_libsvm_reader_t *r, fsgd_csr_t *out, size_t max_rows, char *err, size_t errsz);

/* Counters so far (owned by the reader). */
const fsgd_libsvm_stats_t *fsgd_libsvm_stats(const fsgd_libsvm_reader_t *r);

/* Closes the file and frees the reader. NULL is a no-op. */
void fsgd_libsvm_close(fsgd_libsvm_reader_t *r);

/* Reads a whole file into out (convenience over open/read/close). */
int fsgd_libsvm_load(const char *path, const fsgd_libsvm_opts_t *opts, fsgd_csr_t *out,
                     fsgd_libsvm_stats_t *stats, char *err, size_t errsz);

/* fsgd_libsvm_load with the parsing split over threads (blocks of the file
 * cut at line ends, parsed in parallel, rows appended in file order): the
 * same rows, statistics and error messages as fsgd_libsvm_load, which it
 * is for threads < 2 or stdin. */
int fsgd_libsvm_load_threads(const char *path, const fsgd_libsvm_opts_t *opts, int threads, fsgd_csr_t *out,
                             fsgd_libsvm_stats_t *stats, char *err, size_t errsz);

/* Parses a buffer of one or more lines (e.g. a Kafka message value) and
 * appends the rows to out; at says where the lines come from (at NULL: a
 * "<buffer>" from line 1, no stats). Returns rows appended or a negative
 * error. */
long fsgd_libsvm_parse(const char *buf, size_t len, const fsgd_libsvm_opts_t *opts, const fsgd_parse_ctx_t *at,
                       fsgd_csr_t *out, char *err, size_t errsz);

#endif
