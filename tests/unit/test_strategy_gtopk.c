/* Strategy gtopk (strategy/gtopk.c), through the public strategy API with P
 * simulated workers and one aggregator: the aggregator's selection is the
 * exact top-k of the dense sum of the workers' sparse messages; every
 * unselected entry goes back into its worker's residual, so
 * Σ residuals + Σ applied = Σ gradients; a message that was not applied
 * leaves the residual as before; malformed sections are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/reduce.h"
#include "fsgd/strategy.h"
#include "testlib.h"
#include "strategy_testing.h"

#define DIM 3000
#define MAXP 7

static float frand(uint64_t *s) { return (float)((double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0) * 2 - 1; }

/* A gradient: about n increasing keys < DIM (a hot range shared by every
 * worker, so sums collide), values in (-1, 1). */
static size_t rand_grad(uint64_t *s, uint32_t *keys, float *vals, size_t n)
{
    size_t m = 0;
    for (uint32_t k = 0; k < DIM; k++) {
        uint64_t r = fsgd_test_rand(s) % DIM;
        if ((k < 200 && r < 4 * n) || r < n / 2) {
            keys[m] = k;
            vals[m++] = frand(s);
        }
    }
    return m;
}

typedef struct ranked {
    double mag;
    uint32_t key;
} ranked_t;

