/* The distributed roles on the in-memory bus (fsgd/bus.h): an aggregator
 * and N workers as threads of this process, with faults injected by the
 * bus (duplicates, lost and delayed messages, a killed member). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "bus_mem.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/model.h"
#include "testlib.h"

#define MAX_W 4
#define DATA_ROWS 6000
#define PARTS 6

typedef struct run {
    fsgd_bus_t *bus;
    fsgd_bus_t *view[MAX_W];
    fsgd_job_t job;
    int nworkers, expected;
    /* aggregator */
    pthread_t agg_t;
    fsgd_agg_stats_t ast;
    int arc;
    char aerr[512];
    /* workers */
    pthread_t wt[MAX_W];
    int started[MAX_W];
    int killed[MAX_W];
    volatile sig_atomic_t stop[MAX_W];
    volatile sig_atomic_t crash; /* the aggregator's: it stops as a killed process */
    fsgd_worker_stats_t wst[MAX_W];
    int wrc[MAX_W];
    char werr[MAX_W][512];
    int idx[MAX_W];
} run_t;

static run_t *cur; /* the run the threads belong to */

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

static const char *repo_file(const char *rel)
{
    /* unit tests run from the repository root or from build/unit */
    static char p[2][512];
    static int slot;
    char *out = p[slot++ & 1];
    const char *pre[] = {"", "../../", "../"};
    for (int i = 0; i < 3; i++) {
        snprintf(out, 512, "%s%s", pre[i], rel);
        FILE *f = fopen(out, "r");
        if (f) {
            fclose(f);
            return out;
        }
    }
    return NULL;
}

/* NAME.data: the first DATA_ROWS rows of a9a through fsgd_produce_file
 * (one per message, round robin over PARTS partitions), with the job's
 * other topics, as fsgd run makes them before its roles start. */
static int load_data(run_t *r)
{
    const char *path = repo_file("data/sets/a9a");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return -1;
    const char *rows = fsgd_test_tmp("rows.libsvm");
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
    int rc = fsgd_produce_file(&env, FSGD_JOB_DIST(&r->job), rows, PARTS, &st, NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n  produce: %s\n", err);
    CU_ASSERT_EQUAL(st.rows, DATA_ROWS);
    CU_ASSERT_EQUAL(st.partitions, PARTS);
    return rc;
}

/* The job key the runs made from now on carry (NULL: none). */
static fsgd_auth_t *roles_auth;

static void run_init(run_t *r, int nworkers, int epochs)
{
    memset(r, 0, sizeof *r);
    fsgd_job_defaults(&r->job);
    snprintf(r->job.dist.name, sizeof r->job.dist.name, "roles");
    const char *test = repo_file("data/sets/a9a.t");
    snprintf(r->job.train.test, sizeof r->job.train.test, "%s", test ? test : "");
    r->job.train.epochs = epochs;
    r->job.train.batch = 240;
    r->job.train.lr = 0.05;
    r->job.dist.step_timeout_ms = 1500;
    r->job.dist.snapshot_every = 20;
    r->job.train.staleness = 0; /* synchronous unless a test says otherwise */
    r->job.train.quiet = 1;
    r->nworkers = nworkers;
    r->expected = nworkers;
    /* a role that never ends fails the binary (SIGALRM) instead of
     * hanging make test */
    alarm(120);
    r->bus = fsgd_bus_mem_new();
    fsgd_bus_set_auth(r->bus, roles_auth); /* the views start with it */
    for (int i = 0; i < MAX_W; i++) {
        r->view[i] = fsgd_bus_mem_view(r->bus, i + 1);
        r->idx[i] = i;
    }
    cur = r;
}

static void run_free(run_t *r)
{
    fsgd_agg_stats_free(&r->ast);
    fsgd_bus_mem_set_hook(r->bus, NULL, NULL);
    for (int i = 0; i < MAX_W; i++)
        fsgd_bus_destroy(r->view[i]);
    fsgd_bus_destroy(r->bus);
    cur = NULL;
    alarm(0);
}

/* Lines a worker said while waiting on the model (test_aggregator_gone)
 * and for a first snapshot (test_no_aggregator_yet). */
static _Atomic int waits_said, snapshot_waits_said;

/* FSGD_ROLES_LOG=1 shows what the roles say. */
static void on_log(void *ctx, const char *line)
{
    static int show = -1;
    if (strstr(line, "for the model after step") && strstr(line, "from the aggregator"))
        waits_said++;
    if (strstr(line, "for a snapshot of the model on roles.model from the aggregator"))
        snapshot_waits_said++;
    if (show < 0)
        show = getenv("FSGD_ROLES_LOG") != NULL;
    if (show)
        fprintf(stderr, "[%s] %s\n", (const char *)ctx, line);
}

static void *agg_main(void *arg)
{
    run_t *r = arg;
    fsgd_role_env_t env = {.bus = r->bus, .crash = &r->crash, .log = on_log, .ctx = (void *)"agg"};
    r->arc = fsgd_aggregator_run(&env, FSGD_JOB_DIST(&r->job), r->expected, &r->ast, NULL, NULL, r->aerr, sizeof r->aerr);
    return NULL;
}

static void *worker_main(void *arg)
{
    int i = *(int *)arg;
    run_t *r = cur;
    static const char *names[MAX_W] = {"w1", "w2", "w3", "w4"};
    fsgd_role_env_t env = {.bus = r->view[i], .stop = &r->stop[i], .log = on_log, .ctx = (void *)names[i]};
    r->wrc[i] = fsgd_worker_run(&env, FSGD_JOB_DIST(&r->job), (uint32_t)(i + 1), &r->wst[i], NULL, r->werr[i], sizeof r->werr[i]);
    return NULL;
}

static void start_worker(run_t *r, int i)
{
    r->started[i] = pthread_create(&r->wt[i], NULL, worker_main, &r->idx[i]) == 0;
}

static void start(run_t *r)
{
    pthread_create(&r->agg_t, NULL, agg_main, r);
    for (int i = 0; i < r->nworkers; i++)
        start_worker(r, i);
}

/* Waits for the aggregator; workers end on the final model (or are told). */
static void finish(run_t *r)
{
    pthread_join(r->agg_t, NULL);
    if (r->arc)
        fprintf(stderr, "\n  aggregator: %s\n", r->aerr);
    double t0 = now_s();
    for (int i = 0; i < MAX_W; i++) {
        if (!r->started[i])
            continue;
        /* a worker that lost its bus (killed) never sees the end: stop it */
        while (!r->killed[i] && now_s() - t0 < 10) {
            if (pthread_tryjoin_np(r->wt[i], NULL) == 0) {
                r->started[i] = 0;
                break;
            }
            sleep_ms(20);
        }
        if (r->started[i]) {
            r->stop[i] = 1;
            pthread_join(r->wt[i], NULL);
        }
        if (r->wrc[i])
            fprintf(stderr, "\n  worker %d: %s\n", i + 1, r->werr[i]);
    }
}

/* Every epoch applied every row once (the aggregator also fails the run
 * when it does not). */
static void check_epochs(const run_t *r, int epochs)
{
    CU_ASSERT_EQUAL(r->arc, 0);
    CU_ASSERT_EQUAL(r->ast.n_epochs, epochs);
    CU_ASSERT_EQUAL(r->ast.dataset_rows, DATA_ROWS);
    for (int e = 0; e < r->ast.n_epochs; e++)
        CU_ASSERT_EQUAL(r->ast.epochs[e].rows, DATA_ROWS);
}

#define NEED_DATA(r)                                                                                          \
    do {                                                                                                      \
        if (load_data(r) != 0 || !(r)->job.train.test[0]) {                                                        \
            fsgd_test_skip("needs data/sets/a9a and a9a.t");                                                 \
            run_free(r);                                                                                      \
            return;                                                                                           \
        }                                                                                                     \
    } while (0)

/* --- a clean run --- */

static void test_clean(void)
{
    run_t r;
    run_init(&r, 3, 2);
    NEED_DATA(&r);
    snprintf(r.job.train.out, sizeof r.job.train.out, "%s", fsgd_test_tmp("clean.model"));
    start(&r);
    finish(&r);
    check_epochs(&r, 2);
    /* the model topic (last snapshot and the deltas after it) holds the
     * aggregator's final model bit for bit */
    fsgd_model_t saved = {0}, topic = {0};
    char err[512];
    uint64_t step = 0;
    CU_ASSERT_EQUAL(fsgd_model_load(&saved, r.job.train.out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_model_assemble_topic(r.bus, r.job.dist.name, 1, &topic, &step, err, sizeof err), 0);
    CU_ASSERT_EQUAL(step, r.ast.steps);
    CU_ASSERT_TRUE(saved.w && topic.w && saved.dim == topic.dim &&
                   !memcmp(saved.w, topic.w, (saved.dim + (saved.has_bias ? 1 : 0)) * sizeof *saved.w));
    fsgd_model_free(&saved);
    fsgd_model_free(&topic);
    CU_ASSERT_TRUE(r.ast.test.n > 0 && r.ast.test.auc > 0.88);
    for (int i = 0; i < FSGD_AGG_REJ_COUNT; i++)
        CU_ASSERT_EQUAL(r.ast.rejected[i], 0);
    CU_ASSERT_EQUAL(r.ast.workers_dropped, 0);
    CU_ASSERT_EQUAL(r.ast.grads_stale, 0); /* τ = 0 */
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(r.wrc[i], 0);
        CU_ASSERT_TRUE(r.wst[i].rows > 0);
    }
    if (r.ast.test.auc <= 0.88)
        fprintf(stderr, "\n  auc %.4f\n", r.ast.test.auc);
    run_free(&r);
}

/* τ = 0 is synchronous: every step reduces the same rows of the same
 * partitions whatever order the gradients arrive in, so two runs end with
 * the same model bit for bit, one of them with worker 1 always last (the
 * reference for changes to the step). */
/* Worker 1's gradients arrive 3 ms late: a different arrival order. */
static fsgd_bus_fault_t late_w1(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                int *delay_ms)
{
    fsgd_kframe_t f;
    if (!strstr(topic, ".grads") || fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) < 0 || f.sender != 1)
        return FSGD_BUS_DELIVER;
    *delay_ms = 3;
    return FSGD_BUS_DELAY;
}

