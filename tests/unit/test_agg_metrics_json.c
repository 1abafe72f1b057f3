/* The aggregator's metrics JSON (fsgd_agg_write_metrics): what was not
 * measured is null, never a number (issue 42: a follow job's
 * progressive_auc was -1.0 before any row had been scored). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/job.h"
#include "testlib.h"

static void read_all(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

static void test_follow_unmeasured_is_null(void)
{
    static fsgd_job_t job;
    fsgd_job_defaults(&job);
    snprintf(job.dist.name, sizeof job.dist.name, "fj");
    fsgd_agg_stats_t st;
    memset(&st, 0, sizeof st);
    st.follow = 1;
    st.pv_logloss = NAN;
    st.pv_auc = NAN;
    st.pv_window_logloss = NAN;
    char err[512];
    const char *p = fsgd_test_tmp("follow.json");
    CU_ASSERT_EQUAL_FATAL(fsgd_agg_write_metrics(FSGD_JOB_DIST(&job), &st, p, err, sizeof err), 0);
    static char text[1 << 16];
    read_all(p, text, sizeof text);
    FSGD_ASSERT_CONTAINS(text, "\"progressive_auc\": null");
    FSGD_ASSERT_CONTAINS(text, "\"progressive_logloss\": null");
    FSGD_ASSERT_CONTAINS(text, "\"window_logloss\": null");
    st.pv_auc = 0.75;
    st.pv_rows = 10;
    st.pv_logloss = 0.5;
    CU_ASSERT_EQUAL_FATAL(fsgd_agg_write_metrics(FSGD_JOB_DIST(&job), &st, p, err, sizeof err), 0);
    read_all(p, text, sizeof text);
    FSGD_ASSERT_CONTAINS(text, "\"progressive_auc\": 0.750000");
    FSGD_ASSERT_CONTAINS(text, "\"progressive_logloss\": 0.500000");
    fsgd_agg_stats_free(&st);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"a follow job's unmeasured progressive validation is null", test_follow_unmeasured_is_null},
        {NULL, NULL},
    };
    fsgd_test_suite("aggregator metrics JSON", cases);
}
