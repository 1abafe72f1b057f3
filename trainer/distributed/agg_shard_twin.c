/* A second aggregator for a place that is taken (issue 42 item 14): shard I
 * of a job whose shard I is running, started by hand. It used to open a new
 * generation over the live one: the other shards left (exit 70) and the
 * workers waited. Now it asks first on NAME.ctl (aggregator_probe with its
 * shard and a nonce); a live aggregator of that place answers at once
 * (aggregator_alive: generation, step, pid), and the newcomer stops with
 * exit 2 naming it, having written nothing but the probe.
 *
 * Only an aggregator started by hand asks (fsgd run's own, FSGD_RUN_CHILD,
 * are restarted after the old ones are gone), and only when its model
 * partition ends with a message that is not a finished job's: a place
 * nobody ever wrote, or a finished job (agg_check_model_topic), has no one
 * to answer, so a start pays no wait. A crashed one never answers: the
 * newcomer goes on after TWIN_WAIT_S. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aggregator_internal.h"
#include "ctl.h"

/* How long a live aggregator has to answer: it reads NAME.ctl on every turn
 * of its step loop (milliseconds), and a new consumer's first fetch takes
 * about half a second */
#define TWIN_WAIT_S 5.0
/* A probe older than this is history read from the topic's start: not
 * answered */
#define TWIN_PROBE_FRESH_S 30.0

/* One event of this file on NAME.ctl (its own sender: agg_members.c reads
 * NAME.ctl and calls agg_twin_answer) */
static void twin_begin(agg_t *a, const char *event)
{
    fsgd_cj_begin(&a->cj, event, a->job->dist->name);
    fsgd_cj_u64(&a->cj, "gen", a->gen);
    fsgd_cj_u64(&a->cj, "shard", a->shard);
}

static void twin_send(agg_t *a, const char *event)
{
    if (fsgd_cj_end(&a->cj) == 0)
        fsgd_ctl_send(a->prod, a->topic.ctl, a->job->dist->name, event, &a->cj);
}

static int last_not_final(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                          size_t errsz)
{
    (void)partition, (void)offset, (void)err, (void)errsz;
    fsgd_kframe_t f;
    *(int *)ctx = fsgd_kframe_parse_unverified(val, len, &f, NULL, NULL, 0) == 0 && !(f.flags & FSGD_KFLAG_FINAL);
    return 0;
}

/* 1 when this place's model partition ends with a message of a job not
 * finished */
static int place_written(agg_t *a)
{
    int64_t lo, hi;
    int open = 0;
    if (fsgd_bus_watermarks(a->scan_c, a->topic.model, (int32_t)a->shard, &lo, &hi, 10000, NULL, 0) < 0 || hi <= lo)
        return 0;
    const fsgd_bus_range_t last = {.topic = a->topic.model, .partition = (int32_t)a->shard, .start = hi - 1,
                                   .end = hi, .timeout_ms = 5000, .fn = last_not_final, .ctx = &open};
    if (fsgd_bus_read_range(a->scan_c, &last, NULL, 0) < 0)
        return 0;
    return open;
}

int agg_twin_check(agg_t *a)
{
    const char *child = getenv("FSGD_RUN_CHILD");
    if ((child && *child) || !place_written(a))
        return 0;
    char e[256];
    fsgd_bus_client_t *c = fsgd_bus_client_new(a->bus, FSGD_KCLIENT_CONSUMER, e, sizeof e);
    if (!c)
        return 0; /* best effort: the start goes on as before */
    int64_t lo = 0, hi = 0;
    /* below 2^53: JSON numbers are read as doubles */
    uint64_t nonce = (((uint64_t)getpid() << 32) ^ (uint64_t)(agg_now() * 1e6)) & (((uint64_t)1 << 53) - 1);
    fsgd_bus_tp_t tp = {a->topic.ctl, 0, 0};
    int rc = 0;
    if (fsgd_bus_watermarks(c, a->topic.ctl, 0, &lo, &hi, 10000, e, sizeof e) == 0 &&
        (tp.offset = hi, fsgd_bus_assign(c, &tp, 1, e, sizeof e)) == 0) {
        twin_begin(a, "aggregator_probe");
        fsgd_cj_u64(&a->cj, "nonce", nonce);
        twin_send(a, "aggregator_probe");
        fsgd_bus_flush(a->prod, 5000, NULL, 0);
        double t0 = agg_now();
        while (!rc && agg_now() - t0 < TWIN_WAIT_S) {
            fsgd_bus_msg_t *m = fsgd_bus_poll(c, 100);
            if (!m)
                continue;
            char ev[32], why[256];
            double n = -1, gen = 0, step = 0, pid = 0, shard = -1;
            const char *j = m->val;
            if (!m->err && j && fsgd_ctl_verify(fsgd_bus_client_auth(c), m, why, sizeof why) == 0 &&
                fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) && !strcmp(ev, "aggregator_alive") &&
                fsgd_ctl_get_num(j, m->len, "nonce", &n) && n == (double)nonce &&
                fsgd_ctl_get_num(j, m->len, "shard", &shard) && shard == (double)a->shard) {
                fsgd_ctl_get_num(j, m->len, "gen", &gen);
                fsgd_ctl_get_num(j, m->len, "step", &step);
                fsgd_ctl_get_num(j, m->len, "pid", &pid);
                char who[64] = "the aggregator";
                if (a->shards > 1)
                    snprintf(who, sizeof who, "aggregator shard %u", a->shard);
                a->twin = 1;
                rc = fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG,
                                  "%s of job '%s' is running already (pid %.0f, generation %.0f, at step %.0f; it "
                                  "answered on %s): a second one would take the job over and stop the others; stop "
                                  "that one first, or pick another --name",
                                  who, a->job->dist->name, pid, gen, step, a->topic.ctl);
            }
            fsgd_bus_msg_destroy(m);
        }
    }
    fsgd_bus_client_destroy(c);
    return rc;
}

void agg_twin_answer(agg_t *a, const char *json, size_t len)
{
    double shard = -1, nonce = 0, sent = 0;
    if (!a->gen || !fsgd_ctl_get_num(json, len, "shard", &shard) || shard != (double)a->shard ||
        !fsgd_ctl_get_num(json, len, "nonce", &nonce) || !fsgd_ctl_get_num(json, len, "time", &sent) ||
        (double)time(NULL) - sent > TWIN_PROBE_FRESH_S)
        return;
    twin_begin(a, "aggregator_alive");
    fsgd_cj_u64(&a->cj, "nonce", (uint64_t)nonce);
    fsgd_cj_u64(&a->cj, "step", a->step);
    fsgd_cj_i64(&a->cj, "pid", (int64_t)getpid());
    twin_send(a, "aggregator_alive"); /* a following shard too: this is its own place's word */
    char place[32] = "";
    if (a->shards > 1)
        snprintf(place, sizeof place, " for shard %u", a->shard);
    agg_log(a, "another aggregator%s of this job asked whether it runs (%s): told it so; it stops", place, a->topic.ctl);
}
