/* Synthetic CTR-shaped data (see fsgd/gen.h). */
#include "fsgd/gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "data_testing.h"

#define MAX_DIM (1ull << 32)
#define MAX_W_NNZ (1ull << 27)
#define MAX_NNZ 1000000.0

static inline uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double uniform(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1.0p-53; }

static double normal(uint64_t *s)
{
    double u = 1.0 - uniform(s), v = uniform(s); /* u in (0, 1] */
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* ---- Zipf by rejection-inversion (Hoermann & Derflinger, "Rejection-
 * inversion to generate variates from monotone discrete distributions",
 * 1996), in the form of Apache Commons' RejectionInversionZipfSampler.
 * h(x) = x^-s is the unnormalised density; H is its integral,
 * H(x) = (x^(1-s) - 1) / (1 - s) (log x for s = 1), written through
 * helper1/helper2 so s near 1 stays accurate. ---- */

static double helper1(double x) /* log1p(x) / x */
{
    return fabs(x) > 1e-8 ? log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - x * 0.25));
}

static double helper2(double x) /* expm1(x) / x */
{
    return fabs(x) > 1e-8 ? expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + x * 0.25));
}

static double zh(double s, double x) { return exp(-s * log(x)); }

static double zH(double s, double x)
{
    double lx = log(x);
    return helper2((1.0 - s) * lx) * lx;
}

static double zH_inv(double s, double x)
{
    double t = x * (1.0 - s);
    if (t < -1.0)
        t = -1.0; /* rounding guard */
    return exp(helper1(t) * x);
}

int fsgd_zipf_init(fsgd_zipf_t *z, uint64_t n, double s)
{
    if (n == 0 || !(s >= 0) || !isfinite(s))
        return FSGD_E_ARG;
    z->n = n;
    z->s = s;
    z->h_x1 = zH(s, 1.5) - 1.0;
    z->h_n = zH(s, (double)n + 0.5);
    z->sq = 2.0 - zH_inv(s, zH(s, 2.5) - zh(s, 2.0));
    return FSGD_E_OK;
}

uint64_t fsgd_zipf_sample(const fsgd_zipf_t *z, uint64_t *state)
{
    for (;;) {
        double u = z->h_n + uniform(state) * (z->h_x1 - z->h_n);
        double x = zH_inv(z->s, u);
        double kx = floor(x + 0.5);
        uint64_t k;
        if (kx < 1.0)
            k = 1, kx = 1.0;
        else if (kx > (double)z->n)
            k = z->n, kx = (double)z->n;
        else
            k = (uint64_t)kx;
        if (kx - x <= z->sq || u >= zH(z->s, kx + 0.5) - zh(z->s, kx))
            return k;
    }
}

/* ---- generator ---- */

struct fsgd_gen {
    fsgd_gen_opts_t o;
    fsgd_zipf_t zipf;
    uint64_t rng;
    /* rank -> id bijection on [0, dim): a mixing permutation of [0, 2^bits),
     * cycle-walked until the result is < dim */
    unsigned bits;
    uint64_t mask, key[3], mult[3];
    unsigned shift;
    float *w; /* weights by rank, w_nnz entries */
    float *w_dense; /* weights of the dense features 0..dense-1 */
    uint64_t zdim;  /* features the Zipf ranks map to: dim - dense, ids dense..dim-1 */
    size_t max_row;
    uint64_t *pairs; /* (id << 32 | rank) of the row being drawn */
    char *out;       /* write buffer */
    size_t out_cap;
};

void fsgd_gen_opts_default(fsgd_gen_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->dim = 1000000;
    o->nnz = 20;
    o->zipf = 1.1;
    o->seed = 1;
    o->model = FSGD_GEN_LOGISTIC;
}

static uint64_t mix_once(const fsgd_gen_t *g, uint64_t x)
{
    for (int r = 0; r < 3; r++) {
        x = (x + g->key[r]) & g->mask;
        x = (x * g->mult[r]) & g->mask; /* odd multiplier: bijective mod 2^bits */
        x ^= x >> g->shift;             /* xorshift: bijective */
    }
    return x;
}

