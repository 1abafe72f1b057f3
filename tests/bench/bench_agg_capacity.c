/* How many rows a second one aggregator (one shard) can apply when its
 * workers' gradients are already there, against one thread that trains the
 * same rows alone, in the same process on the same data.
 *
 * The aggregator's work a step is timed exactly as the role does it, minus
 * Kafka: every worker's message through the strategy (fsgd_sagg_add), the
 * step function both trainers run (fsgd_step_apply: the reduction, λθ on
 * the touched keys, Adam with per-key counts as lr auto runs it) and the
 * downlink (the touched keys' new values, or the strategy's coded downlink).
 * The workers' gradients (the cpu backend, encoded with the strategy) are
 * computed untimed from the aggregator's θ (τ = 0). The reference is one
 * thread doing what fsgd train --threads 1 does a step: the cpu backend's
 * gradient of all P·B rows, then the same Adam step.
 *
 * Data: fsgd gen's CTR rows, 2^24 features, 40 nonzeros a row, Zipf 1.1,
 * seed 1 (tests/bench/dist_vs_local.sh's), BENCH_AGG_ROWS rows (default
 * 300000). Steps of B = 474 rows a worker (dist_vs_local's default batch at
 * 1M rows) for P = 2, 4, 8 workers and S = 1, 2, 4 shards (keys k mod S, as
 * fsgd run --shards splits them; each shard's work timed on its own).
 * Codec none runs again with each shard's sparse table (job key table:
 * θ and Adam's state at slots given as keys first come, fsgd/adam.h;
 * Zipf keys then sit near the front in first-touch order).
 * Lines:
 *   bench agg_capacity workers=P shards=S batch=B codec=C table=T steps=N keys_step=K
 *     agg_rows_s=.. train1_rows_s=.. ratio=.. agg_ms_step=.. grad_ms_step=..
 *     update_over_grad=.. ns_key=.. add_ns_key=.. step_ns_key=.. down_ns_key=..
 * agg_rows_s: a step's rows over the slowest shard's time for it (what one
 * shard sustains); ratio: agg_rows_s / train1_rows_s (the target:
 * >= 8); agg_ms_step: the slowest shard's time a step; grad_ms_step: one
 * worker's gradient of its B rows; update_over_grad: agg_ms_step over that
 * (target <= 0.25); ns_key: the shards' time per key of
 * the step's union, then its three parts: the messages in (decode, and
 * the reducer keeping each as a run), the step function (with the runs'
 * one merge, at the reducer's first read: common/reduce.c), the downlink. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/adam.h"
#include "fsgd/backend.h"
#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/gen.h"
#include "fsgd/shard.h"
#include "fsgd/step.h"
#include "fsgd/strategy.h"

#include "bench_ctr_rows.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct run {
    double agg_s, grad_s, train_s;
    double add_s, step_s; /* of agg_s: the messages in, the step function (the rest: the downlink) */
    double slowest_s;     /* Σ over steps of the slowest shard's time */
    size_t steps, keys;
} run_t;

#define TRY(x)                                                                                                        \
    do {                                                                                                              \
        if ((x) < 0)                                                                                                  \
            goto out;                                                                                                 \
    } while (0)

#define MAX_P 8
#define MAX_S 8

/* One shard's aggregator: its keys are k ≡ shard (mod S), held at k / S. */
typedef struct shard {
    fsgd_adam_t adam;
    fsgd_sparse_table_t *table; /* NULL: dense, θ at the local key */
    fsgd_sagg_t *agg;
    fsgd_sworker_t *w[MAX_P]; /* each worker's coder for this shard */
    fsgd_sparse_t out;
    uint8_t *dmsg;
    float *down;
    size_t dcap;
} shard_t;

/* Each worker's coder for this shard. */
static int shard_coders(shard_t *h, const char *spec, uint64_t dim, int P, char *err, size_t errsz)
{
    for (int i = 0; i < P; i++)
        if (!(h->w[i] = fsgd_sworker_new(spec, dim, 2 + (uint64_t)i, err, errsz)))
            return -1;
    return 0;
}

