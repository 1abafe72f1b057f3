/* Sharded aggregators on the in-memory bus (issue 25): two aggregator
 * shards and two workers as threads of this process, with shard 1 made to
 * lag shard 0 (its gradients partition held back by the bus hook). The job
 * still ends with every row applied once per epoch on both shards, both at
 * the same final step, the lag bounded by the staleness τ, and the model
 * shard 0 assembles at the end scoring as a9a should (test AUC > 0.85).
 * And shard 1 started half a second late: nothing is applied before it is
 * there, then the job runs as a clean one. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/bus.h"
#include "bus_mem.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/kbus.h"
#include "fsgd/model.h"
#include "testlib.h"

#define SHARDS 2
#define WORKERS 2
#define DATA_ROWS 6000
#define PARTS 6
#define FORGED_STEP 100000 /* a forged snapshot's step (test_shard_snapshot_far_ahead) */

typedef struct shard_run {
    fsgd_bus_t *bus;
    fsgd_bus_t *agg_view[SHARDS], *worker_view[WORKERS];
    fsgd_job_t job[SHARDS]; /* shard I's job: shards S, shard I */
    pthread_t agg_t[SHARDS], worker_t[WORKERS];
    fsgd_agg_stats_t ast[SHARDS];
    fsgd_worker_stats_t wst[WORKERS];
    int arc[SHARDS], wrc[WORKERS];
    char aerr[SHARDS][512], werr[WORKERS][512];
    volatile sig_atomic_t stop[WORKERS];
    volatile sig_atomic_t crash; /* every shard's: they stop as killed processes */
    int idx[SHARDS > WORKERS ? SHARDS : WORKERS];
    /* what the bus hook saw and does (under mu) */
    pthread_mutex_t mu;
    int delay_ms;             /* each gradient message to shard 1's partition is stored this much later */
    int late_ms;              /* shard 1 starts this long after the other roles */
    uint64_t before_late;       /* shard 0's newest published step when shard 1 started */
    uint64_t published[SHARDS]; /* newest step each shard published on NAME.model */
    uint64_t lag_max;           /* most steps shard 1's newest was behind shard 0's */
    uint64_t held;              /* gradient messages held back */
    uint64_t crash_at;          /* shard 0 publishing this step stops every shard (crash) */
    uint64_t gate_from;         /* model messages past this step reach the workers late ... */
    int gate_open;              /* ... until the test has done its part */
} shard_run_t;

static shard_run_t *cur;

static void sleep_ms(int ms)
{
    struct timespec ns = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ns, NULL);
}

/* FSGD_ROLES_LOG=1 shows what the roles say. */
static void on_log(void *ctx, const char *line)
{
    if (getenv("FSGD_ROLES_LOG"))
        fprintf(stderr, "[%s] %s\n", (const char *)ctx, line);
}

/* Holds shard 1's gradients back (it decides every step later than shard
 * 0) and records how far the shards' published steps drift apart. */
static fsgd_bus_fault_t lag_shard1(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                   int *delay_ms)
{
    shard_run_t *r = ctx;
    fsgd_kframe_t f;
    if (fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) < 0)
        return FSGD_BUS_DELIVER;
    pthread_mutex_lock(&r->mu);
    fsgd_bus_fault_t fault = FSGD_BUS_DELIVER;
    if (strstr(topic, ".model") && f.sender < SHARDS && f.step < FORGED_STEP) {
        if (f.step > r->published[f.sender])
            r->published[f.sender] = f.step;
        if (r->crash_at && f.sender == 0 && f.step >= r->crash_at) {
            r->crash = 1; /* mid-run: the job cannot have ended */
            r->crash_at = 0;
        }
        if (r->published[1] && r->published[0] > r->published[1] && r->published[0] - r->published[1] > r->lag_max)
            r->lag_max = r->published[0] - r->published[1];
    }
    if (strstr(topic, ".model") && r->gate_from && !r->gate_open && f.step > r->gate_from) {
        *delay_ms = 40; /* the job cannot outrun the test by more than a step or two */
        fault = FSGD_BUS_DELAY;
    }
    if (strstr(topic, ".grads") && partition == 1 && r->delay_ms > 0) {
        r->held++;
        *delay_ms = r->delay_ms;
        fault = FSGD_BUS_DELAY;
    }
    pthread_mutex_unlock(&r->mu);
    return fault;
}

