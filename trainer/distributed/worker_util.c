/* The worker's rejection count and log, and its reports on NAME.ctl
 * (worker_internal.h). */
#include <stdarg.h>
#include <stdio.h>

#include "fsgd/clock.h"
#include "worker_internal.h"

void worker_report_assignment(worker_t *w, const char *event)
{
    fsgd_cj_begin(&w->cj, event, w->job->name);
    fsgd_cj_u64(&w->cj, "worker", w->id);
    fsgd_cj_i32s(&w->cj, "partitions", w->assigned, (size_t)w->nassigned);
    fsgd_cj_u64(&w->cj, "assigned", (uint64_t)w->have_assignment);
    if (fsgd_cj_end(&w->cj) == 0)
        fsgd_ctl_send(w->prod, w->topic.ctl, w->job->name, event, &w->cj);
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
