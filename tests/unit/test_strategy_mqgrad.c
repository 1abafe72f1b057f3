/* Strategy "mqgrad" and its codec (id 7): the quantizer against the
 * definition in codec/FORMAT.md, malformed messages and sections rejected
 * with the field and offset, the SARSA agent deterministic for a seed and
 * true to the paper's action set, and a4 simulated workers on a9a through
 * the public strategy API: AUC within 0.01 of "none", bits per step from
 * param("bits"), and the same run twice gives the same bits and model. */
#include <math.h>
#include <stdlib.h>

#include "fsgd/codec.h"
#include "fsgd/crc32c.h"
#include "fsgd/le.h"
#include "fsgd/mqgrad.h"
#include "fsgd/strategy.h"
#include "strategy_sim.h"
#include "testlib.h"
#include "codec_testing.h"

#define DIM 3000

static float frand(uint64_t *s) { return (float)((double)(fsgd_test_rand(s) >> 11) * 0x1p-53 * 2 - 1); }

static size_t make_grad(uint64_t *s, uint32_t *k, float *v, size_t n)
{
    size_t m = 0;
    for (uint32_t key = 0; key < DIM && m < n; key++)
        if (fsgd_test_rand(s) % DIM < n) {
            k[m] = key;
            float x = frand(s);
            v[m] = (m % 11 == 3) ? 0 : x * x * x * (fsgd_test_rand(s) % 4 == 0 ? 30.0f : 1.0f);
            m++;
        }
    return m;
}

/* The quantizer from its definition, in the same float operations. */
static void reference(const float *v, size_t n, int bits, float *out)
{
    uint32_t qmax = (1u << bits) - 1;
    float lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++)
        lo = fminf(lo, v[i]), hi = fmaxf(hi, v[i]);
    float s = (float)(((double)hi - (double)lo) / qmax);
    for (size_t i = 0; i < n; i++) {
        if (!(s > 0)) {
            out[i] = 0;
            continue;
        }
        float z = fminf(fmaxf(floorf(-lo / s + 0.5f), 0), (float)qmax);
        float q = fminf(fmaxf(floorf(v[i] / s + 0.5f) + z, 0), (float)qmax);
        out[i] = (q - z) * s;
    }
}

static void test_codec_definition(void)
{
    uint64_t seed = fsgd_test_seed() ^ 0x77;
    uint32_t k[600];
    float v[600], ref[600];
    fsgd_sparse_t dec = {0};
    char err[256];
    for (int bits = 2; bits <= 16; bits++) {
        char spec[64];
        snprintf(spec, sizeof spec, "mqgrad:bits=%d", bits);
        fsgd_codec_t *c = fsgd_codec_new(spec, DIM, err, sizeof err);
        CU_ASSERT_FATAL(c != NULL);
        CU_ASSERT_EQUAL(fsgd_codec_id(c), 7);
        size_t n = make_grad(&seed, k, v, 500), cap = fsgd_codec_bound(c, n), len = 0;
        uint8_t *msg = malloc(cap);
        fsgd_outbuf_t ob = {msg, cap, 0};
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_encode(c, k, v, n, &ob, err, sizeof err), 0);
        len = ob.len;
        CU_ASSERT_EQUAL(fsgd_mqgrad_message_bits(msg, len), bits);
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(msg, len, DIM, &dec, err, sizeof err), 0);
        reference(v, n, bits, ref);
        size_t j = 0, bad = 0;
        float lo = 0, hi = 0;
        for (size_t i = 0; i < n; i++)
            lo = fminf(lo, v[i]), hi = fmaxf(hi, v[i]);
        float step = (hi - lo) / (float)((1u << bits) - 1);
        for (size_t i = 0; i < n; i++) {
            if (ref[i] == 0) { /* zero codes are not sent */
                bad += j < dec.n && dec.keys[j] == k[i];
                continue;
            }
            if (j >= dec.n || dec.keys[j] != k[i] || dec.vals[j] != ref[i])
                bad++;
            else if (fabsf(dec.vals[j] - v[i]) > 0.51f * step) /* within half a step (and float rounding at 16 bits) */
                bad++;
            j++;
        }
        if (bad || j != dec.n)
            printf("\n  bits %d: %zu of %zu entries differ from the definition (%zu decoded, %zu expected)\n", bits,
                   bad, n, dec.n, j);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(j, dec.n);
        /* the set bits change what goes out, and the header says so */
        CU_ASSERT_EQUAL(fsgd_mqgrad_set_bits(c, bits == 2 ? 3 : 2), 0);
        ob = (fsgd_outbuf_t){msg, cap, 0};
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, k, v, n, &ob, err, sizeof err), 0);
        len = ob.len;
        CU_ASSERT_EQUAL(fsgd_mqgrad_message_bits(msg, len), bits == 2 ? 3 : 2);
        CU_ASSERT_EQUAL(fsgd_mqgrad_set_bits(c, 1), FSGD_E_ARG);
        CU_ASSERT_EQUAL(fsgd_mqgrad_set_bits(c, 17), FSGD_E_ARG);
        free(msg);
        fsgd_codec_destroy(c);
    }
    fsgd_codec_t *other = fsgd_codec_new("fastsgd", DIM, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_mqgrad_set_bits(other, 4), FSGD_E_ARG);
    fsgd_codec_destroy(other);
    fsgd_sparse_free(&dec);
}

