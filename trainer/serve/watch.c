/* New model versions, found off the request threads: the watcher polls each
 * model's file by stat, and a file that changed (another inode after a
 * rename, or another size or mtime) is read, checked and swapped in (slot.h);
 * a topic model is assembled again and a new step swapped in the same way.
 * A version that fails is refused once per file identity: logged, counted,
 * and the one serving keeps serving. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "serve_internal.h"

/* "model NAME: ..." through conf.log (only the watcher has things to say). */
static void serve_log(const fsgd_serve_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void serve_log(const fsgd_serve_t *s, const char *fmt, ...)
{
    if (!s->conf.log)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->conf.log(s->conf.log_ctx, line);
}

/* 1 when st (NULL: stat failed) is the file id remembers. */
static int same_file(const serve_file_id_t *id, const struct stat *st)
{
    if (!st)
        return id->absent;
    return !id->absent && id->dev == st->st_dev && id->ino == st->st_ino && id->size == st->st_size &&
           id->mtime.tv_sec == st->st_mtim.tv_sec && id->mtime.tv_nsec == st->st_mtim.tv_nsec &&
           id->ctime.tv_sec == st->st_ctim.tv_sec && id->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static void remember(serve_file_id_t *id, const struct stat *st)
{
    memset(id, 0, sizeof *id);
    if (!st) {
        id->absent = 1;
        return;
    }
    id->dev = st->st_dev;
    id->ino = st->st_ino;
    id->size = st->st_size;
    id->mtime = st->st_mtim;
    id->ctime = st->st_ctim;
}

static int older(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The whole of the open file fd (its identity in st) into a malloc'd buffer. */
static int read_all(int fd, const struct stat *st, const char *path, void **out, size_t *len, char *err,
                    size_t errsz)
{
    size_t cap = st->st_size > 0 ? (size_t)st->st_size : 1, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory for %zu bytes", path, cap);
    for (;;) {
        if (n == cap) {
            /* The file grew while being read (written in place, not renamed). */
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
            }
            buf = b;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            return fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot read '%s': %s", path, strerror(e));
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* v checked against the version serving (if any) and min_auc: v, or NULL
 * with *rc and err set (v released). */
static serve_version_t *check_against_serving(serve_slot_t *slot, serve_version_t *v, const char *what,
                                              double min_auc, int *rc, char *err, size_t errsz)
{
    pthread_mutex_lock(&slot->lock);
    serve_version_t *cur = slot->cur;
    char why[512];
    int c = cur ? serve_version_compatible(cur, v, why, sizeof why) : 0;
    pthread_mutex_unlock(&slot->lock);
    if (c == 0)
        c = serve_metrics_check_auc(&v->metrics, min_auc, why, sizeof why);
    if (c < 0) {
        *rc = fsgd_err_fmt(err, errsz, c, "%s: %s", what, why);
        serve_version_release(v);
        return NULL;
    }
    return v;
}

/* The metrics JSON of the model file opened with identity mst into *out;
 * what keeps them from describing it goes to out->note (known = 0), and
 * the identity of the file read to f->metrics_id. */
static void load_metrics(serve_file_source_t *f, const fsgd_model_t *m, const struct stat *mst,
                         serve_metrics_t *out)
{
    memset(out, 0, sizeof *out);
    out->test_auc = out->test_logloss = NAN;
    int fd = open(f->metrics_path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(out->note, sizeof out->note, "cannot open '%.200s': %s", f->metrics_path, strerror(errno));
        remember(&f->metrics_id, NULL);
        if (fd >= 0)
            close(fd);
        return;
    }
    remember(&f->metrics_id, &st);
    /* Training writes the model, then its metrics: metrics older than the
     * model describe an earlier one (until they are written again). */
    if (older(&st.st_mtim, &mst->st_mtim)) {
        snprintf(out->note, sizeof out->note, "'%.200s' is older than the model file: it describes an earlier model",
                 f->metrics_path);
        close(fd);
        return;
    }
    void *buf = NULL;
    size_t len = 0;
    char err[512];
    int rc = S_ISREG(st.st_mode) ? read_all(fd, &st, f->metrics_path, &buf, &len, err, sizeof err)
                                 : fsgd_err_fmt(err, sizeof err, FSGD_E_IO, "'%.200s' is not a regular file",
                                                f->metrics_path);
    close(fd);
    if (rc == 0)
        rc = serve_metrics_parse(buf, len, f->metrics_path, m, out, err, sizeof err);
    free(buf);
    if (rc < 0)
        snprintf(out->note, sizeof out->note, "%.310s", err);
}

serve_version_t *serve_watch_load_file(serve_slot_t *slot, double min_auc, int *rcp, char *err, size_t errsz)
{
    serve_file_source_t *f = &slot->file;
    /* Read through one open descriptor: the bytes loaded are those of the
     * inode whose identity is remembered, even if the path is renamed over
     * again meanwhile. */
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        *rcp = fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot open '%s': %s", f->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    remember(&f->id, &st);
    atomic_fetch_add(&slot->reads, 1);
    void *buf = NULL;
    size_t len = 0;
    int rc = S_ISREG(st.st_mode) ? read_all(fd, &st, f->path, &buf, &len, err, errsz)
                                 : fsgd_err_fmt(err, errsz, FSGD_E_IO, "'%s' is not a regular file", f->path);
    close(fd);
    fsgd_model_t m;
    if (rc == 0) {
        rc = fsgd_model_load_mem(&m, buf, len, f->path, 0, err, errsz);
        free(buf);
    }
    if (rc < 0) {
        *rcp = rc;
        return NULL;
    }
    serve_metrics_t mt = {.test_auc = NAN, .test_logloss = NAN};
    if (f->metrics_path[0])
        load_metrics(f, &m, &st, &mt);
    serve_version_t *v = serve_version_new(&m, err, errsz);
    if (!v) {
        *rcp = FSGD_E_FORMAT;
        return NULL;
    }
    v->metrics = mt;
    return check_against_serving(slot, v, f->path, min_auc, rcp, err, errsz);
}

/* The ends (high watermarks) of JOB.model's partitions into ends: their
 * count, or -1 when they cannot be had (the topic is then read whole). */
static int topic_ends(serve_topic_source_t *t, int64_t *ends)
{
    char err[512], topic[300];
    if (!t->client && !(t->client = fsgd_bus_client_new(t->bus, FSGD_KCLIENT_CONSUMER, err, sizeof err)))
        return -1;
    fsgd_kbus_topic(topic, sizeof topic, t->job, "model");
    int n = fsgd_bus_partitions(t->client, topic, 10000, err, sizeof err);
    int64_t lo[FSGD_SHARDS_MAX];
    if (n <= 0 || n > FSGD_SHARDS_MAX ||
        fsgd_bus_watermarks_all(t->client, topic, n, lo, ends, 10000, err, sizeof err) < 0)
        return -1;
    return n;
}

/* Reads on the job's records of its versions (NAME.ctl): 1 new events,
 * 0 none, < 0 when it cannot be read now (err set; the records read
 * before are kept). */
static int ctl_poll(serve_topic_source_t *t, char *err, size_t errsz)
{
    if (!t->ctl && !(t->ctl = fsgd_ctl_versions_new(t->bus, t->job, err, errsz)))
        return FSGD_E_KAFKA;
    return fsgd_ctl_versions_poll(t->ctl, 5000, err, errsz);
}

/* A topic version's metrics from the job's record of its step. */
static void metrics_from_record(serve_version_t *v, const fsgd_ctl_version_t *rec)
{
    v->metrics.known = 1;
    v->metrics.rows = rec->rows;
    v->metrics.test_rows = rec->test_rows;
    v->metrics.test_auc = rec->test_auc;
    v->metrics.test_logloss = rec->test_logloss;
    v->ctl_offset = rec->offset;
}

/* Why a topic version at step has no metrics: the note /model shows. */
static void metrics_note(serve_topic_source_t *t, uint64_t step, int ctl_rc, const char *ctl_err, serve_version_t *v)
{
    fsgd_ctl_version_t newest;
    if (ctl_rc < 0)
        snprintf(v->metrics.note, sizeof v->metrics.note, "cannot read %.200s.ctl: %.100s", t->job, ctl_err);
    else if (t->ctl && fsgd_ctl_versions_newest(t->ctl, &newest))
        snprintf(v->metrics.note, sizeof v->metrics.note,
                 "%.200s.ctl records no metrics for step %llu (a job records them at its versions and epoch ends; "
                 "the newest at step %llu)", t->job, (unsigned long long)step, (unsigned long long)newest.step);
    else
        snprintf(v->metrics.note, sizeof v->metrics.note,
                 "%.200s.ctl records no metrics yet (a job records them at its versions and epoch ends)", t->job);
}

/* --min-auc: the job's newest recorded version, assembled at its step (the
 * steps between versions have no metrics to check). */
static serve_version_t *load_recorded(serve_slot_t *slot, double min_auc, int ctl_rc, const char *ctl_err, int *same,
                                      int *rcp, char *err, size_t errsz)
{
    serve_topic_source_t *t = &slot->topic;
    fsgd_ctl_version_t rec;
    if (!t->ctl || !fsgd_ctl_versions_newest(t->ctl, &rec)) {
        if (ctl_rc < 0)
            *rcp = fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "cannot read %s.ctl for --min-auc: %s", t->job, ctl_err);
        else
            *rcp = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "no held-out AUC to check against --min-auc %g: %s.ctl records no version of the job "
                                "yet (model_version, epoch_end or job_end)", min_auc, t->job);
        return NULL;
    }
    pthread_mutex_lock(&slot->lock);
    /* A refused version is refused once; an older step is never swapped in
     * (after a restart drops the records past its resume point, the version
     * serving stays until the job records a newer one). */
    *same = (slot->cur && (slot->cur->step > rec.step ||
                           (slot->cur->step == rec.step && slot->cur->ctl_offset == rec.offset))) ||
            rec.offset == t->refused_ctl_offset;
    pthread_mutex_unlock(&slot->lock);
    if (*same)
        return NULL;
    fsgd_model_t m;
    uint64_t step = 0;
    atomic_fetch_add(&slot->reads, 1);
    int rc = fsgd_model_assemble_topic_upto(t->bus, t->job, rec.step, &m, &step, err, errsz);
    if (rc == 0 && step != rec.step) {
        fsgd_model_free(&m);
        rc = fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                          "%s.model holds no model at step %llu, the step %s.ctl records (its newest before: step %llu)",
                          t->job, (unsigned long long)rec.step, t->job, (unsigned long long)step);
    }
    if (rc < 0) {
        *rcp = rc;
        return NULL;
    }
    serve_version_t *v = serve_version_new(&m, err, errsz);
    if (!v) {
        *rcp = FSGD_E_FORMAT;
        return NULL;
    }
    v->step = step;
    metrics_from_record(v, &rec);
    char what[300];
    snprintf(what, sizeof what, "%.250s.model step %llu", t->job, (unsigned long long)step);
    v = check_against_serving(slot, v, what, min_auc, rcp, err, errsz);
    if (!v)
        t->refused_ctl_offset = rec.offset;
    return v;
}

serve_version_t *serve_watch_load_topic(serve_slot_t *slot, double min_auc, int *same, int *rcp, char *err,
                                        size_t errsz)
{
    serve_topic_source_t *t = &slot->topic;
    *same = 0;
    char ctl_err[256] = "";
    int ctl_rc = ctl_poll(t, ctl_err, sizeof ctl_err);
    if (min_auc > 0)
        return load_recorded(slot, min_auc, ctl_rc, ctl_err, same, rcp, err, errsz);
    /* The topic only grows (compaction drops older frames, never adds):
     * the same ends as at the last read mean the same model, so a poll of
     * an idle job costs one watermark query, not a read of every frame;
     * unless the job has since recorded its metrics for the step serving
     * (published with the step's model, they follow it). Ends asked before
     * the read: frames written during it are read at the next poll. */
    int64_t ends[FSGD_SHARDS_MAX];
    int n_ends = topic_ends(t, ends);
    fsgd_ctl_version_t rec;
    if (n_ends > 0 && n_ends == t->n_ends && !memcmp(ends, t->ends, (size_t)n_ends * sizeof *ends)) {
        pthread_mutex_lock(&slot->lock);
        uint64_t cur_step = slot->cur ? slot->cur->step : 0;
        int64_t cur_offset = slot->cur ? slot->cur->ctl_offset : -1;
        pthread_mutex_unlock(&slot->lock);
        int64_t offset = t->ctl && fsgd_ctl_versions_at(t->ctl, cur_step, &rec) ? rec.offset : -1;
        if (offset == cur_offset) {
            *same = 1;
            return NULL;
        }
    }
    fsgd_model_t m;
    uint64_t step = 0;
    int whole = 1, rc = 0;
    if (!t->follow && !(t->follow = fsgd_model_follow_new(t->bus, t->job, err, errsz)))
        rc = FSGD_E_KAFKA;
    if (rc == 0)
        rc = fsgd_model_follow_read(t->follow, &m, &step, &whole, err, errsz);
    atomic_fetch_add(whole ? &slot->reads : &slot->delta_reads, 1);
    t->n_ends = rc == 0 ? n_ends : -1;
    if (rc == 0 && n_ends > 0)
        memcpy(t->ends, ends, (size_t)n_ends * sizeof *ends);
    if (rc < 0) {
        *rcp = rc;
        return NULL;
    }
    int recorded = t->ctl && fsgd_ctl_versions_at(t->ctl, step, &rec);
    pthread_mutex_lock(&slot->lock);
    *same = slot->cur && slot->cur->step == step && slot->cur->ctl_offset == (recorded ? rec.offset : -1);
    pthread_mutex_unlock(&slot->lock);
    if (*same) {
        fsgd_model_free(&m);
        return NULL;
    }
    serve_version_t *v = serve_version_new(&m, err, errsz);
    if (!v) {
        *rcp = FSGD_E_FORMAT;
        return NULL;
    }
    v->step = step;
    if (recorded)
        metrics_from_record(v, &rec);
    else
        metrics_note(t, step, ctl_rc, ctl_err, v);
    char what[300];
    snprintf(what, sizeof what, "%.250s.model step %llu", t->job, (unsigned long long)step);
    return check_against_serving(slot, v, what, min_auc, rcp, err, errsz);
}

/* A version that failed its checks: counted, kept for /model, logged. */
static void refuse(fsgd_serve_t *s, serve_slot_t *sl, const char *err)
{
    atomic_fetch_add(&sl->refused, 1);
    fsgd_prom_inc(s->prom, sl->m_refused, 1);
    pthread_mutex_lock(&sl->lock);
    snprintf(sl->last_refusal, sizeof sl->last_refusal, "%.500s", err);
    unsigned long long serving = sl->cur->number;
    pthread_mutex_unlock(&sl->lock);
    serve_log(s, "model %s: new version refused: %s; version %llu keeps serving", sl->name, err, serving);
}

/* A version that passed: swapped in, counted, logged. */
static void accept_version(fsgd_serve_t *s, serve_slot_t *sl, serve_version_t *v, const char *from)
{
    serve_slot_swap(sl, v);
    atomic_fetch_add(&sl->reloads, 1);
    fsgd_prom_inc(s->prom, sl->m_reloads, 1);
    fsgd_prom_set(s->prom, sl->m_version, (double)v->number);
    serve_log(s, "model %s: version %llu from %s (step %llu)", sl->name, (unsigned long long)v->number, from,
              (unsigned long long)v->step);
}

/* One topic slot: its model assembled again; a new step is a new version.
 * A broker that cannot be reached is said once, until a poll works. */
static void poll_topic(fsgd_serve_t *s, serve_slot_t *sl)
{
    char err[1024] = "";
    int same = 0, rc = 0;
    serve_version_t *v = serve_watch_load_topic(sl, s->conf.min_auc, &same, &rc, err, sizeof err);
    if (v || same) {
        sl->topic.failed = 0;
        if (v) {
            char from[300];
            snprintf(from, sizeof from, "%.250s.model", sl->topic.job);
            accept_version(s, sl, v, from);
        }
        return;
    }
    if (rc == FSGD_E_KAFKA || rc == FSGD_E_TIMEOUT) {
        if (!sl->topic.failed)
            serve_log(s, "model %s: cannot read %s.model: %s; version %llu keeps serving", sl->name, sl->topic.job,
                      err, (unsigned long long)sl->cur->number);
        sl->topic.failed = 1;
        return;
    }
    /* The topic still ends with the version refused: refused once. */
    pthread_mutex_lock(&sl->lock);
    int again = !strncmp(err, sl->last_refusal, 500); /* as much as last_refusal keeps */
    pthread_mutex_unlock(&sl->lock);
    if (!again)
        refuse(s, sl, err);
}

/* One file slot: a new version swapped in, a bad one refused, or nothing. */
static void poll_file(fsgd_serve_t *s, serve_slot_t *sl)
{
    serve_file_source_t *f = &sl->file;
    struct stat st, mst;
    if (stat(f->path, &st) < 0) {
        /* Between an unlink and a rename, or gone: keep serving, say it once. */
        if (!f->stat_failed)
            serve_log(s, "model %s: cannot stat '%s' (%s); version %llu keeps serving", sl->name, f->path,
                      strerror(errno), (unsigned long long)sl->cur->number);
        f->stat_failed = 1;
        return;
    }
    f->stat_failed = 0;
    int metrics_same = !f->metrics_path[0] ||
                       same_file(&f->metrics_id, stat(f->metrics_path, &mst) == 0 ? &mst : NULL);
    if (same_file(&f->id, &st) && metrics_same)
        return;
    char err[1024];
    int rc = 0;
    serve_version_t *v = serve_watch_load_file(sl, s->conf.min_auc, &rc, err, sizeof err);
    if (v)
        accept_version(s, sl, v, f->path);
    else
        refuse(s, sl, err);
}

void serve_watch_poll(fsgd_serve_t *s)
{
    for (int i = 0; i < s->n_slots; i++) {
        if (s->slots[i]->from_topic)
            poll_topic(s, s->slots[i]);
        else
            poll_file(s, s->slots[i]);
        atomic_fetch_add(&s->slots[i]->polls, 1);
    }
}

void *serve_watch_main(void *arg)
{
    fsgd_serve_t *s = arg;
    pthread_mutex_lock(&s->wlock);
    while (!s->wstop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += s->conf.poll_ms / 1000;
        until.tv_nsec += (long)(s->conf.poll_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!s->wstop && pthread_cond_timedwait(&s->wcond, &s->wlock, &until) == 0)
            ;
        if (s->wstop)
            break;
        pthread_mutex_unlock(&s->wlock);
        serve_watch_poll(s);
        pthread_mutex_lock(&s->wlock);
    }
    pthread_mutex_unlock(&s->wlock);
    return NULL;
}