static int cmp_ranked(const void *x, const void *y)
{
    const ranked_t *a = x, *b = y;
    if (a->mag != b->mag)
        return a->mag > b->mag ? -1 : 1;
    return (a->key > b->key) - (a->key < b->key);
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

static void run_gtopk(int P, const char *spec, size_t k)
{
    uint64_t s = fsgd_test_seed() ^ (0x67 + (uint64_t)P);
    char err[256];
    fsgd_sworker_t *w[MAXP];
    for (int i = 0; i < P; i++) {
        w[i] = fsgd_sworker_new(spec, DIM, 1, err, sizeof err);
        CU_ASSERT_FATAL(w[i] != NULL);
    }
    fsgd_sagg_t *a = fsgd_sagg_new(spec, DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT_EQUAL(fsgd_sagg_optimizer(a), FSGD_OPT_ADAM);
    CU_ASSERT_PTR_NULL(fsgd_sagg_downlink_spec(a));
    double *gsum = calloc(DIM, sizeof *gsum), *applied = calloc(DIM, sizeof *applied),
           *dense = calloc(DIM, sizeof *dense);
    uint32_t *keys = malloc(DIM * 4), *sel = malloc(DIM * 4);
    float *vals = malloc(DIM * 4);
    ranked_t *rk = malloc(DIM * sizeof *rk);
    uint8_t *msg[MAXP];
    size_t len[MAXP];
    fsgd_sparse_t dec = {0}, out = {0};
    for (int i = 0; i < P; i++)
        msg[i] = malloc(fsgd_sworker_bound(w[i], 2 * DIM));
    int bad = 0;
    for (int step = 0; step < 40 && !bad; step++) {
        memset(dense, 0, DIM * sizeof *dense);
        for (int i = 0; i < P; i++) {
            size_t n = rand_grad(&s, keys, vals, 40);
            for (size_t j = 0; j < n; j++)
                gsum[keys[j]] += vals[j];
            fsgd_outbuf_t ob = {msg[i], fsgd_sworker_bound(w[i], n), 0};
            CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w[i], keys, vals, n, 1, &ob, err, sizeof err), 0);
            len[i] = ob.len;
            CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg[i], len[i], DIM, &dec, err, sizeof err), 0);
            CU_ASSERT(dec.n <= k);
            for (size_t j = 0; j < dec.n; j++)
                dense[dec.keys[j]] += dec.vals[j];
            size_t entries = 0;
            CU_ASSERT_EQUAL_FATAL(fsgd_sagg_add(a, (uint32_t)i, msg[i], len[i], 1e30, &entries, err, sizeof err), 0);
            CU_ASSERT_EQUAL(entries, dec.n);
        }
        fsgd_step_info_t info = {(uint64_t)step + 1, (uint64_t)P, 0, 0, (uint32_t)P};
        fsgd_reducer_t *r = fsgd_sagg_take(a, &info, err, sizeof err);
        CU_ASSERT_FATAL(r != NULL);
        /* the exact top-k of the dense sum, computed independently */
        size_t m = 0;
        for (uint32_t key = 0; key < DIM; key++)
            if (dense[key] != 0) {
                rk[m].mag = fabs(dense[key]);
                rk[m++].key = key;
            }
        qsort(rk, m, sizeof *rk, cmp_ranked);
        size_t want = m < k ? m : k;
        for (size_t j = 0; j < want; j++)
            sel[j] = rk[j].key;
        qsort(sel, want, 4, cmp_u32);
        CU_ASSERT_EQUAL_FATAL(fsgd_reducer_take(r, 1.0, &out), 0);
        CU_ASSERT_EQUAL(out.n, want);
        for (size_t j = 0; j < out.n && j < want; j++) {
            if (out.keys[j] != sel[j] || fabsf(out.vals[j] - (float)dense[sel[j]]) > 1e-6f * (1 + fabsf(out.vals[j])))
                bad = 1;
            applied[out.keys[j]] += out.vals[j];
        }
        CU_ASSERT_FALSE(bad);
        size_t slen = 0;
        const uint8_t *sec = fsgd_sagg_section(a, &slen);
        CU_ASSERT_FATAL(sec != NULL && slen > 0);
        for (int i = 0; i < P; i++)
            CU_ASSERT_EQUAL(fsgd_sworker_after_step(w[i], 1, sec, slen, err, sizeof err), 0);
    }
    /* Σ residuals + Σ applied = Σ gradients: re-encode an empty gradient
     * with k = DIM would show the residual; read it instead through the
     * residual the next message carries: a fresh step with no gradient
     * sends the k largest residual entries, so drain by steps of k with the
     * section selecting everything sent (one worker at a time). */
    double maxerr = 0, scale = 0;
    double *res = calloc(DIM, sizeof *res);
    for (int i = 0; i < P; i++) {
        for (int guard = 0; guard < DIM && fsgd_sworker_residual_entries(w[i]) > 0; guard++) {
            fsgd_outbuf_t ob = {msg[i], fsgd_sworker_bound(w[i], 0), 0};
            CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w[i], keys, vals, 0, 1, &ob, err, sizeof err), 0);
            len[i] = ob.len;
            CU_ASSERT_EQUAL_FATAL(fsgd_sagg_add(a, 0, msg[i], len[i], 1e30, NULL, err, sizeof err), 0);
            CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg[i], len[i], DIM, &dec, err, sizeof err), 0);
            for (size_t j = 0; j < dec.n; j++)
                res[dec.keys[j]] += dec.vals[j];
            fsgd_reducer_t *r = fsgd_sagg_take(a, NULL, err, sizeof err);
            CU_ASSERT_FATAL(r != NULL);
            CU_ASSERT_EQUAL(fsgd_reducer_take(r, 1.0, &out), 0);
            CU_ASSERT_EQUAL(out.n, dec.n); /* one sender: its k entries are the global top-k */
            size_t slen = 0;
            const uint8_t *sec = fsgd_sagg_section(a, &slen);
            CU_ASSERT_EQUAL(fsgd_sworker_after_step(w[i], 1, sec, slen, err, sizeof err), 0);
        }
        CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w[i]), 0);
    }
    for (uint32_t key = 0; key < DIM; key++) {
        double e = fabs(res[key] + applied[key] - gsum[key]);
        maxerr = e > maxerr ? e : maxerr;
        scale = fabs(gsum[key]) > scale ? fabs(gsum[key]) : scale;
    }
    CU_ASSERT(maxerr <= 1e-4 * (1 + scale));
    if (maxerr > 1e-4 * (1 + scale))
        fprintf(stderr, "\n  gtopk P=%d: mass error %g (scale %g)\n", P, maxerr, scale);
    for (int i = 0; i < P; i++) {
        free(msg[i]);
        fsgd_sworker_destroy(w[i]);
    }
    fsgd_sagg_destroy(a);
    fsgd_sparse_free(&dec);
    fsgd_sparse_free(&out);
    free(gsum);
    free(applied);
    free(dense);
    free(res);
    free(keys);
    free(sel);
    free(vals);
    free(rk);
}

