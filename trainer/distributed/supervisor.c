/* The processes of one distributed job, watched (fsgd/supervisor.h). */
#include "fsgd/supervisor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>

#include "fsgd/clock.h"

static void say(const fsgd_supervisor_hooks_t *h, int error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(const fsgd_supervisor_hooks_t *h, int error, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (h->say)
        h->say(h->ctx, error, line);
}

static int signalled(const fsgd_supervisor_hooks_t *h)
{
    return h->signal ? (int)*h->signal : 0;
}

static int exit_status(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A crash (or kill -9) is restarted; SIGTERM or SIGINT mean someone
 * stopped the process on purpose. */
static int crashed(const fsgd_supervisor_t *s, int st)
{
    return WIFSIGNALED(st) && WTERMSIG(st) != SIGTERM && WTERMSIG(st) != SIGINT &&
           s->restarts < FSGD_SUPERVISOR_RESTARTS;
}

static void nap_ms(long ms)
{
    struct timespec ns = {0, ms * 1000000};
    nanosleep(&ns, NULL);
}

void fsgd_supervisor_stop(const fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h, pid_t *pids, int n,
                          pid_t agg, int *agg_status)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGTERM);
    double deadline = fsgd_clock_s() + s->grace_s;
    int killed = 0;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) {
            if (pids[i] <= 0)
                continue;
            int st;
            pid_t r = waitpid(pids[i], &st, WNOHANG);
            if (r == pids[i] || (r < 0 && errno == ECHILD)) {
                if (r == pids[i] && pids[i] == agg && agg_status)
                    *agg_status = exit_status(st);
                pids[i] = 0;
            } else {
                left++;
            }
        }
        if (!left)
            return;
        if (!killed && fsgd_clock_s() > deadline) {
            say(h, 1, "run: %d process(es) still running %.0f s after SIGTERM: sending SIGKILL", left, s->grace_s);
            for (int i = 0; i < n; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            killed = 1;
        }
        nap_ms(20);
    }
}

/* A shard crashed (or was killed): every shard stops and starts again from
 * the newest step they all have a checkpoint of (a new generation: the
 * workers take every shard's snapshot and the rows after that step come
 * again), or from the start when there is none. */
static void restart_shards(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h, int dead, int sig)
{
    s->restarts++;
    fsgd_supervisor_stop(s, h, s->pids, 1, s->agg, NULL);
    fsgd_supervisor_stop(s, h, s->pids + s->W + 1, s->S - 1, 0, NULL);
    long long step = h->common_step(h->ctx);
    if (step >= 0)
        say(h, 0, "aggregator shard %d killed by signal %d; restarting all %d shards from their checkpoints of step %lld",
            dead, sig, s->S, step);
    else
        say(h, 0, "aggregator shard %d killed by signal %d before the shards had a checkpoint of one step; "
                  "restarting all %d shards from the start", dead, sig, s->S);
    s->agg = s->pids[0] = h->spawn_shard(h->ctx, 0, step);
    for (int i = 1; i < s->S; i++)
        s->pids[s->W + i] = h->spawn_shard(h->ctx, i, step);
}

/* Shard i > 0 ended: done, killed (every shard restarts), or failed (the
 * job stops). Returns whether pid was a shard. */
static int shard_exited(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h, pid_t pid, int st)
{
    for (int i = 1; i < s->S; i++)
        if (s->pids[s->W + i] == pid) {
            s->pids[s->W + i] = 0;
            int status = exit_status(st);
            if (crashed(s, st)) {
                restart_shards(s, h, i, WTERMSIG(st));
            } else if (status != 0) {
                char after[32] = "";
                if (s->restarts >= FSGD_SUPERVISOR_RESTARTS)
                    snprintf(after, sizeof after, " after %d restarts", s->restarts);
                say(h, 1, "run: aggregator shard %d (pid %d) %s %d%s: the job stops", i, (int)pid,
                    WIFSIGNALED(st) ? "was killed by signal" : "failed with status",
                    WIFSIGNALED(st) ? WTERMSIG(st) : status, after);
                fsgd_supervisor_stop(s, h, s->pids, 1, s->agg, NULL);
                s->pids[0] = 0;
                s->agg_status = status < 128 ? status : s->internal_status;
            }
            return 1;
        }
    return 0;
}

static void aggregator_exited(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h, int st)
{
    if (s->S > 1 && crashed(s, st)) {
        s->pids[0] = 0;
        s->agg = 0;
        restart_shards(s, h, 0, WTERMSIG(st));
        return;
    }
    if (crashed(s, st)) {
        s->restarts++;
        say(h, 0, "aggregator killed by signal %d; restarting from %s", WTERMSIG(st), s->ckpt);
        s->agg = s->pids[0] = h->spawn_shard(h->ctx, 0, -1);
    } else {
        s->pids[0] = 0;
        s->agg_status = exit_status(st);
    }
}

