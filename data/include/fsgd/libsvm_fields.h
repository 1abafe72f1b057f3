/* Fields of LIBSVM rows and their crosses, as VW crosses namespaces.
 *
 * A field is a set of index ranges named by a letter: the spec
 * "a:1-14,b:15-100,c:101" (name:lo-hi or name:index, indices as the file
 * writes them; a name's first character is its letter, so "user:1-9" is
 * field u; one letter may own several ranges; ranges may not overlap).
 * An index in no range is a plain feature, in no cross. Crosses are VW's
 * terms over field letters: "ab", "abc", "::" (every pair of fields, a
 * field with itself included). A cross of entries i1..ik (0-based columns
 * before hashing) with values v1..vk is one entry of value v1*...*vk at
 * fsgd_libsvm_fields_cross_col(i1..ik); a term repeating the letter
 * before it (aa, aab) takes each unordered combination once (x*y, not
 * also y*x; x*x included), as VW does. */
#ifndef FSGD_LIBSVM_FIELDS_H
#define FSGD_LIBSVM_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#define FSGD_LIBSVM_MAX_RANGES 64
#define FSGD_LIBSVM_MAX_TERMS 32
#define FSGD_LIBSVM_MAX_ORDER 4

typedef struct fsgd_libsvm_fields {
    int n_ranges;
    uint64_t lo[FSGD_LIBSVM_MAX_RANGES], hi[FSGD_LIBSVM_MAX_RANGES]; /* inclusive, as the file writes them */
    char letter[FSGD_LIBSVM_MAX_RANGES];
    int n_terms; /* crosses; 0: none */
    uint8_t term_len[FSGD_LIBSVM_MAX_TERMS];
    char term[FSGD_LIBSVM_MAX_TERMS][FSGD_LIBSVM_MAX_ORDER]; /* field letters; "::" every pair */
} fsgd_libsvm_fields_t;

/* Adds the ranges of spec ("a:1-14,b:15-100"; '=' may stand for ':', as the
 * canonical text writes it) to f. Returns 0 or FSGD_E_ARG naming the bad
 * part ("fields: 'b:9-3': the range ends before it starts"). */
int fsgd_libsvm_fields_parse(fsgd_libsvm_fields_t *f, const char *spec, char *err, size_t errsz);

/* Adds the ranges of a map file's text[0..len) (--fields @FILE): a line
 * "INDEX NAME" or "FIRST-LAST NAME" (whitespace between; '#' starts a
 * comment; blank lines skipped); consecutive indices of one field on
 * consecutive lines make one range. src names the file in errors
 * ("fields: map.txt:3:1: expected 'INDEX NAME' ..., got 'x'"). Returns 0 or
 * FSGD_E_ARG. */
int fsgd_libsvm_fields_parse_map(fsgd_libsvm_fields_t *f, const char *text, size_t len, const char *src, char *err,
                                 size_t errsz);

/* Adds crosses ("ab,abc", "::") over the fields of f (parsed first): a
 * letter that names no field is FSGD_E_ARG ("interactions: 'ax': no field
 * 'x' in fields a, b"). Returns 0 or FSGD_E_ARG. */
int fsgd_libsvm_fields_add_terms(fsgd_libsvm_fields_t *f, const char *terms, char *err, size_t errsz);

/* The canonical text "a=1-14,b=15-100" of the ranges and "ab,abc" of the
 * crosses (what a model's input spec records). 0 or FSGD_E_NOSPACE. */
int fsgd_libsvm_fields_format(const fsgd_libsvm_fields_t *f, char *ranges, size_t rcap, char *terms, size_t tcap);

#endif
