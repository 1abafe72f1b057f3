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
#include <fcntl.h>
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
#include "fsgd/bus.h"
#include "fsgd/ckpt_set.h"
#include "fsgd/clock.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/outfile.h"
#include "fsgd/supervisor.h"
#include "fsgd/zsource.h"

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
    "                       (every file of the set: PATH[.shardI][.prev]; only files with the checkpoint header)\n"
    "  --resume             continue from the job's existing checkpoint (the same data must be produced); with\n"
    "                       shards, from the newest step every shard has (in PATH[.shardI] or its .prev)\n"
    "                       (neither: an existing checkpoint is an error, never deleted silently)\n"
    "                       exit 2: no checkpoint, one of another job, S or shard (files swapped), no step\n"
    "                       all shards have, a file there fsgd did not make; exit 3: a damaged checkpoint\n"
    "  --fault SPEC         embedded cluster fault injection, repeatable:\n"
    "                       broker-down:after=SEC,for=SEC[,broker=ID]\n"
    "                       produce-delay:after=SEC,rtt=MS[,count=N][,broker=ID]  (default broker 2 leads NAME.grads)\n"
    "  --metrics-port PORT  Prometheus metrics of every process: the aggregator on PORT, worker i on PORT+i,\n"
    "                       aggregator shard I > 0 (--shards) on PORT+W+I\n"
    "                       (http://ADDR:PORT/metrics; 0: each picks a free port and prints it)\n"
    "  --metrics-addr ADDR  address they serve on (default 127.0.0.1; 0.0.0.0 for every interface)";

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
    got_signal = sig; /* also a produce's stop flag: it stops at its next chunk */
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
/* The processes spawn starts talk to this process's embedded cluster: they
 * do not say they connect to it (fsgd run said where it is). */
static int spawn_embedded;
/* "--shard I/S" for the aggregator shard spawn starts next (NULL: none),
 * and its metrics port's offset (W + I) */
static const char *spawn_shard;
static int spawn_port_offset;

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
    if (spawn_shard) {
        av[n++] = "--shard";
        av[n++] = (char *)spawn_shard;
    }
    char portbuf[16];
    if (metrics_port >= 0) { /* the aggregator on the port, worker i on port + i */
        snprintf(portbuf, sizeof portbuf, "%d",
                 metrics_port ? metrics_port + (id > 0 ? id : 0) + (spawn_shard ? spawn_port_offset : 0) : 0);
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
        signal(SIGPIPE, SIG_DFL);
        /* fsgd run said how the job is authenticated, once: its roles do
         * not say it again (dcli_auth; issue 40 item 9) */
        setenv("FSGD_RUN_CHILD", spawn_embedded ? "embedded" : "1", 1);
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
    fsgd_bus_t *bus;
    fsgd_bus_client_t *c = dcli_client(brokers, FSGD_KCLIENT_PRODUCER, &bus, err, errsz);
    int rc = c ? fsgd_dist_topics_create(c, FSGD_JOB_DIST(job), P, err, errsz) : FSGD_E_KAFKA;
    if (!rc && check_unused)
        rc = fsgd_dist_topics_unused(c, FSGD_JOB_DIST(job), data_too, err, errsz);
    fsgd_bus_client_destroy(c);
    fsgd_bus_destroy(bus);
    return rc;
}

/* What the phases of fsgd run share. pids[0] is the aggregator, pids[1..W]
 * (wp) the workers; 0 marks one that has exited. */
typedef struct run {
    int argc;
    char **argv;
    int broker_only, no_produce, fresh, resume;
    fault_t faults[16];
    int n_faults;
    fsgd_job_t job;
    char err[FSGD_OUTFILE_PATH_MAX + 512];
    char ckpt[FSGD_JOB_PATH_MAX + 16];
    int ckpt_tmp; /* a per-run path nobody can resume from: removed at the end */
    long long resume_step; /* --resume: the newest step every shard has a checkpoint of */
    fsgd_kmock_t *mock;
    char brokers[512];
    int P; /* partitions of NAME.data */
    int W;
    int S;      /* aggregator shards: shard 0 is pids[0], shard i > 0 is pids[W + i] */
    int n_pids; /* W + S */
    pid_t *pids, *wp;
    int agg_go; /* the pipe that tells an aggregator started during the produce that the data is written; -1 */
    /* the processes once started: pids, wp, W and S are the same as above */
    fsgd_supervisor_t sup;
    fsgd_supervisor_hooks_t hooks;
} run_t;

/* A phase that lets the run go on returns RUN_ON; anything else is the
 * exit status of fsgd run. */
#define RUN_ON (-1)

/* Stops the workers started ahead of the aggregator when the job cannot
 * start after all (the data failed to load, a signal). */
