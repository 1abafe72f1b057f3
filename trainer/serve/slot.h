/* A named model and its versions (private to trainer/serve).
 *
 * A version is one loaded model, immutable once published, with a
 * reference count: the slot holds one reference to the version serving,
 * and each request holds one while it scores. Swapping in a new version
 * replaces the slot's pointer under its lock and drops the slot's reference
 * to the old one, which the last request holding it frees: requests in
 * flight finish on the version they started with (RCU in spirit, with a
 * counter instead of grace periods). */
#ifndef FSGD_SERVE_SLOT_H
#define FSGD_SERVE_SLOT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fsgd/rowfmt.h"
#include "fsgd/shard.h"
#include "fsgd/model.h"
#include "version_metrics.h"

#define SERVE_NAME_MAX 65

struct fsgd_bus; /* fsgd/bus.h */

typedef struct serve_version {
    atomic_uint refs;
    uint64_t number;  /* 1 for the first version a slot served, then 2, 3, ... */
    fsgd_model_t model;
    fsgd_rowfmt_t fmt; /* the rows model.input says it reads (LIBSVM, hashed LIBSVM, delimited, VW) */
    double loaded_at; /* Unix time, seconds */
    uint64_t step;    /* the model's step: its optimizer state's, 0 when it has none */
    serve_metrics_t metrics; /* rows trained and held-out metrics, when recorded */
} serve_version_t;

/* Identity of a file as stat tells it: another inode (a rename over it),
 * size, mtime or ctime is another file. */
typedef struct serve_file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    int absent; /* stat failed */
} serve_file_id_t;

/* Where new versions come from: a file, polled by stat, or a job's
 * NAME.model topic, assembled (fsgd/dist.h) at every poll. */
typedef struct serve_file_source {
    char path[4096];
    char metrics_path[4096]; /* its metrics JSON (fsgd train --metrics-json), or "" */
    /* Identities of the files last tried (loaded or refused), so that one
     * bad file is refused once, not at every poll; a change of either is
     * tried again. */
    serve_file_id_t id, metrics_id;
    int stat_failed; /* the last stat failed (logged once until it works again) */
} serve_file_source_t;

/* A job's model topic: a new step is a new version. */
typedef struct serve_topic_source {
    char brokers[1024];
    char job[256];
    struct fsgd_bus *bus;              /* kept between polls */
    struct fsgd_bus_client *client;    /* asks the topic's ends at each poll */
    int failed;                        /* the last poll failed (logged once until one works) */
    /* The topic's partition ends when it was last read whole: a poll that
     * finds the same ends has nothing new to read (n_ends -1: read again). */
    int n_ends;
    int64_t ends[FSGD_SHARDS_MAX];
} serve_topic_source_t;

typedef struct serve_slot {
    char name[SERVE_NAME_MAX];
    int from_topic; /* 1: topic, 0: file */
    serve_topic_source_t topic;
    pthread_mutex_t lock;
    serve_version_t *cur; /* the slot's reference; under lock */
    serve_file_source_t file;
    /* Counters of the watcher (read by /model and /metrics). */
    atomic_ullong reloads, refused;
    atomic_ullong polls; /* the watcher's checks of the source, done */
    atomic_ullong reads; /* of them, and at start: the source read whole (a file, or the topic assembled) */
    /* Scoring requests answered 200 and their rows (copied into the
     * registry when /metrics renders). */
    atomic_ullong requests, rows;
    char last_refusal[512]; /* under lock */
    /* Series ids in the server's metrics registry. */
    int m_requests, m_rows, m_latency, m_version, m_age, m_reloads, m_refused;
} serve_slot_t;

double serve_now(void); /* Unix time in seconds (a version's loaded_at) */

/* The slot of slots[0..n) called name[0..len), or NULL. */
serve_slot_t *serve_slots_find(serve_slot_t *const *slots, int n, const char *name, size_t len);

/* A new version owning m (m is zeroed); refs 1 (the caller's). NULL when
 * out of memory (m is then freed) or the model's input does not parse as a
 * row format (err set). */
serve_version_t *serve_version_new(fsgd_model_t *m, char *err, size_t errsz);

/* Drops one reference; the last frees the version. NULL is a no-op. */
void serve_version_release(serve_version_t *v);

/* The version serving, with a reference for the caller to release. */
serve_version_t *serve_slot_acquire(serve_slot_t *s);

/* Publishes v (taking the caller's reference) with the next version
 * number, and releases the slot's reference to the old one. */
void serve_slot_swap(serve_slot_t *s, serve_version_t *v);

/* 0 when next may replace cur (same loss, dimension, intercept and
 * hashing); otherwise FSGD_E_FORMAT with err saying what differs. */
int serve_version_compatible(const serve_version_t *cur, const serve_version_t *next, char *err, size_t errsz);

#endif