/* One epoch of nworkers on a9a rows; the model saved, and (ws != NULL)
 * worker 1's statistics. */
static void run_model_epochs(int nworkers, int epochs, fsgd_job_replica_t replica, fsgd_job_optimizer_t optimizer,
                             fsgd_bus_hook_fn hook, void *hook_ctx, fsgd_model_t *m, fsgd_worker_stats_t *ws)
{
    run_t r;
    run_init(&r, nworkers, epochs);
    r.job.dist.replica = replica;
    r.job.train.optimizer = optimizer;
    if (load_data(&r) != 0) {
        run_free(&r);
        return;
    }
    fsgd_bus_mem_set_hook(r.bus, hook, hook_ctx);
    snprintf(r.job.train.out, sizeof r.job.train.out, "%s", fsgd_test_tmp("sync.model"));
    start(&r);
    finish(&r);
    check_epochs(&r, epochs);
    char err[512];
    CU_ASSERT_EQUAL(fsgd_model_load(m, r.job.train.out, err, sizeof err), 0);
    for (int i = 0; i < nworkers; i++)
        CU_ASSERT_EQUAL(r.wrc[i], 0);
    if (ws)
        *ws = r.wst[0];
    run_free(&r);
}

static void run_model_opt(int nworkers, fsgd_job_replica_t replica, fsgd_job_optimizer_t optimizer,
                          fsgd_bus_hook_fn hook, void *hook_ctx, fsgd_model_t *m, fsgd_worker_stats_t *ws)
{
    run_model_epochs(nworkers, 1, replica, optimizer, hook, hook_ctx, m, ws);
}

static void run_model_with(int nworkers, fsgd_job_replica_t replica, fsgd_bus_hook_fn hook, void *hook_ctx,
                           fsgd_model_t *m, fsgd_worker_stats_t *ws)
{
    run_model_opt(nworkers, replica, FSGD_OPTIMIZER_ADAM, hook, hook_ctx, m, ws);
}

static void run_model(int nworkers, fsgd_bus_hook_fn hook, fsgd_model_t *m)
{
    run_model_with(nworkers, FSGD_REPLICA_FULL, hook, NULL, m, NULL);
}

static void test_sync_deterministic(void)
{
    if (!repo_file("data/sets/a9a")) {
        fsgd_test_skip("needs data/sets/a9a");
        return;
    }
    fsgd_model_t a = {0}, b = {0};
    run_model(3, NULL, &a);
    run_model(3, late_w1, &b);
    size_t n = a.dim + (a.has_bias ? 1 : 0);
    CU_ASSERT_TRUE(a.w && b.w && a.dim == b.dim && !memcmp(a.w, b.w, n * sizeof *a.w));
    fsgd_model_free(&a);
    fsgd_model_free(&b);
}

/* --- replica working_set: workers pull their keys' values --- */

/* A random job key (clear_key ends it): the runs made from now on carry
 * it on their bus (run_init), as a process of the job loads its key file. */
static fsgd_auth_t *random_key(void)
{
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(rand() & 0xFF);
    return fsgd_auth_new(key, NULL);
}

static int set_random_key(void)
{
    fsgd_auth_destroy(roles_auth);
    roles_auth = random_key();
    return roles_auth ? 0 : -1;
}

static void clear_key(void)
{
    fsgd_auth_destroy(roles_auth);
    roles_auth = NULL;
}

static int same_model(const fsgd_model_t *a, const fsgd_model_t *b)
{
    size_t n = a->dim + (a->has_bias ? 1 : 0);
    return a->w && b->w && a->dim == b->dim && a->has_bias == b->has_bias && !memcmp(a->w, b->w, n * sizeof *a->w);
}

/* τ = 0 with a lossless codec: a full replica holds the aggregator's θ
 * exactly, and a working-set worker gets θ's values of the step before at
 * its keys, so both compute the same gradients: the same model bit for
 * bit. The model messages carry no values, so they shrink to the state. */
static void test_working_set_same_model(void)
{
    if (!repo_file("data/sets/a9a")) {
        fsgd_test_skip("needs data/sets/a9a");
        return;
    }
    fsgd_model_t full = {0}, ws = {0};
    fsgd_worker_stats_t sf = {0}, sw = {0};
    run_model_with(3, FSGD_REPLICA_FULL, NULL, NULL, &full, &sf);
    run_model_with(3, FSGD_REPLICA_WORKING_SET, NULL, NULL, &ws, &sw);
    CU_ASSERT_TRUE(same_model(&full, &ws));
    /* every step with rows computed on pulled values, none for a full replica */
    CU_ASSERT_TRUE(sw.steps_sent > 0 && sw.pulls > 0 && sw.pulls <= sw.steps_sent && sw.resends == 0);
    CU_ASSERT_TRUE(sw.pulled_keys > sw.pulls && sf.pulls == 0);
    fsgd_model_free(&full);
    fsgd_model_free(&ws);
}

/* Key caching: a batch comes round each epoch (its ranges are the same),
 * so in the second epoch a worker names the key lists the aggregator said
 * it keeps, 24 bytes each, and gets the same values: the model is still
 * the full replicas' bit for bit. */
static void test_working_set_named_lists(void)
{
    if (!repo_file("data/sets/a9a")) {
        fsgd_test_skip("needs data/sets/a9a");
        return;
    }
    fsgd_model_t full = {0}, ws = {0};
    fsgd_worker_stats_t sw = {0};
    run_model_epochs(2, 2, FSGD_REPLICA_FULL, FSGD_OPTIMIZER_ADAM, NULL, NULL, &full, NULL);
    run_model_epochs(2, 2, FSGD_REPLICA_WORKING_SET, FSGD_OPTIMIZER_ADAM, NULL, NULL, &ws, &sw);
    CU_ASSERT_TRUE(same_model(&full, &ws));
    /* about the second epoch's pulls (an epoch's last batches may split otherwise) */
    CU_ASSERT_TRUE(sw.pulls_by_id > 0 && 4 * sw.pulls_by_id >= sw.pulls && 2 * sw.pulls_by_id <= sw.pulls);
    CU_ASSERT_EQUAL(sw.pull_misses, 0);
    if (!(sw.pulls_by_id > 0 && 4 * sw.pulls_by_id >= sw.pulls && 2 * sw.pulls_by_id <= sw.pulls))
        fprintf(stderr, "\n  pulls %llu, by id %llu\n", (unsigned long long)sw.pulls,
                (unsigned long long)sw.pulls_by_id);
    fsgd_model_free(&full);
    fsgd_model_free(&ws);
}