static void abort_start(run_t *r)
{
    if (r->agg_go >= 0)
        close(r->agg_go); /* the aggregator waiting for the data: no data comes */
    r->agg_go = -1;
    fsgd_supervisor_stop(&r->sup, &r->hooks, r->pids, r->n_pids, r->sup.agg, NULL); /* pids[0]: the aggregator, when started */
    free(r->pids);
    fsgd_kmock_destroy(r->mock);
}

static int run_options(run_t *r)
{
    r->broker_only = dcli_take(&r->argc, r->argv, "--broker-only", 0, NULL, NULL) != NULL;
    r->no_produce = dcli_take(&r->argc, r->argv, "--no-produce", 0, NULL, NULL) != NULL;
    r->fresh = dcli_take(&r->argc, r->argv, "--fresh", 0, NULL, NULL) != NULL;
    r->resume = dcli_take(&r->argc, r->argv, "--resume", 0, NULL, NULL) != NULL;
    const char *fault_specs[16];
    dcli_take(&r->argc, r->argv, "--fault", 1, fault_specs, &r->n_faults);
    for (int i = 0; i < r->n_faults; i++)
        if (parse_fault(fault_specs[i], &r->faults[i]) < 0) {
            fsgd_cli_error("run: bad --fault '%s'\n%s", fault_specs[i], usage);
            return FSGD_EXIT_USAGE;
        }
    int rc = dcli_metrics(&r->argc, r->argv, "run", 0, &metrics_addr, &metrics_port);
    if (rc)
        return rc;
    fsgd_job_t *job = &r->job;
    rc = dcli_job_brief(r->argc, r->argv, usage, dcli_run_usage_brief, dcli_run_help_options, job);
    if (rc)
        return rc == 1 ? 0 : rc;
    int last_port = job->dist.workers + (job->train.shards > 1 ? job->train.shards - 1 : 0);
    if (metrics_port > 0 && metrics_port + last_port > 65535) {
        fsgd_cli_error("run: --metrics-port %d: its last process (%d workers, %d shards) would need port %d (at most "
                       "65535)", metrics_port, job->dist.workers, job->train.shards, metrics_port + last_port);
        return FSGD_EXIT_USAGE;
    }
    if (!r->broker_only && !r->no_produce && !job->train.data[0]) {
        fsgd_cli_error("run: no data: give --data FILE, or --no-produce to use what is in %s.data", job->dist.name);
        return FSGD_EXIT_USAGE;
    }
    if (r->fresh && r->resume) {
        fsgd_cli_error("run: --fresh and --resume contradict each other");
        return FSGD_EXIT_USAGE;
    }
    /* what the shards would refuse once the data is loaded, said now */
    if (!r->broker_only && fsgd_agg_shards_check(FSGD_JOB_DIST(job), r->err, sizeof r->err) < 0) {
        fsgd_cli_error("run: %s", r->err);
        return FSGD_EXIT_USAGE;
    }
    int krc = dcli_kafka(job, "run");
    return krc ? krc : RUN_ON;
}

static void run_pick_checkpoint(run_t *r)
{
    const fsgd_job_t *job = &r->job;
    if (job->dist.checkpoint[0])
        snprintf(r->ckpt, sizeof r->ckpt, "%s", job->dist.checkpoint);
    else if (job->train.out[0])
        snprintf(r->ckpt, sizeof r->ckpt, "%s.ckpt", job->train.out);
    else {
        snprintf(r->ckpt, sizeof r->ckpt, "/tmp/fsgd-%s-%d.ckpt", job->dist.name, (int)getpid());
        r->ckpt_tmp = 1;
    }
}

/* The first checkpoint of a set found (temporary names aside), of any
 * shard count: a stale set of a job with more shards needs --fresh too. */
typedef struct ckpt_scan {
    char first[FSGD_JOB_PATH_MAX + 64];
} ckpt_scan_t;

static int ckpt_scan_member(const char *path, int temp, void *arg)
{
    ckpt_scan_t *sc = arg;
    if (!temp && !sc->first[0] && fsgd_ckpt_probe(path) > 0)
        snprintf(sc->first, sizeof sc->first, "%s", path);
    return 0;
}

/* --fresh (and the end of a run on a per-run path): every file of the set
 * that fsgd made goes; one that is not a checkpoint is left. */
typedef struct ckpt_clear {
    int removed, failed, quiet;
} ckpt_clear_t;

static int ckpt_clear_member(const char *path, int temp, void *arg)
{
    ckpt_clear_t *c = arg;
    (void)temp;
    if (fsgd_ckpt_probe(path) <= 0) /* not fsgd's (refused up front where it is in this job's way): left */
        return 0;
    if (unlink(path) != 0) {
        if (!c->quiet)
            fsgd_cli_error("run: cannot remove checkpoint '%s': %s", path, strerror(errno));
        c->failed = FSGD_EXIT_IO;
        return 0;
    }
    c->removed++;
    if (!c->quiet)
        fprintf(stderr, "fsgd: run: removed checkpoint %s (--fresh)\n", path);
    return 0;
}

