/* follow (continuous training, trainer/distributed/agg_follow.c) on the
 * in-memory bus: rows produced while the roles train are all trained once,
 * versions are numbered and scored, progressive validation rises, and an
 * aggregator that restarts from an older checkpoint (as after kill -9)
 * neither loses nor doubles a row. */
#include <math.h>
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
#include "fsgd/model.h"
#include "testlib.h"

#define WORKERS 2
#define PARTS 6
#define CHUNK_ROWS 2000
#define CHUNKS 3
#define MAX_VERSIONS 4096

/* What the aggregator's step hook saw, read by the test thread. */
typedef struct seen {
    pthread_mutex_t mu;
    uint64_t rows, version;
    int nv;
    uint64_t v_rows[MAX_VERSIONS];
    double v_auc[MAX_VERSIONS];
    const char *ckpt, *ckpt_copy; /* copy the checkpoint when version copy_at is out */
    uint64_t copy_at, copied_rows;
} seen_t;

typedef struct run {
    fsgd_bus_t *bus, *view[WORKERS];
    fsgd_job_t job;
    pthread_t agg_t, wt[WORKERS];
    fsgd_agg_stats_t ast;
    int arc;
    char aerr[512];
    volatile sig_atomic_t stop[WORKERS];
    volatile sig_atomic_t agg_stop; /* SIGTERM to the aggregator */
    fsgd_worker_stats_t wst[WORKERS];
    int wrc[WORKERS], idx[WORKERS];
    char werr[WORKERS][512];
    seen_t seen;
} run_t;

static run_t *cur;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ns = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ns, NULL);
}

/* FSGD_ROLES_LOG=1 shows what the roles say. */
static void on_log(void *ctx, const char *line)
{
    if (getenv("FSGD_ROLES_LOG"))
        fprintf(stderr, "[%s] %s\n", ctx == (void *)cur ? "agg" : (const char *)ctx, line);
}

static int copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *p = fsgd_test_read_file(from, &n);
    int rc = p ? fsgd_test_write_file(to, p, n) : -1;
    free(p);
    return rc;
}

/* After every step, on the aggregator's thread: the checkpoint of a version
 * is on disk by then (agg_step.c writes it before the hook). */
static void on_step(void *ctx, const fsgd_agg_stats_t *s, const fsgd_sagg_t *strat, double step_seconds)
{
    seen_t *v = &((run_t *)ctx)->seen; /* the aggregator's ctx is its run */
    pthread_mutex_lock(&v->mu);
    v->rows = s->rows_total;
    if (s->version != v->version) {
        v->version = s->version;
        if (v->nv < MAX_VERSIONS) {
            v->v_rows[v->nv] = s->rows_total;
            v->v_auc[v->nv] = s->pv_auc;
            v->nv++;
        }
        if (v->ckpt_copy && s->version == v->copy_at && copy_file(v->ckpt, v->ckpt_copy) == 0)
            v->copied_rows = s->rows_total;
    }
    pthread_mutex_unlock(&v->mu);
}

static void *agg_main(void *arg)
{
    run_t *r = arg;
    fsgd_role_env_t env = {.bus = r->bus, .stop = &r->agg_stop, .log = on_log, .ctx = r};
    r->arc = fsgd_aggregator_run(&env, FSGD_JOB_DIST(&r->job), WORKERS, &r->ast, NULL, on_step, r->aerr, sizeof r->aerr);
    return NULL;
}

static void *worker_main(void *arg)
{
    int i = *(int *)arg;
    run_t *r = cur;
    fsgd_role_env_t env = {.bus = r->view[i], .stop = &r->stop[i], .log = on_log, .ctx = (void *)(i ? "w2" : "w1")};
    r->wrc[i] = fsgd_worker_run(&env, FSGD_JOB_DIST(&r->job), (uint32_t)(i + 1), &r->wst[i], NULL, r->werr[i], sizeof r->werr[i]);
    return NULL;
}

/* A run of the roles on bus (shared by the runs of a test: the topics
 * outlive an aggregator, as on a broker). */
static void run_init(run_t *r, fsgd_bus_t *bus, const char *ckpt)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->seen.mu, NULL);
    fsgd_job_defaults(&r->job);
    snprintf(r->job.dist.name, sizeof r->job.dist.name, "follow");
    r->job.dist.follow = 1;
    r->job.dist.version_seconds = 0.2;
    r->job.train.dim = 123; /* a9a's: follow fixes the dimension when it starts */
    r->job.train.batch = 200;
    r->job.train.lr = 0.05;
    r->job.dist.step_timeout_ms = 1500;
    r->job.dist.snapshot_every = 5; /* a version every 5 steps (1000 rows): the bus is too fast for seconds */
    r->job.train.staleness = 2;
    r->job.train.quiet = 1;
    snprintf(r->job.dist.checkpoint, sizeof r->job.dist.checkpoint, "%s", ckpt);
    r->bus = bus;
    for (int i = 0; i < WORKERS; i++) {
        r->view[i] = fsgd_bus_mem_view(bus, i + 1);
        r->idx[i] = i;
    }
    cur = r;
}

