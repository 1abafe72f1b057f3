/* Private to codec/: the codec vtable, instance layout, parameter tables and
 * the bit-level helpers shared by the encoders and decoders. */
#ifndef FSGD_CODEC_INTERNAL_H
#define FSGD_CODEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/codec.h"
#include "fsgd/le.h"

/* Common header (FORMAT.md): magic, version, codec id, flags, dim, count,
 * body length; the body follows; a CRC32C of everything before it ends the
 * message. */
#define FSGD_CODEC_MAGIC "FSGC"
#define FSGD_CODEC_VERSION 1
#define FSGD_CODEC_HDR 24
#define FSGD_CODEC_TRAILER 4
#define FSGD_CODEC_MAX_PARAMS 8

/* Wire ids. Never renumber: they are in every message and golden file. */
enum { CODEC_ID_NONE = 1, CODEC_ID_FASTSGD = 2, CODEC_ID_LOGQUANT = 3, CODEC_ID_TOPK = 4,
       CODEC_ID_EFSIGN = 5, CODEC_ID_SKETCHML = 6, CODEC_ID_MQGRAD = 7 };

typedef enum param_kind { PARAM_INT, PARAM_REAL, PARAM_ENUM } param_kind_t;

typedef struct codec_param_def {
    const char *name;
    param_kind_t kind;
    double lo, hi;        /* inclusive range; lo_open makes the lower bound exclusive */
    int lo_open;
    double def;
    const char *const *choices; /* PARAM_ENUM: NULL-terminated names, value = index */
} codec_param_def_t;

typedef struct fsgd_codec_vt fsgd_codec_vt_t;

struct fsgd_codec {
    const fsgd_codec_vt_t *vt;
    uint64_t dim;
    double p[FSGD_CODEC_MAX_PARAMS]; /* parameter values, in the vt's params order */
    int given[FSGD_CODEC_MAX_PARAMS];
    int ef;                           /* error feedback on */
    char spec[192];
    fsgd_sparse_t residual;           /* error feedback memory (keys strictly increasing) */
    fsgd_sparse_t merged;             /* input + residual of the current call */
    fsgd_sparse_t sent;               /* what the decoder will see, when ef */
    fsgd_sparse_t nextres;            /* residual being built; after an encode, the one before it */
    int can_undo;                     /* nextres holds the residual before the last encode */
    void *scratch;                    /* per-codec work memory, grown as needed */
    size_t scratch_cap;
    fsgd_codec_stats_t last;
    /* fsgd_codec_set_whole: the whole gradient's scale (FastSGD: Σ|v|), for
     * codecs with a whole_scale hook; whole_set 0: the input's own */
    double whole_sum;
    int whole_set;
};

/* Encodes n validated entries (keys strictly increasing, < dim, values finite)
 * into body[0..cap). Sets *body_len, *count (entries in the message) and the
 * key_bits, value_bits and header_bytes (its own parameter bytes) of c->last. When sent != NULL, fills it
 * with exactly what the decoder will produce (for error feedback). */
typedef int (*codec_encode_fn)(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n,
                               uint8_t *body, size_t cap, size_t *body_len, uint32_t *count,
                               fsgd_sparse_t *sent, char *err, size_t errsz);

/* Decodes a body whose header was checked: msg is the whole message, the body
 * is msg[off .. off+blen), count entries, keys < dim. Offsets in errors are
 * from the start of msg. Reserves out with codec_reserve once the body is
 * known to hold count entries; sets out->n. */
typedef int (*codec_decode_fn)(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                               fsgd_sparse_t *out, char *err, size_t errsz);

struct fsgd_codec_vt {
    const char *name;
    uint8_t id;
    int lossy;                          /* error feedback allowed */
    int ef_default;
    const codec_param_def_t *params;    /* without "ef": added for lossy codecs */
    size_t n_params;
    int (*check)(fsgd_codec_t *c, char *err, size_t errsz); /* cross-parameter checks, may be NULL */
    size_t (*bound)(const fsgd_codec_t *c, size_t n);       /* body bytes */
    codec_encode_fn encode;
    codec_decode_fn decode;
    /* may be NULL: the codec's choices do not depend on the rest of the
     * gradient (fsgd_codec_whole_scale) */
    double (*whole_scale)(const float *whole, size_t n);
};

