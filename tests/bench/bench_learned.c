/* Learned strategies next to the codec strategies, in process: 4 simulated
 * workers x 64 rows on a9a through the public strategy API
 * (tests/unit/strategy_sim.h), Adam on the aggregator, the strategy's
 * downlink and sections. Step time is modelled, not measured: 2 ms compute
 * + the largest uplink message at 1 Gbit/s (and at the paper's 10 MB/s), so
 * time to target is reproducible and the line says "modelled". Prints
 *   bench strategy_sim data=a9a workers=4 link_bps=... strategy=S auc=...
 *     bytes_up=... bytes_down=... up_ratio_none=... time_to_target_s=...
 * (bytes per worker per step up, per step down; time until the training loss
 * over the last 8 steps is <= 0.35, -1 when never). */
#include <stdio.h>

#include "../unit/strategy_sim.h"

int main(void)
{
    const char *dir = getenv("FSGD_DATA");
    char tp[512], sp[512], err[256];
    snprintf(tp, sizeof tp, "%s/a9a", dir ? dir : "../shared/data");
    snprintf(sp, sizeof sp, "%s/a9a.t", dir ? dir : "../shared/data");
    fsgd_csr_t tr, te;
    if (sim_load(tp, &tr, err, sizeof err) || sim_load(sp, &te, err, sizeof err)) {
        printf("bench strategy_sim skipped: %s\n", err);
        return 0;
    }
    const char *specs[] = {"none", "fastsgd", "mqgrad", "mqgrad:lower=1", "mqgrad:ef=1", "gradiveq:warmup=20,lc=200"};
    const double links[] = {1e9, 8e7};
    for (size_t l = 0; l < 2; l++) {
        double none_up = 0;
        for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
            sim_cfg_t cfg = {specs[i], 4, 64, 10, 1, 0.002, links[l], "bits", "ratio"};
            sim_result_t r = sim_run(&cfg, &tr, &te);
            if (!r.ok) {
                printf("bench strategy_sim strategy=%s error=\"%s\"\n", specs[i], r.err);
                return 1;
            }
            if (i == 0)
                none_up = r.bytes_up;
            printf("bench strategy_sim data=a9a workers=4 link_bps=%g strategy=%s auc=%.4f bytes_up=%.0f "
                   "bytes_down=%.0f up_ratio_none=%.3f time_to_target_s=%.3f modelled_s=%.3f final_bits=%g\n",
                   links[l], specs[i], r.auc, r.bytes_up, r.bytes_down, r.bytes_up / none_up, sim_time_to(&r, 0.35),
                   r.modelled_s, r.param[r.steps - 1]);
            sim_free(&r);
        }
    }
    fsgd_csr_free(&tr), fsgd_csr_free(&te);
    return 0;
}
