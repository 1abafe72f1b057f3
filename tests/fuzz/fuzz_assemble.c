/* Fuzz target: `fsgd model assemble`'s stream reader
 * (fsgd_model_assemble_stream, trainer/distributed/assemble.c) over arbitrary
 * bytes: what `kcat -C -t NAME.model -f '%s'` writes, concatenated frames.
 *
 * Input: one control byte, then the stream. Control bit 0: fix up the
 * stream first, walking it frame by frame (each frame's body length is cut
 * to what is left, its CRC32C recomputed), so the fuzzer reaches the
 * reassembly and the model bodies instead of the checksums; bit 1: require
 * the FINAL snapshot. A success must hold a model (weights, dimension below
 * 2^32, kind 1..3); a failure none, and a message. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int fix = data[0] & 1, require_final = (data[0] >> 1) & 1;
    size_t len = size - 1;
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return 0;
    memcpy(p, data + 1, len);
    if (fix) {
        size_t off = 0;
        while (len - off >= FSGD_KFRAME_OVERHEAD) {
            uint8_t *f = p + off;
            size_t left = len - off - FSGD_KFRAME_OVERHEAD;
            uint32_t bl = fsgd_le_get32(f + 32);
            if (bl > left)
                bl = (uint32_t)left;
            fsgd_le_put32(f + 32, bl);
            size_t n = FSGD_KFRAME_HEADER + (size_t)bl;
            fsgd_le_put32(f + n, fsgd_crc32c(0, f, n));
            off += n + 4;
        }
    }
    fsgd_model_t m;
    uint64_t step = 0;
    char err[512] = "";
    int rc = fsgd_model_assemble_stream(p, len, NULL, require_final, &m, &step, err, sizeof err);
    if (rc < 0) {
        if (m.w || !err[0] || !memchr(err, '\0', sizeof err))
            abort();
    } else {
        if (rc != 0 || !m.w || m.dim > ((uint64_t)1 << 32) || m.kind < 1 || m.kind > 3 || (m.has_bias & ~1))
            abort();
        fsgd_model_free(&m);
    }
    free(p);
    return 0;
}
