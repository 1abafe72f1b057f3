/* `fsgd aggregator`: the barrier, the reduction, sparse Adam, and the model
 * topic (KAFKA_FORMAT.md).
 *
 * Step t+1 starts when the aggregator publishes the model message of step t:
 * it carries the new values of the touched keys and the step state (for each
 * data partition the epoch's offsets, the next position and the rows to
 * take). Each gradient names the offset ranges it consumed; a range is
 * accepted only if it starts at the partition's current position and no
 * other gradient of the step claimed the partition, so every row is applied
 * exactly once per epoch whatever the consumer group does. The count of
 * rows applied per epoch is checked against the scan of the data topic. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aggregator_internal.h"
#include "fsgd/ckpt_set.h"

static void agg_free(agg_t *a)
{
    fsgd_bus_client_destroy(a->grads_c);
    fsgd_bus_client_destroy(a->scan_c);
    fsgd_bus_client_destroy(a->prod); /* drops what is not delivered */
    agg_data_free(&a->data, a->st.nparts);
    fsgd_wire_state_free(&a->st);
    agg_model_free(&a->model);
    agg_pull_free(&a->pull);
    agg_open_free(&a->open);
    agg_auto_free(&a->tune);
    agg_follow_free(&a->follow);
    agg_members_free(&a->members);
    fsgd_csr_free(&a->test);
    agg_clock_free(&a->clock);
    fsgd_cj_free(&a->cj);
    fsgd_bus_client_destroy(a->ctl_c);
    fsgd_replay_destroy(a->replay_grads);
    fsgd_replay_destroy(a->replay_ctl);
    agg_lead_free(a->lead);
    a->lead = NULL;
}

/* How long a step whose answers carry no rows waits for the group to move
 * partitions: longer than the consumers' session timeout (6 s,
 * KAFKA_FORMAT.md), after which a dead member's partitions have moved. */
#define IDLE_WAIT_S 8.0

/* The clients, the job's topics, the data topic's scan and summary, the
 * model to start from, the auto defaults and the test set. */
static int agg_open(agg_t *a, fsgd_bus_t *bus)
{
    const fsgd_dist_job_t *job = a->job;
    char *err = a->err;
    size_t errsz = a->errsz;
    int rc = fsgd_rowfmt_init(&a->fmt, job->train->format, job->train->hash_bits, job->train->skip_bad, err, errsz);
    a->data.labels.classes = fsgd_rowfmt_weighs(&a->fmt); /* labels of weighted rows are ±weight */
    if (!rc && (!(a->prod = fsgd_bus_client_new(bus, FSGD_KCLIENT_PRODUCER, err, errsz)) ||
                !(a->scan_c = fsgd_bus_client_new(bus, FSGD_KCLIENT_READER, err, errsz)) ||
                !(a->grads_c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, errsz))))
        rc = FSGD_E_KAFKA;
    if (!rc && (!(a->data.replay_rows = fsgd_replay_new()) || !(a->replay_grads = fsgd_replay_new()) ||
                !(a->replay_ctl = fsgd_replay_new())))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    /* The job's grads, model and ctl topics (fsgd produce or fsgd run made
     * them; kept as they are when they exist), with leaders elected. */
    if (!rc)
        rc = fsgd_dist_topics_create(a->prod, job, 0, err, errsz);
    /* NAME.ctl from its start, for the whole run: the members of the job.
     * Assigned now, read once the data is known: a consumer's first fetch
     * waits for its connection and metadata (0.5 s), which the scan and
     * the test set hide. */
    if (!rc && !(a->ctl_c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, errsz)))
        rc = FSGD_E_KAFKA;
    if (!rc) {
        fsgd_bus_tp_t l = {a->topic.ctl, 0, FSGD_BUS_OFFSET_BEGINNING};
        rc = fsgd_bus_assign(a->ctl_c, &l, 1, err, errsz);
    }
    const agg_env_t env = agg_env(a);
    const agg_scan_ctx_t sc = {.job = job, .fmt = &a->fmt, .scan_c = a->scan_c, .auth = a->auth,
                               .data_topic = a->topic.data, .model_topic = a->topic.model};
    if (!rc)
        rc = agg_check_model_topic(&sc, &env);
    a->bus = bus;
    if (!rc) {
        const agg_twin_ctx_t tc = {.bus = bus, .prod = a->prod, .scan_c = a->scan_c, .cj = &a->cj,
                                   .ctl_topic = a->topic.ctl, .model_topic = a->topic.model, .job = job->dist->name,
                                   .shard = a->shard, .shards = a->shards, .gen = a->gen};
        rc = agg_twin_check(&a->twin, &tc, &env);
    }
    if (!rc) {
        const agg_lead_ctx_t lc = agg_lead_ctx(a);
        rc = agg_lead_open(&a->lead, bus, &lc, &env);
    }
    /* sharded: no shard holds the whole model until the end, when shard 0
     * assembles it and scores the test set (agg_shard_final) */
    if (!rc && job->train->test[0] && a->shard == 0) { /* in the job's format, like the data topic */
        rc = fsgd_rowfmt_load(&a->fmt, job->train->test, 1, &a->test, NULL, err, errsz);
        a->have_test = rc == 0 && a->shards == 1;
    }
    if (!rc)
        rc = agg_await_producer(a->topic.data, &env);
    uint64_t dim = 0;
    if (!rc)
        rc = agg_scan_data(&a->data, &a->st, &sc, &env, &dim);
    if (!rc) {
        a->dim = dim;
        rc = agg_shard_dims(job, a->shard, a->shards, dim, &a->mdim, &a->gweights, &env);
    }
    if (!rc && job->train->init[0]) {
        const agg_init_ctx_t ic = {.job = job, .fmt = &a->fmt, .dim = &a->dim, .mdim = &a->mdim,
                                   .gweights = &a->gweights};
        rc = agg_init_load(&a->model, &ic, &env);
    }
    if (!rc) {
        const agg_auto_ctx_t ac = {.job = job, .fmt = &a->fmt, .scan_c = a->scan_c, .data_topic = a->topic.data,
                                   .st = &a->st, .data = &a->data, .dim = a->dim, .gweights = a->gweights,
                                   .workers = a->members.expected, .snap_every = &a->model.snap_every};
        rc = agg_auto_setup(&a->tune, &ac, &env);
    }
    return rc;
}

