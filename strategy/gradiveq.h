/* Private to strategy/ (and its tests and fuzz targets): GradiVeQ's wire
 * pieces, strategy/FORMAT.md "gradiveq". Parsers check everything and name
 * the field and offset of what is wrong; the parsed views point into the
 * caller's bytes. */
#ifndef FSGD_GRADIVEQ_H
#define FSGD_GRADIVEQ_H

#include <stddef.h>
#include <stdint.h>

#define FSGD_GV_MSG_FIXED 44     /* uplink container header */
#define FSGD_GV_SECTION_FIXED 16 /* feedback section header */
#define FSGD_GV_MAX_K 4000       /* largest slice: a section with K = d = 4000 stays below 64 MiB */

typedef struct fsgd_gv_msg {
    int mode;                 /* 0 raw, 1 projections */
    uint32_t basis, d;
    uint64_t rows;
    double energy;            /* Σ g_i² over the slice (mode 1) */
    const uint8_t *inner;     /* an fsgd codec message (codec/FORMAT.md) */
    uint32_t inner_len;
    const uint8_t *proj_le;   /* d little-endian float32 */
} fsgd_gv_msg_t;

typedef struct fsgd_gv_section {
    int mode;                 /* of the next step: 0 raw, 1 projections */
    uint32_t basis, K, d;     /* K = d = 0: no basis carried */
    const uint8_t *keys_le;   /* K little-endian uint32, increasing, < dim */
    const uint8_t *U_le;      /* K*d little-endian float32, column-major */
} fsgd_gv_section_t;

/* Parses an uplink message (dim 0: accept the message's own). The inner
 * message is not decoded here. 0 or a negative fsgd_err. */
int fsgd_gv_msg_parse(const uint8_t *msg, size_t len, uint64_t dim, fsgd_gv_msg_t *out, char *err, size_t errsz);

/* Parses a feedback section for a model of dim weights. */
int fsgd_gv_section_parse(const uint8_t *s, size_t len, uint64_t dim, fsgd_gv_section_t *out, char *err,
                          size_t errsz);

#endif
