/* The progress line: exact text of the formatter, ETA, durations, SI
 * numbers, and what reaches a terminal (in place) and a pipe (lines). */
#include <math.h>
#include <stdlib.h>

#include "fsgd/progress.h"
#include "testlib.h"

static void test_duration(void)
{
    char b[32];
    const double in[] = {0, 0.4, 59.4, 59.6, 60, 187, 3599, 3600, 7500, 86399, 90000, -1, NAN, INFINITY};
    const char *want[] = {"0s", "0s", "59s", "1m00s", "1m00s", "3m07s", "59m59s",
                          "1h00m", "2h05m", "23h59m", "1d01h", "--", "--", "--"};
    for (int i = 0; i < 14; i++) {
        fsgd_progress_fmt_duration(b, sizeof b, in[i]);
        CU_ASSERT_STRING_EQUAL(b, want[i]);
        if (strcmp(b, want[i]))
            printf("\n%g -> '%s', want '%s'", in[i], b, want[i]);
    }
    fsgd_progress_fmt_duration(b, 3, 3599); /* truncated, still terminated */
    CU_ASSERT_STRING_EQUAL(b, "59");
}

static void test_si(void)
{
    char b[32];
    const double in[] = {0, 7, 950, 999.4, 999.5, 1000, 12345, 99949, 99950, 4.56e6, 7.891e9, 2e18, -1, NAN};
    const char *want[] = {"0",     "7",     "950",   "999",  "1.00k", "1.00k", "12.3k",
                          "99.9k", "100k",  "4.56M", "7.89G", "2000P", "--",    "--"};
    for (int i = 0; i < 14; i++) {
        fsgd_progress_fmt_si(b, sizeof b, in[i]);
        CU_ASSERT_STRING_EQUAL(b, want[i]);
        if (strcmp(b, want[i]))
            printf("\n%g -> '%s', want '%s'", in[i], b, want[i]);
    }
}

static void test_eta(void)
{
    CU_ASSERT_DOUBLE_EQUAL(fsgd_progress_eta(10, 25, 100), 30, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_progress_eta(10, 100, 100), 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_progress_eta(10, 120, 100), 0, 0);
    CU_ASSERT(fsgd_progress_eta(10, 0, 100) < 0);
    CU_ASSERT(fsgd_progress_eta(10, 5, 0) < 0);
    CU_ASSERT(fsgd_progress_eta(NAN, 5, 10) < 0);
    CU_ASSERT(fsgd_progress_eta(0.5, 5, 10) < 0); /* too early to tell */
    CU_ASSERT_DOUBLE_EQUAL(fsgd_progress_eta(1, 5, 10), 1, 1e-12);
}

static void test_format(void)
{
    char b[256];
    fsgd_progress_info_t p = {.prefix = "fsgd: ", .epoch = 2, .epochs = 10, .step = 130, .rows_per_s = 12345,
                              .loss = 0.35214, .bytes_per_step = 1234, .eta_s = 187, .extra = "workers 3"};
    int n = fsgd_progress_format(b, sizeof b, &p);
    const char *want = "fsgd: epoch 2/10  step 130  12.3k rows/s  loss 0.3521  1.23kB/step  ETA 3m07s  workers 3";
    CU_ASSERT_STRING_EQUAL(b, want);
    CU_ASSERT_EQUAL(n, (int)strlen(want));
    /* unknown total, no rate, no loss, no bytes, unknown ETA */
    fsgd_progress_info_t q = {.epoch = 1, .step = 0, .rows_per_s = -1, .loss = NAN, .bytes_per_step = -1,
                              .eta_s = -1};
    fsgd_progress_format(b, sizeof b, &q);
    CU_ASSERT_STRING_EQUAL(b, "epoch 1  step 0  ETA --");
    /* a short buffer truncates but reports the full length */
    n = fsgd_progress_format(b, 10, &p);
    CU_ASSERT_EQUAL(n, (int)strlen(want));
    CU_ASSERT_EQUAL(strlen(b), 9);
}

