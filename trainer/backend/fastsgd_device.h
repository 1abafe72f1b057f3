/* Private: the host side of the FastSGD device encoder (CUDA.md), and a
 * sequential emulation of its whole kernel pipeline that the CPU unit tests
 * run against fsgd_codec_encode. The per-element arithmetic lives in
 * fastsgd_device_math.h and is shared with the kernels in backend_cuda.cu. */
#ifndef FSGD_FASTSGD_DEVICE_H
#define FSGD_FASTSGD_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "fastsgd_device_math.h"
#include "fsgd/codec.h"
#include "fsgd/fastsgd_layout.h"

/* What the host derives from the device's summary before the key pass:
 * the key lengths, their flag table, and the message layout. */
typedef struct fsd_plan {
    uint8_t lens[32];
    uint8_t flag[33];
    int M;
    size_t hdr;        /* fastsgd body header: 24 (+ 2^l in optimal mode) */
    uint64_t key_bits; /* Σ (l + len) over the sent keys */
    size_t key_bytes;
    size_t body_len;   /* hdr + count + key_bytes */
} fsd_plan_t;

/* Checks that c can be encoded by the device encoder (fastsgd, ef=0) and
 * fills *p. FSGD_E_UNSUPPORTED (error feedback: the residual is the codec
 * library's state) or FSGD_E_ARG (not fastsgd) otherwise. */
int fsgd_fsd_params(const fsgd_codec_t *c, fsgd_fastsgd_params_t *p, char *err, size_t errsz);

/* From the summary: lengths (paper, or optimal by the codec's dynamic
 * programme), flag table and sizes; the capacity checks and errors of
 * fsgd_codec_encode (cap is the whole message buffer). Also reports a
 * non-finite value as fsgd_codec_encode does (needs keys for the message;
 * keys may be NULL). */
int fsgd_fsd_plan_make(const fsgd_fastsgd_params_t *p, const fsd_summary_t *s, const uint32_t *keys,
                  const float *bad_value, size_t cap, fsd_plan_t *pl, char *err, size_t errsz);

/* Writes the fastsgd body header (FORMAT.md) at body. */
void fsgd_fsd_write_header(uint8_t *body, const fsgd_fastsgd_params_t *p, const fsd_summary_t *s,
                      const fsd_plan_t *pl);

/* How the emulation's Σ|v| is decided: force (in) always takes the CPU-lane
 * fallback; ambiguous (out) is 1 when the sum took it. */
typedef struct fsd_lanes {
    int force;
    int ambiguous;
} fsd_lanes_t;

/* Runs the device pipeline sequentially on the host: the same reduction
 * tree for Σ|v|, the same decision (lanes, may be NULL: decided by the
 * tree, not reported), keep flags, exclusive scans, compaction, deltas,
 * histogram, bit offsets and OR-packing into 32-bit words, then the same
 * host steps. keys strictly increasing and < dim (as the backend's touched
 * keys are). Output: the message in out. Updates c's last-encode stats like
 * fsgd_codec_encode. Same return codes as fsgd_codec_encode. */
int fsgd_fastsgd_device_emulate(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n,
                                fsgd_outbuf_t *out, fsd_lanes_t *lanes, char *err, size_t errsz);

#endif