/* Adam or FTRL over the model, once the auto defaults have fixed lr and
 * λ; the model of job key init goes in before the checkpoint, which wins. */
static int agg_setup_optimizer(agg_t *a)
{
    const fsgd_dist_job_t *job = a->job;
    int rc = 0;
    fsgd_adam_params_t ap = {a->tune.lr, a->tune.beta1, job->train->beta2, job->train->eps};
    /* lr auto (Adam): each key's bias corrections count its own updates, as
     * in fsgd train (a key first seen late steps by about lr, not 3-6 lr);
     * FTRL keeps z and n in Adam's m and v */
    int counted = job->train->lr < 0 && job->train->optimizer != FSGD_OPTIMIZER_FTRL;
    char why[256];
    int sparse = agg_table_choose(job, a->shards, a->mdim, a->s->dataset_nnz, why, sizeof why);
    if (sparse < 0)
        return fsgd_err_fmt(a->err, a->errsz, sparse, "shard %u: %s", a->shard, why);
    /* a sparse table's arrays start small and grow with the keys it is given */
    uint64_t held = sparse ? agg_table_start_keys(a->mdim, a->s->dataset_nnz, a->shards) : a->mdim;
    if ((counted ? fsgd_adam_init_counted(&a->model.adam, held, &ap) : fsgd_adam_init(&a->model.adam, held, &ap)) < 0)
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory for %llu weights",
                          (unsigned long long)held);
    if (!rc && sparse) {
        if (!(a->model.table = fsgd_sparse_table_new(held)))
            rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory for a sparse table");
        a->s->table_sparse = 1;
    }
    if (a->shards > 1)
        agg_log(a, "shard %u: %s", a->shard, why);
    if (!rc && job->train->optimizer == FSGD_OPTIMIZER_FTRL) {
        /* λ1, λ2 as in fsgd train: the mean-loss l1, l2 (auto resolved) times the rows of an epoch */
        double n = (double)a->s->dataset_rows;
        fsgd_ftrl_params_t fp = {.alpha = a->tune.alpha, .beta = job->train->beta, .l1 = job->train->l1 * n, .l2 = a->tune.l2 * n};
        if (fsgd_ftrl_init_over(&a->model.ftrl, a->mdim, &fp, a->model.adam.m, a->model.adam.v) < 0)
            rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "aggregator: ftrl: alpha %g must be > 0", a->tune.alpha);
        a->model.ftrl_on = rc == 0;
    }
    agg_env_t env = agg_env(a);
    if (!rc && a->model.init)
        rc = agg_init_apply(&a->model, &env, job->train, a->mdim); /* before the checkpoint, which wins */
    return rc;
}

