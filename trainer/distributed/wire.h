/* Bodies of the fsgd messages (trainer/KAFKA_FORMAT.md). Private to trainer/distributed/. */
#ifndef FSGD_DIST_WIRE_H
#define FSGD_DIST_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/sparse.h"

/* Step state that opens every model message: what the next step is. */
typedef struct fsgd_wire_state {
    uint32_t epoch;     /* 1-based epoch the next step belongs to */
    uint32_t nparts;
    uint64_t adam_t;
    uint64_t *start;    /* first offset of the epoch per data partition */
    uint64_t *pos;      /* next offset per data partition */
    uint64_t *end;      /* end offset (exclusive) per partition */
    uint32_t *quota;    /* rows to take per partition in the next step */
} fsgd_wire_state_t;

typedef struct fsgd_wire_range {
    uint32_t part;
    uint64_t start, end;
} fsgd_wire_range_t;

typedef struct fsgd_wire_grad {
    uint32_t epoch;
    uint32_t nranges;
    uint64_t rows;
    double loss_sum, t_grad, t_encode;
    uint64_t raw_entries;
    fsgd_wire_range_t *ranges; /* borrowed / malloc'd by parse (caller frees) */
    const uint8_t *codec; /* borrowed */
    uint32_t codec_len;
} fsgd_wire_grad_t;

/* A packed delta whose values LZ4 shrank by less than a tenth: the next
 * FSGD_WIRE_LZ4_RETRY - 1 go raw. */
#define FSGD_WIRE_LZ4_RETRY 16

typedef struct fsgd_wire_buf {
    uint8_t *p;
    size_t n, cap;
    unsigned lz4_skip; /* packed deltas: messages to send raw before LZ4 is tried again */
} fsgd_wire_buf_t;

int fsgd_wire_put(fsgd_wire_buf_t *b, const void *src, size_t n);
/* n more bytes at the end of b for the caller to write (NULL: out of memory). */
uint8_t *fsgd_wire_space(fsgd_wire_buf_t *b, size_t n);
int fsgd_wire_u32(fsgd_wire_buf_t *b, uint32_t v);
int fsgd_wire_u64(fsgd_wire_buf_t *b, uint64_t v);
int fsgd_wire_f32(fsgd_wire_buf_t *b, float v);
int fsgd_wire_f64(fsgd_wire_buf_t *b, double v);

int fsgd_wire_state_alloc(fsgd_wire_state_t *s, uint32_t nparts);
void fsgd_wire_state_free(fsgd_wire_state_t *s);
int fsgd_wire_state_copy(fsgd_wire_state_t *dst, const fsgd_wire_state_t *src);
int fsgd_wire_state_put(fsgd_wire_buf_t *b, const fsgd_wire_state_t *s);
/* Parses a state at *off, advancing it. s is (re)allocated. */
int fsgd_wire_state_get(const uint8_t *p, size_t len, size_t *off, fsgd_wire_state_t *s, char *err, size_t errsz);

int fsgd_wire_grad_put(fsgd_wire_buf_t *b, const fsgd_wire_grad_t *g);
int fsgd_wire_grad_get(const uint8_t *p, size_t len, uint32_t max_parts, fsgd_wire_grad_t *g, char *err, size_t errsz);

/* Delta: u64 n, u32 keys[n] strictly increasing < dim, f32 vals[n]. */
int fsgd_wire_delta_put(fsgd_wire_buf_t *b, const uint32_t *keys, const float *vals, size_t n);
int fsgd_wire_delta_get(const uint8_t *p, size_t len, size_t *off, uint64_t dim, fsgd_sparse_t *out, char *err,
                   size_t errsz);

/* Packed delta (frame kind 4): a fsgd/keys.h block of the n keys, then
 * u8 value format (0 raw, 1 LZ4 block), 3 reserved zero bytes, u32 stored_len,
 * stored_len bytes: the n f32 values (LZ4-compressed when format 1). The
 * encoder picks LZ4 only when it is smaller. */
int fsgd_wire_pdelta_put(fsgd_wire_buf_t *b, const uint32_t *keys, const float *vals, size_t n, char *err, size_t errsz);
int fsgd_wire_pdelta_get(const uint8_t *p, size_t len, size_t *off, uint64_t dim, fsgd_sparse_t *out, char *err,
                    size_t errsz);

/* Coded delta (frame kind 5, the compressed downlink, fsgd/downlink.h):
 * u8 flags (bit 0: check present), 3 reserved zero bytes, u32 check (CRC32C
 * of the replica after this update, fsgd_sagg_downlink_check; 0 when absent),
 * u32 n_applied, u32 applied[n_applied] (the senders whose gradients this
 * step applied, increasing), u32 msg_len, msg_len bytes: an fsgd codec
 * message (codec/FORMAT.md) of the update every replica adds. */
