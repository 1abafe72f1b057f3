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

int fsgd_worker_run(const fsgd_role_env_t *env, const fsgd_dist_job_t *job, uint32_t id, fsgd_worker_stats_t *st,
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
    w->shards = job->train->shards > 1 ? (uint32_t)job->train->shards : 1;
    w->stats = st;
    w->log = env->log;
    w->on_step = on_step;
    w->log_ctx = env->ctx;
    w->err = err;
    w->errsz = errsz;
    job_topics_init(&w->topic, job->dist->name);
    int rc = worker_open(w, bus);
    /* a quarter of the aggregator's patience, so it sees a resend before it
     * drops this worker */
    double resend_s = job->dist->step_timeout_ms / 4000.0;
    if (resend_s < 1)
        resend_s = 1;
    w->tau = fsgd_strategy_max_lag(job->train->codec, job->train->staleness);
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
        rc = worker_check_model_wait(w, ready);
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
