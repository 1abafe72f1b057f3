/* FastSGD (GV-Encoder for values, GK-Encoder for keys), as in the paper,
 * with exact float arithmetic for the value levels and an optional optimal
 * choice of the key lengths. Wire layout: codec/FORMAT.md. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "codec_internal.h"
#include "fsgd/fastsgd.h"

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

/* log2 of 1 + (i + 0.5)/1024: a first guess of the level, corrected exactly
 * against the level table. */
static float log2_tab[1024];
static pthread_once_t log2_once = PTHREAD_ONCE_INIT;
static void log2_init(void)
{
    for (int i = 0; i < 1024; i++)
        log2_tab[i] = (float)log2(1.0 + (i + 0.5) / 1024.0);
}

static inline float fast_log2(float a)
{
    uint32_t u;
    memcpy(&u, &a, 4);
    return (float)((int)(u >> 23) - 127) + log2_tab[(u >> 13) & 1023];
}

static size_t fs_bound(const fsgd_codec_t *c, size_t n)
{
    return BODY_FIXED + 32 + n + (n * 37 + 7) / 8;
}

static int fs_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                     size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                     size_t errsz)
{
    const double b = c->p[P_B];
    const int tau = (int)c->p[P_TAU], l = (int)c->p[P_L], optimal = (int)c->p[P_LEVELS];
    const int nlev = 1 << l;
    const size_t hdr = BODY_FIXED + (optimal ? (size_t)nlev : 0);
    pthread_once(&log2_once, log2_init);

    /* sum = Σ|v| (four accumulators, double), and the largest |v|. */
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    float mx = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float a0 = fabsf(vals[i]), a1 = fabsf(vals[i + 1]), a2 = fabsf(vals[i + 2]), a3 = fabsf(vals[i + 3]);
        s0 += a0;
        s1 += a1;
        s2 += a2;
        s3 += a3;
        float m01 = a0 > a1 ? a0 : a1, m23 = a2 > a3 ? a2 : a3, m = m01 > m23 ? m01 : m23;
        mx = m > mx ? m : mx;
    }
    for (; i < n; i++) {
        float a = fabsf(vals[i]);
        s0 += a;
        mx = a > mx ? a : mx;
    }
    double sum = (s0 + s1) + (s2 + s3);
    float S = sum > FLT_MAX ? FLT_MAX : (float)sum;

    float f[256];
    int lbase = 0, lhi = -1; /* kept levels [lbase, lhi]; none when lhi < lbase */
    if (S > 0) {
        fsgd_fastsgd_levels(S, b, tau + 1, f);
        while (lbase <= tau && f[lbase] > mx)
            lbase++;
        if (lbase <= tau)
            lhi = lbase + 127 < tau ? lbase + 127 : tau;
        else
            lbase = 0;
    }

    if (fsgd_codec_scratch(c, n * 5 + 8) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "fastsgd: out of memory");
    uint32_t *delta = c->scratch;
    uint8_t *codes = (uint8_t *)(delta + n);
    uint64_t hist[33] = {0};
    uint32_t orall = 0; /* bitlen(OR of deltas) = bitlen(largest delta) = M */
    size_t d = 0;
    if (lhi >= lbase) {
        const float thr = f[lhi];
        uint32_t thr_bits;
        memcpy(&thr_bits, &thr, 4);
        /* Bucket table: a float's top bits (exponent and m mantissa bits)
         * locate it within less than one level, so L is the bucket's level
         * at its low end, or one less (one compare against f[L-1]). Needs
         * buckets narrower than a level, (1 + 2^-m) < b, and normal floats. */
        int m = 0;
        while (m <= 16 && 1.0 + ldexp(1.0, -m) >= b * (1 - 1e-6))
            m++;
        int sh = 23 - m;
        uint32_t mx_bits;
        memcpy(&mx_bits, &mx, 4);
        uint32_t base = m <= 16 ? thr_bits & ~((1u << sh) - 1) : 0;
        size_t nb = m <= 16 ? (size_t)((mx_bits - base) >> sh) + 1 : 0;
        int use_tab = m <= 16 && thr_bits >= 0x00800000u && nb <= n / 4 && nb <= 65536;
        uint8_t *bucket = NULL;
        float fm1[257]; /* fm1[L] = f[L-1], fm1[0] = +inf */
        if (use_tab) {
            if (fsgd_codec_scratch(c, n * 5 + 8 + nb) < 0)
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "fastsgd: out of memory");
            delta = c->scratch;
            codes = (uint8_t *)(delta + n);
            bucket = codes + n;
            fm1[0] = INFINITY;
            for (int L = 1; L <= lhi; L++)
                fm1[L] = f[L - 1];
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
            uint32_t prev = 0;
            for (i = 0; i < n; i++) {
                float a = fabsf(vals[i]);
                if (!(a >= thr))
                    continue;
                uint32_t u;
                memcpy(&u, &vals[i], 4);
                int Lb = bucket[((u & 0x7fffffffu) - base) >> sh];
                Lb -= fm1[Lb] <= a;
                codes[d] = (uint8_t)((u >> 31) << 7 | (uint32_t)(Lb - lbase));
                uint32_t dk = keys[i] - prev;
                prev = keys[i];
                orall |= dk;
                delta[d++] = dk;
            }
        } else {
            const float lS = fast_log2(S), inv = (float)(1.0 / log2(b));
            uint32_t prev = 0;
            for (i = 0; i < n; i++) {
                float a = fabsf(vals[i]);
                if (!(a >= thr))
                    continue;
                /* L = ceil(log_b(S/a)) guessed from the bits, then made exact:
                 * the smallest L with f[L] <= a. */
                float x = (lS - fast_log2(a)) * inv;
                int L = (int)x;
                L += x > (float)L;
                L = L < lbase ? lbase : (L > lhi ? lhi : L);
                while (L > lbase && f[L - 1] <= a)
                    L--;
                while (f[L] > a)
                    L++;
                uint32_t u;
                memcpy(&u, &vals[i], 4);
                codes[d] = (uint8_t)((u >> 31) << 7 | (uint32_t)(L - lbase));
                uint32_t dk = keys[i] - prev;
                prev = keys[i];
                orall |= dk;
                delta[d++] = dk;
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
    memcpy(body + hdr, codes, d);

    /* level of each bit length: the smallest i with lens[i] >= j. */
    uint8_t lvl[33];
    for (int j = 0, k = 0; j <= 32; j++) {
        while (k < nlev - 1 && lens[k] < j)
            k++;
        lvl[j] = (uint8_t)k;
    }
    bitw_t w = {body + hdr + d, 0, 0};
    uint64_t bits = 0;
    for (size_t t = 0; t < d; t++) {
        uint32_t dk = delta[t];
        int li = lvl[codec_bitlen(dk)];
        bitw_put(&w, (uint64_t)li, l);
        bitw_put(&w, dk, lens[li]);
        bits += (uint64_t)(l + lens[li]);
    }
    uint8_t *end = bitw_end(&w);
    key_bits = bits;
    key_bytes = (size_t)(end - (body + hdr + d));
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

    float f[256];
    fsgd_fastsgd_levels(S, b, tau + 1, f);
    const uint8_t *codes = body + hdr;
    for (uint32_t i = 0; i < count; i++) {
        int L = lbase + (codes[i] & 127);
        if (L > tau)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field fastsgd.value at offset %zu: level %d > tau %d",
                                off + hdr + i, L, tau);
        out->vals[i] = (codes[i] & 128) ? -f[L] : f[L];
    }

    const uint8_t *kstart = codes + count;
    bitr_t r = {kstart, kstart + key_bytes, 0, 0};
    uint64_t key = 0;
    for (uint32_t i = 0; i < count; i++) {
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
};