static void *agg_main(void *arg)
{
    int i = *(int *)arg;
    shard_run_t *r = cur;
    static const char *names[SHARDS] = {"shard0", "shard1"};
    fsgd_role_env_t env = {.bus = r->agg_view[i], .crash = &r->crash, .log = on_log, .ctx = (void *)names[i]};
    r->arc[i] = fsgd_aggregator_run(&env, FSGD_JOB_DIST(&r->job[i]), WORKERS, &r->ast[i], NULL, NULL, r->aerr[i], sizeof r->aerr[i]);
    return NULL;
}

static void *worker_main(void *arg)
{
    int i = *(int *)arg;
    shard_run_t *r = cur;
    static const char *names[WORKERS] = {"w1", "w2"};
    fsgd_role_env_t env = {.bus = r->worker_view[i], .stop = &r->stop[i], .log = on_log, .ctx = (void *)names[i]};
    r->wrc[i] = fsgd_worker_run(&env, FSGD_JOB_DIST(&r->job[0]), (uint32_t)(i + 1), &r->wst[i], NULL, r->werr[i], sizeof r->werr[i]);
    return NULL;
}

/* NAME.data from the first DATA_ROWS rows of a9a, and the job's topics (a
 * grads and a model partition per shard); -1 without the data. */
static int load_data(shard_run_t *r)
{
    const char *a9a = fsgd_test_data("a9a");
    FILE *f = a9a ? fopen(a9a, "r") : NULL;
    if (!f)
        return -1;
    const char *rows = fsgd_test_tmp("shard_rows.libsvm");
    FILE *o = fopen(rows, "w");
    char line[4096];
    for (int n = 0; o && n < DATA_ROWS && fgets(line, sizeof line, f); n++)
        fputs(line, o);
    fclose(f);
    if (!o || fclose(o))
        return -1;
    char err[256];
    fsgd_produce_stats_t st;
    fsgd_role_env_t env = {.bus = r->bus};
    int rc = fsgd_produce_file(&env, FSGD_JOB_DIST(&r->job[0]), rows, PARTS, &st, NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n  produce: %s\n", err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(st.rows, DATA_ROWS);
    return rc ? -1 : 0;
}

static void run_init(shard_run_t *r, int staleness, int delay_ms)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < SHARDS; i++) {
        fsgd_job_t *j = &r->job[i];
        fsgd_job_defaults(j);
        snprintf(j->dist.name, sizeof j->dist.name, "shardroles");
        const char *test = fsgd_test_data("a9a.t");
        snprintf(j->train.test, sizeof j->train.test, "%s", test ? test : "");
        j->train.epochs = 2;
        j->train.batch = 240;
        j->train.lr = 0.05;
        j->dist.step_timeout_ms = 5000;
        j->dist.snapshot_every = 20;
        j->train.staleness = staleness;
        j->train.quiet = 1;
        j->train.shards = SHARDS;
        j->dist.shard = (uint32_t)i;
    }
    r->delay_ms = delay_ms;
    pthread_mutex_init(&r->mu, NULL);
    alarm(180); /* a role that never ends fails the binary instead of hanging make test */
    r->bus = fsgd_bus_mem_new();
    for (int i = 0; i < SHARDS; i++)
        r->agg_view[i] = fsgd_bus_mem_view(r->bus, 100 + i);
    for (int i = 0; i < WORKERS; i++)
        r->worker_view[i] = fsgd_bus_mem_view(r->bus, i + 1);
    for (int i = 0; i < (int)(sizeof r->idx / sizeof *r->idx); i++)
        r->idx[i] = i;
    cur = r;
}

