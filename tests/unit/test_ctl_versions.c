/* The rows trained and held-out metrics a job records on NAME.ctl for its
 * model's steps (fsgd/dist.h), as fsgd serve --brokers reads them:
 * one event parsed (every kind that records a version, and what does not),
 * and the reader on the in-memory bus (read on from where it stopped, a
 * later word on a step replacing an earlier one, an aggregator restarted
 * from an earlier step dropping the records after it, events without the
 * job key's tag skipped). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "bus_mem.h"
#include "fsgd/dist.h"
#include "ctl_versions.h"
#include "fsgd/error.h"
#include "testlib.h"

static int parse(const char *json, fsgd_ctl_version_t *v)
{
    return fsgd_ctl_version_parse(json, strlen(json), "j", v);
}

static void test_parse(void)
{
    fsgd_ctl_version_t v;
    CU_ASSERT_EQUAL(parse("{\"event\": \"model_version\", \"job\": \"j\", \"time\": 1.5, \"gen\": 2, \"version\": 3, "
                          "\"step\": 40, \"rows\": 5000, \"pv_rows\": 1, \"test_rows\": 2000, \"test_auc\": 0.75, "
                          "\"test_logloss\": 0.5, \"positions\": [1, 2]}",
                          &v),
                    FSGD_CTL_VERSION_RECORD);
    CU_ASSERT_EQUAL(v.step, 40);
    CU_ASSERT_EQUAL(v.gen, 2);
    CU_ASSERT_EQUAL(v.rows, 5000);
    CU_ASSERT_EQUAL(v.test_rows, 2000);
    CU_ASSERT_DOUBLE_EQUAL(v.test_auc, 0.75, 0);
    CU_ASSERT_DOUBLE_EQUAL(v.test_logloss, 0.5, 0);
    CU_ASSERT_STRING_EQUAL(v.event, "model_version");
    /* an epoch trains every row once: rows = epoch x dataset_rows */
    CU_ASSERT_EQUAL(parse("{\"event\": \"epoch_end\", \"job\": \"j\", \"gen\": 1, \"epoch\": 3, \"step\": 12, "
                          "\"rows\": 100, \"dataset_rows\": 100, \"test_rows\": 0, \"test_auc\": null, "
                          "\"test_logloss\": null}",
                          &v),
                    FSGD_CTL_VERSION_RECORD);
    CU_ASSERT_EQUAL(v.rows, 300);
    CU_ASSERT_EQUAL(v.test_rows, 0);
    CU_ASSERT(isnan(v.test_auc) && isnan(v.test_logloss));
    CU_ASSERT_EQUAL(parse("{\"event\": \"job_end\", \"job\": \"j\", \"gen\": 1, \"status\": \"done\", \"steps\": 13, "
                          "\"step\": 13, \"rows_applied\": 400, \"test_rows\": 10, \"test_auc\": 0.5, "
                          "\"test_logloss\": null}",
                          &v),
                    FSGD_CTL_VERSION_RECORD);
    CU_ASSERT(v.step == 13 && v.rows == 400 && v.test_rows == 10 && v.test_auc == 0.5 && isnan(v.test_logloss));
    CU_ASSERT_EQUAL(parse("{\"event\": \"job_start\", \"job\": \"j\", \"gen\": 4, \"step\": 20}", &v),
                    FSGD_CTL_VERSION_RESTART);
    CU_ASSERT(v.gen == 4 && v.step == 20);
    /* not records: a failed job, one without the final step (before it was
     * recorded), another job, another event, mistyped fields, no JSON */
    const char *none[] = {
        "{\"event\": \"job_end\", \"job\": \"j\", \"gen\": 1, \"status\": \"failed\", \"step\": 3, \"rows_applied\": 1}",
        "{\"event\": \"job_end\", \"job\": \"j\", \"gen\": 1, \"status\": \"done\", \"steps\": 3, \"rows_applied\": 1}",
        "{\"event\": \"model_version\", \"job\": \"k\", \"gen\": 1, \"step\": 3, \"rows\": 1}",
        "{\"event\": \"model_version\", \"job\": \"jj\", \"gen\": 1, \"step\": 3, \"rows\": 1}",
        "{\"event\": \"worker_joined\", \"job\": \"j\", \"gen\": 1, \"step\": 3}",
        "{\"event\": \"model_version\", \"job\": \"j\", \"gen\": 1, \"step\": -3, \"rows\": 1}",
        "{\"event\": \"model_version\", \"job\": \"j\", \"gen\": 1, \"step\": 3.5, \"rows\": 1}",
        "{\"event\": \"model_version\", \"job\": \"j\", \"gen\": 1, \"step\": \"3\", \"rows\": 1}",
        "{\"event\": \"model_version\", \"job\": \"j\", \"step\": 3, \"rows\": 1}",
        "{\"event\": \"model_version\", \"job\": \"j\", \"gen\": 1, \"step\": 3}",
        "{\"event\": \"epoch_end\", \"job\": \"j\", \"gen\": 1, \"step\": 3, \"epoch\": 1}",
        "{\"event\": \"model_version\", \"job\": \"j\", \"gen\": 1, \"step\": 3, \"rows\": 1",
        "not json",
        "",
    };
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        CU_ASSERT_EQUAL(parse(none[i], &v), FSGD_CTL_VERSION_NONE);
    /* an AUC out of [0, 1] is no AUC */
    CU_ASSERT_EQUAL(parse("{\"event\": \"model_version\", \"job\": \"j\", \"gen\": 1, \"step\": 3, \"rows\": 1, "
                          "\"test_rows\": 5, \"test_auc\": 1.5}",
                          &v),
                    FSGD_CTL_VERSION_RECORD);
    CU_ASSERT(isnan(v.test_auc) && v.test_rows == 0);
}