/* Outputs are checked before the broker starts and the data is loaded:
 * an unwritable --out fails now, not after the last epoch. */
static int run_check_outputs(run_t *r)
{
    const fsgd_job_t *job = &r->job;
    const char *ckpt = r->ckpt;
    const fsgd_cli_path_t rd[] = {{"--data", job->train.data}, {"--test", job->train.test}, {"job file", job->train.job_file},
                                  {"--job-key-file", job->cluster.job_key_file}, {"--init", job->train.init}};
    int rc;
    /* the names fsgd derives (shard I's files, each shard's .prev) too */
    int S = job->train.shards > 1 ? job->train.shards : 1;
    dcli_outputs_t wr;
    if (dcli_outputs(job, ckpt, S, 0, S - 1, &wr) < 0) {
        fsgd_cli_error("run: out of memory");
        return FSGD_EXIT_INTERNAL;
    }
    rc = fsgd_cli_check_distinct("run", wr.p, wr.n, rd, 5);
    dcli_outputs_free(&wr);
    if (rc != 0)
        return rc;
    const char *outs[] = {job->train.out, job->train.metrics_json, ckpt};
    if ((rc = fsgd_cli_check_outputs("run", outs, 3)) != 0)
        return rc;
    /* the inputs are read once the workers run: one that cannot be is said
     * before anything starts (a resumed job on real brokers reads no file) */
    const char *in[] = {r->no_produce || (r->resume && job->cluster.brokers[0]) || !strcmp(job->train.data, "-") ? "" : job->train.data,
                        job->train.test};
    const char *in_opt[] = {"--data", "--test"};
    for (int i = 0; i < 2; i++)
        if (in[i][0] && access(in[i], R_OK) != 0) {
            fsgd_cli_error("run: %s '%s': %s", in_opt[i], in[i], strerror(errno));
            return fsgd_cli_status(FSGD_E_IO);
        }
    /* the checkpoint is a set (PATH, PATH.shardI, each with .prev): every
     * file of it counts, not PATH alone */
    ckpt_scan_t sc = {0};
    if ((rc = fsgd_ckpt_set_each(ckpt, ckpt_scan_member, &sc, r->err, sizeof r->err)) < 0) {
        fsgd_cli_error("run: %s", r->err);
        return fsgd_cli_status(rc);
    }
    /* a file this job would write (PATH; with S shards PATH[.shardI][.prev])
     * that fsgd did not make: only a file fsgd made is resumed from or deleted */
    for (int i = 0; i < S; i++)
        for (int prev = 0; prev < (S > 1 ? 2 : 1); prev++) {
            char path[FSGD_JOB_PATH_MAX + 40];
            struct stat cs;
            fsgd_ckpt_set_path(ckpt, (unsigned)i, prev, path, sizeof path);
            if (lstat(path, &cs) == 0 && fsgd_ckpt_probe(path) < 0) {
                fsgd_cli_error("run: checkpoint path '%s' holds a file that is not an fsgd checkpoint (no FSGDCKPT "
                               "header): fsgd will neither resume from it nor delete it; give --checkpoint another "
                               "path", path);
                return FSGD_EXIT_USAGE;
            }
        }
    if (sc.first[0] && !r->fresh && !r->resume) {
        fsgd_cli_error("run: checkpoint '%s' exists (left by an interrupted or failed run of job '%s'): "
                       "--resume to continue from it, or --fresh to delete it and start over",
                       sc.first, job->dist.name);
        return FSGD_EXIT_USAGE;
    }
    r->resume_step = -1;
    if (r->resume) {
        /* On a real cluster the job goes on with the rows its first run
         * signed; a key fsgd run makes for itself went with that run, and a
         * new one cannot check them (the job stopped with exit 3 then). */
        if (job->cluster.brokers[0] && !job->cluster.job_key_file[0] && !job->cluster.unsigned_rows) {
            fsgd_cli_error("run: --resume on a real cluster needs the job's key: the rows on %s.data carry the tag "
                           "of the key its first run used; give it with --job-key-file FILE (a key fsgd run makes "
                           "for itself is removed when that run ends: for a job that may resume, make one and give "
                           "it from the start), or --unsigned-rows if the rows were written without a tag",
                           job->dist.name);
            return FSGD_EXIT_USAGE;
        }
        if ((rc = fsgd_ckpt_set_resume_step(ckpt, (unsigned)S, job->dist.name, &r->resume_step, r->err,
                                            sizeof r->err)) < 0) {
            fsgd_cli_error("run: --resume: %s", r->err);
            return fsgd_cli_status(rc);
        }
        if (r->resume_step < 0) {
            fsgd_cli_error("run: --resume: there is no checkpoint '%s'", ckpt);
            return FSGD_EXIT_USAGE;
        }
    }
    return RUN_ON;
}

/* The partitions of NAME.data and, on the embedded cluster, the limits its
 * memory sets (the model's size is passed on to the aggregator). */