static void run_free(shard_run_t *r)
{
    fsgd_bus_mem_set_hook(r->bus, NULL, NULL);
    for (int i = 0; i < SHARDS; i++) {
        fsgd_agg_stats_free(&r->ast[i]);
        fsgd_bus_destroy(r->agg_view[i]);
    }
    for (int i = 0; i < WORKERS; i++)
        fsgd_bus_destroy(r->worker_view[i]);
    fsgd_bus_destroy(r->bus);
    pthread_mutex_destroy(&r->mu);
    cur = NULL;
    alarm(0);
}

/* The workers end on the final model; told to stop after 20 s, so a
 * failure does not hang the binary. */
static void join_workers(shard_run_t *r)
{
    for (int i = 0; i < WORKERS; i++) {
        for (int t = 0; t < 1000 && pthread_tryjoin_np(r->worker_t[i], NULL) != 0; t++) {
            sleep_ms(20);
            if (t == 999) {
                r->stop[i] = 1;
                pthread_join(r->worker_t[i], NULL);
            }
        }
        if (r->wrc[i])
            fprintf(stderr, "\n  worker %d: %s\n", i + 1, r->werr[i]);
    }
}

/* Starts every role, waits for the shards, then the workers (which end on
 * the final model; told to stop after 20 s so a failure does not hang). */
static void run_job(shard_run_t *r)
{
    pthread_create(&r->agg_t[0], NULL, agg_main, &r->idx[0]);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&r->worker_t[i], NULL, worker_main, &r->idx[i]);
    struct timespec late = {r->late_ms / 1000, (long)(r->late_ms % 1000) * 1000000L};
    nanosleep(&late, NULL);
    pthread_mutex_lock(&r->mu);
    r->before_late = r->published[0];
    pthread_mutex_unlock(&r->mu);
    for (int i = 1; i < SHARDS; i++)
        pthread_create(&r->agg_t[i], NULL, agg_main, &r->idx[i]);
    for (int i = 0; i < SHARDS; i++) {
        pthread_join(r->agg_t[i], NULL);
        if (r->arc[i])
            fprintf(stderr, "\n  shard %d: %s\n", i, r->aerr[i]);
    }
    join_workers(r);
}

/* Both shards ended the job together: no error, every row applied once per
 * epoch, the same steps, each with its half of the model. */
static void check_shards(const shard_run_t *r)
{
    for (int i = 0; i < SHARDS; i++) {
        const fsgd_agg_stats_t *s = &r->ast[i];
        CU_ASSERT_EQUAL(r->arc[i], 0);
        CU_ASSERT_EQUAL(s->n_epochs, 2);
        CU_ASSERT_EQUAL(s->dataset_rows, DATA_ROWS);
        for (int e = 0; e < s->n_epochs; e++)
            CU_ASSERT_EQUAL(s->epochs[e].rows, DATA_ROWS);
        CU_ASSERT_EQUAL(s->rows_total, 2 * DATA_ROWS);
        CU_ASSERT_EQUAL(s->shard, (uint32_t)i);
        CU_ASSERT_EQUAL(s->shards, SHARDS);
        CU_ASSERT_EQUAL(s->workers_dropped, 0);
    }
    CU_ASSERT_EQUAL(r->ast[0].steps, r->ast[1].steps);
    CU_ASSERT_EQUAL(r->ast[0].adam_steps, r->ast[1].adam_steps);
    CU_ASSERT_EQUAL(r->ast[0].weights_held + r->ast[1].weights_held, r->ast[0].dim + 1); /* + the bias */
    /* both published the last step */
    CU_ASSERT_EQUAL(r->published[0], r->published[1]);
    for (int i = 0; i < WORKERS; i++) {
        CU_ASSERT_EQUAL(r->wrc[i], 0);
        CU_ASSERT_TRUE(r->wst[i].rows > 0);
    }
}