static void start(run_t *r)
{
    pthread_create(&r->agg_t, NULL, agg_main, r);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&r->wt[i], NULL, worker_main, &r->idx[i]);
}

/* Stops the aggregator as SIGTERM does; its job_end ends the workers. */
static void stop_and_join(run_t *r)
{
    r->agg_stop = 1;
    pthread_join(r->agg_t, NULL);
    if (r->arc)
        fprintf(stderr, "\n  aggregator: %s\n", r->aerr);
    double t0 = now_s();
    for (int i = 0; i < WORKERS; i++) {
        while (now_s() - t0 < 10 && pthread_tryjoin_np(r->wt[i], NULL) != 0)
            sleep_ms(20);
        if (now_s() - t0 >= 10) { /* did not see the end: a failure below */
            r->stop[i] = 1;
            pthread_join(r->wt[i], NULL);
            r->wrc[i] = r->wrc[i] ? r->wrc[i] : -1;
        }
        if (r->wrc[i])
            fprintf(stderr, "\n  worker %d: %s\n", i + 1, r->werr[i]);
    }
}

static void run_free(run_t *r)
{
    fsgd_agg_stats_free(&r->ast);
    for (int i = 0; i < WORKERS; i++)
        fsgd_bus_destroy(r->view[i]);
    pthread_mutex_destroy(&r->seen.mu);
}

static uint64_t rows_seen(run_t *r)
{
    pthread_mutex_lock(&r->seen.mu);
    uint64_t n = r->seen.rows;
    pthread_mutex_unlock(&r->seen.mu);
    return n;
}

/* Waits until the aggregator has trained `rows` rows (30 s at most). */
static int wait_rows(run_t *r, uint64_t rows)
{
    double t0 = now_s();
    while (rows_seen(r) < rows && now_s() - t0 < 30)
        sleep_ms(10);
    return rows_seen(r) == rows;
}

