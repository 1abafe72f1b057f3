/* fsgd plot: pictures of finished runs from their metrics JSON (fsgd run
 * --metrics-json): training loss against time and against bytes sent,
 * test AUC per epoch, and the per-step time breakdown as stacked bars, one
 * line (or bar) per run. gnuplot draws them: this command writes the data
 * files and a gnuplot script into a temporary folder, runs gnuplot there
 * and moves the picture into place through fsgd/outfile.h. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "fsgd/error.h"
#include "fsgd/outfile.h"

extern char **environ;

static const char usage[] =
    "usage: fsgd plot RUN.json... --out FILE.png|FILE.svg [--size WxH] [--title TEXT] [--keep-script DIR]\n"
    "Draws the metrics of finished distributed runs (fsgd run --metrics-json), one line or bar per run,\n"
    "labelled by strategy and workers, in four panels: training loss against seconds since step 1,\n"
    "training loss against bytes sent (gradients up + model updates down, all workers), test AUC per\n"
    "epoch, and the time of a step split into gradient, encode, decode, wait and update (stacked bars).\n"
    "The format follows the extension of --out. gnuplot must be installed (Debian: gnuplot-nox).\n"
    "  --size WxH         picture size in pixels (default 1280x960)\n"
    "  --title TEXT       title above the panels (default: the job name)\n"
    "  --keep-script DIR  also write the gnuplot script and its data files into DIR (to restyle by hand)";

#define MAX_RUNS 16
#define PHASES 5
static const char *const phase_key[PHASES] = {"gradient", "encode", "decode", "comm_wait", "update"};
static const char *const phase_title[PHASES] = {"gradient", "encode", "decode", "wait", "update"};

typedef struct run {
    const char *path;
    json_t *root;
    char label[160];
    char job[128];
    int has_trace;
} run_t;

/* A field of an object that must be there with a type; NULL with the
 * error printed. */
static json_t *need(const run_t *r, json_t *obj, const char *key, json_type type, const char *where)
{
    json_t *v = json_object_get(obj, key);
    static const char *const tn[] = {"an object", "an array", "a string", "an integer", "a number", "true", "false",
                                     "null"};
    int ok = v && (json_typeof(v) == type || (type == JSON_REAL && json_is_number(v)));
    if (!ok) {
        fsgd_cli_error("plot: %s: %s\"%s\" %s: expected %s (is it the --metrics-json of fsgd run?)", r->path, where,
                       key, v ? "has the wrong type" : "is missing", tn[type]);
        return NULL;
    }
    return v;
}

static double num_or(json_t *v, double d) { return json_is_number(v) ? json_number_value(v) : d; }

/* fsgd train's --metrics-json has no per-epoch rows or per-step phases (one
 * process, no exchange): it becomes one point, the end of the run, and its
 * phases per step, so a one-machine run plots beside distributed ones
 * (issue 40 item 15: it was refused, "per_epoch" missing). */