uint32_t fsgd_gen_feature(const fsgd_gen_t *g, uint64_t rank)
{
    uint64_t x = rank;
    do
        x = mix_once(g, x);
    while (x >= g->zdim);
    return (uint32_t)(x + g->o.dense);
}

fsgd_gen_t *fsgd_gen_new(const fsgd_gen_opts_t *o, char *err, size_t errsz)
{
    if (o->dim < 1 || o->dim > MAX_DIM) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "dim %llu out of range 1..%llu", (unsigned long long)o->dim,
                     (unsigned long long)MAX_DIM);
        return NULL;
    }
    if (!(o->nnz >= 1 && o->nnz <= MAX_NNZ)) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "nnz %g out of range 1..%g", o->nnz, MAX_NNZ);
        return NULL;
    }
    if (!(o->zipf >= 0 && o->zipf <= 10)) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "zipf exponent %g out of range 0..10", o->zipf);
        return NULL;
    }
    if (!(o->noise >= 0 && isfinite(o->noise)) || !isfinite(o->bias) || !(o->w_scale >= 0 && isfinite(o->w_scale))) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "noise, bias and w_scale must be finite (noise, w_scale >= 0)");
        return NULL;
    }
    if (o->dense > 4096 || o->dense >= o->dim) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "dense %u out of range 0..min(4096, dim-1)", o->dense);
        return NULL;
    }
    if (o->model != FSGD_GEN_LOGISTIC && o->model != FSGD_GEN_LINEAR) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unknown label model %d", (int)o->model);
        return NULL;
    }
    fsgd_gen_t *g = calloc(1, sizeof *g);
    if (!g) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
        return NULL;
    }
    g->o = *o;
    g->zdim = o->dim - o->dense;
    if (!g->o.w_nnz)
        g->o.w_nnz = o->dim < 1000 ? o->dim : 1000;
    if (g->o.w_nnz > g->zdim)
        g->o.w_nnz = g->zdim;
    if (g->o.w_nnz > MAX_W_NNZ) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "w_nnz %llu above %llu", (unsigned long long)g->o.w_nnz,
                     (unsigned long long)MAX_W_NNZ);
        free(g);
        return NULL;
    }
    if (g->o.w_scale == 0)
        g->o.w_scale = 2.0 / sqrt(o->nnz);
    fsgd_zipf_init(&g->zipf, g->zdim, o->zipf);

    uint64_t ks = o->seed ^ 0x5eedF00DCafeull;
    while ((1ull << g->bits) < g->zdim)
        g->bits++;
    g->mask = g->bits == 64 ? ~0ull : (1ull << g->bits) - 1;
    g->shift = g->bits / 2 + 1;
    for (int r = 0; r < 3; r++) {
        g->key[r] = splitmix64(&ks);
        g->mult[r] = splitmix64(&ks) | 1;
    }

    double rows_max = floor(2 * o->nnz - 1);
    g->max_row = (size_t)(rows_max < (double)g->zdim ? rows_max : (double)g->zdim) + o->dense;
    g->w = malloc(g->o.w_nnz * sizeof *g->w);
    g->w_dense = malloc((o->dense ? o->dense : 1) * sizeof *g->w_dense);
    g->pairs = malloc((g->max_row * 2 + 1) * sizeof *g->pairs);
    g->out_cap = (1u << 20) + g->max_row * 24 + 64;
    g->out = malloc(g->out_cap);
    if (!g->w || !g->w_dense || !g->pairs || !g->out) {
        fsgd_gen_destroy(g);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
        return NULL;
    }
    uint64_t ws = o->seed ^ 0x77E16475ull;
    for (uint64_t i = 0; i < g->o.w_nnz; i++)
        g->w[i] = (float)(normal(&ws) * g->o.w_scale);
    uint64_t ds = o->seed ^ 0xDE45Eull; /* its own stream: dense 0 leaves every other draw as it was */
    for (uint32_t i = 0; i < o->dense; i++)
        g->w_dense[i] = (float)(normal(&ds) * g->o.w_scale);
    g->rng = o->seed;
    splitmix64(&g->rng);
    return g;
}

