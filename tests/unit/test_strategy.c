/* The strategy interface (fsgd/strategy.h) with the codec strategies:
 * the registry, one synchronous step end to end through the public calls,
 * and the error-feedback bookkeeping of a message that was not applied. */
#include <math.h>
#include <stdlib.h>

#include "fsgd/codec.h"
#include "fsgd/strategy.h"
#include "testlib.h"
#include "common_testing.h"
#include "strategy_testing.h"

#define DIM 4096
#define WORKERS 3

/* A sparse gradient of about n random keys with values in (-1, 1). */
static void random_grad(uint64_t *rng, size_t n, fsgd_sparse_t *g)
{
    uint8_t *seen = calloc(DIM, 1);
    CU_ASSERT_FATAL(seen && fsgd_sparse_reserve(g, n) == 0);
    for (size_t i = 0; i < n; i++)
        seen[fsgd_test_rand(rng) % DIM] = 1;
    g->n = 0;
    for (uint32_t k = 0; k < DIM; k++)
        if (seen[k]) {
            g->keys[g->n] = k;
            g->vals[g->n++] = (float)((double)(fsgd_test_rand(rng) % 2000001) / 1e6 - 1.0);
        }
    free(seen);
}

static void test_registry(void)
{
    char err[256];
    const char *names = fsgd_strategy_list();
    FSGD_ASSERT_CONTAINS(names, "fastsgd");
    FSGD_ASSERT_CONTAINS(names, "none");
    CU_ASSERT_EQUAL(fsgd_strategy_check("fastsgd:b=1.1", DIM, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("nosuch:x=1", DIM, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "unknown strategy 'nosuch'");
    CU_ASSERT_EQUAL(fsgd_strategy_check("topk:k=0", DIM, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "topk");
    CU_ASSERT(fsgd_sworker_new("", DIM, 1, err, sizeof err) == NULL);
    fsgd_sagg_t *a = fsgd_sagg_new("none", DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT(fsgd_sagg_plain_sum(a));
    CU_ASSERT(fsgd_sagg_downlink_spec(a) == NULL); /* lossless: exact values go down */
    CU_ASSERT(isnan(fsgd_sagg_param(a, "bits")));
    fsgd_sagg_destroy(a);
    a = fsgd_sagg_new("logquant", DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT_STRING_EQUAL(fsgd_sagg_downlink_spec(a), "logquant");
    fsgd_sagg_destroy(a);
    /* the downlink's budget already keeps the largest |Δ|: topk must not cut it again */
    a = fsgd_sagg_new("topk:ratio=0.05", DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT_STRING_EQUAL(fsgd_sagg_downlink_spec(a), "topk:ratio=1");
    fsgd_sagg_destroy(a);
}

/* The parameter lists of the strategies' own keys (strategy/params.c): each
 * error names the strategy and the key; efsign passes what it does not know
 * on to its codec, which then judges it. */
static void test_strategy_params(void)
{
    static const struct {
        const char *spec, *want; /* want NULL: accepted */
    } cases[] = {
        {"gtopk:k=100", NULL},
        {"gtopk:density=0.01", NULL},
        {"gtopk:k=100,density=0.01", "gtopk: give k or density, not both"},
        {"gtopk:k=1.5", "gtopk: parameter k: '1.5' is not an integer"},
        {"gtopk:k=0", "gtopk: parameter k=0 out of range"},
        {"gtopk:kk=3", "gtopk: unknown parameter 'kk' (known: k, density)"},
        {"gtopk:k=3,k=4", "gtopk: parameter k given twice"},
        {"gtopk:k=3,", "gtopk: trailing ','"},
        {"gtopk:", "gtopk: empty parameter list"},
        {"efsign:mu=0.9,block=64", NULL},
        {"efsign:mu=x", "efsign: parameter mu: 'x' is not a number"},
        {"efsign:lazy=0.5", "efsign: parameter lazy: '0.5' is not an integer"},
        {"efsign:lr", "efsign: parameter lr: expected lr=value"},
        {"efsign:ef=1", "efsign: parameter ef: the strategy keeps its own error feedback"},
        {"efsign:blok=64", "blok"}, /* passed on: the codec refuses it */
        {"mqgrad:bits0=3", NULL},
        {"mqgrad:bits0=40", "mqgrad: parameter bits0=40 out of range"},
        {"gradiveq:lt=20", NULL},
        {"gradiveq:nope=1", "gradiveq: unknown parameter 'nope'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[512] = "";
        int rc = fsgd_strategy_check(cases[i].spec, DIM, err, sizeof err);
        if (!cases[i].want) {
            CU_ASSERT_EQUAL(rc, 0);
            if (rc)
                fprintf(stderr, "\n  %s: %s\n", cases[i].spec, err);
        } else {
            CU_ASSERT_EQUAL(rc, FSGD_E_ARG);
            FSGD_ASSERT_CONTAINS(err, cases[i].want);
        }
    }
}

/* Every worker's message through the aggregator side: the reducer holds
 * exactly the sum of what fsgd_codec_decode makes of each message. */
static void check_step(const char *spec)
{
    char err[256];
    uint64_t rng = fsgd_test_seed();
    fsgd_sworker_t *w[WORKERS];
    fsgd_sagg_t *a = fsgd_sagg_new(spec, DIM, 7, err, sizeof err);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT_EQUAL(fsgd_sagg_optimizer(a), FSGD_OPT_ADAM);
    double *want = calloc(DIM, sizeof *want);
    fsgd_sparse_t g = {0}, dec = {0};
    for (int i = 0; i < WORKERS; i++) {
        w[i] = fsgd_sworker_new(spec, DIM, 7 + (uint64_t)i, err, sizeof err);
        CU_ASSERT_FATAL(w[i] != NULL);
    }
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < WORKERS; i++) {
            random_grad(&rng, 300, &g);
            size_t cap = fsgd_sworker_bound(w[i], g.n), len = 0, entries = 0;
            uint8_t *msg = malloc(cap);
            CU_ASSERT_FATAL(msg != NULL);
            fsgd_outbuf_t ob = {msg, cap, 0};
            CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w[i], g.keys, g.vals, g.n, 10, &ob, err, sizeof err), 0);
            len = ob.len;
            CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg, len, DIM, &dec, err, sizeof err), 0);
            for (size_t k = 0; k < dec.n; k++)
                want[dec.keys[k]] += dec.vals[k];
            CU_ASSERT_EQUAL(fsgd_sagg_add(a, (uint32_t)i, msg, len, 1e9, &entries, err, sizeof err), 0);
            CU_ASSERT_EQUAL(entries, dec.n);
            free(msg);
        }
        fsgd_step_info_t info = {.step = (uint64_t)step + 1, .rows = 30, .n_senders = WORKERS};
        fsgd_reducer_t *red = fsgd_sagg_take(a, &info, err, sizeof err);
        CU_ASSERT_FATAL(red != NULL);
        size_t n;
        const uint32_t *keys = fsgd_reducer_sorted_keys(red, &n);
        size_t nonzero = 0;
        for (uint32_t k = 0; k < DIM; k++)
            nonzero += want[k] != 0;
        CU_ASSERT(n >= nonzero);
        for (size_t k = 0; k < n; k++)
            CU_ASSERT_DOUBLE_EQUAL(fsgd_reducer_sum(red, keys[k]), want[keys[k]], 1e-9);
        fsgd_reducer_clear(red);
        memset(want, 0, DIM * sizeof *want);
        size_t slen = 1;
        CU_ASSERT(fsgd_sagg_section(a, &slen) == NULL && slen == 0);
        for (int i = 0; i < WORKERS; i++)
            CU_ASSERT_EQUAL(fsgd_sworker_after_step(w[i], 1, NULL, 0, err, sizeof err), 0);
    }
    for (int i = 0; i < WORKERS; i++)
        fsgd_sworker_destroy(w[i]);
    fsgd_sagg_destroy(a);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&dec);
    free(want);
}