static void from_train_json(json_t *root)
{
    double steps = num_or(json_object_get(root, "steps"), 0);
    json_t *sec = json_object_get(root, "seconds"), *test = json_object_get(root, "test");
    json_t *train = json_object_get(root, "train");
    json_t *ep = json_object();
    double epochs = num_or(json_object_get(root, "epochs_run"), num_or(json_object_get(root, "epochs"), 1));
    json_object_set_new(ep, "epoch", json_integer((json_int_t)ceil(epochs)));
    double auc = num_or(test ? json_object_get(test, "auc") : NULL, NAN);
    json_object_set_new(ep, "test_auc", isnan(auc) ? json_null() : json_real(auc));
    double loss = num_or(train ? json_object_get(train, "loss") : NULL,
                         num_or(json_object_get(root, "holdout_loss"), NAN));
    json_object_set_new(ep, "train_loss", json_real(isnan(loss) ? 0 : loss));
    json_object_set_new(ep, "seconds_from_step1", json_real(num_or(json_object_get(root, "train_seconds"), 0)));
    json_t *per = json_array();
    json_array_append_new(per, ep);
    json_object_set_new(root, "per_epoch", per);
    json_t *ps = json_object();
    static const char *const from[PHASES] = {"gradient", "encode", "decode", NULL, "update"};
    for (int p = 0; p < PHASES; p++) {
        double v = from[p] && sec ? num_or(json_object_get(sec, from[p]), 0) : 0;
        json_object_set_new(ps, phase_key[p], json_real(steps > 0 ? v / steps : 0));
    }
    json_object_set_new(root, "per_step_seconds", ps);
    /* the loss-against-bytes panel needs bytes: the end point of a trace */
    json_t *tr = json_object(), *t = json_array(), *l = json_array(), *u = json_array(), *d = json_array();
    json_array_append_new(t, json_real(num_or(json_object_get(root, "train_seconds"), 0)));
    json_array_append_new(l, json_real(isnan(loss) ? 0 : loss));
    json_array_append_new(u, json_real(num_or(json_object_get(root, "wire_bytes"), 0)));
    json_array_append_new(d, json_real(0));
    json_object_set_new(tr, "seconds_from_step1", t);
    json_object_set_new(tr, "loss", l);
    json_object_set_new(tr, "bytes_up", u);
    json_object_set_new(tr, "bytes_down", d);
    json_object_set_new(root, "trace", tr);
}

/* Loads and checks one run; 0 or an exit status (printed). */
static int load_run(run_t *r)
{
    json_error_t e;
    struct stat sb;
    if (stat(r->path, &sb) != 0) {
        fsgd_cli_error("plot: %s: %s", r->path, strerror(errno));
        return FSGD_EXIT_IO;
    }
    r->root = json_load_file(r->path, JSON_REJECT_DUPLICATES, &e);
    if (!r->root) {
        fsgd_cli_error("plot: %s:%d:%d: not valid JSON: %s", r->path, e.line, e.column, e.text);
        return FSGD_EXIT_DATA;
    }
    if (!json_is_object(r->root)) {
        fsgd_cli_error("plot: %s: expected a JSON object (the --metrics-json of fsgd run)", r->path);
        return FSGD_EXIT_DATA;
    }
    int one_process = !json_object_get(r->root, "per_epoch") && json_object_get(r->root, "train_seconds");
    if (one_process)
        from_train_json(r->root);
    json_t *codec = need(r, r->root, "codec", JSON_STRING, "");
    json_t *per = need(r, r->root, "per_epoch", JSON_ARRAY, "");
    json_t *ps = need(r, r->root, "per_step_seconds", JSON_OBJECT, "");
    if (!codec || !per || !ps)
        return FSGD_EXIT_DATA;
    for (int p = 0; p < PHASES; p++)
        if (!need(r, ps, phase_key[p], JSON_REAL, "per_step_seconds."))
            return FSGD_EXIT_DATA;
    size_t i;
    json_t *ep;
    json_array_foreach(per, i, ep)
    {
        char where[64];
        snprintf(where, sizeof where, "per_epoch[%zu].", i);
        if (!json_is_object(ep)) {
            fsgd_cli_error("plot: %s: per_epoch[%zu] is not an object", r->path, i);
            return FSGD_EXIT_DATA;
        }
        /* test_auc is null in a run without a test set (older runs wrote -1) */
        if (!need(r, ep, "epoch", JSON_INTEGER, where) ||
            (!json_is_null(json_object_get(ep, "test_auc")) && !need(r, ep, "test_auc", JSON_REAL, where)) ||
            !need(r, ep, "train_loss", JSON_REAL, where) || !need(r, ep, "seconds_from_step1", JSON_REAL, where))
            return FSGD_EXIT_DATA;
    }
    json_t *tr = json_object_get(r->root, "trace");
    if (tr) {
        static const char *const cols[] = {"seconds_from_step1", "loss", "bytes_up", "bytes_down"};
        size_t n = 0;
        for (int c = 0; c < 4; c++) {
            json_t *a = need(r, tr, cols[c], JSON_ARRAY, "trace.");
            if (!a)
                return FSGD_EXIT_DATA;
            if (c && json_array_size(a) != n) {
                fsgd_cli_error("plot: %s: trace.%s has %zu values, trace.%s %zu", r->path, cols[c],
                               json_array_size(a), cols[0], n);
                return FSGD_EXIT_DATA;
            }
            n = json_array_size(a);
        }
        r->has_trace = 1;
    }
    json_t *w = json_object_get(r->root, "workers");
    long long workers = -1;
    if (json_is_object(w) && json_is_integer(json_object_get(w, "live")))
        workers = json_integer_value(json_object_get(w, "live")) +
                  (json_is_integer(json_object_get(w, "dropped")) ? json_integer_value(json_object_get(w, "dropped"))
                                                                   : 0);
    if (one_process)
        snprintf(r->label, sizeof r->label, "%s, fsgd train", json_string_value(codec));
    else if (workers >= 0)
        snprintf(r->label, sizeof r->label, "%s, %lld worker%s", json_string_value(codec), workers,
                 workers == 1 ? "" : "s");
    else
        snprintf(r->label, sizeof r->label, "%s", json_string_value(codec));
    json_t *job = json_object_get(r->root, "job");
    snprintf(r->job, sizeof r->job, "%s", json_is_string(job) ? json_string_value(job) : "");
    return 0;
}

