/* The processes of one distributed job on this machine (what fsgd run
 * starts): the aggregator, its shards and the workers, watched until the
 * job ends. A crashed aggregator (a signal other than SIGTERM or SIGINT) is
 * started again from its checkpoint, a sharded job's every shard from the
 * newest step they all have a checkpoint of, at most
 * FSGD_SUPERVISOR_RESTARTS times; a worker that leaves is reported and the
 * others carry on; a signal to the supervisor, or the aggregator's end,
 * stops them all: SIGTERM, a grace period for all of them together, then
 * SIGKILL. The caller starts the processes (it knows their command lines)
 * and says what the supervisor reports; the supervisor never prints. */
#ifndef FSGD_SUPERVISOR_H
#define FSGD_SUPERVISOR_H

#include <signal.h>
#include <sys/types.h>

#define FSGD_SUPERVISOR_RESTARTS 5

typedef struct fsgd_supervisor_hooks {
    /* Starts shard `shard` (0: the aggregator) again from the checkpoints'
     * step resume_step (-1: none of them has one: from the start; a job of
     * one shard: -1, its own checkpoint). Returns its pid, or -1. */
    pid_t (*spawn_shard)(void *ctx, int shard, long long resume_step);
    /* The newest step every shard has a checkpoint of, or -1. */
    long long (*common_step)(void *ctx);
    /* Each turn of the watch, seconds after it began (faults injected in
     * time); NULL: none. */
    void (*tick)(void *ctx, double seconds);
    /* One line to tell the user (no "fsgd: " prefix, no newline); error:
     * the line says why the job fails. */
    void (*say)(void *ctx, int error, const char *line);
    void *ctx;
    /* Set by the caller's signal handler: nonzero stops the watch. */
    const volatile sig_atomic_t *signal;
} fsgd_supervisor_hooks_t;

/* pids[0] is the aggregator (shard 0), pids[1 .. W] the workers (wp),
 * pids[W + i] shard i of S > 1; 0 marks one that has exited. */
typedef struct fsgd_supervisor {
    int W, S;
    pid_t *pids, *wp;
    pid_t agg;
    const char *ckpt;   /* where the aggregator's checkpoint is (said on a restart) */
    double grace_s;     /* SIGTERM to SIGKILL */
    int agg_status;     /* the aggregator's exit status; -1 while it runs */
    int restarts;       /* aggregator restarts so far */
    int workers_alive;
    int workers_failed; /* workers that exited with an error or a signal */
    int interrupted;    /* the signal that stopped the watch, or 0 */
    int internal_status; /* the job's status when it fails without the aggregator's own (every worker gone) */
} fsgd_supervisor_t;

/* Sends SIGTERM to every pid (0 entries are skipped), waits for all of
 * them at once for s->grace_s, SIGKILLs what is left and reaps it. pids are
 * zeroed as they are reaped; *agg_status (may be NULL) gets the status of
 * agg if it was among them. */
void fsgd_supervisor_stop(const fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h, pid_t *pids, int n,
                          pid_t agg, int *agg_status);

/* Until the aggregator ends or a signal comes: a crashed aggregator
 * restarted, workers that leave reported, every worker gone waited on (the
 * aggregator writes its model after the workers leave). s->agg_status then
 * holds the aggregator's status, or s->interrupted the signal. */
void fsgd_supervisor_watch(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h);

/* After the watch: the workers and the other shards get a moment to leave
 * after a final model (none when the job failed or was interrupted), then
 * every process left is stopped. */
void fsgd_supervisor_tear_down(fsgd_supervisor_t *s, const fsgd_supervisor_hooks_t *h);

#endif
