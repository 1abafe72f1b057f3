/* The progress line of long work (fsgd train, fsgd aggregator): epoch,
 * step, rows/s, loss, bytes/step and an ETA. On a terminal it is redrawn in
 * place (carriage return, erase to end of line); otherwise every update is
 * a plain line, so logs and pipes read well. */
#ifndef FSGD_PROGRESS_H
#define FSGD_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct fsgd_progress_info {
    const char *prefix;    /* printed first (e.g. "fsgd: "), may be NULL */
    int epoch, epochs;     /* 1-based; epochs <= 0: unknown total */
    uint64_t step;
    double rows_per_s;     /* < 0: left out */
    double loss;           /* NaN: left out */
    double bytes_per_step; /* < 0: left out */
    double eta_s;          /* < 0 or NaN: "ETA --" (unknown); 0 at the end */
    const char *extra;     /* appended after two spaces, may be NULL */
} fsgd_progress_info_t;

/* Seconds left when `done` of `total` units took `elapsed` seconds at a
 * steady rate; -1 when it cannot be told yet (nothing done, no total,
 * under a second elapsed). */
double fsgd_progress_eta(double elapsed, double done, double total);

/* "45s", "3m07s", "2h05m", "3d04h" (rounded to whole seconds); "--" for a
 * negative or non-finite time. Writes at most n bytes (NUL included). */
void fsgd_progress_fmt_duration(char *buf, size_t n, double seconds);

/* "950", "12.3k", "4.56M", "7.89G": three significant digits, SI prefixes.
 * Negative or non-finite: "--". */
void fsgd_progress_fmt_si(char *buf, size_t n, double v);

/* The line without any terminal control, e.g.
 * "epoch 2/10  step 130  12.3k rows/s  loss 0.3521  1.23 kB/step  ETA 3m07s".
 * Returns the length it needed (as snprintf). */
int fsgd_progress_format(char *buf, size_t n, const fsgd_progress_info_t *p);

/* What an aggregator shard of a sharded job holds and how busy it is, for
 * its progress line and summary, e.g.
 * "shard 1/4 (keys k mod 4 = 1, 250000 weights)  busy 12.5% decode+update  3.40k entries/step".
 * busy is the share (0..1) of the training time spent decoding and
 * applying gradients, entries_per_step the gradient (key, value) pairs it
 * took a step over all workers; each is left out when < 0 or not finite.
 * Returns the length it needed (as snprintf). */
int fsgd_progress_fmt_shard(char *buf, size_t n, uint32_t shard, uint32_t shards, uint64_t weights, double busy,
                            double entries_per_step);

typedef struct fsgd_progress fsgd_progress_t;

/* A progress line on f (not owned). tty: 1 redraw in place, 0 plain lines,
 * -1 ask isatty(fileno(f)). NULL when out of memory. Not thread safe: one
 * thread prints. */
fsgd_progress_t *fsgd_progress_new(FILE *f, int tty);
/* Draws the line (in place on a terminal). */
void fsgd_progress_update(fsgd_progress_t *p, const fsgd_progress_info_t *info);
/* Prints a line that stays (an epoch summary, a warning): on a terminal it
 * clears the progress line first; the next update draws below it. */
void fsgd_progress_println(fsgd_progress_t *p, const char *line);
/* Ends an in-place line with a newline so later output starts clean. */
void fsgd_progress_finish(fsgd_progress_t *p);
/* Finishes and frees; NULL is a no-op. */
void fsgd_progress_destroy(fsgd_progress_t *p);

#endif
