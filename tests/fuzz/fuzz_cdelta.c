/* Fuzz target: the coded delta (frame kind 5, trainer/KAFKA_FORMAT.md) as a
 * worker reads it: the body decoder, then the codec message inside, then the
 * additive update on a replica, through the strategy's worker side
 * (fsgd_sworker_downlink_decode/apply), as worker.c calls them.
 *
 * Input: bytes 0..3 the model dimension (1 + x mod 2^20), the rest the body.
 * Whatever decodes must hold: applied senders increasing and findable, the
 * body re-encodes to the same bytes, update keys < dim and increasing, and
 * the replica stays finite (an update that would overflow is refused and
 * leaves it unchanged). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/le.h"
#include "fsgd/strategy.h"

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint64_t dim = 1 + (fsgd_le_get32(data) % (1u << 20));
    size_t len = size - 4;
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return 0;
    memcpy(p, data + 4, len);
    fsgd_wire_cdelta_t cd;
    size_t off = 0;
    char err[256] = "";
    if (fsgd_wire_cdelta_get(p, len, &off, &cd, err, sizeof err) < 0) {
        if (!err[0])
            abort();
        free(p);
        return 0;
    }
    if (off > len)
        abort();
    for (uint32_t i = 0; i < cd.n_applied; i++)
        if (!fsgd_wire_cdelta_applied(&cd, fsgd_le_get32(cd.applied + 4 * i)))
            abort();
    uint32_t *applied = malloc((cd.n_applied ? cd.n_applied : 1) * sizeof *applied);
    for (uint32_t i = 0; applied && i < cd.n_applied; i++)
        applied[i] = fsgd_le_get32(cd.applied + 4 * i);
    fsgd_wire_buf_t b = {0};
    if (applied && fsgd_wire_cdelta_put(&b, cd.flags, cd.check, applied, cd.n_applied, cd.msg, cd.msg_len) == 0 &&
        (b.n != off || memcmp(b.p, p, off)))
        abort();
    free(b.p);
    free(applied);
    fsgd_sparse_t u = {0};
    if (fsgd_sworker_downlink_decode(cd.msg, cd.msg_len, dim, &u, err, sizeof err) == 0) {
        float *rho = calloc(dim, sizeof *rho);
        if (rho) {
            for (size_t i = 0; i < u.n; i++)
                if (u.keys[i] >= dim || (i && u.keys[i] <= u.keys[i - 1]))
                    abort();
            if (fsgd_sworker_downlink_apply(rho, dim, &u, err, sizeof err) == 0)
                for (size_t i = 0; i < u.n; i++)
                    if (!isfinite(rho[u.keys[i]]))
                        abort();
            free(rho);
        }
    }
    fsgd_sparse_free(&u);
    free(p);
    return 0;
}