/* What a progress line writes to a stream, as a string. */
static char *run(int tty)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fsgd_progress_t *p = fsgd_progress_new(f, tty);
    fsgd_progress_info_t i = {.epoch = 1, .epochs = 2, .step = 10, .rows_per_s = 500, .loss = 0.5,
                              .bytes_per_step = 100, .eta_s = 5};
    fsgd_progress_update(p, &i);
    i.step = 20;
    i.eta_s = 0;
    fsgd_progress_update(p, &i);
    fsgd_progress_println(p, "epoch 1 done");
    i.epoch = 2;
    fsgd_progress_update(p, &i);
    fsgd_progress_destroy(p);
    fclose(f);
    return buf;
}

static void test_terminal_and_pipe(void)
{
    char *t = run(1);
    const char *want_tty = "\repoch 1/2  step 10  500 rows/s  loss 0.5000  100B/step  ETA 5s\033[K"
                           "\repoch 1/2  step 20  500 rows/s  loss 0.5000  100B/step  ETA 0s\033[K"
                           "\r\033[Kepoch 1 done\n"
                           "\repoch 2/2  step 20  500 rows/s  loss 0.5000  100B/step  ETA 0s\033[K\n";
    CU_ASSERT_STRING_EQUAL(t, want_tty);
    free(t);
    char *l = run(0);
    const char *want_pipe = "epoch 1/2  step 10  500 rows/s  loss 0.5000  100B/step  ETA 5s\n"
                            "epoch 1/2  step 20  500 rows/s  loss 0.5000  100B/step  ETA 0s\n"
                            "epoch 1 done\n"
                            "epoch 2/2  step 20  500 rows/s  loss 0.5000  100B/step  ETA 0s\n";
    CU_ASSERT_STRING_EQUAL(l, want_pipe);
    CU_ASSERT_PTR_NULL(strchr(l, '\r'));
    CU_ASSERT_PTR_NULL(strchr(l, '\033'));
    free(l);
    /* tty = -1 asks the stream: a memory stream is no terminal */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fsgd_progress_t *p = fsgd_progress_new(f, -1);
    fsgd_progress_info_t i = {.epoch = 1, .loss = NAN, .rows_per_s = -1, .bytes_per_step = -1, .eta_s = -1};
    fsgd_progress_update(p, &i);
    fsgd_progress_destroy(p);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(buf, "epoch 1  step 0  ETA --\n");
    free(buf);
    fsgd_progress_destroy(NULL);
}

/* A shard's range and load: exact text; busy and entries left out when not
 * measured. */
static void test_shard(void)
{
    char b[160];
    int n = fsgd_progress_fmt_shard(b, sizeof b, 1, 4, 250000, 0.125, 3400);
    CU_ASSERT_STRING_EQUAL(b, "shard 1/4 (keys k mod 4 = 1, 250000 weights)  busy 12.5% decode+update  3.40k entries/step");
    CU_ASSERT_EQUAL(n, (int)strlen(b));
    fsgd_progress_fmt_shard(b, sizeof b, 0, 2, 7, -1, NAN);
    CU_ASSERT_STRING_EQUAL(b, "shard 0/2 (keys k mod 2 = 0, 7 weights)");
    fsgd_progress_fmt_shard(b, sizeof b, 3, 64, 1, INFINITY, 0);
    CU_ASSERT_STRING_EQUAL(b, "shard 3/64 (keys k mod 64 = 3, 1 weights)  0 entries/step");
    n = fsgd_progress_fmt_shard(b, 10, 1, 4, 250000, 0.5, 1); /* truncated, still terminated */
    CU_ASSERT_STRING_EQUAL(b, "shard 1/4");
    CU_ASSERT(n > 10);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {{"duration", test_duration},
                                             {"si", test_si},
                                             {"eta", test_eta},
                                             {"format", test_format},
                                             {"terminal_and_pipe", test_terminal_and_pipe},
                                             {"shard", test_shard},
                                             {NULL, NULL}};
    fsgd_test_suite("progress", cases);
}