/* FTRL-Proximal on the aggregator: θ of the pulled keys is what it
 * publishes to full replicas, so τ = 0 gives the same model bit for bit. */
static void test_working_set_ftrl(void)
{
    if (!repo_file("data/sets/a9a")) {
        fsgd_test_skip("needs data/sets/a9a");
        return;
    }
    fsgd_model_t full = {0}, ws = {0};
    fsgd_worker_stats_t sw = {0};
    run_model_opt(2, FSGD_REPLICA_FULL, FSGD_OPTIMIZER_FTRL, NULL, NULL, &full, NULL);
    run_model_opt(2, FSGD_REPLICA_WORKING_SET, FSGD_OPTIMIZER_FTRL, NULL, NULL, &ws, &sw);
    CU_ASSERT_TRUE(same_model(&full, &ws));
    CU_ASSERT_TRUE(sw.pulls > 0);
    fsgd_model_free(&full);
    fsgd_model_free(&ws);
}

/* Rows over 2^18 features, 30 a row from a fixed LCG (label: the parity
 * of the first), produced to NAME.data: after one epoch ~110k weights are
 * not zero, so the snapshots that carry them span several chunks. */
#define WIDE_DIM (1u << 18)
static int load_wide_data(run_t *r)
{
    const char *rows = fsgd_test_tmp("wide.libsvm");
    FILE *o = fopen(rows, "w");
    uint64_t x = 12345;
    for (int n = 0; o && n < DATA_ROWS; n++) {
        uint32_t k[30];
        for (int j = 0; j < 30; j++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            k[j] = (uint32_t)((x >> 33) % (WIDE_DIM - 1)) + 1;
        }
        for (int a = 1; a < 30; a++) /* increasing, as LIBSVM wants */
            for (int b = a; b > 0 && k[b - 1] > k[b]; b--) {
                uint32_t t = k[b];
                k[b] = k[b - 1];
                k[b - 1] = t;
            }
        fprintf(o, "%d", (k[0] & 1) ? 1 : -1);
        for (int j = 0; j < 30; j++)
            if (j == 0 || k[j] != k[j - 1])
                fprintf(o, " %u:1", k[j]);
        fputc('\n', o);
    }
    if (!o || fclose(o))
        return -1;
    char err[256];
    fsgd_produce_stats_t st;
    fsgd_role_env_t env = {.bus = r->bus};
    int rc = fsgd_produce_file(&env, FSGD_JOB_DIST(&r->job), rows, PARTS, &st, NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n  produce: %s\n", err);
    return rc;
}

static void run_wide(fsgd_job_replica_t replica, fsgd_model_t *m, fsgd_worker_stats_t *ws)
{
    run_t r;
    run_init(&r, 2, 1);
    r.job.dist.replica = replica;
    r.job.train.dim = WIDE_DIM;
    r.job.train.test[0] = '\0';
    snprintf(r.job.train.codec, sizeof r.job.train.codec, "none");
    if (load_wide_data(&r) != 0) {
        CU_FAIL("wide rows not produced");
        run_free(&r);
        return;
    }
    snprintf(r.job.train.out, sizeof r.job.train.out, "%s", fsgd_test_tmp("wide.model"));
    start(&r);
    finish(&r);
    check_epochs(&r, 1);
    char err[512];
    CU_ASSERT_EQUAL(fsgd_model_load(m, r.job.train.out, err, sizeof err), 0);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(r.wrc[i], 0);
    *ws = r.wst[0];
    run_free(&r);
}

/* Snapshots of several chunks: a working-set worker takes each from its
 * first chunk (the state and the model's header) and leaves the weights
 * unassembled; the model is still the full replicas', bit for bit. */
static void test_working_set_snapshot_heads(void)
{
    fsgd_model_t full = {0}, ws = {0};
    fsgd_worker_stats_t sf = {0}, sw = {0};
    run_wide(FSGD_REPLICA_FULL, &full, &sf);
    run_wide(FSGD_REPLICA_WORKING_SET, &ws, &sw);
    size_t nonzero = 0;
    for (uint64_t i = 0; full.w && i < full.dim; i++)
        nonzero += full.w[i] != 0;
    CU_ASSERT_TRUE(nonzero * 8 > FSGD_KBUS_CHUNK_MAX); /* a sparse snapshot of 2 chunks or more */
    CU_ASSERT_TRUE(same_model(&full, &ws));
    CU_ASSERT_TRUE(sw.snapshot_heads > 0 && sf.snapshot_heads == 0);
    if (!same_model(&full, &ws) || !sw.snapshot_heads || getenv("FSGD_ROLES_LOG"))
        fprintf(stderr, "\n  %zu weights not zero; snapshot heads %llu\n", nonzero,
                (unsigned long long)sw.snapshot_heads);
    fsgd_model_free(&full);
    fsgd_model_free(&ws);
}

/* Faults on the pulls: every pull duplicated, and both answers of a step
 * to each worker lost (the worker asks again after its resend time). */
typedef struct pull_faults {
    _Atomic int lost[MAX_W + 1];
} pull_faults_t;

static fsgd_bus_fault_t pull_faults(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                    int *delay_ms)
{
    pull_faults_t *pf = ctx;
    fsgd_kframe_t f;
    if (fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) < 0)
        return FSGD_BUS_DELIVER;
    if (f.kind == FSGD_KMSG_PULL)
        return FSGD_BUS_DUPLICATE;
    if (f.kind == FSGD_KMSG_VALUES && len >= FSGD_KFRAME_HEADER + 4) {
        uint32_t worker = fsgd_le_get32((const uint8_t *)val + FSGD_KFRAME_HEADER);
        /* both answers of step 3 (the pull came twice): only a resend gets one */
        if (worker >= 1 && worker <= MAX_W && f.step == 3 && pf->lost[worker] < 2) {
            pf->lost[worker]++;
            return FSGD_BUS_DROP;
        }
    }
    return FSGD_BUS_DELIVER;
}

/* Two working-set workers' model with the hook's faults, against one
 * without: 1 when they are the same bit for bit; *st: worker 1's stats. */
static int ws_same_with(fsgd_bus_hook_fn hook, void *ctx, fsgd_worker_stats_t *st)
{
    fsgd_model_t clean = {0}, faulty = {0};
    run_model_with(2, FSGD_REPLICA_WORKING_SET, NULL, NULL, &clean, NULL);
    run_model_with(2, FSGD_REPLICA_WORKING_SET, hook, ctx, &faulty, st);
    int same = same_model(&clean, &faulty);
    fsgd_model_free(&clean);
    fsgd_model_free(&faulty);
    return same;
}

static void test_working_set_faults(void)
{
    if (!repo_file("data/sets/a9a")) {
        fsgd_test_skip("needs data/sets/a9a");
        return;
    }
    fsgd_worker_stats_t st = {0};
    pull_faults_t pf = {0};
    CU_ASSERT_TRUE(ws_same_with(pull_faults, &pf, &st));
    CU_ASSERT_TRUE(pf.lost[1] == 2 && pf.lost[2] == 2);
    CU_ASSERT_TRUE(st.resends >= 1);
}

/* Every answer written twice: in an authenticated job the copy carries the
 * same tag and nonce, a replay (fsgd/replay.h), refused and counted. */
static fsgd_bus_fault_t copy_answers(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                     int *delay_ms)
{
    fsgd_kframe_t f;
    if (fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) == 0 && f.kind == FSGD_KMSG_VALUES) {
        ++*(_Atomic int *)ctx;
        return FSGD_BUS_DUPLICATE;
    }
    return FSGD_BUS_DELIVER;
}

static void test_working_set_replayed_answers(void)
{
    if (!repo_file("data/sets/a9a")) {
        fsgd_test_skip("needs data/sets/a9a");
        return;
    }
    CU_ASSERT_EQUAL_FATAL(set_random_key(), 0);
    _Atomic int copied = 0;
    fsgd_worker_stats_t st = {0};
    CU_ASSERT_TRUE(ws_same_with(copy_answers, &copied, &st));
    CU_ASSERT_TRUE(copied > 0);
    CU_ASSERT_TRUE(st.replayed > 0 && st.replayed <= (uint64_t)copied);
    clear_key();
}

