/* fsgd gen: CTR-shaped synthetic LIBSVM data (see fsgd/gen.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fsgd/clock.h"
#include "fsgd/error.h"
#include "fsgd/gen.h"
#include "fsgd/gen_criteo.h"
#include "fsgd/outfile.h"

static void gen_usage(FILE *f)
{
    fprintf(f,
            "usage: fsgd gen [options] > data.svm\n"
            "\n"
            "Writes LIBSVM rows shaped like CTR logs: Zipf feature popularity, a few to a few\n"
            "hundred nonzeros per row, labels from a known sparse weight vector.\n"
            "\n"
            "  --rows N          rows to write (default 10000)\n"
            "  --dim D           features, indices 1..D; up to 2^32 (default 1000000)\n"
            "  --nnz K           mean nonzeros per row; each row has 1..2K-1 (default 20)\n"
            "  --zipf S          popularity exponent, P(rank k) ~ k^-S; 0 is uniform (default 1.1)\n"
            "  --seed N          random seed; output is a function of all options (default 1)\n"
            "  --model M         logistic (labels +1/-1) or linear (real labels) (default logistic)\n"
            "  --noise X         stddev of Gaussian noise on the margin / label (default 0)\n"
            "  --bias B          intercept of the label model (default 0)\n"
            "  --w-nnz N         nonzero weights, on the N most popular features (default min(D,1000))\n"
            "  --w-scale X       weights ~ N(0, X^2) (default 2/sqrt(K))\n"
            "  --real            values k/1000 (k uniform in 1..1000) instead of binary 1\n"
            "  --dense N         also N real-valued features k/1000 in every row, indices 1..N, with\n"
            "                    weights like the others; the Zipf features are then N+1..D (numeric\n"
            "                    columns before one-hot ones, as in CTR logs) (default 0)\n"
            "  --format F        libsvm (default), or criteo: Criteo-shaped TSV (label, 13 integer and\n"
            "                    26 hex categorical columns, empty fields missing) for fsgd train\n"
            "                    --format criteo; uses --rows, --seed, --zipf, --bias, --w-scale (defaults\n"
            "                    -1.2 and 0.35 there) and --dim as the largest vocabulary (default 2^20)\n"
            "  --out FILE        write here instead of stdout\n"
            "  --weights-out F   write the true model: one LIBSVM row, label = bias, index:weight\n"
            "  --quiet           no progress line\n"
            "  -h, --help        this text\n"
            "\n"
            "Counts accept 1e6 and 2^32 forms. Example:\n"
            "  fsgd gen --rows 1e6 --dim 2^24 --nnz 30 --out ctr.svm --weights-out ctr.w\n");
}

/* "123", "1e6", "2^32" -> integer in [lo, hi]. */
static int parse_count(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    double v;
    errno = 0;
    const char *caret = strchr(s, '^');
    if (caret) {
        double b = strtod(s, &end);
        if (end != caret)
            goto bad;
        double e = strtod(caret + 1, &end);
        if (*end || caret[1] == '\0')
            goto bad;
        v = pow(b, e);
    } else {
        v = strtod(s, &end);
        if (end == s || *end)
            goto bad;
    }
    if (!(v >= (double)lo && v <= (double)hi) || v != floor(v)) {
        fsgd_cli_error("gen: %s %s out of range %llu..%llu", flag, s, (unsigned long long)lo,
                       (unsigned long long)hi);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
bad:
    fsgd_cli_error("gen: %s expects a whole number (e.g. 1000, 1e6, 2^20), got '%s'", flag, s);
    return -1;
}

static int parse_real(const char *flag, const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v)) {
        fsgd_cli_error("gen: %s expects a number, got '%s'", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

typedef struct progress {
    uint64_t total;
    double t0, last;
    int tty, printed;
} progress_t;

static void on_progress(void *ctx, uint64_t rows, uint64_t bytes)
{
    progress_t *p = ctx;
    double t = fsgd_clock_s();
    int done = rows == p->total;
    if (!done && t - p->last < (p->tty ? 0.5 : 5.0))
        return;
    if (!done && t - p->t0 < 1.0)
        return; /* small outputs stay quiet */
    if (done && !p->printed)
        return;
    p->last = t;
    p->printed = 1;
    double el = t - p->t0 > 1e-9 ? t - p->t0 : 1e-9;
    fprintf(stderr, "%sgen: %llu/%llu rows (%.0f%%), %.1f MB, %.1f MB/s, %.0f rows/s%s", p->tty ? "\r" : "",
            (unsigned long long)rows, (unsigned long long)p->total, 100.0 * (double)rows / (double)p->total,
            (double)bytes / 1e6, (double)bytes / 1e6 / el, (double)rows / el, p->tty && !done ? "" : "\n");
    fflush(stderr);
}

/* fsgd gen --format criteo: the rows to out_path (or stdout), written atomically. */

/* The rows written: the file committed (or, after an error, removed), or
 * stdout flushed. Returns rc, or the error of that last step. */
static int close_output(int rc, int to_file, fsgd_outfile_t *oo, char *err, size_t errsz)
{
    if (rc == 0 && to_file)
        return fsgd_outfile_commit(oo, err, errsz);
    if (to_file)
        fsgd_outfile_abort(oo);
    else if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout)))
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "write error: %s", strerror(errno));
    return rc;
}

