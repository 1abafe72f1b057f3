/* Safe output files (fsgd/outfile.h). */
#include "fsgd/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/error.h"

/* --- registry of temporary files in flight (for signal-time cleanup) --- */

#define SLOTS 16
static struct {
    volatile sig_atomic_t used;
    char path[FSGD_OUTFILE_PATH_MAX + 16];
} slots[SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static int slot_take(const char *path)
{
    int s = -1;
    pthread_mutex_lock(&slots_lock);
    for (int i = 0; i < SLOTS && s < 0; i++)
        if (!slots[i].used) {
            snprintf(slots[i].path, sizeof slots[i].path, "%s", path);
            /* the path is complete before a handler can see the slot */
            __atomic_store_n(&slots[i].used, 1, __ATOMIC_SEQ_CST);
            s = i;
        }
    pthread_mutex_unlock(&slots_lock);
    return s; /* -1: more than SLOTS files in flight; the file just is not cleaned at a signal */
}

static void slot_free(int s)
{
    if (s < 0)
        return;
    pthread_mutex_lock(&slots_lock);
    __atomic_store_n(&slots[s].used, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&slots_lock);
}

void fsgd_outfile_remove_temps(void)
{
    for (int i = 0; i < SLOTS; i++)
        if (__atomic_load_n(&slots[i].used, __ATOMIC_SEQ_CST))
            unlink(slots[i].path);
}

/* --- checks --- */

static const char *kind_name(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISLNK(m))
        return "a symbolic link";
    return "not a regular file";
}

/* The final path itself: absent or a regular file, never followed. */
static int check_target(const char *path, char *err, size_t errsz)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "output '%s': %s", path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "output '%s' is a symbolic link: refusing to write through it (name its target "
                            "instead)",
                            path);
    if (!S_ISREG(st.st_mode))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "output '%s' exists and is %s, not a regular file: refusing to replace it", path,
                            kind_name(st.st_mode));
    return 0;
}

/* Opens a fresh "PATH.tmp.XXXXXX": O_EXCL and O_NOFOLLOW, so neither an
 * existing file nor a planted link is ever opened. */
static int open_temp(const char *path, char *tmp, size_t cap, char *err, size_t errsz)
{
    static unsigned counter;
    for (int attempt = 0; attempt < 64; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned r = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 12) ^
                     (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 2654435761u);
        if ((size_t)snprintf(tmp, cap, "%s.tmp.%06x", path, r & 0xffffff) >= cap)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "output '%s': path too long", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST) {
            int e = errno;
            char dir[FSGD_OUTFILE_PATH_MAX];
            snprintf(dir, sizeof dir, "%s", path);
            char *slash = strrchr(dir, '/');
            if (!slash)
                snprintf(dir, sizeof dir, ".");
            else if (slash == dir)
                dir[1] = '\0';
            else
                *slash = '\0';
            struct stat st;
            if (stat(dir, &st) != 0)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "output '%s': directory '%s': %s", path, dir,
                                    strerror(errno));
            if (!S_ISDIR(st.st_mode))
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "output '%s': '%s' is not a directory", path, dir);
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "output '%s': cannot create files in '%s': %s", path, dir,
                                strerror(e));
        }
    }
    return fsgd_err_fmt(err, errsz, FSGD_E_IO, "output '%s': no free temporary name", path);
}

/* --- identity --- */

typedef struct {
    int exists; /* 1: dev/ino are the file's; 0: the directory's, base is the name in it */
    dev_t dev;
    ino_t ino;
    const char *base;
    size_t base_len;
} ident_t;

static int ident_of(const char *path, ident_t *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) {
        id->exists = 1;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
        return 0;
    }
    /* Absent: name it by its directory's identity and its last component,
     * so "d/x" and "d/../d/x" agree before either is created. */
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    char dir[FSGD_OUTFILE_PATH_MAX];
    if (b == 0)
        snprintf(dir, sizeof dir, ".");
    else if ((size_t)snprintf(dir, sizeof dir, "%.*s", (int)b, path) >= sizeof dir)
        return -1;
    if (stat(dir, &st) != 0)
        return -1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->base = path + b;
    id->base_len = n - b;
    return 0;
}

int fsgd_outfile_same(const char *a, const char *b)
{
    ident_t x, y;
    if (!a || !b || !*a || !*b || ident_of(a, &x) < 0 || ident_of(b, &y) < 0)
        return 0;
    if (x.exists != y.exists || x.dev != y.dev || x.ino != y.ino)
        return 0;
    return x.exists || (x.base_len == y.base_len && !memcmp(x.base, y.base, x.base_len));
}

int fsgd_outfile_check(const char *path, char *err, size_t errsz)
{
    if (!path || !*path)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "empty output path");
    if (strlen(path) >= FSGD_OUTFILE_PATH_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "output '%.64s...': path too long", path);
    FSGD_TRY(check_target(path, err, errsz));
    /* Try it for real: permissions, read-only or pseudo file systems (/proc)
     * and missing directories all show up here, before any work is done. */
    char tmp[FSGD_OUTFILE_PATH_MAX + 16];
    int fd = open_temp(path, tmp, sizeof tmp, err, errsz);
    if (fd < 0)
        return fd;
    close(fd);
    unlink(tmp);
    return 0;
}

