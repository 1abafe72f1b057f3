/* A role's metrics on /metrics (fsgd/observe.h): the families, and the
 * copy from the role's stats struct into them. The roles emit their stats
 * once a step through a hook the CLI points here; everything else is here,
 * so the loops stay as they were. */
#include "fsgd/observe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/clock.h"
#include "fsgd/error.h"
#include "fsgd/version.h"
#include "fsgd/prom.h"
#include "observe_testing.h"

/* Step durations from a loopback mock broker (~1 ms) to a slow WAN (10 s). */
static const double step_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                      0.1,    0.25,  0.5,    1,     2.5,  5,     10};

enum { PH_GRAD, PH_ENCODE, PH_DECODE, PH_WAIT, PH_UPDATE, PH_COUNT };
static const char *const phase_names[PH_COUNT] = {"gradient", "encode", "decode", "wait", "update"};

static struct {
    fsgd_prom_t *reg;
    fsgd_prom_server_t *srv;
    int agg;
    char shard[16]; /* a sharded job's aggregator: its shard, a label on every series ("": none) */
    double last_step_at; /* worker: when the previous step's hook ran */
    /* series ids (-1: not in this role) */
    int steps, empty_steps, rows, epoch, loss, loss_ma, auc, logloss, test_rows, up, down, model_bytes, raw,
        enc, ratio, hist, live, dropped, consumer_errors, resyncs, resends, replica, replica_checks, seconds,
        chain_restarts, pulls_by_id, pull_misses,
        dataset_rows, dim, shards, shard_weights;
    int version, pv_auc, pv_logloss, pv_rows; /* follow: model versions, progressive validation */
    int phase[PH_COUNT];
    int rejected[FSGD_AGG_REJ_COUNT];
    /* fsgd_strategy_param series by parameter name */
    char strategy[256];
    int nparams;
    struct {
        char name[32];
        int id;
    } params[32];
} g;

/* Parameters a strategy may change while it runs, asked for each step
 * (fsgd_sagg_param answers NaN for those it does not have). */
static const char *const live_params[] = {"bits", "energy", "k", "ratio", "b", "tau", "l"};

static void set(int id, double v)
{
    if (id >= 0)
        fsgd_prom_set(g.reg, id, v);
}

typedef struct adder {
    int rc;
    char *err;
    size_t errsz;
} adder_t;

/* Adds a series; a sharded job's aggregator adds shard="I" to its labels, so
 * the S shards' series stay apart when they are summed or compared. */
static int add(adder_t *a, fsgd_prom_type_t type, const char *name, const char *help, const char *const *given)
{
    if (a->rc < 0)
        return -1;
    const char *lab[16];
    const char *const *labels = given;
    if (g.shard[0]) {
        int n = 0;
        while (given && given[n])
            n += 2;
        if (n + 3 > (int)(sizeof lab / sizeof *lab))
            return a->rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "metric '%s': too many labels", name);
        if (n)
            memcpy(lab, given, (size_t)n * sizeof *lab);
        lab[n] = "shard";
        lab[n + 1] = g.shard;
        lab[n + 2] = NULL;
        labels = lab;
    }
    int id = type == FSGD_PROM_HISTOGRAM
                 ? fsgd_prom_add_histogram(g.reg, name, help, labels, step_buckets,
                                           (int)(sizeof step_buckets / sizeof *step_buckets), a->err, a->errsz)
                 : fsgd_prom_add(g.reg, type, name, help, labels, a->err, a->errsz);
    if (id < 0)
        a->rc = id;
    return id;
}

/* The strategy's name (the codec spec before ':') into buf. */
static void strategy_name(const char *spec, char *buf, size_t n)
{
    snprintf(buf, n, "%s", spec);
    char *colon = strchr(buf, ':');
    if (colon)
        *colon = '\0';
}

