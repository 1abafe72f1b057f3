/* Private: the per-element arithmetic of the FastSGD device encoder, in the
 * subset of C that is also CUDA C++, so the kernels (backend_cuda.cu) and
 * their host emulation (fastsgd_device.c, run by the CPU unit tests) execute
 * the very same code. Every function reproduces a step of the CPU encoder
 * (codec/fastsgd.c, fs_encode) bit for bit; comments say which and why the
 * result is identical. Format: codec/FORMAT.md. Design: CUDA.md. */
#ifndef FSGD_FASTSGD_DEVICE_MATH_H
#define FSGD_FASTSGD_DEVICE_MATH_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define FSD_HD static inline __host__ __device__
#else
#define FSD_HD static inline
#endif

/* Geometry of the device's Σ|v| reduction, fixed (not device dependent) so
 * the emulation follows the same tree: FSD_SUM_BLOCKS blocks of FSD_THREADS
 * threads, each thread a grid-stride sequential sum, then a shared-memory
 * tree per block, then one block of FSD_THREADS threads over the block
 * partials (again a tree). */
#define FSD_THREADS 256
#define FSD_SUM_BLOCKS 128
#define FSD_GRID (FSD_SUM_BLOCKS * FSD_THREADS)

/* What the device reports to the host after the value pass (the only data
 * copied back before the message itself). */
typedef struct fsd_summary {
    double dsum;        /* Σ|v| by the device tree (not the CPU's order) */
    float S;            /* the CPU encoder's float sum, exactly */
    float mx;           /* largest |v| */
    int ambiguous;      /* 1: dsum did not pin S down; S came from the CPU's lane order */
    int lbase, lhi;     /* kept levels [lbase, lhi]; none when lhi < lbase */
    uint32_t count;     /* values kept (the message's count) */
    uint32_t orall;     /* OR of the key deltas: bitlen = M */
    uint32_t nonfinite; /* index of the first non-finite value, UINT32_MAX if none */
    uint32_t pad;
    unsigned long long hist[33]; /* key deltas by bit length */
} fsd_summary_t;

FSD_HD uint32_t fsd_f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* codec_bitlen (codec_internal.h): bit length of x, 0 for 0. */
FSD_HD int fsd_bitlen(uint32_t x)
{
#ifdef __CUDA_ARCH__
    return 32 - __clz((int)x);
#else
    return x ? 32 - __builtin_clz(x) : 0;
#endif
}

FSD_HD int fsd_nonfinite(float v) { return (fsd_f2u(v) & 0x7f800000u) == 0x7f800000u; }

/* ------------------------------------------------------------ the sum S */

/* The CPU's float S from its double sum: rounded to nearest, saturating at
 * FLT_MAX. Nondecreasing in x, which the interval test below relies on. */
FSD_HD float fsd_sum_to_float(double x) { return x > (double)FLT_MAX ? FLT_MAX : (float)x; }

/* One of the CPU's four accumulators, in its order: lane j sums |v_i| for
 * i ≡ j (mod 4) below n rounded down to a multiple of 4, in increasing i;
 * lane 0 then adds the tail. Each |v| is converted to double and added with
 * one IEEE double addition, exactly as `s0 += a0` in fs_encode. */
FSD_HD double fsd_lane_sum(const float *vals, size_t n, int lane)
{
    size_t full = n & ~(size_t)3;
    double s = 0;
    for (size_t i = (size_t)lane; i < full; i += 4)
        s += (double)fabsf(vals[i]);
    if (lane == 0)
        for (size_t i = full; i < n; i++)
            s += (double)fabsf(vals[i]);
    return s;
}

/* fs_encode's combination of its lanes. */
FSD_HD double fsd_lanes_combine(double s0, double s1, double s2, double s3) { return (s0 + s1) + (s2 + s3); }

/* Decides the CPU's S from the device's sum D of the same n values.
 *
 * All terms are >= 0, so any summation tree whose leaves pass through at
 * most h additions is within γ_h·E of the exact sum E (Higham, Accuracy and
 * Stability, §4.2; γ_h = hu/(1-hu), u = 2^-53). The CPU's lanes have at most
 * n/4 + 3 terms and two more additions above them: h_cpu <= n/4 + 5. The
 * device tree: ceil(n/FSD_GRID) per thread, 8 levels per block, 8 over the
 * partials: h_dev <= n/FSD_GRID + 17. Hence |C - D| <= (γ_cpu + γ_dev)·E with
 * E <= D/(1 - γ_dev), and delta below is more than twice that (and covers
 * the rounding of delta and of D ± delta, each within u·D). Because
 * fsd_sum_to_float is nondecreasing, equal images of D - delta and D + delta
 * mean every double in between, the CPU's C included, gives that float.
 * Returns 1 and sets *S when decided; 0 when the caller must compute the
 * CPU's lane sums (rare: only when E is within ~n·2^-54 relative of a
 * rounding boundary of float, e.g. sums that are exact float midpoints). */
FSD_HD int fsd_sum_decide(double D, size_t n, float *S)
{
    const double u = 1.0 / 9007199254740992.0; /* 2^-53 */
    double h = (double)(n / 4 + 8) + (double)(n / FSD_GRID + 20);
    double delta = 4.0 * h * u * D;
    float lo = fsd_sum_to_float(D - delta), hi = fsd_sum_to_float(D + delta);
    if (lo != hi)
        return 0;
    *S = lo;
    return 1;
}

