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

#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "agg_clock.h"
#include "agg_twin.h"
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
static void twin_begin(const agg_twin_ctx_t *c, const char *event)
{
    fsgd_cj_begin(c->cj, event, c->job);
    fsgd_cj_u64(c->cj, "gen", c->gen);
    fsgd_cj_u64(c->cj, "shard", c->shard);
}

static void twin_send(const agg_twin_ctx_t *c, const char *event)
{
    if (fsgd_cj_end(c->cj) == 0)
        fsgd_ctl_send(c->prod, c->ctl_topic, c->job, event, c->cj);
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
static int place_written(const agg_twin_ctx_t *c)
{
    int64_t lo, hi;
    int open = 0;
    if (fsgd_bus_watermarks(c->scan_c, c->model_topic, (int32_t)c->shard, &lo, &hi, 10000, NULL, 0) < 0 || hi <= lo)
        return 0;
    const fsgd_bus_range_t last = {.topic = c->model_topic, .partition = (int32_t)c->shard, .start = hi - 1,
                                   .end = hi, .timeout_ms = 5000, .fn = last_not_final, .ctx = &open};
    if (fsgd_bus_read_range(c->scan_c, &last, NULL, 0) < 0)
        return 0;
    return open;
}

int agg_twin_check(agg_twin_t *t, const agg_twin_ctx_t *c, const agg_env_t *e)
{
    const char *child = getenv("FSGD_RUN_CHILD");
    if ((child && *child) || !place_written(c))
        return 0;
    char why_not[256];
    fsgd_bus_client_t *probe = fsgd_bus_client_new(c->bus, FSGD_KCLIENT_CONSUMER, why_not, sizeof why_not);
    if (!probe)
        return 0; /* best effort: the start goes on as before */
    int64_t lo = 0, hi = 0;
    /* below 2^53: JSON numbers are read as doubles */
    uint64_t nonce = (((uint64_t)getpid() << 32) ^ (uint64_t)(agg_now() * 1e6)) & (((uint64_t)1 << 53) - 1);
    fsgd_bus_tp_t tp = {c->ctl_topic, 0, 0};
    int rc = 0;
    if (fsgd_bus_watermarks(probe, c->ctl_topic, 0, &lo, &hi, 10000, why_not, sizeof why_not) == 0 &&
        (tp.offset = hi, fsgd_bus_assign(probe, &tp, 1, why_not, sizeof why_not)) == 0) {
        twin_begin(c, "aggregator_probe");
        fsgd_cj_u64(c->cj, "nonce", nonce);
        twin_send(c, "aggregator_probe");
        fsgd_bus_flush(c->prod, 5000, NULL, 0);
        double t0 = agg_now();
        while (!rc && agg_now() - t0 < TWIN_WAIT_S) {
            fsgd_bus_msg_t *m = fsgd_bus_poll(probe, 100);
            if (!m)
                continue;
            char ev[32], why[256];
            double n = -1, gen = 0, step = 0, pid = 0, shard = -1;
            const char *j = m->val;
            if (!m->err && j && fsgd_ctl_verify(fsgd_bus_client_auth(probe), m, why, sizeof why) == 0 &&
                fsgd_ctl_get_str(j, m->len, "event", ev, sizeof ev) && !strcmp(ev, "aggregator_alive") &&
                fsgd_ctl_get_num(j, m->len, "nonce", &n) && n == (double)nonce &&
                fsgd_ctl_get_num(j, m->len, "shard", &shard) && shard == (double)c->shard) {
                fsgd_ctl_get_num(j, m->len, "gen", &gen);
                fsgd_ctl_get_num(j, m->len, "step", &step);
                fsgd_ctl_get_num(j, m->len, "pid", &pid);
                char who[64] = "the aggregator";
                if (c->shards > 1)
                    snprintf(who, sizeof who, "aggregator shard %u", c->shard);
                t->refused = 1;
                rc = fsgd_err_fmt(e->err, e->errsz, FSGD_E_ARG,
                                  "%s of job '%s' is running already (pid %.0f, generation %.0f, at step %.0f; it "
                                  "answered on %s): a second one would take the job over and stop the others; stop "
                                  "that one first, or pick another --name",
                                  who, c->job, pid, gen, step, c->ctl_topic);
            }
            fsgd_bus_msg_destroy(m);
        }
    }
    fsgd_bus_client_destroy(probe);
    return rc;
}

void agg_twin_answer(const agg_twin_ctx_t *c, const agg_env_t *e, const char *json, size_t len)
{
    double shard = -1, nonce = 0, sent = 0;
    if (!c->gen || !fsgd_ctl_get_num(json, len, "shard", &shard) || shard != (double)c->shard ||
        !fsgd_ctl_get_num(json, len, "nonce", &nonce) || !fsgd_ctl_get_num(json, len, "time", &sent) ||
        (double)time(NULL) - sent > TWIN_PROBE_FRESH_S)
        return;
    twin_begin(c, "aggregator_alive");
    fsgd_cj_u64(c->cj, "nonce", (uint64_t)nonce);
    fsgd_cj_u64(c->cj, "step", c->step);
    fsgd_cj_i64(c->cj, "pid", (int64_t)getpid());
    twin_send(c, "aggregator_alive"); /* a following shard too: this is its own place's word */
    char place[32] = "";
    if (c->shards > 1)
        snprintf(place, sizeof place, " for shard %u", c->shard);
    agg_env_log(e, "another aggregator%s of this job asked whether it runs (%s): told it so; it stops", place, c->ctl_topic);
}