/* The fsgd_strategy_param series of a parameter, added on first use. */
static int param_series(adder_t *a, const char *name)
{
    for (int i = 0; i < g.nparams; i++)
        if (!strcmp(g.params[i].name, name))
            return g.params[i].id;
    if (g.nparams == (int)(sizeof g.params / sizeof *g.params) || strlen(name) >= sizeof g.params[0].name)
        return -1;
    const char *lab[] = {"strategy", g.strategy, "param", name, NULL};
    int id = add(a, FSGD_PROM_GAUGE, "fsgd_strategy_param",
                 "A parameter of the compression strategy: from its spec, or as it changes while the job runs "
                 "(e.g. MQGrad's bits).",
                 lab);
    if (id >= 0) {
        snprintf(g.params[g.nparams].name, sizeof g.params[0].name, "%s", name);
        g.params[g.nparams++].id = id;
    }
    return id;
}

/* fsgd_strategy_param{strategy,param} for every numeric k=v of the spec. */
static void strategy_params(adder_t *a, const char *spec)
{
    const char *colon = strchr(spec, ':');
    if (!colon)
        return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", colon + 1);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *end;
        double v = strtod(eq + 1, &end);
        if (end == eq + 1 || *end)
            continue;
        int id = param_series(a, kv);
        if (id >= 0)
            fsgd_prom_set(g.reg, id, v);
    }
}

/* The series every role has: what this process is, the strategy's
 * parameters, steps, rows, wire bytes, the step histogram, the phases and
 * the messages it rejected. */
static void add_role_series(adder_t *a, const fsgd_dist_job_t *job, const char *role, uint32_t worker)
{
    char strategy[sizeof job->train->codec], wid[16];
    strategy_name(job->train->codec, strategy, sizeof strategy);
    snprintf(g.strategy, sizeof g.strategy, "%s", strategy);
    snprintf(wid, sizeof wid, "%u", worker);
    const char *info[] = {"job", job->dist->name, "role", role, "worker", wid, "strategy", strategy, "version",
                          FSGD_VERSION, NULL};
    int id = add(a, FSGD_PROM_GAUGE, "fsgd_job_info", "Always 1: what this process is (labels).", info);
    if (id >= 0)
        fsgd_prom_set(g.reg, id, 1);
    strategy_params(a, job->train->codec);
    const char *up[] = {"direction", "up", "strategy", strategy, NULL};
    const char *down[] = {"direction", "down", "strategy", strategy, NULL};
    g.steps = add(a, FSGD_PROM_COUNTER, "fsgd_steps_total",
                  g.agg ? "Synchronous steps completed." : "Steps this worker sent a gradient for.", NULL);
    g.rows = add(a, FSGD_PROM_COUNTER, "fsgd_rows_total",
                 g.agg ? "Training rows applied." : "Training rows this worker computed gradients of.", NULL);
    g.up = add(a, FSGD_PROM_COUNTER, "fsgd_wire_bytes_total",
               "Bytes of compressed exchange: up = gradients to the aggregator, down = model updates to workers.",
               up);
    g.down = add(a, FSGD_PROM_COUNTER, "fsgd_wire_bytes_total", "", down);
    g.hist = add(a, FSGD_PROM_HISTOGRAM, "fsgd_step_duration_seconds",
                 g.agg ? "Time of one step, from its start to the model update published."
                       : "Time between this worker's consecutive gradient sends.",
                 NULL);
    for (int p = 0; p < PH_COUNT; p++) {
        g.phase[p] = -1;
        if (!g.agg && (p == PH_DECODE || p == PH_UPDATE))
            continue;
        const char *lab[] = {"phase", phase_names[p], NULL};
        g.phase[p] = add(a, FSGD_PROM_COUNTER, "fsgd_phase_seconds_total",
                         "Seconds spent per phase of a step (the paper's Table IV breakdown).", lab);
    }
    for (int r = 0; r < FSGD_AGG_REJ_COUNT; r++) {
        g.rejected[r] = -1;
        if (!g.agg && r != FSGD_AGG_REJ_CORRUPT && r != FSGD_AGG_REJ_DUPLICATE)
            continue;
        const char *lab[] = {"reason", fsgd_agg_reject_name(r), NULL};
        g.rejected[r] = add(a, FSGD_PROM_COUNTER, "fsgd_rejected_messages_total",
                            g.agg ? "Gradient messages dropped, by reason." : "Model messages dropped, by reason.",
                            lab);
    }
}

