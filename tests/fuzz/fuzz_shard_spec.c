/* Fuzz target: a strategy spec on S shards (fsgd_strategy_check_shards,
 * fsgd_strategy_shard_spec). Input: byte 0 the shards (0..255, so out of
 * range too), bytes 1-4 the model's dim (little-endian, its low 24 bits: a
 * strategy's check may allocate a codec of that dim), the rest the spec.
 * Any spec either gives every shard a NUL-terminated spec, or fails with a
 * message; when topk's or gtopk's k=N is split, the budgets add up to N.
 * Never a crash or a read past the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/strategy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5 || size > 300)
        return 0;
    uint32_t shards = data[0];
    uint64_t dim = (uint64_t)data[1] | (uint64_t)data[2] << 8 | (uint64_t)data[3] << 16;
    char spec[300];
    memcpy(spec, data + 5, size - 5);
    spec[size - 5] = '\0';
    char err[512], out[256];
    err[0] = '\0';
    int checked = fsgd_strategy_check_shards(spec, (int)shards, err, sizeof err);
    if (checked < 0 && err[0] == '\0')
        __builtin_trap();
    unsigned long long sum = 0;
    int split = 1;
    for (uint32_t i = 0; i < shards && i < 64; i++) {
        err[0] = '\0';
        memset(out, 'x', sizeof out);
        int rc = fsgd_strategy_shard_spec(spec, dim, i, shards, out, sizeof out, err, sizeof err);
        if (rc < 0) {
            if (err[0] == '\0')
                __builtin_trap(); /* every refusal says why */
            split = 0;
            break;
        }
        if (checked < 0 || memchr(out, '\0', sizeof out) == NULL)
            __builtin_trap(); /* what check refuses is never split */
        const char *k = strstr(out, ":k=");
        if (!k)
            k = strstr(out, ",k=");
        if (k)
            sum += strtoull(k + 3, NULL, 10);
        else
            split = 0;
    }
    /* a k=N the spec gave, split over the shards, adds up to N again */
    const char *given = strncmp(spec, "topk:", 5) == 0 || strncmp(spec, "gtopk:", 6) == 0 ? strstr(spec, ":k=") : NULL;
    if (split && given && shards > 1 && shards <= 64 && strchr(spec, ',') == NULL &&
        sum != strtoull(given + 3, NULL, 10))
        __builtin_trap();
    return 0;
}