static double num(json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

/* A gnuplot single-quoted string: ' doubles; no other escapes apply. */
static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        if (*s != '\n')
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* A gnuplot data-file string column: double quotes, with " left out. */
static void dat_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        if (*s != '"' && *s != '\n')
            fputc(*s, f);
    fputc('"', f);
}

static FILE *open_in(const char *dir, const char *name, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", dir, name);
    return fopen(path, "w");
}

/* Run i's series: runI.loss (loss against time and bytes: the trace, or
 * the epoch ends) and runI.auc (test AUC by epoch). 0 or -1 (errno). */
static int write_run_series(const char *dir, const run_t *run, int i)
{
    char path[FSGD_OUTFILE_PATH_MAX + 64];
    FILE *f;
    char name[32];
    snprintf(name, sizeof name, "run%d.loss", i);
    if (!(f = open_in(dir, name, path, sizeof path)))
        return -1;
    fprintf(f, "# seconds_from_step1 train_loss megabytes_sent\n");
    json_t *tr = json_object_get(run->root, "trace");
    if (run->has_trace) {
        json_t *t = json_object_get(tr, "seconds_from_step1"), *l = json_object_get(tr, "loss"),
               *u = json_object_get(tr, "bytes_up"), *d = json_object_get(tr, "bytes_down");
        for (size_t k = 0; k < json_array_size(t); k++) {
            double loss = num(json_array_get(l, k));
            fprintf(f, "%.6g %.8g %.8g\n", num(json_array_get(t, k)), isfinite(loss) ? loss : NAN,
                    (num(json_array_get(u, k)) + num(json_array_get(d, k))) / 1e6);
        }
    } else {
        size_t k;
        json_t *ep;
        json_array_foreach(json_object_get(run->root, "per_epoch"), k, ep)
            fprintf(f, "%.6g %.8g NaN\n", num(json_object_get(ep, "seconds_from_step1")),
                    num(json_object_get(ep, "train_loss")));
    }
    if (fclose(f))
        return -1;
    snprintf(name, sizeof name, "run%d.auc", i);
    if (!(f = open_in(dir, name, path, sizeof path)))
        return -1;
    fprintf(f, "# epoch test_auc\n");
    size_t k;
    json_t *ep;
    json_array_foreach(json_object_get(run->root, "per_epoch"), k, ep)
    {
        json_t *ta = json_object_get(ep, "test_auc");
        double auc = json_is_number(ta) ? num(ta) : -1;
        fprintf(f, "%lld %.8g\n", (long long)json_integer_value(json_object_get(ep, "epoch")),
                auc >= 0 ? auc : NAN); /* -1: no test data */
    }
    return fclose(f) ? -1 : 0;
}

