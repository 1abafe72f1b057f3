/* FastSGD (GV-Encoder for values, GK-Encoder for keys), as in the paper,
 * with exact float arithmetic for the value levels and an optional optimal
 * choice of the key lengths. Wire layout: codec/FORMAT.md. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "codec_internal.h"
#include "fastsgd_fast.h"
#include "fsgd/fastsgd.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { P_B, P_TAU, P_L, P_LEVELS, P_EF };
static const char *const level_modes[] = {"paper", "optimal", NULL};
static const codec_param_def_t fastsgd_params[] = {
    {"b", PARAM_REAL, 1, 1e6, 1, 1.1, NULL},
    {"tau", PARAM_INT, 1, 255, 0, 128, NULL},
    {"l", PARAM_INT, 1, 5, 0, 2, NULL},
    {"levels", PARAM_ENUM, 0, 1, 0, 0, level_modes},
};

#define BODY_FIXED 24 /* b f64, sum f32, key_bytes u32, tau, l, mode, lbase, M, 3 reserved */

void fsgd_fastsgd_levels(float sum, double b, int n, float *f)
{
    if (n <= 0)
        return;
    f[0] = sum;
    for (int L = 1; L < n; L++) {
        float prev = f[L - 1];
        float x = (float)((double)prev / b);
        /* fma gives the sign of x*b - prev exactly: nudge up until x*b > prev,
         * which is what makes |v|/b < f[L] hold for every coded value. */
        while (x < prev && fma((double)x, b, -(double)prev) <= 0)
            x = nextafterf(x, INFINITY);
        f[L] = x;
    }
}

void fsgd_fastsgd_paper_lengths(int M, int l, uint8_t *lens)
{
    int k = 1 << l;
    for (int i = 0; i < k; i++)
        lens[i] = (uint8_t)(((i + 1) * M + k - 1) / k);
}

uint64_t fsgd_fastsgd_key_bits(const uint64_t hist[33], int l, const uint8_t *lens)
{
    int k = 1 << l;
    uint64_t bits = 0;
    for (int j = 0, i = 0; j <= 32; j++) {
        if (!hist[j])
            continue;
        while (i < k && lens[i] < j)
            i++;
        if (i == k)
            return UINT64_MAX; /* not representable */
        bits += hist[j] * (uint64_t)(l + lens[i]);
    }
    return bits;
}

uint64_t fsgd_fastsgd_optimal_lengths(const uint64_t hist[33], int l, uint8_t *lens)
{
    int k = 1 << l, top = 0;
    uint64_t total = 0;
    for (int j = 0; j <= 32; j++)
        if (hist[j]) {
            top = j;
            total += hist[j];
        }
    /* cum[j] = number of deltas with bit length < j. */
    uint64_t cum[34];
    cum[0] = 0;
    for (int j = 0; j <= 32; j++)
        cum[j + 1] = cum[j] + hist[j];
    /* dp[t][c]: least bits for all lengths <= c using t+1 levels, the highest = c.
     * Cost of a level c covering (c', c]: c * (cum[c+1] - cum[c'+1]). */
    uint64_t dp[32][33];
    int8_t from[32][33];
    for (int c = 0; c <= top; c++) {
        dp[0][c] = (uint64_t)c * cum[c + 1];
        from[0][c] = -1;
    }
    int tmax = k < top + 1 ? k : top + 1;
    for (int t = 1; t < tmax; t++)
        for (int c = 0; c <= top; c++) {
            dp[t][c] = dp[t - 1][c];
            from[t][c] = -2; /* same as with fewer levels */
            for (int p = 0; p < c; p++) {
                uint64_t v = dp[t - 1][p] + (uint64_t)c * (cum[c + 1] - cum[p + 1]);
                if (v < dp[t][c]) {
                    dp[t][c] = v;
                    from[t][c] = (int8_t)p;
                }
            }
        }
    /* Walk back from (tmax-1, top), filling lens from the end; unused levels
     * repeat the smallest chosen length. */
    int pos = k - 1, t = tmax - 1, c = top;
    while (t >= 0) {
        if (from[t][c] == -2) {
            t--;
            continue;
        }
        lens[pos--] = (uint8_t)c;
        if (from[t][c] < 0)
            break;
        c = from[t][c];
        t--;
    }
    while (pos >= 0) {
        lens[pos] = lens[pos + 1];
        pos--;
    }
    return dp[tmax - 1][top] + (uint64_t)l * total;
}

