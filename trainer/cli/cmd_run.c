/* fsgd run: everything a distributed job needs in one command. With no
 * brokers it starts librdkafka's in-process Kafka cluster (the embedded
 * default), creates the topics, loads the data with the producer, then
 * starts the aggregator and W workers as processes of this same binary and
 * supervises them: a worker that dies is left to the barrier timeout and the
 * consumer group; an aggregator killed by a signal is restarted from its
 * checkpoint.
 *
 * It owns what it starts: on SIGINT/SIGTERM it sends SIGTERM to every child,
 * waits for all of them together for a grace period, SIGKILLs the rest and
 * exits 128 + the signal; each child asks the kernel for SIGTERM when fsgd
 * run dies (PR_SET_PDEATHSIG), so a `kill -9` of fsgd run leaves nothing. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/auth.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/outfile.h"

/* Worker processes per core at most: each runs librdkafka's threads and a
 * busy poll loop; beyond a few per core they only slow each other down. */
#define WORKERS_PER_CORE 8
/* Seconds the children get to exit after SIGTERM before SIGKILL. */
#define STOP_GRACE_S 5.0

static const char usage[] =
    "usage: fsgd run [JOB.yaml] [--data FILE] [--test FILE] [--workers N] [--brokers LIST] [options]\n"
    "Runs the producer, N worker processes and the aggregator of a job. Without --brokers an embedded\n"
    "Kafka-protocol cluster (librdkafka's mock) runs inside this process; its address is printed.\n"
    "Run-only options:\n"
    "  --broker-only        start the embedded cluster (and the job's topics), print its address, wait;\n"
    "                       with --brokers: create the job's topics there, print the address, exit\n"
    "  --no-produce         train on what is already in NAME.data (e.g. written with kcat)\n"
    "  --fresh              delete the job's checkpoint (--checkpoint, or OUT.ckpt) if one exists and start over\n"
    "  --resume             continue from the job's existing checkpoint (the same data must be produced)\n"
    "                       (neither: an existing checkpoint is an error, never deleted silently)\n"
    "  --fault SPEC         embedded cluster fault injection, repeatable:\n"
    "                       broker-down:after=SEC,for=SEC[,broker=ID]\n"
    "                       produce-delay:after=SEC,rtt=MS[,count=N][,broker=ID]  (default broker 2 leads NAME.grads)\n"
    "  --metrics-port PORT  Prometheus metrics of every process: the aggregator on PORT, worker i on PORT+i\n"
    "                       (http://ADDR:PORT/metrics; 0: each picks a free port and prints it)\n"
    "  --metrics-addr ADDR  address they serve on (default 127.0.0.1; 0.0.0.0 for every interface)";

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct fault {
    int kind; /* 1 broker-down, 2 produce-delay */
    double after, dur;
    int broker, rtt, count;
    int state; /* 0 pending, 1 active, 2 done */
} fault_t;

static int parse_fault(const char *spec, fault_t *f)
{
    memset(f, 0, sizeof *f);
    f->broker = -1;
    f->count = 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *colon = strchr(buf, ':');
    if (colon)
        *colon = '\0';
    if (!strcmp(buf, "broker-down"))
        f->kind = 1;
    else if (!strcmp(buf, "produce-delay"))
        f->kind = 2;
    else
        return -1;
    char *save = NULL;
    for (char *t = colon ? strtok_r(colon + 1, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq)
            return -1;
        *eq++ = '\0';
        if (!strcmp(t, "after"))
            f->after = atof(eq);
        else if (!strcmp(t, "for"))
            f->dur = atof(eq);
        else if (!strcmp(t, "broker"))
            f->broker = atoi(eq);
        else if (!strcmp(t, "rtt"))
            f->rtt = atoi(eq);
        else if (!strcmp(t, "count"))
            f->count = atoi(eq);
        else
            return -1;
    }
    if (f->broker < 0)
        f->broker = f->kind == 1 ? 1 : 2;
    return 0;
}

/* --metrics-port/--metrics-addr for the processes spawn starts (port -1: none). */
static const char *metrics_addr;
static int metrics_port = -1;

