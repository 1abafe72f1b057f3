/* The progress line (fsgd/progress.h). */
#include "fsgd/progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double fsgd_progress_eta(double elapsed, double done, double total)
{
    /* under a second of work says nothing about the rate yet */
    if (!(done > 0) || !(total > 0) || !(elapsed >= 1) || !isfinite(elapsed))
        return -1;
    if (done >= total)
        return 0;
    return elapsed * (total - done) / done;
}

void fsgd_progress_fmt_duration(char *buf, size_t n, double seconds)
{
    if (!isfinite(seconds) || seconds < 0 || seconds > 1e9) {
        snprintf(buf, n, "--");
        return;
    }
    unsigned long long s = (unsigned long long)llround(seconds);
    if (s < 60)
        snprintf(buf, n, "%llus", s);
    else if (s < 3600)
        snprintf(buf, n, "%llum%02llus", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, n, "%lluh%02llum", s / 3600, s % 3600 / 60);
    else
        snprintf(buf, n, "%llud%02lluh", s / 86400, s % 86400 / 3600);
}

void fsgd_progress_fmt_si(char *buf, size_t n, double v)
{
    static const char *const pre[] = {"", "k", "M", "G", "T", "P"};
    if (!isfinite(v) || v < 0) {
        snprintf(buf, n, "--");
        return;
    }
    int i = 0;
    /* 999.5 would print as "1e+03": move up a prefix before rounding does */
    while (v >= 999.5 && i < 5) {
        v /= 1000;
        i++;
    }
    if (i == 0)
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "%.*f%s", v < 9.995 ? 2 : v < 99.95 ? 1 : 0, v, pre[i]);
}

int fsgd_progress_format(char *buf, size_t n, const fsgd_progress_info_t *p)
{
    char rate[32], bytes[32], eta[32];
    fsgd_progress_fmt_si(rate, sizeof rate, p->rows_per_s);
    fsgd_progress_fmt_si(bytes, sizeof bytes, p->bytes_per_step);
    fsgd_progress_fmt_duration(eta, sizeof eta, p->eta_s);
    char ep[48];
    if (p->epochs > 0)
        snprintf(ep, sizeof ep, "epoch %d/%d", p->epoch, p->epochs);
    else
        snprintf(ep, sizeof ep, "epoch %d", p->epoch);
    char loss[48] = "";
    if (!isnan(p->loss))
        snprintf(loss, sizeof loss, "  loss %.4f", p->loss);
    char rs[48] = "", bs[48] = "";
    if (p->rows_per_s >= 0)
        snprintf(rs, sizeof rs, "  %s rows/s", rate);
    if (p->bytes_per_step >= 0)
        snprintf(bs, sizeof bs, "  %sB/step", bytes);
    return snprintf(buf, n, "%s%s  step %llu%s%s%s  ETA %s%s%s", p->prefix ? p->prefix : "", ep,
                    (unsigned long long)p->step, rs, loss, bs, eta, p->extra && *p->extra ? "  " : "",
                    p->extra ? p->extra : "");
}

int fsgd_progress_fmt_shard(char *buf, size_t n, uint32_t shard, uint32_t shards, uint64_t weights, double busy,
                            double entries_per_step)
{
    char b[48] = "", e[48] = "", si[16];
    if (busy >= 0 && isfinite(busy))
        snprintf(b, sizeof b, "  busy %.1f%% decode+update", 100 * busy);
    if (entries_per_step >= 0 && isfinite(entries_per_step)) {
        fsgd_progress_fmt_si(si, sizeof si, entries_per_step);
        snprintf(e, sizeof e, "  %s entries/step", si);
    }
    return snprintf(buf, n, "shard %u/%u (keys k mod %u = %u, %llu weights)%s%s", shard, shards, shards, shard,
                    (unsigned long long)weights, b, e);
}

struct fsgd_progress {
    FILE *f;
    int tty;
    int open; /* an in-place line is on screen */
};

fsgd_progress_t *fsgd_progress_new(FILE *f, int tty)
{
    fsgd_progress_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->f = f;
    p->tty = tty < 0 ? isatty(fileno(f)) : tty != 0;
    return p;
}

void fsgd_progress_update(fsgd_progress_t *p, const fsgd_progress_info_t *info)
{
    char line[512];
    fsgd_progress_format(line, sizeof line, info);
    if (p->tty) {
        /* \033[K erases what a longer previous line left */
        fprintf(p->f, "\r%s\033[K", line);
        p->open = 1;
    } else {
        fprintf(p->f, "%s\n", line);
    }
    fflush(p->f);
}

void fsgd_progress_println(fsgd_progress_t *p, const char *line)
{
    if (p->tty && p->open) {
        fputs("\r\033[K", p->f);
        p->open = 0;
    }
    fprintf(p->f, "%s\n", line);
    fflush(p->f);
}

void fsgd_progress_finish(fsgd_progress_t *p)
{
    if (p && p->tty && p->open) {
        fputc('\n', p->f);
        p->open = 0;
        fflush(p->f);
    }
}

void fsgd_progress_destroy(fsgd_progress_t *p)
{
    fsgd_progress_finish(p);
    free(p);
}
