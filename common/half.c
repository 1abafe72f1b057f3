/* binary16 conversions (fsgd/half.h). */
#include <math.h>
#include <string.h>

#include "fsgd/half.h"

uint16_t fsgd_half_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return sign | 0x7e00u; /* NaN */
    if (ax >= 0x477ff000u)      /* 65520 and up: past half the last step above 65504 */
        return sign | 0x7c00u;
    if (ax < 0x38800000u) {     /* below 2^-14: a subnormal half, a multiple of 2^-24 */
        float a;
        memcpy(&a, &ax, sizeof a);
        return sign | (uint16_t)lrintf(a * 16777216.0f); /* exact product; lrintf rounds ties to even */
    }
    uint32_t h = ((ax >> 23) - 112u) << 10 | (ax >> 13 & 0x3ffu); /* exponent rebiased 127 -> 15 */
    const uint32_t rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is the right rounding too */
    return sign | (uint16_t)h;
}

float fsgd_half_to_float(uint16_t h)
{
    const uint32_t exp = h >> 10 & 0x1fu, mant = h & 0x3ffu;
    float f;
    if (exp == 0) {
        f = ldexpf((float)mant, -24);
    } else if (exp == 31) {
        f = mant ? NAN : INFINITY;
    } else {
        uint32_t x = (exp + 112u) << 23 | mant << 13;
        memcpy(&f, &x, sizeof f);
    }
    return (h & 0x8000u) ? -f : f;
}

int fsgd_half_fits(const float *v, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!(fabsf(v[i]) < 65520.0f)) /* NaN fails too */
            return 0;
    return 1;
}
