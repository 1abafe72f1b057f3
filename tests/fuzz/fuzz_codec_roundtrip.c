/* Fuzz target: structured round trips. The first bytes choose a codec spec
 * and a dimension, the rest become a gradient (key gaps and float values);
 * it is encoded, decoded and checked: keys are a subset of the input (all of
 * them for lossless codecs), values keep their sign and never exceed the
 * input's magnitude (exact for lossless), the message fits the bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/codec.h"
#include "fsgd/le.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const specs[] = {
    "fastsgd",        "fastsgd:b=2,tau=10,l=1", "fastsgd:b=1.01,tau=255,l=5", "fastsgd:levels=optimal,l=3",
    "fastsgd:ef=1",   "none",                   "none:lz4=1",                 "logquant",
    "logquant:ef=1",  "topk:k=3",               "topk:ratio=0.5,ef=0",        "fastsgd:b=1000,tau=1,l=2,levels=optimal",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    const char *spec = specs[data[0] % (sizeof specs / sizeof *specs)];
    static const uint64_t dims[] = {1, 7, 1000, 1u << 20, 1ull << 32, (1ull << 32) - 5};
    uint64_t dim = dims[data[1] % 6];
    int steps = 1 + data[2] % 3;
    data += 3;
    size -= 3;
    char err[256];
    fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
    if (!c)
        abort();
    size_t n_max = size / 6 + 1;
    uint32_t *keys = malloc(n_max * 4);
    float *vals = malloc(n_max * 4);
    fsgd_sparse_t out = {0};
    for (int step = 0; step < steps; step++) {
        /* 6 bytes per entry: 2-byte key gap (scaled), 4-byte float */
        size_t n = 0;
        uint64_t k = 0;
        for (size_t i = 0; i + 6 <= size; i += 6) {
            uint64_t gap = fsgd_le_get16(data + i);
            if (gap & 0x8000)
                gap = (gap & 0x7fff) << 17;
            uint64_t key = n ? k + 1 + gap : gap;
            if (key >= dim)
                break;
            float v = fsgd_le_getf32(data + i + 2);
            if (!isfinite(v))
                v = (float)step;
            keys[n] = (uint32_t)key;
            vals[n++] = step ? v * 0.5f : v;
            k = key;
        }
        size_t cap = fsgd_codec_bound(c, n);
        uint8_t *msg = malloc(cap);
        size_t len = 0;
        fsgd_outbuf_t ob = {msg, cap, 0};
        int rc = fsgd_codec_encode(c, keys, vals, n, &ob, err, sizeof err);
        len = ob.len;
        if (rc == FSGD_E_NONFINITE) { /* value + residual overflowed: allowed */
            free(msg);
            continue;
        }
        if (rc != 0 || len > cap)
            abort();
        if (fsgd_codec_decode(msg, len, dim, &out, err, sizeof err) != 0)
            abort();
        int ef = strstr(fsgd_codec_spec(c), "ef=1") != NULL;
        size_t j = 0;
        for (size_t i = 0; i < n && j < out.n; i++) {
            if (keys[i] != out.keys[j])
                continue;
            float v = vals[i], w = out.vals[j++];
            if (fsgd_codec_is_lossless(c) ? memcmp(&v, &w, 4) != 0 : (!ef && (fabsf(w) > fabsf(v) || (w < 0) != (v < 0))))
                abort();
        }
        if (!ef && j != out.n) /* a key that was not in the input */
            abort();
        if (fsgd_codec_is_lossless(c) && out.n != n)
            abort();
        free(msg);
    }
    free(keys);
    free(vals);
    fsgd_sparse_free(&out);
    fsgd_codec_destroy(c);
    return 0;
}
