/* The worker's rejection count and log, and its reports on NAME.ctl
 * (worker_internal.h). */
#include <stdarg.h>
#include <stdio.h>

#include "fsgd/clock.h"
#include "worker_internal.h"

void worker_report_assignment(worker_t *w, const char *event)
{
    fsgd_cj_begin(&w->cj, event, w->job->dist->name);
    fsgd_cj_u64(&w->cj, "worker", w->id);
    fsgd_cj_i32s(&w->cj, "partitions", w->assigned, (size_t)w->nassigned);
    fsgd_cj_u64(&w->cj, "assigned", (uint64_t)w->have_assignment);
    if (fsgd_cj_end(&w->cj) == 0)
        fsgd_ctl_send(w->prod, w->topic.ctl, w->job->dist->name, event, &w->cj);
}

/* Why: until the first model, the report goes again every few seconds: the
 * aggregator opens the job on it, and one lost report (or one read by an
 * aggregator that was not there yet) must not hold the start (CI once
 * waited 30 s with "0 of 3 workers reported"). */
#define REPORT_AGAIN_S 5.0

void worker_report_if_due(worker_t *w)
{
    if (!w->assign_dirty && (w->valid || !w->have_assignment || fsgd_clock_s() - w->reported_at < REPORT_AGAIN_S))
        return;
    w->assign_dirty = 0;
    w->reported_at = fsgd_clock_s();
    worker_report_assignment(w, "worker_assignment");
}

void worker_reject(worker_t *w, int corrupt, const char *fmt, ...)
{
    uint8_t *logged = corrupt == REJECT_REPLAY  ? &w->logged_replay
                      : corrupt == REJECT_UNAUTH ? &w->logged_unauth
                      : corrupt                  ? &w->logged_corrupt
                                                 : &w->logged_dup;
    if (corrupt == REJECT_REPLAY)
        w->stats->replayed++;
    else if (corrupt == REJECT_UNAUTH)
        w->stats->unauthenticated++;
    else if (corrupt)
        w->stats->corrupt++;
    else
        w->stats->duplicates++;
    if (*logged || !w->log)
        return;
    *logged = 1;
    char why[400], line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (corrupt == REJECT_REPLAY) /* of any topic: why names it */
        snprintf(line, sizeof line, "rejected a replayed message: %s (further ones are only counted)", why);
    else
        snprintf(line, sizeof line, "rejected a message on %s: %s: %s (further ones are only counted)", w->topic.model,
                 corrupt == REJECT_UNAUTH ? "unauthenticated" : corrupt ? "corrupt" : "duplicate", why);
    w->log(w->log_ctx, line);
}

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
int worker_check_model_wait(worker_t *w, int ready)
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
    const double step_s = w->job->dist->step_timeout_ms / 1000.0, give_up = step_s * WAIT_GIVE_UP_STEPS;
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
