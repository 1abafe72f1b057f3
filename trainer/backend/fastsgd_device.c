/* The host side of the FastSGD device encoder and a sequential emulation of
 * its kernels (fastsgd_device.h). The emulation mirrors backend_cuda.cu's
 * pipeline step for step, calling the same fastsgd_device_math.h functions,
 * so tests/unit/test_cuda_encoder_host.c can check on any machine that the
 * device algorithm gives fsgd_codec_encode's bytes. */
#include <stdlib.h>
#include <string.h>

#include "fastsgd_device.h"
#include "fsgd/error.h"
#include "fsgd/fastsgd.h"
#include "fsgd/le.h"

int fsgd_fsd_params(const fsgd_codec_t *c, fsgd_fastsgd_params_t *p, char *err, size_t errsz)
{
    FSGD_TRY(fsgd_fastsgd_get_params(c, p, err, errsz));
    if (p->ef)
        return fsgd_err_fmt(err, errsz, FSGD_E_UNSUPPORTED,
                            "fastsgd device encoder: ef=1 keeps a residual in the codec; encode on the host");
    return 0;
}

int fsgd_fsd_plan_make(const fsgd_fastsgd_params_t *p, const fsd_summary_t *s, const uint32_t *keys,
                  const float *bad_value, size_t cap, fsd_plan_t *pl, char *err, size_t errsz)
{
    /* fsgd_codec_encode's checks, in its order. */
    if (s->nonfinite != UINT32_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "codec fastsgd: value %g at entry %u (key %u)",
                            bad_value ? (double)*bad_value : (double)NAN, s->nonfinite,
                            keys ? keys[s->nonfinite] : 0u);
    if (cap < FSGD_CODEC_FRAME_HEADER + FSGD_CODEC_FRAME_TRAILER)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "codec fastsgd: buffer of %zu bytes < header", cap);
    size_t bcap = cap - FSGD_CODEC_FRAME_HEADER - FSGD_CODEC_FRAME_TRAILER;
    /* fs_encode from the lengths on. */
    int nlev = 1 << p->l;
    size_t d = s->count;
    memset(pl, 0, sizeof *pl);
    pl->hdr = 24 + (p->levels ? (size_t)nlev : 0);
    pl->M = fsd_bitlen(s->orall);
    uint64_t hist[33];
    for (int j = 0; j <= 32; j++)
        hist[j] = s->hist[j];
    uint64_t check_bits;
    if (p->levels) {
        pl->key_bits = fsgd_fastsgd_optimal_lengths(hist, p->l, pl->lens);
        check_bits = pl->key_bits;
    } else {
        fsd_paper_lengths(pl->M, p->l, pl->lens);
        check_bits = (uint64_t)d * (uint64_t)(p->l + pl->M); /* fs_encode checks this upper bound */
        pl->key_bits = fsgd_fastsgd_key_bits(hist, p->l, pl->lens);
    }
    size_t check_bytes = (size_t)((check_bits + 7) / 8);
    size_t need = pl->hdr + d + check_bytes;
    if (need > bcap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "fastsgd: need %zu body bytes, buffer has %zu", need, bcap);
    if (check_bytes > UINT32_MAX || need > UINT32_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "fastsgd: message of %zu bytes too large", need);
    if (pl->key_bits == UINT64_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "fastsgd device encoder: key lengths do not cover M=%d",
                            pl->M);
    fsd_flag_table(pl->lens, p->l, pl->flag);
    pl->key_bytes = (size_t)((pl->key_bits + 7) / 8);
    pl->body_len = pl->hdr + d + pl->key_bytes;
    return 0;
}

void fsgd_fsd_write_header(uint8_t *body, const fsgd_fastsgd_params_t *p, const fsd_summary_t *s,
                      const fsd_plan_t *pl)
{
    fsgd_le_putf64(body, p->b);
    fsgd_le_putf32(body + 8, s->S > 0 ? s->S : 0.0f);
    fsgd_le_put32(body + 12, (uint32_t)pl->key_bytes);
    body[16] = (uint8_t)p->tau;
    body[17] = (uint8_t)p->l;
    body[18] = (uint8_t)p->levels;
    body[19] = (uint8_t)s->lbase;
    body[20] = (uint8_t)pl->M;
    body[21] = body[22] = body[23] = 0;
    if (p->levels)
        memcpy(body + 24, pl->lens, (size_t)1 << p->l);
}

/* ------------------------------------------------------------ emulation */

/* k_value_pass + k_value_final: Σ|v| over the fixed tree, the largest |v|,
 * the first non-finite index. */