/* Counts the answers coded as halves (byte 20 of a values body). */
static fsgd_bus_fault_t count_halves(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                     int *delay_ms)
{
    fsgd_kframe_t f;
    if (fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) == 0 && f.kind == FSGD_KMSG_VALUES && f.chunk == 0 &&
        f.body_len > 20 && f.body[20] == 1)
        ++*(_Atomic int *)ctx;
    return FSGD_BUS_DELIVER;
}

/* A lossy codec makes the downlink lossy: the values come as halves, and
 * the model is as good. */
static void test_working_set_halves(void)
{
    run_t r;
    run_init(&r, 2, 1);
    r.job.dist.replica = FSGD_REPLICA_WORKING_SET;
    snprintf(r.job.train.codec, sizeof r.job.train.codec, "fastsgd");
    NEED_DATA(&r);
    _Atomic int halves = 0;
    fsgd_bus_mem_set_hook(r.bus, count_halves, &halves);
    start(&r);
    finish(&r);
    check_epochs(&r, 1);
    CU_ASSERT_TRUE(halves > 0 && (uint64_t)halves >= r.wst[0].pulls);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.88);
    if (r.ast.test.auc <= 0.88)
        fprintf(stderr, "\n  auc %.4f\n", r.ast.test.auc);
    run_free(&r);
}

/* Every third answer to a pull stored 40 ms late: later answers (the step
 * ahead's) and model messages pass it. */
static fsgd_bus_fault_t late_answers(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                     int *delay_ms)
{
    fsgd_kframe_t f;
    if (fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) < 0 || f.kind != FSGD_KMSG_VALUES)
        return FSGD_BUS_DELIVER;
    if (++*(_Atomic int *)ctx % 3)
        return FSGD_BUS_DELIVER;
    *delay_ms = 40;
    return FSGD_BUS_DELAY;
}

/* τ = 2 with answers coming late and out of order: every row once, and the
 * model as good. */
static void test_working_set_late_answers(void)
{
    run_t r;
    run_init(&r, 3, 1);
    r.job.dist.replica = FSGD_REPLICA_WORKING_SET;
    r.job.train.staleness = 2;
    NEED_DATA(&r);
    _Atomic int n = 0;
    fsgd_bus_mem_set_hook(r.bus, late_answers, &n);
    start(&r);
    finish(&r);
    check_epochs(&r, 1);
    CU_ASSERT_TRUE(n > 9);
    CU_ASSERT_EQUAL(r.ast.workers_dropped, 0);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.88);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(r.wrc[i], 0);
    run_free(&r);
}

/* Pulls of worker 1 sent before its gradient of the step before: the next
 * step planned and pulled while one is computed. */
typedef struct pull_ahead {
    uint64_t last_grad;
    int ahead, pulls;
} pull_ahead_t;

static fsgd_bus_fault_t count_ahead(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                    int *delay_ms)
{
    pull_ahead_t *pa = ctx;
    fsgd_kframe_t f;
    if (fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) < 0 || f.sender != 1 || f.chunk != 0)
        return FSGD_BUS_DELIVER;
    if (f.kind == FSGD_KMSG_GRAD && f.step > pa->last_grad)
        pa->last_grad = f.step;
    if (f.kind == FSGD_KMSG_PULL) {
        pa->pulls++;
        pa->ahead += f.step > pa->last_grad + 1;
    }
    return FSGD_BUS_DELIVER;
}

/* τ = 2: a worker pulls the step after the one it waits for, so the round
 * trip overlaps the gradient; every row still once, and as good a model. */
static void test_working_set_ahead(void)
{
    run_t r;
    run_init(&r, 2, 1);
    r.job.dist.replica = FSGD_REPLICA_WORKING_SET;
    r.job.train.staleness = 2;
    NEED_DATA(&r);
    pull_ahead_t pa = {0};
    fsgd_bus_mem_set_hook(r.bus, count_ahead, &pa);
    start(&r);
    finish(&r);
    check_epochs(&r, 1);
    CU_ASSERT_TRUE(pa.pulls > 0 && pa.ahead > 0);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.88);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(r.wrc[i], 0);
    if (r.ast.test.auc <= 0.88 || !pa.ahead)
        fprintf(stderr, "\n  auc %.4f, %d of %d pulls ahead\n", r.ast.test.auc, pa.ahead, pa.pulls);
    run_free(&r);
}

/* --- the producer's data summary in place of the aggregator's scan --- */

/* Drops the producer's data_summary event: the aggregator has to scan. */
static fsgd_bus_fault_t no_summary(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                   int *delay_ms)
{
    (void)ctx;
    (void)partition;
    (void)delay_ms;
    return strstr(topic, ".ctl") && val && memmem(val, len, "\"data_summary\"", 14) ? FSGD_BUS_DROP
                                                                                    : FSGD_BUS_DELIVER;
}

typedef struct summary_run {
    fsgd_model_t m;
    int from_summary;
    uint64_t rows;
} summary_run_t;

/* One epoch with 2 workers; extra_row: an outside client appends a row
 * (with the job's tag) after the producer's, so the summary no longer
 * describes the topic. */
static void summary_run(fsgd_bus_hook_fn hook, int extra_row, summary_run_t *out)
{
    run_t r;
    run_init(&r, 2, 1);
    fsgd_bus_mem_set_hook(r.bus, hook, NULL);
    if (load_data(&r) != 0) {
        run_free(&r);
        return;
    }
    char err[512];
    if (extra_row) {
        fsgd_bus_client_t *c = fsgd_bus_client_new(r.bus, FSGD_KCLIENT_DATA_PRODUCER, err, sizeof err);
        const char *row = "+1 3:1 11:1 14:1";
        char mac[FSGD_AUTH_TAG_HEX + 1];
        fsgd_auth_row_tag_hex(roles_auth, mac, 0, row, strlen(row));
        const fsgd_bus_out_t m = {.topic = "roles.data", .partition = 0, .val = row, .len = strlen(row), .mac = mac};
        CU_ASSERT_EQUAL(fsgd_bus_produce(c, &m, err, sizeof err), 0);
        CU_ASSERT_EQUAL(fsgd_bus_flush(c, 5000, err, sizeof err), 0);
        fsgd_bus_client_destroy(c);
    }
    snprintf(r.job.train.out, sizeof r.job.train.out, "%s", fsgd_test_tmp("summary.model"));
    start(&r);
    finish(&r);
    CU_ASSERT_EQUAL(r.arc, 0);
    out->from_summary = r.ast.data_from_summary;
    out->rows = r.ast.dataset_rows;
    CU_ASSERT_EQUAL(fsgd_model_load(&out->m, r.job.train.out, err, sizeof err), 0);
    run_free(&r);
}

static void test_data_summary(void)
{
    if (!repo_file("data/sets/a9a")) {
        fsgd_test_skip("needs data/sets/a9a");
        return;
    }
    /* the summary is trusted only from an authenticated job */
    CU_ASSERT_EQUAL_FATAL(set_random_key(), 0);
    summary_run_t with = {0}, without = {0}, appended = {0};
    summary_run(NULL, 0, &with);
    summary_run(no_summary, 0, &without);
    summary_run(NULL, 1, &appended);
    CU_ASSERT_EQUAL(with.from_summary, 1);
    CU_ASSERT_EQUAL(with.rows, DATA_ROWS);
    CU_ASSERT_EQUAL(without.from_summary, 0);
    CU_ASSERT_EQUAL(without.rows, DATA_ROWS);
    /* what the summary said is what the scan finds: the same model, bit for bit */
    size_t n = with.m.dim + (with.m.has_bias ? 1 : 0);
    CU_ASSERT_TRUE(with.m.w && without.m.w && with.m.dim == without.m.dim &&
                   !memcmp(with.m.w, without.m.w, n * sizeof *with.m.w));
    /* a topic that changed since: scanned, the new row counted */
    CU_ASSERT_EQUAL(appended.from_summary, 0);
    CU_ASSERT_EQUAL(appended.rows, DATA_ROWS + 1);
    fsgd_model_free(&with.m);
    fsgd_model_free(&without.m);
    fsgd_model_free(&appended.m);
    clear_key();
}

