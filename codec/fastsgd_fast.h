/* Private to codec/ (and its tests): the exact fast paths of fastsgd.c. */
#ifndef FSGD_FASTSGD_FAST_H
#define FSGD_FASTSGD_FAST_H

#include <stddef.h>
#include <stdint.h>

/* Fills f[from..n) from f[from-1] (1 <= from), giving exactly the values
 * fsgd_fastsgd_levels gives: each level is the smallest float strictly
 * greater than f[L-1]/b (that is what "nearest, nudged up while f[L]*b <=
 * f[L-1]" amounts to), found with one multiply and a bit operation, and the
 * reference's division + fma step whenever the product could be within
 * rounding error of a float (or below the normal range). */
void fsgd_fastsgd_levels_from(double b, int from, int n, float *f);

/* Σ|v| the codec's way (four double lanes 0,1,2,3 round robin over the
 * entries, the tail in lane 0, sum = (s0 + s1) + (s2 + s3)), the largest |v|
 * and the smallest nonzero |v| (+inf when all are zero). */
double fsgd_fastsgd_abs_sum(const float *vals, size_t n, float *mx, float *mn);

#endif