static void test_step_none(void) { check_step("none"); }
static void test_step_fastsgd(void) { check_step("fastsgd"); }
static void test_step_logquant(void) { check_step("logquant"); }
static void test_step_topk(void) { check_step("topk:ratio=0.1"); }

/* A message the aggregator did not apply gives its residual mass back, so
 * residual + applied == sum of the gradients (no mass lost); one that was
 * applied keeps the residual as it is. */
static void test_not_applied_restores_residual(void)
{
    char err[256];
    uint64_t rng = fsgd_test_seed() ^ 0x5eed;
    fsgd_sworker_t *w = fsgd_sworker_new("topk:ratio=0.05", DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(w != NULL);
    fsgd_sparse_t g = {0};
    uint8_t *msg = malloc(fsgd_sworker_bound(w, DIM));
    fsgd_outbuf_t out = {msg, fsgd_sworker_bound(w, DIM), 0};
    random_grad(&rng, 400, &g);
    CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w, g.keys, g.vals, g.n, 1, &out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 1, NULL, 0, err, sizeof err), 0);
    size_t kept = fsgd_sworker_residual_entries(w);
    CU_ASSERT(kept > 0 && kept < g.n);
    random_grad(&rng, 400, &g);
    CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w, g.keys, g.vals, g.n, 1, &out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 0, NULL, 0, err, sizeof err), 1);
    CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w), kept); /* back to before that message */
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 0, NULL, 0, err, sizeof err), 0); /* nothing left to undo */
    CU_ASSERT_EQUAL(fsgd_sworker_reset(w), 1);
    CU_ASSERT_EQUAL(fsgd_sworker_residual_entries(w), 0);
    CU_ASSERT_EQUAL(fsgd_sworker_reset(w), 0);
    fsgd_sworker_destroy(w);
    fsgd_sparse_free(&g);
    free(msg);
}