static int run_size_cluster(run_t *r)
{
    fsgd_job_t *job = &r->job;
    snprintf(r->brokers, sizeof r->brokers, "%s", job->cluster.brokers);
    r->P = job->dist.partitions;
    struct stat sb;
    uint64_t bytes = (!r->no_produce && job->train.data[0] && stat(job->train.data, &sb) == 0) ? (uint64_t)sb.st_size : 0;
    uint64_t text_bytes = 0; /* a gzip or zstd file's partitions hold its text: sized by that */
    char zerr[512];
    if (bytes && S_ISREG(sb.st_mode) && fsgd_zsource_check(job->train.data, &text_bytes, zerr, sizeof zerr) < 0) {
        fsgd_cli_error("run: %s", zerr);
        return FSGD_EXIT_DATA;
    }
    if (text_bytes)
        bytes = text_bytes;
    if (!r->brokers[0] && (job->cluster.replication_factor > 1 || job->cluster.min_insync_replicas > 1)) {
        /* refused, not ignored: the user asked for a durability it cannot give */
        fsgd_cli_error("run: the embedded cluster keeps one replica of each topic: --replication-factor %d and "
                       "--min-insync-replicas %d apply to a real cluster (--brokers HOST:PORT)",
                       job->cluster.replication_factor, job->cluster.min_insync_replicas);
        return FSGD_EXIT_USAGE;
    }
    if (!r->brokers[0] && job->cluster.kafka[0]) {
        /* it listens in PLAINTEXT only: TLS or SASL would fail at the first connect, after the cluster started */
        fsgd_cli_error("run: the embedded cluster speaks PLAINTEXT only: the Kafka setting %.*s (--kafka-opt, YAML "
                       "kafka:) applies to a real cluster (--brokers HOST:PORT)",
                       (int)strcspn(job->cluster.kafka, "="), job->cluster.kafka); /* its name only: a value may be a secret */
        return FSGD_EXIT_USAGE;
    }
    if (!r->brokers[0]) {
        int need = fsgd_produce_partitions_needed(bytes);
        if (r->P == 0)
            r->P = need > 12 ? need : 12;
        else if (r->P < need) {
            fsgd_cli_error("run: %s is %.1f MB; the embedded cluster keeps at most 5 MiB per partition, so it "
                           "needs at least %d partitions (got --partitions %d)",
                           job->train.data, bytes / 1e6, need, r->P);
            return FSGD_EXIT_USAGE;
        }
        job->dist.max_model_weights = FSGD_EMBEDDED_MAX_MODEL_WEIGHTS;
        char maxw[32];
        snprintf(maxw, sizeof maxw, "%llu", (unsigned long long)job->dist.max_model_weights);
        setenv("FSGD_MAX_MODEL_WEIGHTS", maxw, 1); /* read by the aggregator we spawn */
        uint64_t weights = job->train.dim + (job->train.bias ? 1 : 0);
        if (job->train.dim && weights > job->dist.max_model_weights) {
            fsgd_cli_error("run: " FSGD_EMBEDDED_MODEL_LIMIT_MSG, (unsigned long long)weights, weights * 4.0 / 1048576.0,
                           (unsigned long long)job->dist.max_model_weights);
            return FSGD_EXIT_USAGE;
        }
    } else if (r->P == 0) {
        r->P = 12;
    }
    return RUN_ON;
}

/* What the job and the machine can hold, before anything starts. */
static int run_check_workers(run_t *r)
{
    const fsgd_job_t *job = &r->job;
    int P_job = r->P;
    if (r->brokers[0] && r->no_produce) {
        char t[160];
        fsgd_kbus_topic(t, sizeof t, job->dist.name, "data");
        int n = dcli_partitions(r->brokers, t, 10000, r->err, sizeof r->err);
        if (n < 0) {
            fsgd_cli_error("run: %s", r->err);
            return FSGD_EXIT_BROKER;
        }
        P_job = n;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long max_w = (cores > 0 ? cores : 1) * WORKERS_PER_CORE;
    if (job->dist.workers > P_job) {
        fsgd_cli_error("run: --workers %d: %s.data has %d partitions, and a worker beyond that gets no rows "
                       "(at most %d; --partitions N raises it)",
                       job->dist.workers, job->dist.name, P_job, P_job);
        return FSGD_EXIT_USAGE;
    }
    if (job->dist.workers > max_w) {
        fsgd_cli_error("run: --workers %d: this machine has %ld cores; at most %ld worker processes (%d per core)",
                       job->dist.workers, cores, max_w, WORKERS_PER_CORE);
        return FSGD_EXIT_USAGE;
    }
    return RUN_ON;
}

static void run_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* an aggregator gone before its "data written" word: the write fails
     * (EPIPE) and supervision reports why it ended, where SIGPIPE killed
     * fsgd run (exit 141) and left the job key's folder behind */
    signal(SIGPIPE, SIG_IGN);
}