/* An event on j.ctl, tagged with the job key when one is set (as the
 * aggregator sends it); tag 0: without a tag. */
static void send_event(fsgd_bus_client_t *p, const char *event, const char *json, int tag)
{
    char mac[FSGD_AUTH_TAG_HEX + 1] = "";
    fsgd_auth_t *auth = fsgd_bus_client_auth(p);
    if (tag && fsgd_auth_enabled(auth))
        fsgd_auth_tag_hex(auth, mac, FSGD_AUTH_CTL, event, strlen(event) + 1, json, strlen(json));
    const fsgd_bus_out_t m = {.topic = "j.ctl", .partition = 0, .key = event, .val = json, .len = strlen(json),
                              .job = "j", .kind = "ctl", .mac = mac[0] ? mac : NULL};
    CU_ASSERT_EQUAL(fsgd_bus_produce(p, &m, NULL, 0), 0);
}

static void version(fsgd_bus_client_t *p, unsigned gen, unsigned step, double auc)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"event\": \"model_version\", \"job\": \"j\", \"gen\": %u, \"step\": %u, \"rows\": %u, "
             "\"test_rows\": 100, \"test_auc\": %g, \"test_logloss\": 0.6}",
             gen, step, step * 10, auc);
    send_event(p, "model_version", json, 1);
}

