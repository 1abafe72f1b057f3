/* The MQGrad quantizer (codec "mqgrad", wire id 7, codec/FORMAT.md): the
 * number of bits changes during a run (MQGrad's agent chooses it), and every
 * message carries its own bits, so a decoder needs no side channel. These two
 * functions are what an adaptive caller needs beyond fsgd/codec.h. */
#ifndef FSGD_MQGRAD_H
#define FSGD_MQGRAD_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/codec.h"

#define FSGD_MQGRAD_MIN_BITS 2
#define FSGD_MQGRAD_MAX_BITS 16

/* Sets the bits the next encode of an "mqgrad" codec instance uses (the
 * residual, when ef=1, is kept). Returns 0, or FSGD_E_ARG when c is not an
 * mqgrad instance or bits is outside [FSGD_MQGRAD_MIN_BITS,
 * FSGD_MQGRAD_MAX_BITS]. Not thread safe (one instance per stream). */
int fsgd_mqgrad_set_bits(fsgd_codec_t *c, int bits);

/* The bits stored in an mqgrad message's header, without decoding it (the
 * message is not checked beyond its frame's codec id and length): 0 when msg
 * is not an mqgrad message. */
int fsgd_mqgrad_message_bits(const uint8_t *msg, size_t len);

#endif
