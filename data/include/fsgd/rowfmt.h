/* A job's row format: LIBSVM, or delimited columns hashed by a spec
 * (fsgd/delim.h). The one place that picks the parser for a file or a
 * buffer, so fsgd train, the producer, the workers and the aggregator parse
 * rows the same way from the job's `format`, `hash_bits` and `skip_bad`.
 *
 * Buffers (a line of a file being produced, a Kafka message value) hold rows
 * only: a delimited spec's header line is skipped in files, never looked for
 * in a buffer. With skip_bad a malformed row of a buffer is skipped and
 * counted in the LIBSVM statistics (bad_rows, first_bad), in both formats. */
#ifndef FSGD_ROWFMT_H
#define FSGD_ROWFMT_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"
#include "fsgd/libsvm.h"
#include "fsgd/vw.h"

typedef struct fsgd_rowfmt {
    int hashed;              /* 0: LIBSVM or VW; 1: delimited, hashed by spec */
    int vw;                  /* 1: VW text rows (fsgd/vw.h), hashed by vw */
    fsgd_vw_spec_t vw_spec;  /* vw: the parsed spec with hash_bits applied */
    fsgd_delim_spec_t spec;  /* hashed: the parsed format with hash_bits applied */
    fsgd_libsvm_opts_t opts; /* skip_bad (both formats) and the LIBSVM options */
    uint32_t block_id;       /* the format id of row blocks of these rows (fsgd/rowblock.h) */
    /* Weights parsed rows carry in their labels (fsgd/rowlabel.h), from the
     * keys "row_weights=1" and "class_weight=POS,NEG" (fsgd run folds them
     * into a classification job's format, fsgd_train_fold_weights; a model's
     * recorded input never holds them): */
    int weigh_rows;          /* each row's own weight: VW importance, LIBSVM label:weight */
    double class_pos;        /* > 0: the positive class's rows' weight (then class_neg the negative's) */
    double class_neg;
} fsgd_rowfmt_t;

/* Reads format ("libsvm", "libsvm:bits=B", "criteo", "tsv:...", "csv:...", "vw[:...]";
 * any of them may hold ":row_weights=1" and ":class_weight=POS,NEG" right
 * after its name)
 * and hash_bits (0: the spec's bits; 1..32 override them; for LIBSVM, 1..32
 * hashes the indices into 2^hash_bits columns, fsgd_libsvm_hash_col). Returns 0 or
 * FSGD_E_ARG with err naming the job key ("format: columns: 'kat' is not
 * ...", "hash_bits: 18 is for a hashed format, format is libsvm"). */
int fsgd_rowfmt_init(fsgd_rowfmt_t *f, const char *format, int hash_bits, int skip_bad, char *err, size_t errsz);

/* The feature dimension of a job whose `dim` key is job_dim: a hashed format
 * has 2^bits columns, so job_dim must be 0 or that; LIBSVM keeps job_dim (0:
 * from the data). Returns 0 with *dim set, or FSGD_E_ARG naming `dim`. */
int fsgd_rowfmt_dim(const fsgd_rowfmt_t *f, uint64_t job_dim, uint64_t *dim, char *err, size_t errsz);

/* The canonical spec a model file records (model format v2) into
 * out[0..cap): "" for LIBSVM. */
void fsgd_rowfmt_input(const fsgd_rowfmt_t *f, char *out, size_t cap);

/* Parses the rows of buf[0..len) (no header) and appends them to out; at
 * says where they come from (errors: "topic a.data partition 2 offset
 * 17:1:5: column 3 (num): expected a number, got 'x'") and where they are
 * counted (at NULL: a "<buffer>" from line 1, no stats); malformed rows
 * are skipped when at or f's options ask for it. Blank lines (and LIBSVM
 * comments) give no row. With weigh_rows or class weights every row's label becomes
 * ±weight (fsgd_rowlabel_weigh; rows of weight 0 dropped); VW rows with
 * importance weights but no weigh_rows are refused (FSGD_E_UNSUPPORTED: a
 * regression job reads labels as values). Returns the rows appended or a
 * negative error. */
long fsgd_rowfmt_parse(const fsgd_rowfmt_t *f, const char *buf, size_t len, const fsgd_parse_ctx_t *at,
                       fsgd_csr_t *out, char *err, size_t errsz);

/* 1 when parsed rows' labels are ±weight (weigh_rows, class weights), so
 * label checks read them by class (fsgd_label_set_t.classes). */
int fsgd_rowfmt_weighs(const fsgd_rowfmt_t *f);

/* One Kafka message value of NAME.data: a row block (fsgd/rowblock.h) of
 * this format's rows, or text rows as fsgd_rowfmt_parse reads them (from
 * line 1). A block that does not decode is an error, or with skip_bad one
 * bad row, skipped whole. Returns the rows appended or a negative error. */
long fsgd_rowfmt_parse_msg(const fsgd_rowfmt_t *f, const void *buf, size_t len, const char *src, fsgd_csr_t *out,
                           fsgd_libsvm_stats_t *stats, char *err, size_t errsz);

/* Loads a whole file (a hashed spec's header skipped; LIBSVM parsed on
 * `threads`). Malformed rows: LIBSVM skips them with skip_bad (stats may be
 * NULL); a delimited file always stops at the first. Returns 0 or an error. */
int fsgd_rowfmt_load(const fsgd_rowfmt_t *f, const char *path, int threads, fsgd_csr_t *out,
                     fsgd_libsvm_stats_t *stats, char *err, size_t errsz);

#endif
