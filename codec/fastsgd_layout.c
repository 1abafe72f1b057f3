/* Pieces of fsgd_codec_encode for FastSGD encoders outside this library
 * (fsgd/fastsgd_layout.h). Kept beside codec.c so the frame is written by
 * the code that owns its layout constants. */
#include <string.h>

#include "codec_internal.h"
#include "fsgd/fastsgd_layout.h"

/* Parameter order of fastsgd.c's table, then "ef" (appended by codec.c). */
enum { P_B, P_TAU, P_L, P_LEVELS, P_EF };

_Static_assert(FSGD_CODEC_FRAME_HEADER == FSGD_CODEC_HDR, "frame header");
_Static_assert(FSGD_CODEC_FRAME_TRAILER == FSGD_CODEC_TRAILER, "frame trailer");

int fsgd_fastsgd_get_params(const fsgd_codec_t *c, fsgd_fastsgd_params_t *p, char *err, size_t errsz)
{
    if (!c || c->vt != &fsgd_codec_vt_fastsgd)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s is not fastsgd", c ? c->vt->name : "(null)");
    p->b = c->p[P_B];
    p->tau = (int)c->p[P_TAU];
    p->l = (int)c->p[P_L];
    p->levels = (int)c->p[P_LEVELS];
    p->ef = c->ef;
    p->dim = c->dim;
    return 0;
}

size_t fsgd_fastsgd_finish(fsgd_codec_t *c, uint8_t *msg, size_t body_len, uint32_t count, size_t n_in,
                           uint64_t key_bits)
{
    /* The same frame and statistics as fsgd_codec_encode writes. */
    size_t total = fsgd_codec_frame_write(c, msg, count, body_len);
    int nlev = 1 << (int)c->p[P_L];
    memset(&c->last, 0, sizeof c->last);
    c->last.n_in = n_in;
    c->last.n_sent = count;
    c->last.bytes = total;
    c->last.key_bits = key_bits;
    c->last.value_bits = 8 * (uint64_t)count;
    c->last.header_bytes = 24 + (c->p[P_LEVELS] ? (uint64_t)nlev : 0) + FSGD_CODEC_HDR + FSGD_CODEC_TRAILER;
    return total;
}
