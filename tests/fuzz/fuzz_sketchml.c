/* Fuzz target: the sketchml decoder (codec id 6). The input is decoded as a
 * whole message, and once more with the codec id forced to 6 and the CRC
 * re-sealed, so the fuzzer reaches the body checks of this codec (the
 * corpus: tests/golden/codec/v1/sketchml_*.bin). Whatever decodes must be a
 * valid sparse vector under the message's dimension; a refusal must name
 * an offset. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/codec.h"
#include "fsgd/crc32c.h"
#include "fsgd/le.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *msg, size_t len)
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size);
    if (size >= 28 && size < (1u << 20)) {
        uint8_t *copy = malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        copy[5] = 6;
        fsgd_le_put32(copy + size - 4, fsgd_crc32c(0, copy, size - 4));
        check(copy, size);
        free(copy);
    }
    return 0;
}