static int shard_open(shard_t *h, const char *spec, uint64_t dim, int P, int sparse, const fsgd_adam_params_t *ap,
                      char *err, size_t errsz)
{
    memset(h, 0, sizeof *h);
    char used[64];
    if (!(h->agg = fsgd_sagg_new(spec, dim, 1, err, errsz)))
        return -1;
    if (sparse) { /* as an aggregator starts one: room for 2^20 keys, then doubling */
        if (!(h->table = fsgd_sparse_table_new(1u << 20)) ||
            fsgd_adam_init_counted(&h->adam, 1u << 20, ap) < 0)
            return -1;
        return shard_coders(h, spec, dim, P, err, errsz);
    }
    if (fsgd_adam_init_counted(&h->adam, dim, ap) < 0 ||
        fsgd_sagg_downlink_open(h->agg, "auto", h->adam.theta, used, sizeof used, err, errsz) < 0)
        return -1;
    /* the pages mapped before the clock starts, as the aggregator does while its group settles */
    fsgd_adam_map_pages(&h->adam);
    return shard_coders(h, spec, dim, P, err, errsz);
}

/* θ of the step's k-th key (h->out), dense or looked up at its slot. */
static float shard_theta(const shard_t *h, size_t k)
{
    return h->table ? fsgd_sparse_table_theta(h->table, &h->adam, h->out.keys[k]) : h->adam.theta[h->out.keys[k]];
}

static void shard_close(shard_t *h)
{
    for (int i = 0; i < MAX_P; i++)
        fsgd_sworker_destroy(h->w[i]);
    fsgd_sagg_destroy(h->agg);
    fsgd_adam_free(&h->adam);
    fsgd_sparse_table_destroy(h->table);
    fsgd_sparse_free(&h->out);
    free(h->dmsg);
    free(h->down);
}


/* The aggregator's work on one step's messages: in, the step, the downlink. */
static int shard_step(shard_t *h, uint8_t *const *msg, const size_t *len, int P, const fsgd_step_info_t *info,
                      double l2, run_t *r, double *secs, char *err, size_t errsz)
{
    double t0 = now_s();
    for (int i = 0; i < P; i++)
        FSGD_TRY(fsgd_sagg_add(h->agg, (uint32_t)i, msg[i], len[i], 1e30, NULL, err, errsz));
    double t1 = now_s();
    fsgd_step_opt_t opt = {.adam = &h->adam, .l2 = l2, .table = h->table};
    FSGD_TRY(fsgd_step_apply(&opt, h->agg, info, &h->out, err, errsz));
    double t2 = now_s();
    if (fsgd_sagg_downlink_coded(h->agg)) {
        size_t need = fsgd_sagg_downlink_bound(h->agg, h->out.n);
        if (need > h->dcap) {
            free(h->dmsg);
            if (!(h->dmsg = malloc(h->dcap = 2 * need)))
                return FSGD_E_NOMEM;
        }
        fsgd_outbuf_t down = {h->dmsg, h->dcap, 0};
        FSGD_TRY(fsgd_sagg_downlink_encode(h->agg, h->adam.theta, h->out.keys, h->out.n, 0, &down, err, errsz));
    } else {
        /* kind 4: the touched keys' float32 values */
        if (h->out.n > h->dcap) {
            free(h->down);
            if (!(h->down = malloc((h->dcap = 2 * h->out.n) * sizeof *h->down)))
                return FSGD_E_NOMEM;
        }
        for (size_t k = 0; k < h->out.n; k++)
            h->down[k] = shard_theta(h, k);
    }
    double t3 = now_s();
    r->add_s += t1 - t0;
    r->step_s += t2 - t1;
    r->agg_s += t3 - t0;
    r->keys += h->out.n;
    *secs = t3 - t0;
    return 0;
}

/* One pass of P workers of B rows over the data through S shards, then the
 * same rows by one thread; 0 or -1 with err. */