static void reseal(uint8_t *m, size_t len) { fsgd_le_put32(m + len - 4, fsgd_crc32c(0, m, len - 4)); }

static void expect_bad(const uint8_t *m, size_t len, const char *field)
{
    fsgd_sparse_t dec = {0};
    char err[256] = "";
    int rc = fsgd_codec_decode(m, len, DIM, &dec, err, sizeof err);
    CU_ASSERT(rc < 0);
    CU_ASSERT_EQUAL(dec.n, 0);
    FSGD_ASSERT_CONTAINS(err, field);
    FSGD_ASSERT_CONTAINS(err, "offset");
    fsgd_sparse_free(&dec);
}

static void test_codec_malformed(void)
{
    uint64_t seed = 0x1234;
    uint32_t k[100];
    float v[100];
    char err[256];
    fsgd_codec_t *c = fsgd_codec_new("mqgrad:bits=3", DIM, err, sizeof err);
    size_t n = make_grad(&seed, k, v, 60), cap = fsgd_codec_bound(c, n), len = 0;
    uint8_t *msg = malloc(cap), *m = malloc(cap);
    fsgd_outbuf_t ob = {msg, cap, 0};
    CU_ASSERT_FATAL(fsgd_codec_encode(c, k, v, n, &ob, err, sizeof err) == 0);
    len = ob.len;
    memcpy(m, msg, len), m[24] = 1, reseal(m, len);
    expect_bad(m, len, "mqgrad.bits");
    memcpy(m, msg, len), m[24] = 17, reseal(m, len);
    expect_bad(m, len, "mqgrad.bits");
    memcpy(m, msg, len), m[26] = 1, reseal(m, len);
    expect_bad(m, len, "mqgrad.reserved");
    memcpy(m, msg, len), fsgd_le_putf32(m + 28, -1.0f), reseal(m, len);
    expect_bad(m, len, "mqgrad.scale");
    memcpy(m, msg, len), fsgd_le_put32(m + 32, 8), reseal(m, len);
    expect_bad(m, len, "mqgrad.zero_point");
    memcpy(m, msg, len), fsgd_le_put32(m + 36, 100000), reseal(m, len);
    expect_bad(m, len, "mqgrad.key_bytes");
    memcpy(m, msg, len), fsgd_le_put32(m + 36, fsgd_le_get32(msg + 36) + 1), reseal(m, len);
    expect_bad(m, len, "mqgrad.");
    /* a code equal to the zero point: the first code's 3 bits */
    uint32_t kb = fsgd_le_get32(msg + 36), z = fsgd_le_get32(msg + 32);
    size_t codes = 24 + 16 + kb;
    memcpy(m, msg, len), m[codes] = (uint8_t)((m[codes] & ~7u) | z), reseal(m, len);
    expect_bad(m, len, "mqgrad.codes");
    /* padding bits of the last code byte */
    if ((n * 3) % 8) {
        memcpy(m, msg, len), m[len - 5] |= 0x80, reseal(m, len);
        expect_bad(m, len, "mqgrad.codes");
    }
    /* every truncation */
    for (size_t cut = 0; cut < len; cut++) {
        memcpy(m, msg, cut);
        if (cut >= 28)
            reseal(m, cut);
        fsgd_sparse_t dec = {0};
        CU_ASSERT(fsgd_codec_decode(m, cut, DIM, &dec, err, sizeof err) < 0);
        fsgd_sparse_free(&dec);
    }
    free(msg), free(m);
    fsgd_codec_destroy(c);
}

