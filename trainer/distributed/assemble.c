/* Rebuilding a model file from <job>.model: the last complete snapshot plus
 * every later delta of the same generation (deltas hold absolute values, so
 * order within a generation is all that matters). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/bus.h"
#include "fsgd/auth.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/strategy.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "wire.h"

typedef struct asm_state {
    fsgd_kasm_t *as;
    fsgd_model_t m;
    int have;
    uint32_t gen;
    uint64_t step;
    int final;
    fsgd_sparse_t d;
    uint64_t bad;
    uint64_t unauth; /* frames without this job key's tag, skipped */
} asm_state_t;

static int feed(asm_state_t *s, const uint8_t *p, size_t len, char *err, size_t errsz)
{
    fsgd_kframe_t f;
    char e[256];
    int rc = fsgd_kframe_parse(p, len, &f, NULL, e, sizeof e);
    /* With the job key, a frame that is not the job's (a forged snapshot
     * appended to the topic) is skipped, never assembled; without the key an
     * authenticated topic cannot be read at all (the parse says so). */
    if (rc == FSGD_E_AUTH && fsgd_auth_enabled()) {
        s->unauth++;
        return 0;
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "model topic: %s", e);
    if (f.kind == FSGD_KMSG_GRAD)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "model topic: a gradient frame (kind 1) is not a model message");
    const uint8_t *body;
    size_t blen;
    rc = fsgd_kasm_feed(s->as, &f, &body, &blen, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "model topic: %s", e);
    if (rc != FSGD_KASM_DONE)
        return 0;
    fsgd_wire_state_t st = {0};
    size_t off = 0;
    rc = fsgd_wire_state_get(body, blen, &off, &st, e, sizeof e);
    fsgd_wire_state_free(&st);
    if (rc == 0 && (f.flags & FSGD_KFLAG_SECTION)) {
        const uint8_t *sec; /* the strategy's feedback: for workers only */
        size_t slen;
        rc = fsgd_wire_section_get(body, blen, &off, &sec, &slen, e, sizeof e);
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "model message step %llu: %s", (unsigned long long)f.step, e);
    if (f.kind == FSGD_KMSG_SNAPSHOT) {
        fsgd_wire_model_t wm;
        rc = fsgd_wire_model_get(body, blen, &off, &wm, e, sizeof e);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "snapshot step %llu: %s", (unsigned long long)f.step, e);
        if (s->have && f.gen < s->gen)
            return 0;
        fsgd_model_free(&s->m);
        rc = fsgd_model_init(&s->m, (fsgd_loss_kind_t)wm.kind, wm.dim, (int)wm.has_bias, wm.bias);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "snapshot: out of memory");
        fsgd_wire_model_weights(&wm, s->m.w);
        s->have = 1;
        s->gen = f.gen;
        s->step = f.step;
        s->final = (f.flags & FSGD_KFLAG_FINAL) != 0;
        return 0;
    }
    if (!s->have || f.gen != s->gen || f.step <= s->step)
        return 0;
    uint64_t n = s->m.dim + (s->m.has_bias ? 1 : 0);
    if (f.kind == FSGD_KMSG_DELTA_CODED) {
        /* Additive updates: one missing step and the sum is wrong; wait for
         * the next snapshot instead. */
        if (f.step != s->step + 1) {
            s->have = 0;
            return 0;
        }
        fsgd_wire_cdelta_t cd;
        rc = fsgd_wire_cdelta_get(body, blen, &off, &cd, e, sizeof e);
        if (rc == 0)
            rc = fsgd_sworker_downlink_decode(cd.msg, cd.msg_len, n, &s->d, e, sizeof e);
        if (rc == 0)
            rc = fsgd_sworker_downlink_apply(s->m.w, n, &s->d, e, sizeof e);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "coded delta step %llu: %s", (unsigned long long)f.step, e);
        s->step = f.step;
        return 0;
    }
    rc = f.kind == FSGD_KMSG_DELTA_PACKED ? fsgd_wire_pdelta_get(body, blen, &off, n, &s->d, e, sizeof e)
                                          : fsgd_wire_delta_get(body, blen, &off, n, &s->d, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "delta step %llu: %s", (unsigned long long)f.step, e);
    for (size_t i = 0; i < s->d.n; i++)
        s->m.w[s->d.keys[i]] = s->d.vals[i];
    s->step = f.step;
    return 0;
}