/* breakdown.dat: each run's milliseconds a step by phase. 0 or -1 (errno). */
static int write_breakdown(const char *dir, const run_t *runs, int n)
{
    char path[FSGD_OUTFILE_PATH_MAX + 64];
    FILE *f;
    if (!(f = open_in(dir, "breakdown.dat", path, sizeof path)))
        return -1;
    fprintf(f, "# run, milliseconds per step:");
    for (int p = 0; p < PHASES; p++)
        fprintf(f, " %s", phase_title[p]);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        dat_str(f, runs[i].label);
        json_t *ps = json_object_get(runs[i].root, "per_step_seconds");
        for (int p = 0; p < PHASES; p++)
            fprintf(f, " %.6g", num(json_object_get(ps, phase_key[p])) * 1e3);
        fputc('\n', f);
    }
    return fclose(f) ? -1 : 0;
}

/* Has any run a test AUC? Runs without a test set have none. */
static int any_test_auc(const run_t *runs, int n)
{
    int any_auc = 0;
    for (int i = 0; i < n; i++) {
        size_t k;
        json_t *ep;
        json_array_foreach(json_object_get(runs[i].root, "per_epoch"), k, ep)
        {
            json_t *ta = json_object_get(ep, "test_auc");
            any_auc |= json_is_number(ta) && num(ta) >= 0;
        }
    }
    return any_auc;
}

/* plot.gp: four panels drawing picture (fmt, w x h pixels). 0 or -1 (errno). */
static int write_script(const char *dir, const run_t *runs, int n, const char *fmt, int w, int h, const char *title,
                        const char *picture)
{
    char path[FSGD_OUTFILE_PATH_MAX + 64];
    FILE *f;
    if (!(f = open_in(dir, "plot.gp", path, sizeof path)))
        return -1;
    fprintf(f, "# written by fsgd plot; run in this folder: gnuplot plot.gp\n");
    if (!strcmp(fmt, "svg")) {
        fprintf(f, "set terminal svg size %d,%d fixed noenhanced font 'sans,11' background rgb 'white'\n", w, h);
    } else {
        fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                   "    set terminal pngcairo size %d,%d noenhanced font 'sans,10' background rgb 'white'\n"
                   "} else {\n"
                   "    set terminal png size %d,%d noenhanced\n}\n",
                w, h, w, h);
    }
    fprintf(f, "set output ");
    gp_str(f, picture);
    fprintf(f, "\nset datafile missing NaN\nset grid\nset key top right\nset style data lines\n");
    fprintf(f, "set multiplot layout 2,2 title ");
    gp_str(f, title);
    fputc('\n', f);
    static const char *const panels[3][4] = {
        {"training loss (moving average) against time", "seconds since step 1", "training loss", "1:2"},
        {"training loss against bytes sent", "MB sent (up + down, all workers)", "training loss", "3:2"},
        {"test AUC per epoch", "epoch", "test AUC", "1:2"}};
    /* runs without a test set have no AUC: an empty panel that says so
     * (gnuplot refuses a plot of nothing but missing points) */
    const int any_auc = any_test_auc(runs, n);
    for (int pn = 0; pn < 3; pn++) {
        fprintf(f, "set title '%s'\nset xlabel '%s'\nset ylabel '%s'\n", panels[pn][0], panels[pn][1],
                panels[pn][2]);
        if (pn == 2 && !any_auc) {
            fprintf(f, "set title 'test AUC per epoch: no test set in these runs'\nplot [0:1] [0:1] -1 notitle\n");
            continue;
        }
        fprintf(f, pn == 2 ? "set xtics 1\n" : "set xtics autofreq\n");
        fprintf(f, "plot ");
        for (int i = 0; i < n; i++) {
            fprintf(f, "%s'run%d.%s' using %s with %s lw 2 lc %d title ", i ? ", \\\n     " : "", i,
                    pn == 2 ? "auc" : "loss", panels[pn][3], pn == 2 || !runs[i].has_trace ? "linespoints" : "lines",
                    i + 1);
            gp_str(f, runs[i].label);
        }
        fputc('\n', f);
    }
    fprintf(f, "set title 'time of a step, by phase'\nset xlabel ''\nset ylabel 'milliseconds per step'\n"
               "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.8 border -1\n"
               "set boxwidth 0.6\nset yrange [0:*]\nset xtics autofreq\nset key outside right top\n");
    fprintf(f, "plot 'breakdown.dat' using 2:xtic(1) title '%s'", phase_title[0]);
    for (int p = 1; p < PHASES; p++)
        fprintf(f, ", '' using %d title '%s'", p + 2, phase_title[p]);
    fprintf(f, "\nunset multiplot\nset output\n");
    return fclose(f) ? -1 : 0;
}