static int run_one(const fsgd_csr_t *data, uint64_t dim, const char *spec, int sparse, int P, uint32_t S, size_t B,
                   run_t *r, char *err, size_t errsz)
{
    memset(r, 0, sizeof *r);
    int rc = -1;
    double l2 = 1.0 / (double)data->n_rows;
    fsgd_adam_params_t ap = fsgd_adam_defaults();
    ap.lr = 0.003;
    shard_t sh[MAX_S];
    memset(sh, 0, sizeof sh);
    fsgd_adam_t one_adam = {0};
    float *replica = calloc(dim, sizeof *replica); /* what the workers hold: every shard's θ */
    fsgd_backend_t *be = NULL, *be_one = NULL;
    fsgd_csr_t batch = {0}, big = {0};
    fsgd_sparse_t g = {0}, one_g = {0}, parts[MAX_S];
    memset(parts, 0, sizeof parts);
    uint8_t *msg[MAX_S][MAX_P];
    memset(msg, 0, sizeof msg);
    size_t cap = 0;
    if (!replica || fsgd_adam_init_counted(&one_adam, dim, &ap) < 0)
        goto out;
    fsgd_adam_map_pages(&one_adam);
    for (uint32_t h = 0; h < S; h++)
        TRY(shard_open(&sh[h], spec, fsgd_shard_dim(dim, h, S), P, sparse, &ap, err, errsz));
    be = fsgd_backend_new("cpu", dim, replica, err, errsz);
    be_one = fsgd_backend_new("cpu", dim, one_adam.theta, err, errsz);
    if (!be || !be_one)
        goto out;
    size_t step_rows = (size_t)P * B, steps = data->n_rows / step_rows;
    for (size_t s = 0; s < steps; s++) {
        size_t len[MAX_S][MAX_P];
        double loss_sum = 0;
        for (int i = 0; i < P; i++) {
            fsgd_csr_clear(&batch);
            TRY(fsgd_csr_append_rows(&batch, data, s * step_rows + (size_t)i * B, B));
            fsgd_grad_request_t req = {.batch = &batch, .batch_id = -1, .loss = FSGD_LOSS_LOGISTIC, .scale = 1.0};
            double ls = 0, t0 = now_s();
            TRY(fsgd_backend_gradient(be, &req, &g, &ls, err, errsz));
            if (i == 0)
                r->grad_s += now_s() - t0;
            loss_sum += ls;
            TRY(fsgd_shard_split(&g, S, parts));
            for (uint32_t h = 0; h < S; h++) {
                size_t need = fsgd_sworker_bound(sh[h].w[i], parts[h].n) + 64;
                if (need > cap) {
                    cap = 2 * need;
                    for (uint32_t hh = 0; hh < S; hh++)
                        for (int j = 0; j < P; j++) {
                            uint8_t *p = realloc(msg[hh][j], cap);
                            if (!p)
                                goto out;
                            msg[hh][j] = p;
                        }
                }
                fsgd_outbuf_t up = {msg[h][i], cap, 0};
                TRY(fsgd_sworker_encode(sh[h].w[i], parts[h].keys, parts[h].vals, parts[h].n, B, &up, err, errsz));
                len[h][i] = up.len;
            }
        }
        double slowest = 0;
        fsgd_step_info_t info = {.step = s + 1, .rows = step_rows, .loss_sum = loss_sum, .n_senders = (uint32_t)P};
        for (uint32_t h = 0; h < S; h++) {
            double secs;
            TRY(shard_step(&sh[h], msg[h], len[h], P, &info, l2, r, &secs, err, errsz));
            slowest = secs > slowest ? secs : slowest;
            for (size_t k = 0; k < sh[h].out.n; k++) /* the workers' replicas take the step */
                replica[fsgd_shard_global(sh[h].out.keys[k], h, S)] = shard_theta(&sh[h], k);
            for (int i = 0; i < P; i++)
                TRY(fsgd_sworker_after_step(sh[h].w[i], 1, NULL, 0, err, errsz));
        }
        r->slowest_s += slowest;
    }
    /* the reference: one thread, the same steps of P·B rows */
    for (size_t s = 0; s < steps; s++) {
        fsgd_csr_clear(&big);
        TRY(fsgd_csr_append_rows(&big, data, s * step_rows, step_rows));
        fsgd_grad_request_t req = {.batch = &big,
                                   .batch_id = -1,
                                   .loss = FSGD_LOSS_LOGISTIC,
                                   .scale = 1.0 / (double)step_rows,
                                   .l2 = l2};
        double ls = 0, t0 = now_s();
        TRY(fsgd_backend_gradient(be_one, &req, &one_g, &ls, err, errsz));
        fsgd_adam_step(&one_adam, one_g.keys, one_g.vals, one_g.n);
        r->train_s += now_s() - t0;
    }
    r->steps = steps;
    rc = 0;
out:
    for (uint32_t h = 0; h < MAX_S; h++) {
        shard_close(&sh[h]);
        fsgd_sparse_free(&parts[h]);
        for (int i = 0; i < MAX_P; i++)
            free(msg[h][i]);
    }
    fsgd_backend_destroy(be);
    fsgd_backend_destroy(be_one);
    fsgd_adam_free(&one_adam);
    free(replica);
    fsgd_csr_free(&batch);
    fsgd_csr_free(&big);
    fsgd_sparse_free(&g);
    fsgd_sparse_free(&one_g);
    if (rc && !err[0])
        snprintf(err, errsz, "out of memory");
    return rc;
}