/* Reassembly of the gradients, the per-partition claims of a step, and the
 * compression strategy that decodes and reduces them. */
static int agg_setup_reduction(agg_t *a)
{
    const fsgd_dist_job_t *job = a->job;
    int rc = 0;
    a->open.as = fsgd_kasm_new();
    a->open.claimed = calloc(a->st.nparts, 1);
    a->open.newpos = calloc(a->st.nparts, sizeof *a->open.newpos);
    if (!a->open.as || !a->open.claimed || !a->open.newpos)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    char e[256], spec[sizeof job->train->codec + 32];
    /* a shard runs its share of the strategy (budgets split: fsgd_strategy_shard_spec) */
    snprintf(spec, sizeof spec, "%s", job->train->codec);
    if (a->shards > 1 && fsgd_strategy_shard_spec(job->train->codec, a->gweights, a->shard, a->shards, spec, sizeof spec, e,
                                                  sizeof e) < 0)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "codec: %s", e);
    a->model.strat = fsgd_sagg_new(spec, a->mdim, job->train->seed, e, sizeof e);
    if (!a->model.strat)
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "codec: %s", e);
    if (!rc && a->model.ftrl_on && fsgd_sagg_optimizer(a->model.strat) == FSGD_OPT_APPLY)
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG,
                          "codec %s runs the optimizer on the workers: it cannot be combined with optimizer ftrl",
                          job->train->codec);
    if (!rc && fsgd_dist_replica(job->train, job->dist) == FSGD_REPLICA_WORKING_SET && fsgd_sagg_optimizer(a->model.strat) == FSGD_OPT_APPLY)
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG,
                          "codec %s runs the optimizer on the workers, on a whole replica: it needs replica full",
                          job->train->codec);
    a->open.tau = a->s->tau = fsgd_strategy_max_lag(job->train->codec, job->train->staleness);
    if (!rc && a->open.tau != job->train->staleness)
        agg_log(a, "staleness %d asked, 0 used: strategy %s runs in lockstep", job->train->staleness, job->train->codec);
    if (rc)
        return rc;
    /* Reassembly holds only the step in progress, from members: at most
     * a gradient's worth per member. A gradient is its header, ranges and
     * a codec message of at most 8 bytes per weight plus framing. */
    size_t msg = 65536 + (size_t)a->st.nparts * 20 + (size_t)a->mdim * 16;
    size_t total = msg * (size_t)(a->members.expected + 2);
    if (total < (size_t)64 << 20)
        total = (size_t)64 << 20;
    fsgd_kasm_set_limits(a->open.as, msg, total);
    a->s->held_limit = total;
    return 0;
}

/* Continuous training's state, once NAME.ctl is being read (agg_open). */
static int agg_open_ctl(agg_t *a, fsgd_bus_t *bus)
{
    (void)bus;
    if (!a->job->dist->follow)
        return 0;
    const agg_env_t env = agg_env(a);
    return agg_follow_setup(&a->follow, a->st.nparts, a->topic.data, a->model.snap_every,
                            a->job->dist->version_seconds, &env);
}

/* A new generation (later than the checkpoint's), and NAME.grads read from
 * its end: gradients of earlier generations are ignored anyway. */
static int agg_assign_grads(agg_t *a, int resumed)
{
    int rc = 0;
    uint32_t now_gen = (uint32_t)time(NULL);
    /* a following shard takes shard 0's (agg_lead_wait_start) */
    if (!a->lead)
        a->gen = resumed ? (a->gen + 1 > now_gen ? a->gen + 1 : now_gen) : now_gen;
    a->s->gen = a->gen;
    agg_set_quota(&a->st, agg_tune_batch(&a->tune, a->job->train, a->s->dataset_rows));
    a->st.adam_t = a->model.adam.t;
    int P = fsgd_bus_partitions(a->grads_c, a->topic.grads, 15000, a->err, a->errsz);
    if (a->shards > 1 && P >= 0 && P < (int)a->shards)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE, "topic %s has %d partitions; %u shards need one each",
                            a->topic.grads, P, a->shards);
    fsgd_bus_tp_t *l = calloc(P > 0 ? (size_t)P : 1, sizeof *l);
    if (!l)
        rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    for (int p = 0; l && p < P && !rc; p++) {
        int64_t lo, hi;
        rc = fsgd_bus_watermarks(a->grads_c, a->topic.grads, p, &lo, &hi, 10000, a->err, a->errsz);
        l[p] = (fsgd_bus_tp_t){a->topic.grads, p, hi};
    }
    if (P < 0)
        rc = P;
    if (!rc && a->shards > 1) /* a shard reads its own partition only */
        rc = fsgd_bus_assign(a->grads_c, &l[a->shard], 1, a->err, a->errsz);
    else if (!rc)
        rc = fsgd_bus_assign(a->grads_c, l, P, a->err, a->errsz);
    free(l);
    return rc;
}

