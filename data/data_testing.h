/* Private to data/ and its tests (the Makefile's PRIVATE_data): pieces of
 * the readers, the generator and the row cache that tests reach directly;
 * other modules go through fsgd_delim_load, fsgd_gen_* and
 * fsgd_rowcache_create_stream. */
#ifndef FSGD_DATA_TESTING_H
#define FSGD_DATA_TESTING_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"
#include "fsgd/delim.h"
#include "fsgd/gen.h"
#include "fsgd/rowcache.h"

/* The column (< 2^bits) that column number col with value text[0..len) hashes to. */
uint32_t fsgd_delim_hash(const fsgd_delim_spec_t *spec, size_t col, const char *text, size_t len);

/* Parses the lines of buf[0..len) (a header line first when spec says so)
 * and appends the rows to out; src names the origin in errors. Returns the
 * rows appended or a negative error ("src:line:col: ..."). */
long fsgd_delim_parse(const char *buf, size_t len, const fsgd_delim_spec_t *spec, const char *src, fsgd_csr_t *out,
                      char *err, size_t errsz);

/* The weight of 0-based feature col (0 for most features). */
float fsgd_gen_weight(const fsgd_gen_t *g, uint32_t col);

/* Creates (truncates) path. NULL with err set on failure. */
fsgd_rowcache_writer_t *fsgd_rowcache_create(const char *path, char *err, size_t errsz);

#endif
