/* `fsgd worker`: one member of the job's consumer group on <job>.data.
 *
 * The worker is a function of the model topic: every model message carries
 * the step state (epoch, and per data partition the epoch's offsets, the
 * next position and the rows to take), so after applying step t's message
 * the worker knows exactly which rows step t+1 needs from the partitions
 * the consumer group gave it. It never keeps positions of its own; when a
 * gradient is dropped or a partition moves, the next state says where to
 * resume (exactly once per epoch, KAFKA_FORMAT.md). Parsed partitions stay
 * cached (like RDD.cache), so later epochs do not read Kafka again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/clock.h"
#include "worker_internal.h"

/* The step the worker waits for and who owes it: "the aggregator", or the
 * shards whose model is behind the others' (a sharded job). */
static void owed_by(const worker_t *w, char *who, size_t cap)
{
    if (w->shards <= 1) {
        snprintf(who, cap, "the aggregator");
        return;
    }
    uint64_t newest = 0;
    for (uint32_t i = 0; i < w->shards; i++)
        if (w->sh_valid[i] && w->sh_step[i] > newest)
            newest = w->sh_step[i];
    size_t n = (size_t)snprintf(who, cap, "aggregator shard");
    int listed = 0;
    for (uint32_t i = 0; i < w->shards && n < cap; i++)
        if (!w->sh_valid[i] || w->sh_step[i] < newest) {
            n += (size_t)snprintf(who + n, cap - n, "%s %u (at step %llu)", listed++ ? "," : "", i,
                                  w->sh_valid[i] ? (unsigned long long)w->sh_step[i] : 0ULL);
        }
    if (!listed)
        snprintf(who, cap, "every aggregator shard (all at step %llu)", (unsigned long long)newest);
}

/* Called each turn of the loop (ready: may_send's answer). A worker
 * without a model (none yet, or resyncing) says what it waits for; one
 * whose gradients go unanswered says so too, and fails with FSGD_E_TIMEOUT
 * once no message has come on the model topic for the give-up time (one
 * without a model does not give up: a job's aggregator may take long to
 * scan its data before its first snapshot). */
static int check_model_wait(worker_t *w, int ready)
{
    const int unanswered = inflight_ahead(&w->fl, w->gen, w->step) > 0 || worker_pull_waiting(w);
    int kind = !w->valid ? 1 : !ready && w->have_assignment && unanswered ? 2 : 0;
    if (!kind && !w->wait_kind)
        return 0; /* the steady state: no clock read on the step loop */
    double t = fsgd_clock_s();
    if (kind != w->wait_kind) {
        w->wait_kind = kind;
        w->wait_since = w->wait_logged = t;
    }
    if (!kind)
        return 0;
    const double step_s = w->job->step_timeout_ms / 1000.0, give_up = step_s * WAIT_GIVE_UP_STEPS;
    double say_every = step_s * WAIT_SAY_STEPS;
    say_every = say_every < 1 ? 1 : say_every > WAIT_SAY_MAX_S ? WAIT_SAY_MAX_S : say_every;
    double since = w->model_seen > w->wait_since ? w->model_seen : w->wait_since;
    char who[256];
    if (kind == 2 && t - since >= give_up) {
        owed_by(w, who, sizeof who);
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_TIMEOUT,
                            "worker: no message on %s for %.0f s while waiting for the model after step %llu from "
                            "%s: giving up (is the aggregator running?)",
                            w->topic.model, t - since, (unsigned long long)w->step, who);
    }
    if (t - w->wait_logged < say_every || !w->log)
        return 0;
    /* the aggregator said lately that it waits for rows (it says so once a
     * step timeout, 1 s at least): nothing is wrong */
    if (kind == 2 && t - w->agg_idle_seen < 3 * (step_s < 1 ? 1 : step_s)) {
        w->wait_logged = t;
        return 0;
    }
    w->wait_logged = t;
    owed_by(w, who, sizeof who);
    char line[512];
    if (kind == 2)
        snprintf(line, sizeof line,
                 "waiting %.0f s for the model after step %llu from %s (%llu gradients resent; gives up after "
                 "%.0f s without a message on %s)",
                 t - w->wait_since, (unsigned long long)w->step, who, (unsigned long long)w->stats->resends, give_up,
                 w->topic.model);
    else
        snprintf(line, sizeof line, "waiting %.0f s for a snapshot of the model on %s from %s%s", t - w->wait_since,
                 w->topic.model, who, w->have_assignment ? "" : ", and for data partitions from the consumer group");
    w->log(w->log_ctx, line);
    return 0;
}