/* While a following shard waits for shard 0's opening snapshot: NAME.ctl
 * is read as in the step loop. */
static void lead_wait_idle(void *arg)
{
    agg_t *a = arg;
    const agg_ctl_ctx_t cc = agg_ctl_ctx(a);
    const agg_env_t env = agg_env(a);
    agg_ctl_drain(&a->members, &cc, &env, 0);
}

/* job_start on NAME.ctl, then the opening snapshot that starts step 1. */
static int agg_start_job(agg_t *a)
{
    const fsgd_dist_job_t *job = a->job;
    const fsgd_agg_stats_t *st = a->s;
    if (a->lead) { /* a following shard: shard 0's job_start announces the run */
        const agg_lead_ctx_t lc = agg_lead_ctx(a);
        const agg_env_t env = agg_env(a);
        FSGD_TRY(agg_lead_wait_start(a->lead, &lc, &env, lead_wait_idle, a));
        const agg_publish_ctx_t pc = agg_publish_ctx(a);
        int rc = agg_publish(&pc, &env, 1, 0, NULL, 0);
        if (!rc)
            agg_begin_step(a);
        return rc;
    }
    const agg_ctl_ctx_t cc = agg_ctl_ctx(a);
    agg_ctl_begin(&cc, "job_start");
    fsgd_cj_str(&a->cj, "codec", job->train->codec);
    fsgd_cj_u64(&a->cj, "dataset_rows", st->dataset_rows);
    fsgd_cj_u64(&a->cj, "dim", a->dim);
    fsgd_cj_u64(&a->cj, "weights", a->gweights);
    fsgd_cj_i64(&a->cj, "shards", a->shards);
    fsgd_cj_i64(&a->cj, "partitions", st->partitions);
    fsgd_cj_i64(&a->cj, "expected_workers", a->members.expected);
    fsgd_cj_i64(&a->cj, "epochs", job->train->epochs); /* 0: auto, at most max_epochs */
    fsgd_cj_f64(&a->cj, "lr", a->tune.lr);
    fsgd_cj_f64(&a->cj, "l2", a->tune.l2);
    fsgd_cj_u64(&a->cj, "holdout_rows", st->holdout_rows);
    fsgd_cj_i64(&a->cj, "staleness", a->open.tau);
    fsgd_cj_f64(&a->cj, "batch", (double)a->tune.batch);
    fsgd_cj_u64(&a->cj, "step", a->step);
    fsgd_cj_i64(&a->cj, "resumed_from_step", st->resumed_from_step);
    fsgd_cj_f64(&a->cj, "assignment_wait_seconds", st->assignment_wait_s);
    fsgd_cj_i64(&a->cj, "assignment_settled", st->assignment_settled);
    agg_ctl_emit(&cc, "job_start");
    const agg_publish_ctx_t pc = agg_publish_ctx(a);
    const agg_env_t env = agg_env(a);
    int rc = agg_publish(&pc, &env, 1, 0, NULL, 0);
    if (!rc)
        agg_begin_step(a);
    return rc;
}

/* What the step loop keeps from one turn to the next. */
typedef struct agg_loop {
    fsgd_agg_progress_fn progress;
    void *ctx;
    double timeout;                 /* step_timeout_ms in seconds */
    int opened_with_held;           /* the open step took held gradients: it may be complete already */
    int just_took;                  /* a message was just handled: drain the rest without waiting */
    uint64_t idle_snapshot;         /* the step whose model went out again as a snapshot */
    uint64_t idle_logged;           /* the step whose wait for moved partitions was logged */
    double last_progress;
    int shown_step1;
} agg_loop_t;

/* Step 1 waits for everyone expected, or everyone who still holds
 * partitions: a worker that died before step 1 stops holding any once the
 * group has moved them (KAFKA_FORMAT.md, "Start-up"). */