extern const fsgd_codec_vt_t fsgd_codec_vt_none;
extern const fsgd_codec_vt_t fsgd_codec_vt_fastsgd;
extern const fsgd_codec_vt_t fsgd_codec_vt_logquant;
extern const fsgd_codec_vt_t fsgd_codec_vt_topk;
extern const fsgd_codec_vt_t fsgd_codec_vt_mqgrad;
extern const fsgd_codec_vt_t fsgd_codec_vt_efsign;
extern const fsgd_codec_vt_t fsgd_codec_vt_sketchml;

/* Grows c->scratch to at least bytes. Returns 0 or FSGD_E_NOMEM. */
int fsgd_codec_scratch(fsgd_codec_t *c, size_t bytes);

/* Checks and copies n (key, value) pairs stored keys-then-values at p
 * (at = p's offset in the message, for errors): keys < dim and strictly
 * increasing, values finite. out must have room for n. */
int fsgd_codec_take_pairs(const uint8_t *p, size_t at, uint32_t n, uint64_t dim, const char *what,
                          fsgd_sparse_t *out, char *err, size_t errsz);

/* Makes room for count decoded entries (call after checking the body holds
 * them, so a forged count cannot make the decoder allocate). */
static inline int codec_reserve(fsgd_sparse_t *out, uint32_t count, char *err, size_t errsz)
{
    if (fsgd_sparse_reserve(out, count) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "decode: out of memory for %u entries", count);
    return 0;
}

/* Bit length of x (0 for 0). */
static inline int codec_bitlen(uint32_t x) { return x ? 32 - __builtin_clz(x) : 0; }

/* LSB-first bit writer over a buffer known to be large enough. */
typedef struct bitw {
    uint8_t *p;
    uint64_t acc;
    int nb;
} bitw_t;

static inline void bitw_put(bitw_t *w, uint64_t v, int n) /* n <= 32 */
{
    w->acc |= v << w->nb;
    w->nb += n;
    if (w->nb >= 32) {
        fsgd_le_put32(w->p, (uint32_t)w->acc);
        w->p += 4;
        w->acc >>= 32;
        w->nb -= 32;
    }
}

/* Flushes the partial bytes (padding bits zero); returns the end pointer. */
static inline uint8_t *bitw_end(bitw_t *w)
{
    while (w->nb > 0) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->nb -= 8;
    }
    w->nb = 0;
    return w->p;
}

/* LSB-first bit reader that never reads past end. */
typedef struct bitr {
    const uint8_t *p, *end;
    uint64_t acc;
    int nb;
} bitr_t;

static inline void bitr_refill(bitr_t *r)
{
    if (r->end - r->p >= 8) {
        int bytes = (63 - r->nb) >> 3;
        uint64_t w = fsgd_le_get64(r->p);
        r->acc |= (w & ((1ull << (8 * bytes)) - 1)) << r->nb;
        r->p += bytes;
        r->nb += 8 * bytes;
    } else {
        while (r->nb <= 56 && r->p < r->end) {
            r->acc |= (uint64_t)*r->p++ << r->nb;
            r->nb += 8;
        }
    }
}

/* Reads n <= 32 bits into *v; returns 0, or -1 when the input ran out. */
static inline int bitr_get(bitr_t *r, int n, uint32_t *v)
{
    if (r->nb < n) {
        bitr_refill(r);
        if (r->nb < n)
            return -1;
    }
    *v = (uint32_t)(r->acc & ((1ull << n) - 1));
    r->acc >>= n;
    r->nb -= n;
    return 0;
}

/* Bytes of the reader's input consumed so far, rounding a partial byte up. */
static inline size_t bitr_used(const bitr_t *r, const uint8_t *start)
{
    return (size_t)(r->p - start) - (size_t)(r->nb / 8);
}

/* Writes the common frame around a body already at msg + FSGD_CODEC_HDR:
 * magic, version, codec id, dim, count, body length, then the CRC32C after
 * the body. Returns the message size. */
size_t fsgd_codec_frame_write(const fsgd_codec_t *c, uint8_t *msg, uint32_t count, size_t body_len);

/* fsgd_codec_encode for a codec without error feedback (ef=0, else
 * FSGD_E_ARG), which also fills sent (grown as needed) with exactly what
 * fsgd_codec_decode of the message will produce, bit for bit: a sender that
 * must track its receivers' state (downlink.c) needs no decode of its own
 * message. */
int fsgd_codec_encode_sent(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, fsgd_outbuf_t *out,
                           fsgd_sparse_t *sent, char *err, size_t errsz);

#endif