static int write_criteo(const fsgd_gen_criteo_opts_t *co, const char *out_path, uint64_t rows, int quiet)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    fsgd_outfile_t oo;
    FILE *out = stdout;
    int to_file = out_path && strcmp(out_path, "-");
    int rc = 0;
    if (to_file) {
        rc = fsgd_outfile_open(&oo, out_path, err, sizeof err);
        if (rc == 0 && !(out = fsgd_outfile_stream(&oo, err, sizeof err))) {
            fsgd_outfile_abort(&oo);
            rc = FSGD_E_IO;
        }
        if (rc) {
            fsgd_cli_error("gen: %s", err);
            return fsgd_cli_status(rc);
        }
    }
    progress_t p = {rows, fsgd_clock_s(), 0, isatty(2), 0};
    p.last = p.t0;
    rc = fsgd_gen_criteo_write(co, out, rows, quiet ? NULL : on_progress, &p, err, sizeof err);
    rc = close_output(rc, to_file, &oo, err, sizeof err);
    if (rc) {
        fsgd_cli_error("gen: %s: %s", to_file ? out_path : "stdout", err);
        return rc == FSGD_E_ARG ? FSGD_EXIT_USAGE : fsgd_cli_status(rc);
    }
    return 0;
}

/* fsgd gen's command line. */
typedef struct gen_args {
    fsgd_gen_opts_t o;
    uint64_t rows;
    const char *out_path, *w_path;
    int quiet, criteo, bias_set, w_scale_set, dim_set;
} gen_args_t;

/* --help was printed: the command succeeds without writing rows. */
#define GEN_HELP_PRINTED (-1)

