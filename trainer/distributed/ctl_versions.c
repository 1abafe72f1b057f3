/* The rows trained and held-out metrics a job recorded on NAME.ctl for its
 * model's steps (fsgd/dist.h, "a job's records of its versions"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/bus.h"
#include "fsgd/clock.h"
#include "fsgd/dist.h"
#include "ctl_versions.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "ctl.h"

struct fsgd_ctl_versions {
    fsgd_bus_client_t *c;
    char job[256], topic[300];
    int assigned;
    int64_t next; /* the next offset to take */
    uint32_t gen; /* the newest job_start's generation */
    fsgd_ctl_version_t *rec; /* by step, increasing */
    size_t n, cap;
};

/* A non-negative integer field (exact below 2^53: steps and rows are). */
static int get_u64(const char *json, size_t len, const char *key, uint64_t *out)
{
    double d;
    if (!fsgd_ctl_get_num(json, len, key, &d) || d < 0 || d > 9007199254740992.0 || d != floor(d))
        return 0;
    *out = (uint64_t)d;
    return 1;
}

/* 1 when json[0..len) is braced as one object: a cut event is not read
 * (the field reader finds fields in any prefix). */
static int braced(const char *json, size_t len)
{
    size_t b = 0, e = len;
    while (b < e && (json[b] == ' ' || json[b] == '\n' || json[b] == '\r' || json[b] == '\t'))
        b++;
    while (e > b && (json[e - 1] == ' ' || json[e - 1] == '\n' || json[e - 1] == '\r' || json[e - 1] == '\t'))
        e--;
    return e - b >= 2 && json[b] == '{' && json[e - 1] == '}';
}

int fsgd_ctl_version_parse(const char *json, size_t len, const char *job, fsgd_ctl_version_t *out)
{
    char event[16], their_job[258], status[16];
    uint64_t step, gen;
    if (!json || !braced(json, len) || !fsgd_ctl_get_str(json, len, "event", event, sizeof event) ||
        !fsgd_ctl_get_str(json, len, "job", their_job, sizeof their_job) || strcmp(their_job, job) ||
        !get_u64(json, len, "gen", &gen) || gen > UINT32_MAX || !get_u64(json, len, "step", &step))
        return FSGD_CTL_VERSION_NONE;
    memset(out, 0, sizeof *out);
    out->step = step;
    out->gen = (uint32_t)gen;
    out->offset = -1;
    out->test_auc = out->test_logloss = NAN;
    if (!strcmp(event, "job_start"))
        return FSGD_CTL_VERSION_RESTART;
    if (!strcmp(event, "model_version")) {
        if (!get_u64(json, len, "rows", &out->rows))
            return FSGD_CTL_VERSION_NONE;
    } else if (!strcmp(event, "epoch_end")) {
        /* every epoch trains each row exactly once */
        uint64_t epoch, dataset_rows;
        if (!get_u64(json, len, "epoch", &epoch) || !get_u64(json, len, "dataset_rows", &dataset_rows) ||
            (dataset_rows && epoch > UINT64_MAX / dataset_rows))
            return FSGD_CTL_VERSION_NONE;
        out->rows = epoch * dataset_rows;
    } else if (!strcmp(event, "job_end")) {
        if (!fsgd_ctl_get_str(json, len, "status", status, sizeof status) || strcmp(status, "done") ||
            !get_u64(json, len, "rows_applied", &out->rows))
            return FSGD_CTL_VERSION_NONE;
    } else {
        return FSGD_CTL_VERSION_NONE;
    }
    snprintf(out->event, sizeof out->event, "%s", event);
    /* test_auc null (not finite, or no test rows) stays NAN */
    if (get_u64(json, len, "test_rows", &out->test_rows) && out->test_rows) {
        double v;
        if (fsgd_ctl_get_num(json, len, "test_auc", &v) && v >= 0 && v <= 1)
            out->test_auc = v;
        if (fsgd_ctl_get_num(json, len, "test_logloss", &v) && v >= 0)
            out->test_logloss = v;
    }
    if (isnan(out->test_auc))
        out->test_rows = 0; /* a held-out count without its AUC says nothing usable */
    return FSGD_CTL_VERSION_RECORD;
}

fsgd_ctl_versions_t *fsgd_ctl_versions_new(struct fsgd_bus *bus, const char *job, char *err, size_t errsz)
{
    fsgd_ctl_versions_t *r = calloc(1, sizeof *r);
    if (!r || strlen(job) >= sizeof r->job) {
        free(r);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s.ctl: out of memory or job name too long", job);
        return NULL;
    }
    if (!(r->c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, errsz))) {
        free(r);
        return NULL;
    }
    snprintf(r->job, sizeof r->job, "%s", job);
    fsgd_kbus_topic(r->topic, sizeof r->topic, job, "ctl");
    return r;
}