/* ---- levels, fast and exact ------------------------------------------- */

/* One step of fsgd_fastsgd_levels, its own operations. */
static float level_step_ref(float prev, double b)
{
    float x = (float)((double)prev / b);
    while (x < prev && fma((double)x, b, -(double)prev) <= 0)
        x = nextafterf(x, INFINITY);
    return x;
}

#define LOW29 ((1ull << 29) - 1)        /* double mantissa bits below float precision */
#define QMIN ((uint64_t)(1023 - 125) << 52) /* 2^-125: comfortably normal as a float */

/* f[L] from prev = f[L-1] (as a double, exactly a float). The reference
 * rounds prev/b to the nearest float x and moves it up one ulp when x*b <=
 * prev: the result is always the smallest float strictly above the real
 * quotient Q = prev/b. q = prev * (1/b) is within 3 double ulps of Q; when q
 * is more than 8 double ulps from every float (bits below float precision
 * not within 8 of 0 mod 2^29) and a normal float, the floats around q and Q
 * are the same, and the answer is q truncated to float precision plus one
 * float ulp: (bits | LOW29) + 1. Otherwise, rarely, the reference step. */
static inline double level_step(double prev, double ib, double b)
{
    double q = prev * ib;
    uint64_t u;
    memcpy(&u, &q, 8);
    if (__builtin_expect(((u + 8) & LOW29) > 16 && u >= QMIN, 1)) {
        u = (u | LOW29) + 1;
        memcpy(&q, &u, 8);
        return q;
    }
    return (double)level_step_ref((float)prev, b);
}

void fsgd_fastsgd_levels_from(double b, int from, int n, float *f)
{
    if (from < 1 || from >= n)
        return;
    const double ib = 1.0 / b;
    double prev = f[from - 1];
    for (int L = from; L < n; L++) {
        prev = level_step(prev, ib, b);
        f[L] = (float)prev;
    }
}

/* f[0..*top] are known. Returns the smallest L in [start, hi] with f[L] <=
 * stop, computing levels (and raising *top) only as far as needed; hi + 1
 * when there is none. 1 <= start <= *top + 1. */
static int level_search(float *f, int *top, int start, int hi, float stop, double b)
{
    int L = start;
    for (; L <= *top && L <= hi; L++)
        if (f[L] <= stop)
            return L;
    if (L > hi)
        return hi + 1;
    const double ib = 1.0 / b;
    double prev = f[L - 1];
    for (; L <= hi; L++) {
        prev = level_step(prev, ib, b);
        f[L] = (float)prev;
        if (f[L] <= stop)
            break;
    }
    *top = L <= hi ? L : hi;
    return L;
}

/* ---- Σ|v| ------------------------------------------------------------- */

double fsgd_fastsgd_abs_sum(const float *vals, size_t n, float *mxp, float *mnp)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    float mx = 0, mn = INFINITY;
    size_t i = 0;
