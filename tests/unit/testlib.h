/* Shared helpers for the CUnit suites. Every tests/unit/test_*.c defines
 * fsgd_test_register(), which adds its suites with fsgd_test_suite(). */
#ifndef FSGD_TESTLIB_H
#define FSGD_TESTLIB_H

#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Implemented by each test file. */
void fsgd_test_register(void);

typedef struct fsgd_test_case {
    const char *name;
    void (*fn)(void);
} fsgd_test_case_t;

/* Adds a suite of a NULL-terminated case array. */
void fsgd_test_suite(const char *name, const fsgd_test_case_t *cases);

/* Marks the running test as skipped (it could not run here: no GPU, no
 * data set, not root) and prints why. A skipped test counts neither as
 * passed nor as failed, unless it also failed an assertion; the closing
 * line reports "P passed, F failed, S skipped". The test should return
 * right after. */
void fsgd_test_skip(const char *why);

/* Path of a real data set ("a9a" -> $FSGD_DATA/a9a, else build/datasets/a9a:
 * the repository's data/sets, which the Makefile unpacks there before it
 * links a test). Returns a static buffer, or NULL when it does not exist:
 * then the running test is marked skipped (the directory is named once per
 * binary), or failed when the folder is the unpacked repository's (it has
 * scripts/unpack-data.sh's .sha256sums stamp: the repository lacks a set a
 * test needs), and must return. FSGD_TEST_DATA does both. */
const char *fsgd_test_data(const char *name);

#define FSGD_TEST_DATA(var, name)                                                                         \
    const char *var = fsgd_test_data(name);                                                              \
    if (!var)                                                                                            \
    return

/* A fresh temporary directory for this test binary (removed at exit).
 * Returns the path joined with name in a static rotating buffer. */
const char *fsgd_test_tmp(const char *name);

/* Writes len bytes to path; returns 0 on success. */
int fsgd_test_write_file(const char *path, const void *data, size_t len);

/* The whole file at path in a malloc'd buffer (free it), its size in *len;
 * NULL when it cannot be read. */
uint8_t *fsgd_test_read_file(const char *path, size_t *len);

/* The seed of this run (FSGD_TEST_SEED or time based); printed at start. */
uint64_t fsgd_test_seed(void);

/* splitmix64 step: deterministic random numbers for property tests. */
uint64_t fsgd_test_rand(uint64_t *state);

/* Path to the fsgd binary under test ($FSGD or bin/fsgd). */
const char *fsgd_test_bin(void);

/* Runs a shell command, capturing stdout+stderr into out (NUL-terminated,
 * truncated to cap). Returns the exit status (or -1). */
int fsgd_test_run(const char *cmd, char *out, size_t cap);

/* The parse context (fsgd/libsvm.h's fsgd_parse_ctx_t) of rows named src in
 * errors, from line 1, counted in stats (may be NULL). */
#define FSGD_TEST_AT(src_, stats_) (&(fsgd_parse_ctx_t){.src = (src_), .first_line = 1, .stats = (stats_)})

#define FSGD_ASSERT_CONTAINS(haystack, needle)                                                            \
    do {                                                                                                  \
        const char *h_ = (haystack);                                                                      \
        const char *n_ = (needle);                                                                        \
        int found_ = h_ && strstr(h_, n_) != NULL;                                                        \
        if (!found_)                                                                                      \
            fprintf(stderr, "\n  expected \"%s\" in \"%s\"\n", n_, h_ ? h_ : "(null)");                  \
        CU_ASSERT_TRUE(found_);                                                                           \
    } while (0)

#endif
