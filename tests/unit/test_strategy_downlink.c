/* The downlink through the strategy's two sides (fsgd_sagg_downlink_*,
 * fsgd_sworker_downlink_*): the aggregator side sends exactly the bytes the
 * downlink module would (fsgd/downlink.h, driven beside it), a worker that
 * decodes and applies them holds the replica bit for bit and its check
 * says so, a replica that drifted fails the check, and the job's downlink
 * key resolves ("full", "auto", a spec) or is refused by name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/downlink.h"
#include "fsgd/error.h"
#include "fsgd/strategy.h"
#include "testlib.h"

#define DIM 3000

static float frand(uint64_t *s) { return (float)((double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0) * 2 - 1; }

/* Steps of random touched keys: the strategy's aggregator side and a bare
 * fsgd_downlink_t of the same spec code the same θ; a worker applies what
 * the strategy sent. */
static void check_sides_agree(const char *strategy, const char *job_downlink, const char *want_used)
{
    uint64_t s = fsgd_test_seed() ^ 0x5D;
    float *theta = calloc(DIM, sizeof *theta), *worker = calloc(DIM, sizeof *worker);
    uint32_t *keys = malloc(DIM * sizeof *keys);
    CU_ASSERT_FATAL(theta && worker && keys);
    char err[256] = "", used[256] = "";
    fsgd_sagg_t *a = fsgd_sagg_new(strategy, DIM, 7, err, sizeof err);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT_EQUAL_FATAL(fsgd_sagg_downlink_open(a, job_downlink, theta, used, sizeof used, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(used, want_used);
    CU_ASSERT_EQUAL_FATAL(fsgd_sagg_downlink_coded(a), 1);
    fsgd_downlink_t *ref = fsgd_downlink_new(used, DIM, theta, err, sizeof err);
    CU_ASSERT_FATAL(ref != NULL);
    size_t cap = fsgd_sagg_downlink_bound(a, DIM);
    CU_ASSERT_EQUAL(cap, fsgd_downlink_bound(ref, DIM));
    uint8_t *msg = malloc(cap), *ref_msg = malloc(cap);
    fsgd_sparse_t update = {0};
    size_t sent = 0;
    for (int step = 0; step < 100; step++) {
        size_t n = 0;
        for (uint32_t k = 0; k < DIM; k++)
            if (fsgd_test_rand(&s) % 10 == 0)
                keys[n++] = k;
        for (size_t i = 0; i < n; i++)
            theta[keys[i]] += 0.01f * frand(&s);
        size_t budget = step % 3 ? n / 2 + 1 : 0, len = 0, ref_len = 0;
        fsgd_outbuf_t ob = {msg, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_sagg_downlink_encode(a, theta, keys, n, budget, &ob, err, sizeof err), 0);
        len = ob.len;
        fsgd_outbuf_t obref = {ref_msg, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_downlink_encode(ref, theta, keys, n, budget, &obref, err, sizeof err), 0);
        ref_len = obref.len;
        CU_ASSERT_EQUAL_FATAL(len, ref_len);
        CU_ASSERT_FATAL(memcmp(msg, ref_msg, len) == 0);
        CU_ASSERT_EQUAL(fsgd_sagg_downlink_check(a), fsgd_downlink_checksum(fsgd_downlink_replica(ref), DIM));
        CU_ASSERT_EQUAL_FATAL(fsgd_sworker_downlink_decode(msg, len, DIM, &update, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_sworker_downlink_apply(worker, DIM, &update, err, sizeof err), 0);
        CU_ASSERT_EQUAL(fsgd_sworker_downlink_verify(worker, DIM, fsgd_sagg_downlink_check(a)), 1);
        sent += update.n;
    }
    CU_ASSERT(sent > 0);
    CU_ASSERT(memcmp(worker, fsgd_downlink_replica(ref), DIM * sizeof *worker) == 0);

    /* A replica one weight off fails the check. */
    worker[DIM / 2] = nextafterf(worker[DIM / 2], INFINITY);
    CU_ASSERT_EQUAL(fsgd_sworker_downlink_verify(worker, DIM, fsgd_sagg_downlink_check(a)), 0);

    /* A snapshot: ρ = θ, so a worker holding θ passes. */
    fsgd_sagg_downlink_sync(a, theta);
    CU_ASSERT_EQUAL(fsgd_sworker_downlink_verify(theta, DIM, fsgd_sagg_downlink_check(a)), 1);

    fsgd_sparse_free(&update);
    free(msg);
    free(ref_msg);
    fsgd_downlink_destroy(ref);
    fsgd_sagg_destroy(a);
    free(keys);
    free(worker);
    free(theta);
}

static void test_auto_fastsgd(void) { check_sides_agree("fastsgd", "auto", "fastsgd"); }
static void test_explicit_spec(void) { check_sides_agree("none", "topk:ratio=0.25", "topk:ratio=0.25"); }

/* "full", and "auto" on a lossless strategy, open no coded downlink. */
static void test_full_and_lossless(void)
{
    float theta[4] = {0};
    char err[256] = "", used[64] = "";
    const char *cases[][2] = {{"fastsgd", "full"}, {"none", "auto"}, {"none", ""}, {"fastsgd", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fsgd_sagg_t *a = fsgd_sagg_new(cases[i][0], 4, 1, err, sizeof err);
        CU_ASSERT_FATAL(a != NULL);
        CU_ASSERT_EQUAL(fsgd_sagg_downlink_open(a, cases[i][1], theta, used, sizeof used, err, sizeof err), 0);
        CU_ASSERT_STRING_EQUAL(used, "full");
        CU_ASSERT_EQUAL(fsgd_sagg_downlink_coded(a), 0);
        fsgd_sagg_destroy(a);
    }
}

/* A spec that is no lossy codec is refused, naming it. */
static void test_bad_spec(void)
{
    float theta[4] = {0};
    char err[256] = "", used[64] = "";
    const char *bad[] = {"nosuchcodec", "none"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fsgd_sagg_t *a = fsgd_sagg_new("fastsgd", 4, 1, err, sizeof err);
        CU_ASSERT_FATAL(a != NULL);
        err[0] = '\0';
        CU_ASSERT_EQUAL(fsgd_sagg_downlink_open(a, bad[i], theta, used, sizeof used, err, sizeof err), FSGD_E_ARG);
        char want[64];
        snprintf(want, sizeof want, "downlink '%s'", bad[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
        CU_ASSERT_EQUAL(fsgd_sagg_downlink_coded(a), 0);
        fsgd_sagg_destroy(a);
    }
}

/* What does not decode is refused and leaves θ alone; a non-finite sum too. */
static void test_worker_refuses(void)
{
    float theta[8] = {1, 2, 3, 4, 5, 6, 7, 8}, before[8];
    memcpy(before, theta, sizeof theta);
    char err[256] = "";
    fsgd_sparse_t u = {0};
    uint8_t junk[16] = {0xff, 0xee, 1, 2, 3};
    CU_ASSERT(fsgd_sworker_downlink_decode(junk, sizeof junk, 8, &u, err, sizeof err) < 0);
    CU_ASSERT(err[0] != '\0');
    CU_ASSERT_EQUAL_FATAL(fsgd_sparse_reserve(&u, 2), 0);
    u.keys[0] = 1;
    u.vals[0] = 1.0f;
    u.keys[1] = 3;
    u.vals[1] = INFINITY;
    u.n = 2;
    CU_ASSERT_EQUAL(fsgd_sworker_downlink_apply(theta, 8, &u, err, sizeof err), FSGD_E_NONFINITE);
    CU_ASSERT(memcmp(theta, before, sizeof theta) == 0);
    fsgd_sparse_free(&u);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"auto downlink: the strategy sends the downlink module's bytes, a worker holds the replica",
         test_auto_fastsgd},
        {"an explicit downlink spec: the same", test_explicit_spec},
        {"full, and auto on a lossless strategy, open no coded downlink", test_full_and_lossless},
        {"a downlink spec that is no lossy codec is refused by name", test_bad_spec},
        {"the worker side refuses what does not decode or sums to non-finite", test_worker_refuses},
        {NULL, NULL},
    };
    fsgd_test_suite("strategy downlink", cases);
}
