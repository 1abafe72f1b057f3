/* `--out -` and devices (cli.h, fsgd_cli_run_streamed): a model or an
 * export written to stdout or /dev/null the way users of other
 * tools expect, while every file output keeps fsgd_outfile's atomic
 * replace. The command writes its output to a temporary file as it would to
 * any path (fsgd_outfile refuses devices and links, rightly, for files it
 * replaces), and the bytes are copied to the stream once the command
 * succeeded: a failed run sends nothing, as it leaves no file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The temporary file standing for a stream in this process and the stream
 * it stands for, so the command's "model written to" names what the user
 * named (one command runs at a time in a process). */
static char stream_tmp[4096];
static const char *stream_dest;

const char *fsgd_cli_out_name(const char *path)
{
    return stream_dest && path && !strcmp(path, stream_tmp) ? stream_dest : path;
}

int fsgd_cli_out_is_stream(const char *path)
{
    /* By name only: a device node or FIFO that some other path names stays
     * refused (tests/integration/out_paths.sh: a FIFO waits for a reader
     * forever, a device in an output folder is a mistake). */
    return path && (!strcmp(path, "-") || !strcmp(path, "/dev/stdout") || !strcmp(path, "/dev/stderr") ||
                    !strcmp(path, "/dev/null") || !strncmp(path, "/dev/fd/", 8));
}

int fsgd_cli_out_is_stdout(const char *path)
{
    return path && (!strcmp(path, "-") || !strcmp(path, "/dev/stdout"));
}

/* The descriptor to copy to: stdout's (saved before stdout was pointed at
 * stderr), stderr, /dev/fd/N or /dev/null opened. -1 with errno. */
static int open_dest(const char *dest, int saved_stdout, int *opened)
{
    *opened = 0;
    if (fsgd_cli_out_is_stdout(dest))
        return saved_stdout;
    if (!strcmp(dest, "/dev/stderr"))
        return 2;
    if (!strncmp(dest, "/dev/fd/", 8)) {
        char *end;
        long fd = strtol(dest + 8, &end, 10);
        if (*end || end == dest + 8 || fd < 0 || fd > 1 << 20) {
            errno = EBADF;
            return -1;
        }
        return (int)fd;
    }
    int fd = open(dest, O_WRONLY | O_CLOEXEC); /* /dev/null: never created */
    *opened = fd >= 0;
    return fd;
}

static int copy_to(const char *tmp, int to)
{
    int from = open(tmp, O_RDONLY | O_CLOEXEC);
    if (from < 0)
        return -1;
    char buf[1 << 16];
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = read(from, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(to, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                rc = -1;
                break;
            }
            off += w;
        }
    }
    int e = errno;
    close(from);
    errno = e;
    return rc;
}

int fsgd_cli_run_streamed(int (*cmd)(int, char **), int argc, char **argv, const char *what, int binary)
{
    /* the last --out wins, as the options parsers take it */
    int at = -1, joined = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            at = ++i;
            joined = 0;
        } else if (!strncmp(argv[i], "--out=", 6)) {
            at = i;
            joined = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            return cmd(argc, argv);
        }
    }
    const char *dest = at < 0 ? NULL : joined ? argv[at] + 6 : argv[at];
    if (!fsgd_cli_out_is_stream(dest))
        return cmd(argc, argv);
    if (binary && fsgd_cli_out_is_stdout(dest) && isatty(1)) {
        fsgd_cli_error("%s: --out %s would write a binary model to the terminal: redirect stdout (> FILE, | ...) "
                       "or name a file",
                       what, dest);
        return FSGD_EXIT_USAGE;
    }
    const char *dir = getenv("TMPDIR");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/fsgd-%s-out.XXXXXX", dir && *dir ? dir : "/tmp", what);
    int tfd = mkstemp(tmp);
    if (tfd < 0) {
        fsgd_cli_error("%s: --out %s: cannot create a temporary file %s: %s", what, dest, tmp, strerror(errno));
        return FSGD_EXIT_IO;
    }
    close(tfd);
    char arg[4096 + 8];
    snprintf(arg, sizeof arg, "%s%s", joined ? "--out=" : "", tmp);
    char *saved_arg = argv[at];
    argv[at] = arg;
    /* With the output on stdout, the command's own lines (results, "model
     * written to") go to stderr so the bytes on stdout are the output alone. */
    int saved_stdout = -1;
    if (fsgd_cli_out_is_stdout(dest)) {
        fflush(stdout);
        saved_stdout = dup(1);
        if (saved_stdout < 0 || dup2(2, 1) < 0) {
            fsgd_cli_error("%s: --out %s: %s", what, dest, strerror(errno));
            argv[at] = saved_arg;
            unlink(tmp);
            return FSGD_EXIT_IO;
        }
    }
    snprintf(stream_tmp, sizeof stream_tmp, "%s", tmp);
    stream_dest = fsgd_cli_out_is_stdout(dest) ? "stdout" : dest;
    int status = cmd(argc, argv);
    stream_dest = NULL;
    argv[at] = saved_arg;
    fflush(stdout);
    if (status == 0) {
        int opened, to = open_dest(dest, saved_stdout, &opened);
        if (to < 0 || copy_to(tmp, to) < 0) {
            fsgd_cli_error("%s: writing to %s: %s", what, dest, strerror(errno));
            status = FSGD_EXIT_IO;
        }
        if (opened)
            close(to);
    }
    if (saved_stdout >= 0) {
        dup2(saved_stdout, 1);
        close(saved_stdout);
    }
    unlink(tmp);
    return status;
}