static int run_start_embedded(run_t *r)
{
    r->mock = fsgd_kmock_new(3, r->err, sizeof r->err);
    spawn_embedded = r->mock != NULL;
    if (!r->mock) {
        fsgd_cli_error("run: %s", r->err);
        return FSGD_EXIT_BROKER;
    }
    snprintf(r->brokers, sizeof r->brokers, "%s", fsgd_kmock_bootstraps(r->mock));
    static const char *sfx[] = {"data", "grads", "model", "ctl", "pull"};
    int rc = 0;
    /* NAME.pull: answers to working-set workers' pulls */
    for (int i = 0; i < (fsgd_dist_replica(&r->job.train, &r->job.dist) == FSGD_REPLICA_WORKING_SET ? 5 : 4) && !rc; i++) {
        char t[128];
        fsgd_kbus_topic(t, sizeof t, r->job.dist.name, sfx[i]);
        /* grads led by broker 2, model by 3 (the fault tests name them);
         * data keeps the mock's own spread over the brokers: setting a
         * leader costs the mock a second per partition */
        int parts = i == 0 ? r->P : i == 4 ? FSGD_DIST_PULL_PARTITIONS
                                  : (i == 1 || i == 2) && r->job.train.shards > 1 ? r->job.train.shards : 1; /* a partition a shard */
        rc = fsgd_kmock_topic(r->mock, t, parts, i == 0 || i == 4 ? -1 : i, r->err, sizeof r->err);
    }
    if (rc) {
        fsgd_cli_error("run: %s", r->err);
        fsgd_kmock_destroy(r->mock);
        r->mock = NULL;
        return fsgd_cli_status(rc);
    }
    if (!r->job.train.quiet) /* --quiet: the result line and errors only */
        printf("fsgd: embedded Kafka cluster at %s (topics %s.data with %d partitions, .grads, .model, .ctl)\n",
               r->brokers, r->job.dist.name, r->P);
    fflush(stdout);
    return RUN_ON;
}

static int run_make_real_topics(run_t *r)
{
    if (r->P == 0)
        r->P = 12;
    int rc;
    if ((rc = dcli_connect(&r->job, "run")) != 0)
        return rc;
    /* (a resumed job continues on its own topics) */
    rc = real_topics(&r->job, r->brokers, r->P, !r->broker_only && !r->resume, !r->broker_only && !r->no_produce,
                     r->err, sizeof r->err);
    if (rc) {
        fsgd_cli_error("run: %s", r->err);
        return fsgd_cli_status(rc);
    }
    if (r->broker_only) { /* the topics are there: load them with kcat or fsgd produce */
        printf("brokers=%s\n", r->brokers);
        return 0;
    }
    return RUN_ON;
}

/* --broker-only on the embedded cluster: it lives as long as this process. */
static int run_serve_broker_only(run_t *r)
{
    printf("brokers=%s\n", r->brokers);
    fflush(stdout);
    while (!got_signal)
        pause();
    fsgd_kmock_destroy(r->mock);
    return 0;
}

/* Every message of the job is authenticated: with the given key, or one
 * made here for this run, which only its processes read. */
static int run_job_key(run_t *r)
{
    fsgd_job_t *job = &r->job;
    int rc;
    if (!job->cluster.job_key_file[0] && job->dist.follow) {
        /* A follow job is fed by other producers, which need its key: it
         * goes to a stable place that outlives the run (a resumed job and
         * the next day's fsgd produce find it there) and is printed.
         * Issue 40 item 2: a key in a temporary folder was gone. */
        struct stat ks;
        snprintf(job->cluster.job_key_file, sizeof job->cluster.job_key_file, ".fsgd/%s.key", job->dist.name);
        int fresh = lstat(job->cluster.job_key_file, &ks) != 0;
        if (mkdir(".fsgd", 0700) != 0 && errno != EEXIST) {
            fsgd_cli_error("run: cannot make the folder .fsgd/ for the job key: %s", strerror(errno));
            fsgd_kmock_destroy(r->mock);
            return FSGD_EXIT_IO;
        }
        if (fresh && (rc = fsgd_auth_key_generate(job->cluster.job_key_file, r->err, sizeof r->err)) < 0) {
            fsgd_cli_error("run: %s", r->err);
            fsgd_kmock_destroy(r->mock);
            return fsgd_cli_status(rc);
        }
        fprintf(stderr, "fsgd: run: job %s's key %s %s (feed the job with: fsgd produce --follow --name %s "
                        "--job-key-file %s --brokers ... FILE)\n",
                job->dist.name, fresh ? "made in" : "reused from", job->cluster.job_key_file, job->dist.name, job->cluster.job_key_file);
        if (fresh && r->no_produce && !job->cluster.unsigned_rows) {
            job->cluster.unsigned_rows = 1;
            spawn_unsigned_rows = 1;
        }
    } else if (!job->cluster.job_key_file[0]) {
        snprintf(made_key_dir, sizeof made_key_dir, "/tmp/fsgd-key-XXXXXX");
        if (!mkdtemp(made_key_dir)) {
            made_key_dir[0] = '\0';
            fsgd_cli_error("run: cannot make a folder for the job key: %s", strerror(errno));
            fsgd_kmock_destroy(r->mock);
            return FSGD_EXIT_IO;
        }
        atexit(remove_made_key);
        snprintf(made_key, sizeof made_key, "%s/job.key", made_key_dir);
        if ((rc = fsgd_auth_key_generate(made_key, r->err, sizeof r->err)) < 0) {
            made_key[0] = '\0';
            fsgd_cli_error("run: %s", r->err);
            fsgd_kmock_destroy(r->mock);
            return fsgd_cli_status(rc);
        }
        snprintf(job->cluster.job_key_file, sizeof job->cluster.job_key_file, "%s", made_key);
        /* rows already on NAME.data (--no-produce) were written before this
         * key existed: they cannot carry its tag */
        if (r->no_produce && !job->cluster.unsigned_rows) {
            job->cluster.unsigned_rows = 1;
            spawn_unsigned_rows = 1;
        }
    }
    if ((rc = dcli_auth(job, "run")) != 0) {
        fsgd_kmock_destroy(r->mock);
        return rc;
    }
    spawn_key = job->cluster.job_key_file;
    return RUN_ON;
}