#if defined(__SSE2__)
    /* Lanes (s0, s1) and (s2, s3) of two SSE2 double vectors: the same
     * additions in the same order as the scalar loop below. */
    const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    const __m128 vinf = _mm_set1_ps(INFINITY), zero = _mm_setzero_ps();
    __m128d a01 = _mm_setzero_pd(), a23 = _mm_setzero_pd();
    __m128 vmx = zero, vmn = vinf;
    for (; i + 4 <= n; i += 4) {
        __m128 a = _mm_and_ps(_mm_loadu_ps(vals + i), absmask);
        a01 = _mm_add_pd(a01, _mm_cvtps_pd(a));
        a23 = _mm_add_pd(a23, _mm_cvtps_pd(_mm_movehl_ps(a, a)));
        vmx = _mm_max_ps(vmx, a);
        vmn = _mm_min_ps(vmn, _mm_or_ps(a, _mm_and_ps(_mm_cmpeq_ps(a, zero), vinf)));
    }
    double d[4];
    float m[8];
    _mm_storeu_pd(d, a01);
    _mm_storeu_pd(d + 2, a23);
    _mm_storeu_ps(m, vmx);
    _mm_storeu_ps(m + 4, vmn);
    s0 = d[0];
    s1 = d[1];
    s2 = d[2];
    s3 = d[3];
    for (int k = 0; k < 4; k++) {
        mx = m[k] > mx ? m[k] : mx;
        mn = m[4 + k] < mn ? m[4 + k] : mn;
    }
#else
    for (; i + 4 <= n; i += 4) {
        float a0 = fabsf(vals[i]), a1 = fabsf(vals[i + 1]), a2 = fabsf(vals[i + 2]), a3 = fabsf(vals[i + 3]);
        s0 += a0;
        s1 += a1;
        s2 += a2;
        s3 += a3;
        float m01 = a0 > a1 ? a0 : a1, m23 = a2 > a3 ? a2 : a3, mm = m01 > m23 ? m01 : m23;
        mx = mm > mx ? mm : mx;
        if (a0 > 0 && a0 < mn)
            mn = a0;
        if (a1 > 0 && a1 < mn)
            mn = a1;
        if (a2 > 0 && a2 < mn)
            mn = a2;
        if (a3 > 0 && a3 < mn)
            mn = a3;
    }
#endif
    for (; i < n; i++) {
        float a = fabsf(vals[i]);
        s0 += a;
        mx = a > mx ? a : mx;
        if (a > 0 && a < mn)
            mn = a;
    }
    *mxp = mx;
    *mnp = mn;
    return (s0 + s1) + (s2 + s3);
}

/* log2 of 1 + (i + 0.5)/1024: a first guess of the level, corrected exactly
 * against the level table. */
static float log2_tab[1024];
static pthread_once_t log2_once = PTHREAD_ONCE_INIT;
static void log2_init(void)
{
    for (int i = 0; i < 1024; i++)
        log2_tab[i] = (float)log2(1.0 + (i + 0.5) / 1024.0);
}

static inline float fast_log2_bits(uint32_t u)
{
    return (float)((int)(u >> 23) - 127) + log2_tab[(u >> 13) & 1023];
}

static inline uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline void store64le(uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    fsgd_le_put64(p, v);
#endif
}

static inline uint64_t load64le(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    return fsgd_le_get64(p);
#endif
}

static size_t fs_bound(const fsgd_codec_t *c, size_t n)
{
    return BODY_FIXED + 32 + n + (n * 37 + 7) / 8;
}

/* The code of one key: l-bit index of the first length >= bitlen(δ), then δ. */
#define KEY_CODE(dk, x, nbx)                                                                                 \
    do {                                                                                                     \
        int j_ = codec_bitlen(dk);                                                                           \
        (x) = (uint64_t)(dk) << l | flag[j_];                                                                \
        (nbx) = nbits[j_];                                                                                   \
    } while (0)

/* Packs the deltas LSB-first: per key the l-bit index of the first length
 * >= bitlen(δ), then δ in that length. 8-byte stores while 8 bytes of room
 * remain before end (G keys per store when G codes of the longest kind fit
 * beside 7 pending bits), bytes after. Returns the end of the stream
 * (padding bits zero) and adds the bits written to *bits. */
