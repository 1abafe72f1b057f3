/* A role's metrics and the run trace: the trace keeps evenly spaced points
 * and the last one within its bound; the aggregator's and a worker's
 * stats come out under the right names, a counter never goes down. */
#include <math.h>
#include <stdlib.h>

#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/observe.h"
#include "trace.h"
#include "testlib.h"
#include "observe_testing.h"

static void test_trace_thinning(void)
{
    fsgd_trace_t *t = calloc(1, sizeof *t);
    const uint64_t offers[] = {1, 7, FSGD_TRACE_MAX, FSGD_TRACE_MAX + 1, 3 * FSGD_TRACE_MAX + 5, 100000};
    for (int k = 0; k < 6; k++) {
        memset(t, 0, sizeof *t);
        for (uint64_t i = 0; i < offers[k]; i++) {
            fsgd_trace_point_t p = {.seconds = (double)i, .loss = 1.0 / (double)(i + 1), .step = i};
            fsgd_trace_add(t, &p);
        }
        CU_ASSERT(t->n >= 1 && t->n <= FSGD_TRACE_MAX);
        CU_ASSERT(offers[k] < FSGD_TRACE_MAX || t->n >= FSGD_TRACE_MAX / 2);
        /* evenly spaced from step 0 */
        for (uint32_t i = 0; i < t->n; i++)
            CU_ASSERT_EQUAL(t->p[i].step, (uint64_t)i * t->stride);
        CU_ASSERT_EQUAL(t->last.step, offers[k] - 1);
        /* written: the kept points, then the last one once */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        fsgd_trace_write_json(f, t, 0.5);
        fclose(f);
        unsigned n = 0;
        CU_ASSERT_EQUAL(sscanf(buf, "\"trace\": {\"points\": %u", &n), 1);
        uint64_t last_kept = t->p[t->n - 1].step;
        CU_ASSERT_EQUAL(n, t->n + (last_kept != offers[k] - 1));
        char want[64];
        snprintf(want, sizeof want, "%llu]", (unsigned long long)(offers[k] - 1));
        CU_ASSERT_PTR_NOT_NULL(strstr(buf, want)); /* the step column ends with the last step */
        CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"seconds_from_step1\": [-0.5000"));
        free(buf);
    }
    /* a non-finite loss is null */
    memset(t, 0, sizeof *t);
    fsgd_trace_point_t p = {.loss = NAN};
    fsgd_trace_add(t, &p);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fsgd_trace_write_json(f, t, 0);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"loss\": [null]"));
    free(buf);
    free(t);
}

static int has_line(const char *text, const char *line)
{
    char l[256];
    snprintf(l, sizeof l, "\n%s\n", line);
    return strstr(text, l) != NULL;
}