/* The workers start before the data is loaded: joining the consumer group
 * takes seconds (the coordinator's initial rebalance delay: 3 s on the
 * embedded cluster and by default on Kafka), and that wait overlaps
 * loading the data. */
static int run_spawn_workers(run_t *r)
{
    r->W = r->job.dist.workers;
    r->S = r->job.train.shards > 1 ? r->job.train.shards : 1;
    r->n_pids = r->W + r->S;
    r->pids = calloc((size_t)r->n_pids, sizeof *r->pids);
    if (!r->pids) {
        fsgd_cli_error("run: out of memory");
        fsgd_kmock_destroy(r->mock);
        return FSGD_EXIT_INTERNAL;
    }
    r->wp = r->pids + 1;
    for (int i = 0; i < r->W; i++) {
        r->wp[i] = spawn("worker", r->argc, r->argv, r->brokers, NULL, i + 1);
        if (!r->job.train.quiet) /* --quiet: the result line and errors only */
            printf("fsgd: worker %d pid %d\n", i + 1, (int)r->wp[i]);
    }
    fflush(stdout);
    return RUN_ON;
}

/* Whether fsgd run writes NAME.data now (a resumed job on real brokers
 * trains on the rows already there). */
static int run_produces(const run_t *r)
{
    return !r->no_produce && !(r->resume && !r->mock);
}

/* A resumed job on real brokers continues on the rows its topic holds;
 * the embedded cluster starts empty and needs them again. */

static int run_produce(run_t *r)
{
    fsgd_job_t *job = &r->job;
    if (!r->no_produce && r->resume && !r->mock && !job->train.quiet)
        fprintf(stderr, "fsgd: run: --resume: training on the rows already in %s.data\n", job->dist.name);
    if (run_produces(r)) {
        fsgd_produce_stats_t ps = {0};
        fsgd_role_env_t env = {.bus = dcli_bus(r->brokers, "run"), .stop = &got_signal};
        int rc = env.bus ? fsgd_produce_file(&env, FSGD_JOB_DIST(job), job->train.data, r->mock ? 0 : r->P, &ps, NULL, r->err, sizeof r->err)
                         : fsgd_err_fmt(r->err, sizeof r->err, FSGD_E_KAFKA, "no Kafka client for %s", r->brokers);
        fsgd_bus_destroy(env.bus);
        if (rc < 0 && got_signal) {
            fsgd_cli_error("run: interrupted by signal %d while writing %s.data: stopping the aggregator and %d "
                           "worker(s)", (int)got_signal, job->dist.name, r->W);
            abort_start(r);
            return 128 + (int)got_signal;
        }
        if (rc < 0) {
            fsgd_cli_error("run: produce: %s", r->err);
            abort_start(r);
            return fsgd_cli_status(rc);
        }
        if (!job->train.quiet)
            fprintf(stderr, "fsgd: produced %llu rows (%.1f MB) into %s.data in %.2f s\n",
                    (unsigned long long)ps.rows, ps.bytes / 1e6, job->dist.name, ps.seconds);
        dcli_bad_rows(job->train.data, ps.bad_rows, ps.first_bad);
    }
    return RUN_ON;
}

/* --fresh deletes the checkpoint only now that everything else has been
 * checked; a signal received while starting stops here. */
