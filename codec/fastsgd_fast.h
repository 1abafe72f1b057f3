/* Private to codec/ (and its tests): the exact fast paths of fastsgd.c. */
#ifndef FSGD_FASTSGD_FAST_H
#define FSGD_FASTSGD_FAST_H

#include <stddef.h>
#include <stdint.h>

/* The decoded magnitudes of levels 0..n-1 for a message with sum `sum` and
 * base b: f[0] = sum and f[L] is the float nearest sum/b^L, nudged up until
 * f[L]*b > f[L-1] exactly. A value |v| is coded with the smallest L such that
 * f[L] <= |v|, which makes |v|/b < f[L] <= |v| exact in float arithmetic
 * (the paper's L = ceil(log_b(sum/|v|)) without rounding surprises). Pure;
 * encoder and decoder call this same function. */
void fsgd_fastsgd_levels(float sum, double b, int n, float *f);

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