static uint8_t *pack_keys(const uint32_t *delta, size_t d, int l, const uint8_t *lens, uint8_t *p,
                          const uint8_t *end, uint64_t *bits)
{
    const int nlev = 1 << l;
    uint8_t flag[33], nbits[33]; /* per bit length j: index, l + length */
    for (int j = 0, k = 0; j <= 32; j++) {
        while (k < nlev - 1 && lens[k] < j)
            k++;
        flag[j] = (uint8_t)k;
        nbits[j] = (uint8_t)(l + lens[k]);
    }
    const unsigned maxn = (unsigned)l + lens[nlev - 1]; /* longest code */
    uint8_t *const start = p;
    uint64_t acc = 0;
    unsigned nb = 0; /* pending bits in acc, < 8 between stores */
    size_t t = 0;
    if (end - p >= 8) {
        const uint8_t *lim = end - 8;
        if (4 * maxn + 7 <= 63) {
            for (; t + 4 <= d && p <= lim; t += 4) {
                uint64_t x0, x1, x2, x3;
                unsigned n0, n1, n2, n3;
                KEY_CODE(delta[t], x0, n0);
                KEY_CODE(delta[t + 1], x1, n1);
                KEY_CODE(delta[t + 2], x2, n2);
                KEY_CODE(delta[t + 3], x3, n3);
                uint64_t x01 = x0 | x1 << n0, x23 = x2 | x3 << n2;
                acc |= (x01 | x23 << (n0 + n1)) << nb;
                nb += n0 + n1 + n2 + n3;
                store64le(p, acc);
                p += nb >> 3;
                acc >>= nb & 56;
                nb &= 7;
            }
        } else if (2 * maxn + 7 <= 63) {
            for (; t + 2 <= d && p <= lim; t += 2) {
                uint64_t x0, x1;
                unsigned n0, n1;
                KEY_CODE(delta[t], x0, n0);
                KEY_CODE(delta[t + 1], x1, n1);
                acc |= (x0 | x1 << n0) << nb;
                nb += n0 + n1;
                store64le(p, acc);
                p += nb >> 3;
                acc >>= nb & 56;
                nb &= 7;
            }
        }
        for (; t < d && p <= lim; t++) {
            uint64_t x;
            unsigned n;
            KEY_CODE(delta[t], x, n);
            acc |= x << nb;
            nb += n;
            store64le(p, acc);
            p += nb >> 3;
            acc >>= nb & 56;
            nb &= 7;
        }
    }
    for (; t < d; t++) {
        uint64_t x;
        unsigned n;
        KEY_CODE(delta[t], x, n);
        acc |= x << nb;
        nb += n;
        while (nb >= 8) {
            *p++ = (uint8_t)acc;
            acc >>= 8;
            nb -= 8;
        }
    }
    *bits += (uint64_t)(p - start) * 8 + nb;
    if (nb)
        *p++ = (uint8_t)acc;
    return p;
}
#undef KEY_CODE