/* Writes the data files and plot.gp into dir; 0 or -1 (errno). */
static int write_files(const char *dir, const run_t *runs, int n, const char *fmt, int w, int h, const char *title,
                       const char *picture)
{
    for (int i = 0; i < n; i++)
        if (write_run_series(dir, &runs[i], i) < 0)
            return -1;
    if (write_breakdown(dir, runs, n) < 0)
        return -1;
    return write_script(dir, runs, n, fmt, w, h, title, picture);
}

/* Runs gnuplot plot.gp in dir, its output in dir/gnuplot.log. 0, or the
 * exit status (printed). */
static int run_gnuplot(const char *dir)
{
    char log[FSGD_OUTFILE_PATH_MAX + 32];
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* gnuplot reads the data files relative to its working folder */
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    char *argv[] = {"gnuplot", "plot.gp", NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        if (rc == ENOENT)
            fsgd_cli_error("plot: gnuplot is not installed (not found on PATH): install it "
                           "(Debian: apt-get install gnuplot-nox, or scripts/install-deps.sh)");
        else
            fsgd_cli_error("plot: cannot run gnuplot: %s", strerror(rc));
        return rc == ENOENT ? FSGD_EXIT_USAGE : FSGD_EXIT_INTERNAL;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    /* exec failed in the child (posix_spawnp may report it only as 127) */
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        fsgd_cli_error("plot: gnuplot is not installed (not found on PATH): install it "
                       "(Debian: apt-get install gnuplot-nox, or scripts/install-deps.sh)");
        return FSGD_EXIT_USAGE;
    }
    fsgd_cli_error("plot: gnuplot failed (%s %d); its output:", WIFEXITED(st) ? "status" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    FILE *f = fopen(log, "r");
    char line[512];
    for (int k = 0; f && k < 20 && fgets(line, sizeof line, f); k++)
        fprintf(stderr, "  %s", line);
    if (f)
        fclose(f);
    return FSGD_EXIT_INTERNAL;
}

/* Copies src to out through fsgd/outfile.h; 0 or an exit status. */
static int install(const char *src, const char *out)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    FILE *in = fopen(src, "rb");
    if (!in) {
        fsgd_cli_error("plot: gnuplot wrote no picture (%s)", strerror(errno));
        return FSGD_EXIT_INTERNAL;
    }
    fsgd_outfile_t o;
    FILE *f = NULL;
    int rc = fsgd_outfile_open(&o, out, err, sizeof err);
    if (rc == 0 && !(f = fsgd_outfile_stream(&o, err, sizeof err))) {
        fsgd_outfile_abort(&o);
        rc = FSGD_E_IO;
    }
    if (rc < 0) {
        fclose(in);
        fsgd_cli_error("plot: %s", err);
        return fsgd_cli_status(rc);
    }
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, k, f);
    int rerr = ferror(in);
    fclose(in);
    if (rerr) {
        fsgd_outfile_abort(&o);
        fsgd_cli_error("plot: reading gnuplot's picture failed");
        return FSGD_EXIT_IO;
    }
    if ((rc = fsgd_outfile_commit(&o, err, sizeof err)) < 0) {
        fsgd_cli_error("plot: %s", err);
        return fsgd_cli_status(rc);
    }
    return 0;
}