static int run_before_aggregator(run_t *r)
{
    const char *ckpt = r->ckpt;
    if (r->fresh) {
        ckpt_clear_t c = {0};
        int rc = fsgd_ckpt_set_each(ckpt, ckpt_clear_member, &c, r->err, sizeof r->err);
        if (rc < 0 || c.failed) {
            if (rc < 0)
                fsgd_cli_error("run: %s", r->err);
            abort_start(r);
            return rc < 0 ? fsgd_cli_status(rc) : c.failed;
        }
    } else if (r->resume) {
        fprintf(stderr, "fsgd: run: resuming from checkpoint %s (--resume, step %lld)\n", ckpt, r->resume_step);
        if (r->S > 1) { /* every shard from that step: PATH[.shardI] or its .prev (agg_ckpt_load) */
            char v[32];
            snprintf(v, sizeof v, "%lld", r->resume_step);
            setenv("FSGD_RESUME_STEP", v, 1);
        }
    }
    if (got_signal) {
        fsgd_cli_error("run: interrupted by signal %d before the job started", (int)got_signal);
        abort_start(r);
        return 128 + (int)got_signal;
    }
    return RUN_ON;
}

static void run_spawn_aggregator(run_t *r)
{
    r->sup.agg = r->pids[0] = spawn("aggregator", r->argc, r->argv, r->brokers, r->ckpt, 0);
    if (!r->job.train.quiet) /* --quiet: the result line and errors only */
        printf("fsgd: aggregator pid %d\n", (int)r->sup.agg);
    fflush(stdout);
}

/* The aggregator starts while the producer writes NAME.data: it connects,
 * reads the test set and joins NAME.ctl meanwhile, then waits on a pipe for
 * the word that the data is written (agg_await_producer). */
static int run_spawn_aggregator_early(run_t *r)
{
    int fds[2];
    if (pipe(fds) != 0) {
        fsgd_cli_error("run: pipe: %s", strerror(errno));
        abort_start(r);
        return FSGD_EXIT_IO;
    }
    fcntl(fds[1], F_SETFD, FD_CLOEXEC); /* the aggregator gets the read end only */
    char fdv[16];
    snprintf(fdv, sizeof fdv, "%d", fds[0]);
    setenv("FSGD_AGG_AWAIT_FD", fdv, 1);
    run_spawn_aggregator(r);
    unsetenv("FSGD_AGG_AWAIT_FD"); /* a restarted aggregator finds the data written */
    close(fds[0]);
    r->agg_go = fds[1];
    return RUN_ON;
}

/* Shard i > 0 of S, following shard 0 (the aggregator). */
static pid_t run_spawn_shard(run_t *r, int i)
{
    char spec[32];
    snprintf(spec, sizeof spec, "%d/%d", i, r->S);
    spawn_shard = spec;
    spawn_port_offset = r->W + i;
    pid_t pid = r->pids[r->W + i] = spawn("aggregator", r->argc, r->argv, r->brokers, r->ckpt, 0);
    spawn_shard = NULL;
    if (!r->job.train.quiet) /* --quiet: the result line and errors only */
        printf("fsgd: aggregator shard %d pid %d\n", i, (int)pid);
    fflush(stdout);
    return pid;
}

/* Shards 1..S-1 start once the data is written, since they read NAME.data's
 * summary as shard 0 does. */
static void run_spawn_shards(run_t *r)
{
    for (int i = 1; i < r->S; i++)
        run_spawn_shard(r, i);
}

static void run_data_written(run_t *r)
{
    if (r->agg_go < 0)
        return;
    if (write(r->agg_go, "1", 1) != 1) /* the aggregator is gone: supervision reports it */
        fprintf(stderr, "fsgd: run: could not tell the aggregator that the data is written: %s\n", strerror(errno));
    close(r->agg_go);
    r->agg_go = -1;
}

/* --fault: each fault starts once t seconds into the job; a broker taken
 * down comes back after its duration. */
static void run_inject_faults(run_t *r, double t)
{
    for (int i = 0; i < r->n_faults && r->mock; i++) {
        fault_t *f = &r->faults[i];
        if (f->state == 0 && t >= f->after) {
            if (f->kind == 1) {
                fsgd_kmock_broker_down(r->mock, f->broker, 1);
                fprintf(stderr, "fsgd: fault: broker %d down for %.1f s\n", f->broker, f->dur);
            } else {
                fsgd_kmock_delay_produce(r->mock, f->broker, f->count, f->rtt);
                fprintf(stderr, "fsgd: fault: next %d produce replies of broker %d delayed %d ms\n", f->count,
                        f->broker, f->rtt);
            }
            f->state = 1;
        } else if (f->state == 1 && f->kind == 1 && t >= f->after + f->dur) {
            fsgd_kmock_broker_down(r->mock, f->broker, 0);
            fprintf(stderr, "fsgd: fault: broker %d up\n", f->broker);
            f->state = 2;
        }
    }
}

/* The newest step every shard has a checkpoint of (they write them at the
 * same steps and keep two), or -1 (said why) when none. */
