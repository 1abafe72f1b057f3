/* The compressed downlink: the aggregator's side of "every worker applies
 * the same decoded update".
 *
 * The aggregator keeps the true model θ (Adam's) and a replica ρ: exactly
 * what every worker holds, bit for bit. Each step it encodes
 * Δ = θ − ρ over the keys the step touched with a lossy codec and adds to ρ
 * what the message decodes to, as every worker does (the encoder reports it,
 * fsgd_codec_encode_sent: no decode of its own message). What the
 * codec did not carry stays in θ − ρ and goes out the next time the key is
 * touched (or with the next snapshot, which sets ρ = θ): error feedback with
 * no separate residual, and no mass is ever lost.
 *
 * The instance works on whatever key range its caller owns: keys are only
 * ever the ones passed in, so an aggregator split by key range gives each
 * part its own instance over its own slice.
 *
 * Not thread safe; one instance per model replica. */
#ifndef FSGD_DOWNLINK_H
#define FSGD_DOWNLINK_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/codec.h"
#include "fsgd/sparse.h"

typedef struct fsgd_downlink fsgd_downlink_t;

/* A downlink for a model of dim weights, encoding with codec_spec (a lossy
 * codec spec as for fsgd_codec_new; its own error feedback is turned off:
 * θ − ρ is the residual). ρ starts at theta (copied). NULL with err on a bad
 * spec or out of memory. Caller owns the result. */
fsgd_downlink_t *fsgd_downlink_new(const char *codec_spec, uint64_t dim, const float *theta, char *err,
                                   size_t errsz);

/* Frees the instance; NULL is a no-op. */
void fsgd_downlink_destroy(fsgd_downlink_t *d);

/* ρ = θ: after a snapshot, every worker holds θ exactly. */
void fsgd_downlink_sync(fsgd_downlink_t *d, const float *theta);

/* Upper bound on a message over n keys. */
size_t fsgd_downlink_bound(const fsgd_downlink_t *d, size_t n);

/* Encodes Δ = θ − ρ over keys[0..n) (strictly increasing, < dim): at most
 * budget entries (budget 0: all n), first those of largest |Δ| times the
 * number of encodes whose keys included the key (workers read hot keys
 * most often, so their pending Δ costs most), into out.
 * Then adds to ρ what the message decodes to (fsgd_downlink_last), without
 * decoding it. out->len is the message size (an
 * fsgd codec message, codec/FORMAT.md). Returns 0 or a negative fsgd_err. */
int fsgd_downlink_encode(fsgd_downlink_t *d, const float *theta, const uint32_t *keys, size_t n, size_t budget,
                         fsgd_outbuf_t *out, char *err, size_t errsz);

/* The replica ρ (dim floats, owned by d). */
const float *fsgd_downlink_replica(const fsgd_downlink_t *d);

/* Adds a decoded downlink message to a replica: rho[k] += v. Returns 0, or
 * FSGD_E_NONFINITE (rho unchanged) when a sum would not be finite. The same
 * float additions in the same order on every side: replicas stay equal. */
int fsgd_downlink_apply(float *rho, uint64_t dim, const fsgd_sparse_t *update, char *err, size_t errsz);

/* CRC32C over a replica's dim little-endian floats: the check value the
 * aggregator sends now and then so workers can prove they hold ρ. */
uint32_t fsgd_downlink_checksum(const float *rho, uint64_t dim);
/* The same over rho[offset + i * stride], i < n: one shard's replica inside
 * a whole model (fsgd/shard.h: stride S, offset the shard). */
uint32_t fsgd_downlink_checksum_strided(const float *rho, uint64_t n, uint64_t stride, uint64_t offset);

#endif