/* follow: the newest model version and progressive validation. */
static void add_follow_series(adder_t *a)
{
    g.version = add(a, FSGD_PROM_GAUGE, "fsgd_model_version", "follow: the newest model version published.", NULL);
    g.pv_auc = add(a, FSGD_PROM_GAUGE, "fsgd_progressive_auc",
                   "follow: AUC of the newest rows, each scored before it was trained on (NaN before).", NULL);
    g.pv_logloss = add(a, FSGD_PROM_GAUGE, "fsgd_progressive_logloss",
                       "follow: mean loss of the newest rows, each scored before it was trained on.", NULL);
    g.pv_rows = add(a, FSGD_PROM_COUNTER, "fsgd_progressive_rows_total",
                    "follow: rows scored before training since the job began.", NULL);
    fsgd_prom_set(g.reg, g.pv_auc, NAN);
    fsgd_prom_set(g.reg, g.pv_logloss, NAN);
}

static void add_aggregator_series(adder_t *a, const fsgd_dist_job_t *job)
{
    g.empty_steps = add(a, FSGD_PROM_COUNTER, "fsgd_empty_steps_total", "Steps that applied no rows.", NULL);
    g.epoch = add(a, FSGD_PROM_GAUGE, "fsgd_epoch", "The epoch in progress (1-based).", NULL);
    g.loss = add(a, FSGD_PROM_GAUGE, "fsgd_train_loss", "Mean training loss of the last step.", NULL);
    g.loss_ma = add(a, FSGD_PROM_GAUGE, "fsgd_train_loss_moving_average",
                    "Row-weighted mean training loss of the last few steps.", NULL);
    g.auc = add(a, FSGD_PROM_GAUGE, "fsgd_test_auc", "Test AUC at the last epoch end (NaN before).", NULL);
    g.logloss = add(a, FSGD_PROM_GAUGE, "fsgd_test_logloss", "Test logloss at the last epoch end (NaN before).",
                    NULL);
    g.test_rows = add(a, FSGD_PROM_GAUGE, "fsgd_test_rows", "Rows of the last test evaluation.", NULL);
    g.model_bytes = add(a, FSGD_PROM_COUNTER, "fsgd_model_published_bytes_total",
                        "Bytes published to NAME.model (updates and snapshots).", NULL);
    g.raw = add(a, FSGD_PROM_COUNTER, "fsgd_gradient_raw_bytes_total",
                "Gradient bytes before compression (8 per key, value pair).", NULL);
    g.enc = add(a, FSGD_PROM_COUNTER, "fsgd_gradient_encoded_bytes_total", "Gradient bytes after compression.",
                NULL);
    g.ratio = add(a, FSGD_PROM_GAUGE, "fsgd_compression_ratio", "Raw over encoded gradient bytes so far.", NULL);
    g.live = add(a, FSGD_PROM_GAUGE, "fsgd_workers_live", "Workers in the step barrier.", NULL);
    g.dropped = add(a, FSGD_PROM_COUNTER, "fsgd_workers_dropped_total", "Workers dropped after a timeout.", NULL);
    g.consumer_errors = add(a, FSGD_PROM_COUNTER, "fsgd_consumer_errors_total",
                            "Transient errors of the NAME.grads consumer.", NULL);
    g.replica_checks = add(a, FSGD_PROM_COUNTER, "fsgd_replica_checks_total",
                           "Checksums of the model sent for workers to compare with.", NULL);
    g.seconds = add(a, FSGD_PROM_GAUGE, "fsgd_train_seconds", "Seconds since training started.", NULL);
    g.dataset_rows = add(a, FSGD_PROM_GAUGE, "fsgd_dataset_rows", "Rows in NAME.data.", NULL);
    g.dim = add(a, FSGD_PROM_GAUGE, "fsgd_model_dim", "Feature dimension of the model.", NULL);
    g.shards = add(a, FSGD_PROM_GAUGE, "fsgd_shards",
                   "Aggregator shards of the job (1: unsharded; else each owns the keys k mod shards = shard).",
                   NULL);
    g.shard_weights = add(a, FSGD_PROM_GAUGE, "fsgd_shard_weights",
                          "Weights of the model this aggregator holds (its shard's; the whole model unsharded).",
                          NULL);
    set(g.shards, job->train->shards > 1 ? job->train->shards : 1);
    if (g.auc >= 0) {
        fsgd_prom_set(g.reg, g.auc, NAN);
        fsgd_prom_set(g.reg, g.logloss, NAN);
    }
}