int fsgd_outfile_open(fsgd_outfile_t *o, const char *path, char *err, size_t errsz)
{
    o->fd = -1;
    o->fp = NULL;
    o->slot = -1;
    o->tmp[0] = '\0';
    if (!path || !*path)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "empty output path");
    if ((size_t)snprintf(o->path, sizeof o->path, "%s", path) >= sizeof o->path)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "output '%.64s...': path too long", path);
    FSGD_TRY(check_target(path, err, errsz));
    int fd = open_temp(path, o->tmp, sizeof o->tmp, err, errsz);
    if (fd < 0)
        return fd;
    o->fd = fd;
    o->slot = slot_take(o->tmp);
    return 0;
}

FILE *fsgd_outfile_stream(fsgd_outfile_t *o, char *err, size_t errsz)
{
    if (o->fp)
        return o->fp;
    o->fp = fdopen(o->fd, "w");
    if (!o->fp)
        fsgd_err_fmt(err, errsz, FSGD_E_IO, "output '%s': %s", o->path, strerror(errno));
    return o->fp;
}

void fsgd_outfile_abort(fsgd_outfile_t *o)
{
    if (o->fp)
        fclose(o->fp);
    else if (o->fd >= 0)
        close(o->fd);
    if (o->fd >= 0 || o->fp)
        unlink(o->tmp);
    o->fp = NULL;
    o->fd = -1;
    slot_free(o->slot);
    o->slot = -1;
}

/* The directory holding path, synced so a rename in it survives a power
 * cut (best effort: some file systems refuse fsync on a directory). */
static void sync_dir_of(const char *path)
{
    char dir[FSGD_OUTFILE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* keep becomes a second name of path's current file, replacing what keep
 * was in one rename: a hard link under a fresh temporary name first, so
 * path itself is never missing. Where hard links are not supported, path
 * is renamed to keep (the caller renames the new file in right after). */
static int keep_current(const char *path, const char *keep, char *err, size_t errsz)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : fsgd_err_fmt(err, errsz, FSGD_E_IO, "output '%s': %s", path, strerror(errno));
    FSGD_TRY(check_target(keep, err, errsz));
    static unsigned counter;
    char tmp[FSGD_OUTFILE_PATH_MAX + 16];
    for (int attempt = 0; attempt < 64; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned r = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 12) ^
                     (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 2654435761u);
        if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%06x", keep, r & 0xffffff) >= sizeof tmp)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "output '%s': path too long", keep);
        if (link(path, tmp) == 0) {
            if (rename(tmp, keep) == 0)
                return 0;
            int e = errno;
            unlink(tmp);
            return fsgd_err_fmt(err, errsz, FSGD_E_IO, "output '%s': cannot keep the previous file as %s: %s", path,
                                keep, strerror(e));
        }
        if (errno != EEXIST)
            break;
    }
    if (rename(path, keep) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "output '%s': cannot keep the previous file as %s: %s", path, keep,
                            strerror(errno));
    return 0;
}

static int commit_to(fsgd_outfile_t *o, const char *keep, char *err, size_t errsz)
{
    int bad = 0, e = 0;
    if (o->fp) {
        if (fflush(o->fp) != 0 || ferror(o->fp))
            bad = 1, e = errno;
        if (!bad && fsync(fileno(o->fp)) != 0)
            bad = 1, e = errno;
        if (fclose(o->fp) != 0 && !bad)
            bad = 1, e = errno;
        o->fp = NULL;
    } else {
        if (fsync(o->fd) != 0)
            bad = 1, e = errno;
        if (close(o->fd) != 0 && !bad)
            bad = 1, e = errno;
    }
    o->fd = -1;
    int rc = 0;
    if (bad)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "output '%s': write failed: %s", o->path,
                          e ? strerror(e) : "stream error");
    /* The path may have changed since the check: never rename over a device
     * or a link that appeared in between. */
    if (!rc)
        rc = check_target(o->path, err, errsz);
    /* the new file is durable now: only then is the old one retired */
    if (!rc && keep)
        rc = keep_current(o->path, keep, err, errsz);
    if (!rc && rename(o->tmp, o->path) != 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "output '%s': cannot rename %s into place: %s", o->path, o->tmp,
                          strerror(errno));
    if (rc)
        unlink(o->tmp);
    else if (keep)
        sync_dir_of(o->path);
    slot_free(o->slot);
    o->slot = -1;
    return rc;
}

int fsgd_outfile_commit(fsgd_outfile_t *o, char *err, size_t errsz)
{
    return commit_to(o, NULL, err, errsz);
}

int fsgd_outfile_commit_keep(fsgd_outfile_t *o, const char *keep, char *err, size_t errsz)
{
    return commit_to(o, keep, err, errsz);
}
