/* Placeholder registry until codec/ lands: every codec reports not built. */
#include "fsgd/codec.h"

fsgd_codec_t *fsgd_codec_new(const char *spec, uint64_t dim, char *err, size_t errsz)
{
    (void)dim;
    fsgd_err_fmt(err, errsz, FSGD_E_NOT_BUILT, "codec '%s': codecs not built yet", spec);
    return NULL;
}
void fsgd_codec_destroy(fsgd_codec_t *c) { (void)c; }
const char *fsgd_codec_name(const fsgd_codec_t *c) { (void)c; return ""; }
const char *fsgd_codec_spec(const fsgd_codec_t *c) { (void)c; return ""; }
int fsgd_codec_is_lossless(const fsgd_codec_t *c) { (void)c; return 0; }
size_t fsgd_codec_bound(const fsgd_codec_t *c, size_t n) { (void)c; (void)n; return 0; }
int fsgd_codec_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *out,
                      size_t cap, size_t *out_len, char *err, size_t errsz)
{
    return fsgd_err_fmt(err, errsz, FSGD_E_NOT_BUILT, "codecs not built yet");
}
int fsgd_codec_decode(const uint8_t *msg, size_t len, uint64_t dim, fsgd_sparse_t *out, char *err,
                      size_t errsz)
{
    return fsgd_err_fmt(err, errsz, FSGD_E_NOT_BUILT, "codecs not built yet");
}
const char *fsgd_codec_list(void) { return ""; }