/* --- checkpoints paced by their cost, not written at every snapshot --- */

static void test_checkpoint_pacing(void)
{
    CU_ASSERT_FALSE(fsgd_agg_ckpt_due(0.5, 0.1)); /* 0.5 s after one that took 0.1 s: not yet */
    CU_ASSERT_FALSE(fsgd_agg_ckpt_due(1.99, 0.1));
    CU_ASSERT_TRUE(fsgd_agg_ckpt_due(2.0, 0.1));   /* 20 times its cost */
    CU_ASSERT_TRUE(fsgd_agg_ckpt_due(0.001, 0.0)); /* free ones: every snapshot */
    run_t r;
    run_init(&r, 2, 2);
    NEED_DATA(&r);
    r.job.dist.snapshot_every = 1; /* a snapshot every step: 50 steps */
    snprintf(r.job.dist.checkpoint, sizeof r.job.dist.checkpoint, "%s", fsgd_test_tmp("pacing.ckpt"));
    start(&r);
    finish(&r);
    check_epochs(&r, 2);
    /* a9a's tiny model: the first with the first snapshot, then at most 1/FSGD_AGG_CKPT_COST_RATIO of the time */
    CU_ASSERT_TRUE(r.ast.checkpoints >= 1);
    CU_ASSERT_TRUE(r.ast.checkpoints < r.ast.steps);
    CU_ASSERT_TRUE(r.ast.checkpoint_s <= r.ast.seconds / FSGD_AGG_CKPT_COST_RATIO + 0.05);
    if (r.ast.checkpoints >= r.ast.steps)
        fprintf(stderr, "\n  %llu checkpoints in %llu steps\n", (unsigned long long)r.ast.checkpoints,
                (unsigned long long)r.ast.steps);
    run_free(&r);
}

/* --- duplicates: every message of grads and model stored twice --- */

static fsgd_bus_fault_t dup_all(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                int *delay_ms)
{
    return strstr(topic, ".grads") || strstr(topic, ".model") ? FSGD_BUS_DUPLICATE : FSGD_BUS_DELIVER;
}

static void test_duplicates(void)
{
    run_t r;
    run_init(&r, 2, 1);
    NEED_DATA(&r);
    fsgd_bus_mem_set_hook(r.bus, dup_all, NULL);
    start(&r);
    finish(&r);
    check_epochs(&r, 1);
    CU_ASSERT_TRUE(r.ast.rejected[FSGD_AGG_REJ_DUPLICATE] >= r.ast.grads_accepted);
    CU_ASSERT_TRUE(r.wst[0].duplicates > 0 && r.wst[1].duplicates > 0);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.85);
    run_free(&r);
}

/* --- a gap: a model delta lost --- */

/* 1 when a hooked message is a frame on NAME.model (f: its header). */
static int model_frame(const char *topic, const void *val, size_t len, fsgd_kframe_t *f)
{
    return strstr(topic, ".model") && fsgd_kframe_parse_unverified(val, len, f, NULL, NULL, 0) == 0;
}

typedef struct drop_ctx {
    uint64_t step; /* drop the delta of this step (once) */
    int dropped;
} drop_ctx_t;

static fsgd_bus_fault_t drop_delta(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                   int *delay_ms)
{
    drop_ctx_t *d = ctx;
    fsgd_kframe_t f;
    if (!model_frame(topic, val, len, &f))
        return FSGD_BUS_DELIVER;
    if (!d->dropped && f.step == d->step && f.kind != FSGD_KMSG_SNAPSHOT) {
        d->dropped = 1;
        return FSGD_BUS_DROP;
    }
    return FSGD_BUS_DELIVER;
}

/* τ = 0: the lost delta was the last word of its step, so every worker
 * waits for it and nobody sends; after a step timeout the aggregator sends
 * the model again as a snapshot and the job goes on. */
static void test_lost_delta_stall(void)
{
    run_t r;
    run_init(&r, 2, 1);
    NEED_DATA(&r);
    drop_ctx_t d = {.step = 7};
    fsgd_bus_mem_set_hook(r.bus, drop_delta, &d);
    start(&r);
    finish(&r);
    CU_ASSERT_EQUAL(d.dropped, 1);
    check_epochs(&r, 1);
    CU_ASSERT_EQUAL(r.ast.workers_dropped, 2); /* nobody answered step 8 in time */
    CU_ASSERT_EQUAL(r.ast.workers_live, 2);    /* both came back on the snapshot */
    CU_ASSERT_TRUE(r.ast.test.auc > 0.85);
    run_free(&r);
}

/* Model messages take 15 ms: workers with τ > 0 run ahead meanwhile. */
static fsgd_bus_fault_t slow_model(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                   int *delay_ms)
{
    if (!strstr(topic, ".model"))
        return FSGD_BUS_DELIVER;
    *delay_ms = 15;
    return FSGD_BUS_DELAY;
}

static fsgd_bus_fault_t slow_model_drop_delta(void *ctx, const char *topic, int32_t partition, const void *val,
                                              size_t len, int *delay_ms)
{
    fsgd_bus_fault_t f = drop_delta(ctx, topic, partition, val, len, delay_ms);
    return f == FSGD_BUS_DROP ? f : slow_model(ctx, topic, partition, val, len, delay_ms);
}

/* Worker 2's gradients arrive 5 ms late: a step takes that long, so
 * worker 1 reads the model a step at a time and keeps τ gradients in
 * flight. */
static fsgd_bus_fault_t late_w2(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                int *delay_ms)
{
    (void)ctx;
    (void)partition;
    fsgd_kframe_t f;
    if (!strstr(topic, ".grads") || fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) < 0 || f.sender != 2)
        return FSGD_BUS_DELIVER;
    *delay_ms = 5;
    return FSGD_BUS_DELAY;
}

/* Worker 1's gradient of step `step` is lost (once); worker 2's are late. */
static fsgd_bus_fault_t drop_grad(void *ctx, const char *topic, int32_t partition, const void *val,
                                             size_t len, int *delay_ms)
{
    drop_ctx_t *d = ctx;
    fsgd_kframe_t f;
    if (!d->dropped && strstr(topic, ".grads") && fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) == 0 &&
        f.sender == 1 && f.step == d->step) {
        d->dropped = 1;
        return FSGD_BUS_DROP;
    }
    return late_w2(ctx, topic, partition, val, len, delay_ms);
}

/* τ = 2 and a snapshot closing every step: worker 1's gradient of step 10
 * is lost and the aggregator closes the step without it (a step timeout
 * shorter than the worker's resend). A snapshot names no gradient it
 * refused, so the worker learns it from the model's positions: the
 * gradients it sent on top of the lost one start off them and will be
 * refused; it must drop them and start again there. It did not (seen as
 * kafka_worker_kill.sh on a real cluster that never ended: every later
 * gradient of a worker refused as a conflict, ~48 rows/s). */
static void test_lost_grad_snapshots(void)
{
    run_t r;
    run_init(&r, 2, 1);
    NEED_DATA(&r);
    r.job.train.staleness = 2;
    r.job.dist.snapshot_every = 1;
    r.job.dist.step_timeout_ms = 500;
    drop_ctx_t d = {.step = 10};
    fsgd_bus_mem_set_hook(r.bus, drop_grad, &d);
    start(&r);
    finish(&r);
    CU_ASSERT_EQUAL(d.dropped, 1);
    check_epochs(&r, 1);
    /* each restart follows a step closed without the worker (the lost
     * gradient; on a loaded machine a late one may add a drop) and wastes
     * at most the τ = 2 gradients sent on top of it; before, the worker
     * never restarted and every later gradient was refused */
    const uint64_t restarts = r.wst[0].chain_restarts, conflicts = r.ast.rejected[FSGD_AGG_REJ_CONFLICT];
    CU_ASSERT_TRUE(restarts >= 1 && restarts <= r.ast.workers_dropped);
    CU_ASSERT_TRUE(conflicts <= 2 * restarts);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.85);
    if (!(restarts >= 1 && restarts <= r.ast.workers_dropped) || conflicts > 2 * restarts)
        fprintf(stderr, "\n  conflicts %llu, worker 1 restarted %llu times, dropped %llu, steps %llu\n",
                (unsigned long long)conflicts, (unsigned long long)restarts,
                (unsigned long long)r.ast.workers_dropped, (unsigned long long)r.ast.steps);
    run_free(&r);
}

