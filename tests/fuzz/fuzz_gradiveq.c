/* Fuzz target: everything a gradiveq receiver parses. The input goes (1) to
 * an aggregator that holds a basis (sagg_add, as it is and with its CRC
 * re-sealed), (2) to the message and section parsers, and (3) as a feedback
 * section to a worker, which must then still encode. Nothing may crash;
 * every refusal names an offset; a refused message leaves the aggregator's
 * step sum unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradiveq.h"
#include "fsgd/crc32c.h"
#include "fsgd/le.h"
#include "fsgd/reduce.h"
#include "fsgd/strategy.h"
#include "common_testing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DIM 400
static const char *SPEC = "gradiveq:slice=8,lt=3,lc=10000000,warmup=0";
static fsgd_sagg_t *agg;
static uint64_t step;

/* An aggregator in its compressed phase: keys 0..7 hot over 4 raw steps. */
static fsgd_sagg_t *setup(void)
{
    char err[256];
    fsgd_sagg_t *a = fsgd_sagg_new(SPEC, DIM, 1, err, sizeof err);
    fsgd_sworker_t *w = fsgd_sworker_new(SPEC, DIM, 1, err, sizeof err);
    if (!a || !w)
        abort();
    uint8_t msg[4096];
    for (step = 1; step <= 4; step++) {
        uint32_t k[10];
        float v[10];
        for (int i = 0; i < 10; i++)
            k[i] = i < 8 ? (uint32_t)i : 100 + (uint32_t)(step * 7 + i), v[i] = (float)((i * 7 + step * 3) % 11) - 5;
        fsgd_outbuf_t up = {msg, sizeof msg, 0};
        if (fsgd_sworker_encode(w, k, v, 10, 1, &up, err, sizeof err) ||
            fsgd_sagg_add(a, 0, msg, up.len, 1e30, NULL, err, sizeof err))
            abort();
        fsgd_step_info_t info = {step, 1, 1, 0.01, 1};
        fsgd_reducer_t *r = fsgd_sagg_take(a, &info, err, sizeof err);
        if (!r)
            abort();
        fsgd_reducer_clear(r);
    }
    if (fsgd_sagg_param(a, "phase") != 2)
        abort();
    fsgd_sworker_destroy(w);
    return a;
}

static void add(const uint8_t *m, size_t len)
{
    char err[256] = "";
    int rc = fsgd_sagg_add(agg, 1, m, len, 1e6, NULL, err, sizeof err);
    fsgd_step_info_t info = {step++, 1, 1, 0.01, 1};
    fsgd_reducer_t *r = fsgd_sagg_take(agg, &info, err + 128, 128);
    if (!r)
        abort();
    if (rc < 0) {
        if ((rc != FSGD_E_FORMAT && rc != FSGD_E_RANGE) || !strstr(err, "offset") || fsgd_reducer_count(r) != 0)
            abort();
    } else {
        size_t n;
        const uint32_t *k = fsgd_reducer_sorted_keys(r, &n);
        for (size_t i = 0; i < n; i++)
            if (k[i] >= DIM || !isfinite(fsgd_reducer_sum(r, k[i])))
                abort();
    }
    fsgd_reducer_clear(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!agg)
        agg = setup();
    add(data, size);
    uint8_t *m = malloc(size + 4);
    if (!m)
        return 0;
    memcpy(m, data, size);
    if (size >= 4) {
        fsgd_le_put32(m + size - 4, fsgd_crc32c(0, m, size - 4));
        add(m, size);
    }
    char err[256] = "";
    fsgd_gv_msg_t g;
    if (fsgd_gv_msg_parse(m, size, 0, &g, err, sizeof err) < 0 && !strstr(err, "offset"))
        abort();
    fsgd_gv_section_t s;
    if (fsgd_gv_section_parse(m, size, DIM, &s, err, sizeof err) < 0 && !strstr(err, "offset"))
        abort();
    /* as a section: a worker that took it (or refused it) still encodes */
    fsgd_sworker_t *w = fsgd_sworker_new(SPEC, DIM, 1, err, sizeof err);
    if (!w)
        abort();
    int rc = fsgd_sworker_after_step(w, 1, m, size, err, sizeof err);
    if (rc < 0 && (rc != FSGD_E_FORMAT || !strstr(err, "offset")))
        abort();
    uint32_t k[3] = {0, 5, 399};
    float v[3] = {1, -2, 3};
    uint8_t out[1 << 15];
    fsgd_outbuf_t up = {out, sizeof out, 0};
    if (fsgd_sworker_encode(w, k, v, 3, 1, &up, err, sizeof err) != 0)
        abort();
    if (fsgd_gv_msg_parse(out, up.len, DIM, &g, err, sizeof err) != 0)
        abort();
    fsgd_sworker_destroy(w);
    free(m);
    return 0;
}