static void remove_dir(const char *dir)
{
    static const char *const fixed[] = {"plot.gp", "breakdown.dat", "gnuplot.log", "picture"};
    char p[FSGD_OUTFILE_PATH_MAX + 64];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, fixed[i]);
        unlink(p);
    }
    for (int i = 0; i < MAX_RUNS; i++) {
        snprintf(p, sizeof p, "%s/run%d.loss", dir, i);
        unlink(p);
        snprintf(p, sizeof p, "%s/run%d.auc", dir, i);
        unlink(p);
    }
    rmdir(dir);
}

/* fsgd plot's command line. */
typedef struct plot_args {
    const char *out, *title, *keep;
    int w, h;
    run_t runs[MAX_RUNS];
    int n;
} plot_args_t;

/* --help was printed: the command succeeds without drawing. */
#define PLOT_HELP_PRINTED (-1)

/* 0, PLOT_HELP_PRINTED, or the exit status (error printed). */
static int parse_plot_args(int argc, char **argv, plot_args_t *p)
{
    memset(p, 0, sizeof *p);
    p->w = 1280;
    p->h = 960;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("%s\n", usage);
            fsgd_cli_print_exit_codes(stdout);
            return PLOT_HELP_PRINTED;
        }
        int has_value = !strcmp(a, "--out") || !strcmp(a, "--size") || !strcmp(a, "--title") ||
                        !strcmp(a, "--keep-script");
        if (has_value && i + 1 >= argc) {
            fsgd_cli_error("plot: %s needs a value\n%s", a, usage);
            return FSGD_EXIT_USAGE;
        }
        if (!strcmp(a, "--out"))
            p->out = argv[++i];
        else if (!strcmp(a, "--title"))
            p->title = argv[++i];
        else if (!strcmp(a, "--keep-script"))
            p->keep = argv[++i];
        else if (!strcmp(a, "--size")) {
            const char *s = argv[++i];
            char x, extra;
            if (sscanf(s, "%d%c%d%c", &p->w, &x, &p->h, &extra) != 3 || (x != 'x' && x != 'X') || p->w < 200 ||
                p->h < 150 || p->w > 10000 || p->h > 10000) {
                fsgd_cli_error("plot: --size expects WxH in pixels (200x150 .. 10000x10000), got '%s'", s);
                return FSGD_EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1]) {
            fsgd_cli_error("plot: unknown option '%s'\n%s", a, usage);
            return FSGD_EXIT_USAGE;
        } else if (p->n == MAX_RUNS) {
            fsgd_cli_error("plot: at most %d runs in one picture", MAX_RUNS);
            return FSGD_EXIT_USAGE;
        } else {
            p->runs[p->n++].path = a;
        }
    }
    if (!p->out || !p->n) {
        fsgd_cli_error("plot: %s\n%s", !p->n ? "no RUN.json given" : "--out FILE.png|FILE.svg is required", usage);
        return FSGD_EXIT_USAGE;
    }
    return 0;
}

/* --out and, with --keep-script DIR, the fixed names written there: none
 * may be a run's JSON. 0 or the exit status (error printed). */
static int check_plot_paths(const plot_args_t *p, const char *fmt)
{
    fsgd_cli_path_t wr[2 + 2 * MAX_RUNS + 2] = {{"--out", p->out}};
    char kept[2 + 2 * MAX_RUNS + 2][FSGD_OUTFILE_PATH_MAX + 32];
    int nw = 1;
    if (p->keep) {
        const char *fixed[] = {"plot.gp", "breakdown.dat", !strcmp(fmt, "svg") ? "plot.svg" : "plot.png"};
        for (int i = 0; i < 3 + 2 * p->n; i++, nw++) {
            if (i < 3)
                snprintf(kept[nw], sizeof kept[nw], "%s/%s", p->keep, fixed[i]);
            else
                snprintf(kept[nw], sizeof kept[nw], "%s/run%d.%s", p->keep, (i - 3) / 2, (i - 3) % 2 ? "auc" : "loss");
            wr[nw] = (fsgd_cli_path_t){"--keep-script", kept[nw]};
        }
    }
    fsgd_cli_path_t rd[MAX_RUNS];
    for (int i = 0; i < p->n; i++)
        rd[i] = (fsgd_cli_path_t){"RUN.json", p->runs[i].path};
    int rc = fsgd_cli_check_distinct("plot", wr, nw, rd, p->n);
    const char *outs[] = {p->out};
    if (!rc)
        rc = fsgd_cli_check_outputs("plot", outs, 1);
    return rc;
}