/* τ = 2: later steps go on without the lost delta, so workers see a gap
 * (a delta after the one missing), stop computing on a model they know is
 * wrong, and resync from a snapshot. */
static void test_lost_delta_gap(void)
{
    run_t r;
    run_init(&r, 2, 1);
    NEED_DATA(&r);
    r.job.train.staleness = 2;
    drop_ctx_t d = {.step = 7};
    fsgd_bus_mem_set_hook(r.bus, slow_model_drop_delta, &d);
    start(&r);
    finish(&r);
    CU_ASSERT_EQUAL(d.dropped, 1);
    check_epochs(&r, 1);
    CU_ASSERT_TRUE(r.wst[0].resyncs > 0 && r.wst[1].resyncs > 0);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.85);
    if (!(r.wst[0].resyncs > 0 && r.wst[1].resyncs > 0))
        fprintf(stderr, "\n  resyncs %llu %llu\n", (unsigned long long)r.wst[0].resyncs,
                (unsigned long long)r.wst[1].resyncs);
    run_free(&r);
}

/* --- bounded staleness --- */

static void wait_steps(const run_t *r, uint64_t steps)
{
    double t0 = now_s();
    while (*(volatile uint64_t *)&r->ast.steps < steps && now_s() - t0 < 60)
        sleep_ms(5);
}

/* The generation of the job's aggregator, from its first model message. */
static uint32_t agg_gen(run_t *r)
{
    char t[128], err[256];
    fsgd_kbus_topic(t, sizeof t, r->job.dist.name, "model");
    fsgd_bus_client_t *c = fsgd_bus_client_new(r->bus, FSGD_KCLIENT_CONSUMER, err, sizeof err);
    uint32_t gen = 0;
    double t0 = now_s();
    while (c && !gen && now_s() - t0 < 20) {
        fsgd_bus_tp_t tp = {t, 0, FSGD_BUS_OFFSET_BEGINNING};
        if (fsgd_bus_assign(c, &tp, 1, err, sizeof err) == 0) {
            fsgd_bus_msg_t *m = fsgd_bus_poll(c, 100);
            fsgd_kframe_t f;
            if (m && !m->err && fsgd_kframe_parse_unverified(m->val, m->len, &f, NULL, NULL, 0) == 0)
                gen = f.gen;
            fsgd_bus_msg_destroy(m);
        }
    }
    fsgd_bus_client_destroy(c);
    return gen;
}

/* A gradient frame from worker 1 computed `lag` steps behind. */
static void send_lagged(run_t *r, uint32_t gen, unsigned lag, uint64_t step)
{
    char t[128], err[256];
    fsgd_kbus_topic(t, sizeof t, r->job.dist.name, "grads");
    fsgd_bus_client_t *p = fsgd_bus_client_new(r->bus, FSGD_KCLIENT_PRODUCER, err, sizeof err);
    uint8_t body[64] = {0};
    fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .flags = (uint16_t)(lag << FSGD_KFLAG_LAG_SHIFT), .gen = gen,
                       .sender = 1, .step = step};
    const fsgd_bus_out_t out = {.topic = t, .partition = FSGD_BUS_PARTITION_ANY, .job = r->job.dist.name, .hdr = &h,
                                .val = body, .len = sizeof body};
    CU_ASSERT_EQUAL(fsgd_bus_send(p, &out, NULL, err, sizeof err), 0);
    fsgd_bus_client_destroy(p);
}

static void test_staleness(void)
{
    run_t r;
    run_init(&r, 2, 1);
    NEED_DATA(&r);
    r.job.train.staleness = 2;
    fsgd_bus_mem_set_hook(r.bus, slow_model, NULL);
    start(&r);
    uint32_t gen = agg_gen(&r);
    CU_ASSERT_TRUE(gen != 0);
    /* beyond τ: rejected as stale whatever its step */
    send_lagged(&r, gen, 3, 1000000);
    send_lagged(&r, gen, 200, 5);
    finish(&r);
    check_epochs(&r, 1);
    CU_ASSERT_EQUAL(r.ast.tau, 2);
    /* within τ: taken and counted */
    CU_ASSERT_TRUE(r.ast.grads_stale > 0);
    CU_ASSERT_TRUE(r.ast.lag_max >= 1 && r.ast.lag_max <= 2);
    CU_ASSERT_TRUE(r.ast.rejected[FSGD_AGG_REJ_STALE] >= 2);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.85);
    if (!(r.ast.grads_stale > 0) || r.ast.rejected[FSGD_AGG_REJ_STALE] < 2)
        fprintf(stderr, "\n  stale taken %llu, lag max %u, rejected stale %llu\n",
                (unsigned long long)r.ast.grads_stale, r.ast.lag_max,
                (unsigned long long)r.ast.rejected[FSGD_AGG_REJ_STALE]);
    run_free(&r);
}

/* --- a generation NAME.ctl never announced (issue 27) --- */

/* Copies of the aggregator's first snapshot (one chunk: a9a's 124 weights)
 * with a generation of the caller's choice: valid layout and CRC32C, what
 * anyone who can write to NAME.model could send. Without the job key only
 * the generation check stands in the way. */
static void send_snapshot_as(run_t *r, uint32_t gen)
{
    char t[128], err[256];
    fsgd_kbus_topic(t, sizeof t, r->job.dist.name, "model");
    fsgd_bus_client_t *c = fsgd_bus_client_new(r->bus, FSGD_KCLIENT_CONSUMER, err, sizeof err);
    fsgd_bus_tp_t tp = {t, 0, FSGD_BUS_OFFSET_BEGINNING};
    CU_ASSERT_EQUAL(fsgd_bus_assign(c, &tp, 1, err, sizeof err), 0);
    int sent = 0;
    double t0 = now_s();
    while (!sent && now_s() - t0 < 20) {
        fsgd_bus_msg_t *m = fsgd_bus_poll(c, 100);
        fsgd_kframe_t f;
        if (m && !m->err && fsgd_kframe_parse_unverified(m->val, m->len, &f, NULL, NULL, 0) == 0 &&
            f.kind == FSGD_KMSG_SNAPSHOT && f.nchunks == 1) {
            fsgd_bus_client_t *p = fsgd_bus_client_new(r->bus, FSGD_KCLIENT_PRODUCER, err, sizeof err);
            fsgd_kframe_t h = f;
            h.gen = gen;
            const fsgd_bus_out_t out = {.topic = t, .partition = 0, .job = r->job.dist.name, .hdr = &h, .val = f.body,
                                        .len = f.body_len};
            CU_ASSERT_EQUAL(fsgd_bus_send(p, &out, NULL, err, sizeof err), 0);
            fsgd_bus_client_destroy(p);
            sent = 1;
        }
        fsgd_bus_msg_destroy(m);
    }
    CU_ASSERT_TRUE(sent);
    fsgd_bus_client_destroy(c);
}

/* Mid-job, snapshots of the next generation and of one far ahead: neither
 * was announced by a job_start on NAME.ctl, so no worker takes them (taking
 * one, a worker would follow a model nobody updates and send gradients of
 * a generation the aggregator drops: the job would end with "no live
 * worker"). Each worker counts both as corrupt; every epoch applies every
 * row once. */
static void test_unannounced_generation(void)
{
    run_t r;
    run_init(&r, 2, 2);
    NEED_DATA(&r);
    fsgd_bus_mem_set_hook(r.bus, slow_model, NULL);
    start(&r);
    uint32_t gen = agg_gen(&r);
    CU_ASSERT_TRUE(gen != 0);
    wait_steps(&r, 3);
    send_snapshot_as(&r, gen + 1);
    send_snapshot_as(&r, gen + 100000);
    finish(&r);
    check_epochs(&r, 2);
    CU_ASSERT_EQUAL(r.ast.workers_dropped, 0);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.85);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(r.wrc[i], 0);
        CU_ASSERT_EQUAL(r.wst[i].resyncs, 0); /* never left the aggregator's generation */
        CU_ASSERT_TRUE(r.wst[i].corrupt >= 2);
        if (r.wst[i].corrupt < 2 || r.wst[i].resyncs)
            fprintf(stderr, "\n  worker %d: %llu corrupt, %llu resyncs\n", i + 1,
                    (unsigned long long)r.wst[i].corrupt, (unsigned long long)r.wst[i].resyncs);
    }
    run_free(&r);
}