static void test_selection_and_putback_p5(void) { run_gtopk(5, "gtopk:k=25", 25); }
static void test_selection_and_putback_p2(void) { run_gtopk(2, "gtopk:k=7", 7); }
static void test_selection_and_putback_density(void) { run_gtopk(3, "gtopk:density=0.01", 30); }

static void test_not_applied_restores(void)
{
    char err[256];
    fsgd_sworker_t *w = fsgd_sworker_new("gtopk:k=2", 100, 1, err, sizeof err);
    CU_ASSERT_FATAL(w != NULL);
    uint32_t keys[5] = {1, 5, 9, 20, 40};
    float vals[5] = {1, -5, 3, 0.5f, -2};
    uint8_t msg[256];
    fsgd_outbuf_t out = {msg, sizeof msg, 0};
    CU_ASSERT_EQUAL(fsgd_sworker_encode(w, keys, vals, 5, 1, &out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w), 3);
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 0, NULL, 0, err, sizeof err), 1);
    CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w), 0);
    /* applied with no section: refused, state kept */
    CU_ASSERT_EQUAL(fsgd_sworker_encode(w, keys, vals, 5, 1, &out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 1, NULL, 0, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "gtopk section");
    fsgd_sworker_destroy(w);
}

static void test_bad_sections_refused(void)
{
    char err[256];
    fsgd_sworker_t *w = fsgd_sworker_new("gtopk:k=3", 1000, 1, err, sizeof err);
    fsgd_sagg_t *a = fsgd_sagg_new("gtopk:k=3", 1000, 1, err, sizeof err);
    CU_ASSERT_FATAL(w && a);
    uint32_t keys[6] = {1, 5, 9, 20, 40, 999};
    float vals[6] = {1, -5, 3, 0.5f, -2, 7};
    uint8_t msg[256], sec[256];
    size_t len, slen;
    fsgd_outbuf_t ob = {msg, sizeof msg, 0};
    CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w, keys, vals, 6, 1, &ob, err, sizeof err), 0);
    len = ob.len;
    CU_ASSERT_EQUAL_FATAL(fsgd_sagg_add(a, 0, msg, len, 1e30, NULL, err, sizeof err), 0);
    CU_ASSERT_FATAL(fsgd_sagg_take(a, NULL, err, sizeof err) != NULL);
    const uint8_t *s = fsgd_sagg_section(a, &slen);
    CU_ASSERT_FATAL(s && slen <= sizeof sec);
    memcpy(sec, s, slen);
    uint64_t rs = fsgd_test_seed();
    for (size_t cut = 0; cut < slen; cut++) /* every truncation */
        CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 1, sec, cut, err, sizeof err), FSGD_E_FORMAT);
    for (int t = 0; t < 200; t++) { /* single bit flips */
        size_t at = fsgd_test_rand(&rs) % slen;
        int bit = (int)(fsgd_test_rand(&rs) % 8);
        sec[at] ^= (uint8_t)(1 << bit);
        CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 1, sec, slen, err, sizeof err), FSGD_E_FORMAT);
        sec[at] ^= (uint8_t)(1 << bit);
    }
    CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w), 3);
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 1, sec, slen, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w), 3); /* one sender: all 3 sent were selected */
    fsgd_sworker_destroy(w);
    fsgd_sagg_destroy(a);
}

static void test_spec_errors(void)
{
    char err[256];
    CU_ASSERT_EQUAL(fsgd_strategy_check("gtopk", 1000, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("gtopk:k=10", 1000, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("gtopk:k=10,density=0.1", 1000, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "not both");
    CU_ASSERT_EQUAL(fsgd_strategy_check("gtopk:density=2", 1000, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "density");
    CU_ASSERT_EQUAL(fsgd_strategy_check("gtopk:foo=1", 1000, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "foo");
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"5 workers: selection = exact top-k of the dense sum; residuals + applied = gradients",
         test_selection_and_putback_p5},
        {"2 workers: the same", test_selection_and_putback_p2},
        {"k as a density of dim", test_selection_and_putback_density},
        {"a message not applied leaves the residual as before", test_not_applied_restores},
        {"truncated or flipped sections are refused, state kept", test_bad_sections_refused},
        {"spec errors name the parameter", test_spec_errors},
        {NULL, NULL},
    };
    fsgd_test_suite("strategy gtopk", cases);
}
