/* The first pass of fsgd train --cache, or the reuse of its cache; see
 * train_cache.h. */
#include "train_cache.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "fsgd/outfile.h"
#include "fsgd/rowcache.h"
#include "fsgd/rowfmt.h"
#include "fsgd/train.h"

#define META_CAP (PATH_MAX + 4096)

typedef struct pass {
    const fsgd_train_params_t *job;
    fsgd_rowcache_writer_t *w;
    fsgd_csr_t *hold, *test, keep;
    double hold_p, test_p;
    uint64_t row, seed, rows, max_col;
    fsgd_label_set_t labels;
} pass_t;

static double uniform(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (double)(x >> 11) / 9007199254740992.0;
}

/* One chunk of rows: each row to test, hold or the cache by one uniform
 * draw from (seed, row number), so the split does not depend on chunking. */
static int take_chunk(void *ctx, const fsgd_csr_t *rows, char *err, size_t errsz)
{
    pass_t *p = ctx;
    fsgd_csr_clear(&p->keep);
    fsgd_label_set_add(&p->labels, rows->label, rows->n_rows);
    for (size_t r = 0; r < rows->n_rows; r++, p->row++) {
        double u = uniform(p->seed ^ (p->row * 0xD1B54A32D192ED03ull));
        fsgd_csr_t *to = &p->keep;
        if (u < p->test_p && p->test->n_rows < FSGD_TRAIN_CACHE_SET_ASIDE_MAX)
            to = p->test;
        else if (u >= p->test_p && u < p->test_p + p->hold_p && p->hold->n_rows < FSGD_TRAIN_HOLDOUT_MAX)
            to = p->hold;
        if (fsgd_csr_append_rows(to, rows, r, 1) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory reading %s", p->job->data);
    }
    FSGD_TRY(fsgd_rowcache_append(p->w, &p->keep, err, errsz));
    p->rows += p->keep.n_rows;
    if (p->keep.max_col > p->max_col)
        p->max_col = p->keep.max_col;
    return FSGD_E_OK;
}

/* job->format is VW text: f then holds its spec. */
static int is_vw(const fsgd_train_params_t *job, fsgd_rowfmt_t *f)
{
    char e[256];
    return fsgd_rowfmt_init(f, job->format, job->hash_bits, job->skip_bad, e, sizeof e) == 0 && f->vw;
}

/* A chunk of VW rows: importance weights ride in the labels of rows read
 * into memory (fsgd/rowlabel.h) and are not written to a cache. */
static int take_vw_chunk(void *ctx, const fsgd_csr_t *rows, const fsgd_vw_extra_t *x, char *err, size_t errsz)
{
    pass_t *p = ctx;
    if (x->any_weight)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "--cache: %s has importance weights, applied to rows read into memory only "
                            "(drop --cache)",
                            p->job->data);
    return take_chunk(ctx, rows, err, errsz);
}

/* The metadata lines that decide whether a cache fits this run: what it
 * was made from and what decided the rows set aside. The change time
 * (ctime) is there because mtime alone can be put back (touch -d, cp -p,
 * an editor that keeps it) after an edit of the same size; ctime is set by
 * the kernel on every write and cannot be set from user space, so an
 * edit in place always shows. It also moves on chmod or a new hard link:
 * then the cache is rewritten, a cost, never a stale row. The labels line is
 * appended after the pass and is not compared. */