/* ----------------------------------------------------------- the levels */

/* fsgd_fastsgd_levels (codec/fastsgd.c), the same operations in the same
 * order: a correctly rounded double division, a conversion to float, an
 * exact fma for the sign test and nextafterf: IEEE-exact on the host and on
 * the device (CUDA's double division and fma are correctly rounded), so
 * both produce the identical table. The unit test also compares it with the
 * codec's function directly. */
FSD_HD void fsd_levels(float sum, double b, int n, float *f)
{
    if (n <= 0)
        return;
    f[0] = sum;
    for (int L = 1; L < n; L++) {
        float prev = f[L - 1];
        float x = (float)((double)prev / b);
        while (x < prev && fma((double)x, b, -(double)prev) <= 0)
            x = nextafterf(x, FLT_MAX);
        f[L] = x;
    }
}

/* fs_encode's choice of kept levels: lbase = first level <= the largest
 * |v|, lhi = min(lbase + 127, tau); none (lbase 0, lhi -1) when S is 0 or
 * no level fits. f must have room for tau + 1 entries. */
FSD_HD void fsd_kept_levels(float S, float mx, double b, int tau, float *f, int *lbase_out, int *lhi_out)
{
    int lbase = 0, lhi = -1;
    if (S > 0) {
        fsd_levels(S, b, tau + 1, f);
        while (lbase <= tau && f[lbase] > mx)
            lbase++;
        if (lbase <= tau)
            lhi = lbase + 127 < tau ? lbase + 127 : tau;
        else
            lbase = 0;
    }
    *lbase_out = lbase;
    *lhi_out = lhi;
}

/* Whether |v| = a is sent: fs_encode keeps a >= f[lhi] (`!(a >= thr)`
 * skips), and nothing when no level is kept. */
FSD_HD int fsd_keep(float a, const float *f, int lbase, int lhi) { return lhi >= lbase && a >= f[lhi]; }

/* The level of a kept a: the smallest L in [lbase, lhi] with f[L] <= a.
 * f is nonincreasing, so f[L] <= a is false then true along L, and true at
 * lhi (a >= f[lhi]): a binary search finds the first true. fs_encode gets
 * the same L by a bucket table or a log2 guess, each corrected exactly
 * against the same f ("the smallest L with f[L] <= |v|", FORMAT.md). */
FSD_HD int fsd_level_of(float a, const float *f, int lbase, int lhi)
{
    int lo = lbase, hi = lhi;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (f[mid] <= a)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The value byte: sign << 7 | (L - lbase), the sign from the float's bits. */
FSD_HD uint8_t fsd_value_code(float v, int L, int lbase)
{
    return (uint8_t)((fsd_f2u(v) >> 31) << 7 | (uint32_t)(L - lbase));
}

/* ------------------------------------------------------------- the keys */

/* fsgd_fastsgd_paper_lengths: lens[i] = ceil((i+1)·M/2^l). */
FSD_HD void fsd_paper_lengths(int M, int l, uint8_t *lens)
{
    int k = 1 << l;
    for (int i = 0; i < k; i++)
        lens[i] = (uint8_t)(((i + 1) * M + k - 1) / k);
}

/* fs_encode's flag of each bit length j: the smallest i with lens[i] >= j
 * (capped at 2^l - 1). */
FSD_HD void fsd_flag_table(const uint8_t *lens, int l, uint8_t *flag)
{
    int nlev = 1 << l;
    for (int j = 0, k = 0; j <= 32; j++) {
        while (k < nlev - 1 && lens[k] < j)
            k++;
        flag[j] = (uint8_t)k;
    }
}

/* Bits of one key: the l-bit flag, then the delta in lens[flag] bits. */
FSD_HD uint32_t fsd_key_nbits(uint32_t dk, int l, const uint8_t *lens, const uint8_t *flag)
{
    return (uint32_t)l + lens[flag[fsd_bitlen(dk)]];
}

/* The key's code as one number, LSB first: flag, then delta above it; this
 * is what fs_encode's two bitw_put calls append to its LSB-first stream. */
FSD_HD uint64_t fsd_key_code(uint32_t dk, int l, const uint8_t *flag)
{
    return (uint64_t)flag[fsd_bitlen(dk)] | ((uint64_t)dk << l);
}

/* A code of <= 37 bits placed at bit offset off of a stream of 32-bit
 * little-endian words: word off/32 gets w[0], the next w[1], then w[2]
 * (bits past 64). The words of different keys share no bit, so OR-ing them
 * in any order (atomicOr on the device) gives the CPU's byte stream; the
 * stream's padding stays zero because the buffer starts zeroed. */
FSD_HD void fsd_key_place(uint64_t code, uint64_t off, uint32_t w[3])
{
    unsigned s = (unsigned)(off & 31);
    uint64_t lo = code << s;
    w[0] = (uint32_t)lo;
    w[1] = (uint32_t)(lo >> 32);
    w[2] = s ? (uint32_t)(code >> (64 - s)) : 0;
}

#endif