static void add_worker_series(adder_t *a)
{
    g.resyncs = add(a, FSGD_PROM_COUNTER, "fsgd_resyncs_total", "Model resyncs from a snapshot.", NULL);
    g.resends = add(a, FSGD_PROM_COUNTER, "fsgd_resends_total", "Gradients sent again (step unanswered).", NULL);
    g.replica = add(a, FSGD_PROM_COUNTER, "fsgd_replica_mismatches_total",
                    "Model checksums that did not match this replica.", NULL);
    g.chain_restarts = add(a, FSGD_PROM_COUNTER, "fsgd_chain_restarts_total",
                           "Times the model's positions showed a gradient refused without a word: the ones sent "
                           "on top of it dropped, the worker started again there.", NULL);
    g.pulls_by_id = add(a, FSGD_PROM_COUNTER, "fsgd_pulls_by_id_total",
                        "Working-set pulls that named a key list their shard keeps (key caching).", NULL);
    g.pull_misses = add(a, FSGD_PROM_COUNTER, "fsgd_pull_misses_total",
                        "Named key lists a shard did not hold: sent again with the keys.", NULL);
}

int fsgd_observe_start(const fsgd_dist_job_t *job, const char *role, uint32_t worker, const char *addr, int port,
                       int *bound, char *err, size_t errsz)
{
    if (g.reg)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "metrics already started");
    int agg = !strcmp(role, "aggregator");
    memset(&g, 0, sizeof g);
    g.agg = agg;
    if (agg && job->train->shards > 1)
        snprintf(g.shard, sizeof g.shard, "%u", job->dist->shard);
    if (!(g.reg = fsgd_prom_new()))
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    adder_t a = {0, err, errsz};
    add_role_series(&a, job, role, worker);
    g.empty_steps = g.epoch = g.loss = g.loss_ma = g.auc = g.logloss = g.test_rows = g.model_bytes = g.raw = g.enc =
        g.ratio = g.live = g.dropped = g.consumer_errors = g.resyncs = g.resends = g.replica = g.replica_checks =
            g.seconds = g.dataset_rows = g.dim = g.shards = g.shard_weights = g.chain_restarts = g.pulls_by_id =
                g.pull_misses = -1;
    g.version = g.pv_auc = g.pv_logloss = g.pv_rows = -1;
    if (agg && job->dist->follow)
        add_follow_series(&a);
    if (agg)
        add_aggregator_series(&a, job);
    else
        add_worker_series(&a);
    if (a.rc < 0) {
        fsgd_observe_stop();
        return a.rc;
    }
    if (!(g.srv = fsgd_prom_server_start(g.reg, addr, port, err, errsz))) {
        fsgd_observe_stop();
        return FSGD_E_IO;
    }
    if (bound)
        *bound = fsgd_prom_server_port(g.srv);
    return 0;
}

void fsgd_observe_stop(void)
{
    fsgd_prom_server_stop(g.srv);
    fsgd_prom_destroy(g.reg);
    memset(&g, 0, sizeof g);
}

