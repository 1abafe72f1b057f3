/* What every codec fuzz target checks (fuzz_codec, and one target per codec
 * so the fuzzer spends its time in that codec's body checks): the input is
 * decoded as it is, and once more with the CRC re-sealed (and the codec id
 * byte forced when force_id >= 0), so inputs reach the field checks behind
 * the checksum. Whatever decodes must be a valid sparse vector under the
 * message's dimension; a refusal must leave nothing decoded and name an
 * offset. */
#ifndef FSGD_CODEC_FUZZ_H
#define FSGD_CODEC_FUZZ_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/codec.h"
#include "fsgd/crc32c.h"
#include "fsgd/le.h"

static void codec_fuzz_check(const uint8_t *msg, size_t len)
{
    fsgd_sparse_t out = {0};
    char err[256];
    int rc = fsgd_codec_decode(msg, len, 0, &out, err, sizeof err);
    if (rc == 0) {
        uint64_t dim = fsgd_le_get64(msg + 8);
        for (size_t i = 0; i < out.n; i++)
            if (out.keys[i] >= dim || (i && out.keys[i] <= out.keys[i - 1]) || !isfinite(out.vals[i]))
                abort();
    } else if (out.n != 0 || !strstr(err, "offset")) {
        abort();
    }
    fsgd_sparse_free(&out);
}

static int codec_fuzz_input(const uint8_t *data, size_t size, int force_id)
{
    codec_fuzz_check(data, size);
    if (size >= 28 && size < (1u << 20)) {
        uint8_t *copy = malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        if (force_id >= 0)
            copy[5] = (uint8_t)force_id;
        fsgd_le_put32(copy + size - 4, fsgd_crc32c(0, copy, size - 4));
        codec_fuzz_check(copy, size);
        free(copy);
    }
    return 0;
}

#endif
