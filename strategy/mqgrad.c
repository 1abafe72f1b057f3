/* Strategy "mqgrad" (Cui et al., "MQGrad"): workers quantize their step
 * gradient with the codec "mqgrad" at the bits the aggregator last chose
 * (the bits travel in every uplink message, codec/FORMAT.md); the aggregator
 * decodes and sums as the codec strategies do, applies Adam, and its SARSA
 * agent (mqgrad_agent.c) turns the step's mean loss and wall time into the
 * bits for the next step, which go to every worker in the feedback section
 * of the model message (strategy/FORMAT.md, "mqgrad"). The downlink's Δ is
 * quantized with the same quantizer (Alg. 1 line 54), at down_bits (default
 * max_bits): the trainer picks the downlink codec once per run, so it cannot
 * follow the agent step by step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/mqgrad.h"
#include "params.h"
#include "mqgrad_agent.h"
#include "strategy_internal.h"

enum { P_BITS0, P_MIN, P_MAX, P_T, P_ALPHA, P_GAMMA, P_EPS, P_ETA, P_DISCOUNT, P_HIDDEN, P_LOWER, P_EF, P_DOWN, P_NORM, P_N };

static const fsgd_sparam_def_t mq_defs[P_N] = {
    {"bits0", 1, FSGD_MQGRAD_MIN_BITS, FSGD_MQGRAD_MAX_BITS, 2, "sec. 4.1: range starts at 2; bits only grow"},
    {"min_bits", 1, FSGD_MQGRAD_MIN_BITS, FSGD_MQGRAD_MAX_BITS, 2, "sec. 4.1: 2 to 8 bits"},
    {"max_bits", 1, FSGD_MQGRAD_MIN_BITS, FSGD_MQGRAD_MAX_BITS, 8, "sec. 4.1: 2 to 8 bits"},
    {"T", 1, 2, 64, 5, "sec. 3.3: T = 5"},
    {"alpha", 0, 0, 1, 0.01, "sec. 4.1: alpha = 0.01"},
    {"gamma", 0, 0, 1e12, 300, "sec. 4.1: scaling gamma = 300"},
    {"eps", 0, 0, 1, 0.1, "sec. 4.1: epsilon = 0.1"},
    {"eta", 0, 0, 10, 0.1, "sec. 4.1: eta = 0.1"},
    {"discount", 0, 0, 1, 0.9, "not in the paper"},
    {"hidden", 1, 1, 1024, 10, "sec. 4.1: 10 ReLU units"},
    {"lower", 1, 0, 1, 0, "beyond the paper: 1 allows lowering bits"},
    {"ef", 1, 0, 1, 0, "the paper has no error feedback"},
    {"down_bits", 1, 0, FSGD_MQGRAD_MAX_BITS, 0, "downlink bits; 0: max_bits (the trainer fixes the downlink codec for a run)"},
    {"norm", 1, 0, 1, 0, "beyond the paper: 1 measures losses in the run's first loss and time in its fastest MDP window"},
};

#define SECTION_LEN 4 /* version 1, bits, 2 reserved */

typedef struct mq_params {
    double v[P_N];
} mq_params_t;

static int mq_parse(const char *spec, mq_params_t *p, char *err, size_t errsz)
{
    FSGD_TRY(fsgd_sparams_parse("mqgrad", spec, mq_defs, P_N, p->v, NULL, NULL, 0, err, errsz));
    if (p->v[P_MIN] > p->v[P_MAX] || p->v[P_BITS0] < p->v[P_MIN] || p->v[P_BITS0] > p->v[P_MAX])
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "strategy mqgrad: need min_bits <= bits0 <= max_bits (got %g, %g, %g)", p->v[P_MIN],
                            p->v[P_BITS0], p->v[P_MAX]);
    if (p->v[P_DOWN] == 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy mqgrad: down_bits=1: 0 (max_bits) or %d..%d",
                            FSGD_MQGRAD_MIN_BITS, FSGD_MQGRAD_MAX_BITS);
    return 0;
}

static int mq_check(const char *spec, uint64_t dim, char *err, size_t errsz)
{
    mq_params_t p;
    return mq_parse(spec, &p, err, errsz);
}

/* ---- worker ---- */

typedef struct mq_worker {
    fsgd_codec_worker_t *cw;
    int min_bits, max_bits;
} mq_worker_t;

