/* Fuzz target: the gtopk feedback section decoder (strategy/FORMAT.md,
 * "gtopk"), through fsgd_sworker_after_step. A worker sends a fixed
 * gradient, then reads the input as the section of the step's model
 * message: it must be refused with FSGD_E_FORMAT naming an offset (the
 * residual unchanged), or accepted with the residual grown by at most the
 * entries sent. The input is tried as it is and with its CRC re-sealed. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/le.h"
#include "fsgd/strategy.h"
#include "strategy_testing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *sec, size_t len)
{
    static const uint32_t keys[8] = {0, 3, 7, 100, 101, 500, 900, 999};
    static const float vals[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    char err[256];
    fsgd_sworker_t *w = fsgd_sworker_new("gtopk:k=5", 1000, 1, err, sizeof err);
    uint8_t msg[512];
    if (!w || fsgd_sworker_encode(w, keys, vals, 8, 1, &(fsgd_outbuf_t){msg, sizeof msg, 0}, err, sizeof err) != 0)
        abort();
    size_t before = fsgd_sworker_residual_entries(w);
    int rc = fsgd_sworker_after_step(w, 1, sec, len, err, sizeof err);
    size_t after = fsgd_sworker_residual_entries(w);
    if (rc == 0) {
        if (after < before || after > before + 5)
            abort();
    } else if (rc != FSGD_E_FORMAT || !strstr(err, "offset") || after != before) {
        abort();
    }
    fsgd_sworker_destroy(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size);
    if (size >= 12 && size < (1u << 20)) {
        uint8_t *copy = malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        fsgd_le_put32(copy + size - 4, fsgd_crc32c(0, copy, size - 4));
        check(copy, size);
        free(copy);
    }
    return 0;
}
