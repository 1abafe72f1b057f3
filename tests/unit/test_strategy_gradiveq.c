/* Strategy "gradiveq": the warm-up / sampling / compressed cycle, PCA
 * finding a low-rank slice, linearity (the sum of the workers' compressed
 * slices decompresses to the compression of the sum, to float tolerance),
 * per-step energy and compression ratio, malformed messages and sections
 * named by field and offset, and a9a through the public strategy API. */
#include <math.h>
#include <stdlib.h>

#include "../../strategy/gradiveq.h"
#include "fsgd/crc32c.h"
#include "fsgd/le.h"
#include "fsgd/reduce.h"
#include "fsgd/strategy.h"
#include "strategy_sim.h"
#include "testlib.h"

#define DIM 400
#define HOT 32   /* keys 0..31: touched every step */
#define RANK 4
#define P 3

static double nrand(uint64_t *s)
{
    double u = ((double)(fsgd_test_rand(s) >> 11) + 0.5) * 0x1p-53, v = (double)(fsgd_test_rand(s) >> 11) * 0x1p-53;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

typedef struct lowrank {
    double B[HOT][RANK];
    uint64_t s;
} lowrank_t;

/* A gradient: the hot keys from a rank-4 model plus 1e-3 noise, and a few
 * cold keys (or none, with cold = 0). Returns n. */
static size_t gen(lowrank_t *g, int cold, uint32_t *k, float *v)
{
    double z[RANK];
    for (int r = 0; r < RANK; r++)
        z[r] = nrand(&g->s);
    size_t n = 0;
    for (uint32_t i = 0; i < HOT; i++) {
        double x = 1e-3 * nrand(&g->s);
        for (int r = 0; r < RANK; r++)
            x += g->B[i][r] * z[r];
        k[n] = i;
        v[n++] = (float)x;
    }
    for (uint32_t key = HOT; cold && key < DIM; key++)
        if (fsgd_test_rand(&g->s) % 40 == 0) {
            k[n] = key;
            v[n++] = (float)(0.1 * nrand(&g->s));
        }
    return n;
}

typedef struct rig {
    fsgd_sagg_t *agg, *agg2;
    fsgd_sworker_t *w[P], *solo;
    uint8_t *msg[P], *smsg;
    size_t len[P], slen, cap;
    lowrank_t g[P];
} rig_t;

static const char *SPEC = "gradiveq:slice=32,lt=20,lc=30,warmup=5,lambda=0.001";

static void rig_init(rig_t *r, uint64_t seed)
{
    char err[256];
    memset(r, 0, sizeof *r);
    r->agg = fsgd_sagg_new(SPEC, DIM, 1, err, sizeof err);
    r->agg2 = fsgd_sagg_new(SPEC, DIM, 1, err, sizeof err);
    CU_ASSERT_FATAL(r->agg && r->agg2);
    r->solo = fsgd_sworker_new(SPEC, DIM, 9, err, sizeof err);
    uint64_t s = seed;
    lowrank_t base;
    for (int i = 0; i < HOT; i++)
        for (int j = 0; j < RANK; j++)
            base.B[i][j] = nrand(&s);
    for (int i = 0; i < P; i++) {
        r->w[i] = fsgd_sworker_new(SPEC, DIM, 2 + (uint64_t)i, err, sizeof err);
        CU_ASSERT_FATAL(r->w[i] != NULL);
        r->g[i] = base;
        r->g[i].s = seed * 7 + (uint64_t)i;
    }
    r->cap = fsgd_sworker_bound(r->w[0], DIM);
    for (int i = 0; i < P; i++)
        r->msg[i] = malloc(r->cap);
    r->smsg = malloc(r->cap);
}

static void rig_free(rig_t *r)
{
    for (int i = 0; i < P; i++)
        fsgd_sworker_destroy(r->w[i]), free(r->msg[i]);
    fsgd_sworker_destroy(r->solo);
    free(r->smsg);
    fsgd_sagg_destroy(r->agg);
    fsgd_sagg_destroy(r->agg2);
}

/* One step: every worker encodes; agg gets the P messages. agg2 gets them
 * too, or (solo) one message of the sum of the P gradients from a worker
 * holding the same basis. Then both take; the sections go to every worker.
 * sum_out (HOT floats): agg's reduced slice. Returns agg's message mode. */
static int rig_step(rig_t *r, uint64_t step, int cold, int solo, double *sum1, double *sum2)
{
    char err[256];
    uint32_t k[DIM];
    float v[DIM], total[HOT] = {0};
    for (int i = 0; i < P; i++) {
        size_t n = gen(&r->g[i], cold, k, v);
        for (size_t j = 0; j < HOT; j++)
            total[j] += v[j];
        CU_ASSERT_FATAL(fsgd_sworker_encode(r->w[i], k, v, n, 10, r->msg[i], r->cap, &r->len[i], err, sizeof err) == 0);
        CU_ASSERT_EQUAL(fsgd_sagg_add(r->agg, (uint32_t)i, r->msg[i], r->len[i], 1e30, NULL, err, sizeof err), 0);
        if (!solo)
            CU_ASSERT_EQUAL(fsgd_sagg_add(r->agg2, (uint32_t)i, r->msg[i], r->len[i], 1e30, NULL, err, sizeof err), 0);
    }
    size_t n = 0;
    if (solo) {
        for (uint32_t j = 0; j < HOT; j++)
            k[j] = j, v[j] = total[j];
        n = HOT;
        CU_ASSERT_FATAL(fsgd_sworker_encode(r->solo, k, v, n, 10 * P, r->smsg, r->cap, &r->slen, err, sizeof err) == 0);
        CU_ASSERT_EQUAL(fsgd_sagg_add(r->agg2, 0, r->smsg, r->slen, 1e30, NULL, err, sizeof err), 0);
    }
    fsgd_step_info_t info = {step, 10 * P, 1, 0.01, P};
    fsgd_reducer_t *r1 = fsgd_sagg_take(r->agg, &info, err, sizeof err);
    fsgd_reducer_t *r2 = fsgd_sagg_take(r->agg2, &info, err, sizeof err);
    CU_ASSERT_FATAL(r1 && r2);
    for (uint32_t j = 0; j < HOT; j++) {
        if (sum1)
            sum1[j] = fsgd_reducer_sum(r1, j);
        if (sum2)
            sum2[j] = fsgd_reducer_sum(r2, j);
    }
    fsgd_reducer_clear(r1);
    fsgd_reducer_clear(r2);
    size_t slen = 0, slen2 = 0;
    const uint8_t *sec = fsgd_sagg_section(r->agg, &slen), *sec2 = fsgd_sagg_section(r->agg2, &slen2);
    CU_ASSERT(slen == slen2 && memcmp(sec, sec2, slen) == 0); /* both aggregators decide alike */
    for (int i = 0; i < P; i++)
        CU_ASSERT_EQUAL(fsgd_sworker_after_step(r->w[i], 1, sec, slen, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(r->solo, 1, sec, slen, err, sizeof err), 0);
    return r->msg[0][5];
}

static void test_cycle_and_linearity(void)
{
    rig_t r;
    rig_init(&r, fsgd_test_seed() | 1);
    uint64_t step = 1;
    /* warm-up (5) and sampling (20): raw messages */
    for (; step <= 25; step++)
        CU_ASSERT_EQUAL(rig_step(&r, step, 1, 0, NULL, NULL), 0);
    CU_ASSERT_EQUAL(fsgd_sagg_param(r.agg, "basis"), 1);
    CU_ASSERT_EQUAL(fsgd_sagg_param(r.agg, "K"), HOT); /* the hot keys are the slice */
    double d = fsgd_sagg_param(r.agg, "d");
    CU_ASSERT(d >= RANK && d <= RANK + 2);
    CU_ASSERT(fsgd_sagg_param(r.agg, "pca_energy") >= 0.999);
    size_t slen = 0;
    fsgd_sagg_section(r.agg, &slen);
    CU_ASSERT_EQUAL(slen, FSGD_GV_SECTION_FIXED + 4 * HOT + 4 * (size_t)(HOT * d) + 4);
    /* compressed: projections; the slice's sum decompresses as the compression of the sum */
    double s1[HOT], s2[HOT], worst = 0, scale = 0;
    for (int i = 0; i < 30; i++, step++) {
        int solo = i % 3 == 1;
        CU_ASSERT_EQUAL(rig_step(&r, step, !solo, solo, s1, s2), 1);
        CU_ASSERT(fsgd_sagg_param(r.agg, "energy") > 0.999);
        CU_ASSERT_EQUAL(fsgd_sagg_param(r.agg, "ratio"), HOT / d);
        if (solo)
            for (int j = 0; j < HOT; j++) {
                worst = fmax(worst, fabs(s1[j] - s2[j]));
                scale = fmax(scale, fabs(s1[j]));
            }
        else {
            size_t n;
            fsgd_sagg_section(r.agg, &n);
            CU_ASSERT(i == 29 || n == FSGD_GV_SECTION_FIXED + 4); /* no basis while it holds */
        }
    }
    printf("\n  linearity: |Σ decompress - decompress(compress Σ)| <= %.3g of %.3g; d = %g of K = %d\n", worst, scale,
           d, HOT);
    CU_ASSERT(scale > 0 && worst <= 1e-5 * scale);
    /* then sampling again (raw), and a second basis */
    for (int i = 0; i < 20; i++, step++)
        CU_ASSERT_EQUAL(rig_step(&r, step, 1, 0, NULL, NULL), 0);
    CU_ASSERT_EQUAL(fsgd_sagg_param(r.agg, "basis"), 2);
    CU_ASSERT_EQUAL(rig_step(&r, step++, 1, 0, NULL, NULL), 1);
    rig_free(&r);
}

static void reseal(uint8_t *m, size_t len) { fsgd_le_put32(m + len - 4, fsgd_crc32c(0, m, len - 4)); }

static void expect_add(fsgd_sagg_t *a, const uint8_t *m, size_t len, const char *field)
{
    char err[256] = "";
    CU_ASSERT(fsgd_sagg_add(a, 0, m, len, 1e30, NULL, err, sizeof err) < 0);
    FSGD_ASSERT_CONTAINS(err, field);
    FSGD_ASSERT_CONTAINS(err, "offset");
}

static void test_malformed(void)
{
    rig_t r;
    rig_init(&r, 5);
    uint64_t step = 1;
    for (; step <= 26; step++)
        rig_step(&r, step, 1, 0, NULL, NULL);
    /* a projection message of the current basis, and mutations of it */
    uint32_t k[DIM];
    float v[DIM];
    char err[256];
    size_t n = gen(&r.g[0], 1, k, v), len = 0;
    uint8_t *m = malloc(r.cap), *b = malloc(r.cap);
    CU_ASSERT_FATAL(fsgd_sworker_encode(r.w[0], k, v, n, 10, m, r.cap, &len, err, sizeof err) == 0);
    CU_ASSERT_EQUAL(m[5], 1);
    memcpy(b, m, len), b[0] = 'X';
    expect_add(r.agg, b, len, "magic");
    memcpy(b, m, len), b[4] = 2;
    expect_add(r.agg, b, len, "version");
    memcpy(b, m, len), b[9] ^= 1;
    expect_add(r.agg, b, len, "crc32c");
    memcpy(b, m, len), b[5] = 2, reseal(b, len);
    expect_add(r.agg, b, len, "mode");
    memcpy(b, m, len), b[6] = 1, reseal(b, len);
    expect_add(r.agg, b, len, "reserved");
    memcpy(b, m, len), fsgd_le_put64(b + 8, DIM + 1), reseal(b, len);
    expect_add(r.agg, b, len, "dim");
    memcpy(b, m, len), fsgd_le_put32(b + 16, 7), reseal(b, len);
    expect_add(r.agg, b, len, "basis_id"); /* a stale or unknown basis */
    memcpy(b, m, len), fsgd_le_putf64(b + 32, -1), reseal(b, len);
    expect_add(r.agg, b, len, "energy");
    memcpy(b, m, len), fsgd_le_put32(b + 40, fsgd_le_get32(m + 40) + 4), reseal(b, len);
    expect_add(r.agg, b, len, "inner_len");
    memcpy(b, m, len), b[FSGD_GV_MSG_FIXED + 1] ^= 1, reseal(b, len);
    expect_add(r.agg, b, len, "inner");
    memcpy(b, m, len), fsgd_le_putf32(b + len - 8, NAN), reseal(b, len);
    expect_add(r.agg, b, len, "projections");
    for (size_t cut = 0; cut < len; cut++) {
        memcpy(b, m, cut);
        if (cut >= 4)
            reseal(b, cut);
        CU_ASSERT(fsgd_sagg_add(r.agg, 0, b, cut, 1e30, NULL, err, sizeof err) < 0);
    }
    /* the untouched message is still accepted */
    CU_ASSERT_EQUAL(fsgd_sagg_add(r.agg, 0, m, len, 1e30, NULL, err, sizeof err), 0);
    /* sections */
    fsgd_gv_section_t sec;
    uint8_t s[64] = {1, 0, 0, 0};
    fsgd_le_put32(s + 16, fsgd_crc32c(0, s, 16));
    CU_ASSERT_EQUAL(fsgd_gv_section_parse(s, 20, DIM, &sec, err, sizeof err), 0);
    const struct {
        int at, val;
        const char *field;
    } bad[] = {{0, 2, "version"}, {1, 2, "mode"}, {2, 1, "reserved"}, {1, 1, "basis_id"}, {8, 1, "K"}, {12, 1, "d"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t t[20];
        memcpy(t, s, 20);
        t[bad[i].at] = (uint8_t)bad[i].val;
        reseal(t, 20);
        err[0] = '\0';
        CU_ASSERT(fsgd_gv_section_parse(t, 20, DIM, &sec, err, sizeof err) < 0);
        FSGD_ASSERT_CONTAINS(err, bad[i].field);
        FSGD_ASSERT_CONTAINS(err, "offset");
        CU_ASSERT(fsgd_sworker_after_step(r.w[1], 1, t, 20, err, sizeof err) < 0);
    }
    free(m), free(b);
    rig_free(&r);
}

static void test_spec(void)
{
    char err[256];
    CU_ASSERT_EQUAL(fsgd_strategy_check("gradiveq", 100, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("gradiveq:slice=64,lt=100,lc=400,components=8,lambda=0.01", 100, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_strategy_check("gradiveq:components=65,slice=64", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "components");
    CU_ASSERT_EQUAL(fsgd_strategy_check("gradiveq:lt=1", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "lt");
    CU_ASSERT_EQUAL(fsgd_strategy_check("gradiveq:lambda=1", 100, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(fsgd_strategy_list(), "gradiveq");
}

static void test_a9a(void)
{
    FSGD_TEST_DATA(trp, "a9a");
    FSGD_TEST_DATA(tep, "a9a.t");
    fsgd_csr_t tr, te;
    char err[256];
    CU_ASSERT_FATAL(sim_load(trp, &tr, err, sizeof err) == 0 && sim_load(tep, &te, err, sizeof err) == 0);
    sim_cfg_t cfg = {"none", 4, 64, 3, 1, 0.002, 1e9, NULL, NULL};
    sim_result_t none = sim_run(&cfg, &tr, &te);
    cfg.spec = "gradiveq:slice=128,warmup=20,lt=100,lc=200";
    cfg.param = "energy";
    cfg.param2 = "ratio";
    sim_result_t gv = sim_run(&cfg, &tr, &te);
    if (!gv.ok)
        printf("\n%s\n", gv.err);
    CU_ASSERT_FATAL(none.ok && gv.ok);
    double e = 0, ratio = 0;
    size_t nc = 0;
    for (size_t s = 0; s < gv.steps; s++)
        if (!isnan(gv.param[s]))
            e += gv.param[s], ratio += gv.param2[s], nc++;
    printf("\n  a9a 4 workers x 64 rows, %zu steps: none auc %.4f up %.0f B; gradiveq auc %.4f up %.0f B, "
           "%zu compressed steps, mean energy kept %.4f, mean slice ratio K/d %.2f\n",
           gv.steps, none.auc, none.bytes_up, gv.auc, gv.bytes_up, nc, nc ? e / nc : NAN, nc ? ratio / nc : NAN);
    CU_ASSERT(nc > 0);
    CU_ASSERT(fabs(gv.auc - none.auc) <= 0.01);
    sim_free(&none), sim_free(&gv);
    fsgd_csr_free(&tr), fsgd_csr_free(&te);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"spec", test_spec},
        {"cycle, PCA rank, linearity of the compressed sum", test_cycle_and_linearity},
        {"malformed messages and sections name field and offset", test_malformed},
        {"a9a: 4 workers, auc within 0.01 of none", test_a9a},
        {NULL, NULL},
    };
    fsgd_test_suite("strategy_gradiveq", cases);
}