static void *mq_worker_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    mq_params_t p;
    if (mq_parse(spec, &p, err, errsz) < 0)
        return NULL;
    mq_worker_t *w = calloc(1, sizeof *w);
    if (!w) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy mqgrad: out of memory");
        return NULL;
    }
    char cs[64];
    snprintf(cs, sizeof cs, "mqgrad:bits=%d,ef=%d", (int)p.v[P_BITS0], (int)p.v[P_EF]);
    w->cw = fsgd_codec_worker_new(cs, dim, seed, err, errsz);
    if (!w->cw) {
        free(w);
        return NULL;
    }
    w->min_bits = (int)p.v[P_MIN];
    w->max_bits = (int)p.v[P_MAX];
    return w;
}

static void mq_worker_destroy(void *p)
{
    mq_worker_t *w = p;
    if (!w)
        return;
    fsgd_codec_worker_destroy(w->cw);
    free(w);
}

static size_t mq_bound(const void *p, size_t n) { return fsgd_codec_worker_bound(((const mq_worker_t *)p)->cw, n); }

static int mq_encode(void *p, const uint32_t *keys, const float *vals, size_t n, uint64_t rows, fsgd_outbuf_t *out,
                     char *err, size_t errsz)
{
    return fsgd_codec_worker_encode(((mq_worker_t *)p)->cw, keys, vals, n, rows, out, err, errsz);
}

/* Reads a section (strategy/FORMAT.md): the bits, or FSGD_E_FORMAT naming the field. */
static int section_bits(const uint8_t *s, size_t len, int lo, int hi, int *bits, char *err, size_t errsz)
{
    if (len != SECTION_LEN)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.section at offset 0: %zu bytes, expected %d",
                            len, SECTION_LEN);
    if (s[0] != 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.version at offset 0: %u (supported: 1)", s[0]);
    if (s[1] < lo || s[1] > hi)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.bits at offset 1: %u outside [%d, %d]", s[1], lo,
                            hi);
    if (s[2] | s[3])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field mqgrad.reserved at offset 2: not zero");
    *bits = s[1];
    return 0;
}

static int mq_after_step(void *p, int applied, const uint8_t *section, size_t len, char *err, size_t errsz)
{
    mq_worker_t *w = p;
    int bits = 0;
    if (len > 0)
        FSGD_TRY(section_bits(section, len, w->min_bits, w->max_bits, &bits, err, errsz));
    if (bits)
        fsgd_mqgrad_set_bits(w->cw->codec, bits);
    return fsgd_codec_worker_after_step(w->cw, applied, NULL, 0, err, errsz);
}

static int mq_reset(void *p) { return fsgd_codec_worker_reset(((mq_worker_t *)p)->cw); }
static size_t mq_residual(const void *p) { return fsgd_codec_worker_residual_entries(((const mq_worker_t *)p)->cw); }

/* ---- aggregator ---- */

typedef struct mq_agg {
    fsgd_codec_agg_t *ca;
    fsgd_mq_agent_t *agent;
    int bits_seen_max, bits_seen_min;
    int last_bits_max, last_bits_min; /* of the step last taken */
    uint8_t section[SECTION_LEN];
    char down[64];
} mq_agg_t;

static void mq_agg_destroy(void *p)
{
    mq_agg_t *a = p;
    if (!a)
        return;
    fsgd_codec_agg_destroy(a->ca);
    fsgd_mq_agent_destroy(a->agent);
    free(a);
}

static void set_bits(mq_agg_t *a, int bits)
{
    a->section[0] = 1;
    a->section[1] = (uint8_t)bits;
    a->section[2] = a->section[3] = 0;
}