/* A run set up with its data, or NULL (and the test skipped) without a9a. */
static shard_run_t *new_run(int staleness, int delay_ms, int late_ms)
{
    shard_run_t *r = calloc(1, sizeof *r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    run_init(r, staleness, delay_ms);
    r->late_ms = late_ms;
    if (!r->job[0].train.test[0] || load_data(r) != 0) {
        fsgd_test_skip("needs data/sets/a9a and a9a.t");
        run_free(r);
        free(r);
        return NULL;
    }
    fsgd_bus_mem_set_hook(r->bus, lag_shard1, r);
    return r;
}

/* τ = 2 and shard 1 a few milliseconds behind on every gradient: it lags
 * shard 0, never by more than the bound lets the workers run ahead, and
 * the job ends as a clean one does. */
static void test_lagging_shard(void)
{
    enum { TAU = 2 };
    shard_run_t *r = new_run(TAU, 15, 0);
    if (!r)
        return;
    run_job(r);
    check_shards(r);
    /* it did lag, within the bound: the workers compute on the oldest
     * shard's step, so shard 0 gets no gradient more than τ + 1 steps past
     * shard 1's newest */
    CU_ASSERT_TRUE(r->held > 0);
    CU_ASSERT_TRUE(r->lag_max >= 1);
    CU_ASSERT_TRUE(r->lag_max <= TAU + 1);
    /* shard 0 assembled the whole model at the end and scored it */
    CU_ASSERT_TRUE(r->ast[0].test.n > 0 && r->ast[0].test.auc > 0.85);
    printf("(lag max %llu steps of %llu, %llu gradients held, auc %.4f) ", (unsigned long long)r->lag_max,
           (unsigned long long)r->ast[0].steps, (unsigned long long)r->held, r->ast[0].test.auc);
    run_free(r);
    free(r);
}

/* The same job without the lag: the shards never drift by more than a step
 * (each publishes a step as soon as its gradients are in). */
static void test_shards_in_step(void)
{
    shard_run_t *r = new_run(0, 0, 0);
    if (!r)
        return;
    run_job(r);
    check_shards(r);
    CU_ASSERT_TRUE(r->lag_max <= 1); /* τ = 0: synchronous */
    CU_ASSERT_TRUE(r->ast[0].test.n > 0 && r->ast[0].test.auc > 0.85);
    run_free(r);
    free(r);
}

/* Working-set workers pull each shard's part of their keys: at τ = 0 with
 * a lossless codec the job computes what full replicas compute, so shard
 * 0's assembled model is the same bit for bit, and a worker's pulls carry
 * every key of its steps. */
static void run_replica(fsgd_job_replica_t replica, fsgd_job_table_t table, const char *out, fsgd_worker_stats_t *w1,
                        fsgd_metrics_t *test)
{
    shard_run_t *r = new_run(0, 0, 0);
    if (!r)
        return;
    for (int i = 0; i < SHARDS; i++) {
        r->job[i].dist.replica = replica;
        r->job[i].dist.table = table;
        snprintf(r->job[i].train.out, sizeof r->job[i].train.out, "%s", out);
    }
    run_job(r);
    check_shards(r);
    CU_ASSERT_TRUE(r->ast[0].test.n > 0 && r->ast[0].test.auc > 0.85);
    /* a sparse table holds the keys the shard's gradients touched, no more */
    for (int i = 0; i < SHARDS; i++) {
        CU_ASSERT_EQUAL(r->ast[i].table_sparse, table == FSGD_TABLE_SPARSE);
        if (table == FSGD_TABLE_SPARSE)
            CU_ASSERT_TRUE(r->ast[i].table_keys > 0 && r->ast[i].table_keys <= r->ast[i].weights_held);
    }
    *w1 = r->wst[0];
    *test = r->ast[0].test;
    run_free(r);
    free(r);
}

static void test_working_set_shards(void)
{
    if (!fsgd_test_data("a9a")) {
        fsgd_test_skip("needs data/sets/a9a");
        return;
    }
    fsgd_worker_stats_t full = {0}, ws = {0}, sparse = {0};
    const char *a = fsgd_test_tmp("full.model"), *b = fsgd_test_tmp("ws.model"), *c = fsgd_test_tmp("sparse.model");
    fsgd_metrics_t ta = {0}, tb = {0}, tc = {0};
    run_replica(FSGD_REPLICA_FULL, FSGD_TABLE_DENSE, a, &full, &ta);
    run_replica(FSGD_REPLICA_WORKING_SET, FSGD_TABLE_DENSE, b, &ws, &tb);
    /* the shards' sparse tables: the same model again (their snapshots are
     * pairs; shard 0 assembles, scores and writes it as pairs) */
    run_replica(FSGD_REPLICA_WORKING_SET, FSGD_TABLE_SPARSE, c, &sparse, &tc);
    CU_ASSERT_TRUE(ta.n > 0 && tc.n == ta.n);
    CU_ASSERT_EQUAL(memcmp(&tc.auc, &ta.auc, sizeof ta.auc), 0);
    CU_ASSERT_EQUAL(memcmp(&tc.logloss, &ta.logloss, sizeof ta.logloss), 0);
    fsgd_model_t ma = {0}, mb = {0}, mc = {0};
    char err[512];
    CU_ASSERT_EQUAL(fsgd_model_load(&ma, a, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_model_load(&mb, b, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_model_load(&mc, c, err, sizeof err), 0);
    size_t n = ma.dim + (ma.has_bias ? 1 : 0);
    CU_ASSERT_TRUE(ma.w && mb.w && ma.dim == mb.dim && !memcmp(ma.w, mb.w, n * sizeof *ma.w));
    CU_ASSERT_TRUE(mc.w && ma.dim == mc.dim && !memcmp(ma.w, mc.w, n * sizeof *ma.w));
    CU_ASSERT_TRUE(ws.pulls > 0 && ws.pulled_keys > ws.pulls && full.pulls == 0);
    CU_ASSERT_TRUE(sparse.pulls > 0); /* (counts differ with resent pulls: timing) */
    fsgd_model_free(&ma);
    fsgd_model_free(&mb);
    fsgd_model_free(&mc);
}

/* Shard 1 starts half a second after shard 0 and the workers: nothing is
 * computed before every shard's opening snapshot, so the job runs as a
 * clean one once it is there. */
static void test_late_shard(void)
{
    shard_run_t *r = new_run(2, 0, 500);
    if (!r)
        return;
    run_job(r);
    check_shards(r);
    CU_ASSERT_TRUE(r->lag_max <= 3); /* τ + 1 */
    CU_ASSERT_EQUAL(r->before_late, 0); /* nothing applied before shard 1 was there */
    CU_ASSERT_TRUE(r->ast[0].test.n > 0 && r->ast[0].test.auc > 0.85);
    run_free(r);
    free(r);
}

/* A copy of shard 1's opening snapshot (one chunk: its 62 weights of
 * a9a's 124) as of step `step`: valid layout and CRC32C, what anyone who
 * can write to NAME.model could send in a job without a key. */
static void send_shard1_snapshot_at(shard_run_t *r, uint64_t step)
{
    char t[128], err[256];
    fsgd_kbus_topic(t, sizeof t, r->job[0].dist.name, "model");
    fsgd_bus_client_t *c = fsgd_bus_client_new(r->bus, FSGD_KCLIENT_CONSUMER, err, sizeof err);
    fsgd_bus_tp_t tp = {t, 1, FSGD_BUS_OFFSET_BEGINNING};
    CU_ASSERT_EQUAL(fsgd_bus_assign(c, &tp, 1, err, sizeof err), 0);
    int sent = 0;
    for (int tries = 0; !sent && tries < 200; tries++) {
        fsgd_bus_msg_t *m = fsgd_bus_poll(c, 100);
        fsgd_kframe_t f;
        if (m && !m->err && fsgd_kframe_parse_unverified(m->val, m->len, &f, NULL, NULL, 0) == 0 &&
            f.kind == FSGD_KMSG_SNAPSHOT && f.nchunks == 1) {
            fsgd_bus_client_t *p = fsgd_bus_client_new(r->bus, FSGD_KCLIENT_PRODUCER, err, sizeof err);
            fsgd_kframe_t h = f;
            h.step = step;
            const fsgd_bus_out_t out = {.topic = t, .partition = 1, .job = r->job[0].dist.name, .hdr = &h,
                                        .val = f.body, .len = f.body_len};
            CU_ASSERT_EQUAL(fsgd_bus_send(p, &out, NULL, err, sizeof err), 0);
            fsgd_bus_client_destroy(p);
            sent = 1;
        }
        fsgd_bus_msg_destroy(m);
    }
    CU_ASSERT_TRUE(sent);
    fsgd_bus_client_destroy(c);
}

/* Mid-job, a snapshot of shard 1's far ahead of its stream in the job's
 * own generation (a forged one, issue 27): every step publishes a message
 * on each shard's stream, so no worker takes it (taking it, a worker would
 * hold shard 1's part of θ at the opening weights and drop every later
 * delta of shard 1 as old). Each worker counts it as corrupt; the job ends
 * as a clean one, and shard 0 scores the whole model assembled from
 * NAME.model: shard 1's final snapshot, not the forged one further ahead
 * (before, "the job's final snapshot is missing"). */
static void test_shard_snapshot_far_ahead(void)
{
    shard_run_t *r = new_run(0, 0, 0);
    if (!r)
        return;
    r->gate_from = 3;
    for (int i = 0; i < SHARDS; i++)
        pthread_create(&r->agg_t[i], NULL, agg_main, &r->idx[i]);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&r->worker_t[i], NULL, worker_main, &r->idx[i]);
    for (int t = 0; t < 3000; t++) { /* 60 s at most */
        pthread_mutex_lock(&r->mu);
        int there = r->published[1] >= 3;
        pthread_mutex_unlock(&r->mu);
        if (there)
            break;
        sleep_ms(20);
    }
    send_shard1_snapshot_at(r, FORGED_STEP);
    pthread_mutex_lock(&r->mu);
    r->gate_open = 1;
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < SHARDS; i++) {
        pthread_join(r->agg_t[i], NULL);
        if (r->arc[i])
            fprintf(stderr, "\n  shard %d: %s\n", i, r->aerr[i]);
    }
    join_workers(r);
    check_shards(r);
    CU_ASSERT_TRUE(r->ast[0].test.n > 0 && r->ast[0].test.auc > 0.85);
    for (int i = 0; i < WORKERS; i++) {
        CU_ASSERT_TRUE(r->wst[i].corrupt >= 1);
        CU_ASSERT_EQUAL(r->wst[i].resyncs, 0);
        if (r->wst[i].corrupt < 1 || r->wst[i].resyncs)
            fprintf(stderr, "\n  worker %d: %llu corrupt, %llu resyncs\n", i + 1,
                    (unsigned long long)r->wst[i].corrupt, (unsigned long long)r->wst[i].resyncs);
    }
    run_free(r);
    free(r);
}

/* A shard restart (what fsgd run does when one is killed): mid-run both
 * shard threads stop as killed processes would (their crash flag),
 * then start again from the newest step both have a checkpoint of
 * (FSGD_RESUME_STEP); the workers keep running, take the new generation's
 * snapshots, and the job ends with every row applied once per epoch. */
static void shard_restart_case(fsgd_job_replica_t replica, fsgd_job_table_t table)
{
    shard_run_t *r = new_run(0, 0, 0);
    if (!r)
        return;
    for (int i = 0; i < SHARDS; i++) {
        r->job[i].dist.replica = replica;
        r->job[i].dist.table = table;
    }
    const char *ckpt = fsgd_test_tmp("restart.ckpt");
    for (int i = 0; i < SHARDS; i++)
        snprintf(r->job[i].dist.checkpoint, sizeof r->job[i].dist.checkpoint, "%s", ckpt);
    r->crash_at = 30; /* past the checkpoints of steps 20 and 25 */
    for (int i = 0; i < SHARDS; i++)
        pthread_create(&r->agg_t[i], NULL, agg_main, &r->idx[i]);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&r->worker_t[i], NULL, worker_main, &r->idx[i]);
    for (int i = 0; i < SHARDS; i++) {
        pthread_join(r->agg_t[i], NULL);
        CU_ASSERT_EQUAL(r->arc[i], FSGD_E_STATE); /* "stopped as if killed" */
        fsgd_agg_stats_free(&r->ast[i]);
    }
    r->crash = 0; /* the restart runs on */
    /* the newest step both shards have a checkpoint of */
    char path[512];
    long long steps[SHARDS][2];
    for (int i = 0; i < SHARDS; i++)
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s%s%s", ckpt, i ? ".shard1" : "", k ? ".prev" : "");
            steps[i][k] = fsgd_ckpt_step(path);
        }
    long long common = -1;
    for (int k = 0; k < 2; k++)
        if (steps[0][k] > common && (steps[1][0] == steps[0][k] || steps[1][1] == steps[0][k]))
            common = steps[0][k];
    CU_ASSERT_TRUE_FATAL(common >= 20);
    char v[32];
    snprintf(v, sizeof v, "%lld", common);
    setenv("FSGD_RESUME_STEP", v, 1);
    for (int i = 0; i < SHARDS; i++)
        pthread_create(&r->agg_t[i], NULL, agg_main, &r->idx[i]);
    for (int i = 0; i < SHARDS; i++) {
        pthread_join(r->agg_t[i], NULL);
        if (r->arc[i])
            fprintf(stderr, "\n  shard %d: %s\n", i, r->aerr[i]);
    }
    unsetenv("FSGD_RESUME_STEP");
    join_workers(r);
    check_shards(r);
    for (int i = 0; i < SHARDS; i++) {
        CU_ASSERT_EQUAL(r->ast[i].resumed_from_step, (int)common);
        CU_ASSERT_EQUAL(r->ast[i].table_sparse, table == FSGD_TABLE_SPARSE);
    }
    for (int i = 0; i < WORKERS; i++)
        CU_ASSERT_TRUE(r->wst[i].resyncs >= 1); /* the new generation's snapshots */
    CU_ASSERT_TRUE(r->ast[0].test.n > 0 && r->ast[0].test.auc > 0.85);
    uint64_t by_id = 0, misses = 0;
    for (int i = 0; i < WORKERS; i++) {
        by_id += r->wst[i].pulls_by_id;
        misses += r->wst[i].pull_misses;
    }
    /* the restarted shards hold no key lists: the workers named lists the
     * old processes kept, were told "miss" and sent the keys */
    if (replica == FSGD_REPLICA_WORKING_SET)
        CU_ASSERT_TRUE(misses > 0);
    CU_ASSERT_TRUE(misses <= by_id);
    printf("(restarted both shards from step %lld; auc %.4f; pulls by id %llu, misses %llu) ", common,
           r->ast[0].test.auc, (unsigned long long)by_id, (unsigned long long)misses);
    run_free(r);
    free(r);
}

