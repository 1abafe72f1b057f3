/* What every part of the aggregator reports through: its log hook, the
 * caller's error buffer, the job's statistics and the rejections already
 * logged. A part's functions take this and their own struct (agg_members.h,
 * agg_early.h, agg_clock.h, agg_tune.h, ...), not the whole agg_t.
 * Private to trainer/distributed/agg_*.c and aggregator.c. */
#ifndef FSGD_DIST_AGG_ENV_H
#define FSGD_DIST_AGG_ENV_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "fsgd/dist.h"

typedef struct agg_env {
    fsgd_dist_log_fn log;     /* may be NULL: nothing is said */
    fsgd_agg_step_fn on_step; /* the caller's step hook (may be NULL) */
    void *log_ctx;            /* both hooks' */
    char *err; /* the caller's buffer for an error's text */
    size_t errsz;
    fsgd_agg_stats_t *s;
    uint8_t *logged;         /* FSGD_AGG_REJ_COUNT flags: the reason's first rejection was logged */
    const char *grads_topic; /* NAME.grads: what agg_env_reject names */
} agg_env_t;

void agg_env_log(const agg_env_t *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Counts a dropped message of NAME.grads; the first of each reason is
 * logged with its detail (the rest only counted: a flood must not flood the
 * log too). */
void agg_env_reject(const agg_env_t *e, int reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The same for a message of topic (NAME.ctl, NAME.data). */
void agg_env_reject_on(const agg_env_t *e, const char *topic, int reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The caller's test hook (fsgd_role_env_t.crash; crash may be NULL): once
 * *crash is set, FSGD_E_STATE with *stopped set, so the aggregator ends as
 * a killed process would, publishing nothing. */
int agg_env_crashed(const agg_env_t *e, const volatile sig_atomic_t *crash, int *stopped);

#endif