static int agg_first_step_complete(agg_t *a, double t)
{
    char wait_for[256];
    size_t missing = agg_awaited(&a->members, a->st.nparts, wait_for, sizeof wait_for);
    int complete = a->members.ngot >= (size_t)a->members.expected ||
                   (a->members.ngot > 0 && (t > a->open.first_deadline || missing == 0));
    if (!complete && t - a->clock.step_start > 5 && t - a->last_wait_log >= 10 && t > a->open.first_deadline) {
        /* past the deadline with no answer at all: no countdown to give
         * (it used to print "after -535 s more") */
        a->last_wait_log = t;
        agg_log(a, "step %llu: no worker has answered in %.0f s (%d expected; waiting for %s): are the workers "
                   "running, with this job's name and key?",
                (unsigned long long)a->step + 1, t - a->clock.step_start, a->members.expected,
                missing ? wait_for : "any worker");
    } else if (!complete && t - a->clock.step_start > 5 && t - a->last_wait_log >= 10) {
        a->last_wait_log = t;
        agg_log(a, "step %llu: %zu of %d expected workers answered; waiting for %s (starting with those "
                   "that answered after %.0f s more, or once the group moves the partitions of workers "
                   "that are gone)",
                (unsigned long long)a->step + 1, a->members.ngot, a->members.expected,
                missing ? wait_for : "any worker", a->open.first_deadline - t);
    }
    if (complete)
        agg_members_live_from_got(&a->members);
    return complete;
}

/* Once per step after 5 s, then every 30 s: who the step waits for. */
static void agg_log_waiting(agg_t *a, double t, double timeout)
{
    char wait_for[256];
    a->last_wait_log = t;
    if (agg_members_silent(&a->members, wait_for, sizeof wait_for))
        agg_log(a, "step %llu: waiting %.0f s for worker(s) %s; dropped after %.1f s", (unsigned long long)a->step + 1,
                t - a->clock.step_start, wait_for, timeout);
    else
        agg_log(a, "step %llu: no live worker; waiting for any member's gradient", (unsigned long long)a->step + 1);
}

/* Past the step timeout: drop who did not answer; the consumer group moves
 * their partitions, and the positions say where to resume. Returns whether
 * the step can go ahead with who answered; *rc gets a failed snapshot. */
static int agg_drop_silent(agg_t *a, agg_loop_t *l, double t, int *rc)
{
    uint32_t dropped[64];
    size_t nd = agg_members_drop_silent(&a->members, dropped, 64);
    a->s->workers_dropped += nd;
    const agg_ctl_ctx_t cc = agg_ctl_ctx(a);
    for (size_t i = 0; i < nd && i < 64; i++) {
        agg_ctl_member(&cc, &a->members, "worker_dropped", dropped[i]);
        agg_log(a, "step %llu: dropped worker %u (no gradient for %.1f s); the group moves its "
                   "partitions to the others",
                (unsigned long long)a->step + 1, dropped[i], l->timeout);
    }
    int complete = a->members.ngot > 0;
    if (!complete)
        a->clock.step_start = t; /* nobody alive: keep waiting for anyone */
    if (!complete && l->idle_snapshot != a->step) {
        /* Workers that lost a model delta compute nothing until a snapshot,
         * and only steps make snapshots: with all of them waiting the job
         * would stall. Once per step. */
        l->idle_snapshot = a->step;
        const agg_publish_ctx_t pc = agg_publish_ctx(a);
        const agg_env_t env = agg_env(a);
        *rc = agg_publish(&pc, &env, 1, 0, NULL, 0);
    }
    return complete;
}

/* A later step waits for every live worker, until the step timeout. */
static int agg_step_complete(agg_t *a, agg_loop_t *l, double t, int *rc)
{
    int complete = agg_members_all_answered(&a->members);
    if (!complete && t - a->clock.step_start > 5 && t - a->last_wait_log >= 30 &&
        (a->members.nlive || t - a->clock.step_start <= l->timeout))
        agg_log_waiting(a, t, l->timeout);
    if (!complete && t - a->clock.step_start > l->timeout)
        complete = agg_drop_silent(a, l, t, rc);
    return complete;
}

/* 1 when the step should wait: everyone live answered without rows, and the
 * rows left are in partitions of nobody alive (a dropped worker's, until
 * its session ends and the group moves them). Stepping now would spin
 * through hundreds of empty steps; the new owners' assignment reports on
 * NAME.ctl end the wait. */
static int agg_wait_orphaned(agg_t *a, agg_loop_t *l, double t)
{
    double limit = l->timeout > IDLE_WAIT_S ? l->timeout : IDLE_WAIT_S;
    if (!(!a->open.first_step && a->open.rows_step == 0 && t - a->clock.step_start < limit && agg_members_orphaned(&a->members, &a->st)))
        return 0;
    if (l->idle_logged != a->step + 1) {
        l->idle_logged = a->step + 1;
        agg_log(a, "step %llu: every live worker answered without rows; the rows left are in partitions "
                   "of workers no longer live: waiting for the group to move them (at most %.0f s)",
                (unsigned long long)a->step + 1, limit);
    }
    return 1;
}

