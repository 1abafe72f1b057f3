/* What a job recorded on NAME.ctl about its model at a step: the rows it
 * had trained and its held-out metrics, from the aggregator's events
 * (KAFKA_FORMAT.md, "NAME.ctl"): `model_version` (each version of a follow
 * job), `epoch_end` and a `job_end` that is `done` (a batch job's model at
 * an epoch's end, and its final one). A reader of the model topic (fsgd
 * serve) pairs the model it assembled at step S with the record of S.
 *
 * A restarted aggregator (a `job_start` of a newer generation, resuming at
 * step C) re-runs the steps after C, and their models differ: records of
 * steps after C from older generations are dropped, and events of a
 * generation older than the newest `job_start`'s are ignored. */
#ifndef FSGD_CTL_VERSIONS_H
#define FSGD_CTL_VERSIONS_H

#include <stddef.h>
#include <stdint.h>

struct fsgd_bus;

typedef struct fsgd_ctl_version {
    uint64_t step;         /* the model's step */
    uint32_t gen;          /* the aggregator's generation */
    uint64_t rows;         /* rows trained by that step */
    uint64_t test_rows;    /* 0: the job had no --test set */
    double test_auc, test_logloss; /* NAN without test rows (logloss: also for SVM) */
    int64_t offset;        /* of the event on NAME.ctl; -1 when parsed from bytes */
    char event[16];        /* model_version, epoch_end or job_end */
} fsgd_ctl_version_t;

/* What fsgd_ctl_version_parse found in one event. */
enum { FSGD_CTL_VERSION_NONE = 0, FSGD_CTL_VERSION_RECORD = 1, FSGD_CTL_VERSION_RESTART = 2 };

/* One NAME.ctl event (json, len bytes) of job: RECORD with *out filled
 * (a model_version, epoch_end or done job_end of job with a step),
 * RESTART with out->gen and out->step (a job_start: its generation and
 * the step it resumes from), NONE for anything else (another job, another
 * event, a field missing or mistyped). Never reads past len. */
int fsgd_ctl_version_parse(const char *json, size_t len, const char *job, fsgd_ctl_version_t *out);

typedef struct fsgd_ctl_versions fsgd_ctl_versions_t;

/* A reader of job's NAME.ctl on bus (a consumer of its own); reads nothing
 * yet. NULL when out of memory or the client cannot be made (err set). */
fsgd_ctl_versions_t *fsgd_ctl_versions_new(struct fsgd_bus *bus, const char *job, char *err, size_t errsz);
void fsgd_ctl_versions_free(fsgd_ctl_versions_t *r);

/* Reads the events appended since the last poll (the first: from the log
 * start), each checked with fsgd_ctl_verify (the job key's tag when the
 * job has a key; unverified ones are counted and skipped). 1 when
 * anything was read, 0 when nothing was new, FSGD_E_KAFKA (no such topic,
 * a broker down) or FSGD_E_TIMEOUT (the events up to the end seen did not
 * all arrive within timeout_ms; those read are kept) with err set. */
int fsgd_ctl_versions_poll(fsgd_ctl_versions_t *r, int timeout_ms, char *err, size_t errsz);

/* The record of step (1), or 0 when the job recorded none for it. */
int fsgd_ctl_versions_at(const fsgd_ctl_versions_t *r, uint64_t step, fsgd_ctl_version_t *out);
/* The record of the newest step (1), or 0 when there is none. */
int fsgd_ctl_versions_newest(const fsgd_ctl_versions_t *r, fsgd_ctl_version_t *out);
/* Events skipped because they did not verify (no or a wrong tag, another job). */
uint64_t fsgd_ctl_versions_unverified(const fsgd_ctl_versions_t *r);

/* Records kept at most (the newest steps): a follow job's reader stays bounded. */
#define FSGD_CTL_VERSIONS_MAX 4096

#endif
