/* Fuzz target: the model file reader. Any input must be rejected cleanly or
 * loaded; a loaded model re-encodes to exactly the input bytes (the format
 * has one encoding per model). max_dim bounds the dense allocation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fsgd_model_t m;
    char err[512];
    int rc = fsgd_model_load_mem(&m, data, size, "fuzz.fsgd", 1 << 16, err, sizeof err);
    if (rc < 0) {
        if (m.w || !memchr(err, '\0', sizeof err) || strncmp(err, "fuzz.fsgd: ", 11) != 0)
            abort(); /* failures leave no model and always name the input */
        return 0;
    }
    uint8_t *enc;
    size_t len;
    if (fsgd_model_encode(&m, &enc, &len, err, sizeof err) != 0 || len != size || memcmp(enc, data, size) != 0)
        abort();
    uint32_t col[2] = {0, (uint32_t)(m.dim - 1)};
    float val[2] = {1, 2};
    (void)fsgd_model_margin(&m, col, val, 2);
    free(enc);
    fsgd_model_free(&m);
    return 0;
}