static long long shards_common_step(run_t *r)
{
    long long step = -1;
    if (fsgd_ckpt_set_resume_step(r->ckpt, (unsigned)r->S, r->job.dist.name, &step, r->err, sizeof r->err) < 0) {
        fprintf(stderr, "fsgd: run: %s\n", r->err);
        step = -1;
    }
    return step;
}

/* The supervisor's hooks (fsgd/supervisor.h). */
static pid_t hook_spawn_shard(void *ctx, int shard, long long resume_step)
{
    run_t *r = ctx;
    char v[32];
    snprintf(v, sizeof v, "%lld", resume_step);
    if (r->S > 1)
        setenv("FSGD_RESUME_STEP", v, 1); /* read by the shards spawned now */
    pid_t pid;
    if (shard == 0) {
        run_spawn_aggregator(r);
        pid = r->sup.agg;
    } else {
        pid = run_spawn_shard(r, shard);
    }
    unsetenv("FSGD_RESUME_STEP");
    return pid;
}

static long long hook_common_step(void *ctx)
{
    return shards_common_step(ctx);
}

static void hook_tick(void *ctx, double seconds)
{
    run_inject_faults(ctx, seconds);
}

static void hook_say(void *ctx, int error, const char *line)
{
    (void)ctx;
    if (error)
        fsgd_cli_error("%s", line);
    else
        fprintf(stderr, "fsgd: %s\n", line);
}

/* Frees what is left, says where a checkpoint stays, and picks the status. */
static int run_finish(run_t *r)
{
    free(r->pids);
    fsgd_kmock_destroy(r->mock);
    struct stat cs;
    int ckpt_left = lstat(r->ckpt, &cs) == 0;
    if (r->ckpt_tmp) { /* a per-run path: every file of its set goes */
        ckpt_clear_t c = {.quiet = 1};
        fsgd_ckpt_set_each(r->ckpt, ckpt_clear_member, &c, r->err, sizeof r->err);
    } else if (ckpt_left && (r->sup.interrupted || r->sup.agg_status != 0))
        fprintf(stderr, "fsgd: run: checkpoint kept at %s: fsgd run --resume continues from it, --fresh starts over\n",
                r->ckpt);
    if (r->sup.interrupted)
        return 128 + r->sup.interrupted;
    if (r->sup.agg_status != 0) {
        fsgd_cli_error("run: aggregator failed (status %d)", r->sup.agg_status);
        /* its own status says why (data, broker, ...); a crash is internal */
        return r->sup.agg_status > 0 && r->sup.agg_status < 128 ? r->sup.agg_status : FSGD_EXIT_INTERNAL;
    }
    return 0;
}

int fsgd_cmd_run(int argc, char **argv)
{
    static run_t run; /* large (the job, paths); one per process */
    run_t *r = &run;
    memset(r, 0, sizeof *r);
    r->agg_go = -1;
    r->sup.grace_s = STOP_GRACE_S;
    r->sup.internal_status = FSGD_EXIT_INTERNAL;
    r->hooks = (fsgd_supervisor_hooks_t){.spawn_shard = hook_spawn_shard, .common_step = hook_common_step,
                                         .tick = hook_tick, .say = hook_say, .ctx = r, .signal = &got_signal};
    r->argc = argc;
    r->argv = argv;
    int rc;
    if ((rc = run_options(r)) != RUN_ON)
        return rc;
    run_pick_checkpoint(r);
    if (!r->broker_only && (rc = run_check_outputs(r)) != RUN_ON)
        return rc;
    if ((rc = run_size_cluster(r)) != RUN_ON)
        return rc;
    if (!r->broker_only && (rc = run_check_workers(r)) != RUN_ON)
        return rc;
    run_catch_signals();
    /* a bad key file is refused before any cluster starts or topic is made */
    if (!r->broker_only && (rc = run_job_key(r)) != RUN_ON)
        return rc;
    if ((rc = r->brokers[0] ? run_make_real_topics(r) : run_start_embedded(r)) != RUN_ON)
        return rc;
    if (r->broker_only)
        return run_serve_broker_only(r);
    if ((rc = run_spawn_workers(r)) != RUN_ON || (rc = run_before_aggregator(r)) != RUN_ON)
        return rc;
    if (run_produces(r)) {
        if ((rc = run_spawn_aggregator_early(r)) != RUN_ON || (rc = run_produce(r)) != RUN_ON)
            return rc;
        run_data_written(r);
    } else {
        run_spawn_aggregator(r);
    }
    run_spawn_shards(r);
    unsetenv("FSGD_RESUME_STEP"); /* --resume's step: a restart finds its own */
    r->sup.W = r->W;
    r->sup.S = r->S;
    r->sup.pids = r->pids;
    r->sup.wp = r->wp;
    r->sup.ckpt = r->ckpt;
    fsgd_supervisor_watch(&r->sup, &r->hooks);
    fsgd_supervisor_tear_down(&r->sup, &r->hooks);
    return run_finish(r);
}