/* Two runs of one strategy and size are told apart by file. */
static void label_runs(run_t *runs, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(runs[i].label, runs[j].label)) {
                const char *b = strrchr(runs[i].path, '/');
                size_t l = strlen(runs[i].label);
                snprintf(runs[i].label + l, sizeof runs[i].label - l, " (%s)", b ? b + 1 : runs[i].path);
                break;
            }
}

/* gnuplot draws the picture in a temporary folder, installed as --out;
 * --keep-script gets the same files, to restyle and rerun by hand (gnuplot
 * plot.gp). 0 or the exit status (error printed). */
static int draw(plot_args_t *p, const char *fmt)
{
    const char *tmpdir = getenv("TMPDIR");
    char d[FSGD_OUTFILE_PATH_MAX];
    /* mkdtemp(3)'s template: it replaces the six trailing X characters */
    int dl = snprintf(d, sizeof d, "%s/fsgd-plot.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (dl < 0 || (size_t)dl >= sizeof d) {
        fsgd_cli_error("plot: TMPDIR '%s' is too long for a temporary folder name", tmpdir);
        return FSGD_EXIT_USAGE;
    }
    char tbuf[256];
    snprintf(tbuf, sizeof tbuf, "fsgd runs of job %s", p->runs[0].job[0] ? p->runs[0].job : "?");
    const char *title = p->title ? p->title : tbuf;
    if (!mkdtemp(d)) {
        fsgd_cli_error("plot: cannot make a temporary folder %s: %s", d, strerror(errno));
        return FSGD_EXIT_IO;
    }
    int rc = 0;
    if (write_files(d, p->runs, p->n, fmt, p->w, p->h, title, "picture") < 0) {
        fsgd_cli_error("plot: cannot write gnuplot's files in %s: %s", d, strerror(errno));
        rc = FSGD_EXIT_IO;
    }
    const char *keep = p->keep;
    if (!rc && keep && ((mkdir(keep, 0755) != 0 && errno != EEXIST) ||
                        write_files(keep, p->runs, p->n, fmt, p->w, p->h, title,
                                    !strcmp(fmt, "svg") ? "plot.svg" : "plot.png") < 0)) {
        fsgd_cli_error("plot: --keep-script %s: %s", keep, strerror(errno));
        rc = FSGD_EXIT_IO;
    }
    if (!rc)
        rc = run_gnuplot(d);
    if (!rc) {
        char pic[FSGD_OUTFILE_PATH_MAX + 16];
        snprintf(pic, sizeof pic, "%s/picture", d);
        rc = install(pic, p->out);
    }
    remove_dir(d);
    return rc;
}

int fsgd_cmd_plot(int argc, char **argv)
{
    plot_args_t p;
    int rc = parse_plot_args(argc, argv, &p);
    if (rc)
        return rc == PLOT_HELP_PRINTED ? 0 : rc;
    const char *dot = strrchr(p.out, '.');
    const char *fmt = dot && !strcasecmp(dot, ".png") ? "png" : dot && !strcasecmp(dot, ".svg") ? "svg" : NULL;
    if (!fmt) {
        fsgd_cli_error("plot: --out '%s': the picture's format comes from its extension: .png or .svg", p.out);
        return FSGD_EXIT_USAGE;
    }
    rc = check_plot_paths(&p, fmt);
    for (int i = 0; !rc && i < p.n; i++)
        rc = load_run(&p.runs[i]);
    if (!rc) {
        label_runs(p.runs, p.n);
        rc = draw(&p, fmt);
    }
    for (int i = 0; i < p.n; i++)
        json_decref(p.runs[i].root);
    if (!rc)
        printf("plot: %s (%d run%s, %dx%d)\n", p.out, p.n, p.n == 1 ? "" : "s", p.w, p.h);
    return rc;
}
