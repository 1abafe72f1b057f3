/* Fuzz target: the NAME.ctl JSON reader (fsgd_ctl_get_str / fsgd_ctl_get_num /
 * fsgd_ctl_get_u32s in trainer/distributed/ctl.c) and its agreement with the writer.
 *
 * Input byte 0, bit 0 set: the rest (after a size byte) is read as a message
 * of any client: lookups of the fields fsgd reads, into small buffers with
 * guard bytes; they must stay inside the message and the buffers, end
 * strings with a NUL and count what they store. Bit 0 clear: the rest makes
 * an event with the writer (cj_*: two strings of any bytes but NUL, a u64, an
 * i64, an f64 and a u32 list), which the reader must read back exactly
 * (non-finite f64 are written as null and then absent). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/le.h"

#include "fsgd/job.h"

#include "ctl.h"
#include "data_summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define GUARD 8

static void read_any(const uint8_t *data, size_t size)
{
    if (size < 1)
        return;
    size_t cap = 1 + data[0] % 48, ucap = data[0] % 8;
    size_t len = size - 1;
    char *j = malloc(len ? len : 1);
    if (!j)
        return;
    memcpy(j, data + 1, len);
    static const char *keys[] = {"event", "job", "gen", "worker", "partitions", "status", "error", "time", ""};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        char out[48 + GUARD];
        memset(out, 0x5a, sizeof out);
        if (fsgd_ctl_get_str(j, len, keys[k], out, cap)) {
            if (!memchr(out, '\0', cap))
                abort();
        }
        for (size_t i = cap; i < cap + GUARD; i++)
            if (out[i] != 0x5a && !(i == cap && out[i] == 0x5a))
                abort();
        double d = 12345;
        if (fsgd_ctl_get_num(j, len, keys[k], &d) && !isfinite(d))
            abort();
        uint32_t u[8 + GUARD];
        for (size_t i = 0; i < sizeof u / sizeof *u; i++)
            u[i] = 0xdeadbeef;
        size_t n = 99;
        int got = fsgd_ctl_get_u32s(j, len, keys[k], u, ucap, &n);
        if (n > ucap || (got && n > ucap))
            abort();
        for (size_t i = ucap; i < sizeof u / sizeof *u; i++)
            if (u[i] != 0xdeadbeef)
                abort();
    }
    /* a producer's data_summary (of job "fsgd", format libsvm): what it
     * accepts adds up */
    static fsgd_job_t job;
    static fsgd_data_summary_t sum;
    if (!job.train.format[0]) {
        fsgd_job_defaults(&job);
        snprintf(job.dist.name, sizeof job.dist.name, "fsgd");
    }
    if (fsgd_data_summary_parse(j, len, FSGD_JOB_DIST(&job), &sum)) {
        uint64_t total = 0;
        for (uint32_t p = 0; p < sum.nparts; p++) {
            total += sum.part_rows[p];
            /* every message a full block but a partition's last */
            if (sum.block_rows < 1 || sum.ends[p] != ((uint64_t)sum.part_rows[p] + sum.block_rows - 1) / sum.block_rows)
                abort();
        }
        if (sum.nparts == 0 || sum.nparts > FSGD_SUMMARY_MAX_PARTS || total != sum.rows || sum.labels.n < 0 ||
            sum.labels.n > FSGD_LABELS_KEPT || !(sum.xmax >= 0) || !(sum.ymax >= 0))
            abort();
    }
    free(j);
}

/* a string of the bytes at *p up to a NUL (at most 60), advancing *p */
static void take_str(const uint8_t **p, const uint8_t *end, char *out)
{
    size_t n = 0;
    while (*p < end && **p && n < 60)
        out[n++] = (char)*(*p)++;
    if (*p < end)
        (*p)++;
    out[n] = '\0';
}

static void roundtrip(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    char ev[61], job[61];
    take_str(&p, end, ev);
    take_str(&p, end, job);
    uint8_t num[24] = {0};
    size_t nn = (size_t)(end - p) < sizeof num ? (size_t)(end - p) : sizeof num;
    memcpy(num, p, nn);
    p += nn;
    uint64_t u64 = fsgd_le_get64(num);
    int64_t i64 = (int64_t)fsgd_le_get64(num + 8);
    double f64 = fsgd_le_getf64(num + 16);
    uint32_t parts[16];
    size_t np = 0;
    while (end - p >= 4 && np < 16) {
        parts[np++] = fsgd_le_get32(p);
        p += 4;
    }
    fsgd_ctl_json_t cj = {0};
    fsgd_cj_begin(&cj, ev, job);
    fsgd_cj_u64(&cj, "gen", u64);
    fsgd_cj_i64(&cj, "step", i64);
    fsgd_cj_f64(&cj, "loss", f64);
    fsgd_cj_u32s(&cj, "partitions", parts, np);
    fsgd_cj_str(&cj, "error", job);
    fsgd_cj_str(&cj, "none", NULL);
    if (fsgd_cj_end(&cj) < 0) {
        fsgd_cj_free(&cj);
        return;
    }
    char *j = malloc(cj.n);
    if (!j)
        abort();
    memcpy(j, cj.p, cj.n); /* exactly the message, no NUL after it */
    char s[64];
    double d;
    uint32_t back[16];
    size_t nb = 0;
    if (!fsgd_ctl_get_str(j, cj.n, "event", s, sizeof s) || strcmp(s, ev) || !fsgd_ctl_get_str(j, cj.n, "job", s, sizeof s) ||
        strcmp(s, job) || !fsgd_ctl_get_str(j, cj.n, "error", s, sizeof s) || strcmp(s, job) ||
        fsgd_ctl_get_str(j, cj.n, "none", s, sizeof s) || fsgd_ctl_get_str(j, cj.n, "missing", s, sizeof s))
        abort();
    if (!fsgd_ctl_get_num(j, cj.n, "gen", &d) || d != (double)u64 || !fsgd_ctl_get_num(j, cj.n, "step", &d) ||
        d != (double)i64 || !fsgd_ctl_get_num(j, cj.n, "time", &d))
        abort();
    int have = fsgd_ctl_get_num(j, cj.n, "loss", &d);
    if (isfinite(f64) ? !have || memcmp(&d, &f64, sizeof d) : have)
        abort();
    if (!fsgd_ctl_get_u32s(j, cj.n, "partitions", back, 16, &nb) || nb != np ||
        (np && memcmp(back, parts, np * sizeof *parts)))
        abort();
    free(j);
    fsgd_cj_free(&cj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        read_any(data + 1, size - 1);
    else
        roundtrip(data + 1, size - 1);
    return 0;
}