int main(void)
{
    const char *env = getenv("BENCH_AGG_ROWS");
    size_t rows = env ? (size_t)strtoull(env, NULL, 10) : 300000;
    const uint64_t dim = (uint64_t)1 << 24;
    const size_t B = 474;
    char err[256] = "";
    fsgd_csr_t data;
    if (bench_ctr_rows(&data, rows, dim, err, sizeof err) < 0) {
        printf("bench agg_capacity error=\"%s\"\n", err);
        return 1;
    }
    static const struct {
        const char *codec;
        int sparse;
    } specs[] = {{"none", 0}, {"fastsgd", 0}, {"none", 1}};
    static const struct {
        int workers;
        uint32_t shards;
    } cfg[] = {{2, 1}, {4, 1}, {8, 1}, {4, 2}, {4, 4}, {8, 4}};
    for (size_t c = 0; c < sizeof specs / sizeof *specs; c++)
        for (size_t k = 0; k < sizeof cfg / sizeof *cfg; k++) {
            run_t r;
            int P = cfg[k].workers;
            uint32_t S = cfg[k].shards;
            err[0] = 0;
            if (run_one(&data, dim, specs[c].codec, specs[c].sparse, P, S, B, &r, err, sizeof err) < 0 || !r.steps) {
                printf("bench agg_capacity workers=%d shards=%u codec=%s error=\"%s\"\n", P, S, specs[c].codec, err);
                fsgd_csr_free(&data);
                return 1;
            }
            double step_rows = (double)P * (double)B, n = (double)r.steps, keys = (double)r.keys;
            /* a shard's capacity: the rows of a step over the slowest shard's time for it */
            double agg_rows_s = step_rows * n / r.slowest_s, one_rows_s = step_rows * n / r.train_s;
            printf("bench agg_capacity workers=%d shards=%u batch=%zu codec=%s table=%s steps=%zu keys_step=%.0f "
                   "agg_rows_s=%.0f train1_rows_s=%.0f ratio=%.2f agg_ms_step=%.3f grad_ms_step=%.3f "
                   "update_over_grad=%.3f ns_key=%.1f add_ns_key=%.1f step_ns_key=%.1f down_ns_key=%.1f\n",
                   P, S, B, specs[c].codec, specs[c].sparse ? "sparse" : "dense", r.steps, keys / n, agg_rows_s, one_rows_s, agg_rows_s / one_rows_s,
                   1e3 * r.slowest_s / n, 1e3 * r.grad_s / n, r.slowest_s / r.grad_s, 1e9 * r.agg_s / keys,
                   1e9 * r.add_s / keys, 1e9 * r.step_s / keys, 1e9 * (r.agg_s - r.add_s - r.step_s) / keys);
            fflush(stdout);
        }
    fsgd_csr_free(&data);
    return 0;
}