static void test_reader(void)
{
    fsgd_bus_t *bus = fsgd_bus_mem_new();
    CU_ASSERT_EQUAL_FATAL(fsgd_bus_mem_topic(bus, "j.ctl", 1), 0);
    char err[512];
    fsgd_bus_client_t *p = fsgd_bus_client_new(bus, FSGD_KCLIENT_PRODUCER, err, sizeof err);
    fsgd_ctl_versions_t *r = fsgd_ctl_versions_new(bus, "j", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    fsgd_ctl_version_t v;
    CU_ASSERT_EQUAL(fsgd_ctl_versions_poll(r, 2000, err, sizeof err), 0); /* an empty topic */
    CU_ASSERT_EQUAL(fsgd_ctl_versions_newest(r, &v), 0);

    send_event(p, "worker_joined", "{\"event\": \"worker_joined\", \"job\": \"j\", \"gen\": 1, \"step\": 1}", 1);
    version(p, 1, 10, 0.6);
    version(p, 1, 20, 0.7);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_poll(r, 2000, err, sizeof err), 1);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_poll(r, 2000, err, sizeof err), 0); /* nothing new */
    CU_ASSERT(fsgd_ctl_versions_at(r, 10, &v) && v.test_auc == 0.6 && v.rows == 100 && v.offset == 1);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_at(r, 15, &v), 0);
    CU_ASSERT(fsgd_ctl_versions_newest(r, &v) && v.step == 20 && v.offset == 2);

    /* read on: only the new events; the last word on a step wins */
    version(p, 1, 30, 0.8);
    send_event(p, "job_end",
         "{\"event\": \"job_end\", \"job\": \"j\", \"gen\": 1, \"status\": \"done\", \"step\": 30, \"rows_applied\": 333, "
         "\"test_rows\": 100, \"test_auc\": 0.85, \"test_logloss\": 0.4}",
         1);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_poll(r, 2000, err, sizeof err), 1);
    CU_ASSERT(fsgd_ctl_versions_newest(r, &v) && v.step == 30 && v.rows == 333 && v.test_auc == 0.85 &&
              !strcmp(v.event, "job_end") && v.offset == 4);

    /* generation 2 resumes from step 10: steps 20 and 30 are trained again */
    send_event(p, "job_start", "{\"event\": \"job_start\", \"job\": \"j\", \"gen\": 2, \"step\": 10}", 1);
    version(p, 1, 40, 0.9); /* the old aggregator, still writing: not this job's model any more */
    CU_ASSERT_EQUAL(fsgd_ctl_versions_poll(r, 2000, err, sizeof err), 1);
    CU_ASSERT(fsgd_ctl_versions_newest(r, &v) && v.step == 10 && v.test_auc == 0.6);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_at(r, 20, &v), 0);
    version(p, 2, 20, 0.75);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_poll(r, 2000, err, sizeof err), 1);
    CU_ASSERT(fsgd_ctl_versions_at(r, 20, &v) && v.gen == 2 && v.test_auc == 0.75);

    /* with the job key: an event without its tag is skipped */
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    memset(key, 7, sizeof key);
    fsgd_auth_t *auth = fsgd_auth_new(key, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(auth);
    fsgd_bus_set_auth(bus, auth); /* the reader's and the writer's bus */
    send_event(p, "model_version",
         "{\"event\": \"model_version\", \"job\": \"j\", \"gen\": 2, \"step\": 50, \"rows\": 1, \"test_rows\": 1, "
         "\"test_auc\": 1}",
         0);
    version(p, 2, 60, 0.65);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_poll(r, 2000, err, sizeof err), 1);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_at(r, 50, &v), 0);
    CU_ASSERT(fsgd_ctl_versions_newest(r, &v) && v.step == 60);

    fsgd_ctl_versions_free(r);
    fsgd_bus_client_destroy(p);
    fsgd_bus_destroy(bus);
    fsgd_auth_destroy(auth);
}

/* A follow job's reader keeps the newest FSGD_CTL_VERSIONS_MAX steps. */
static void test_bounded(void)
{
    fsgd_bus_t *bus = fsgd_bus_mem_new();
    CU_ASSERT_EQUAL_FATAL(fsgd_bus_mem_topic(bus, "j.ctl", 1), 0);
    char err[512];
    fsgd_bus_client_t *p = fsgd_bus_client_new(bus, FSGD_KCLIENT_PRODUCER, err, sizeof err);
    fsgd_ctl_versions_t *r = fsgd_ctl_versions_new(bus, "j", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    for (unsigned s = 1; s <= FSGD_CTL_VERSIONS_MAX + 10; s++)
        version(p, 1, s, 0.5);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_poll(r, 10000, err, sizeof err), 1);
    fsgd_ctl_version_t v;
    CU_ASSERT_EQUAL(fsgd_ctl_versions_at(r, 10, &v), 0);
    CU_ASSERT_EQUAL(fsgd_ctl_versions_at(r, 11, &v), 1);
    CU_ASSERT(fsgd_ctl_versions_newest(r, &v) && v.step == FSGD_CTL_VERSIONS_MAX + 10);
    fsgd_ctl_versions_free(r);
    fsgd_bus_client_destroy(p);
    fsgd_bus_destroy(bus);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"one event: model_version, epoch_end, job_end done, job_start; what is not a record", test_parse},
        {"the reader: reads on, the last word on a step, a restart, the job key's tags", test_reader},
        {"the reader keeps the newest steps", test_bounded},
        {NULL, NULL},
    };
    fsgd_test_suite("ctl_versions", cases);
}
