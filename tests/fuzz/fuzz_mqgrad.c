/* Fuzz target: the mqgrad codec's decoder (codec id 7) and the mqgrad
 * feedback section. The input is decoded as it is, then with the common
 * frame forced to an mqgrad message (magic, version, codec id, flags, body
 * length fitted, CRC re-sealed) so the fuzzer reaches the body's field checks;
 * its first bytes also go to a worker as a feedback section. Whatever decodes
 * must be a valid sparse vector; every error names an offset; a worker that
 * refused a section still encodes at its old bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/codec.h"
#include "fsgd/crc32c.h"
#include "fsgd/le.h"
#include "fsgd/mqgrad.h"
#include "fsgd/strategy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *msg, size_t len)
{
    fsgd_sparse_t out = {0};
    char err[256] = "";
    int rc = fsgd_codec_decode(msg, len, 0, &out, err, sizeof err);
    if (rc == 0) {
        uint64_t dim = fsgd_le_get64(msg + 8);
        for (size_t i = 0; i < out.n; i++)
            if (out.keys[i] >= dim || (i && out.keys[i] <= out.keys[i - 1]) || !isfinite(out.vals[i]) ||
                (msg[5] == 7 && out.vals[i] == 0)) /* mqgrad never sends its zero point */
                abort();
    } else if (out.n != 0 || !strstr(err, "offset")) {
        abort();
    }
    fsgd_sparse_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size);
    if (size < (1u << 20)) {
        /* as an mqgrad body: the input after a fresh common header */
        size_t len = 24 + size + 4;
        uint8_t *m = malloc(len);
        if (!m)
            return 0;
        memcpy(m, "FSGC", 4);
        m[4] = 1, m[5] = 7, m[6] = m[7] = 0;
        fsgd_le_put64(m + 8, size > 0 && data[0] & 1 ? 1ull << 32 : 1000);
        fsgd_le_put32(m + 16, size > 16 ? (uint32_t)(data[size - 1] % 64) : 0);
        fsgd_le_put32(m + 20, (uint32_t)size);
        memcpy(m + 24, data, size);
        fsgd_le_put32(m + 24 + size, fsgd_crc32c(0, m, 24 + size));
        check(m, len);
        /* a message as given, but with a count that makes its body consistent */
        if (size >= 40) {
            uint32_t kb_n = fsgd_le_get32(m + 24 + 16);
            fsgd_le_put32(m + 16, kb_n);
            fsgd_le_put32(m + 24 + size, fsgd_crc32c(0, m, 24 + size));
            check(m, len);
        }
        free(m);
    }
    /* as a feedback section */
    char err[256] = "";
    fsgd_sworker_t *w = fsgd_sworker_new("mqgrad:bits0=3", 100, 1, err, sizeof err);
    if (!w)
        abort();
    int rc = fsgd_sworker_after_step(w, 1, data, size, err, sizeof err);
    if (rc < 0 && (rc != FSGD_E_FORMAT || !strstr(err, "offset")))
        abort();
    uint32_t k[2] = {3, 50};
    float v[2] = {1.0f, -0.5f};
    uint8_t msg[256];
    fsgd_outbuf_t up = {msg, sizeof msg, 0};
    if (fsgd_sworker_encode(w, k, v, 2, 1, &up, err, sizeof err) != 0)
        abort();
    int bits = fsgd_mqgrad_message_bits(msg, up.len);
    if (size > 0 && rc == 0 && bits != data[1])
        abort();
    if ((size == 0 || rc < 0) && bits != 3)
        abort();
    fsgd_sworker_destroy(w);
    return 0;
}
