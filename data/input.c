/* Bounds on what the row readers take (fsgd/input.h). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/input.h"

int fsgd_input_is_stream(int fd)
{
    struct stat st;
    return fstat(fd, &st) != 0 || !S_ISREG(st.st_mode);
}

uint64_t fsgd_input_stream_max(void)
{
    const char *e = getenv("FSGD_MAX_STREAM_MB");
    if (e && *e) {
        char *end;
        unsigned long long mb = strtoull(e, &end, 10);
        if (!*end && mb > 0)
            return (uint64_t)mb << 20;
    }
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : (uint64_t)8 << 30;
}

int fsgd_input_line_error(char *err, size_t errsz, const char *path, uint64_t line)
{
    return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                        "%s:%llu: no line end within %zu MiB: not rows of text (an input with no end, like "
                        "/dev/zero, or a binary file?)",
                        path, (unsigned long long)line, FSGD_INPUT_MAX_LINE >> 20);
}

int fsgd_input_stream_error(char *err, size_t errsz, const char *path, uint64_t bytes)
{
    return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                        "%s: more than %llu MiB read from a stream (not a regular file; the most taken from one is "
                        "this machine's memory, or FSGD_MAX_STREAM_MB): an input with no end? Write it to a file "
                        "first, or feed it to a job that follows its data topic (fsgd produce --follow)",
                        path, (unsigned long long)(bytes >> 20));
}
