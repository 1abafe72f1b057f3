/* For FastSGD encoders outside the codec library (the CUDA backend's device
 * encoder): read a fastsgd instance's parameters, and finish a message whose
 * fastsgd body was written elsewhere exactly as fsgd_codec_encode would
 * (common header, CRC32C, the instance's last-encode statistics).
 * See codec/FORMAT.md and trainer/backend/CUDA.md. */
#ifndef FSGD_FASTSGD_LAYOUT_H
#define FSGD_FASTSGD_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/codec.h"

typedef struct fsgd_fastsgd_params {
    double b;   /* base, 1 < b <= 1e6 */
    int tau;    /* 1..255 */
    int l;      /* 1..5 */
    int levels; /* 0 paper, 1 optimal */
    int ef;     /* error feedback on (encoder state: only the codec library encodes then) */
    uint64_t dim;
} fsgd_fastsgd_params_t;

/* Common header bytes before a codec body and CRC bytes after it. */
#define FSGD_CODEC_FRAME_HEADER 24
#define FSGD_CODEC_FRAME_TRAILER 4

/* Fills *p from a fastsgd instance. Returns 0, or FSGD_E_ARG when c is not
 * a fastsgd codec. */
int fsgd_fastsgd_get_params(const fsgd_codec_t *c, fsgd_fastsgd_params_t *p, char *err, size_t errsz);

/* msg[24 .. 24+body_len) holds a fastsgd body of count entries encoded from
 * n_in inputs with key_bits key bits. Writes the common header and the
 * CRC32C, sets the statistics fsgd_codec_last_stats reports, and returns the
 * message length (24 + body_len + 4). The caller checked the capacity. */
size_t fsgd_fastsgd_finish(fsgd_codec_t *c, uint8_t *msg, size_t body_len, uint32_t count, size_t n_in,
                           uint64_t key_bits);

#endif
