/* IEEE 754 binary16 ("half") values: 11 significant bits, finite up to
 * 65504. A working-set worker's values come as halves when the job's
 * downlink is lossy (trainer/KAFKA_FORMAT.md): half the bytes of float32,
 * a relative error of at most 2^-11 for |v| >= 2^-14. Portable C (no
 * _Float16), round to nearest even. */
#ifndef FSGD_HALF_H
#define FSGD_HALF_H

#include <stdint.h>

/* The largest finite half. */
#define FSGD_HALF_MAX 65504.0f

/* f rounded to the nearest half (ties to even); |f| past the largest half
 * rounds to infinity, NaN stays NaN. */
uint16_t fsgd_half_from_float(float f);

/* The half's value, exactly. */
float fsgd_half_to_float(uint16_t h);

/* 1 when every value of v[0..n) is finite and rounds to a finite half. */
int fsgd_half_fits(const float *v, uint64_t n);

#endif
