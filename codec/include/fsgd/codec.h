/* fsgd gradient codecs: one interface, a registry of named codecs.
 *
 * A codec instance is made from a spec string "name:key=value,key=value"
 * (e.g. "fastsgd:b=1.1,tau=128,l=2", "none:lz4=1", "topk:ratio=0.01,ef=1")
 * for one stream (one sender) and a model dimension. It keeps that stream's
 * state (residuals for error feedback / top-k), so use one instance per
 * sender. Encoding writes into a caller buffer sized by fsgd_codec_bound().
 * Messages are self-describing (see codec/FORMAT.md): decoding needs no
 * instance, only the expected model dimension.
 *
 * This library depends on nothing but libc and liblz4. */
#ifndef FSGD_CODEC_H
#define FSGD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/error.h"
#include "fsgd/sparse.h"

typedef struct fsgd_codec fsgd_codec_t;

/* Parses spec and makes an encoder for a stream over keys < dim (dim <= 2^32).
 * Returns NULL and writes err on an unknown codec, unknown parameter or a
 * value out of range (the message names the parameter). Caller owns the
 * result; free it with fsgd_codec_destroy. */
fsgd_codec_t *fsgd_codec_new(const char *spec, uint64_t dim, char *err, size_t errsz);

/* Frees the instance. NULL is a no-op. */
void fsgd_codec_destroy(fsgd_codec_t *c);

/* The registry name ("fastsgd") and the canonical spec with every parameter
 * spelled out. Strings owned by the instance. */
const char *fsgd_codec_name(const fsgd_codec_t *c);
const char *fsgd_codec_spec(const fsgd_codec_t *c);

/* 1 when decode(encode(g)) == g exactly (codec none), 0 for lossy codecs. */
int fsgd_codec_is_lossless(const fsgd_codec_t *c);

/* Upper bound on the encoded size of a gradient with n entries. */
size_t fsgd_codec_bound(const fsgd_codec_t *c, size_t n);

/* The caller's buffer a message is encoded into (zstd's ZSTD_outBuffer):
 * dst[0..cap), sized by the encoder's bound function. The encoder sets len to
 * the message size, 0 on error. Every encoder of a message (codec, downlink,
 * strategy, backend) takes one. */
typedef struct fsgd_outbuf {
    uint8_t *dst;
    size_t cap;
    size_t len;
} fsgd_outbuf_t;

/* Encodes n (key, value) pairs, keys strictly increasing and < dim, into
 * out (out->len: the message size). Error feedback codecs add their residual
 * first and keep what they did not send. NaN/Inf values are rejected with
 * FSGD_E_NONFINITE (state unchanged). */
int fsgd_codec_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, fsgd_outbuf_t *out,
                      char *err, size_t errsz);

/* A sharded worker splits its gradient by shard, a message a shard. A codec
 * whose choices are relative to the whole gradient takes them from the
 * whole's scale, so that the parts carry the pairs one message of the whole
 * would. fsgd_codec_whole_scale: that scale of whole[0..n), computed once a
 * step for all the parts' codecs of the same spec (FastSGD: its GV-Encoder's
 * Σ|v|, which sets the threshold sum/b^τ and the levels); NAN for codecs
 * that choose per message alone. fsgd_codec_set_whole: the next encodes use
 * it (NAN: the input's own again). FastSGD then sends exactly the whole
 * message's pairs and values with ef=0 and τ <= 128; under error feedback
 * the part's own residual is added to the scale. */
double fsgd_codec_whole_scale(const fsgd_codec_t *c, const float *whole, size_t n);
void fsgd_codec_set_whole(fsgd_codec_t *c, double scale);

/* Decodes a message into out (grown as needed; previous content replaced).
 * Checks magic, version, CRC32C, every length against len, keys < dim and
 * strictly increasing. dim 0 accepts the message's own dimension; otherwise
 * the message's dimension must equal dim. On error out->n is 0 and err names
 * field and offset. Thread safe (no shared state). */
int fsgd_codec_decode(const uint8_t *msg, size_t len, uint64_t dim, fsgd_sparse_t *out, char *err,
                      size_t errsz);

/* What the last fsgd_codec_encode call produced (zeroed before the first). */
typedef struct fsgd_codec_stats {
    uint64_t n_in;         /* entries encoded (the input merged with the residual under ef) */
    uint64_t n_sent;       /* entries in the message */
    uint64_t bytes;        /* message size */
    uint64_t header_bytes; /* common header + codec parameters + CRC */
    uint64_t key_bits;     /* bits spent on keys (0 when not separable, e.g. lz4) */
    uint64_t value_bits;   /* bits spent on values (0 when not separable) */
    /* sketchml only (else 0): its key coder's bits (a 2-bit flag and 1, 2 or
     * 4 delta bytes a key) on its own groups, without the byte padding of
     * each group's flags, so a bench can set key_bits against the coder */
    uint64_t key_coder_bits;
} fsgd_codec_stats_t;

/* Copies the statistics of the last successful encode into *st. */
void fsgd_codec_last_stats(const fsgd_codec_t *c, fsgd_codec_stats_t *st);

/* The error feedback residual of this stream (keys strictly increasing;
 * empty when ef is off). Owned by c, valid until the next encode/reset. */
const fsgd_sparse_t *fsgd_codec_residual(const fsgd_codec_t *c);

/* Forgets the residual (e.g. after a model snapshot). */
void fsgd_codec_reset(fsgd_codec_t *c);

/* The last message was not applied by its receiver: puts the residual back
 * to what it was before that encode, as if the call never happened (the
 * gradient itself is recomputed from the same rows, which were not consumed,
 * so only the residual mass folded into the message needs restoring).
 * Returns 1 when restored, 0 when there is nothing to undo (ef off, no
 * encode since the last undo/reset). */
int fsgd_codec_undo_last(fsgd_codec_t *c);

/* Lists the registered codec names, space separated (static string). */
const char *fsgd_codec_list(void);

#endif
