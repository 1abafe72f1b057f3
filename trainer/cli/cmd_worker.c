/* fsgd worker: one worker of a distributed job (usually started by fsgd run
 * or one container per worker with docker compose). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/dist.h"

static volatile int stop_flag;
static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static const char usage[] = "usage: fsgd worker [JOB.yaml] --brokers HOST:PORT [--name JOB] [--id N] [options]\n"
                            "Joins the job's consumer group on NAME.data, computes gradients of the rows it is\n"
                            "given, sends them to NAME.grads and follows NAME.model until the job ends.";

int fsgd_cmd_worker(int argc, char **argv)
{
    const char *id = dcli_take(&argc, argv, "--id", 1, NULL, NULL);
    fsgd_job_t job;
    int rc = dcli_job(argc, argv, usage, &job);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!job.brokers[0]) {
        fsgd_cli_error("worker: --brokers is required (fsgd run starts an embedded cluster and passes it)");
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    fsgd_worker_stats_t st;
    char err[512];
    rc = fsgd_worker_run(&job, id ? (uint32_t)strtoul(id, NULL, 10) : 0, &stop_flag, &st, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("worker: %s", err);
        return fsgd_cli_status(rc);
    }
    if (!job.quiet)
        fprintf(stderr,
                "fsgd: worker%s%s done: %llu steps, %llu rows, up %llu B, down %llu B, grad %.3f s, encode %.3f s, "
                "wait %.3f s, dropped %llu duplicate and %llu corrupt model messages, resyncs %llu, "
                "replica mismatches %llu, residual restored %llu / discarded %llu, model hop p50 %.3f ms "
                "p99 %.3f ms\n",
                id ? " " : "", id ? id : "", (unsigned long long)st.steps_sent, (unsigned long long)st.rows,
                (unsigned long long)st.bytes_up, (unsigned long long)st.bytes_down, st.t_grad, st.t_encode, st.t_wait,
                (unsigned long long)st.duplicates, (unsigned long long)st.corrupt, (unsigned long long)st.resyncs,
                (unsigned long long)st.replica_mismatch, (unsigned long long)st.ef_undone,
                (unsigned long long)st.ef_discarded, st.hop_model_ms_p50, st.hop_model_ms_p99);
    return 0;
}
