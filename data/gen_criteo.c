/* Criteo-shaped TSV rows; see fsgd/gen_criteo.h. */
#include "fsgd/gen_criteo.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "fsgd/error.h"

#define N_INT 13
#define N_CAT 26

void fsgd_gen_criteo_opts_default(fsgd_gen_criteo_opts_t *o)
{
    o->seed = 1;
    o->zipf = 1.1;
    o->vocab_bits = 20;
    o->bias = -1.2;
    o->w_scale = 0.35;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t next(uint64_t *s) { return mix64(*s += 0x9E3779B97F4A7C15ull); }

/* uniform in (0, 1) from 53 random bits */
static double unit(uint64_t x) { return ((double)(x >> 11) + 0.5) / 9007199254740992.0; }

/* N(0, 1) from two hashed uniforms (Box-Muller): the same (j, rank) always
 * gives the same weight without storing a table. */
static double gauss_of(uint64_t key)
{
    double u1 = unit(mix64(key)), u2 = unit(mix64(key ^ 0xD1B54A32D192ED03ull));
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

int fsgd_gen_criteo_write(const fsgd_gen_criteo_opts_t *o, FILE *out, uint64_t rows, fsgd_gen_progress_fn progress,
                          void *ctx, char *err, size_t errsz)
{
    if (o->vocab_bits < 2 || o->vocab_bits > 31 || !(o->zipf >= 0) || !isfinite(o->bias) || !(o->w_scale >= 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "criteo: vocab_bits 2..31, zipf >= 0, w_scale >= 0");
    fsgd_zipf_t z[N_CAT];
    double miss_cat[N_CAT], miss_int[N_INT], mu[N_INT], coef[N_INT];
    uint64_t s = mix64(o->seed ^ 0xC817E0);
    for (int j = 0; j < N_CAT; j++) {
        /* vocabularies from 4 values to 2^vocab_bits, spread over the columns */
        double bits = 2 + (double)(o->vocab_bits - 2) * (double)((j * 7) % N_CAT) / (N_CAT - 1);
        if (fsgd_zipf_init(&z[j], (uint64_t)ldexp(1.0, (int)bits), o->zipf) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "criteo: bad zipf exponent %g", o->zipf);
        miss_cat[j] = 0.45 * unit(next(&s)) * (j % 3 == 0);
    }
    for (int j = 0; j < N_INT; j++) {
        miss_int[j] = 0.4 * unit(next(&s));
        mu[j] = 4 * unit(next(&s));
        coef[j] = 0.3 * (unit(next(&s)) - 0.5);
    }
    uint64_t bytes = 0;
    char line[1024];
    for (uint64_t r = 0; r < rows; r++) {
        char *p = line + 1; /* line[0]: the label, written once the margin is known */
        double margin = o->bias;
        for (int j = 0; j < N_INT; j++) {
            *p++ = '\t';
            if (unit(next(&s)) < miss_int[j])
                continue;
            double g = sqrt(-2 * log(unit(next(&s)))) * cos(6.283185307179586 * unit(next(&s)));
            long long v = (long long)floor(exp(mu[j] + 1.2 * g)) - 1;
            if (j == 1 && unit(next(&s)) < 0.05)
                v = -1;
            if (v > 0)
                margin += coef[j] * log1p((double)v);
            p += sprintf(p, "%lld", v);
        }
        for (int j = 0; j < N_CAT; j++) {
            *p++ = '\t';
            if (unit(next(&s)) < miss_cat[j])
                continue;
            uint64_t rank = fsgd_zipf_sample(&z[j], &s);
            uint64_t key = mix64(o->seed * 0x100000001B3ull ^ ((uint64_t)j << 40) ^ rank);
            margin += o->w_scale * gauss_of(key);
            p += sprintf(p, "%08x", (unsigned)(key >> 32));
        }
        *p++ = '\n';
        int y = unit(next(&s)) < 1 / (1 + exp(-margin));
        line[0] = (char)('0' + y);
        size_t len = (size_t)(p - line);
        if (fwrite(line, 1, len, out) != len)
            return fsgd_err_fmt(err, errsz, FSGD_E_IO, "write error after %llu rows: %s", (unsigned long long)r,
                                strerror(errno));
        bytes += len;
        if (progress && ((r + 1) % 8192 == 0 || r + 1 == rows))
            progress(ctx, r + 1, bytes);
    }
    return FSGD_E_OK;
}
