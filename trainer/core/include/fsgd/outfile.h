/* Output files written safely: every file fsgd writes (models, exports,
 * metrics JSON, checkpoints, predictions, generated data) goes through here.
 *
 * - The target must be absent or a regular file. A directory, device, FIFO,
 *   socket or symbolic link at the final path is refused (lstat, so a link
 *   is never followed): fsgd never replaces a device or writes through a
 *   link the user did not name, even as root.
 * - Bytes go to a temporary file "PATH.tmp.XXXXXX" beside the target
 *   (created O_EXCL | O_NOFOLLOW), fsync'd, and renamed over PATH only on
 *   commit, after the final path is checked again. A failed write never
 *   leaves the target half written, and the temporary file is removed on
 *   every error path.
 * - fsgd_outfile_check() answers up front, before any work: a path that
 *   cannot be written fails in milliseconds, not after training.
 * - Temporary files in flight are registered so a signal handler can remove
 *   them (fsgd_outfile_remove_temps is async-signal-safe).
 *
 * Nothing here prints. Errors are FSGD_E_ARG for a path that is refused
 * (named, with the reason) and FSGD_E_IO for a write that failed. */
#ifndef FSGD_OUTFILE_H
#define FSGD_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#define FSGD_OUTFILE_PATH_MAX 4096

typedef struct fsgd_outfile {
    char path[FSGD_OUTFILE_PATH_MAX];
    char tmp[FSGD_OUTFILE_PATH_MAX + 16];
    int fd;   /* the temporary file; -1 when none is open */
    FILE *fp; /* stream over fd from fsgd_outfile_stream, or NULL */
    int slot; /* registry slot of tmp, -1 when not registered */
} fsgd_outfile_t;

/* Checks that path can be written: absent or a regular file (not a link),
 * in an existing directory where a file can be created (tried for real with
 * a temporary file that is removed at once). 0 or FSGD_E_ARG with err naming
 * the path and the reason. */
int fsgd_outfile_check(const char *path, char *err, size_t errsz);

/* Checks path as above and opens a temporary file beside it (mode 0644).
 * On error o is left closed (fd -1) and nothing is created. */
int fsgd_outfile_open(fsgd_outfile_t *o, const char *path, char *err, size_t errsz);

/* A stdio stream over the temporary file (owned by o: commit or abort
 * closes it). NULL with err set when fdopen fails (then call abort). */
FILE *fsgd_outfile_stream(fsgd_outfile_t *o, char *err, size_t errsz);

/* Flushes (stream errors are write errors), fsyncs and closes the
 * temporary file, checks the final path again and renames the file into
 * place. On any error the temporary file is removed and the target is left
 * as it was. 0, FSGD_E_ARG (the path became a non-regular file) or FSGD_E_IO. */
int fsgd_outfile_commit(fsgd_outfile_t *o, char *err, size_t errsz);

/* fsgd_outfile_commit, and the file at the target before (if any) kept as
 * keep: only once the new file is written and synced does keep become a
 * second name of the old one (a hard link renamed over keep), and then the
 * new file is renamed over the target, so the target is never missing and
 * a failed write leaves both names as they were. keep must be absent or a
 * regular file. 0, FSGD_E_ARG or FSGD_E_IO. */
int fsgd_outfile_commit_keep(fsgd_outfile_t *o, const char *keep, char *err, size_t errsz);

/* Closes and removes the temporary file; the target is untouched. Safe on a
 * closed o. */
void fsgd_outfile_abort(fsgd_outfile_t *o);

/* 1 when paths a and b name the same file, by identity, not by spelling:
 * two existing files are the same when their device and inode are (so a
 * hard link, a symbolic link or "./x" against "x" are all caught; links
 * are followed); a path that does not exist yet is the same as another
 * when both are absent and their directories (device and inode) and last
 * components are equal. 0 otherwise, and for NULL or empty paths. */
int fsgd_outfile_same(const char *a, const char *b);

/* Removes every temporary file still open in this process. Async-signal-
 * safe: for a SIGINT/SIGTERM handler before the process dies. */
void fsgd_outfile_remove_temps(void);

#endif