static int fs_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                     size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                     size_t errsz)
{
    const double b = c->p[P_B];
    const int tau = (int)c->p[P_TAU], l = (int)c->p[P_L], optimal = (int)c->p[P_LEVELS];
    const int nlev = 1 << l;
    const size_t hdr = BODY_FIXED + (optimal ? (size_t)nlev : 0);
    pthread_once(&log2_once, log2_init);

    /* sum = Σ|v| (four accumulators, double), the largest and the smallest nonzero |v|. */
    float mx, mn;
    double sum = fsgd_fastsgd_abs_sum(vals, n, &mx, &mn);
    if (c->whole_set) {
        /* one part of a gradient (fsgd_codec_set_whole): the whole's Σ|v|,
         * so the part keeps the pairs, and the levels, of the whole's
         * message; under error feedback with this part's residual, which
         * the merged input holds too. Never below the input's own. */
        double whole = c->whole_sum;
        if (c->ef && c->residual.n) {
            float rmx, rmn;
            whole += fsgd_fastsgd_abs_sum(c->residual.vals, c->residual.n, &rmx, &rmn);
        }
        if (whole > sum)
            sum = whole;
    }
    float S = sum > FLT_MAX ? FLT_MAX : (float)sum;

    /* fbuf[0] = +inf, f = fbuf + 1: f[-1] reads +inf (the bucket path's f[L-1]). */
    float fbuf[258];
    fbuf[0] = INFINITY;
    float *f = fbuf + 1;
    int lbase = 0, lhi = -1; /* kept levels [lbase, lhi]; none when lhi < lbase */
    if (S > 0) {
        int top = 0;
        f[0] = S;
        lbase = f[0] <= mx ? 0 : level_search(f, &top, 1, tau, mx, b);
        if (lbase <= tau) {
            /* The paper's early stop is level tau, and the byte holds lbase + 127;
             * no value is below mn, so levels past mn's are never used. */
            int cut = lbase + 127 < tau ? lbase + 127 : tau;
            lhi = f[lbase] <= mn ? lbase : level_search(f, &top, lbase + 1, cut, mn, b);
            if (lhi > cut)
                lhi = cut;
        } else {
            lbase = 0;
        }
    }

    if (fsgd_codec_scratch(c, n * 4 + 8) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "fastsgd: out of memory");
    uint32_t *delta = c->scratch;
    /* value bytes straight into the message when it has room for all n */
    int direct = cap >= hdr + n;
    uint8_t *codes = direct ? body + hdr : NULL;
    uint64_t hist[33] = {0};
    uint32_t orall = 0; /* bitlen(OR of deltas) = bitlen(largest delta) = M */
    size_t d = 0;
    if (lhi >= lbase) {
        const float thr = f[lhi];
        const uint32_t thr_bits = f2u(thr);
        /* Bucket table: a float's top bits (exponent and m mantissa bits)
         * locate it within less than one level, so L is the bucket's level
         * at its low end, or one less (one compare against f[L-1]). Needs
         * buckets narrower than a level, (1 + 2^-m) < b, and normal floats. */
        int m = 0;
        while (m <= 16 && 1.0 + ldexp(1.0, -m) >= b * (1 - 1e-6))
            m++;
        int sh = 23 - m;
        uint32_t mx_bits = f2u(mx);
        uint32_t base = m <= 16 ? thr_bits & ~((1u << sh) - 1) : 0;
        size_t nb = m <= 16 ? (size_t)((mx_bits - base) >> sh) + 1 : 0;
        int use_tab = m <= 16 && thr_bits >= 0x00800000u && nb <= n / 4 && nb <= 65536;
        size_t extra = (direct ? 0 : n) + (use_tab ? nb : 0);
        if (fsgd_codec_scratch(c, n * 4 + 8 + extra) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "fastsgd: out of memory");
        delta = c->scratch;
        uint8_t *more = (uint8_t *)(delta + n) + 8;
        if (!direct) {
            codes = more;
            more += n;
        }
        /* Every entry is written at d (<= its index) and d advances only for
         * kept ones: no branch on which values survive. */
        uint32_t prev = 0;
        if (use_tab) {
            uint8_t *bucket = more;
            int L = lhi;
            for (size_t j = 0; j < nb; j++) {
                uint32_t lob = base + (uint32_t)(j << sh);
                float lo;
                memcpy(&lo, &lob, 4);
                if (lo < thr)
                    lo = thr;
                while (L > lbase && f[L - 1] <= lo)
                    L--;
                bucket[j] = (uint8_t)L;
            }
            const float *fm1 = f - 1; /* fm1[L] = f[L-1], fm1[0] = +inf */
            for (size_t i = 0; i < n; i++) {
                uint32_t u = f2u(vals[i]), au = u & 0x7fffffffu;
                uint32_t keep = au >= thr_bits;
                uint32_t idx = keep ? (au - base) >> sh : 0;
                int Lb = bucket[idx];
                Lb -= f2u(fm1[Lb]) <= au;
                codes[d] = (uint8_t)((u >> 31) << 7 | (uint32_t)(Lb - lbase));
                uint32_t k = keys[i], dk = k - prev;
                delta[d] = dk;
                prev = keep ? k : prev;
                orall |= keep ? dk : 0;
                d += keep;
            }
        } else {
            const float lS = fast_log2_bits(f2u(S)), inv = (float)(1.0 / log2(b));
            for (size_t i = 0; i < n; i++) {
                uint32_t u = f2u(vals[i]), au = u & 0x7fffffffu;
                uint32_t keep = au >= thr_bits;
                au = keep ? au : thr_bits;
                float a;
                memcpy(&a, &au, 4);
                /* L = ceil(log_b(S/a)) guessed from the bits, then made exact:
                 * the smallest L with f[L] <= a. */
                float x = (lS - fast_log2_bits(au)) * inv;
                int L = (int)x;
                L += x > (float)L;
                L = L < lbase ? lbase : (L > lhi ? lhi : L);
                while (L > lbase && f[L - 1] <= a)
                    L--;
                while (f[L] > a)
                    L++;
                codes[d] = (uint8_t)((u >> 31) << 7 | (uint32_t)(L - lbase));
                uint32_t k = keys[i], dk = k - prev;
                delta[d] = dk;
                prev = keep ? k : prev;
                orall |= keep ? dk : 0;
                d += keep;
            }
        }
    }

    uint8_t lens[32];
    int M = codec_bitlen(orall);
    uint64_t key_bits;
    if (optimal) {
        /* four partial histograms: repeated bins would serialise on one counter */
        uint64_t h4[4][33] = {{0}};
        size_t t = 0;
        for (; t + 4 <= d; t += 4) {
            h4[0][codec_bitlen(delta[t])]++;
            h4[1][codec_bitlen(delta[t + 1])]++;
            h4[2][codec_bitlen(delta[t + 2])]++;
            h4[3][codec_bitlen(delta[t + 3])]++;
        }
        for (; t < d; t++)
            h4[0][codec_bitlen(delta[t])]++;
        for (int j = 0; j <= 32; j++)
            hist[j] = h4[0][j] + h4[1][j] + h4[2][j] + h4[3][j];
        key_bits = fsgd_fastsgd_optimal_lengths(hist, l, lens);
    } else {
        fsgd_fastsgd_paper_lengths(M, l, lens);
        key_bits = (uint64_t)d * (uint64_t)(l + M); /* an upper bound until the keys are written */
    }
    size_t key_bytes = (size_t)((key_bits + 7) / 8);
    size_t need = hdr + d + key_bytes;
    if (need > cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "fastsgd: need %zu body bytes, buffer has %zu", need,
                            cap);
    if (key_bytes > UINT32_MAX || need > UINT32_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "fastsgd: message of %zu bytes too large", need);

    fsgd_le_putf64(body, b);
    fsgd_le_putf32(body + 8, S > 0 ? S : 0.0f);
    fsgd_le_put32(body + 12, (uint32_t)key_bytes);
    body[16] = (uint8_t)tau;
    body[17] = (uint8_t)l;
    body[18] = (uint8_t)optimal;
    body[19] = (uint8_t)lbase;
    body[20] = (uint8_t)M;
    body[21] = body[22] = body[23] = 0;
    if (optimal)
        memcpy(body + BODY_FIXED, lens, (size_t)nlev);
    if (codes && codes != body + hdr)
        memcpy(body + hdr, codes, d);
    codes = body + hdr;

    uint64_t bits = 0;
    uint8_t *kstart = body + hdr + d;
    uint8_t *end = pack_keys(delta, d, l, lens, kstart, body + cap, &bits);
    key_bits = bits;
    key_bytes = (size_t)(end - kstart);
    need = hdr + d + key_bytes;
    fsgd_le_put32(body + 12, (uint32_t)key_bytes);

    if (sent) {
        uint32_t k = 0;
        for (size_t t = 0; t < d; t++) {
            k += delta[t];
            sent->keys[t] = k;
            float v = f[lbase + (codes[t] & 127)];
            sent->vals[t] = (codes[t] & 128) ? -v : v;
        }
        sent->n = d;
    }
    *body_len = need;
    *count = (uint32_t)d;
    c->last.key_bits = key_bits;
    c->last.value_bits = 8 * (uint64_t)d;
    c->last.header_bytes = hdr;
    return 0;
}

