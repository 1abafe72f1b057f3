/* Vowpal Wabbit's text format: rows of a VW user's files, hashed as VW hashes
 * them, so a column of fsgd is the index VW's --audit / --invert_hash print
 * for the same feature and -b.
 *
 * Grammar per line (VW's, single-line examples):
 *   [label [importance]] [tag] |ns[:value] feature[:value] ... |ns2 ...
 * label: a finite number (-1/1 or 0/1 for logistic); importance: a finite
 * number >= 0 (1 when absent); tag: the last field before the first '|'
 * when it starts with ' (stripped) or touches the '|' ("1 'id7|a x" and
 * "1 id7|a x" both have the tag id7). A namespace is named by the word after
 * '|' (its first character is its letter for --ignore, --keep and crosses),
 * or is the default namespace ' ' when a space follows the '|'; ":value"
 * scales its features. A feature is name, name:number (value), name:string
 * (hashed as the pair), or :number (anonymous). Zero-valued features are
 * dropped, as VW drops them.
 *
 * Hashing (VW 9's "strings" hash): a namespace's seed is
 * hashstring(name, hash_seed) (0 for the default namespace with hash_seed
 * 0); a feature's index is hashstring(name, seed) & (2^bits - 1), where
 * hashstring of an all-digit name is its value plus the seed and of any
 * other name MurmurHash3_x86_32(name, seed). A cross of features i1..ik
 * (-q, --cubic, --interactions) has index ((i1 * 16777619) ^ i2) * 16777619
 * ^ ... masked, and the product of their values; a term repeating the
 * namespace before it (aa, aab) takes each unordered combination once
 * (x*y, not also y*x), as VW does. "::" crosses every pair of namespaces of
 * the row whose letter is printable ASCII (pairs of one namespace included,
 * as VW's -q ::).
 *
 * A row's entries that share a column are summed (VW adds their weights'
 * products), so rows come out sorted and unique, as the other readers'.
 * Strict: the first malformed row stops reading with "file:line:col: expected
 * ..., got '...'"; skip_bad skips and counts it. */
#ifndef FSGD_VW_H
#define FSGD_VW_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/libsvm.h"

#define FSGD_VW_MAX_TERMS 32   /* crosses a spec may hold */
#define FSGD_VW_MAX_ORDER 4    /* namespaces a cross may join */
#define FSGD_VW_SPEC_MAX 512   /* longest canonical spec, terminator included */

typedef struct fsgd_vw_spec {
    unsigned bits;            /* 1..32: 2^bits columns (VW's -b; default 18) */
    uint32_t hash_seed;       /* VW's --hash_seed (default 0) */
    uint8_t ignore[32];       /* bit c set: namespaces whose first character is c are dropped */
    uint8_t keep[32];         /* when any bit is set: only those namespaces are read */
    int n_terms;              /* crosses */
    uint8_t term_len[FSGD_VW_MAX_TERMS];
    char term[FSGD_VW_MAX_TERMS][FSGD_VW_MAX_ORDER]; /* namespace letters; ':' every namespace */
} fsgd_vw_spec_t;

/* Parses "vw[:bits=B][:seed=S][:ignore=LETTERS][:keep=LETTERS][:interactions=T,T...]"
 * ("vw" alone: 18 bits, seed 0, no crosses). A term T is 2..4 namespace
 * letters, "::" for every pair. Returns 0 or FSGD_E_ARG naming what is wrong
 * ("interactions: 'a' crosses fewer than 2 namespaces"). */
int fsgd_vw_spec_parse(const char *text, fsgd_vw_spec_t *s, char *err, size_t errsz);

/* Adds crosses given as VW writes them ("ab", "abc", "::"; several separated
 * by commas) to s. Returns 0 or FSGD_E_ARG. */
int fsgd_vw_spec_add_terms(fsgd_vw_spec_t *s, const char *terms, char *err, size_t errsz);

/* The canonical text of s (what a model records), parsed back to s by
 * fsgd_vw_spec_parse. Returns 0 or FSGD_E_NOSPACE. */
int fsgd_vw_spec_format(const fsgd_vw_spec_t *s, char *out, size_t cap);

/* MurmurHash3_x86_32 of key[0..len) (Austin Appleby's, public domain;
 * written here from its description). */
uint32_t fsgd_vw_murmur3(const void *key, size_t len, uint32_t seed);

