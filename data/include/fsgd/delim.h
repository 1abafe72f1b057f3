/* Delimited text rows (CSV, TSV, Criteo logs) with categorical columns,
 * turned into hashed sparse rows.
 *
 * A spec names the separator and what each column is:
 *   "criteo"                       = "tsv:label,num*13,cat*26" (Criteo's display-ad logs)
 *   "tsv:COLUMNS[:OPT]..."         tab-separated
 *   "csv:COLUMNS[:OPT]..."         comma-separated (no quoting: a field cannot hold a comma)
 * COLUMNS is a comma-separated list of label | num | cat | skip, each with an
 * optional *N repeat ("cat*26"); exactly one label column. OPTs:
 *   header=1   the first line is a header and is skipped (default 0)
 *   bits=B     features hash into 2^B columns, 1 <= B <= 32 (default 24)
 *   seed=S     hash seed (default 0)
 *   interactions=A*B[*C],...   feature crosses of columns (1-based numbers
 *              of num or cat columns, e.g. 15*16 for Criteo's first two
 *              categorical columns); the last option
 *
 * Features: every non-empty field of a num or cat column is one feature of
 * value 1 at column XXH3_64(field text, seed + column number) >> (64 - bits).
 * A num field is first bucketed, as the Criteo challenge's winners did:
 * integers v <= 2 stay v, larger values become floor(ln(v)^2), so the hash
 * sees "b:<bucket>"; a num field that is not a number is an error. Empty
 * fields are missing values and give no feature. Two fields of a row that hash
 * to one column give one entry of value 2 (the row's columns stay strictly
 * increasing). Labels: any finite number; > 0 is the positive class.
 *
 * A cross of columns A*B[*C] is one feature of value 1 when all its fields
 * are present, at the slot of the mix (fmix64 of a running
 * h = (h ^ hB) * 0x100000001b3) of the fields' 64-bit hashes: each distinct
 * pair (triple) of values has a column of its own, up to collisions.
 *
 * Errors name the place like the LIBSVM reader: "file:line:col: column 3
 * (num): expected a number, got 'x'" or "file:line: 39 fields, expected 40".
 *
 * The canonical text of a spec (fsgd_delim_spec_format) is what model files
 * record, so predict hashes exactly as train did. */
#ifndef FSGD_DELIM_H
#define FSGD_DELIM_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"

#define FSGD_DELIM_MAX_COLS 1024
#define FSGD_DELIM_SPEC_MAX 512
#define FSGD_DELIM_MAX_CROSSES 16

enum { FSGD_COL_SKIP = 0, FSGD_COL_LABEL = 1, FSGD_COL_NUM = 2, FSGD_COL_CAT = 3 };

typedef struct fsgd_delim_spec {
    char sep;                /* '\t' or ',' */
    int header;              /* skip the first line */
    unsigned bits;           /* hash space 2^bits */
    uint64_t seed;
    size_t n_cols;
    size_t label_col;
    uint8_t kind[FSGD_DELIM_MAX_COLS];
    int n_crosses;                                   /* interactions= */
    uint8_t cross_len[FSGD_DELIM_MAX_CROSSES];       /* 2 or 3 */
    uint16_t cross[FSGD_DELIM_MAX_CROSSES][3];       /* 0-based column numbers */
} fsgd_delim_spec_t;

/* Adds crosses "A*B,A*B*C" (1-based column numbers of num or cat columns)
 * to spec. Returns 0 or FSGD_E_ARG naming the term ("interactions: column 1
 * is the label, not a num or cat column"). */
int fsgd_delim_spec_add_crosses(fsgd_delim_spec_t *spec, const char *terms, char *err, size_t errsz);

/* Crosses that name their columns ("C1*C2,I3*C7", "age*city") rewritten
 * with their 1-based numbers ("15*16,3*21") into out (cap bytes), for
 * fsgd_delim_spec_add_crosses; numbers stay as written. A name is first a
 * field of header (the file's first line without its newline, a string, split at
 * spec->sep, compared exactly; NULL: no header), then Criteo's
 * conventional name of a column: I<k> the k-th num column, C<k> the k-th
 * cat column (the criteo spec's I1..I13 are columns 2..14, C1..C26 columns
 * 15..40). src names the file in errors. Returns 0, FSGD_E_PARSE when no
 * column, or two header fields, have a name (err: "interactions: 'C1*agee':
 * no column named 'agee' in the header of train.csv (label,age,city) nor
 * among Criteo's names I1, C1..C2 (or give column numbers 1..4)"), or
 * FSGD_E_RANGE when out is too small. */