/* One option that takes a value. 0 or the exit status (error printed). */
static int set_gen_option(gen_args_t *a, const char *flag, const char *v)
{
    fsgd_gen_opts_t *o = &a->o;
    int rc = 0;
    a->bias_set |= !strcmp(flag, "--bias");
    a->w_scale_set |= !strcmp(flag, "--w-scale");
    a->dim_set |= !strcmp(flag, "--dim");
    /* the numbers: counts within [lo, hi], or reals */
    const struct {
        const char *flag;
        uint64_t *count, lo, hi;
        double *real;
    } nums[] = {{"--rows", &a->rows, 0, 1ull << 53, NULL},  {"--dim", &o->dim, 1, 1ull << 32, NULL},
                {"--seed", &o->seed, 0, 1ull << 53, NULL},  {"--w-nnz", &o->w_nnz, 0, 1ull << 32, NULL},
                {"--nnz", NULL, 0, 0, &o->nnz},             {"--zipf", NULL, 0, 0, &o->zipf},
                {"--noise", NULL, 0, 0, &o->noise},         {"--bias", NULL, 0, 0, &o->bias},
                {"--w-scale", NULL, 0, 0, &o->w_scale}};
    for (size_t k = 0; k < sizeof nums / sizeof *nums; k++)
        if (!strcmp(flag, nums[k].flag))
            return (nums[k].count ? parse_count(flag, v, nums[k].lo, nums[k].hi, nums[k].count)
                                  : parse_real(flag, v, nums[k].real))
                       ? FSGD_EXIT_USAGE
                       : 0;
    if (!strcmp(flag, "--dense")) {
        uint64_t d = 0;
        rc = parse_count(flag, v, 0, 4096, &d);
        o->dense = (uint32_t)d;
    }
    else if (!strcmp(flag, "--out"))
        a->out_path = v;
    else if (!strcmp(flag, "--weights-out"))
        a->w_path = v;
    else if (!strcmp(flag, "--format")) {
        if (strcmp(v, "libsvm") && strcmp(v, "criteo")) {
            fsgd_cli_error("gen: --format expects libsvm or criteo, got '%s'", v);
            return FSGD_EXIT_USAGE;
        }
        a->criteo = !strcmp(v, "criteo");
    }
    else if (!strcmp(flag, "--model")) {
        if (!strcmp(v, "logistic"))
            o->model = FSGD_GEN_LOGISTIC;
        else if (!strcmp(v, "linear"))
            o->model = FSGD_GEN_LINEAR;
        else {
            fsgd_cli_error("gen: --model expects logistic or linear, got '%s'", v);
            return FSGD_EXIT_USAGE;
        }
    }
    return rc ? FSGD_EXIT_USAGE : 0;
}

/* 0, GEN_HELP_PRINTED, or the exit status (error printed). */
static int parse_gen_args(int argc, char **argv, gen_args_t *a)
{
    memset(a, 0, sizeof *a);
    fsgd_gen_opts_default(&a->o);
    a->rows = 10000;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            gen_usage(stdout);
            fsgd_cli_print_exit_codes(stdout);
            return GEN_HELP_PRINTED;
        }
        if (!strcmp(arg, "--real")) {
            a->o.real_values = 1;
            continue;
        }
        if (!strcmp(arg, "--quiet")) {
            a->quiet = 1;
            continue;
        }
        /* Everything else takes a value, as "--flag v" or "--flag=v". */
        char flag[64];
        const char *v = NULL;
        const char *eq = strchr(arg, '=');
        if (!strncmp(arg, "--", 2) && eq && (size_t)(eq - arg) < sizeof flag) {
            memcpy(flag, arg, (size_t)(eq - arg));
            flag[eq - arg] = '\0';
            v = eq + 1;
        } else {
            snprintf(flag, sizeof flag, "%s", arg);
            if (i + 1 < argc)
                v = argv[++i];
        }
        static const char *valued[] = {"--rows",  "--dim",   "--nnz",    "--zipf",    "--seed", "--model",
                                       "--noise", "--bias",  "--w-nnz",  "--w-scale", "--out",  "--weights-out",
                                       "--format", "--dense"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++)
            known |= !strcmp(flag, valued[k]);
        if (!known) {
            fsgd_cli_error("gen: unknown option '%s' (fsgd gen --help)", arg);
            return FSGD_EXIT_USAGE;
        }
        if (!v) {
            fsgd_cli_error("gen: %s needs a value", flag);
            return FSGD_EXIT_USAGE;
        }
        int rc = set_gen_option(a, flag, v);
        if (rc)
            return rc;
    }
    return 0;
}

