/* A job's checkpoint files as one set: PATH (shard 0, or the only
 * aggregator), PATH.shardI of shard I > 0, each with the one before as
 * .prev, and the temporary files (NAME.tmp.XXXXXX) of a write that was cut
 * short. --resume, --fresh and fsgd run's restarts of a sharded job all go
 * through here, so they agree on which files belong to a job and on the
 * step it resumes from. Nothing here prints. */
#ifndef FSGD_CKPT_SET_H
#define FSGD_CKPT_SET_H

#include <stddef.h>

/* The file of shard i under base: base or base.shardI, with ".prev" when
 * prev. Returns snprintf's count (>= cap: cut short). */
int fsgd_ckpt_set_path(const char *base, unsigned shard, int prev, char *out, size_t cap);

/* Calls fn(path, temp, arg) for every file now in base's directory whose
 * name is one of base's set (any shard number, .prev or not; temp: a
 * temporary name). Stops at fn's first non-zero answer and returns it; 0
 * when fn never stopped it; FSGD_E_IO with err set when the directory
 * cannot be read. */
typedef int (*fsgd_ckpt_member_fn)(const char *path, int temp, void *arg);
int fsgd_ckpt_set_each(const char *base, fsgd_ckpt_member_fn fn, void *arg, char *err, size_t errsz);

/* The newest step every one of shards shards has a checkpoint of (in its
 * file or its .prev; with one shard, only base), checking each file's
 * identity (version 8 and later: the shard that wrote it, the job's shard
 * count, the job's name when job is not NULL) and the CRC of the files of
 * that step. *step = -1 and 0 when the set holds no file at all. Errors,
 * each naming the files (the user's files, not fsgd's state: --resume
 * exits 2 or 3): FSGD_E_ARG a file that is not a checkpoint, under another
 * shard's name, of another shard count or of another job, or no step all
 * shards have (every file's step listed); FSGD_E_CRC/FSGD_E_TRUNCATED a
 * file of the chosen step that is damaged; FSGD_E_VERSION a version 1 file. */
int fsgd_ckpt_set_resume_step(const char *base, unsigned shards, const char *job, long long *step, char *err,
                              size_t errsz);

#endif