static int key_meta(const fsgd_train_params_t *job, const fsgd_delim_spec_t *spec, double test_fraction, char *out,
                    size_t cap, char *err, size_t errsz)
{
    struct stat st;
    char real[PATH_MAX];
    if (stat(job->data, &st) != 0 || !realpath(job->data, real))
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot read data '%s': %s", job->data, strerror(errno));
    char fmt[2048] = "libsvm";
    fsgd_rowfmt_t vw;
    if (!spec && job->hash_bits) /* hashed LIBSVM rows are other columns */
        snprintf(fmt, sizeof fmt, "libsvm:bits=%d", job->hash_bits);
    if (spec && fsgd_delim_spec_format(spec, fmt, sizeof fmt) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "--cache: the format spec is too long to record");
    if (!spec && is_vw(job, &vw)) /* its bits, seed, namespaces and crosses */
        FSGD_TRY(fsgd_vw_spec_format(&vw.vw_spec, fmt, sizeof fmt));
    const double hold_p = job->epochs <= 0 ? job->holdout : 0;
    char seed[32] = "unused";
    if (hold_p > 0 || test_fraction > 0)
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)job->seed);
    int n = snprintf(out, cap,
                     "source=%s\nsize=%lld\nmtime=%lld.%09ld\nctime=%lld.%09ld\ninode=%llu:%llu\nformat=%s\n"
                     "skip_bad=%d\ntest_fraction=%.17g\nholdout=%.17g\nseed=%s\nset_aside_max=%d %d\n",
                     real, (long long)st.st_size, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec,
                     (long long)st.st_ctim.tv_sec, (long)st.st_ctim.tv_nsec,
                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, fmt, job->skip_bad ? 1 : 0,
                     test_fraction, hold_p, seed, FSGD_TRAIN_CACHE_SET_ASIDE_MAX, FSGD_TRAIN_HOLDOUT_MAX);
    if (n < 0 || (size_t)n >= cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "cache metadata too long for '%s'", job->data);
    return FSGD_E_OK;
}

/* The value of "key=" in meta into out ("" when absent). */
static void meta_get(const char *meta, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    out[0] = '\0';
    for (const char *p = meta; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1, *e = strchr(v, '\n');
            size_t n = e ? (size_t)(e - v) : strlen(v);
            if (n >= cap)
                n = cap - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return;
        }
    }
}

/* Names the keys of want whose values differ in have, comma-separated. */
static int key_diff(const char *want, const char *have, char *names, size_t cap)
{
    int n = 0;
    names[0] = '\0';
    for (const char *p = want; p && *p;) {
        const char *eq = strchr(p, '='), *nl = strchr(p, '\n');
        if (!eq || !nl)
            break;
        char key[64], a[PATH_MAX + 64], b[PATH_MAX + 64];
        size_t kl = (size_t)(eq - p) < sizeof key ? (size_t)(eq - p) : sizeof key - 1;
        memcpy(key, p, kl);
        key[kl] = '\0';
        meta_get(want, key, a, sizeof a);
        meta_get(have, key, b, sizeof b);
        if (strcmp(a, b) != 0) {
            size_t l = strlen(names);
            snprintf(names + l, cap - l, "%s%s", n ? ", " : "", key);
            n++;
        }
        p = nl + 1;
    }
    return n;
}

static void labels_line(const fsgd_label_set_t *ls, char *out, size_t cap)
{
    int n = snprintf(out, cap, "labels=%d %d", ls->n, ls->more);
    for (int i = 0; i < ls->n && i < FSGD_LABELS_KEPT && n > 0 && (size_t)n < cap; i++)
        n += snprintf(out + n, cap - (size_t)n, " %a", ls->v[i]);
    if (n > 0 && (size_t)n < cap - 1)
        snprintf(out + n, cap - (size_t)n, "\n");
}

static int labels_parse(const char *meta, fsgd_label_set_t *ls)
{
    char v[256];
    meta_get(meta, "labels", v, sizeof v);
    memset(ls, 0, sizeof *ls);
    char *p = v, *e;
    ls->n = (int)strtol(p, &e, 10);
    if (e == p || ls->n < 0 || ls->n > FSGD_LABELS_KEPT)
        return -1;
    p = e;
    ls->more = (int)strtol(p, &e, 10);
    if (e == p)
        return -1;
    for (int i = 0; i < ls->n; i++) {
        p = e;
        ls->v[i] = strtod(p, &e);
        if (e == p)
            return -1;
    }
    return 0;
}