/* Applies the complete step and opens the next with the gradients already
 * held for it (staleness). */
static int agg_take_step(agg_t *a, agg_loop_t *l, double t, int *done)
{
    a->last_wait_log = 0;
    a->open.first_step = 0;
    a->clock.step_wait = t - a->clock.step_start;
    int rc = agg_apply_step(a, done, l->progress, l->ctx);
    if (!rc && !*done) {
        l->opened_with_held = a->open.early.n > 0 || a->members.ngot > 0;
        const agg_intake_ctx_t ic = agg_intake_ctx(a); /* the step just opened */
        const agg_env_t env = agg_env(a);
        rc = agg_take_held(&ic, &env);
        l->opened_with_held |= a->members.ngot > 0;
    }
    return rc;
}

/* once a second, and as soon as step 1 is in: the job has started */
static void agg_show_progress(agg_t *a, agg_loop_t *l)
{
    const fsgd_agg_stats_t *st = a->s;
    if (l->progress && (agg_now() - l->last_progress >= 1.0 || (st->steps >= 1 && !l->shown_step1))) {
        l->shown_step1 = st->steps >= 1;
        l->last_progress = agg_now();
        agg_clock_latency_stats(&a->clock, a->s);
        if (a->follow)
            agg_follow_stats(a->follow, a->job->train->model, a->s);
        l->progress(l->ctx, a->s, 0);
    }
}

/* SIGTERM in a follow job: a final version and the checkpoint. */
static int agg_follow_finish(agg_t *a)
{
    /* the open step's gradients are dropped: its rows are the first a
     * restart trains (its positions are not in the state) */
    const agg_publish_ctx_t pc = agg_publish_ctx(a);
    const agg_env_t env = agg_env(a);
    FSGD_TRY(agg_publish(&pc, &env, 1, 0, NULL, 0));
    const agg_follow_ctx_t fc = agg_follow_ctx(a);
    FSGD_TRY(agg_follow_published(a->follow, &fc, &a->st, a->step, a->model.adam.theta, &env));
    const agg_ckpt_ctx_t ckpt = agg_ckpt_ctx(a);
    FSGD_TRY(agg_ckpt_write(&ckpt, &env));
    agg_follow_stopped(a->follow, a->step, a->job->dist->checkpoint, &env);
    return 0;
}

/* The steps, until the last epoch (*done) or a failure. */
static int agg_step_loop(agg_t *a, agg_loop_t *l, int *done)
{
    int rc = 0;
    while (!rc && !*done) {
        if ((rc = agg_crashed(a)) != 0)
            break;
        if (a->follow && a->stop && *a->stop) {
            rc = agg_follow_finish(a);
            *done = 1;
            break;
        }
        /* Wait only when nothing is left to decide on: after a message, the
         * queue is drained without waiting, and a step the last message
         * completed is applied at once (a 2 ms wait there was on every
         * step's critical path). */
        fsgd_bus_msg_t *m = fsgd_bus_poll(a->grads_c, l->opened_with_held || l->just_took ? 0 : 2);
        l->opened_with_held = 0;
        l->just_took = 0;
        if (m) {
            const agg_intake_ctx_t ic = agg_intake_ctx(a);
            const agg_env_t env = agg_env(a);
            rc = agg_handle_grad(&ic, &env, m);
            fsgd_bus_msg_destroy(m);
            /* drain what is already here before deciding */
            l->just_took = 1;
            continue;
        }
        fsgd_bus_serve(a->prod);
        const agg_ctl_ctx_t cc = agg_ctl_ctx(a);
        const agg_env_t env = agg_env(a);
        agg_ctl_drain(&a->members, &cc, &env, 0);
        double t = agg_now();
        if (a->lead) { /* a following shard: shard 0 decides the step */
            int open_decided;
            const agg_lead_ctx_t lc = agg_lead_ctx(a); /* the step stays until agg_take_step */
            const agg_intake_ctx_t ic = agg_intake_ctx(a);
            if ((rc = agg_lead_poll(a->lead, &lc, &env, &open_decided)) != 0 ||
                (open_decided && (rc = agg_take_held(&ic, &env)) != 0) ||
                (rc = agg_lead_check_alive(a->lead, &lc, &env, l->timeout)) != 0)
                break;
            if (agg_lead_complete(a->lead, &a->st, &a->open, a->step + 1))
                rc = agg_take_step(a, l, t, done);
            agg_show_progress(a, l);
            continue;
        }
        int complete = a->open.first_step ? agg_first_step_complete(a, t) : agg_step_complete(a, l, t, &rc);
        if (!complete || agg_wait_orphaned(a, l, t))
            continue;
        if (a->follow && !a->open.first_step) {
            const agg_follow_ctx_t fc = agg_follow_ctx(a);
            if ((rc = agg_follow_hold(a->follow, &fc, &a->st, &a->open, &a->data, a->step, &env)) != 0) {
                rc = rc < 0 ? rc : 0; /* 1: waiting for rows */
                continue;
            }
        }
        rc = agg_take_step(a, l, t, done);
        agg_show_progress(a, l);
    }
    return rc;
}

