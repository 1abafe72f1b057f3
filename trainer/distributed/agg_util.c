/* The aggregator's small shared pieces, below every other agg_*.c file:
 * its log and rejection counting, the views of it that its parts take
 * (agg_env, agg_ckpt_ctx, agg_follow_ctx, agg_ctl_ctx, agg_lead_ctx,
 * agg_intake_ctx, agg_publish_ctx), sets of ids, and
 * the test hook that stops it as if killed. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "aggregator_internal.h"

static void env_vlog(const agg_env_t *e, const char *fmt, va_list ap)
{
    if (!e->log)
        return;
    char line[768];
    vsnprintf(line, sizeof line, fmt, ap);
    e->log(e->log_ctx, line);
}

void agg_env_log(const agg_env_t *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    env_vlog(e, fmt, ap);
    va_end(ap);
}

void agg_log(agg_t *a, const char *fmt, ...)
{
    agg_env_t e = agg_env(a);
    va_list ap;
    va_start(ap, fmt);
    env_vlog(&e, fmt, ap);
    va_end(ap);
}

agg_env_t agg_env(agg_t *a)
{
    return (agg_env_t){.log = a->log, .on_step = a->on_step, .log_ctx = a->log_ctx, .err = a->err, .errsz = a->errsz, .s = a->s,
                       .logged = a->logged, .grads_topic = a->topic.grads};
}

agg_ckpt_ctx_t agg_ckpt_ctx(agg_t *a)
{
    return (agg_ckpt_ctx_t){.job = a->job, .ckpt = &a->ckpt, .model = &a->model, .st = &a->st, .gen = &a->gen,
                            .step = &a->step, .open = &a->open, .clock = &a->clock, .follow = &a->follow,
                            .shard = a->shard, .shards = a->shards, .mdim = a->mdim, .gweights = a->gweights};
}

agg_follow_ctx_t agg_follow_ctx(agg_t *a)
{
    return (agg_follow_ctx_t){.job = a->job, .fmt = &a->fmt, .scan_c = a->scan_c, .prod = a->prod, .cj = &a->cj,
                              .data_topic = a->topic.data, .ctl_topic = a->topic.ctl, .gen = a->gen, .dim = a->dim,
                              .test = a->have_test ? &a->test : NULL, .stop = a->stop};
}

agg_ctl_ctx_t agg_ctl_ctx(agg_t *a)
{
    return (agg_ctl_ctx_t){.job = a->job, .prod = a->prod, .ctl_c = a->ctl_c, .cj = &a->cj, .ctl_topic = a->topic.ctl,
                           .auth = a->auth, .replay = a->replay_ctl, .st = &a->st, .shard = a->shard,
                           .shards = a->shards, .gen = a->gen, .step = a->step, .following = a->lead != NULL};
}

agg_lead_ctx_t agg_lead_ctx(agg_t *a)
{
    return (agg_lead_ctx_t){.auth = a->auth, .model_topic = a->topic.model, .data_topic = a->topic.data,
                            .shard = a->shard, .shards = a->shards, .gen = &a->gen, .step = a->step, .mdim = a->mdim,
                            .gweights = a->gweights, .st = &a->st, .open = &a->open, .data = &a->data,
                            .crash = a->crash, .stopped = &a->stopped};
}

agg_intake_ctx_t agg_intake_ctx(agg_t *a)
{
    return (agg_intake_ctx_t){.job = a->job, .intake = &a->intake, .grads_c = a->grads_c, .auth = a->auth,
                              .replay = a->replay_grads, .gen = a->gen, .step = a->step, .gweights = a->gweights,
                              .st = &a->st, .lead = a->lead, .data = &a->data, .open = &a->open,
                              .members = &a->members, .model = &a->model, .pull = &a->pull, .clock = &a->clock,
                              .ctl = agg_ctl_ctx(a),
                              .pull_job = {.prod = a->prod, .pull_topic = a->topic.pull,
                                           .job = a->job->dist->name, .shard = a->shard, .gen = a->gen,
                                           .step = a->step, .mdim = a->mdim}};
}

agg_publish_ctx_t agg_publish_ctx(agg_t *a)
{
    return (agg_publish_ctx_t){.job = a->job, .model = &a->model, .open = &a->open, .st = &a->st, .prod = a->prod,
                               .model_topic = a->topic.model, .gen = a->gen, .shard = a->shard, .shards = a->shards,
                               .step = a->step, .dim = a->dim, .gweights = a->gweights, .nlive = a->members.nlive};
}

#define FSGD_AGG_REJ_NAME_(name, text) text,
static const char *const agg_reject_names[] = {FSGD_AGG_REJECT_LIST(FSGD_AGG_REJ_NAME_)};
#undef FSGD_AGG_REJ_NAME_

const char *fsgd_agg_reject_name(int reason)
{
    return reason >= 0 && reason < FSGD_AGG_REJ_COUNT ? agg_reject_names[reason] : "unknown";
}

static void reject_on(const agg_env_t *e, const char *topic, int reason, const char *fmt, va_list ap)
{
    e->s->rejected[reason]++;
    if (e->logged[reason])
        return;
    e->logged[reason] = 1;
    char why[512];
    vsnprintf(why, sizeof why, fmt, ap);
    agg_env_log(e, "rejected a message on %s: %s: %s (further %s messages are only counted: metrics "
                   "messages.rejected.%s)",
                topic, agg_reject_names[reason], why, agg_reject_names[reason], agg_reject_names[reason]);
}

void agg_env_reject(const agg_env_t *e, int reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reject_on(e, e->grads_topic, reason, fmt, ap);
    va_end(ap);
}

void agg_env_reject_on(const agg_env_t *e, const char *topic, int reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reject_on(e, topic, reason, fmt, ap);
    va_end(ap);
}

void agg_reject(agg_t *a, int reason, const char *fmt, ...)
{
    agg_env_t e = agg_env(a);
    va_list ap;
    va_start(ap, fmt);
    reject_on(&e, a->topic.grads, reason, fmt, ap);
    va_end(ap);
}

void agg_reject_on(agg_t *a, const char *topic, int reason, const char *fmt, ...)
{
    agg_env_t e = agg_env(a);
    va_list ap;
    va_start(ap, fmt);
    reject_on(&e, topic, reason, fmt, ap);
    va_end(ap);
}

/* --- the barrier --- */

int agg_in_set(const uint32_t *s, size_t n, uint32_t v)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == v)
            return 1;
    return 0;
}

int agg_add_set(uint32_t **s, size_t *n, size_t *cap, uint32_t v)
{
    if (agg_in_set(*s, *n, v))
        return 0;
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        uint32_t *ns = realloc(*s, nc * sizeof *ns);
        if (!ns)
            return FSGD_E_NOMEM;
        *s = ns;
        *cap = nc;
    }
    (*s)[(*n)++] = v;
    return 0;
}

int agg_env_crashed(const agg_env_t *e, const volatile sig_atomic_t *crash, int *stopped)
{
    if (!crash || !*crash)
        return 0;
    *stopped = 1;
    return fsgd_err_fmt(e->err, e->errsz, FSGD_E_STATE, "stopped as if killed (fsgd_role_env_t.crash)");
}

int agg_crashed(agg_t *a)
{
    const agg_env_t e = agg_env(a);
    return agg_env_crashed(&e, a->crash, &a->stopped);
}