#define FSGD_WIRE_CDELTA_CHECK 1u
typedef struct fsgd_wire_cdelta {
    uint32_t flags, check, n_applied;
    const uint8_t *applied; /* n_applied little-endian u32, borrowed */
    const uint8_t *msg;     /* borrowed */
    uint32_t msg_len;
} fsgd_wire_cdelta_t;
int fsgd_wire_cdelta_put(fsgd_wire_buf_t *b, uint32_t flags, uint32_t check, const uint32_t *applied,
                         uint32_t n_applied, const uint8_t *msg, uint32_t msg_len);
int fsgd_wire_cdelta_get(const uint8_t *p, size_t len, size_t *off, fsgd_wire_cdelta_t *d, char *err, size_t errsz);
/* 1 when sender is in the delta's applied list. */
int fsgd_wire_cdelta_applied(const fsgd_wire_cdelta_t *d, uint32_t sender);

/* Strategy feedback section (frame flag FSGD_KFLAG_SECTION, right after the
 * state): u32 len (1 .. FSGD_WIRE_SECTION_MAX), len bytes the strategy
 * defines (strategy/FORMAT.md). Sets *sec (borrowed) and *slen. */
#define FSGD_WIRE_SECTION_MAX (64u << 20)
int fsgd_wire_section_get(const uint8_t *p, size_t len, size_t *off, const uint8_t **sec, size_t *slen, char *err,
                          size_t errsz);

/* Snapshot: u32 kind, u32 has_bias, f32 bias, u64 dim, u64 n, f32 w[n].
 * A shard's snapshot (flag FSGD_WIRE_MODEL_SHARD) adds u32 shard, u32
 * shards after n and holds only that shard's nloc weights, in local key
 * order (fsgd/shard.h); dim and n stay the whole model's. */
typedef struct fsgd_wire_model {
    uint32_t kind, has_bias;
    float bias;
    uint64_t dim, n;
    uint32_t shard, shards; /* 0 and 1 when not sharded */
    uint64_t nloc;          /* weights this message holds: n, or the shard's part */
    const uint8_t *w;  /* dense: n little-endian floats, borrowed; NULL when sparse */
    const uint8_t *kv; /* sparse: nnz (u32 index, f32 weight) pairs, indices increasing, borrowed */
    uint64_t nnz;
    int sparse;        /* the weights come as pairs */
} fsgd_wire_model_t;
/* The has_bias word's bit 1: the weights that are not +0.0 as (index,
 * weight) pairs, written when that is smaller (a fresh model, an L1 one,
 * a wide one early on: KAFKA_FORMAT.md). */
#define FSGD_WIRE_MODEL_SPARSE 2u
#define FSGD_WIRE_MODEL_SHARD 4u
int fsgd_wire_model_put(fsgd_wire_buf_t *b, uint32_t kind, uint32_t has_bias, float bias, uint64_t dim, const float *w,
                   uint64_t n);
/* Shard `shard` of `shards` of a model of n weights: w holds its
 * fsgd_shard_dim(n, shard, shards) local weights. shards 1 is the plain
 * snapshot above. */
int fsgd_wire_model_put_shard(fsgd_wire_buf_t *b, uint32_t kind, uint32_t has_bias, float bias, uint64_t dim,
                              const float *w, uint64_t n, uint32_t shard, uint32_t shards);
/* A snapshot of head's model (kind, has_bias, bias, dim, n, shard,
 * shards) in the sparse form, from a sparse table: the weight of local key
 * keys[i] (strictly increasing, nkeys of them) is w[at[i]]; +0.0 weights
 * are left out, as the dense writer's sparse form does. */
int fsgd_wire_model_put_pairs(fsgd_wire_buf_t *b, const fsgd_wire_model_t *head, const uint32_t *keys,
                              const uint32_t *at, const float *w, uint64_t nkeys);
int fsgd_wire_model_get(const uint8_t *p, size_t len, size_t *off, fsgd_wire_model_t *m, char *err, size_t errsz);
/* The header only (kind, bias, dim, n, shard): what a working-set worker,
 * which pulls its values, needs of a snapshot; the weights need not be
 * there (m->w and m->kv stay NULL). */
int fsgd_wire_model_head_get(const uint8_t *p, size_t len, size_t *off, fsgd_wire_model_t *m, char *err,
                             size_t errsz);
/* m's nloc weights into out, dense or sparse alike (a shard's: local keys). */
void fsgd_wire_model_weights(const fsgd_wire_model_t *m, float *out);
/* The same into out[offset + i * stride]: a shard's weights straight into
 * the whole model (stride S, offset the shard), no copy of the part. */
void fsgd_wire_model_weights_strided(const fsgd_wire_model_t *m, float *out, uint64_t stride, uint64_t offset);
/* The same into out that holds zeros already (a fresh calloc): a sparse
 * model writes its pairs only, so the pages it touches follow the bytes
 * present, not the dim it declares (a forged 148-byte snapshot declaring
 * 2^30 weights made a worker touch 4.2 GB; issue 42). */
void fsgd_wire_model_weights_into_zeros(const fsgd_wire_model_t *m, float *out, uint64_t stride, uint64_t offset);

#endif