/* The trained model to --out, everything sent; a finished job's checkpoint
 * goes (a stopped follow job keeps it to resume). */
static int agg_save_final(agg_t *a)
{
    const fsgd_dist_job_t *job = a->job;
    int rc = 0;
    agg_clock_latency_stats(&a->clock, a->s);
    if (a->shards > 1) {
        if (a->shard == 0) {
            const agg_shard_final_ctx_t fc = {.job = job, .bus = a->bus, .model_topic = a->topic.model,
                                              .fmt = &a->fmt, .model = &a->model, .test = &a->test};
            const agg_env_t env = agg_env(a);
            rc = agg_shard_final(&fc, &env);
        }
    } else if (job->train->out[0]) {
        fsgd_model_t mo = {.kind = job->train->model, .dim = a->dim, .has_bias = job->train->bias,
                           .bias = (float)job->train->bias_value, .w = a->model.adam.theta};
        /* a hashed format's spec (model v2): fsgd predict hashes raw rows the same way */
        fsgd_rowfmt_input(&a->fmt, mo.input, sizeof mo.input);
        rc = fsgd_model_save(&mo, job->train->out, a->err, a->errsz);
    }
    if (!rc)
        rc = fsgd_bus_flush(a->prod, 30000, a->err, a->errsz);
    if (!rc && job->dist->checkpoint[0] && !a->follow) {
        /* finished: a new run starts fresh (a stopped follow job resumes) */
        char path[FSGD_JOB_PATH_MAX + 24];
        agg_ckpt_path(job, a->shard, path, sizeof path);
        unlink(path);
        if (a->shards > 1) {
            size_t n = strlen(path);
            snprintf(path + n, sizeof path - n, ".prev");
            unlink(path);
        }
    }
    return rc;
}

/* the job's last word on NAME.ctl: workers stop on a failure */
static void agg_end_job(agg_t *a, int rc)
{
    const fsgd_agg_stats_t *st = a->s;
    if (a->lead && !rc) /* a following shard's end is shard 0's */
        return;
    const agg_ctl_ctx_t cc = agg_ctl_ctx(a);
    agg_ctl_begin(&cc, "job_end");
    fsgd_cj_str(&a->cj, "status", rc ? "failed" : "done");
    fsgd_cj_str(&a->cj, "error", rc ? a->err : NULL);
    fsgd_cj_str(&a->cj, "error_code", rc ? fsgd_err_name(rc) : NULL);
    fsgd_cj_u64(&a->cj, "steps", st->steps);
    fsgd_cj_u64(&a->cj, "step", a->step); /* the final model's: readers pair the metrics below with it */
    fsgd_cj_i64(&a->cj, "epochs", st->n_epochs);
    fsgd_cj_u64(&a->cj, "rows_applied", st->rows_total);
    fsgd_cj_u64(&a->cj, "dataset_rows", st->dataset_rows);
    fsgd_cj_f64(&a->cj, "train_loss", st->n_epochs ? st->epochs[st->n_epochs - 1].train_loss : NAN);
    fsgd_cj_u64(&a->cj, "test_rows", st->test.n);
    fsgd_cj_f64(&a->cj, "test_auc", st->test.n ? st->test.auc : NAN);
    fsgd_cj_f64(&a->cj, "test_logloss", st->test.n ? st->test.logloss : NAN);
    fsgd_cj_f64(&a->cj, "seconds", st->seconds);
    fsgd_cj_u64(&a->cj, "bytes_up", st->bytes_up);
    fsgd_cj_u64(&a->cj, "bytes_down", st->bytes_down);
    fsgd_cj_u64(&a->cj, "workers_dropped", st->workers_dropped);
    fsgd_cj_u64(&a->cj, "empty_steps", st->empty_steps);
    agg_ctl_emit(&cc, "job_end");
    fsgd_bus_flush(a->prod, 5000, NULL, 0);
}