/* The largest low-7-bit part of the value bytes. */
static unsigned max_level_code(const uint8_t *codes, size_t n)
{
    unsigned mc = 0;
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i low7 = _mm_set1_epi8(127);
    __m128i v = _mm_setzero_si128();
    for (; i + 16 <= n; i += 16)
        v = _mm_max_epu8(v, _mm_and_si128(_mm_loadu_si128((const __m128i *)(codes + i)), low7));
    uint8_t t[16];
    _mm_storeu_si128((__m128i *)t, v);
    for (int k = 0; k < 16; k++)
        mc = t[k] > mc ? t[k] : mc;
#endif
    for (; i < n; i++)
        mc = (codes[i] & 127u) > mc ? (codes[i] & 127u) : mc;
    return mc;
}

static int fs_decode(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                     fsgd_sparse_t *out, char *err, size_t errsz)
{
    const uint8_t *body = msg + off;
    if (blen < BODY_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field fastsgd.params at offset %zu: %zu bytes < %d",
                            off, blen, BODY_FIXED);
    double b = fsgd_le_getf64(body);
    float S = fsgd_le_getf32(body + 8);
    uint32_t key_bytes = fsgd_le_get32(body + 12);
    int tau = body[16], l = body[17], mode = body[18], lbase = body[19], M = body[20];
    if (!(b > 1 && b <= 1e6))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.b at offset %zu: %g not in (1, 1e6]", off,
                            b);
    if (!(S >= 0 && S <= FLT_MAX) || (count > 0 && S == 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.sum at offset %zu: %g invalid", off + 8,
                            (double)S);
    if (tau < 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.tau at offset %zu: 0", off + 16);
    if (l < 1 || l > 5)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.l at offset %zu: %d not in 1..5", off + 17,
                            l);
    if (mode > 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.levels at offset %zu: mode %d", off + 18,
                            mode);
    if (lbase > tau)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.lbase at offset %zu: %d > tau %d",
                            off + 19, lbase, tau);
    if (M > 32)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.M at offset %zu: %d > 32", off + 20, M);
    if (body[21] | body[22] | body[23])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.reserved at offset %zu: not zero",
                            off + 21);
    int nlev = 1 << l;
    size_t hdr = BODY_FIXED + (mode ? (size_t)nlev : 0);
    if ((uint64_t)hdr + count + key_bytes != blen)
        return fsgd_err_fmt(err, errsz, blen < (uint64_t)hdr + count + key_bytes ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field fastsgd.key_bytes at offset %zu: %zu header + %u values + %u key bytes != "
                            "body of %zu",
                            off + 12, hdr, count, key_bytes, blen);
    uint8_t lens[32];
    if (mode) {
        for (int i = 0; i < nlev; i++) {
            lens[i] = body[BODY_FIXED + i];
            if (lens[i] > 32 || (i > 0 && lens[i] < lens[i - 1]))
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                    "field fastsgd.lengths at offset %zu: length %d (must be <= 32, nondecreasing)",
                                    off + BODY_FIXED + i, lens[i]);
        }
    } else {
        fsgd_fastsgd_paper_lengths(M, l, lens);
    }
    FSGD_TRY(codec_reserve(out, count, err, errsz));

    const uint8_t *codes = body + hdr;
    if (count > 0) {
        /* Levels only up to the largest one present. */
        int Lmax = lbase + (int)max_level_code(codes, count);
        if (Lmax > tau) {
            for (uint32_t i = 0; i < count; i++) {
                int L = lbase + (codes[i] & 127);
                if (L > tau)
                    return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                        "field fastsgd.value at offset %zu: level %d > tau %d", off + hdr + i, L,
                                        tau);
            }
        }
        float f[256];
        f[0] = S;
        fsgd_fastsgd_levels_from(b, 1, Lmax + 1, f);
        uint32_t fb[128];
        for (int k = 0; k <= Lmax - lbase; k++)
            fb[k] = f2u(f[lbase + k]);
        uint32_t *ov = (uint32_t *)(void *)out->vals;
        for (uint32_t i = 0; i < count; i++) {
            uint32_t cb = codes[i];
            ov[i] = fb[cb & 127] | (cb & 128) << 24;
        }
    }

    const uint8_t *kstart = codes + count;
    uint64_t key = 0;
    uint32_t i = 0;
    size_t skip = 0; /* bits of kstart[0..] already read by the fast loop */
    if (key_bytes >= 8 && count > 0) {
        /* A 64-bit bit buffer refilled from 8-byte loads that stay inside
         * the key bytes (the refill ORs in at least 56 valid bits; bits it
         * loads twice are the same bits), G keys per refill where G codes of
         * the longest kind fit in 56 bits. Errors (a zero delta after the
         * first, a key >= dim) send everything to the checked loop below,
         * which names the first bad key. */
        const uint8_t *p = kstart, *last = kstart + key_bytes - 8;
        const uint32_t lmask = (1u << l) - 1;
        unsigned maxn = (unsigned)l + lens[nlev - 1];
        const uint32_t G = maxn * 4 <= 56 ? 4 : (maxn * 2 <= 56 ? 2 : 1);
        uint64_t acc = 0;
        unsigned have = 0;
        uint32_t zeros = 0;
        while (i + G <= count && p <= last) {
            acc |= load64le(p) << have;
            p += (63 - have) >> 3;
            have |= 56;
            for (uint32_t g = 0; g < G; g++) {
                unsigned ln = lens[acc & lmask];
                uint32_t dk = (uint32_t)((acc >> l) & ((1ull << ln) - 1));
                acc >>= (unsigned)l + ln;
                have -= (unsigned)l + ln;
                zeros += dk == 0;
                key += dk;
                out->keys[i++] = (uint32_t)key;
            }
        }
        if (i > 0 && (zeros > (out->keys[0] == 0) || key >= dim)) {
            i = 0;
            key = 0;
        } else {
            skip = (size_t)(p - kstart) * 8 - have;
        }
    }
    bitr_t r = {kstart + skip / 8, kstart + key_bytes, 0, 0};
    if (skip % 8) {
        uint32_t junk;
        if (bitr_get(&r, (int)(skip % 8), &junk) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field fastsgd.keys at offset %zu: key %u cut off",
                                off + hdr + count + skip / 8, i);
    }
    for (; i < count; i++) {
        uint32_t flag, dk;
        size_t at = off + hdr + count + bitr_used(&r, kstart);
        if (bitr_get(&r, l, &flag) < 0 || bitr_get(&r, lens[flag], &dk) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field fastsgd.keys at offset %zu: key %u cut off",
                                at, i);
        if (i > 0 && dk == 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field fastsgd.keys at offset %zu: key %u repeats key %llu", at, i,
                                (unsigned long long)key);
        key += dk;
        if (key >= dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "field fastsgd.keys at offset %zu: key %llu >= dim %llu",
                                at, (unsigned long long)key, (unsigned long long)dim);
        out->keys[i] = (uint32_t)key;
    }
    size_t used = bitr_used(&r, kstart);
    if (used != key_bytes || (r.nb % 8 && (r.acc & ((1u << (r.nb % 8)) - 1))))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field fastsgd.keys at offset %zu: %zu of %u key bytes used, padding must be zero",
                            off + hdr + count + used, used, key_bytes);
    out->n = count;
    return 0;
}

static double fs_whole_scale(const float *whole, size_t n)
{
    float mx, mn;
    return fsgd_fastsgd_abs_sum(whole, n, &mx, &mn);
}

const fsgd_codec_vt_t fsgd_codec_vt_fastsgd = {
    .name = "fastsgd",
    .id = CODEC_ID_FASTSGD,
    .lossy = 1,
    .ef_default = 0,
    .params = fastsgd_params,
    .n_params = sizeof fastsgd_params / sizeof *fastsgd_params,
    .check = NULL,
    .bound = fs_bound,
    .encode = fs_encode,
    .decode = fs_decode,
    .whole_scale = fs_whole_scale,
};
