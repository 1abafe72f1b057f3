/* Row blocks: many parsed rows in one binary Kafka message, as fsgd's own
 * producer writes NAME.data (trainer/KAFKA_FORMAT.md, "Row blocks"). A row
 * is parsed once, by the producer; the workers and the aggregator decode
 * it at memory speed, and the broker and the clients handle one message
 * for K rows instead of K. Any other client may still write text rows, one
 * or more lines a message: the readers tell the two apart by the magic
 * (a text row never starts with a NUL byte).
 *
 * Layout (little-endian; varint: LEB128, at most 5 bytes for a u32):
 *   "\0FRB"  magic            u8 version (1)   u32 format id
 *   varint   rows
 *   per row: f64 label, varint (nnz << 1 | ones), varint first column,
 *            varint (gap - 1) for each next column (strictly increasing),
 *            and unless `ones`, nnz f32 values.
 * The format id (fsgd_rowblock_format_id) names what the rows were parsed
 * as: a block written for another format or hash width is refused. */
#ifndef FSGD_ROWBLOCK_H
#define FSGD_ROWBLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/csr.h"

#define FSGD_ROWBLOCK_VERSION 1
#define FSGD_ROWBLOCK_HEADER 9 /* magic, version, format id */

/* 1 when buf (len bytes) starts with a row block's magic. */
int fsgd_rowblock_is(const void *buf, size_t len);

/* The format id of a canonical input spec ("" for LIBSVM; fsgd_rowfmt_input
 * otherwise): FNV-1a over "fsgd-rows:" and the spec. */
uint32_t fsgd_rowblock_format_id(const char *canonical_spec);

/* Most bytes a block of count rows holding nnz nonzeros takes. */
size_t fsgd_rowblock_bound_n(size_t count, size_t nnz);

/* Most bytes fsgd_rowblock_encode writes for rows [first, first + count). */
size_t fsgd_rowblock_bound(const fsgd_csr_t *rows, size_t first, size_t count);

/* Writes rows [first, first + count) of rows (columns strictly increasing)
 * as one block into out (fsgd_rowblock_bound bytes). Returns its length. */
size_t fsgd_rowblock_encode(const fsgd_csr_t *rows, size_t first, size_t count, uint32_t format_id, uint8_t *out);

/* Decodes a block and appends its rows to out. Refused whole, out left as
 * it was: a wrong magic, version or format id, a count past the bytes, a
 * column past 2^32 - 1, a non-finite label or value, bytes left over.
 * err then reads "<src>: row block: <what> at byte N". Returns the rows
 * appended, FSGD_E_FORMAT or FSGD_E_NOMEM. */
long fsgd_rowblock_decode(const uint8_t *buf, size_t len, uint32_t format_id, const char *src, fsgd_csr_t *out,
                          char *err, size_t errsz);

#endif