/* The job key file the processes spawn starts read (NULL: none), and
 * whether they must accept rows without its tag. */
static const char *spawn_key;
static int spawn_unsigned_rows;

/* A key fsgd run made for its own job: removed when fsgd run ends (a
 * kill -9 leaves it, mode 600 in a mode 700 folder under /tmp). */
static char made_key_dir[64], made_key[96];

static void remove_made_key(void)
{
    if (made_key[0])
        unlink(made_key);
    if (made_key_dir[0])
        rmdir(made_key_dir);
}

static pid_t spawn(const char *role, int argc, char **argv, const char *brokers, const char *ckpt, int id)
{
    char **av = calloc((size_t)argc + 16, sizeof *av);
    if (!av)
        return -1;
    int n = 0;
    av[n++] = "fsgd";
    av[n++] = (char *)role;
    for (int i = 1; i < argc; i++)
        av[n++] = argv[i];
    av[n++] = "--brokers";
    av[n++] = (char *)brokers;
    char idbuf[16];
    if (id > 0) {
        snprintf(idbuf, sizeof idbuf, "%d", id);
        av[n++] = "--id";
        av[n++] = idbuf;
    }
    if (ckpt) {
        av[n++] = "--checkpoint";
        av[n++] = (char *)ckpt;
    }
    if (spawn_key) {
        av[n++] = "--job-key-file";
        av[n++] = (char *)spawn_key;
    }
    if (spawn_unsigned_rows)
        av[n++] = "--unsigned-rows";
    char portbuf[16];
    if (metrics_port >= 0) { /* the aggregator on the port, worker i on port + i */
        snprintf(portbuf, sizeof portbuf, "%d", metrics_port ? metrics_port + (id > 0 ? id : 0) : 0);
        av[n++] = "--metrics-port";
        av[n++] = portbuf;
        av[n++] = "--metrics-addr";
        av[n++] = (char *)metrics_addr;
    }
    av[n] = NULL;
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* Die with fsgd run, even by SIGKILL. The parent may have died
         * between fork and prctl: then we are already orphaned. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(FSGD_EXIT_SIGTERM);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv("/proc/self/exe", av);
        _exit(127);
    }
    free(av);
    return pid;
}

/* A real cluster: the job's topics with their settings (and leaders), and
 * with check_unused a name no earlier job used: its model topic empty, its
 * data topic too when this run loads the data (data_too). */
static int real_topics(const fsgd_job_t *job, const char *brokers, int P, int check_unused, int data_too,
                       char *err, size_t errsz)
{
    rd_kafka_t *rk = fsgd_kbus_client(FSGD_KCLIENT_PRODUCER, brokers, NULL, err, errsz);
    if (!rk)
        return FSGD_E_KAFKA;
    int rc = fsgd_dist_topics_create(job, rk, P, err, errsz);
    if (!rc && check_unused)
        rc = fsgd_dist_topics_unused(job, rk, data_too, err, errsz);
    rd_kafka_destroy(rk);
    return rc;
}

/* Sends SIGTERM to every pid (0 entries are skipped), waits for all of them
 * at once for STOP_GRACE_S, SIGKILLs what is left and reaps it. pids are
 * zeroed as they are reaped; *agg_status gets the status of agg if it was
 * among them. */
static void stop_all(pid_t *pids, int n, pid_t agg, int *agg_status)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGTERM);
    double deadline = now_s() + STOP_GRACE_S;
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
                    *agg_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                pids[i] = 0;
            } else {
                left++;
            }
        }
        if (!left)
            return;
        if (!killed && now_s() > deadline) {
            fsgd_cli_error("run: %d process(es) still running %.0f s after SIGTERM: sending SIGKILL", left,
                           STOP_GRACE_S);
            for (int i = 0; i < n; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            killed = 1;
        }
        struct timespec ns = {0, 20 * 1000000};
        nanosleep(&ns, NULL);
    }
}

/* Stops the workers started ahead of the aggregator when the job cannot
 * start after all (the data failed to load, a signal). */