static void test_shard_restart(void)
{
    shard_restart_case(FSGD_REPLICA_FULL, FSGD_TABLE_AUTO);
}

/* The same with working-set workers: pulls in flight when the shards stop
 * go unanswered, and the new generation's plans pull again. */
static void test_shard_restart_working_set(void)
{
    shard_restart_case(FSGD_REPLICA_WORKING_SET, FSGD_TABLE_AUTO);
}

/* The same with sparse tables: each shard's checkpoint holds its key list,
 * the restarted shards rebuild their tables from it and the job ends as a
 * clean one. */
static void test_shard_restart_sparse(void)
{
    shard_restart_case(FSGD_REPLICA_WORKING_SET, FSGD_TABLE_SPARSE);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"shards_in_step", test_shards_in_step}, {"lagging_shard", test_lagging_shard},
        {"late_shard", test_late_shard}, {"shard_restart", test_shard_restart},
        {"working set: both shards restarted with pulls in flight", test_shard_restart_working_set},
        {"sparse tables: both shards restarted from their key lists", test_shard_restart_sparse},
        {"working set, two shards, tau 0: the full replicas' model bit for bit", test_working_set_shards},
        {"a snapshot of shard 1 far ahead of its stream is not taken", test_shard_snapshot_far_ahead},
        {NULL, NULL}};
    fsgd_test_suite("roles_shards", cases);
}