static void emu_value_pass(const float *vals, size_t n, fsd_summary_t *s)
{
    double part[FSD_SUM_BLOCKS];
    float pmax[FSD_SUM_BLOCKS];
    double sh[FSD_THREADS];
    float shm[FSD_THREADS];
    s->nonfinite = UINT32_MAX;
    for (int blk = 0; blk < FSD_SUM_BLOCKS; blk++) {
        for (int t = 0; t < FSD_THREADS; t++) {
            double acc = 0;
            float mx = 0;
            for (size_t i = (size_t)blk * FSD_THREADS + (size_t)t; i < n; i += FSD_GRID) {
                float a = fabsf(vals[i]);
                acc += (double)a;
                mx = a > mx ? a : mx;
                if (fsd_nonfinite(vals[i]) && i < s->nonfinite)
                    s->nonfinite = (uint32_t)i;
            }
            sh[t] = acc;
            shm[t] = mx;
        }
        for (int w = FSD_THREADS / 2; w > 0; w >>= 1)
            for (int t = 0; t < w; t++) {
                sh[t] += sh[t + w];
                shm[t] = shm[t + w] > shm[t] ? shm[t + w] : shm[t];
            }
        part[blk] = sh[0];
        pmax[blk] = shm[0];
    }
    for (int t = 0; t < FSD_THREADS; t++) {
        double acc = 0;
        float mx = 0;
        for (int i = t; i < FSD_SUM_BLOCKS; i += FSD_THREADS) {
            acc += part[i];
            mx = pmax[i] > mx ? pmax[i] : mx;
        }
        sh[t] = acc;
        shm[t] = mx;
    }
    for (int w = FSD_THREADS / 2; w > 0; w >>= 1)
        for (int t = 0; t < w; t++) {
            sh[t] += sh[t + w];
            shm[t] = shm[t + w] > shm[t] ? shm[t + w] : shm[t];
        }
    s->dsum = sh[0];
    s->mx = shm[0];
}

/* The emulation's per-value arrays, as the device holds them. */
typedef struct emu_arrays {
    uint32_t *pos, *ckeys, *delta, *words;
    uint8_t *keep, *codes;
    uint64_t *offs;
} emu_arrays_t;

static void emu_free(emu_arrays_t *a)
{
    free(a->pos);
    free(a->ckeys);
    free(a->delta);
    free(a->keep);
    free(a->codes);
    free(a->offs);
    free(a->words);
}

static int emu_alloc(emu_arrays_t *a, size_t n, char *err, size_t errsz)
{
    size_t nn = n ? n : 1;
    a->pos = malloc(nn * sizeof *a->pos);
    a->ckeys = malloc(nn * sizeof *a->ckeys);
    a->delta = malloc(nn * sizeof *a->delta);
    a->keep = malloc(nn);
    a->codes = malloc(nn);
    a->offs = malloc(nn * sizeof *a->offs);
    if (!a->pos || !a->ckeys || !a->delta || !a->keep || !a->codes || !a->offs)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "fastsgd device emulation: out of memory");
    return 0;
}

/* 1. k_value_pass, k_value_final and k_setup: S from the device tree sum,
 * or from the CPU lanes when the tree's sum is too close to call (or
 * force_lanes); then the kept levels f[]. */
static void emu_decide_sum(const fsgd_fastsgd_params_t *p, const float *vals, size_t n, int force_lanes,
                           fsd_summary_t *s, float *f)
{
    emu_value_pass(vals, n, s);
    if (s->nonfinite != UINT32_MAX)
        return;
    s->ambiguous = force_lanes || !fsd_sum_decide(s->dsum, n, &s->S);
    if (s->ambiguous) {
        double l0 = fsd_lane_sum(vals, n, 0), l1 = fsd_lane_sum(vals, n, 1);
        double l2 = fsd_lane_sum(vals, n, 2), l3 = fsd_lane_sum(vals, n, 3);
        s->S = fsd_sum_to_float(fsd_lanes_combine(l0, l1, l2, l3));
    }
    fsd_kept_levels(s->S, s->mx, p->b, p->tau, f, &s->lbase, &s->lhi);
}

/* 2. k_keep, exclusive scan, k_emit (compaction), count; 3. k_delta: the
 * kept keys' deltas, their OR and bit-length histogram. */