int fsgd_delim_crosses_by_name(const fsgd_delim_spec_t *spec, const char *terms, const char *header, const char *src,
                               char *out, size_t cap, char *err, size_t errsz);

/* The first line of path (gzip and zstd read as their text; "-" is stdin,
 * whose bytes are then consumed) without its newline (or CR LF) into buf, NUL-terminated;
 * *len its length. Returns 0, FSGD_E_IO (cannot open), a decompression
 * error, or FSGD_E_PARSE when the line does not fit in cap bytes. */
int fsgd_delim_read_header(const char *path, char *buf, size_t cap, size_t *len, char *err, size_t errsz);

/* Parses a spec ("criteo", "tsv:...", "csv:..."). Returns 0 or FSGD_E_ARG
 * with err naming the part ("columns: 'kat' is not label, num, cat or skip"). */
int fsgd_delim_spec_parse(const char *text, fsgd_delim_spec_t *spec, char *err, size_t errsz);

/* Writes the canonical text of spec ("tsv:label,num*13,cat*26:header=0:bits=24:seed=0"),
 * which fsgd_delim_spec_parse reads back to the same spec. Returns 0, or
 * FSGD_E_RANGE when cap is too small. */
int fsgd_delim_spec_format(const fsgd_delim_spec_t *spec, char *out, size_t cap);

typedef struct fsgd_delim_stats {
    uint64_t lines, rows;
    uint64_t slots_used;      /* distinct hash columns that got a feature (counted when counting) */
    uint64_t slots_collided;  /* of those, columns that two or more distinct field values hashed to */
    uint64_t feature_entries, cross_entries; /* rows' fields and crosses (before shared columns are merged) */
} fsgd_delim_stats_t;

/* Reads a whole file ("-": stdin) into out: one row per non-empty line (after
 * the header). count_collisions keeps a 4-byte fingerprint per hash column
 * (4·2^bits bytes) to fill slots_used / slots_collided; collisions between
 * fingerprints that are themselves equal (1 in 2^32) go uncounted. Returns
 * 0 or a negative fsgd_err_t with err "file:line[:col]: ..."; stats may be NULL. */
int fsgd_delim_load(const char *path, const fsgd_delim_spec_t *spec, int count_collisions, fsgd_csr_t *out,
                    fsgd_delim_stats_t *stats, char *err, size_t errsz);

/* fsgd_delim_parse for rows without a header (a Kafka message value): every
 * line of buf is a row, whatever spec->header says; lines are numbered from
 * first_line in errors ("src:first_line:col: ..."). */
long fsgd_delim_parse_rows(const char *buf, size_t len, const fsgd_delim_spec_t *spec, const char *src,
                           uint64_t first_line, fsgd_csr_t *out, char *err, size_t errsz);

/* Called with every chunks->rows rows (fewer at the end); the rows are cleared
 * after it returns. A negative return stops reading with that error. */
typedef int (*fsgd_delim_chunk_fn)(void *ctx, const fsgd_csr_t *rows, char *err, size_t errsz);

/* Where fsgd_delim_load_chunks hands its rows: fn(ctx, ...) with every
 * rows rows. */
typedef struct fsgd_delim_chunks {
    size_t rows;
    fsgd_delim_chunk_fn fn;
    void *ctx;
} fsgd_delim_chunks_t;

/* fsgd_delim_load handing the rows to chunks->fn in chunks instead of
 * keeping them (chunks NULL: keep them all, as fsgd_delim_load), so a file
 * larger than memory can be read: out is the chunk buffer. */
int fsgd_delim_load_chunks(const char *path, const fsgd_delim_spec_t *spec, int count_collisions, fsgd_csr_t *out,
                           const fsgd_delim_chunks_t *chunks, fsgd_delim_stats_t *stats, char *err, size_t errsz);

#endif