static int write_cache(const fsgd_train_params_t *job, const fsgd_delim_spec_t *spec, double test_fraction,
                       const char *meta, fsgd_csr_t *hold, fsgd_csr_t *test, fsgd_train_cache_result_t *out,
                       char *err, size_t errsz)
{
    pass_t p = {.job = job, .hold = hold, .test = test, .seed = job->seed ^ 0x5DEECE66DULL};
    p.test_p = test_fraction;
    p.hold_p = job->epochs <= 0 ? job->holdout : 0;
    /* A temporary file renamed into place when finished: an interrupted
     * pass leaves no half cache (and the signal handler removes it). */
    fsgd_outfile_t o;
    FILE *f = NULL;
    int rc = fsgd_outfile_open(&o, job->cache, err, errsz);
    if (rc < 0)
        return rc;
    if (!(f = fsgd_outfile_stream(&o, err, errsz)) || !(p.w = fsgd_rowcache_create_stream(f, job->cache, err, errsz))) {
        fsgd_outfile_abort(&o);
        return FSGD_E_IO;
    }
    const size_t test0 = test->n_rows; /* --test rows already there are not the cache's */
    fsgd_csr_t chunk = {0};
    fsgd_rowfmt_t vw;
    if (!spec && is_vw(job, &vw)) {
        fsgd_vw_extra_t x = {0};
        fsgd_libsvm_stats_t st = {0};
        rc = fsgd_csr_init_binary(&chunk, 0, 0) < 0 ? fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory") : 0;
        const fsgd_vw_chunks_t chunks = {65536, take_vw_chunk, &p};
        const fsgd_parse_ctx_t at = {.src = job->data, .first_line = 1, .skip_bad = job->skip_bad, .stats = &st};
        if (rc == 0)
            rc = fsgd_vw_load_chunks(job->data, &vw.vw_spec, &at, &chunk, &x, &chunks, err, errsz);
        out->skipped_rows = st.bad_rows;
        if (x.cross_entries)
            out->feature_share = (double)x.feature_entries / (double)(x.feature_entries + x.cross_entries);
        fsgd_vw_extra_free(&x);
    } else if (spec) {
        fsgd_delim_stats_t ds = {0};
        const fsgd_delim_chunks_t chunks = {65536, take_chunk, &p};
        rc = fsgd_delim_load_chunks(job->data, spec, 0, &chunk, &chunks, &ds, err, errsz);
        if (ds.cross_entries)
            out->feature_share = (double)ds.feature_entries / (double)(ds.feature_entries + ds.cross_entries);
    } else {
        fsgd_libsvm_opts_t opts = {.skip_bad = job->skip_bad, .hash_bits = (unsigned)job->hash_bits};
        fsgd_libsvm_reader_t *rd = fsgd_libsvm_open(job->data, &opts, err, errsz);
        if (!rd)
            rc = FSGD_E_IO;
        for (long got = 1; rc == 0 && got > 0;) {
            fsgd_csr_clear(&chunk);
            got = fsgd_libsvm_read(rd, &chunk, 65536, err, errsz);
            if (got < 0)
                rc = (int)got;
            else if (got > 0)
                rc = take_chunk(&p, &chunk, err, errsz);
        }
        if (rd)
            out->skipped_rows = fsgd_libsvm_stats(rd)->bad_rows;
        fsgd_libsvm_close(rd);
    }
    fsgd_csr_free(&chunk);
    fsgd_csr_free(&p.keep);
    char why[256];
    if (rc == 0 && fsgd_loss_check_labels(job->model, &p.labels, why, sizeof why) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: %s", job->data, why);
    if (rc < 0) {
        fsgd_rowcache_discard(p.w);
        fsgd_outfile_abort(&o);
        return rc;
    }
    char *full = malloc(META_CAP + 512);
    if (!full) {
        fsgd_rowcache_discard(p.w);
        fsgd_outfile_abort(&o);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    }
    size_t ml = strlen(meta);
    memcpy(full, meta, ml);
    labels_line(&p.labels, full + ml, 256);
    if (out->feature_share > 0) /* lr auto of a reused cache (fsgd_train_params_t lr_auto_share) */
        snprintf(full + strlen(full), 256, "feature_share=%.17g\n", out->feature_share);
    rc = fsgd_rowcache_close(p.w, hold, test0 ? NULL : test, full, err, errsz);
    free(full);
    if (rc < 0) {
        fsgd_outfile_abort(&o);
        return rc;
    }
    rc = fsgd_outfile_commit(&o, err, errsz);
    out->rows = p.rows;
    out->max_col = p.max_col;
    return rc;
}

/* Reads the holdout and test sections of an open cache whose key matched.
 * 0, or an error with err set (the caller rewrites the cache). */
static int reuse(const fsgd_train_params_t *job, fsgd_rowcache_reader_t *rd, const fsgd_rowcache_info_t *info,
                 double test_fraction, fsgd_csr_t *hold, fsgd_csr_t *test, fsgd_train_cache_result_t *out,
                 int *bad_labels, char *err, size_t errsz)
{
    fsgd_label_set_t ls;
    char why[256];
    if (labels_parse(info->meta, &ls) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: no labels line in its metadata", job->cache);
    /* the check of the first pass, on the labels it saw */
    if (fsgd_loss_check_labels(job->model, &ls, why, sizeof why) < 0) {
        *bad_labels = 1;
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: %s", job->data, why);
    }
    long got;
    FSGD_TRY(fsgd_rowcache_seek(rd, FSGD_ROWCACHE_HOLD, err, errsz));
    if ((got = fsgd_rowcache_read(rd, hold, SIZE_MAX, err, errsz)) < 0)
        return (int)got;
    if (test_fraction > 0) {
        FSGD_TRY(fsgd_rowcache_seek(rd, FSGD_ROWCACHE_TEST, err, errsz));
        if ((got = fsgd_rowcache_read(rd, test, SIZE_MAX, err, errsz)) < 0)
            return (int)got;
    }
    out->rows = info->rows[FSGD_ROWCACHE_TRAIN];
    out->max_col = info->max_col[FSGD_ROWCACHE_TRAIN];
    char share[64];
    meta_get(info->meta, "feature_share", share, sizeof share);
    out->feature_share = share[0] ? strtod(share, NULL) : 0;
    return FSGD_E_OK;
}

int fsgd_train_cache_prepare(const fsgd_train_params_t *job, const fsgd_delim_spec_t *spec, double test_fraction,
                             fsgd_csr_t *hold, fsgd_csr_t *test, fsgd_train_cache_result_t *out, char *err,
                             size_t errsz)
{
    memset(out, 0, sizeof *out);
    char *meta = malloc(META_CAP);
    if (!meta)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
    int rc = key_meta(job, spec, test_fraction, meta, META_CAP, err, errsz);
    struct stat st;
    if (rc == 0 && lstat(job->cache, &st) == 0) {
        int why = 0;
        char e[1024];
        fsgd_rowcache_info_t info;
        fsgd_rowcache_reader_t *rd = fsgd_rowcache_open(job->cache, &info, &why, e, sizeof e);
        if (!rd && why == FSGD_E_FORMAT) {
            /* not ours (a mistyped --cache naming the data?): never overwrite */
            rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "--cache %s is not an fsgd row cache; not overwriting it",
                              job->cache);
        } else if (!rd) {
            snprintf(out->rewritten, sizeof out->rewritten, "%s", e);
        } else {
            char names[256], src[PATH_MAX + 64];
            int bad_labels = 0;
            if (key_diff(meta, info.meta, names, sizeof names) > 0) {
                meta_get(info.meta, "source", src, sizeof src);
                snprintf(out->rewritten, sizeof out->rewritten, "cache %s was written from %s (%s %s)", job->cache,
                         src[0] ? src : "an unknown source", names, strchr(names, ',') ? "differ" : "differs");
            } else if ((rc = reuse(job, rd, &info, test_fraction, hold, test, out, &bad_labels, e,
                              sizeof e)) == 0) {
                out->reused = 1;
            } else if (bad_labels) {
                snprintf(err, errsz, "%s", e); /* the labels do not fit the model: as the first pass says */
            } else {
                snprintf(out->rewritten, sizeof out->rewritten, "%s", e);
                fsgd_csr_clear(hold);
                if (test_fraction > 0)
                    fsgd_csr_clear(test);
                rc = 0;
            }
        }
        fsgd_rowcache_free(rd);
    }
    if (rc == 0 && !out->reused)
        rc = write_cache(job, spec, test_fraction, meta, hold, test, out, err, errsz);
    free(meta);
    return rc;
}