static void emu_compact(const uint32_t *keys, const float *vals, size_t n, const float *f, fsd_summary_t *s,
                        emu_arrays_t *a)
{
    for (size_t i = 0; i < n; i++)
        a->keep[i] = (uint8_t)fsd_keep(fabsf(vals[i]), f, s->lbase, s->lhi);
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        a->pos[i] = acc;
        acc += a->keep[i];
    }
    s->count = n ? a->pos[n - 1] + a->keep[n - 1] : 0;
    for (size_t i = 0; i < n; i++)
        if (a->keep[i]) {
            float v = fabsf(vals[i]);
            a->ckeys[a->pos[i]] = keys[i];
            a->codes[a->pos[i]] = fsd_value_code(vals[i], fsd_level_of(v, f, s->lbase, s->lhi), s->lbase);
        }
    for (uint32_t j = 0; j < s->count; j++) {
        a->delta[j] = a->ckeys[j] - (j ? a->ckeys[j - 1] : 0);
        s->orall |= a->delta[j];
        s->hist[fsd_bitlen(a->delta[j])]++;
    }
}

/* 5. k_nbits, exclusive scan of the bit counts, k_pack (OR into zeroed words). */
static int emu_pack_keys(const fsgd_fastsgd_params_t *p, const fsd_summary_t *s, const fsd_plan_t *pl,
                         emu_arrays_t *a, char *err, size_t errsz)
{
    size_t nwords = (size_t)(pl->key_bits + 31) / 32 + 3;
    a->words = calloc(nwords, sizeof *a->words);
    if (!a->words)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "fastsgd device emulation: out of memory");
    uint64_t total = 0;
    for (uint32_t j = 0; j < s->count; j++) {
        a->offs[j] = total;
        total += fsd_key_nbits(a->delta[j], p->l, pl->lens, pl->flag);
    }
    if (total != pl->key_bits)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "fastsgd device emulation: %llu key bits, histogram says %llu",
                            (unsigned long long)total, (unsigned long long)pl->key_bits);
    for (uint32_t j = 0; j < s->count; j++) {
        uint32_t w[3];
        fsd_key_place(fsd_key_code(a->delta[j], p->l, pl->flag), a->offs[j], w);
        size_t wi = (size_t)(a->offs[j] / 32);
        a->words[wi] |= w[0];
        a->words[wi + 1] |= w[1];
        a->words[wi + 2] |= w[2];
    }
    return 0;
}

/* 6. the "copy back" of value codes and key words into the body; the
 * host's header. */
static void emu_write_body(uint8_t *body, const fsgd_fastsgd_params_t *p, const fsd_summary_t *s,
                           const fsd_plan_t *pl, const emu_arrays_t *a)
{
    fsgd_fsd_write_header(body, p, s, pl);
    memcpy(body + pl->hdr, a->codes, s->count);
    uint8_t *kb = body + pl->hdr + s->count;
    for (size_t i = 0; i < pl->key_bytes; i++)
        kb[i] = (uint8_t)(a->words[i / 4] >> (8 * (i % 4)));
}

int fsgd_fastsgd_device_emulate(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n,
                                fsgd_outbuf_t *out, fsd_lanes_t *lanes, char *err, size_t errsz)
{
    out->len = 0;
    fsgd_fastsgd_params_t p;
    FSGD_TRY(fsgd_fsd_params(c, &p, err, errsz));
    if (n > UINT32_MAX || n > p.dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec fastsgd: %zu entries for dim %llu", n,
                            (unsigned long long)p.dim);
    fsd_summary_t s;
    memset(&s, 0, sizeof s);
    float f[256];
    emu_decide_sum(&p, vals, n, lanes && lanes->force, &s, f);
    if (lanes)
        lanes->ambiguous = s.ambiguous;
    emu_arrays_t a = {0};
    int rc = emu_alloc(&a, n, err, errsz);
    if (rc < 0)
        goto done;
    if (s.nonfinite == UINT32_MAX)
        emu_compact(keys, vals, n, f, &s, &a);
    /* 4. the host's plan from the summary. */
    fsd_plan_t pl;
    float bad = s.nonfinite != UINT32_MAX ? vals[s.nonfinite] : 0;
    rc = fsgd_fsd_plan_make(&p, &s, keys, &bad, out->cap, &pl, err, errsz);
    if (rc < 0)
        goto done;
    rc = emu_pack_keys(&p, &s, &pl, &a, err, errsz);
    if (rc < 0)
        goto done;
    emu_write_body(out->dst + FSGD_CODEC_FRAME_HEADER, &p, &s, &pl, &a);
    out->len = fsgd_fastsgd_finish(c, out->dst, pl.body_len, s.count, n, pl.key_bits);
done:
    emu_free(&a);
    return rc;
}