static int finish(asm_state_t *s, int require_final, fsgd_model_t *m, uint64_t *step, char *err, size_t errsz)
{
    int rc = 0;
    if (!s->have)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "model topic: no complete snapshot found");
    else if (require_final && !s->final)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                          "model topic: the job's final snapshot is missing (last step %llu); the job is still "
                          "running or was stopped (use --partial to assemble anyway)",
                          (unsigned long long)s->step);
    if (!rc) {
        *m = s->m;
        memset(&s->m, 0, sizeof s->m);
        if (step)
            *step = s->step;
        if (s->unauth)
            fsgd_err_fmt(err, errsz, 0, "skipped %llu messages without this job key's tag",
                         (unsigned long long)s->unauth);
    } else if (s->unauth) {
        size_t n = strlen(err);
        if (n < errsz)
            snprintf(err + n, errsz - n, " (and %llu messages without this job key's tag were skipped)",
                     (unsigned long long)s->unauth);
    }
    fsgd_model_free(&s->m);
    fsgd_sparse_free(&s->d);
    fsgd_kasm_destroy(s->as);
    return rc;
}

int fsgd_model_assemble_stream(const uint8_t *buf, size_t len, int require_final, fsgd_model_t *m, uint64_t *step,
                               char *err, size_t errsz)
{
    asm_state_t s = {0};
    memset(m, 0, sizeof *m);
    if (!(s.as = fsgd_kasm_new()))
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
    size_t off = 0;
    while (off < len) {
        fsgd_kframe_t f;
        size_t used = 0;
        char e[256];
        /* the frame's length first; feed checks its tag */
        int rc = fsgd_kframe_parse_unverified(buf + off, len - off, &f, &used, e, sizeof e);
        if (rc == 0)
            rc = feed(&s, buf + off, used, e, sizeof e);
        if (rc < 0) {
            finish(&s, 0, m, NULL, NULL, 0);
            fsgd_model_free(m);
            return fsgd_err_fmt(err, errsz, rc, "at byte %zu of the stream: %s", off, e);
        }
        off += used;
    }
    return finish(&s, require_final, m, step, err, errsz);
}

typedef struct topic_ctx {
    asm_state_t *s;
} topic_ctx_t;

static int topic_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                     size_t errsz)
{
    topic_ctx_t *t = ctx;
    char e[256];
    int rc = feed(t->s, val, len, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "partition %d offset %lld: %s", (int)partition, (long long)offset, e);
    return 0;
}

int fsgd_model_assemble_topic(const char *brokers, const char *job, int require_final, fsgd_model_t *m,
                              uint64_t *step, char *err, size_t errsz)
{
    fsgd_bus_t *bus = fsgd_bus_kafka_new(brokers, err, errsz);
    if (!bus) {
        memset(m, 0, sizeof *m);
        return FSGD_E_NOMEM;
    }
    int rc = fsgd_model_assemble_topic_bus(bus, job, require_final, m, step, err, errsz);
    fsgd_bus_destroy(bus);
    return rc;
}

int fsgd_model_assemble_topic_bus(struct fsgd_bus *bus, const char *job, int require_final, fsgd_model_t *m,
                                  uint64_t *step, char *err, size_t errsz)
{
    memset(m, 0, sizeof *m);
    char topic[128];
    fsgd_kbus_topic(topic, sizeof topic, job, "model");
    fsgd_bus_client_t *c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, errsz);
    if (!c)
        return FSGD_E_KAFKA;
    asm_state_t s = {0};
    int rc = (s.as = fsgd_kasm_new()) ? 0 : fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
    int64_t lo = 0, hi = 0;
    if (!rc)
        rc = fsgd_bus_watermarks(c, topic, 0, &lo, &hi, 10000, err, errsz);
    topic_ctx_t t = {&s};
    /* A log start past 0 is fine here: the snapshots are there for it. */
    if (!rc)
        /* NAME.model is compacted on real clusters: offsets may skip */
        rc = fsgd_bus_read_range(c, topic, 0, lo, hi, 30000, 1, topic_msg, &t, err, errsz);
    if (!rc)
        rc = finish(&s, require_final, m, step, err, errsz);
    else
        finish(&s, 0, m, NULL, NULL, 0), fsgd_model_free(m);
    fsgd_bus_client_destroy(c);
    return rc;
}