/* The steps are not answered: a gradient may have been dropped by the
 * broker (or the aggregator dropped us meanwhile). The same messages go
 * again; a copy is dropped as a duplicate. */
static int resend_unanswered(worker_t *w)
{
    int rc = 0;
    for (size_t i = 0; !rc && i < w->fl.n; i++) {
        const inflight_t *e = &w->fl.e[i];
        if (e->gen != w->gen || e->step <= w->step)
            continue;
        rc = worker_resend_body(w, e);
        w->stats->resends++;
    }
    w->last_send = fsgd_clock_s();
    return rc;
}

static uint32_t random_id(void)
{
    uint32_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&v, sizeof v, 1, f) != 1)
            v = 0;
        fclose(f);
    }
    v ^= (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
    return v ? v : 1;
}

int fsgd_worker_run(const fsgd_role_env_t *env, const fsgd_job_t *job, uint32_t id, fsgd_worker_stats_t *st,
                    fsgd_worker_step_fn on_step, char *err, size_t errsz)
{
    fsgd_bus_t *bus = env->bus;
    volatile sig_atomic_t *stop = env->stop;
    memset(st, 0, sizeof *st);
    worker_t *w = calloc(1, sizeof *w);
    if (!w)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "worker: out of memory");
    w->job = job;
    w->auth = fsgd_bus_auth(bus);
    w->id = id ? id : random_id();
    w->shards = job->shards > 1 ? (uint32_t)job->shards : 1;
    w->stats = st;
    w->log = env->log;
    w->on_step = on_step;
    w->log_ctx = env->ctx;
    w->err = err;
    w->errsz = errsz;
    job_topics_init(&w->topic, job->name);
    int rc = worker_open(w, bus);
    /* a quarter of the aggregator's patience, so it sees a resend before it
     * drops this worker */
    double resend_s = job->step_timeout_ms / 4000.0;
    if (resend_s < 1)
        resend_s = 1;
    w->tau = fsgd_strategy_max_lag(job->codec, job->staleness);
    /* not on the embedded cluster, whose partitions are read slowly
     * (70-100 ms each: reading 87 ahead held the first model 9 s) */
    w->prefetch_on = fsgd_bus_kind(bus) == FSGD_BUS_KAFKA;
    while (!rc && !w->final && !(stop && *stop)) {
        int ready = worker_may_send(w);
        /* blocked on the model: what the step's round trip costs this worker */
        double tw = !ready && w->valid && w->have_assignment ? fsgd_clock_s() : 0;
        fsgd_bus_msg_t *m = fsgd_bus_poll(w->model_c, ready ? 0 : 5);
        if (tw > 0)
            w->stats->t_wait += fsgd_clock_s() - tw;
        if (m) {
            if (m->topic && !strcmp(m->topic, w->topic.model)) /* NAME.ctl's events are other roles' */
                w->model_seen = fsgd_clock_s();
            rc = worker_handle_model(w, m);
            fsgd_bus_msg_destroy(m);
            continue;
        }
        fsgd_bus_msg_destroy(fsgd_bus_poll(w->group, 0));
        if (!w->valid)
            fsgd_bus_group_nudge(w->group); /* before step 1: the group's join, now */
        worker_report_if_due(w);
        fsgd_bus_serve(w->prod);
        rc = check_model_wait(w, ready);
        if (rc)
            break;
        if (w->pull.on && (rc = worker_pull_resend(w, resend_s)) < 0)
            break;
        if (ready && !w->final)
            rc = w->pull.on ? worker_pull_step(w) : worker_do_step(w);
        else if (!w->valid && w->have_assignment && !w->prefetch_done &&
                 (w->prefetch_due || (w->prefetch_on && fsgd_clock_s() - w->prefetch_last >= PREFETCH_EVERY_S)))
            worker_prefetch_more(w);
        else if (!ready && w->valid && inflight_ahead(&w->fl, w->gen, w->step) > 0 &&
                 fsgd_clock_s() - w->last_send > resend_s)
            rc = resend_unanswered(w);
    }
    st->hop_model_ms_p50 = fsgd_klat_quantile(&w->lat_model, 0.5);
    st->hop_model_ms_p99 = fsgd_klat_quantile(&w->lat_model, 0.99);
    worker_close(w);
    return rc;
}