/* VW's hashstring: leading and trailing bytes <= ' ' skipped; an all-digit
 * word is its value plus seed (mod 2^32), any other word murmur3(word, seed). */
uint32_t fsgd_vw_hash_string(const char *s, size_t len, uint32_t seed);

/* What VW rows carry beside the CSR: each row's importance weight and tag.
 * Filled in step with the CSR a parse appends to (n rows). */
typedef struct fsgd_vw_extra {
    size_t n;           /* rows */
    double *weight;     /* n importance weights (1 when the row has none) */
    uint64_t *tag_end;  /* n ends of each row's tag in tags (row r: tags[tag_end[r-1] .. tag_end[r])) */
    char *tags;         /* the tags, back to back, no terminators */
    size_t cap, tags_len, tags_cap;
    int any_weight;     /* a row had an importance weight other than 1 */
    uint64_t feature_entries, cross_entries; /* rows' features and crosses (before shared columns are summed) */
    int count_slots;    /* in: set before fsgd_vw_load to count the columns below (a 4·2^bits-byte table;
                           not counted above 28 bits) */
    uint64_t slots_used;     /* distinct columns that got a feature or a cross */
    uint64_t slots_collided; /* of those, columns that two or more distinct features or crosses hashed to
                                (told apart by VW's unmasked hash: features whose 32-bit hashes are equal are
                                one feature to VW too) */
} fsgd_vw_extra_t;

/* Frees the arrays and zeroes x. NULL is a no-op. */
void fsgd_vw_extra_free(fsgd_vw_extra_t *x);

/* Parses the rows of buf[0..len) and appends them to out (and their weights
 * and tags to extra, which may be NULL). at says where the lines come from,
 * whether a malformed row is skipped and where it is counted (at NULL: a
 * "<buffer>" from line 1, strict, no stats). Blank lines give no row.
 * Returns the rows appended or a negative error. */
long fsgd_vw_parse(const char *buf, size_t len, const fsgd_vw_spec_t *s, const fsgd_parse_ctx_t *at,
                   fsgd_csr_t *out, fsgd_vw_extra_t *extra, char *err, size_t errsz);

/* Reads a whole file (gzip and zstd too: fsgd/zsource.h; "-" is stdin) into
 * out and extra (may be NULL). Returns 0 or an error naming path:line:col. */
int fsgd_vw_load(const char *path, const fsgd_vw_spec_t *s, int skip_bad, fsgd_csr_t *out, fsgd_vw_extra_t *extra,
                 fsgd_libsvm_stats_t *stats, char *err, size_t errsz);

/* Takes a chunk of rows (and their weights and tags in extra, which may be
 * NULL) of fsgd_vw_load_chunks; both are emptied after it returns. A
 * negative return stops reading with that error (err set). */
typedef int (*fsgd_vw_chunk_fn)(void *ctx, const fsgd_csr_t *rows, const fsgd_vw_extra_t *extra, char *err,
                                size_t errsz);

/* Entries at which fsgd_vw_load_chunks hands a chunk over whatever its rows
 * (8 MiB with values: 8k rows of a9a with -q aa). */
#define FSGD_VW_CHUNK_NNZ ((size_t)1 << 20)

/* Where fsgd_vw_load_chunks hands its chunks: fn(ctx, ...) every `rows`
 * rows. */
typedef struct fsgd_vw_chunks {
    size_t rows;
    fsgd_vw_chunk_fn fn;
    void *ctx;
} fsgd_vw_chunks_t;

/* fsgd_vw_load handing the rows to chunks->fn in chunks of chunks->rows or
 * FSGD_VW_CHUNK_NNZ entries (the rows of the last 64 KiB of text parsed
 * may go over) instead of keeping them
 * (chunks NULL: keep them all), so a file larger than memory can be read: out
 * (binary or not: fsgd_vw_parse) is the chunk buffer. extra's counts
 * (entries, columns) cover the whole file. Of at (may be NULL) it reads
 * skip_bad and stats (set to the whole file's): errors name path, from
 * line 1. */
int fsgd_vw_load_chunks(const char *path, const fsgd_vw_spec_t *s, const fsgd_parse_ctx_t *at, fsgd_csr_t *out,
                        fsgd_vw_extra_t *extra, const fsgd_vw_chunks_t *chunks, char *err, size_t errsz);

#endif