static void worker_exited(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h, pid_t pid, int st)
{
    for (int i = 0; i < s->W; i++)
        if (s->wp[i] == pid) {
            s->wp[i] = 0;
            s->workers_alive--;
            s->workers_failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
            if (WIFSIGNALED(st))
                say(h, 0, "worker %d (pid %d) killed by signal %d; the others carry on", i + 1, (int)pid,
                    WTERMSIG(st));
            else if (WEXITSTATUS(st) == 128 + SIGTERM || WEXITSTATUS(st) == 128 + SIGINT)
                say(h, 0, "worker %d (pid %d) stopped by a signal (status %d); the others carry on", i + 1,
                    (int)pid, WEXITSTATUS(st));
            else if (WEXITSTATUS(st))
                say(h, 0, "worker %d (pid %d) failed with status %d", i + 1, (int)pid, WEXITSTATUS(st));
        }
}

/* Workers that fail leave the aggregator nothing to do: a moment to end on
 * its own. Workers that finished left after the final model, which the
 * aggregator may still be assembling, scoring and writing (shard 0 of a
 * 2^30-weight job: a 4 GiB model, tens of seconds): it gets this long,
 * and the wait is said. */
#define WORKERS_FAILED_GRACE_S 10.0
#define WORKERS_DONE_GRACE_S 600.0

static void workers_gone(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h)
{
    const double t0 = fsgd_clock_s(), until = t0 + (s->workers_failed ? WORKERS_FAILED_GRACE_S : WORKERS_DONE_GRACE_S);
    double said = t0;
    pid_t r_pid = 0;
    int st = 0;
    while (fsgd_clock_s() < until && !signalled(h) && (r_pid = waitpid(s->agg, &st, WNOHANG)) == 0) {
        nap_ms(20);
        if (fsgd_clock_s() - said >= 10) {
            said = fsgd_clock_s();
            say(h, 0, "run: every worker has finished; waiting %.0f s for the aggregator to write the model (stopped "
                      "after %.0f s)", said - t0, until - t0);
        }
    }
    if (r_pid == s->agg) {
        s->pids[0] = 0;
        s->agg_status = exit_status(st);
    } else if (!signalled(h)) {
        say(h, 1, "run: every worker has exited; stopping the aggregator");
        fsgd_supervisor_stop(s, h, s->pids, 1, s->agg, NULL);
        s->agg_status = s->internal_status;
    }
}

void fsgd_supervisor_watch(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h)
{
    double t0 = fsgd_clock_s();
    s->agg_status = -1;
    s->restarts = 0;
    s->workers_alive = s->W;
    s->workers_failed = 0;
    s->interrupted = 0;
    while (s->agg_status < 0) {
        if (signalled(h)) {
            s->interrupted = signalled(h);
            break;
        }
        if (h->tick)
            h->tick(h->ctx, fsgd_clock_s() - t0);
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0) {
            nap_ms(50);
            continue;
        }
        if (pid == s->agg) {
            aggregator_exited(s, h, st);
            continue;
        }
        if (shard_exited(s, h, pid, st))
            continue;
        worker_exited(s, h, pid, st);
        if (s->workers_alive == 0)
            workers_gone(s, h);
    }
}

void fsgd_supervisor_tear_down(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h)
{
    int n_pids = s->W + s->S;
    if (s->interrupted) {
        say(h, 1, "run: interrupted by signal %d: stopping the aggregator and %d worker(s)", s->interrupted,
            s->workers_alive);
        fsgd_supervisor_stop(s, h, s->pids, n_pids, s->agg, NULL);
        return;
    }
    if (s->agg_status != 0) {
        fsgd_supervisor_stop(s, h, s->pids, 1, s->agg, NULL);
        fsgd_supervisor_stop(s, h, s->pids + s->W + 1, s->S - 1, 0, NULL); /* the other shards */
    }
    /* Workers (and the other shards) leave when they see the final model;
     * give them a moment, then stop them all together. */
    double deadline = fsgd_clock_s() + (s->agg_status == 0 ? 15 : 0);
    for (;;) {
        int any = 0;
        for (int i = 0; i < s->W + s->S - 1; i++)
            if (s->wp[i]) {
                int st;
                if (waitpid(s->wp[i], &st, WNOHANG) == s->wp[i])
                    s->wp[i] = 0;
                else
                    any = 1;
            }
        if (!any || fsgd_clock_s() > deadline || signalled(h))
            break;
        nap_ms(20);
    }
    fsgd_supervisor_stop(s, h, s->wp, s->W + s->S - 1, 0, NULL); /* the workers, then the shards after them */
    if (signalled(h))
        s->interrupted = signalled(h);
}