static void abort_start(pid_t *wp, int W, pid_t *pids, fsgd_kmock_t *mock)
{
    stop_all(wp, W, 0, NULL);
    free(pids);
    fsgd_kmock_destroy(mock);
}

int fsgd_cmd_run(int argc, char **argv)
{
    int broker_only = dcli_take(&argc, argv, "--broker-only", 0, NULL, NULL) != NULL;
    int no_produce = dcli_take(&argc, argv, "--no-produce", 0, NULL, NULL) != NULL;
    int fresh = dcli_take(&argc, argv, "--fresh", 0, NULL, NULL) != NULL;
    int resume = dcli_take(&argc, argv, "--resume", 0, NULL, NULL) != NULL;
    const char *fault_specs[16];
    int n_faults = 0;
    dcli_take(&argc, argv, "--fault", 1, fault_specs, &n_faults);
    fault_t faults[16];
    for (int i = 0; i < n_faults; i++)
        if (parse_fault(fault_specs[i], &faults[i]) < 0) {
            fsgd_cli_error("run: bad --fault '%s'\n%s", fault_specs[i], usage);
            return FSGD_EXIT_USAGE;
        }
    int rc = dcli_metrics(&argc, argv, "run", 0, &metrics_addr, &metrics_port);
    if (rc)
        return rc;
    fsgd_job_t job;
    rc = dcli_job(argc, argv, usage, &job);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (metrics_port > 0 && metrics_port + job.workers > 65535) {
        fsgd_cli_error("run: --metrics-port %d: worker %d would need port %d (at most 65535)", metrics_port,
                       job.workers, metrics_port + job.workers);
        return FSGD_EXIT_USAGE;
    }
    char err[FSGD_OUTFILE_PATH_MAX + 512];
    if (!broker_only && !no_produce && !job.data[0]) {
        fsgd_cli_error("run: no data: give --data FILE, or --no-produce to use what is in %s.data", job.name);
        return FSGD_EXIT_USAGE;
    }
    if (fresh && resume) {
        fsgd_cli_error("run: --fresh and --resume contradict each other");
        return FSGD_EXIT_USAGE;
    }
    if (fsgd_kbus_set_options(job.kafka, err, sizeof err) < 0) {
        fsgd_cli_error("run: %s", err);
        return FSGD_EXIT_USAGE;
    }
    char ckpt[FSGD_JOB_PATH_MAX + 16];
    int ckpt_tmp = 0; /* a per-run path nobody can resume from: removed at the end */
    if (job.checkpoint[0])
        snprintf(ckpt, sizeof ckpt, "%s", job.checkpoint);
    else if (job.out[0])
        snprintf(ckpt, sizeof ckpt, "%s.ckpt", job.out);
    else {
        snprintf(ckpt, sizeof ckpt, "/tmp/fsgd-%s-%d.ckpt", job.name, (int)getpid());
        ckpt_tmp = 1;
    }
    /* Outputs are checked before the broker starts and the data is loaded:
     * an unwritable --out fails now, not after the last epoch. */
    if (!broker_only) {
        const fsgd_cli_path_t wr[] = {{"--out", job.out}, {"--metrics-json", job.metrics_json},
                                      {job.checkpoint[0] ? "--checkpoint" : "checkpoint (OUT.ckpt)", ckpt}};
        const fsgd_cli_path_t rd[] = {{"--data", job.data}, {"--test", job.test}, {"job file", job.job_file},
                                      {"--job-key-file", job.job_key_file}};
        if ((rc = fsgd_cli_check_distinct("run", wr, 3, rd, 4)) != 0)
            return rc;
        const char *outs[] = {job.out, job.metrics_json, ckpt};
        if ((rc = fsgd_cli_check_outputs("run", outs, 3)) != 0)
            return rc;
        struct stat cs;
        if (lstat(ckpt, &cs) == 0 && fsgd_ckpt_probe(ckpt) < 0) {
            /* only a file fsgd made is resumed from or deleted */
            fsgd_cli_error("run: checkpoint path '%s' holds a file that is not an fsgd checkpoint (no FSGDCKPT "
                           "header): fsgd will neither resume from it nor delete it; give --checkpoint another path",
                           ckpt);
            return FSGD_EXIT_USAGE;
        }
        if (lstat(ckpt, &cs) == 0) {
            if (fresh || resume) {
                /* removed (--fresh) once everything else has been checked */
            } else {
                fsgd_cli_error("run: checkpoint '%s' exists (left by an interrupted or failed run of job '%s'): "
                               "--resume to continue from it, or --fresh to delete it and start over",
                               ckpt, job.name);
                return FSGD_EXIT_USAGE;
            }
        } else if (resume) {
            fsgd_cli_error("run: --resume: there is no checkpoint '%s'", ckpt);
            return FSGD_EXIT_USAGE;
        }
    }
    fsgd_kmock_t *mock = NULL;
    char brokers[512];
    snprintf(brokers, sizeof brokers, "%s", job.brokers);
    int P = job.partitions;
    struct stat sb;
    uint64_t bytes = (!no_produce && job.data[0] && stat(job.data, &sb) == 0) ? (uint64_t)sb.st_size : 0;
    if (!brokers[0] && (job.replication_factor > 1 || job.min_insync_replicas > 1)) {
        /* refused, not ignored: the user asked for a durability it cannot give */
        fsgd_cli_error("run: the embedded cluster keeps one replica of each topic: --replication-factor %d and "
                       "--min-insync-replicas %d apply to a real cluster (--brokers HOST:PORT)",
                       job.replication_factor, job.min_insync_replicas);
        return FSGD_EXIT_USAGE;
    }
    if (!brokers[0]) {
        int need = fsgd_produce_partitions_needed(bytes);
        if (P == 0)
            P = need > 12 ? need : 12;
        else if (P < need) {
            fsgd_cli_error("run: %s is %.1f MB; the embedded cluster keeps at most 5 MiB per partition, so it "
                           "needs at least %d partitions (got --partitions %d)",
                           job.data, bytes / 1e6, need, P);
            return FSGD_EXIT_USAGE;
        }
        job.max_model_weights = FSGD_EMBEDDED_MAX_MODEL_WEIGHTS;
        char maxw[32];
        snprintf(maxw, sizeof maxw, "%llu", (unsigned long long)job.max_model_weights);
        setenv("FSGD_MAX_MODEL_WEIGHTS", maxw, 1); /* read by the aggregator we spawn */
        uint64_t weights = job.dim + (job.bias ? 1 : 0);
        if (job.dim && weights > job.max_model_weights) {
            fsgd_cli_error("run: " FSGD_EMBEDDED_MODEL_LIMIT_MSG, (unsigned long long)weights, weights * 4.0 / 1048576.0,
                           (unsigned long long)job.max_model_weights);
            return FSGD_EXIT_USAGE;
        }
    } else if (P == 0) {
        P = 12;
    }
    if (!broker_only) {
        /* What the job and the machine can hold, before anything starts. */
        int P_job = P;
        if (brokers[0] && no_produce) {
            rd_kafka_t *rk = fsgd_kbus_client(FSGD_KCLIENT_CONSUMER, brokers, NULL, err, sizeof err);
            char t[160];
            fsgd_kbus_topic(t, sizeof t, job.name, "data");
            int n = rk ? fsgd_kbus_partitions(rk, t, 10000, err, sizeof err) : -1;
            if (rk)
                rd_kafka_destroy(rk);
            if (n < 0) {
                fsgd_cli_error("run: %s", err);
                return FSGD_EXIT_BROKER;
            }
            P_job = n;
        }
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        long max_w = (cores > 0 ? cores : 1) * WORKERS_PER_CORE;
        if (job.workers > P_job) {
            fsgd_cli_error("run: --workers %d: %s.data has %d partitions, and a worker beyond that gets no rows "
                           "(at most %d; --partitions N raises it)",
                           job.workers, job.name, P_job, P_job);
            return FSGD_EXIT_USAGE;
        }
        if (job.workers > max_w) {
            fsgd_cli_error("run: --workers %d: this machine has %ld cores; at most %ld worker processes (%d per core)",
                           job.workers, cores, max_w, WORKERS_PER_CORE);
            return FSGD_EXIT_USAGE;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (!brokers[0]) {
        mock = fsgd_kmock_new(3, err, sizeof err);
        if (!mock) {
            fsgd_cli_error("run: %s", err);
            return FSGD_EXIT_BROKER;
        }
        snprintf(brokers, sizeof brokers, "%s", fsgd_kmock_bootstraps(mock));
        static const char *sfx[] = {"data", "grads", "model", "ctl"};
        for (int i = 0; i < 4 && !rc; i++) {
            char t[128];
            fsgd_kbus_topic(t, sizeof t, job.name, sfx[i]);
            /* grads led by broker 2, model by 3 (the fault tests name them);
             * data keeps the mock's own spread over the brokers: setting a
             * leader costs the mock a second per partition */
            rc = fsgd_kmock_topic(mock, t, i == 0 ? P : 1, i == 0 ? -1 : i, err, sizeof err);
        }
        if (rc) {
            fsgd_cli_error("run: %s", err);
            fsgd_kmock_destroy(mock);
            return fsgd_cli_status(rc);
        }
        printf("fsgd: embedded Kafka cluster at %s (topics %s.data with %d partitions, .grads, .model, .ctl)\n",
               brokers, job.name, P);
        fflush(stdout);
    } else {
        if (P == 0)
            P = 12;
        if ((rc = dcli_connect(&job, "run")) != 0)
            return rc;
        /* (a resumed job continues on its own topics) */
        rc = real_topics(&job, brokers, P, !broker_only && !resume, !broker_only && !no_produce, err, sizeof err);
        if (rc) {
            fsgd_cli_error("run: %s", err);
            return fsgd_cli_status(rc);
        }
        if (broker_only) { /* the topics are there: load them with kcat or fsgd produce */
            printf("brokers=%s\n", brokers);
            return 0;
        }
    }
    if (broker_only) {
        printf("brokers=%s\n", brokers);
        fflush(stdout);
        while (!got_signal)
            pause();
        fsgd_kmock_destroy(mock);
        return 0;
    }
    /* Every message of the job is authenticated: with the given key, or one
     * made here for this run, which only its processes read. */
    if (!job.job_key_file[0]) {
        snprintf(made_key_dir, sizeof made_key_dir, "/tmp/fsgd-key-XXXXXX");
        if (!mkdtemp(made_key_dir)) {
            made_key_dir[0] = '\0';
            fsgd_cli_error("run: cannot make a folder for the job key: %s", strerror(errno));
            fsgd_kmock_destroy(mock);
            return FSGD_EXIT_IO;
        }
        atexit(remove_made_key);
        snprintf(made_key, sizeof made_key, "%s/job.key", made_key_dir);
        if ((rc = fsgd_auth_key_generate(made_key, err, sizeof err)) < 0) {
            made_key[0] = '\0';
            fsgd_cli_error("run: %s", err);
            fsgd_kmock_destroy(mock);
            return fsgd_cli_status(rc);
        }
        snprintf(job.job_key_file, sizeof job.job_key_file, "%s", made_key);
        /* rows already on NAME.data (--no-produce) were written before this
         * key existed: they cannot carry its tag */
        if (no_produce && !job.unsigned_rows) {
            job.unsigned_rows = 1;
            spawn_unsigned_rows = 1;
        }
    }
    if ((rc = dcli_auth(&job, "run")) != 0) {
        fsgd_kmock_destroy(mock);
        return rc;
    }
    spawn_key = job.job_key_file;
    /* pids[0] is the aggregator, pids[1..W] the workers (0: exited). The
     * workers start first: joining the consumer group takes seconds (the
     * coordinator's initial rebalance delay: 3 s on the embedded cluster and
     * by default on Kafka), and that wait overlaps loading the data. */
    int W = job.workers;
    pid_t *pids = calloc((size_t)W + 1, sizeof *pids);
    if (!pids) {
        fsgd_cli_error("run: out of memory");
        fsgd_kmock_destroy(mock);
        return FSGD_EXIT_INTERNAL;
    }
    pid_t *wp = pids + 1;
    for (int i = 0; i < W; i++) {
        wp[i] = spawn("worker", argc, argv, brokers, NULL, i + 1);
        printf("fsgd: worker %d pid %d\n", i + 1, (int)wp[i]);
    }
    fflush(stdout);
    /* A resumed job on real brokers continues on the rows its topic holds;
     * the embedded cluster starts empty and needs them again. */
    if (!no_produce && resume && !mock && !job.quiet)
        fprintf(stderr, "fsgd: run: --resume: training on the rows already in %s.data\n", job.name);
    if (!no_produce && !(resume && !mock)) {
        fsgd_produce_stats_t ps;
        rc = fsgd_produce_file(&job, brokers, job.data, mock ? 0 : P, &ps, NULL, NULL, err, sizeof err);
        if (rc < 0) {
            fsgd_cli_error("run: produce: %s", err);
            abort_start(wp, W, pids, mock);
            return fsgd_cli_status(rc);
        }
        if (!job.quiet)
            fprintf(stderr, "fsgd: produced %llu rows (%.1f MB) into %s.data in %.2f s\n",
                    (unsigned long long)ps.rows, ps.bytes / 1e6, job.name, ps.seconds);
        dcli_bad_rows(job.data, ps.bad_rows, ps.first_bad);
    }
    struct stat cs;
    if (lstat(ckpt, &cs) == 0 && fresh) {
        if (fsgd_ckpt_probe(ckpt) < 0) { /* replaced since the check: still never delete it */
            fsgd_cli_error("run: '%s' is no longer an fsgd checkpoint: not deleting it", ckpt);
            abort_start(wp, W, pids, mock);
            return FSGD_EXIT_USAGE;
        }
        if (unlink(ckpt) != 0) {
            fsgd_cli_error("run: cannot remove checkpoint '%s': %s", ckpt, strerror(errno));
            abort_start(wp, W, pids, mock);
            return FSGD_EXIT_IO;
        }
        fprintf(stderr, "fsgd: run: removed checkpoint %s (--fresh)\n", ckpt);
    } else if (resume) {
        fprintf(stderr, "fsgd: run: resuming from checkpoint %s (--resume)\n", ckpt);
    }
    if (got_signal) {
        fsgd_cli_error("run: interrupted by signal %d before the job started", (int)got_signal);
        abort_start(wp, W, pids, mock);
        return 128 + (int)got_signal;
    }

    pid_t agg = pids[0] = spawn("aggregator", argc, argv, brokers, ckpt, 0);
    printf("fsgd: aggregator pid %d\n", (int)agg);
    fflush(stdout);
    double t0 = now_s();
    int agg_status = -1, restarts = 0, workers_alive = W, interrupted = 0;
    while (agg_status < 0) {
        if (got_signal) {
            interrupted = (int)got_signal;
            break;
        }
        double t = now_s() - t0;
        for (int i = 0; i < n_faults && mock; i++) {
            fault_t *f = &faults[i];
            if (f->state == 0 && t >= f->after) {
                if (f->kind == 1) {
                    fsgd_kmock_broker_down(mock, f->broker, 1);
                    fprintf(stderr, "fsgd: fault: broker %d down for %.1f s\n", f->broker, f->dur);
                } else {
                    fsgd_kmock_delay_produce(mock, f->broker, f->count, f->rtt);
                    fprintf(stderr, "fsgd: fault: next %d produce replies of broker %d delayed %d ms\n", f->count,
                            f->broker, f->rtt);
                }
                f->state = 1;
            } else if (f->state == 1 && f->kind == 1 && t >= f->after + f->dur) {
                fsgd_kmock_broker_down(mock, f->broker, 0);
                fprintf(stderr, "fsgd: fault: broker %d up\n", f->broker);
                f->state = 2;
            }
        }
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0) {
            struct timespec ns = {0, 50 * 1000000};
            nanosleep(&ns, NULL);
            continue;
        }
        if (pid == agg) {
            /* A crash (or kill -9) is restarted from the checkpoint; SIGTERM or
             * SIGINT mean someone stopped it on purpose. */
            if (WIFSIGNALED(st) && WTERMSIG(st) != SIGTERM && WTERMSIG(st) != SIGINT && restarts < 5) {
                restarts++;
                fprintf(stderr, "fsgd: aggregator killed by signal %d; restarting from %s\n", WTERMSIG(st), ckpt);
                agg = pids[0] = spawn("aggregator", argc, argv, brokers, ckpt, 0);
                printf("fsgd: aggregator pid %d\n", (int)agg);
                fflush(stdout);
            } else {
                pids[0] = 0;
                agg_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
            continue;
        }
        for (int i = 0; i < W; i++)
            if (wp[i] == pid) {
                wp[i] = 0;
                workers_alive--;
                if (WIFSIGNALED(st))
                    fprintf(stderr, "fsgd: worker %d (pid %d) killed by signal %d; the others carry on\n", i + 1,
                            (int)pid, WTERMSIG(st));
                else if (WEXITSTATUS(st) == FSGD_EXIT_SIGTERM || WEXITSTATUS(st) == FSGD_EXIT_SIGINT)
                    fprintf(stderr, "fsgd: worker %d (pid %d) stopped by a signal (status %d); the others carry on\n",
                            i + 1, (int)pid, WEXITSTATUS(st));
                else if (WEXITSTATUS(st))
                    fprintf(stderr, "fsgd: worker %d (pid %d) failed with status %d\n", i + 1, (int)pid,
                            WEXITSTATUS(st));
            }
        if (workers_alive == 0) {
            /* Workers leave after the final model: give the aggregator a
             * moment to finish writing before calling it a failure. */
            double until = now_s() + 10;
            pid_t r = 0;
            while (now_s() < until && !got_signal && (r = waitpid(agg, &st, WNOHANG)) == 0) {
                struct timespec ns = {0, 20 * 1000000};
                nanosleep(&ns, NULL);
            }
            if (r == agg) {
                pids[0] = 0;
                agg_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            } else if (!got_signal) {
                fsgd_cli_error("run: every worker has exited; stopping the aggregator");
                stop_all(pids, 1, agg, NULL);
                agg_status = FSGD_EXIT_INTERNAL;
            }
        }
    }
    if (interrupted) {
        fsgd_cli_error("run: interrupted by signal %d: stopping the aggregator and %d worker(s)", interrupted,
                       workers_alive);
        stop_all(pids, W + 1, agg, NULL);
    } else {
        if (agg_status != 0)
            stop_all(pids, 1, agg, NULL);
        /* Workers leave when they see the final model; give them a moment,
         * then stop them all together. */
        double deadline = now_s() + (agg_status == 0 ? 15 : 0);
        for (;;) {
            int any = 0;
            for (int i = 0; i < W; i++)
                if (wp[i]) {
                    int st;
                    if (waitpid(wp[i], &st, WNOHANG) == wp[i])
                        wp[i] = 0;
                    else
                        any = 1;
                }
            if (!any || now_s() > deadline || got_signal)
                break;
            struct timespec ns = {0, 20 * 1000000};
            nanosleep(&ns, NULL);
        }
        stop_all(wp, W, 0, NULL);
        if (got_signal)
            interrupted = (int)got_signal;
    }
    free(pids);
    fsgd_kmock_destroy(mock);
    int ckpt_left = lstat(ckpt, &cs) == 0;
    if (ckpt_left && ckpt_tmp && fsgd_ckpt_probe(ckpt) > 0)
        unlink(ckpt);
    else if (ckpt_left && (interrupted || agg_status != 0))
        fprintf(stderr, "fsgd: run: checkpoint kept at %s: fsgd run --resume continues from it, --fresh starts over\n",
                ckpt);
    if (interrupted)
        return 128 + interrupted;
    if (agg_status != 0) {
        fsgd_cli_error("run: aggregator failed (status %d)", agg_status);
        /* its own status says why (data, broker, ...); a crash is internal */
        return agg_status > 0 && agg_status < 128 ? agg_status : FSGD_EXIT_INTERNAL;
    }
    return 0;
}