void fsgd_observe_agg_step(const fsgd_agg_stats_t *s, const fsgd_sagg_t *strat, double step_seconds)
{
    if (!g.reg || !g.agg)
        return;
    set(g.steps, (double)s->steps);
    set(g.empty_steps, (double)s->empty_steps);
    set(g.rows, (double)s->rows_total);
    set(g.epoch, s->epoch);
    if (s->adam_steps) {
        set(g.loss, s->last_loss);
        set(g.loss_ma, s->loss_ma);
    }
    if (s->n_epochs > 0 && s->test.n) {
        set(g.auc, s->test.auc);
        set(g.logloss, s->test.logloss);
        set(g.test_rows, (double)s->test.n);
    }
    set(g.up, (double)s->bytes_up);
    set(g.down, (double)s->bytes_down);
    set(g.model_bytes, (double)s->bytes_model);
    set(g.raw, (double)s->raw_bytes);
    set(g.enc, (double)s->codec_bytes);
    if (s->codec_bytes)
        set(g.ratio, (double)s->raw_bytes / (double)s->codec_bytes);
    const double ph[PH_COUNT] = {s->t_grad, s->t_encode, s->t_decode, s->t_wait, s->t_update};
    for (int p = 0; p < PH_COUNT; p++)
        set(g.phase[p], ph[p]);
    for (int r = 0; r < FSGD_AGG_REJ_COUNT; r++)
        set(g.rejected[r], (double)s->rejected[r]);
    set(g.live, (double)s->workers_live);
    set(g.dropped, (double)s->workers_dropped);
    set(g.consumer_errors, (double)s->consumer_errors);
    set(g.replica_checks, (double)s->replica_checks);
    set(g.seconds, s->seconds);
    set(g.dataset_rows, (double)s->dataset_rows);
    set(g.dim, (double)s->dim);
    set(g.shard_weights, (double)s->weights_held);
    if (s->follow && s->pv_window_rows) {
        set(g.version, (double)s->version);
        set(g.pv_auc, s->pv_auc);
        set(g.pv_logloss, s->pv_window_logloss);
        set(g.pv_rows, (double)s->pv_rows);
    }
    if (step_seconds >= 0)
        fsgd_prom_observe(g.reg, g.hist, step_seconds);
    for (size_t i = 0; strat && i < sizeof live_params / sizeof *live_params; i++) {
        double v = fsgd_sagg_param(strat, live_params[i]);
        adder_t a = {0, NULL, 0};
        int id = isnan(v) ? -1 : param_series(&a, live_params[i]);
        set(id, v);
    }
}

void fsgd_observe_worker_step(const fsgd_worker_stats_t *s)
{
    if (!g.reg || g.agg)
        return;
    double t = fsgd_clock_s();
    if (g.last_step_at > 0)
        fsgd_prom_observe(g.reg, g.hist, t - g.last_step_at);
    g.last_step_at = t;
    set(g.steps, (double)s->steps_sent);
    set(g.rows, (double)s->rows);
    set(g.up, (double)s->bytes_up);
    set(g.down, (double)s->bytes_down);
    set(g.phase[PH_GRAD], s->t_grad);
    set(g.phase[PH_ENCODE], s->t_encode);
    set(g.phase[PH_WAIT], s->t_wait);
    set(g.rejected[FSGD_AGG_REJ_CORRUPT], (double)s->corrupt);
    set(g.rejected[FSGD_AGG_REJ_DUPLICATE], (double)s->duplicates);
    set(g.resyncs, (double)s->resyncs);
    set(g.resends, (double)s->resends);
    set(g.replica, (double)s->replica_mismatch);
    set(g.chain_restarts, (double)s->chain_restarts);
    set(g.pulls_by_id, (double)s->pulls_by_id);
    set(g.pull_misses, (double)s->pull_misses);
}

char *fsgd_observe_render(void)
{
    char *t = NULL;
    size_t n;
    if (!g.reg || fsgd_prom_render(g.reg, &t, &n) < 0)
        return NULL;
    return t;
}