static void test_strategy_spec(void)
{
    char err[256];
    CU_ASSERT_EQUAL(fsgd_strategy_check("mqgrad", 100, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("mqgrad:T=5,alpha=0.01,gamma=300,eps=0.1,eta=0.1,lower=1", 100, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("mqgrad:norm=1", 100, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("mqgrad:norm=2", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "norm");
    CU_ASSERT_EQUAL(fsgd_strategy_check("mqgrad:bits0=9", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "bits0");
    CU_ASSERT_EQUAL(fsgd_strategy_check("mqgrad:T=1", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "T=1");
    CU_ASSERT_EQUAL(fsgd_strategy_check("mqgrad:colour=red", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "colour");
    CU_ASSERT_EQUAL(fsgd_strategy_check("mqgrad:eps=0.1,eps=0.2", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(fsgd_strategy_list(), "mqgrad");
}

/* A worker takes the bits of the section; a bad section changes nothing. */
static void test_section(void)
{
    char err[256];
    fsgd_sworker_t *w = fsgd_sworker_new("mqgrad", DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(w != NULL);
    uint32_t k[3] = {1, 5, 9};
    float v[3] = {0.5f, -1.0f, 0.25f};
    uint8_t msg[256];
    size_t len;
    fsgd_outbuf_t ob = {msg, sizeof msg, 0};
    CU_ASSERT_EQUAL(fsgd_sworker_encode(w, k, v, 3, 1, &ob, err, sizeof err), 0);
    len = ob.len;
    CU_ASSERT_EQUAL(fsgd_mqgrad_message_bits(msg, len), 2);
    uint8_t sec[4] = {1, 6, 0, 0};
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 1, sec, 4, err, sizeof err), 0);
    ob = (fsgd_outbuf_t){msg, sizeof msg, 0};
    CU_ASSERT_EQUAL(fsgd_sworker_encode(w, k, v, 3, 1, &ob, err, sizeof err), 0);
    len = ob.len;
    CU_ASSERT_EQUAL(fsgd_mqgrad_message_bits(msg, len), 6);
    const struct {
        uint8_t b[5];
        size_t len;
        const char *field;
    } bad[] = {
        {{1, 9, 0, 0}, 4, "mqgrad.bits"},    {{1, 1, 0, 0}, 4, "mqgrad.bits"},
        {{2, 4, 0, 0}, 4, "mqgrad.version"}, {{1, 4, 0, 1}, 4, "mqgrad.reserved"},
        {{1, 4, 0}, 3, "mqgrad.section"},    {{1, 4, 0, 0, 0}, 5, "mqgrad.section"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        CU_ASSERT(fsgd_sworker_after_step(w, 1, bad[i].b, bad[i].len, err, sizeof err) < 0);
        FSGD_ASSERT_CONTAINS(err, bad[i].field);
        FSGD_ASSERT_CONTAINS(err, "offset");
    }
    ob = (fsgd_outbuf_t){msg, sizeof msg, 0};
    CU_ASSERT_EQUAL(fsgd_sworker_encode(w, k, v, 3, 1, &ob, err, sizeof err), 0);
    len = ob.len;
    CU_ASSERT_EQUAL(fsgd_mqgrad_message_bits(msg, len), 6);
    fsgd_sworker_destroy(w);
}

/* The aggregator's bits for a loss curve: a training-like curve with a step
 * time that grows with the bits. */
/* The agent through the strategy API on a synthetic run: loss falling
 * towards a floor, steps slower with more bits; losses times lscale and
 * step times times tscale (powers of 2 keep every sum exact). Per step:
 * the bits, the state's bits (q) and the last reward (reward). */
static void agent_run_scaled(const char *spec, uint64_t seed, int steps, double lscale, double tscale, int *bits,
                             double *q, double *reward)
{
    char err[256];
    fsgd_sagg_t *a = fsgd_sagg_new(spec, DIM, seed, err, sizeof err);
    CU_ASSERT_FATAL(a != NULL);
    int b = 2;
    for (int s = 0; s < steps; s++) {
        double loss = (0.3 + 0.4 * exp(-s / 150.0) + 0.002 * sin(s * 0.7)) * lscale;
        fsgd_step_info_t info = {(uint64_t)s + 1, 100, loss * 100, (0.004 + 0.001 * b) * tscale, 4};
        char e2[64];
        CU_ASSERT_FATAL(fsgd_sagg_take(a, &info, e2, sizeof e2) != NULL);
        bits[s] = b = (int)fsgd_sagg_param(a, "bits");
        size_t len;
        const uint8_t *sec = fsgd_sagg_section(a, &len);
        CU_ASSERT(len == 4 && sec[1] == b);
        if (q)
            q[s] = fsgd_sagg_param(a, "state_bits");
        if (reward)
            reward[s] = fsgd_sagg_param(a, "reward");
    }
    fsgd_sagg_destroy(a);
}

static void agent_run(const char *spec, uint64_t seed, int steps, int *bits, double *q)
{
    agent_run_scaled(spec, seed, steps, 1, 1, bits, q, NULL);
}

static void test_agent_deterministic(void)
{
    enum { N = 3000 };
    static int b1[N], b2[N], b3[N];
    static double n1[N];
    agent_run("mqgrad", 42, N, b1, n1);
    agent_run("mqgrad", 42, N, b2, NULL);
    agent_run("mqgrad", 43, N, b3, NULL);
    CU_ASSERT_EQUAL(memcmp(b1, b2, sizeof b1), 0);
    int differs = memcmp(b1, b3, sizeof b1) != 0, changes = 0;
    CU_ASSERT(differs); /* the seed is used */
    for (int s = 0; s < N; s++) {
        CU_ASSERT(b1[s] >= 2 && b1[s] <= 8);
        if (s % 5 != 4 && s > 0) /* bits change only when an MDP step completes (T = 5) */
            CU_ASSERT_EQUAL(b1[s], b1[s - 1]);
        if (s > 0 && n1[s] < n1[s - 1]) /* the paper never lowers the state's bits */
            CU_FAIL("state bits went down with lower=0");
        changes += s > 0 && b1[s] != b1[s - 1];
    }
    CU_ASSERT(changes > 0);
    /* with lower=1 the bits can go down as well */
    static int bl[N];
    agent_run("mqgrad:lower=1,eps=0.3", 7, N, bl, n1);
    int down = 0;
    for (int s = 1; s < N; s++)
        down += n1[s] < n1[s - 1];
    CU_ASSERT(down > 0);
}

/* norm=1: the agent sees losses in units of the run's first loss and times
 * in units of its fastest MDP window, so a run in other units (a loss 4096
 * times smaller, steps 8 times slower) gets the same rewards and the same
 * bits; with the paper's units (norm=0) the reward scales with them. */
static void test_agent_norm(void)
{
    enum { N = 3000 };
    static int b1[N], b2[N];
    static double r1[N], r2[N], q1[N], q2[N];
    const double ls = 0x1p-12, ts = 8;
    /* bits fixed at 2: the rewards depend on the losses and times alone */
    agent_run_scaled("mqgrad:max_bits=2,norm=0", 5, 100, 1, 1, b1, NULL, r1);
    agent_run_scaled("mqgrad:max_bits=2,norm=0", 5, 100, ls, ts, b2, NULL, r2);
    agent_run_scaled("mqgrad:max_bits=2,norm=1", 5, 100, 1, 1, b1, NULL, q1);
    agent_run_scaled("mqgrad:max_bits=2,norm=1", 5, 100, ls, ts, b2, NULL, q2);
    CU_ASSERT(isnan(r1[8]) && isnan(q1[8])); /* no reward before the second MDP step */
    /* eq. (2) in the run's units: times c_ref / l_ref = 30 ms (5 steps of 6 ms) / 0.7 */
    for (int s = 9; s < 100; s++) {
        CU_ASSERT(r1[s] > 0); /* the loss falls */
        CU_ASSERT_DOUBLE_EQUAL(r2[s] / r1[s], ls / ts, 1e-12 * ls / ts);
        CU_ASSERT_DOUBLE_EQUAL(q1[s], r1[s] * 30 / 0.7, 1e-9 * fabs(q1[s]));
        CU_ASSERT_EQUAL(q2[s], q1[s]);
    }
    /* the whole agent: same bits, same rewards */
    agent_run_scaled("mqgrad:norm=1", 42, N, 1, 1, b1, q1, r1);
    agent_run_scaled("mqgrad:norm=1", 42, N, ls, ts, b2, q2, r2);
    CU_ASSERT_EQUAL(memcmp(b1, b2, sizeof b1), 0);
    for (int s = 9; s < N; s++)
        if (r1[s] != r2[s]) {
            CU_FAIL("norm=1: rewards depend on the units");
            break;
        }
    /* and it raises the bits step by step as the loss flattens (here 3, 4,
     * 6, 8 at a tenth, a quarter, half and the end), in any units. With the
     * paper's units a loss this small gives rewards far below the Q
     * network's initial outputs: those decide the bits at the start (here 6)
     * and nothing moves them afterwards. */
    CU_ASSERT(q1[N - 1] - q1[N / 10] > 1);
    CU_ASSERT(q1[N / 2] > q1[N / 10]);
    agent_run_scaled("mqgrad:norm=0", 42, N, ls, ts, b2, q2, r2);
    CU_ASSERT_EQUAL(q2[N - 1], q2[N / 10]);
}

static void test_a9a(void)
{
    FSGD_TEST_DATA(trp, "a9a");
    FSGD_TEST_DATA(tep, "a9a.t");
    fsgd_csr_t tr, te;
    char err[256];
    CU_ASSERT_FATAL(sim_load(trp, &tr, err, sizeof err) == 0 && sim_load(tep, &te, err, sizeof err) == 0);
    /* 10 epochs of 4 x 64 rows: 1270 steps, 254 MDP steps */
    sim_cfg_t cfg = {"none", 4, 64, 10, 1, 0.002, 1e9, NULL, NULL};
    sim_result_t none = sim_run(&cfg, &tr, &te);
    if (!none.ok)
        printf("\n%s\n", none.err);
    CU_ASSERT_FATAL(none.ok);
    cfg.spec = "mqgrad";
    cfg.param = "bits";
    cfg.param2 = "bits_used";
    sim_result_t mq = sim_run(&cfg, &tr, &te), mq2 = sim_run(&cfg, &tr, &te);
    cfg.spec = "mqgrad:lower=1";
    sim_result_t low = sim_run(&cfg, &tr, &te);
    cfg.spec = "mqgrad:norm=1";
    sim_result_t nm = sim_run(&cfg, &tr, &te);
    if (!mq.ok)
        printf("\n%s\n", mq.err);
    CU_ASSERT_FATAL(mq.ok && mq2.ok && low.ok && nm.ok);
    size_t S = mq.steps, q = S / 10;
    double first = 0, last = 0, lfirst = 0, llast = 0, nfirst = 0, nlast = 0;
    for (size_t s = 0; s < q; s++) {
        first += mq.param2[s] / q, last += mq.param2[S - q + s] / q;
        lfirst += low.param2[s] / q, llast += low.param2[S - q + s] / q;
        nfirst += nm.param2[s] / q, nlast += nm.param2[S - q + s] / q;
    }
    printf("\n  a9a 4 workers x 64 rows, %zu steps, modelled 2 ms + 1 Gbit/s: none auc %.4f up %.0f B "
           "to-target(0.35) %.3f s; mqgrad auc %.4f up %.0f B to-target %.3f s, bits first tenth %.2f last "
           "tenth %.2f; lower=1 auc %.4f up %.0f B to-target %.3f s, bits %.2f -> %.2f\n",
           S, none.auc, none.bytes_up, sim_time_to(&none, 0.35), mq.auc, mq.bytes_up, sim_time_to(&mq, 0.35), first,
           last, low.auc, low.bytes_up, sim_time_to(&low, 0.35), lfirst, llast);
    printf("  norm=1 auc %.4f up %.0f B to-target %.3f s, bits %.2f -> %.2f\n", nm.auc, nm.bytes_up,
           sim_time_to(&nm, 0.35), nfirst, nlast);
    CU_ASSERT(fabs(nm.auc - none.auc) <= 0.01);
    CU_ASSERT(nlast > nfirst + 1); /* the schedule holds in the run's own units too */
    CU_ASSERT(fabs(mq.auc - none.auc) <= 0.01);
    CU_ASSERT(fabs(low.auc - none.auc) <= 0.01);
    CU_ASSERT(mq.bytes_up < none.bytes_up);
    CU_ASSERT(mq.param2[0] == 2); /* the first step goes out at bits0 */
    CU_ASSERT(last > first + 1);  /* the paper's schedule: few bits early, more as the loss flattens */
    /* deterministic for a seed: the same bits every step, the same model */
    CU_ASSERT_EQUAL(memcmp(mq.param, mq2.param, sizeof(double) * S), 0);
    CU_ASSERT_EQUAL(memcmp(mq.theta, mq2.theta, sizeof(float) * mq.dim), 0);
    sim_free(&low), sim_free(&nm);
    sim_free(&none), sim_free(&mq), sim_free(&mq2);
    fsgd_csr_free(&tr), fsgd_csr_free(&te);
}

/* ---- golden files: tests/golden/codec/v1/mqgrad_*.bin must keep decoding
 * to what the .txt says, and the encoder must keep writing the same bytes.
 * FSGD_GOLDEN_WRITE=1 build/unit/test_strategy_mqgrad writes them (only ever
 * for a new format version) and the seed corpus of fuzz_mqgrad. ---- */

#define GOLDEN_DIR "tests/golden/codec/v1"

typedef struct mq_golden {
    const char *name, *spec;
    uint64_t dim;
    size_t n;
    int shape; /* 0 spread keys, 1 clustered, 2 near 2^32, 3 all zero */
} mq_golden_t;

static const mq_golden_t mq_cases[] = {
    {"mqgrad_b2", "mqgrad:bits=2", 1000, 40, 0},       {"mqgrad_b5", "mqgrad:bits=5", 1000000, 60, 1},
    {"mqgrad_b8", "mqgrad:bits=8", 5000, 30, 0},       {"mqgrad_b16", "mqgrad:bits=16", 1ull << 32, 50, 2},
    {"mqgrad_empty", "mqgrad:bits=3", 100, 0, 0},      {"mqgrad_zeros", "mqgrad:bits=4", 100, 10, 3},
};

static void mq_golden_input(const mq_golden_t *gc, uint32_t *k, float *v)
{
    uint64_t st = 0x60D0000ull + gc->n * 31 + (uint64_t)gc->shape;
    uint64_t key = gc->shape == 2 ? gc->dim - 3 * gc->n : fsgd_test_rand(&st) % 7;
    for (size_t i = 0; i < gc->n; i++) {
        k[i] = (uint32_t)key;
        uint64_t gap = gc->shape == 1 ? 1 + fsgd_test_rand(&st) % 3 : 1 + fsgd_test_rand(&st) % (gc->dim / (gc->n + 1));
        key += gc->shape == 2 ? 1 + fsgd_test_rand(&st) % 3 : gap;
        double mag = exp(-(double)(fsgd_test_rand(&st) % 1000) / 200.0);
        v[i] = gc->shape == 3 || i % 13 == 5 ? 0 : (float)((fsgd_test_rand(&st) & 1) ? -mag : mag);
    }
}

static void mq_golden_write(void)
{
    char err[256], path[512];
    for (size_t t = 0; t < sizeof mq_cases / sizeof *mq_cases; t++) {
        const mq_golden_t *gc = &mq_cases[t];
        uint32_t k[256];
        float v[256];
        mq_golden_input(gc, k, v);
        fsgd_codec_t *c = fsgd_codec_new(gc->spec, gc->dim, err, sizeof err);
        uint8_t buf[8192];
        fsgd_outbuf_t msg = {buf, sizeof buf, 0};
        fsgd_sparse_t out = {0};
        if (!c || fsgd_codec_encode(c, k, v, gc->n, &msg, err, sizeof err) ||
            fsgd_codec_decode(buf, msg.len, gc->dim, &out, err, sizeof err)) {
            fprintf(stderr, "golden %s: %s\n", gc->name, err);
            exit(1);
        }
        size_t len = msg.len;
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.bin", gc->name);
        fsgd_test_write_file(path, buf, len);
        snprintf(path, sizeof path, "tests/fuzz/corpus/mqgrad/golden_%s", gc->name);
        fsgd_test_write_file(path, buf, len);
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.txt", gc->name);
        FILE *f = fopen(path, "w");
        fprintf(f, "# fsgd codec golden file, format version 1 (see test_strategy_mqgrad.c)\n");
        fprintf(f, "spec %s\ndim %llu\nbytes %zu\n", fsgd_codec_spec(c), (unsigned long long)gc->dim, len);
        for (size_t i = 0; i < gc->n; i++)
            fprintf(f, "in %u %a\n", k[i], (double)v[i]);
        for (size_t i = 0; i < out.n; i++)
            fprintf(f, "dec %u %a\n", out.keys[i], (double)out.vals[i]);
        fclose(f);
        fsgd_sparse_free(&out);
        fsgd_codec_destroy(c);
    }
    /* sections for the fuzzer */
    for (int b = 2; b <= 8; b += 3) {
        uint8_t sec[4] = {1, (uint8_t)b, 0, 0};
        snprintf(path, sizeof path, "tests/fuzz/corpus/mqgrad/section_%d", b);
        fsgd_test_write_file(path, sec, 4);
    }
    printf("mqgrad golden files written to " GOLDEN_DIR "\n");
}

static void test_golden(void)
{
    char path[512], err[256], line[256];
    for (size_t t = 0; t < sizeof mq_cases / sizeof *mq_cases; t++) {
        const mq_golden_t *gc = &mq_cases[t];
        size_t len = 0;
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.bin", gc->name);
        uint8_t *bin = fsgd_test_read_file(path, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(bin);
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.txt", gc->name);
        FILE *f = fopen(path, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fsgd_sparse_t out = {0}, in = {0}, want = {0};
        fsgd_sparse_reserve(&in, 256);
        fsgd_sparse_reserve(&want, 256);
        uint64_t dim = 0;
        char spec[200] = "";
        while (fgets(line, sizeof line, f)) {
            unsigned key;
            char val[64];
            if (sscanf(line, "spec %199s", spec) == 1 || sscanf(line, "dim %llu", (unsigned long long *)&dim) == 1)
                continue;
            if (sscanf(line, "in %u %63s", &key, val) == 2)
                in.keys[in.n] = key, in.vals[in.n++] = strtof(val, NULL);
            else if (sscanf(line, "dec %u %63s", &key, val) == 2)
                want.keys[want.n] = key, want.vals[want.n++] = strtof(val, NULL);
        }
        fclose(f);
        CU_ASSERT_EQUAL(dim, gc->dim);
        int rc = fsgd_codec_decode(bin, len, dim, &out, err, sizeof err);
        if (rc)
            fprintf(stderr, "\n  %s: %s\n", gc->name, err);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        CU_ASSERT_EQUAL_FATAL(out.n, want.n);
        for (size_t i = 0; i < out.n; i++)
            CU_ASSERT(out.keys[i] == want.keys[i] && out.vals[i] == want.vals[i]);
        /* the definition gives the same values */
        float ref[256];
        int bits = fsgd_mqgrad_message_bits(bin, len);
        reference(in.vals, in.n, bits, ref);
        size_t j = 0;
        for (size_t i = 0; i < in.n; i++)
            if (ref[i] != 0) {
                CU_ASSERT(j < out.n && out.keys[j] == in.keys[i] && out.vals[j] == ref[i]);
                j++;
            }
        CU_ASSERT_EQUAL(j, out.n);
        /* the encoder still writes the same bytes */
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        uint8_t buf[8192];
        size_t len2 = 0;
        fsgd_outbuf_t ob2 = {buf, sizeof buf, 0};
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, in.keys, in.vals, in.n, &ob2, err, sizeof err), 0);
        len2 = ob2.len;
        CU_ASSERT_TRUE(len2 == len && memcmp(buf, bin, len) == 0);
        fsgd_codec_destroy(c);
        fsgd_sparse_free(&out), fsgd_sparse_free(&in), fsgd_sparse_free(&want);
        free(bin);
    }
}

void fsgd_test_register(void)
{
    if (getenv("FSGD_GOLDEN_WRITE")) {
        mq_golden_write();
        exit(0);
    }
    static const fsgd_test_case_t cases[] = {
        {"codec matches its definition, bits 2..16", test_codec_definition},
        {"malformed messages name field and offset", test_codec_malformed},
        {"strategy spec", test_strategy_spec},
        {"feedback section sets the bits", test_section},
        {"agent deterministic, paper's action set", test_agent_deterministic},
        {"agent norm=1: rewards and bits independent of units", test_agent_norm},
        {"a9a: 4 workers, auc within 0.01 of none", test_a9a},
        {"golden files of format version 1", test_golden},
        {NULL, NULL},
    };
    fsgd_test_suite("strategy_mqgrad", cases);
}
