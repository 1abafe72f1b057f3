/* Learned strategies next to the codec strategies, in process, through the
 * public strategy API (tests/unit/strategy_sim.h): 4 simulated workers, Adam
 * on the aggregator, the strategy's downlink and sections. Step time is
 * modelled, not measured: 2 ms compute + the largest uplink message at the
 * link's rate, so time to target is reproducible (the line says
 * modelled_s). Two workloads:
 *   a9a  4 x 64 rows per step, 10 epochs, target loss 0.35, links 1 Gbit/s
 *        and the MQGrad paper's 10 MB/s (sec. 4.1);
 *   ctr  the dist_net workload (tests/bench/dist_net.sh): fsgd gen rows, dim
 *        2^20, ~100 nonzeros, Zipf 1.1, seed 7, 80000 train + 5000 test rows,
 *        4 x 1500 rows per step, 8 epochs, target loss 0.45, 1 Gbit/s.
 * Prints per strategy
 *   bench strategy_sim data=D workers=4 link_bps=L strategy=S auc=... loss=...
 *     bytes_up=... bytes_down=... up_ratio_none=... time_to_target_s=...
 *     modelled_s=... bits_first=... bits_last=...
 * (bytes per worker per step up, per step down; time until the training loss
 * over the last 8 steps is <= the target, -1 when never; mean bits of the
 * first and last tenth of the steps for mqgrad). BENCH_LEARNED_QUICK=1: a9a
 * only. */
#include <stdio.h>

#include "strategy_sim.h"
#include "fsgd/gen.h"

static void run_set(const char *data, const fsgd_csr_t *tr, const fsgd_csr_t *te, size_t batch, int epochs,
                    double target, const char *const *specs, size_t ns, double link)
{
    double none_up = 0;
    for (size_t i = 0; i < ns; i++) {
        sim_cfg_t cfg = {specs[i], 4, batch, epochs, 1, 0.002, link, "bits", NULL};
        sim_result_t r = sim_run(&cfg, tr, te);
        if (!r.ok) {
            printf("bench strategy_sim data=%s strategy=%s error=\"%s\"\n", data, specs[i], r.err);
            continue;
        }
        if (i == 0)
            none_up = r.bytes_up;
        size_t q = r.steps / 10;
        double first = 0, last = 0;
        for (size_t s = 0; s < q; s++)
            first += r.param[s] / q, last += r.param[r.steps - q + s] / q;
        printf("bench strategy_sim data=%s workers=4 link_bps=%g strategy=%s auc=%.4f loss=%.4f bytes_up=%.0f "
               "bytes_down=%.0f up_ratio_none=%.4f time_to_target_s=%.3f modelled_s=%.3f bits_first=%.2f "
               "bits_last=%.2f\n",
               data, link, specs[i], r.auc, r.final_loss, r.bytes_up, r.bytes_down, r.bytes_up / none_up,
               sim_time_to(&r, target), r.modelled_s, first, last);
        fflush(stdout);
        sim_free(&r);
    }
}

/* The dist_net data set, generated in memory: rows [0, train) and the last 5000. */
static int gen_ctr(fsgd_csr_t *tr, fsgd_csr_t *te, size_t train, char *err, size_t errsz)
{
    fsgd_gen_opts_t o;
    fsgd_gen_opts_default(&o);
    o.dim = 1u << 20, o.nnz = 100, o.zipf = 1.1, o.seed = 7;
    fsgd_gen_t *g = fsgd_gen_new(&o, err, errsz);
    if (!g)
        return -1;
    size_t maxr = fsgd_gen_max_row(g);
    uint32_t *col = malloc(sizeof(uint32_t) * maxr);
    float *val = malloc(sizeof(float) * maxr);
    fsgd_csr_t *sets[2] = {tr, te};
    size_t counts[2] = {train, 5000};
    for (int s = 0; s < 2; s++) {
        fsgd_csr_t *m = sets[s];
        memset(m, 0, sizeof *m);
        size_t cap = counts[s] * 2 * 100;
        m->row_ptr = malloc(sizeof(uint64_t) * (counts[s] + 1));
        m->col = malloc(sizeof(uint32_t) * cap);
        m->val = malloc(sizeof(float) * cap);
        m->label = malloc(sizeof(double) * counts[s]);
        m->row_ptr[0] = 0;
        for (size_t r = 0; r < counts[s]; r++) {
            double margin;
            size_t n = fsgd_gen_next(g, col, val, &m->label[r], &margin);
            if (m->row_ptr[r] + n > cap) {
                cap *= 2;
                m->col = realloc(m->col, sizeof(uint32_t) * cap);
                m->val = realloc(m->val, sizeof(float) * cap);
            }
            memcpy(m->col + m->row_ptr[r], col, sizeof(uint32_t) * n);
            memcpy(m->val + m->row_ptr[r], val, sizeof(float) * n);
            m->row_ptr[r + 1] = m->row_ptr[r] + n;
            for (size_t j = 0; j < n; j++)
                if ((uint64_t)col[j] + 1 > m->max_col)
                    m->max_col = (uint64_t)col[j] + 1;
        }
        m->n_rows = counts[s];
        m->nnz = m->row_ptr[counts[s]];
    }
    free(col), free(val);
    fsgd_gen_destroy(g);
    return 0;
}

int main(void)
{
    const char *dir = getenv("FSGD_DATA");
    char tp[512], sp[512], err[256];
    snprintf(tp, sizeof tp, "%s/a9a", dir ? dir : "build/datasets");
    snprintf(sp, sizeof sp, "%s/a9a.t", dir ? dir : "build/datasets");
    fsgd_csr_t tr, te;
    if (sim_load(tp, &tr, err, sizeof err) || sim_load(sp, &te, err, sizeof err)) {
        printf("bench strategy_sim data=a9a skipped: %s\n", err);
    } else {
        static const char *const a9a[] = {"none", "fastsgd", "mqgrad", "mqgrad:lower=1", "mqgrad:ef=1",
                                          "gradiveq:warmup=20,lc=200"};
        run_set("a9a", &tr, &te, 64, 10, 0.35, a9a, 6, 1e9);
        run_set("a9a", &tr, &te, 64, 10, 0.35, a9a, 6, 8e7);
        fsgd_csr_free(&tr), fsgd_csr_free(&te);
    }
    if (getenv("BENCH_LEARNED_QUICK"))
        return 0;
    if (gen_ctr(&tr, &te, 80000, err, sizeof err) < 0) {
        printf("bench strategy_sim data=ctr error=\"%s\"\n", err);
        return 1;
    }
    static const char *const ctr[] = {"none",
                                      "fastsgd",
                                      "mqgrad",
                                      "mqgrad:lower=1",
                                      "mqgrad:bits0=6,min_bits=6,max_bits=12",
                                      "mqgrad:bits0=8,min_bits=8,max_bits=8",
                                      "gradiveq:warmup=10,lt=20,lc=40",
                                      "gradiveq:slice=1024,warmup=10,lt=20,lc=40"};
    run_set("ctr", &tr, &te, 1500, 8, 0.45, ctr, 8, 1e9);
    fsgd_csr_free(&tr), fsgd_csr_free(&te);
    return 0;
}
