/* The main() of every unit test binary: registers the file's suites, runs
 * them with CUnit's basic interface and exits non-zero on any failure.
 *
 *   build/unit/test_adam              every case
 *   build/unit/test_adam PATTERN...   the cases whose "suite: case" name
 *                                     contains one of the patterns (case-blind)
 *   build/unit/test_adam --list       the cases' names, nothing run */
#include <CUnit/Basic.h>
#include <CUnit/TestRun.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

/* The Makefile sets it to $(BUILD)/datasets, relative to the repository root
 * where the tests run. */
#ifndef FSGD_TEST_DATA_DIR
#define FSGD_TEST_DATA_DIR "build/datasets"
#endif

static char tmp_dir[256];
static uint64_t seed;

/* Tests that called fsgd_test_skip (CUnit has no skip of its own). */
static CU_pTest skipped[256];
static unsigned n_skipped;

void fsgd_test_skip(const char *why)
{
    CU_pTest t = CU_get_current_test();
    printf("SKIPPED: %s ", why);
    fflush(stdout);
    for (unsigned i = 0; i < n_skipped; i++)
        if (skipped[i] == t)
            return;
    if (n_skipped < sizeof skipped / sizeof *skipped)
        skipped[n_skipped++] = t;
}

/* Skipped tests that did not also fail. */
static unsigned count_skipped(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < n_skipped; i++) {
        int failed = 0;
        for (CU_pFailureRecord f = CU_get_failure_list(); f && !failed; f = f->pNext)
            failed = f->pTest == skipped[i];
        n += !failed;
    }
    return n;
}

void fsgd_test_suite(const char *name, const fsgd_test_case_t *cases)
{
    CU_pSuite s = CU_add_suite(name, NULL, NULL);
    if (!s) {
        fprintf(stderr, "cannot add suite %s: %s\n", name, CU_get_error_msg());
        exit(2);
    }
    for (; cases->name; cases++)
        if (!CU_add_test(s, cases->name, cases->fn)) {
            fprintf(stderr, "cannot add test %s: %s\n", cases->name, CU_get_error_msg());
            exit(2);
        }
}

const char *fsgd_test_data(const char *name)
{
    static char path[4][512];
    static int slot;
    char *p = path[slot++ & 3];
    const char *dir = getenv("FSGD_DATA");
    if (!dir || !*dir)
        dir = FSGD_TEST_DATA_DIR;
    snprintf(p, 512, "%s/%s", dir, name);
    if (access(p, R_OK) != 0) {
        char stamp[512];
        snprintf(stamp, sizeof stamp, "%s/.sha256sums", dir);
        if (access(stamp, R_OK) == 0) {
            fprintf(stderr, "\nfsgd-test: test data %s not found in the repository's data sets: "
                            "make data unpacks them; a set it lacks belongs in data/sets (README, SHA256SUMS)\n",
                    p);
            CU_FAIL("a data set the repository does not ship");
            return NULL;
        }
        static int said;
        if (!said++)
            fprintf(stderr, "\nfsgd-test: test data %s not found (set FSGD_DATA to the data sets' directory): "
                            "tests that need it are skipped\n",
                    p);
        fsgd_test_skip("needs a data set");
        return NULL;
    }
    return p;
}

static void remove_tmp(void)
{
    if (tmp_dir[0] && !getenv("FSGD_KEEP_TMP")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmp_dir);
    }
}

const char *fsgd_test_tmp(const char *name)
{
    static char path[8][512];
    static int slot;
    if (!tmp_dir[0]) {
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/fsgd-test-XXXXXX");
        if (!mkdtemp(tmp_dir)) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(remove_tmp);
    }
    char *p = path[slot++ & 7];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    return p;
}

int fsgd_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

uint8_t *fsgd_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *nb = realloc(buf, cap *= 2);
        if (!nb)
            free(buf);
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

uint64_t fsgd_test_seed(void) { return seed; }

uint64_t fsgd_test_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

const char *fsgd_test_bin(void)
{
    const char *b = getenv("FSGD");
    return b ? b : "bin/fsgd";
}

int fsgd_test_run(const char *cmd, char *out, size_t cap)
{
    char full[8192];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    size_t n = 0;
    if (out && cap) {
        size_t r;
        while (n + 1 < cap && (r = fread(out + n, 1, cap - 1 - n, p)) > 0)
            n += r;
        out[n] = '\0';
    }
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 1 when "suite: case" contains one of the patterns, ignoring case. */
static int case_matches(const char *suite, const char *name, int n, char **patterns)
{
    char full[512];
    snprintf(full, sizeof full, "%s: %s", suite, name);
    for (int i = 0; i < n; i++)
        for (const char *p = full; *p; p++)
            if (!strncasecmp(p, patterns[i], strlen(patterns[i])))
                return 1;
    return 0;
}

/* Leaves active only the cases the patterns name (--list: prints every
 * case instead). Returns how many are active, -1 after --list. */
static int select_cases(int n, char **patterns)
{
    int list = n == 1 && !strcmp(patterns[0], "--list"), active = 0;
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
        for (CU_pTest t = s->pTest; t; t = t->pNext) {
            if (list) {
                printf("%s: %s\n", s->pName, t->pName);
                continue;
            }
            int on = n == 0 || case_matches(s->pName, t->pName, n, patterns);
            CU_set_test_active(t, on ? CU_TRUE : CU_FALSE);
            active += on;
        }
    return list ? -1 : active;
}

int main(int argc, char **argv)
{
    const char *s = getenv("FSGD_TEST_SEED");
    seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    printf("%s: seed %llu (FSGD_TEST_SEED to repeat)\n", argv[0], (unsigned long long)seed);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    fsgd_test_register();
    int active = select_cases(argc - 1, argv + 1);
    if (active < 0) {
        CU_cleanup_registry();
        return 0;
    }
    if (active == 0) {
        fprintf(stderr, "%s: no case matches", argv[0]);
        for (int i = 1; i < argc; i++)
            fprintf(stderr, " '%s'", argv[i]);
        fprintf(stderr, " (--list prints them)\n");
        CU_cleanup_registry();
        return 2;
    }
    CU_set_fail_on_inactive(CU_FALSE); /* the cases left out are not failures */
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    unsigned asserts_failed = CU_get_number_of_failures();
    unsigned skip = count_skipped();
    printf("fsgd-test: %s: %u passed, %u failed, %u skipped\n", argv[0], run - failed - skip, failed, skip);
    CU_cleanup_registry();
    return (failed || asserts_failed) ? 1 : 0;
}