static void *mq_agg_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz)
{
    mq_params_t p;
    if (mq_parse(spec, &p, err, errsz) < 0)
        return NULL;
    mq_agg_t *a = calloc(1, sizeof *a);
    if (!a) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy mqgrad: out of memory");
        return NULL;
    }
    char cs[64];
    snprintf(cs, sizeof cs, "mqgrad:bits=%d", (int)p.v[P_BITS0]);
    a->ca = fsgd_codec_agg_new(cs, dim, seed, err, errsz);
    fsgd_mq_agent_params_t ap = {
        .T = (int)p.v[P_T],
        .alpha = p.v[P_ALPHA],
        .gamma = p.v[P_GAMMA],
        .eps = p.v[P_EPS],
        .eta = p.v[P_ETA],
        .discount = p.v[P_DISCOUNT],
        .min_bits = (int)p.v[P_MIN],
        .max_bits = (int)p.v[P_MAX],
        .bits0 = (int)p.v[P_BITS0],
        .hidden = (int)p.v[P_HIDDEN],
        .lower = (int)p.v[P_LOWER],
        .norm = (int)p.v[P_NORM],
    };
    a->agent = a->ca ? fsgd_mq_agent_new(&ap, seed) : NULL;
    if (!a->agent) {
        if (a->ca)
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy mqgrad: out of memory");
        mq_agg_destroy(a);
        return NULL;
    }
    set_bits(a, ap.bits0);
    int db = (int)p.v[P_DOWN];
    snprintf(a->down, sizeof a->down, "mqgrad:bits=%d", db ? db : ap.max_bits);
    a->last_bits_max = a->last_bits_min = 0;
    return a;
}

static int mq_add(void *p, uint32_t sender, const uint8_t *msg, size_t len, double value_bound, size_t *entries,
                  char *err, size_t errsz)
{
    mq_agg_t *a = p;
    int bits = fsgd_mqgrad_message_bits(msg, len);
    if (bits == 0) /* decodes as some other codec: refuse, the uplink is mqgrad's */
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field codec_id at offset 5: not an mqgrad message");
    FSGD_TRY(fsgd_codec_agg_add(a->ca, sender, msg, len, value_bound, entries, err, errsz));
    if (!a->bits_seen_max || bits > a->bits_seen_max)
        a->bits_seen_max = bits;
    if (!a->bits_seen_min || bits < a->bits_seen_min)
        a->bits_seen_min = bits;
    return 0;
}

static fsgd_reducer_t *mq_take(void *p, const fsgd_step_info_t *info, char *err, size_t errsz)
{
    mq_agg_t *a = p;
    if (info && info->rows > 0)
        set_bits(a, fsgd_mq_agent_step(a->agent, info->loss_sum / (double)info->rows, info->seconds));
    a->last_bits_max = a->bits_seen_max;
    a->last_bits_min = a->bits_seen_min;
    a->bits_seen_max = a->bits_seen_min = 0;
    return fsgd_codec_agg_take(a->ca, info, err, errsz);
}

static const uint8_t *mq_section(const void *p, size_t *len)
{
    *len = SECTION_LEN;
    return ((const mq_agg_t *)p)->section;
}

static const char *mq_downlink(const void *p) { return ((const mq_agg_t *)p)->down; }

static double mq_param(const void *p, const char *name)
{
    const mq_agg_t *a = p;
    if (!strcmp(name, "bits")) /* what the workers use next */
        return fsgd_mq_agent_bits(a->agent);
    if (!strcmp(name, "bits_used")) /* the largest bits among the messages of the step last taken */
        return a->last_bits_max ? a->last_bits_max : (double)NAN;
    if (!strcmp(name, "bits_used_min"))
        return a->last_bits_min ? a->last_bits_min : (double)NAN;
    if (!strcmp(name, "reward"))
        return fsgd_mq_agent_reward(a->agent);
    if (!strcmp(name, "mdp_t"))
        return (double)fsgd_mq_agent_t_index(a->agent);
    if (!strcmp(name, "state_bits"))
        return fsgd_mq_agent_state_bits(a->agent);
    if (!strcmp(name, "q_keep"))
        return fsgd_mq_agent_q(a->agent, 0);
    if (!strcmp(name, "q_up"))
        return fsgd_mq_agent_q(a->agent, 1);
    return NAN;
}

const fsgd_strategy_vt_t fsgd_strategy_vt_mqgrad = {
    .name = "mqgrad",
    .check = mq_check,
    .worker_new = mq_worker_new,
    .worker_destroy = mq_worker_destroy,
    .device_codec = NULL,
    .bound = mq_bound,
    .encode = mq_encode,
    .after_step = mq_after_step,
    .reset = mq_reset,
    .residual_entries = mq_residual,
    .agg_new = mq_agg_new,
    .agg_destroy = mq_agg_destroy,
    .add = mq_add,
    .take = mq_take,
    .section = mq_section,
    .optimizer = FSGD_OPT_ADAM,
    .downlink_spec = mq_downlink,
    .param = mq_param,
};