/* --format criteo: the generator's options mapped onto the Criteo one's. */
static int gen_criteo(const gen_args_t *a)
{
    if (a->w_path) {
        fsgd_cli_error("gen: --weights-out is for --format libsvm only");
        return FSGD_EXIT_USAGE;
    }
    fsgd_gen_criteo_opts_t co;
    fsgd_gen_criteo_opts_default(&co);
    co.seed = a->o.seed;
    co.zipf = a->o.zipf;
    if (a->bias_set)
        co.bias = a->o.bias;
    if (a->w_scale_set)
        co.w_scale = a->o.w_scale;
    if (a->dim_set)
        co.vocab_bits = (unsigned)ceil(log2((double)a->o.dim));
    return write_criteo(&co, a->out_path, a->rows, a->quiet);
}

/* --weights-out: the true model, written whole or not at all. 0 or the
 * exit status (error printed). */
static int write_true_weights(const fsgd_gen_t *g, const char *w_path)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    fsgd_outfile_t wo;
    FILE *wf = NULL;
    int rc = fsgd_outfile_open(&wo, w_path, err, sizeof err);
    if (rc == 0 && !(wf = fsgd_outfile_stream(&wo, err, sizeof err)))
        rc = FSGD_E_IO;
    if (rc == 0)
        rc = fsgd_gen_write_weights(g, wf, err, sizeof err);
    if (rc == 0)
        rc = fsgd_outfile_commit(&wo, err, sizeof err);
    else
        fsgd_outfile_abort(&wo);
    if (rc) {
        fsgd_cli_error("gen: %s: %s", w_path, err);
        return fsgd_cli_status(rc);
    }
    return 0;
}

/* The rows, to --out (a temporary file renamed into place at the end) or
 * stdout. 0 or the exit status (error printed). */
static int write_rows(fsgd_gen_t *g, const gen_args_t *a)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    const char *out_path = a->out_path;
    fsgd_outfile_t oo;
    FILE *out = stdout;
    int to_file = out_path && strcmp(out_path, "-");
    if (to_file) {
        int rc = fsgd_outfile_open(&oo, out_path, err, sizeof err);
        if (rc == 0 && !(out = fsgd_outfile_stream(&oo, err, sizeof err))) {
            fsgd_outfile_abort(&oo);
            rc = FSGD_E_IO;
        }
        if (rc) {
            fsgd_cli_error("gen: %s", err);
            return fsgd_cli_status(rc);
        }
    }
    progress_t p = {a->rows, fsgd_clock_s(), 0, isatty(2), 0};
    p.last = p.t0;
    int rc = fsgd_gen_write(g, out, a->rows, a->quiet ? NULL : on_progress, &p, err, sizeof err);
    rc = close_output(rc, to_file, &oo, err, sizeof err);
    if (rc) {
        fsgd_cli_error("gen: %s: %s", to_file ? out_path : "stdout", err);
        return fsgd_cli_status(rc);
    }
    return 0;
}

int fsgd_cmd_gen(int argc, char **argv)
{
    gen_args_t a;
    int status = parse_gen_args(argc, argv, &a);
    if (status)
        return status == GEN_HELP_PRINTED ? 0 : status;
    const char *outs[] = {a.out_path && strcmp(a.out_path, "-") ? a.out_path : NULL, a.w_path};
    const fsgd_cli_path_t wr[] = {{"--out", outs[0]}, {"--weights-out", a.w_path}};
    status = fsgd_cli_check_distinct("gen", wr, 2, NULL, 0);
    if (!status)
        status = fsgd_cli_check_outputs("gen", outs, 2);
    if (status)
        return status;
    fsgd_cli_cleanup_on_signal();
    if (a.criteo)
        return gen_criteo(&a);
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    fsgd_gen_t *g = fsgd_gen_new(&a.o, err, sizeof err);
    if (!g) {
        fsgd_cli_error("gen: %s", err);
        return FSGD_EXIT_USAGE;
    }
    if (a.w_path)
        status = write_true_weights(g, a.w_path);
    if (!status)
        status = write_rows(g, &a);
    fsgd_gen_destroy(g);
    return status;
}