/* --- membership --- */

/* Why: under a heavy load the test thread could wake only after the job
 * had run its last steps, so a kill or a late join came after the end
 * (seen: a kill at no step at all, live 3 of 3). Until the test has done
 * its part (open), every model message past step `from` reaches the
 * workers 40 ms late: the job cannot outrun the test by more than a step
 * or two, and the action lands mid-job. */
typedef struct gate {
    _Atomic int open;
    uint64_t from;
} gate_t;

static fsgd_bus_fault_t gate_hook(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                  int *delay_ms)
{
    gate_t *g = ctx;
    fsgd_kframe_t f;
    if (g->open || !model_frame(topic, val, len, &f) || f.step < g->from)
        return FSGD_BUS_DELIVER;
    *delay_ms = 40;
    return FSGD_BUS_DELAY;
}

static void late_join_case(fsgd_job_replica_t replica)
{
    run_t r;
    run_init(&r, 2, 2);
    r.job.dist.replica = replica;
    NEED_DATA(&r);
    gate_t gate = {.from = 5};
    fsgd_bus_mem_set_hook(r.bus, gate_hook, &gate);
    start(&r);
    wait_steps(&r, 5);
    uint64_t joined_at = *(volatile uint64_t *)&r.ast.steps;
    start_worker(&r, 2);
    double t0 = now_s(); /* open once it computes a step (or 20 s: the asserts say the rest) */
    while (!*(volatile uint64_t *)&r.wst[2].steps_sent && now_s() - t0 < 20)
        sleep_ms(5);
    gate.open = 1;
    finish(&r);
    check_epochs(&r, 2);
    CU_ASSERT_EQUAL(r.wrc[2], 0);
    CU_ASSERT_TRUE(r.wst[2].rows > 0); /* it took partitions of the others */
    CU_ASSERT_EQUAL(r.ast.workers_live, 3);
    if (!r.wst[2].rows || r.ast.workers_live != 3) /* (seen once under heavy load: say how it ended) */
        fprintf(stderr, "\n  joined at step %llu of %llu; live %llu; its steps %llu\n", (unsigned long long)joined_at,
                (unsigned long long)r.ast.steps, (unsigned long long)r.ast.workers_live,
                (unsigned long long)r.wst[2].steps_sent);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.85);
    if (replica == FSGD_REPLICA_WORKING_SET)
        CU_ASSERT_TRUE(r.wst[2].pulls > 0);
    run_free(&r);
}

static void test_late_join(void)
{
    late_join_case(FSGD_REPLICA_FULL);
}

static void test_late_join_working_set(void)
{
    late_join_case(FSGD_REPLICA_WORKING_SET);
}

/* A worker killed mid-epoch: the aggregator drops it after the step
 * timeout, and the consumer group moves its partitions to the others when
 * its session ends. Every row is still applied once per epoch, and the
 * epoch does not spin through empty steps while the partitions are
 * orphaned (session longer than the step timeout, as in
 * kafka_worker_kill.sh: 6 s against 2 s; before the fix that run made 139
 * steps here, 82 of them empty). */
typedef struct drop_opts {
    fsgd_job_replica_t replica;
    int session_ms, step_timeout_ms, tau;
    int snapshot_every; /* 0: the job's default */
    int slow;           /* model messages stay 40 ms late after the kill: the group moves the partitions mid-epoch */
} drop_opts_t;

static void drop_case_in(const drop_opts_t *o)
{
    run_t r;
    run_init(&r, 3, 2);
    r.job.dist.replica = o->replica;
    if (o->snapshot_every)
        r.job.dist.snapshot_every = o->snapshot_every;
    NEED_DATA(&r);
    r.job.dist.step_timeout_ms = o->step_timeout_ms;
    r.job.train.staleness = o->tau;
    gate_t gate = {.from = 4};
    fsgd_bus_mem_set_hook(r.bus, gate_hook, &gate);
    start(&r);
    wait_steps(&r, 4);
    uint64_t killed_at = *(volatile uint64_t *)&r.ast.steps;
    fsgd_bus_mem_kill(r.bus, 3, o->session_ms);
    r.killed[2] = 1;
    gate.open = !o->slow;
    finish(&r);
    check_epochs(&r, 2);
    /* The killed worker is dropped and never comes back (2 live at the end).
     * A live one may be dropped too when it misses a step timeout (500 ms:
     * seen under ASan on a loaded machine, "dropped 3, live 2"): the
     * aggregator cannot tell slow from dead; it rejoins with its next
     * gradient, and the rows are still applied once (check_epochs). */
    CU_ASSERT_TRUE(r.ast.workers_dropped >= 1);
    CU_ASSERT_EQUAL(r.ast.workers_live, 2);
    if (r.ast.workers_dropped != 1 || r.ast.workers_live != 2) /* (seen under load: say how it ended) */
        fprintf(stderr, "\n  workers dropped %llu, live %llu, steps %llu, empty %llu, killed at step %llu\n",
                (unsigned long long)r.ast.workers_dropped, (unsigned long long)r.ast.workers_live,
                (unsigned long long)r.ast.steps, (unsigned long long)r.ast.empty_steps, (unsigned long long)killed_at);
    CU_ASSERT_TRUE(r.ast.test.auc > 0.85);
    if (o->replica == FSGD_REPLICA_WORKING_SET)
        CU_ASSERT_TRUE(r.wst[0].pulls > 0 && r.wst[1].pulls > 0);
    /* B = 240 of 6000 rows: 25 full steps an epoch */
    uint64_t full = (uint64_t)(DATA_ROWS / r.job.train.batch) * 2;
    CU_ASSERT_TRUE(r.ast.empty_steps <= 4);
    CU_ASSERT_TRUE(r.ast.steps <= full + 20);
    if (r.ast.empty_steps > 4 || r.ast.steps > full + 20 || getenv("FSGD_ROLES_LOG"))
        fprintf(stderr, "\n  %llu steps (%llu full ones) of which %llu empty\n", (unsigned long long)r.ast.steps,
                (unsigned long long)full, (unsigned long long)r.ast.empty_steps);
    run_free(&r);
}

static void drop_case(int session_ms, int step_timeout_ms, int tau)
{
    drop_case_in(&(drop_opts_t){FSGD_REPLICA_FULL, session_ms, step_timeout_ms, tau, 0, 0});
}

/* Working-set workers: the dropped worker's pulls die with it, and the
 * others pull its partitions' keys once they hold them. */
static void test_worker_dropped_working_set(void)
{
    drop_case_in(&(drop_opts_t){FSGD_REPLICA_WORKING_SET, 2500, 500, 2, 0, 0});
}

static void test_worker_dropped(void)
{
    drop_case(2500, 500, 0);
}

/* Kafka's defaults: the session (6 s) ends before the step timeout (10 s). */
static void test_worker_dropped_session_first(void)
{
    drop_case(200, 1000, 0);
}

static void test_worker_dropped_tau(void)
{
    drop_case(2500, 500, 2);
}

/* The same with a snapshot closing every step (no applied list) and slow
 * model messages, so the group moves the partitions mid-epoch while
 * gradients of the old owners are in flight: a worker whose gradient the
 * move makes a conflict learns it from the model's positions only
 * (test_lost_grad_snapshots forces that case; this one is the rebalance
 * of kafka_worker_kill.sh, whose run on a real cluster once never ended). */
static void test_worker_dropped_tau_snapshots(void)
{
    drop_case_in(&(drop_opts_t){FSGD_REPLICA_FULL, 700, 500, 2, 1, 1});
}

/* The aggregator stops as a killed process would (no job_end, nothing more
 * on the model topic): each worker says what it waits for, every 3 step
 * timeouts, then gives up after 60 of them (here 0.2 s: 12 s) with an error
 * naming the aggregator, instead of waiting for ever. */
