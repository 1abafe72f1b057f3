/* Little-endian load/store helpers for wire formats and files. Byte-wise so
 * they are alignment-safe and endian-independent; compilers fold them into
 * single moves on little-endian targets. */
#ifndef FSGD_LE_H
#define FSGD_LE_H

#include <stdint.h>
#include <string.h>

static inline void fsgd_le_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void fsgd_le_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void fsgd_le_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t fsgd_le_get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t fsgd_le_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t fsgd_le_get64(const uint8_t *p)
{
    return (uint64_t)fsgd_le_get32(p) | (uint64_t)fsgd_le_get32(p + 4) << 32;
}
static inline void fsgd_le_putf32(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    fsgd_le_put32(p, u);
}
static inline float fsgd_le_getf32(const uint8_t *p)
{
    uint32_t u = fsgd_le_get32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline void fsgd_le_putf64(uint8_t *p, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    fsgd_le_put64(p, u);
}
static inline double fsgd_le_getf64(const uint8_t *p)
{
    uint64_t u = fsgd_le_get64(p);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

#endif
