/* Kafka option values read from files: KEY_file=PATH (bus_impl.h). */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus_impl.h"
#include "fsgd/error.h"

void fsgd_kbus_wipe(void *p, size_t n)
{
    sodium_memzero(p, n);
}

/* The first line of path into out, checked as a job key file is (auth.c):
 * whoever can read it could use the cluster as this job. */
static int read_secret(const char *key, const char *path, char *out, size_t cap, char *err, size_t errsz)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s': %s", key, path,
                            errno == ELOOP ? "a symbolic link (name the file itself)" : strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s': %s", key, path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s' is not a regular file", key, path);
    else if (st.st_uid != geteuid())
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s' belongs to uid %u, not to this user (%u)",
                          key, path, (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & 077)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                          "kafka option %s_file: '%s' has mode %04o: others may read it; chmod 600 it", key, path,
                          (unsigned)(st.st_mode & 07777));
    ssize_t n = 0;
    if (!rc) {
        n = read(fd, out, cap);
        if (n < 0)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s': %s", key, path, strerror(errno));
    }
    close(fd);
    if (rc)
        return rc;
    size_t len = (size_t)n <= cap ? (size_t)n : cap;
    char *nl = memchr(out, '\n', len);
    if (nl && (size_t)(nl - out) + 1 < len)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s' holds more than one line", key, path);
    else if (len == cap && !nl)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s' is longer than %zu bytes", key, path,
                          cap - 1);
    else if (nl)
        len = (size_t)(nl - out);
    if (!rc && len == 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s' is empty", key, path);
    if (!rc && memchr(out, '\0', len))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: '%s' holds a zero byte", key, path);
    if (rc) {
        sodium_memzero(out, cap);
        return rc;
    }
    out[len] = '\0';
    return 0;
}

int fsgd_kbus_resolve_files(const char *lines, char *out, size_t cap, char *err, size_t errsz)
{
    size_t used = 0;
    const char *p = lines;
    while (*p) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        char key[256];
        size_t klen = eq ? (size_t)(eq - p) : 0;
        const char *val = "";
        char secret[1025], path[1024];
        if (eq && klen > 5 && klen < sizeof key && !memcmp(eq - 5, "_file", 5)) {
            memcpy(key, p, klen - 5);
            key[klen - 5] = '\0';
            size_t plen = n - klen - 1;
            if (plen == 0 || plen >= sizeof path)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option %s_file: expected a path", key);
            memcpy(path, eq + 1, plen);
            path[plen] = '\0';
            FSGD_TRY(read_secret(key, path, secret, sizeof secret - 1, err, errsz));
            val = secret;
        } else {
            if (n >= sizeof secret)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka option: a line longer than %zu characters",
                                    sizeof secret - 1);
            memcpy(secret, p, n);
            secret[n] = '\0';
            key[0] = '\0';
        }
        int w = key[0] ? snprintf(out + used, cap - used, "%s=%s\n", key, val)
                       : snprintf(out + used, cap - used, "%s\n", secret);
        sodium_memzero(secret, sizeof secret);
        if (w < 0 || (size_t)w >= cap - used) {
            sodium_memzero(out, cap);
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "kafka options: more than %zu characters", cap - 1);
        }
        used += (size_t)w;
        p = end ? end + 1 : p + n;
    }
    out[used] = '\0';
    return 0;
}
