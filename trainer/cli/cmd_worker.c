/* fsgd worker: one worker of a distributed job (usually started by fsgd run
 * or one container per worker with docker compose). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/kbus.h"
#include "fsgd/observe.h"

static volatile sig_atomic_t stop_flag;

/* The first SIGTERM/SIGINT stops the worker cleanly (it leaves the group
 * and says so on NAME.ctl); a second one, or one while the brokers are gone
 * and the clean exit hangs, ends it at once. */
static void on_signal(int sig)
{
    if (stop_flag)
        _exit(128 + sig);
    stop_flag = sig; /* the exit status says which signal stopped it */
}

/* Each step's stats to /metrics (a no-op without --metrics-port). */
static void on_step(void *ctx, const fsgd_worker_stats_t *s)
{
    fsgd_observe_worker_step(s);
}

static void on_log(void *ctx, const char *line)
{
    const char *id = ctx;
    fprintf(stderr, "fsgd: worker%s%s: %s\n", id ? " " : "", id ? id : "", line);
}

static const char usage[] = "usage: fsgd worker [JOB.yaml] --brokers HOST:PORT [--name JOB] [--id N] [options]\n"
                            "Joins the job's consumer group on NAME.data, computes gradients of the rows it is\n"
                            "given, sends them to NAME.grads and follows NAME.model until the job ends.\n"
                            "Worker-only options:\n"
                            "  --id N               this worker's id (default: random)\n" DCLI_METRICS_HELP;

/* The worker's closing line on stderr. */
static void print_done(const char *id, const fsgd_worker_stats_t *s)
{
    /* what a healthy run needs said; the rarer counters only when not 0
     * (the line was ~340 characters a worker: issue 40 item 9); the
     * metrics JSON and /metrics have every figure */
    char extra[256] = "";
    size_t n = 0;
    if (s->replayed)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", %llu replayed messages",
                              (unsigned long long)s->replayed);
    if (s->resyncs && n < sizeof extra)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", resyncs %llu", (unsigned long long)s->resyncs);
    if ((s->ef_undone || s->ef_discarded) && n < sizeof extra)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", residual restored %llu / discarded %llu",
                              (unsigned long long)s->ef_undone, (unsigned long long)s->ef_discarded);
    if (s->chain_restarts && n < sizeof extra)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", restarted at the model's positions %llu",
                              (unsigned long long)s->chain_restarts);
    if (s->prefetched && n < sizeof extra)
        snprintf(extra + n, sizeof extra - n, ", partitions read ahead %llu", (unsigned long long)s->prefetched);
    fprintf(stderr,
            "fsgd: worker%s%s done: %llu steps, %llu rows, up %llu B, down %llu B, wait %.2f s, dropped %llu "
            "duplicate, %llu corrupt and %llu unauthenticated model/ctl messages%s, replica mismatches %llu, "
            "model hop p50 %.2f ms\n",
            id ? " " : "", id ? id : "", (unsigned long long)s->steps_sent, (unsigned long long)s->rows,
            (unsigned long long)s->bytes_up, (unsigned long long)s->bytes_down, s->t_wait,
            (unsigned long long)s->duplicates, (unsigned long long)s->corrupt,
            (unsigned long long)s->unauthenticated, extra, (unsigned long long)s->replica_mismatch,
            s->hop_model_ms_p50);
}

int fsgd_cmd_worker(int argc, char **argv)
{
    const char *id = dcli_take(&argc, argv, "--id", 1, NULL, NULL);
    const char *maddr;
    int mport;
    int rc = dcli_metrics(&argc, argv, "worker", 0, &maddr, &mport);
    if (rc)
        return rc;
    fsgd_job_t job;
    rc = dcli_job(argc, argv, usage, &job);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!job.cluster.brokers[0]) {
        fsgd_cli_error("worker: --brokers is required (fsgd run starts an embedded cluster and passes it)");
        return FSGD_EXIT_USAGE;
    }
    unsigned long idv = 0;
    if (id) {
        char *end;
        errno = 0;
        idv = strtoul(id, &end, 10);
        if (!*id || *end || errno || idv == 0 || idv > 0xffffffffUL) {
            fsgd_cli_error("worker: --id expects a number 1..4294967295, got '%s'", id);
            return FSGD_EXIT_USAGE;
        }
    }
    char err[512];
    if ((rc = dcli_kafka(&job, "worker")) != 0)
        return rc;
    if ((rc = dcli_auth(&job, "worker")) != 0)
        return rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (mport >= 0) {
        int bound;
        if ((rc = fsgd_observe_start(FSGD_JOB_DIST(&job), "worker", (uint32_t)idv, maddr, mport, &bound, err, sizeof err)) < 0) {
            fsgd_cli_error("worker: %s", err);
            return fsgd_cli_status(rc);
        }
        fprintf(stderr, "fsgd: worker%s%s metrics at http://%s%s%s:%d/metrics\n", id ? " " : "", id ? id : "",
                strchr(maddr, ':') ? "[" : "", maddr, strchr(maddr, ':') ? "]" : "", bound);
    }
    /* Say what it waits for, and give up in bounded time on brokers that do
     * not answer (a worker used to look alive for minutes, saying nothing). */
    char who[48];
    snprintf(who, sizeof who, "worker%s%s", id ? " " : "", id ? id : "");
    if ((rc = dcli_connect(&job, who)) != 0)
        return rc;
    {
        char t[160];
        fsgd_kbus_topic(t, sizeof t, job.dist.name, "data");
        int n = dcli_partitions(job.cluster.brokers, t, job.cluster.connect_timeout_ms, err, sizeof err);
        if (n < 0) {
            fsgd_cli_error("worker: brokers %s: no answer about %s within %.1f s: %s", job.cluster.brokers, t,
                           job.cluster.connect_timeout_ms / 1e3, err);
            return FSGD_EXIT_BROKER;
        }
    }
    fsgd_worker_stats_t st = {0};
    fsgd_role_env_t env = {.stop = &stop_flag, .log = on_log, .ctx = (void *)id};
    if (!(env.bus = dcli_bus(job.cluster.brokers, "worker")))
        return FSGD_EXIT_BROKER;
    const fsgd_dist_job_t dj = fsgd_job_dist(&job);
    rc = fsgd_worker_run(&env, &dj, (uint32_t)idv, &st, on_step, err, sizeof err);
    fsgd_bus_destroy(env.bus);
    fsgd_observe_stop();
    if (rc < 0) {
        fsgd_cli_error("worker: %s", err);
        return fsgd_cli_status(rc);
    }
    if (!job.train.quiet)
        print_done(id, &st);
    /* stopped by a signal, even cleanly: 128 + it, as fsgd run documents */
    return stop_flag ? 128 + stop_flag : 0;
}
