/* Fuzz target: fsgd_keys_decode on arbitrary bytes (the first 4 bytes of the
 * input pick the dimension). Whatever decodes must be strictly increasing
 * keys below the dimension and must re-encode to a block that decodes to the
 * same keys; errors leave a message naming an offset or a count. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/keys.h"
#include "fsgd/le.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint64_t dim = 1 + (fsgd_le_get32(data) % (1u << 24));
    data += 4;
    size -= 4;
    uint32_t n = 0;
    size_t sz = 0;
    char err[256];
    if (fsgd_keys_peek(data, size, dim, &n, &sz, err, sizeof err) < 0)
        return 0;
    if (n > dim || sz > size)
        abort();
    uint32_t *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys)
        return 0;
    uint32_t m = 0;
    if (fsgd_keys_decode(data, size, dim, keys, n, &m, err, sizeof err) == 0) {
        if (m != n)
            abort();
        for (uint32_t i = 0; i < m; i++)
            if (keys[i] >= dim || (i && keys[i] <= keys[i - 1]))
                abort();
        size_t cap = fsgd_keys_bound(m), len = 0;
        uint8_t *re = malloc(cap);
        uint32_t *back = malloc((m ? m : 1) * sizeof *back);
        uint32_t m2 = 0;
        if (re && back) {
            if (fsgd_keys_encode(keys, m, re, cap, &len, err, sizeof err) < 0 ||
                fsgd_keys_decode(re, len, dim, back, m, &m2, err, sizeof err) < 0 || m2 != m ||
                (m && memcmp(back, keys, m * sizeof *keys)))
                abort();
        }
        free(re);
        free(back);
    } else if (!strstr(err, "keys:")) {
        abort();
    }
    free(keys);
    return 0;
}
