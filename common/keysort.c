#include "fsgd/keysort.h"

#include <stdlib.h>
#include <string.h>

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void fsgd_keysort(uint32_t *keys, size_t n)
{
    if (n < 64) {
        for (size_t i = 1; i < n; i++) {
            uint32_t k = keys[i];
            size_t j = i;
            for (; j > 0 && keys[j - 1] > k; j--)
                keys[j] = keys[j - 1];
            keys[j] = k;
        }
        return;
    }
    uint32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        qsort(keys, n, sizeof *keys, cmp_u32);
        return;
    }
    /* Four 8-bit passes; a pass whose digit is constant is skipped. */
    uint32_t *src = keys, *dst = tmp;
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(src[i] >> shift) & 0xFF]++;
        if (count[(src[0] >> shift) & 0xFF] == n)
            continue;
        size_t pos = 0;
        for (int d = 0; d < 256; d++) {
            size_t c = count[d];
            count[d] = pos;
            pos += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i] >> shift) & 0xFF]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != keys)
        memcpy(keys, src, n * sizeof *keys);
    free(tmp);
}