/* --metrics-json; returns rc, or the failure to write them: a finished job
 * whose metrics are lost has failed. */
static int agg_save_metrics(agg_t *a, int rc)
{
    char e2[FSGD_OUTFILE_PATH_MAX + 300];
    char path[FSGD_JOB_PATH_MAX + 16];
    fsgd_ckpt_set_path(a->job->train->metrics_json, a->shard, 0, path, sizeof path);
    int mrc = fsgd_agg_write_metrics(a->job, a->s, path, e2, sizeof e2);
    if (mrc < 0 && !rc)
        rc = fsgd_err_fmt(a->err, a->errsz, mrc, "%s", e2);
    else if (mrc < 0)
        agg_log(a, "%s", e2);
    return rc;
}

int fsgd_aggregator_run(const fsgd_role_env_t *env, const fsgd_dist_job_t *job, int expected_workers,
                        fsgd_agg_stats_t *st, fsgd_agg_progress_fn progress, fsgd_agg_step_fn on_step, char *err,
                        size_t errsz)
{
    fsgd_bus_t *bus = env->bus;
    memset(st, 0, sizeof *st);
    st->resumed_from_step = -1;
    st->time_to_target = -1;
    agg_t a = {.job = job,
               .s = st,
               .err = err,
               .errsz = errsz,
               .log = env->log,
               .on_step = on_step,
               .log_ctx = env->ctx,
               .auth = fsgd_bus_auth(env->bus),
               .stop = env->stop,
               .crash = env->crash};
    job_topics_init(&a.topic, job->dist->name);
    a.members.expected = expected_workers > 0 ? expected_workers : 1;
    const agg_env_t setup_env = agg_env(&a);
    int rc = agg_shard_setup(job, &a.shard, &a.shards, &setup_env);
    if (!rc)
        rc = agg_open(&a, bus);
    if (!rc)
        rc = agg_setup_optimizer(&a);
    if (!rc) /* the model's pages, mapped while the group settles instead of in the first steps */
        agg_pages_start(&a.model);
    if (!rc)
        rc = agg_setup_reduction(&a);
    if (!rc)
        rc = agg_open_ctl(&a, bus);
    a.st.epoch = 1;
    int resumed = 0;
    if (!rc) {
        const agg_ckpt_ctx_t ckpt = agg_ckpt_ctx(&a);
        const agg_env_t part_env = agg_env(&a);
        if ((resumed = agg_ckpt_load(&ckpt, &part_env)) < 0)
            rc = resumed;
    }
    if (!rc && resumed && a.follow) {
        const agg_follow_ctx_t fc = agg_follow_ctx(&a);
        const agg_env_t aenv = agg_env(&a);
        rc = agg_follow_resumed(a.follow, &fc, &a.st, &a.data, a.step, &aenv);
    }
    if (!rc) {
        const agg_env_t aenv = agg_env(&a);
        rc = agg_downlink_setup(&a.model, job, &a.pull.halves, &aenv);
    }
    if (!rc)
        rc = agg_assign_grads(&a, resumed);
    /* the opening snapshot waits until the consumer group has settled */
    if (!rc && !a.lead) {
        const agg_ctl_ctx_t cc = agg_ctl_ctx(&a);
        const agg_env_t aenv = agg_env(&a);
        rc = agg_wait_assignment(&a.members, &cc, &aenv, 60);
    }
    a.clock.t0 = agg_now();
    if (!rc)
        rc = agg_start_job(&a);
    a.open.first_step = 1;
    a.open.first_deadline = agg_now() + 60;
    int done = 0;
    agg_loop_t l = {.progress = progress, .ctx = env->ctx, .timeout = job->dist->step_timeout_ms / 1e3,
                    .idle_snapshot = UINT64_MAX, .last_progress = agg_now()};
    if (!rc)
        rc = agg_step_loop(&a, &l, &done);
    if (!rc && done)
        rc = agg_save_final(&a);
    st->seconds = a.clock.seconds_before + agg_now() - a.clock.t0;
    if (a.prod && (done || rc) && !a.stopped && !a.twin.refused) /* a refused twin's words would be the job's */
        agg_end_job(&a, rc);
    if (job->train->metrics_json[0] && (done || rc) && !a.stopped && !a.twin.refused)
        rc = agg_save_metrics(&a, rc);
    agg_free(&a);
    return rc;
}
