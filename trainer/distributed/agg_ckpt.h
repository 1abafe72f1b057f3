/* The aggregator's checkpoint decoder (KAFKA_FORMAT.md, "Checkpoint"),
 * exposed for tests and the fuzz target. Private to trainer/distributed/. */
#ifndef FSGD_DIST_AGG_CKPT_H
#define FSGD_DIST_AGG_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* Decodes checkpoint bytes p[0, len) exactly as a restarting aggregator
 * does, against the data it would have found: dataset_rows rows, mdim
 * weights, and expect's partitions (count, start and end offsets). Returns 1
 * when the checkpoint would be restored, or a negative error with err set.
 * When restored and reenc is not NULL, *reenc gets the checkpoint the
 * restored state writes (malloc'd, *reenc_len bytes; the caller frees). */
int fsgd_agg_ckpt_check(const uint8_t *p, size_t len, uint64_t dataset_rows, uint64_t mdim, const fsgd_wire_state_t *expect,
                   uint8_t **reenc, size_t *reenc_len, char *err, size_t errsz);

#endif
