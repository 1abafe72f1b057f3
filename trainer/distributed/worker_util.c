/* The worker's rejection count and log (worker_internal.h). */
#include <stdarg.h>
#include <stdio.h>

#include "worker_internal.h"

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
        snprintf(line, sizeof line, "rejected a message on %s: %s: %s (further ones are only counted)", w->tmodel,
                 corrupt == REJECT_UNAUTH ? "unauthenticated" : corrupt ? "corrupt" : "duplicate", why);
    w->log(w->log_ctx, line);
}
