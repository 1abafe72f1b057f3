/* A job's checkpoint files as one set (fsgd/ckpt_set.h). */
#include "fsgd/ckpt_set.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/dist.h"
#include "fsgd/le.h"
#include "fsgd/error.h"
#include "fsgd/outfile.h"

/* Whether rest (a file name after base's) names a member: "", ".prev",
 * ".shardI" or ".shardI.prev" (I > 0, no leading zero), each perhaps
 * followed by ".tmp.XXXXXX" (six hex digits: fsgd/outfile.h's temporary
 * names). *temp says which. */
static int member_suffix(const char *rest, int *temp)
{
    *temp = 0;
    if (!strncmp(rest, ".shard", 6)) {
        rest += 6;
        if (*rest < '1' || *rest > '9')
            return 0;
        while (*rest >= '0' && *rest <= '9')
            rest++;
    }
    if (!strncmp(rest, ".prev", 5))
        rest += 5;
    if (!strncmp(rest, ".tmp.", 5)) {
        rest += 5;
        for (int i = 0; i < 6; i++, rest++)
            if (!((*rest >= '0' && *rest <= '9') || (*rest >= 'a' && *rest <= 'f')))
                return 0;
        *temp = 1;
    }
    return *rest == '\0';
}

int fsgd_ckpt_set_each(const char *base, fsgd_ckpt_member_fn fn, void *arg, char *err, size_t errsz)
{
    char dir[FSGD_OUTFILE_PATH_MAX];
    const char *slash = strrchr(base, '/');
    const char *name = slash ? slash + 1 : base;
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == base)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - base), base);
    size_t nl = strlen(name);
    if (!nl)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "checkpoint '%s': directory '%s': %s", base, dir, strerror(errno));
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        int temp;
        if (strncmp(e->d_name, name, nl) || !member_suffix(e->d_name + nl, &temp))
            continue;
        char path[FSGD_OUTFILE_PATH_MAX + 300];
        snprintf(path, sizeof path, "%.*s%s", (int)(name - base), base, e->d_name);
        rc = fn(path, temp, arg);
    }
    closedir(d);
    return rc;
}

/* The files of one shard: current and previous. */
typedef struct shard_files {
    char path[2][FSGD_OUTFILE_PATH_MAX + 40];
    fsgd_ckpt_info_t info[2];
    int kind[2]; /* fsgd_ckpt_info's answer */
} shard_files_t;

/* Every file's step, for a message: "c.ckpt step 260, c.ckpt.prev step 240; ...". */
static void list_steps(const shard_files_t *f, unsigned shards, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < shards; i++)
        for (int k = 0; k < 2; k++) {
            if (n >= cap)
                return;
            if (f[i].kind[k] == 0)
                n += (size_t)snprintf(out + n, cap - n, "%s%s absent", n ? ", " : "", f[i].path[k]);
            else if (f[i].info[k].step < 0)
                n += (size_t)snprintf(out + n, cap - n, "%s%s unreadable", n ? ", " : "", f[i].path[k]);
            else
                n += (size_t)snprintf(out + n, cap - n, "%s%s step %lld", n ? ", " : "", f[i].path[k],
                                      f[i].info[k].step);
        }
}

/* The CRC32C in a checkpoint's last 4 bytes against all before it: a
 * damaged file is named now, before any process starts, not by a shard
 * that fails once the job runs. */
static int crc_ok(const char *path, char *err, size_t errsz)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "checkpoint '%s': %s", path, strerror(errno));
    long len = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    int rc = 0;
    if (len < 8) {
        rc = fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "checkpoint '%s': truncated (%ld bytes)", path, len);
    } else {
        rewind(fp);
        uint8_t buf[65536];
        uint32_t crc = 0;
        long left = len - 4;
        while (left > 0 && !rc) {
            size_t want = left < (long)sizeof buf ? (size_t)left : sizeof buf;
            if (fread(buf, 1, want, fp) != want)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "checkpoint '%s': read failed", path);
            crc = fsgd_crc32c(crc, buf, want);
            left -= (long)want;
        }
        if (!rc && fread(buf, 1, 4, fp) != 4)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "checkpoint '%s': read failed", path);
        if (!rc && fsgd_le_get32(buf) != crc)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_CRC, "checkpoint '%s': crc32c mismatch at byte %ld: the file is "
                              "damaged; start over (fsgd run --fresh)", path, len - 4);
    }
    fclose(fp);
    return rc;
}