void fsgd_ctl_versions_free(fsgd_ctl_versions_t *r)
{
    if (!r)
        return;
    fsgd_bus_client_destroy(r->c);
    free(r->rec);
    free(r);
}

/* The index of the first record whose step is >= step. */
static size_t lower_bound(const fsgd_ctl_versions_t *r, uint64_t step)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->rec[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int add_record(fsgd_ctl_versions_t *r, const fsgd_ctl_version_t *v)
{
    if (v->gen < r->gen)
        return 0; /* an aggregator replaced since */
    size_t i = lower_bound(r, v->step);
    if (i < r->n && r->rec[i].step == v->step) {
        r->rec[i] = *v; /* the newer word on the step (job_end after the last epoch_end) */
        return 0;
    }
    if (r->n == FSGD_CTL_VERSIONS_MAX) {
        if (i == 0)
            return 0; /* older than all kept */
        memmove(r->rec, r->rec + 1, (r->n - 1) * sizeof *r->rec);
        r->n--;
        i--;
    }
    if (r->n == r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 64;
        fsgd_ctl_version_t *p = realloc(r->rec, nc * sizeof *p);
        if (!p)
            return FSGD_E_NOMEM;
        r->rec = p;
        r->cap = nc;
    }
    memmove(r->rec + i + 1, r->rec + i, (r->n - i) * sizeof *r->rec);
    r->rec[i] = *v;
    r->n++;
    return 0;
}

static int take(fsgd_ctl_versions_t *r, const fsgd_bus_msg_t *m)
{
    if (fsgd_ctl_verify(fsgd_bus_client_auth(r->c), m, NULL, 0) < 0)
        return 0;
    fsgd_ctl_version_t v;
    int kind = fsgd_ctl_version_parse(m->val, m->len, r->job, &v);
    if (kind == FSGD_CTL_VERSION_RESTART && v.gen >= r->gen) {
        /* the steps after its resume point are trained again: their old records describe other models */
        r->gen = v.gen;
        r->n = lower_bound(r, v.step + 1);
        return 0;
    }
    if (kind != FSGD_CTL_VERSION_RECORD)
        return 0;
    v.offset = m->offset;
    return add_record(r, &v);
}

int fsgd_ctl_versions_poll(fsgd_ctl_versions_t *r, int timeout_ms, char *err, size_t errsz)
{
    int64_t lo, hi;
    int rc = fsgd_bus_watermarks(r->c, r->topic, 0, &lo, &hi, timeout_ms, err, errsz);
    if (rc < 0)
        return rc == FSGD_E_TIMEOUT ? rc : FSGD_E_KAFKA;
    if (r->next < lo) {
        r->next = lo;
        r->assigned = 0; /* deleted under us (retention): start over at the log start */
    }
    if (hi <= r->next)
        return 0;
    if (!r->assigned) {
        fsgd_bus_tp_t tp = {r->topic, 0, r->next};
        if ((rc = fsgd_bus_assign(r->c, &tp, 1, err, errsz)) < 0)
            return FSGD_E_KAFKA;
        r->assigned = 1;
    }
    double until = fsgd_clock_s() + timeout_ms / 1000.0;
    while (r->next < hi && fsgd_clock_s() < until) {
        fsgd_bus_msg_t *m = fsgd_bus_poll(r->c, 50);
        if (!m)
            continue;
        if (!m->err && m->offset >= r->next) {
            r->next = m->offset + 1;
            rc = m->val ? take(r, m) : 0;
        }
        fsgd_bus_msg_destroy(m);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "%s: out of memory", r->topic);
    }
    if (r->next < hi)
        return fsgd_err_fmt(err, errsz, FSGD_E_TIMEOUT, "%s: offsets %lld to %lld did not arrive in %d ms", r->topic,
                            (long long)r->next, (long long)hi - 1, timeout_ms);
    return 1;
}

int fsgd_ctl_versions_at(const fsgd_ctl_versions_t *r, uint64_t step, fsgd_ctl_version_t *out)
{
    size_t i = lower_bound(r, step);
    if (i >= r->n || r->rec[i].step != step)
        return 0;
    *out = r->rec[i];
    return 1;
}

int fsgd_ctl_versions_newest(const fsgd_ctl_versions_t *r, fsgd_ctl_version_t *out)
{
    if (!r->n)
        return 0;
    *out = r->rec[r->n - 1];
    return 1;
}
