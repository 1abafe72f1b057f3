/* Output files (fsgd/outfile.h): a device, FIFO, directory or symbolic link
 * at the target is refused and left as it was; a regular file is replaced
 * atomically; no temporary file is left behind by an error, an abort or a
 * signal-time cleanup; unwritable places fail in the up-front check. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/model.h"
#include "fsgd/outfile.h"
#include "testlib.h"

/* Files in the test's temporary directory whose name contains ".tmp.". */
static int count_tmp_files(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", fsgd_test_tmp(""));
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static mode_t kind_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

static int write_through(const char *path, const char *text, char *err, size_t errsz)
{
    fsgd_outfile_t o;
    int rc = fsgd_outfile_open(&o, path, err, errsz);
    if (rc < 0)
        return rc;
    if (write(o.fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        fsgd_outfile_abort(&o);
        return FSGD_E_IO;
    }
    return fsgd_outfile_commit(&o, err, errsz);
}

static void read_text(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

static void test_regular_file_replaced(void)
{
    char err[1024], text[64];
    const char *p = fsgd_test_tmp("plain.txt");
    CU_ASSERT_EQUAL(fsgd_test_write_file(p, "old\n", 4), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_check(p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(write_through(p, "new\n", err, sizeof err), 0);
    read_text(p, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "new\n");
    CU_ASSERT_EQUAL(kind_of(p), S_IFREG);
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
    /* an absent file is created */
    const char *q = fsgd_test_tmp("fresh.txt");
    CU_ASSERT_EQUAL(write_through(q, "x", err, sizeof err), 0);
    read_text(q, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "x");
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
}

static void test_fifo_refused(void)
{
    char err[1024];
    const char *p = fsgd_test_tmp("fifo");
    CU_ASSERT_EQUAL_FATAL(mkfifo(p, 0600), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_check(p, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "is a FIFO, not a regular file: refusing to replace it");
    CU_ASSERT_EQUAL(write_through(p, "x", err, sizeof err), FSGD_E_ARG);
    /* the model writer goes the same way */
    fsgd_model_t m;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, 3, 1, 1), 0);
    m.w[1] = 1;
    CU_ASSERT_EQUAL(fsgd_model_save(&m, p, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_model_export_liblinear(&m, p, err, sizeof err), FSGD_E_ARG);
    fsgd_model_free(&m);
    CU_ASSERT_EQUAL(kind_of(p), S_IFIFO);
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
}

static void test_symlink_refused(void)
{
    char err[1024], text[64];
    const char *target = fsgd_test_tmp("link-target.txt");
    const char *link = fsgd_test_tmp("link");
    CU_ASSERT_EQUAL(fsgd_test_write_file(target, "keep", 4), 0);
    CU_ASSERT_EQUAL_FATAL(symlink(target, link), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_check(link, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "is a symbolic link: refusing to write through it");
    CU_ASSERT_EQUAL(write_through(link, "changed", err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(kind_of(link), S_IFLNK);
    read_text(target, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "keep");
    /* a dangling link too: writing would create a file wherever it points */
    const char *dangling = fsgd_test_tmp("dangling");
    CU_ASSERT_EQUAL_FATAL(symlink(fsgd_test_tmp("nowhere"), dangling), 0);
    CU_ASSERT_EQUAL(write_through(dangling, "x", err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(kind_of(fsgd_test_tmp("nowhere")), 0);
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
}

static void test_directory_and_unwritable_places(void)
{
    char err[1024];
    const char *d = fsgd_test_tmp("adir");
    CU_ASSERT_EQUAL_FATAL(mkdir(d, 0700), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_check(d, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "is a directory, not a regular file");
    CU_ASSERT_EQUAL(fsgd_outfile_check(fsgd_test_tmp("nodir/x.json"), err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "nodir': No such file or directory");
    /* /proc takes no new files, even from root */
    CU_ASSERT_EQUAL(fsgd_outfile_check("/proc/fsgd-test-x", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "cannot create files in '/proc'");
    CU_ASSERT_EQUAL(fsgd_outfile_check("/dev/null/x", err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_outfile_check("/dev/null", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "is a character device");
    CU_ASSERT_EQUAL(fsgd_outfile_check("", err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
}

/* A device node made here (root only): the case of the issue, where
 * `--out /tmp/x/nulldev` turned a device into a regular file. */
static void test_device_node_refused(void)
{
    if (geteuid() != 0) {
        fsgd_test_skip("mknod needs root");
        return;
    }
    char err[1024];
    const char *p = fsgd_test_tmp("nulldev");
    CU_ASSERT_EQUAL_FATAL(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0);
    fsgd_model_t m;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, 3, 1, 1), 0);
    m.w[0] = 2;
    CU_ASSERT_EQUAL(fsgd_model_save(&m, p, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "is a character device");
    fsgd_model_free(&m);
    CU_ASSERT_EQUAL(kind_of(p), S_IFCHR);
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
}

/* The final path is checked again at commit: a FIFO that appeared after
 * the file was opened is not renamed over, the temporary file goes. */
static void test_commit_rechecks_target(void)
{
    char err[1024];
    const char *p = fsgd_test_tmp("late-fifo");
    fsgd_outfile_t o;
    CU_ASSERT_EQUAL_FATAL(fsgd_outfile_open(&o, p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(count_tmp_files(), 1);
    CU_ASSERT_EQUAL_FATAL(mkfifo(p, 0600), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_commit(&o, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(kind_of(p), S_IFIFO);
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
}

static void test_abort_and_signal_cleanup(void)
{
    char err[1024];
    const char *p = fsgd_test_tmp("aborted.txt");
    fsgd_outfile_t o;
    CU_ASSERT_EQUAL_FATAL(fsgd_outfile_open(&o, p, err, sizeof err), 0);
    FILE *f = fsgd_outfile_stream(&o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("half", f);
    fsgd_outfile_abort(&o);
    CU_ASSERT_EQUAL(kind_of(p), 0);
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
    fsgd_outfile_abort(&o); /* twice is harmless */
    /* what a SIGTERM handler does: every file in flight goes */
    fsgd_outfile_t a, b;
    CU_ASSERT_EQUAL_FATAL(fsgd_outfile_open(&a, fsgd_test_tmp("a.txt"), err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_outfile_open(&b, fsgd_test_tmp("b.txt"), err, sizeof err), 0);
    CU_ASSERT_EQUAL(count_tmp_files(), 2);
    fsgd_outfile_remove_temps();
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
    /* committing a file whose temporary was removed fails without a trace */
    CU_ASSERT_EQUAL(fsgd_outfile_commit(&a, err, sizeof err), FSGD_E_IO);
    fsgd_outfile_abort(&b);
    CU_ASSERT_EQUAL(kind_of(fsgd_test_tmp("a.txt")), 0);
}

/* Outputs are compared with inputs by identity: spellings, hard and
 * symbolic links of one file are the same; absent paths by directory and
 * name; different files are not. */
static void test_same_by_identity(void)
{
    char a[512], b[512], c[600], sub[512];
    snprintf(a, sizeof a, "%s", fsgd_test_tmp("same_a.txt"));
    snprintf(b, sizeof b, "%s", fsgd_test_tmp("same_b.txt"));
    snprintf(sub, sizeof sub, "%s", fsgd_test_tmp("same_sub"));
    FILE *f = fopen(a, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_same(a, a), 1);
    snprintf(c, sizeof c, "%s/../same_a.txt", sub);
    CU_ASSERT_EQUAL(fsgd_outfile_same(a, c), 1);
    CU_ASSERT_EQUAL(fsgd_outfile_same(a, b), 0); /* b absent, a present */
    CU_ASSERT_EQUAL_FATAL(link(a, b), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_same(a, b), 1); /* a hard link */
    unlink(b);
    CU_ASSERT_EQUAL_FATAL(symlink(a, b), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_same(b, a), 1); /* through a link */
    unlink(b);
    snprintf(c, sizeof c, "%s/../same_b.txt", sub);
    CU_ASSERT_EQUAL(fsgd_outfile_same(b, c), 1); /* both absent, one place */
    snprintf(c, sizeof c, "%s/same_b.txt", sub);
    CU_ASSERT_EQUAL(fsgd_outfile_same(b, c), 0); /* both absent, two places */
    CU_ASSERT_EQUAL(fsgd_outfile_same(a, ""), 0);
    CU_ASSERT_EQUAL(fsgd_outfile_same(NULL, a), 0);
    unlink(a);
    rmdir(sub);
}

/* commit_keep: the old file becomes PATH.prev only once the new one is
 * written; a write that fails (the file size limit standing in for a full
 * disk) leaves PATH and PATH.prev as they were (issue 42: a full disk used
 * to leave no checkpoint at all). */
static void test_commit_keep(void)
{
    char err[1024], text[64];
    char prev[600];
    const char *p = fsgd_test_tmp("ck.bin");
    snprintf(prev, sizeof prev, "%s.prev", p);
    CU_ASSERT_EQUAL(write_through(p, "one", err, sizeof err), 0);
    fsgd_outfile_t o;
    CU_ASSERT_EQUAL_FATAL(fsgd_outfile_open(&o, p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(write(o.fd, "two", 3), 3);
    CU_ASSERT_EQUAL(fsgd_outfile_commit_keep(&o, prev, err, sizeof err), 0);
    read_text(p, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "two");
    read_text(prev, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "one");
    CU_ASSERT_EQUAL(count_tmp_files(), 0);

    /* a write past the limit fails with EFBIG (SIGXFSZ ignored) */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 16;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    CU_ASSERT_EQUAL_FATAL(fsgd_outfile_open(&o, p, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
    char big[64];
    memset(big, 'x', sizeof big);
    ssize_t w = write(o.fd, big, sizeof big);
    if (w == (ssize_t)sizeof big)
        w = write(o.fd, big, sizeof big);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, was);
    CU_ASSERT_TRUE(w < (ssize_t)sizeof big);
    fsgd_outfile_abort(&o);
    read_text(p, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "two");
    read_text(prev, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "one");
    CU_ASSERT_EQUAL(count_tmp_files(), 0);

    /* keep must be a regular file or absent: a link there is refused, nothing moved */
    unlink(prev);
    CU_ASSERT_EQUAL(symlink("/etc/passwd", prev), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_outfile_open(&o, p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(write(o.fd, "three", 5), 5);
    CU_ASSERT_EQUAL(fsgd_outfile_commit_keep(&o, prev, err, sizeof err), FSGD_E_ARG);
    read_text(p, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "two");
    CU_ASSERT_EQUAL(kind_of(prev), S_IFLNK);
    CU_ASSERT_EQUAL(count_tmp_files(), 0);
    unlink(prev);
    unlink(p);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"a regular file is replaced atomically", test_regular_file_replaced},
        {"a FIFO is refused and left alone", test_fifo_refused},
        {"a symbolic link is never written through", test_symlink_refused},
        {"directories, missing directories, /proc, /dev/null", test_directory_and_unwritable_places},
        {"a device node is refused and left alone", test_device_node_refused},
        {"commit checks the target again", test_commit_rechecks_target},
        {"abort and signal-time cleanup leave no temporary file", test_abort_and_signal_cleanup},
        {"paths are compared by identity", test_same_by_identity},
        {"commit_keep retires the old file only after the new one is written", test_commit_keep},
        {NULL, NULL},
    };
    fsgd_test_suite("output files", cases);
}
