/* Unnamed temporary files (train_tmpfile.h). */
#include "train_tmpfile.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int fsgd_train_tmpfile(void)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !dir[0])
        dir = "/tmp";
#ifdef O_TMPFILE
    /* no moment where a name exists */
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
#endif
    /* a file system without O_TMPFILE: a name, unlinked at once (the six Xs
     * are the template mkostemp replaces, not a marker) */
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/fsgd-tmp-XXXXXX", dir);
    if (n < 0 || (size_t)n >= sizeof path)
        return -1;
    int fd2 = mkostemp(path, O_CLOEXEC);
    if (fd2 >= 0)
        unlink(path);
    return fd2;
}