void fsgd_gen_destroy(fsgd_gen_t *g)
{
    if (!g)
        return;
    free(g->w);
    free(g->w_dense);
    free(g->pairs);
    free(g->out);
    free(g);
}

size_t fsgd_gen_max_row(const fsgd_gen_t *g) { return g->max_row; }

float fsgd_gen_weight(const fsgd_gen_t *g, uint32_t col)
{
    /* Only the w_nnz most popular ranks have weights: invert by scanning
     * them (tests and tools only; the hot path works on ranks). */
    if (col < g->o.dense)
        return g->w_dense[col];
    for (uint64_t r = 0; r < g->o.w_nnz; r++)
        if (fsgd_gen_feature(g, r) == col)
            return g->w[r];
    return 0.0f;
}

static void sort_u64(uint64_t *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t k = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1] > k; j--)
            a[j] = a[j - 1];
        a[j] = k;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts and removes duplicates; returns the new count. */
static size_t sort_unique(uint64_t *a, size_t n)
{
    if (n < 48)
        sort_u64(a, n);
    else
        qsort(a, n, sizeof *a, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || a[i] != a[m - 1])
            a[m++] = a[i];
    return m;
}

size_t fsgd_gen_next(fsgd_gen_t *g, uint32_t *col, float *val, double *label, double *margin)
{
    double span = 2 * g->o.nnz - 1;
    size_t k = 1 + (size_t)(uniform(&g->rng) * span);
    if (k > g->max_row - g->o.dense)
        k = g->max_row - g->o.dense;
    /* Distinct ranks: draw, dedupe, top up; a bounded number of extra draws
     * (a tiny dim with a steep Zipf can make k distinct ranks rare). */
    size_t n = 0, budget = 20 * k + 100;
    while (n < k && budget) {
        size_t want = k - n;
        for (size_t i = 0; i < want && budget; i++, budget--)
            g->pairs[n++] = fsgd_zipf_sample(&g->zipf, &g->rng) - 1;
        n = sort_unique(g->pairs, n);
    }
    /* rank -> id; sort by id, keeping the rank for the weight. */
    for (size_t i = 0; i < n; i++) {
        uint64_t rank = g->pairs[i];
        g->pairs[i] = (uint64_t)fsgd_gen_feature(g, rank) << 32 | rank;
    }
    if (n < 48)
        sort_u64(g->pairs, n);
    else
        qsort(g->pairs, n, sizeof *g->pairs, cmp_u64);
    double m = g->o.bias;
    const uint32_t D = g->o.dense;
    for (uint32_t i = 0; i < D; i++) {
        col[i] = i;
        val[i] = (float)((double)(1 + splitmix64(&g->rng) % 1000) / 1000.0);
        m += (double)g->w_dense[i] * val[i];
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t rank = (uint32_t)g->pairs[i];
        col[D + i] = (uint32_t)(g->pairs[i] >> 32);
        val[D + i] = g->o.real_values ? (float)((double)(1 + splitmix64(&g->rng) % 1000) / 1000.0) : 1.0f;
        if (rank < g->o.w_nnz)
            m += (double)g->w[rank] * val[D + i];
    }
    n += D;
    if (margin)
        *margin = m;
    double noisy = g->o.noise > 0 ? m + g->o.noise * normal(&g->rng) : m;
    if (g->o.model == FSGD_GEN_LINEAR) {
        *label = noisy;
    } else {
        double p = 1.0 / (1.0 + exp(-noisy));
        *label = uniform(&g->rng) < p ? 1.0 : -1.0;
    }
    return n;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

int fsgd_gen_write(fsgd_gen_t *g, FILE *out, uint64_t rows, fsgd_gen_progress_fn progress, void *ctx,
                   char *err, size_t errsz)
{
    uint32_t *col = malloc(g->max_row * sizeof *col);
    float *val = malloc(g->max_row * sizeof *val);
    if (!col || !val) {
        free(col);
        free(val);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    }
    size_t len = 0;
    uint64_t bytes = 0;
    int rc = FSGD_E_OK;
    for (uint64_t r = 0; r < rows; r++) {
        double label;
        size_t n = fsgd_gen_next(g, col, val, &label, NULL);
        char *p = g->out + len;
        if (g->o.model == FSGD_GEN_LOGISTIC) {
            memcpy(p, label > 0 ? "+1" : "-1", 2);
            p += 2;
        } else {
            p += snprintf(p, 32, "%.9g", label);
        }
        for (size_t i = 0; i < n; i++) {
            *p++ = ' ';
            p = put_u64(p, (uint64_t)col[i] + 1);
            *p++ = ':';
            if (val[i] == 1.0f) { /* binary, or k = 1000 */
                *p++ = '1';
            } else {
                unsigned q = (unsigned)lrint((double)val[i] * 1000.0);
                if (q >= 1000) {
                    *p++ = '1';
                } else {
                    p[0] = '0';
                    p[1] = '.';
                    p[2] = (char)('0' + q / 100);
                    p[3] = (char)('0' + q / 10 % 10);
                    p[4] = (char)('0' + q % 10);
                    p += 5;
                }
            }
        }
        *p++ = '\n';
        len = (size_t)(p - g->out);
        if (len > (1u << 20)) {
            if (fwrite(g->out, 1, len, out) != len) {
                rc = FSGD_E_IO;
                break;
            }
            bytes += len;
            len = 0;
        }
        if (progress && (r & 0xffff) == 0xffff)
            progress(ctx, r + 1, bytes + len);
    }
    if (rc == FSGD_E_OK && len && fwrite(g->out, 1, len, out) != len)
        rc = FSGD_E_IO;
    bytes += len;
    if (rc == FSGD_E_OK && fflush(out) != 0)
        rc = FSGD_E_IO;
    if (progress && rc == FSGD_E_OK)
        progress(ctx, rows, bytes);
    free(col);
    free(val);
    if (rc)
        return fsgd_err_fmt(err, errsz, rc, "write error after %llu bytes", (unsigned long long)bytes);
    return rc;
}

int fsgd_gen_write_weights(const fsgd_gen_t *g, FILE *out, char *err, size_t errsz)
{
    uint64_t n = g->o.w_nnz;
    uint64_t *pairs = malloc((n ? n : 1) * sizeof *pairs);
    if (!pairs)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    for (uint64_t r = 0; r < n; r++)
        pairs[r] = (uint64_t)fsgd_gen_feature(g, r) << 32 | r;
    qsort(pairs, (size_t)n, sizeof *pairs, cmp_u64);
    fprintf(out,
            "# fsgd gen weights: model=%s dim=%llu nnz=%g zipf=%g seed=%llu noise=%g; "
            "one LIBSVM row: label = bias, index:weight\n",
            g->o.model == FSGD_GEN_LINEAR ? "linear" : "logistic", (unsigned long long)g->o.dim, g->o.nnz,
            g->o.zipf, (unsigned long long)g->o.seed, g->o.noise);
    fprintf(out, "%.17g", g->o.bias);
    for (uint32_t i = 0; i < g->o.dense; i++)
        if (g->w_dense[i] != 0.0f)
            fprintf(out, " %u:%.9g", i + 1, (double)g->w_dense[i]);
    for (uint64_t i = 0; i < n; i++) {
        float w = g->w[(uint32_t)pairs[i]];
        if (w != 0.0f)
            fprintf(out, " %llu:%.9g", (unsigned long long)(pairs[i] >> 32) + 1, (double)w);
    }
    fputc('\n', out);
    free(pairs);
    if (ferror(out) || fflush(out) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "write error");
    return FSGD_E_OK;
}
