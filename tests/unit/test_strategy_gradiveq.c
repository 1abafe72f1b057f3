/* Strategy "gradiveq": the warm-up / sampling / compressed cycle, PCA
 * finding a low-rank slice, linearity (the sum of the workers' compressed
 * slices decompresses to the compression of the sum, to float tolerance),
 * per-step energy and compression ratio, malformed messages and sections
 * named by field and offset, and a9a through the public strategy API. */
#include <math.h>
#include <stdlib.h>

#include "gradiveq.h"
#include "fsgd/codec.h"
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

/* Worker 0's last input, for the golden files. */
static uint32_t last_k[DIM];
static float last_v[DIM];
static size_t last_n;

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
        if (i == 0)
            memcpy(last_k, k, sizeof k), memcpy(last_v, v, sizeof v), last_n = n;
        for (size_t j = 0; j < HOT; j++)
            total[j] += v[j];
        fsgd_outbuf_t ob = {r->msg[i], r->cap, 0};
        CU_ASSERT_FATAL(fsgd_sworker_encode(r->w[i], k, v, n, 10, &ob, err, sizeof err) == 0);
        r->len[i] = ob.len;
        CU_ASSERT_EQUAL(fsgd_sagg_add(r->agg, (uint32_t)i, r->msg[i], r->len[i], 1e30, NULL, err, sizeof err), 0);
        if (!solo)
            CU_ASSERT_EQUAL(fsgd_sagg_add(r->agg2, (uint32_t)i, r->msg[i], r->len[i], 1e30, NULL, err, sizeof err), 0);
    }
    size_t n = 0;
    if (solo) {
        for (uint32_t j = 0; j < HOT; j++)
            k[j] = j, v[j] = total[j];
        n = HOT;
        fsgd_outbuf_t obs = {r->smsg, r->cap, 0};
        CU_ASSERT_FATAL(fsgd_sworker_encode(r->solo, k, v, n, 10 * P, &obs, err, sizeof err) == 0);
        r->slen = obs.len;
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
    fsgd_outbuf_t ob = {m, r.cap, 0};
    CU_ASSERT_FATAL(fsgd_sworker_encode(r.w[0], k, v, n, 10, &ob, err, sizeof err) == 0);
    len = ob.len;
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
    /* refused sections left worker 1 projecting; a reset (new aggregator
     * generation) drops worker 0's basis: raw until a new basis, and the
     * aggregator takes raw messages in its compressed phase */
    CU_ASSERT_EQUAL(fsgd_sworker_reset(r.w[0]), 1);
    CU_ASSERT_EQUAL(rig_step(&r, step++, 1, 0, NULL, NULL), 0);
    CU_ASSERT_EQUAL(r.msg[1][5], 1);
    CU_ASSERT_EQUAL(rig_step(&r, step++, 1, 0, NULL, NULL), 0);
    CU_ASSERT_EQUAL(fsgd_sagg_param(r.agg, "proj_senders"), P - 1);
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

/* ---- golden files (tests/golden/strategy/v1): a raw and a projection
 * message and the section carrying their basis, with what they hold in
 * gradiveq.txt. FSGD_GOLDEN_WRITE=1 build/unit/test_strategy_gradiveq writes
 * them and the seed corpus of fuzz_gradiveq. ---- */

#define GV_GOLDEN "tests/golden/strategy/v1"

static void put_msg_txt(FILE *f, const char *what, const uint8_t *m, size_t len)
{
    fsgd_gv_msg_t g;
    char err[256];
    fsgd_sparse_t in = {0};
    if (fsgd_gv_msg_parse(m, len, DIM, &g, err, sizeof err) ||
        fsgd_codec_decode(g.inner, g.inner_len, DIM, &in, err, sizeof err)) {
        fprintf(stderr, "golden %s: %s\n", what, err);
        exit(1);
    }
    fprintf(f, "%s bytes %zu mode %d basis %u d %u rows %llu energy %a inner %zu\n", what, len, g.mode, g.basis, g.d,
            (unsigned long long)g.rows, g.energy, in.n);
    for (size_t i = 0; i < in.n; i++)
        fprintf(f, "%s.inner %u %a\n", what, in.keys[i], (double)in.vals[i]);
    for (uint32_t j = 0; j < g.d; j++)
        fprintf(f, "%s.proj %u %a\n", what, j, (double)fsgd_le_getf32(g.proj_le + 4 * (size_t)j));
    for (size_t i = 0; i < last_n; i++)
        fprintf(f, "%s.in %u %a\n", what, last_k[i], (double)last_v[i]);
    fsgd_sparse_free(&in);
}

static void gv_golden_write(void)
{
    rig_t r;
    rig_init(&r, 11);
    FILE *f = fopen(GV_GOLDEN "/gradiveq.txt", "w");
    if (!f) {
        fprintf(stderr, "cannot write " GV_GOLDEN "/gradiveq.txt\n");
        exit(1);
    }
    fprintf(f, "# fsgd gradiveq golden files, format version 1 (see test_strategy_gradiveq.c), dim %d\n", DIM);
    for (uint64_t step = 1; step <= 26; step++) {
        rig_step(&r, step, 1, 0, NULL, NULL);
        if (step == 3) {
            fsgd_test_write_file(GV_GOLDEN "/gradiveq_raw.bin", r.msg[0], r.len[0]);
            fsgd_test_write_file("tests/fuzz/corpus/gradiveq/golden_raw", r.msg[0], r.len[0]);
            put_msg_txt(f, "raw", r.msg[0], r.len[0]);
        }
        if (step == 25) {
            size_t len;
            const uint8_t *sec = fsgd_sagg_section(r.agg, &len);
            fsgd_test_write_file(GV_GOLDEN "/gradiveq_section.bin", sec, len);
            fsgd_test_write_file("tests/fuzz/corpus/gradiveq/golden_section", sec, len);
            fsgd_gv_section_t gs;
            char err[256];
            if (fsgd_gv_section_parse(sec, len, DIM, &gs, err, sizeof err)) {
                fprintf(stderr, "golden section: %s\n", err);
                exit(1);
            }
            fprintf(f, "section bytes %zu mode %d basis %u K %u d %u\n", len, gs.mode, gs.basis, gs.K, gs.d);
            for (uint32_t i = 0; i < gs.K; i++)
                fprintf(f, "section.key %u\n", fsgd_le_get32(gs.keys_le + 4 * (size_t)i));
            for (size_t i = 0; i < (size_t)gs.K * gs.d; i++)
                fprintf(f, "section.U %zu %a\n", i, (double)fsgd_le_getf32(gs.U_le + 4 * i));
        }
        if (step == 26) {
            fsgd_test_write_file(GV_GOLDEN "/gradiveq_proj.bin", r.msg[0], r.len[0]);
            fsgd_test_write_file("tests/fuzz/corpus/gradiveq/golden_proj", r.msg[0], r.len[0]);
            put_msg_txt(f, "proj", r.msg[0], r.len[0]);
        }
    }
    fclose(f);
    rig_free(&r);
    printf("gradiveq golden files written to " GV_GOLDEN "\n");
}

/* One message of gradiveq.txt against its .bin. U: the section's basis. */
static void check_msg(const char *what, const char *bin, const float *U, uint32_t K, const uint32_t *skeys)
{
    size_t len = 0;
    uint8_t *m = fsgd_test_read_file(bin, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    FILE *f = fopen(GV_GOLDEN "/gradiveq.txt", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[256], tag[32], val[64];
    size_t wlen = 0, winner = 0, ni = 0, nin = 0;
    int wmode = -1;
    unsigned wbasis = 0, wd = 0, key;
    unsigned long long wrows = 0;
    double wenergy = 0, proj[64] = {0};
    uint32_t ik[DIM], xk[DIM];
    float iv[DIM], xv[DIM];
    while (fgets(line, sizeof line, f)) {
        char e[64];
        if (sscanf(line, "%31s", tag) != 1 || strncmp(tag, what, strlen(what)))
            continue;
        if (!strcmp(tag, what))
            sscanf(line, "%*s bytes %zu mode %d basis %u d %u rows %llu energy %63s inner %zu", &wlen, &wmode, &wbasis,
                   &wd, &wrows, e, &winner), wenergy = strtod(e, NULL);
        else if (sscanf(line, "%*s %u %63s", &key, val) == 2) {
            if (strstr(tag, ".inner"))
                ik[ni] = key, iv[ni++] = strtof(val, NULL);
            else if (strstr(tag, ".proj") && key < 64)
                proj[key] = strtod(val, NULL);
            else if (strstr(tag, ".in"))
                xk[nin] = key, xv[nin++] = strtof(val, NULL);
        }
    }
    fclose(f);
    fsgd_gv_msg_t g;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_gv_msg_parse(m, len, DIM, &g, err, sizeof err), 0);
    CU_ASSERT(len == wlen && g.mode == wmode && g.basis == wbasis && g.d == wd && g.rows == wrows &&
              g.energy == wenergy);
    fsgd_sparse_t in = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(g.inner, g.inner_len, DIM, &in, err, sizeof err), 0);
    CU_ASSERT_EQUAL(in.n, winner);
    CU_ASSERT_EQUAL(in.n, ni);
    for (size_t i = 0; i < in.n && i < ni; i++)
        CU_ASSERT(in.keys[i] == ik[i] && in.vals[i] == iv[i]);
    for (uint32_t j = 0; j < g.d; j++) {
        /* the stored projection, and Uᵀx of the input from the definition (any BLAS: to float tolerance) */
        double p = fsgd_le_getf32(g.proj_le + 4 * (size_t)j), ref = 0, mag = 0;
        CU_ASSERT(p == proj[j]);
        for (size_t i = 0, s = 0; i < nin; i++) {
            while (s < K && skeys[s] < xk[i])
                s++;
            if (s < K && skeys[s] == xk[i])
                ref += (double)U[s + (size_t)K * j] * xv[i], mag += fabs((double)U[s + (size_t)K * j] * xv[i]);
        }
        CU_ASSERT(fabs(p - ref) <= 1e-5 * (mag + 1e-30));
    }
    fsgd_sparse_free(&in);
    free(m);
}

static void test_golden(void)
{
    size_t len = 0;
    uint8_t *sec = fsgd_test_read_file(GV_GOLDEN "/gradiveq_section.bin", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sec);
    fsgd_gv_section_t gs;
    char err[256], line[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_gv_section_parse(sec, len, DIM, &gs, err, sizeof err), 0);
    FILE *f = fopen(GV_GOLDEN "/gradiveq.txt", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    unsigned K = 0, d = 0, basis = 0, nk = 0;
    int mode = -1;
    size_t blen = 0, nu = 0;
    uint32_t keys[HOT];
    float *U = calloc(HOT * HOT, sizeof(float));
    while (fgets(line, sizeof line, f)) {
        unsigned k;
        size_t i;
        char val[64];
        if (sscanf(line, "section bytes %zu mode %d basis %u K %u d %u", &blen, &mode, &basis, &K, &d) == 5)
            continue;
        if (sscanf(line, "section.key %u", &k) == 1 && nk < HOT)
            keys[nk++] = k;
        else if (sscanf(line, "section.U %zu %63s", &i, val) == 2 && i < HOT * HOT)
            U[i] = strtof(val, NULL), nu++;
    }
    fclose(f);
    CU_ASSERT(blen == len && mode == gs.mode && basis == gs.basis && K == gs.K && d == gs.d && nk == K &&
              nu == (size_t)K * d);
    for (unsigned i = 0; i < nk; i++)
        CU_ASSERT_EQUAL(fsgd_le_get32(gs.keys_le + 4 * (size_t)i), keys[i]);
    for (size_t i = 0; i < nu; i++)
        CU_ASSERT_EQUAL(fsgd_le_getf32(gs.U_le + 4 * i), U[i]);
    check_msg("raw", GV_GOLDEN "/gradiveq_raw.bin", U, K, keys);
    check_msg("proj", GV_GOLDEN "/gradiveq_proj.bin", U, K, keys);
    /* a worker given the section projects a gradient with that basis */
    fsgd_sworker_t *w = fsgd_sworker_new(SPEC, DIM, 1, err, sizeof err);
    CU_ASSERT_EQUAL(fsgd_sworker_after_step(w, 1, sec, len, err, sizeof err), 0);
    uint32_t k1[1] = {keys[0]};
    float v1[1] = {2.0f};
    uint8_t m[512];
    size_t ml = 0;
    fsgd_outbuf_t obml = {m, sizeof m, 0};
    CU_ASSERT_EQUAL(fsgd_sworker_encode(w, k1, v1, 1, 1, &obml, err, sizeof err), 0);
    ml = obml.len;
    fsgd_gv_msg_t g;
    CU_ASSERT_EQUAL_FATAL(fsgd_gv_msg_parse(m, ml, DIM, &g, err, sizeof err), 0);
    CU_ASSERT(g.mode == 1 && g.basis == basis && g.d == d);
    for (uint32_t j = 0; j < g.d; j++)
        CU_ASSERT(fabsf(fsgd_le_getf32(g.proj_le + 4 * (size_t)j) - 2.0f * U[(size_t)K * j]) <= 1e-6f);
    fsgd_sworker_destroy(w);
    free(U), free(sec);
}

void fsgd_test_register(void)
{
    if (getenv("FSGD_GOLDEN_WRITE")) { /* the rig asserts: write from inside a test */
        static const fsgd_test_case_t write[] = {{"write golden files", gv_golden_write}, {NULL, NULL}};
        fsgd_test_suite("strategy_gradiveq_golden_write", write);
        return;
    }
    static const fsgd_test_case_t cases[] = {
        {"spec", test_spec},
        {"cycle, PCA rank, linearity of the compressed sum", test_cycle_and_linearity},
        {"malformed messages and sections name field and offset", test_malformed},
        {"a9a: 4 workers, auc within 0.01 of none", test_a9a},
        {"golden files of format version 1", test_golden},
        {NULL, NULL},
    };
    fsgd_test_suite("strategy_gradiveq", cases);
}