/* A value beyond the bound is FSGD_E_RANGE and leaves the step's sum alone;
 * bytes that do not decode are FSGD_E_FORMAT. */
static void test_add_rejects(void)
{
    char err[256];
    fsgd_sworker_t *w = fsgd_sworker_new("none", DIM, 1, err, sizeof err);
    fsgd_sagg_t *a = fsgd_sagg_new("none", DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(w && a);
    uint32_t keys[2] = {3, 9};
    float vals[2] = {0.5f, 40.0f};
    uint8_t msg[256];
    size_t len;
    fsgd_outbuf_t ob = {msg, sizeof msg, 0};
    CU_ASSERT_EQUAL_FATAL(fsgd_sworker_encode(w, keys, vals, 2, 1, &ob, err, sizeof err), 0);
    len = ob.len;
    CU_ASSERT_EQUAL(fsgd_sagg_add(a, 1, msg, len, 10.0, NULL, err, sizeof err), FSGD_E_RANGE);
    FSGD_ASSERT_CONTAINS(err, "key 9");
    msg[len / 2] ^= 0x40;
    CU_ASSERT_EQUAL(fsgd_sagg_add(a, 1, msg, len, 100.0, NULL, err, sizeof err), FSGD_E_FORMAT);
    fsgd_step_info_t info = {.step = 1};
    fsgd_reducer_t *red = fsgd_sagg_take(a, &info, err, sizeof err);
    CU_ASSERT_FATAL(red != NULL);
    CU_ASSERT_EQUAL(fsgd_reducer_count(red), 0);
    fsgd_sworker_destroy(w);
    fsgd_sagg_destroy(a);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"registry and specs", test_registry},
        {"strategy parameter lists", test_strategy_params},
        {"one step: none", test_step_none},
        {"one step: fastsgd", test_step_fastsgd},
        {"one step: logquant", test_step_logquant},
        {"one step: topk", test_step_topk},
        {"a message not applied gives its residual back", test_not_applied_restores_residual},
        {"add rejects out-of-bound and corrupt messages", test_add_rejects},
        {NULL, NULL},
    };
    fsgd_test_suite("strategy", cases);
}