/* Chunk c (0-based) of a9a's first CHUNKS * CHUNK_ROWS rows, into NAME.data. */
static int produce_chunk(fsgd_bus_t *bus, const fsgd_job_t *job, int c)
{
    const char *a9a = fsgd_test_data("a9a");
    if (!a9a)
        return -1;
    FILE *f = fopen(a9a, "r");
    const char *path = fsgd_test_tmp("chunk.libsvm");
    FILE *o = fopen(path, "w");
    char line[4096];
    int n = 0;
    while (f && o && n < (c + 1) * CHUNK_ROWS && fgets(line, sizeof line, f))
        if (n++ >= c * CHUNK_ROWS)
            fputs(line, o);
    if (f)
        fclose(f);
    if (!o || fclose(o))
        return -1;
    fsgd_produce_stats_t st;
    char err[256];
    fsgd_role_env_t env = {.bus = bus};
    int rc = fsgd_produce_file(&env, FSGD_JOB_DIST(job), path, PARTS, &st, NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n  produce: %s\n", err);
    CU_ASSERT_EQUAL(st.rows, CHUNK_ROWS);
    return rc;
}

/* Rows produced while the job trains: every one trained exactly once,
 * versions numbered upwards, the model topic's newest model scores well,
 * the progressive AUC rises. */
static void test_follow_stream(void)
{
    alarm(120);
    fsgd_bus_t *bus = fsgd_bus_mem_new();
    run_t r;
    run_init(&r, bus, fsgd_test_tmp("stream.ckpt"));
    snprintf(r.job.train.out, sizeof r.job.train.out, "%s", fsgd_test_tmp("stream.model"));
    if (produce_chunk(bus, &r.job, 0) != 0) {
        run_free(&r);
        fsgd_bus_destroy(bus);
        return; /* skipped (no a9a) or failed above */
    }
    start(&r);
    CU_ASSERT_TRUE(wait_rows(&r, CHUNK_ROWS));
    /* a reader that follows the model topic while the job runs (fsgd serve
     * --brokers): the first read is whole, the next ones read on */
    char ferr[512];
    fsgd_model_follow_t *fol = fsgd_model_follow_new(bus, r.job.dist.name, ferr, sizeof ferr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fol);
    fsgd_model_t fm;
    uint64_t fstep = 0, fprev = 0;
    int whole = 0;
    CU_ASSERT_EQUAL(fsgd_model_follow_read(fol, &fm, &fstep, &whole, ferr, sizeof ferr), 0);
    CU_ASSERT_EQUAL(whole, 1);
    fsgd_model_free(&fm);
    for (int c = 1; c < CHUNKS; c++) {
        CU_ASSERT_EQUAL(produce_chunk(bus, &r.job, c), 0);
        CU_ASSERT_TRUE(wait_rows(&r, (uint64_t)(c + 1) * CHUNK_ROWS));
        fprev = fstep;
        CU_ASSERT_EQUAL(fsgd_model_follow_read(fol, &fm, &fstep, &whole, ferr, sizeof ferr), 0);
        CU_ASSERT_EQUAL(whole, 0);
        CU_ASSERT_TRUE(fstep > fprev);
        fsgd_model_free(&fm);
    }
    /* the newest model on the topic, read while the job runs */
    fsgd_model_t topic = {0};
    uint64_t step = 0;
    char err[512];
    CU_ASSERT_EQUAL(fsgd_model_assemble_topic(bus, r.job.dist.name, 0, &topic, &step, err, sizeof err), 0);
    CU_ASSERT_TRUE(step > 0);
    stop_and_join(&r);
    CU_ASSERT_EQUAL(r.arc, 0);
    for (int i = 0; i < WORKERS; i++)
        CU_ASSERT_EQUAL(r.wrc[i], 0);
    CU_ASSERT_EQUAL(r.ast.rows_total, CHUNKS * CHUNK_ROWS);
    CU_ASSERT_EQUAL(r.ast.dataset_rows, CHUNKS * CHUNK_ROWS);
    CU_ASSERT_EQUAL(r.ast.pv_rows, CHUNKS * CHUNK_ROWS);
    CU_ASSERT_EQUAL(r.ast.n_epochs, 0); /* a stream has no epochs */
    CU_ASSERT_EQUAL(r.ast.resumed_from_step, -1);
    /* numbered upwards, one per announcement, the last one the stop's */
    CU_ASSERT_TRUE(r.seen.nv >= 3);
    CU_ASSERT_EQUAL(r.ast.version, (uint64_t)r.seen.nv + 1);
    for (int i = 1; i < r.seen.nv; i++)
        CU_ASSERT_TRUE(r.seen.v_rows[i] >= r.seen.v_rows[i - 1]);
    /* progressive validation: the first version's 1000 rows were scored by
     * models that had seen almost nothing (AUC near 0.5); by the end all
     * 6000 (the window holds them all) are, most of them by models that had
     * learnt (seen: 0.54 -> 0.75..0.78 over several runs; a9a's test AUC is
     * about 0.90 when converged) */
    double first = r.seen.v_auc[0], last = r.ast.pv_auc;
    if (!(first < 0.6 && last > first + 0.15))
        fprintf(stderr, "\n  progressive auc: first version %.4f, end %.4f\n", first, last);
    CU_ASSERT_TRUE(first < 0.6 && last > first + 0.15);
    for (int i = 1; i < r.seen.nv; i++) /* and it rose version after version, give or take noise */
        CU_ASSERT_TRUE(r.seen.v_auc[i] > r.seen.v_auc[i - 1] - 0.02);
    /* the model file at the stop is the last version's */
    fsgd_model_t saved = {0};
    CU_ASSERT_EQUAL(fsgd_model_load(&saved, r.job.train.out, err, sizeof err), 0);
    fsgd_model_t newest = {0};
    CU_ASSERT_EQUAL(fsgd_model_assemble_topic(bus, r.job.dist.name, 0, &newest, &step, err, sizeof err), 0);
    CU_ASSERT_TRUE(saved.w && newest.w && saved.dim == newest.dim &&
                   !memcmp(saved.w, newest.w, (saved.dim + 1) * sizeof *saved.w));
    /* the reader that read on has the same model, bit for bit, at the same step */
    CU_ASSERT_EQUAL(fsgd_model_follow_read(fol, &fm, &fstep, &whole, ferr, sizeof ferr), 0);
    CU_ASSERT_EQUAL(whole, 0);
    CU_ASSERT_EQUAL(fstep, step);
    CU_ASSERT_TRUE(fm.w && newest.w && fm.dim == newest.dim && fm.has_bias == newest.has_bias &&
                   !memcmp(fm.w, newest.w, (fm.dim + 1) * sizeof *fm.w));
    fsgd_model_free(&fm);
    fsgd_model_follow_free(fol);
    fsgd_model_free(&saved);
    fsgd_model_free(&newest);
    fsgd_model_free(&topic);
    run_free(&r);
    fsgd_bus_destroy(bus);
    alarm(0);
}

/* kill -9 of the aggregator loses what it did after its checkpoint: here the
 * checkpoint of version 2 is put back after the first run, so the second
 * aggregator starts there while rows keep arriving. Every row is trained
 * once in the model's history: rows_total counts exactly the rows produced. */
static void test_follow_restart(void)
{
    alarm(120);
    fsgd_bus_t *bus = fsgd_bus_mem_new();
    const char *ckpt = fsgd_test_tmp("restart.ckpt"), *old = fsgd_test_tmp("restart.ckpt.v2");
    unlink(ckpt);
    unlink(old);
    run_t r;
    run_init(&r, bus, ckpt);
    r.seen.ckpt = ckpt;
    r.seen.ckpt_copy = old;
    r.seen.copy_at = 2;
    if (produce_chunk(bus, &r.job, 0) != 0) {
        run_free(&r);
        fsgd_bus_destroy(bus);
        return;
    }
    start(&r);
    CU_ASSERT_TRUE(wait_rows(&r, CHUNK_ROWS));
    CU_ASSERT_EQUAL(produce_chunk(bus, &r.job, 1), 0);
    CU_ASSERT_TRUE(wait_rows(&r, 2 * CHUNK_ROWS));
    stop_and_join(&r);
    CU_ASSERT_EQUAL(r.arc, 0);
    uint64_t first_version = r.ast.version, at_copy = r.seen.copied_rows;
    CU_ASSERT_TRUE(at_copy > 0 && at_copy < 2 * CHUNK_ROWS);
    run_free(&r);
    /* the "crash": what came after version 2 is gone */
    CU_ASSERT_EQUAL(copy_file(old, ckpt), 0);
    run_t r2;
    run_init(&r2, bus, ckpt);
    CU_ASSERT_EQUAL(produce_chunk(bus, &r2.job, 2), 0);
    start(&r2);
    CU_ASSERT_TRUE(wait_rows(&r2, CHUNKS * CHUNK_ROWS));
    sleep_ms(300); /* a doubled row would show as more */
    stop_and_join(&r2);
    CU_ASSERT_EQUAL(r2.arc, 0);
    CU_ASSERT_TRUE(r2.ast.resumed_from_step > 0);
    CU_ASSERT_EQUAL(r2.ast.rows_total, CHUNKS * CHUNK_ROWS);
    CU_ASSERT_EQUAL(r2.ast.pv_rows, CHUNKS * CHUNK_ROWS);
    /* numbering goes on from the checkpoint's version */
    CU_ASSERT_TRUE(r2.seen.nv >= 1 && r2.ast.version > 2);
    if (r2.ast.rows_total != CHUNKS * CHUNK_ROWS)
        fprintf(stderr, "\n  restart: %llu rows trained, %d produced (checkpoint at %llu rows, first run ended at "
                        "version %llu)\n",
                (unsigned long long)r2.ast.rows_total, CHUNKS * CHUNK_ROWS, (unsigned long long)at_copy,
                (unsigned long long)first_version);
    run_free(&r2);
    fsgd_bus_destroy(bus);
    alarm(0);
}

/* A checkpoint of a follow job is refused by a job without follow (and the
 * other way round), naming why. */
static void test_follow_ckpt_mode(void)
{
    alarm(60);
    fsgd_bus_t *bus = fsgd_bus_mem_new();
    const char *ckpt = fsgd_test_tmp("mode.ckpt");
    unlink(ckpt);
    run_t r;
    run_init(&r, bus, ckpt);
    if (produce_chunk(bus, &r.job, 0) != 0) {
        run_free(&r);
        fsgd_bus_destroy(bus);
        return;
    }
    start(&r);
    CU_ASSERT_TRUE(wait_rows(&r, CHUNK_ROWS));
    stop_and_join(&r);
    run_free(&r);
    fsgd_agg_stats_t st;
    fsgd_job_t job = r.job;
    job.dist.follow = 0;
    char err[512];
    fsgd_role_env_t env = {.bus = bus, .log = on_log, .ctx = (void *)"agg"};
    int rc = fsgd_aggregator_run(&env, FSGD_JOB_DIST(&job), 1, &st, NULL, NULL, err, sizeof err);
    CU_ASSERT_EQUAL(rc, FSGD_E_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "follow"));
    fsgd_agg_stats_free(&st);
    fsgd_bus_destroy(bus);
    alarm(0);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"rows produced while training: each trained once, versions, progressive AUC rises", test_follow_stream},
        {"restart from an older checkpoint while rows arrive: no row lost or doubled", test_follow_restart},
        {"a follow checkpoint is refused by a job without follow", test_follow_ckpt_mode},
        {NULL, NULL},
    };
    fsgd_test_suite("follow", cases);
}