static void test_aggregator_metrics(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    snprintf(job.train.codec, sizeof job.train.codec, "fastsgd:b=1.1,tau=128");
    char err[256];
    int port = -1;
    fsgd_agg_stats_t *s = calloc(1, sizeof *s);
    /* without a start the step does nothing */
    s->steps = 1;
    fsgd_observe_agg_step(s, NULL, 0.01);
    CU_ASSERT_EQUAL(s->trace.seen, 0);
    CU_ASSERT_PTR_NULL(fsgd_observe_render());
    int rc = fsgd_observe_start(FSGD_JOB_DIST(&job), "aggregator", 0, NULL, 0, &port, err, sizeof err);
    if (rc < 0) {
        printf("(%s) ", err);
        fsgd_test_skip("cannot listen on 127.0.0.1");
        free(s);
        return;
    }
    CU_ASSERT(port > 0);
    CU_ASSERT_EQUAL(fsgd_observe_start(FSGD_JOB_DIST(&job), "aggregator", 0, NULL, 0, NULL, err, sizeof err), FSGD_E_STATE);
    s->steps = 10;
    s->adam_steps = 10;
    s->rows_total = 2560;
    s->bytes_up = 1000;
    s->bytes_down = 800;
    s->raw_bytes = 4000;
    s->codec_bytes = 1000;
    s->last_loss = 0.5;
    s->loss_ma = 0.25;
    s->t_wait = 1.5;
    s->rejected[FSGD_AGG_REJ_FORGED] = 2;
    s->workers_live = 3;
    fsgd_observe_agg_step(s, NULL, 0.003);
    fsgd_observe_agg_step(s, NULL, -1); /* an empty step: not in the histogram */
    s->steps = 9; /* a total that went back (a restart) */
    /* a real strategy: its live parameters (none of the codec strategies
     * has one yet) add no series */
    fsgd_sagg_t *strat = fsgd_sagg_new("fastsgd", 1000, 1, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(strat);
    fsgd_observe_agg_step(s, strat, 0.2);
    fsgd_sagg_destroy(strat);
    char *t = fsgd_observe_render();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(has_line(t, "fsgd_steps_total 10"));
    CU_ASSERT(has_line(t, "fsgd_rows_total 2560"));
    CU_ASSERT(has_line(t, "fsgd_wire_bytes_total{direction=\"up\",strategy=\"fastsgd\"} 1000"));
    CU_ASSERT(has_line(t, "fsgd_wire_bytes_total{direction=\"down\",strategy=\"fastsgd\"} 800"));
    CU_ASSERT(has_line(t, "fsgd_compression_ratio 4"));
    CU_ASSERT(has_line(t, "fsgd_train_loss 0.5"));
    CU_ASSERT(has_line(t, "fsgd_train_loss_moving_average 0.25"));
    CU_ASSERT(has_line(t, "fsgd_test_auc NaN"));
    CU_ASSERT(has_line(t, "fsgd_phase_seconds_total{phase=\"wait\"} 1.5"));
    CU_ASSERT(has_line(t, "fsgd_rejected_messages_total{reason=\"forged\"} 2"));
    CU_ASSERT(has_line(t, "fsgd_workers_live 3"));
    CU_ASSERT(has_line(t, "fsgd_step_duration_seconds_bucket{le=\"0.0025\"} 0"));
    CU_ASSERT(has_line(t, "fsgd_step_duration_seconds_bucket{le=\"0.005\"} 1"));
    CU_ASSERT(has_line(t, "fsgd_step_duration_seconds_bucket{le=\"0.25\"} 2"));
    CU_ASSERT(has_line(t, "fsgd_step_duration_seconds_count 2"));
    CU_ASSERT(has_line(t, "fsgd_strategy_param{strategy=\"fastsgd\",param=\"b\"} 1.1"));
    CU_ASSERT(has_line(t, "fsgd_strategy_param{strategy=\"fastsgd\",param=\"tau\"} 128"));
    CU_ASSERT_PTR_NULL(strstr(t, "param=\"bits\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "fsgd_job_info{job=\"fsgd\",role=\"aggregator\",worker=\"0\",strategy=\"fastsgd\""));
    CU_ASSERT_PTR_NULL(strstr(t, "fsgd_resyncs_total")); /* a worker's */
    free(t);
    /* a worker's hook does nothing in an aggregator */
    fsgd_worker_stats_t w = {.steps_sent = 99};
    fsgd_observe_worker_step(&w);
    t = fsgd_observe_render();
    CU_ASSERT(has_line(t, "fsgd_steps_total 10"));
    free(t);
    fsgd_observe_stop();
    fsgd_observe_stop();
    CU_ASSERT_PTR_NULL(fsgd_observe_render());
    free(s);
}

/* A sharded job's aggregator: every series carries its shard, the gauges
 * say how many shards and how many weights this one holds; an unsharded one
 * has no shard label and fsgd_shards 1. */
static void test_shard_metrics(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    snprintf(job.train.codec, sizeof job.train.codec, "fastsgd:b=1.1");
    job.train.shards = 4;
    job.dist.shard = 3;
    char err[256];
    if (fsgd_observe_start(FSGD_JOB_DIST(&job), "aggregator", 0, NULL, 0, NULL, err, sizeof err) < 0) {
        fsgd_test_skip("cannot listen on 127.0.0.1");
        return;
    }
    fsgd_agg_stats_t *s = calloc(1, sizeof *s);
    s->steps = 12;
    s->shard = 3;
    s->shards = 4;
    s->weights_held = 250;
    s->t_decode = 0.5;
    s->raw_bytes = 800;
    fsgd_observe_agg_step(s, NULL, 0.003);
    char *t = fsgd_observe_render();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(has_line(t, "fsgd_steps_total{shard=\"3\"} 12"));
    CU_ASSERT(has_line(t, "fsgd_shards{shard=\"3\"} 4"));
    CU_ASSERT(has_line(t, "fsgd_shard_weights{shard=\"3\"} 250"));
    CU_ASSERT(has_line(t, "fsgd_phase_seconds_total{phase=\"decode\",shard=\"3\"} 0.5"));
    CU_ASSERT(has_line(t, "fsgd_gradient_raw_bytes_total{shard=\"3\"} 800"));
    CU_ASSERT(has_line(t, "fsgd_step_duration_seconds_count{shard=\"3\"} 1"));
    CU_ASSERT(has_line(t, "fsgd_strategy_param{strategy=\"fastsgd\",param=\"b\",shard=\"3\"} 1.1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "role=\"aggregator\",worker=\"0\",strategy=\"fastsgd\",version="));
    /* no series without it */
    for (const char *l = t; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (*l != '#' && *l != '\n') {
            const char *end = strchr(l, ' ');
            CU_ASSERT_PTR_NOT_NULL_FATAL(end);
            int labelled = memmem(l, (size_t)(end - l), "shard=\"3\"", 9) != NULL;
            CU_ASSERT(labelled);
            if (!labelled)
                printf("\nno shard label: %.*s", (int)(end - l), l);
        }
    free(t);
    fsgd_observe_stop();
    /* unsharded: one shard, the whole model, no label */
    job.train.shards = 1;
    job.dist.shard = 0;
    if (fsgd_observe_start(FSGD_JOB_DIST(&job), "aggregator", 0, NULL, 0, NULL, err, sizeof err) < 0) {
        fsgd_test_skip("cannot listen on 127.0.0.1");
        free(s);
        return;
    }
    memset(s, 0, sizeof *s);
    s->steps = 2;
    s->weights_held = 1001;
    fsgd_observe_agg_step(s, NULL, 0.003);
    t = fsgd_observe_render();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(has_line(t, "fsgd_steps_total 2"));
    CU_ASSERT(has_line(t, "fsgd_shards 1"));
    CU_ASSERT(has_line(t, "fsgd_shard_weights 1001"));
    CU_ASSERT_PTR_NULL(strstr(t, "shard=\""));
    free(t);
    fsgd_observe_stop();
    free(s);
}

static void test_worker_metrics(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[256];
    if (fsgd_observe_start(FSGD_JOB_DIST(&job), "worker", 7, "127.0.0.1", 0, NULL, err, sizeof err) < 0) {
        fsgd_test_skip("cannot listen on 127.0.0.1");
        return;
    }
    fsgd_worker_stats_t w = {.steps_sent = 5, .rows = 640, .bytes_up = 300, .bytes_down = 200, .resyncs = 1,
                             .duplicates = 4, .t_grad = 0.25, .chain_restarts = 2, .pulls_by_id = 9, .pull_misses = 3};
    fsgd_observe_worker_step(&w);
    fsgd_observe_worker_step(&w); /* the second call times one step */
    char *t = fsgd_observe_render();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(has_line(t, "fsgd_steps_total 5"));
    CU_ASSERT(has_line(t, "fsgd_rows_total 640"));
    CU_ASSERT(has_line(t, "fsgd_wire_bytes_total{direction=\"up\",strategy=\"none\"} 300"));
    CU_ASSERT(has_line(t, "fsgd_resyncs_total 1"));
    CU_ASSERT(has_line(t, "fsgd_chain_restarts_total 2"));
    CU_ASSERT(has_line(t, "fsgd_pulls_by_id_total 9"));
    CU_ASSERT(has_line(t, "fsgd_pull_misses_total 3"));
    CU_ASSERT(has_line(t, "fsgd_rejected_messages_total{reason=\"duplicate\"} 4"));
    CU_ASSERT(has_line(t, "fsgd_phase_seconds_total{phase=\"gradient\"} 0.25"));
    CU_ASSERT(has_line(t, "fsgd_step_duration_seconds_count 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "role=\"worker\",worker=\"7\""));
    CU_ASSERT_PTR_NULL(strstr(t, "phase=\"decode\""));
    CU_ASSERT_PTR_NULL(strstr(t, "fsgd_test_auc"));
    free(t);
    fsgd_observe_stop();
    /* a bad address is refused and nothing stays started */
    CU_ASSERT_EQUAL(fsgd_observe_start(FSGD_JOB_DIST(&job), "worker", 1, "not-an-ip", 0, NULL, err, sizeof err), FSGD_E_IO);
    CU_ASSERT_PTR_NULL(fsgd_observe_render());
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {{"trace_thinning", test_trace_thinning},
                                             {"aggregator_metrics", test_aggregator_metrics},
                                             {"shard_metrics", test_shard_metrics},
                                             {"worker_metrics", test_worker_metrics},
                                             {NULL, NULL}};
    fsgd_test_suite("observe", cases);
}