/* Roles of one process with keys of their own (each bus its own
 * fsgd_bus_set_auth, no process-wide key): a worker holding another key
 * never joins the job (its events refused, the job's refused by it), one
 * holding none stops on the first tagged message, saying so, and one with
 * the job's key trains it. */
static void test_keys_per_role(void)
{
    CU_ASSERT_EQUAL_FATAL(set_random_key(), 0);
    run_t r;
    run_init(&r, 1, 1);
    NEED_DATA(&r);
    fsgd_auth_t *other = random_key();
    CU_ASSERT_PTR_NOT_NULL_FATAL(other);
    fsgd_bus_set_auth(r.view[0], other); /* worker 1: another job's key */
    fsgd_bus_set_auth(r.view[2], NULL);  /* worker 3: none */
    start(&r);
    start_worker(&r, 2);
    pthread_join(r.wt[2], NULL);
    r.started[2] = 0;
    CU_ASSERT_EQUAL(r.wrc[2], FSGD_E_AUTH);
    FSGD_ASSERT_CONTAINS(r.werr[2], "authenticated");
    double t0 = now_s();
    while (now_s() - t0 < 30 && !(*(volatile uint64_t *)&r.wst[0].unauthenticated > 0 &&
                                  *(volatile uint64_t *)&r.ast.rejected[FSGD_AGG_REJ_UNAUTH] > 0))
        sleep_ms(20);
    CU_ASSERT_TRUE(r.wst[0].unauthenticated > 0);
    CU_ASSERT_TRUE(r.ast.rejected[FSGD_AGG_REJ_UNAUTH] > 0);
    r.stop[0] = 1;
    pthread_join(r.wt[0], NULL);
    r.started[0] = 0;
    CU_ASSERT_EQUAL(r.wst[0].steps_sent, 0);
    /* worker 2 has the job's key (its view's, from the bus) */
    start_worker(&r, 1);
    finish(&r);
    check_epochs(&r, 1);
    CU_ASSERT_EQUAL(r.wrc[1], 0);
    CU_ASSERT_TRUE(r.wst[1].steps_sent > 0);
    CU_ASSERT_TRUE(r.ast.test.n > 0 && r.ast.test.auc > 0.88);
    run_free(&r);
    fsgd_auth_destroy(other);
    clear_key();
}

static void test_aggregator_gone(void)
{
    run_t r;
    run_init(&r, 2, 2);
    NEED_DATA(&r);
    r.job.dist.step_timeout_ms = 200;
    waits_said = 0;
    start(&r);
    wait_steps(&r, 3);
    r.crash = 1;
    pthread_join(r.agg_t, NULL);
    CU_ASSERT_EQUAL(r.arc, FSGD_E_STATE);
    if (r.arc != FSGD_E_STATE)
        fprintf(stderr, "\n  aggregator ended with %d (%s) at step %llu\n", r.arc, r.aerr,
                (unsigned long long)r.ast.steps);
    double t0 = now_s();
    for (int i = 0; i < r.nworkers; i++) {
        while (now_s() - t0 < 60 && pthread_tryjoin_np(r.wt[i], NULL) != 0)
            sleep_ms(20);
        if (now_s() - t0 >= 60) { /* still waiting: stop it, and fail */
            r.stop[i] = 1;
            pthread_join(r.wt[i], NULL);
        }
        r.started[i] = 0;
        CU_ASSERT_EQUAL(r.wrc[i], FSGD_E_TIMEOUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.werr[i], "giving up"));
        CU_ASSERT_PTR_NOT_NULL(strstr(r.werr[i], "from the aggregator"));
    }
    double waited = now_s() - t0;
    CU_ASSERT_TRUE(waited >= 11); /* 60 step timeouts without a message, not sooner */
    CU_ASSERT_TRUE(waits_said >= 2 * r.nworkers); /* said every 1 s meanwhile */
    if (r.wrc[0] != FSGD_E_TIMEOUT || waits_said < 2 * r.nworkers)
        fprintf(stderr, "\n  after %.1f s: worker 1: %s; %d waits said\n", waited, r.werr[0], (int)waits_said);
    run_free(&r);
}

/* No aggregator yet: the workers say every 3 step timeouts (1 s here) that
 * they wait for the model's first snapshot, and keep waiting (a job's
 * aggregator may take long to scan its data) until stopped. */
static void test_no_aggregator_yet(void)
{
    run_t r;
    run_init(&r, 2, 1);
    NEED_DATA(&r);
    r.job.dist.step_timeout_ms = 200;
    snapshot_waits_said = 0;
    for (int i = 0; i < r.nworkers; i++)
        start_worker(&r, i);
    double t0 = now_s();
    while (snapshot_waits_said < 2 * r.nworkers && now_s() - t0 < 30)
        sleep_ms(20);
    CU_ASSERT_TRUE(snapshot_waits_said >= 2 * r.nworkers);
    for (int i = 0; i < r.nworkers; i++) {
        CU_ASSERT_EQUAL(pthread_tryjoin_np(r.wt[i], NULL), EBUSY); /* still waiting, not given up */
        r.stop[i] = 1;
        pthread_join(r.wt[i], NULL);
        r.started[i] = 0;
        CU_ASSERT_EQUAL(r.wrc[i], 0);
    }
    run_free(&r);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"a clean run trains a9a rows to a sane AUC", test_clean},
        {"tau 0: two runs end with the same model bit for bit", test_sync_deterministic},
        {"working set, tau 0: the same model as full replicas, bit for bit", test_working_set_same_model},
        {"working set, tau 0, optimizer ftrl: the same model as full replicas", test_working_set_ftrl},
        {"working set: snapshots of several chunks taken from their first", test_working_set_snapshot_heads},
        {"working set, a job key: copies of answers are replays, refused", test_working_set_replayed_answers},
        {"working set: pulls duplicated and answers lost, the same model", test_working_set_faults},
        {"working set with a lossy codec: values as halves, a sane AUC", test_working_set_halves},
        {"working set, tau 2: the next step pulled while one is computed", test_working_set_ahead},
        {"working set, tau 2: answers late and out of order, rows once", test_working_set_late_answers},
        {"working set, 2 epochs: the second names its key lists by id, the same model", test_working_set_named_lists},
        {"the producer's data summary replaces the scan, and only when it fits", test_data_summary},
        {"checkpoints are paced by their cost, not written at every snapshot", test_checkpoint_pacing},
        {"duplicated grads and model messages are dropped, rows once", test_duplicates},
        {"a lost model delta, tau 0: the stalled step ends in a snapshot", test_lost_delta_stall},
        {"a lost model delta, tau 2: the gap makes workers resync", test_lost_delta_gap},
        {"a lost gradient, tau 2, a snapshot every step: the worker starts again at the model's positions",
         test_lost_grad_snapshots},
        {"staleness: within tau taken and counted, beyond rejected", test_staleness},
        {"snapshots of a generation NAME.ctl never announced are not taken", test_unannounced_generation},
        {"a worker joining late takes partitions", test_late_join},
        {"working set: a worker joining late takes partitions and pulls", test_late_join_working_set},
        {"a worker dropped mid-epoch: rows once, no empty steps", test_worker_dropped},
        {"a worker dropped mid-epoch, its session ending first", test_worker_dropped_session_first},
        {"a worker dropped mid-epoch with tau 2", test_worker_dropped_tau},
        {"a worker dropped mid-epoch with tau 2, a snapshot every step", test_worker_dropped_tau_snapshots},
        {"working set: a worker dropped mid-epoch with tau 2", test_worker_dropped_working_set},
        {"job keys per role: another key or none never joins, the job's trains", test_keys_per_role},
        {"the aggregator gone: workers say what they wait for, then give up", test_aggregator_gone},
        {"no aggregator yet: workers say they wait for a snapshot, and wait", test_no_aggregator_yet},
        {NULL, NULL},
    };
    /* FSGD_ROLES_ONLY=text runs the cases whose name holds text */
    const char *only = getenv("FSGD_ROLES_ONLY");
    static fsgd_test_case_t chosen[sizeof cases / sizeof *cases];
    size_t n = 0;
    for (size_t i = 0; cases[i].name; i++)
        if (!only || strstr(cases[i].name, only))
            chosen[n++] = cases[i];
    chosen[n] = (fsgd_test_case_t){NULL, NULL};
    fsgd_test_suite("roles", chosen);
}