int fsgd_ckpt_set_resume_step(const char *base, unsigned shards, const char *job, long long *step, char *err,
                              size_t errsz)
{
    *step = -1;
    if (shards < 1)
        shards = 1;
    shard_files_t *f = calloc(shards, sizeof *f);
    if (!f)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint '%s': out of memory", base);
    int rc = 0, any = 0;
    /* one shard keeps no .prev: only its file counts */
    const int kinds = shards > 1 ? 2 : 1;
    for (unsigned i = 0; i < shards && !rc; i++)
        for (int k = 0; k < kinds && !rc; k++) {
            fsgd_ckpt_set_path(base, i, k, f[i].path[k], sizeof f[i].path[k]);
            f[i].kind[k] = fsgd_ckpt_info(f[i].path[k], &f[i].info[k]);
            const fsgd_ckpt_info_t *in = &f[i].info[k];
            if (f[i].kind[k] == 0)
                continue;
            any = 1;
            if (f[i].kind[k] < 0)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "checkpoint '%s' is not an fsgd checkpoint (no FSGDCKPT "
                                  "header): fsgd neither resumes from it nor deletes it", f[i].path[k]);
            else if (f[i].kind[k] == 2)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_VERSION, "checkpoint '%s' is in the version 1 format of an "
                                  "older fsgd: finish that job with the fsgd that wrote it, or start over (fsgd run "
                                  "--fresh)", f[i].path[k]);
            else if (in->has_ident && in->shards != shards)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "checkpoint '%s' was written by a job with %u aggregator "
                                  "shard%s (as shard %u); this one has %u: resume with --shards %u, or start over "
                                  "(fsgd run --fresh)", f[i].path[k], in->shards, in->shards == 1 ? "" : "s",
                                  in->shard, shards, in->shards);
            else if (in->has_ident && in->shard != i) {
                char want[FSGD_OUTFILE_PATH_MAX + 40];
                fsgd_ckpt_set_path(base, in->shard, k, want, sizeof want);
                rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "checkpoint set '%s' does not agree: '%s' is shard %u's "
                                  "file (it belongs at '%s'), not shard %u's: put each file back under its own "
                                  "name, or start over (fsgd run --fresh)", base, f[i].path[k], in->shard, want, i);
            } else if (in->has_ident && job && strcmp(in->job, job) != 0)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "checkpoint '%s' was written by job '%s'; this job is "
                                  "'%s': resume it with --name %s, or start over (fsgd run --fresh)", f[i].path[k],
                                  in->job, job, in->job);
        }
    if (!rc && any) {
        /* the candidates are shard 0's steps, newest first */
        long long best = -1;
        for (int k0 = 0; k0 < kinds; k0++) {
            long long s = f[0].info[k0].step;
            int all = f[0].kind[k0] == 1 && s > best;
            for (unsigned i = 1; i < shards && all; i++)
                all = (f[i].kind[0] == 1 && f[i].info[0].step == s) || (f[i].kind[1] == 1 && f[i].info[1].step == s);
            if (all)
                best = s;
        }
        if (best < 0) {
            char list[2048];
            list_steps(f, shards, list, sizeof list);
            rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "checkpoint set '%s' does not agree: no step that all %u "
                              "shards have a checkpoint of (%s): start over (fsgd run --fresh)", base, shards, list);
        }
        /* the files of that step are read whole now: a damaged one is said before anything starts */
        for (unsigned i = 0; i < shards && !rc; i++) {
            int k = f[i].kind[0] == 1 && f[i].info[0].step == best ? 0 : 1;
            rc = crc_ok(f[i].path[k], err, errsz);
        }
        if (!rc)
            *step = best;
    }
    free(f);
    return rc;
}
