/* fsgd: dispatches to the subcommands. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fsgd/backend.h"
#include "fsgd/codec.h"
#include "fsgd/strategy.h"
#include "fsgd/error.h"
#include "fsgd/outfile.h"
#include "fsgd/version.h"

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand_t;

static const subcommand_t subcommands[] = {
    {"train", fsgd_cmd_train, "train a model on one machine (threads as workers)"},
    {"predict", fsgd_cmd_predict, "score LIBSVM rows with a model file"},
    {"export", fsgd_cmd_export, "write a model in another format (liblinear)"},
    {"gen", fsgd_cmd_gen, "generate CTR-shaped synthetic LIBSVM data"},
    {"bench", fsgd_cmd_bench, "benchmarks (bench codec)"},
    {"run", fsgd_cmd_run, "run a distributed job: producer, workers, aggregator"},
    {"produce", fsgd_cmd_produce, "load LIBSVM files into a job's Kafka data topic"},
    {"worker", fsgd_cmd_worker, "run one worker of a job"},
    {"aggregator", fsgd_cmd_aggregator, "run the aggregator of a job"},
    {"model", fsgd_cmd_model, "model file and topic tools (model info, model assemble)"},
    {"plot", fsgd_cmd_plot, "draw finished runs' metrics JSON with gnuplot (PNG or SVG)"},
    {"serve", fsgd_cmd_serve, "score rows over HTTP with models swapped in live"},
};

void fsgd_cli_error(const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "fsgd: %s", msg);
    /* every command's "unknown option '--x'" gets the nearest option */
    const char *q = strstr(msg, "unknown option '--");
    if (!q)
        q = strstr(msg, "unknown argument '--");
    if (q) {
        char word[64];
        q = strchr(q, '\'') + 1;
        size_t n = strcspn(q, "'=");
        snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), q);
        const char *s = fsgd_cli_suggest_option(word);
        if (s)
            fprintf(stderr, "; did you mean %s?", s);
    }
    fputc('\n', stderr);
}

const char *fsgd_cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}


int fsgd_cli_status(int err)
{
    switch (err) {
    case FSGD_E_OK:
        return FSGD_EXIT_OK;
    case FSGD_E_ARG:
    case FSGD_E_NOT_BUILT:
    case FSGD_E_UNSUPPORTED:
        return FSGD_EXIT_USAGE;
    case FSGD_E_PARSE:
    case FSGD_E_FORMAT:
    case FSGD_E_CRC:
    case FSGD_E_VERSION:
    case FSGD_E_TRUNCATED:
    case FSGD_E_RANGE:
    case FSGD_E_NONFINITE:
    case FSGD_E_AUTH:
        return FSGD_EXIT_DATA;
    case FSGD_E_KAFKA:
    case FSGD_E_TIMEOUT:
    case FSGD_E_LOST:
        return FSGD_EXIT_BROKER;
    case FSGD_E_IO:
        return FSGD_EXIT_IO;
    default:
        return FSGD_EXIT_INTERNAL;
    }
}

void fsgd_cli_print_exit_codes(void *file)
{
    FILE *out = file;
    fprintf(out, "\nexit status:\n");
#define FSGD_EXIT_ROW_(name, value, desc) fprintf(out, "  %3d  %s\n", value, desc);
    FSGD_EXIT_LIST(FSGD_EXIT_ROW_)
#undef FSGD_EXIT_ROW_
}

static void on_fatal_signal(int sig)
{
    fsgd_outfile_remove_temps();
    signal(sig, SIG_DFL);
    raise(sig);
}

void fsgd_cli_cleanup_on_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int fsgd_cli_check_outputs(const char *what, const char *const *paths, int n)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    for (int i = 0; i < n; i++)
        if (paths[i] && paths[i][0] && fsgd_outfile_check(paths[i], err, sizeof err) < 0) {
            fsgd_cli_error("%s: %s", what, err);
            return FSGD_EXIT_USAGE;
        }
    return 0;
}

static int path_given(const char *p)
{
    return p && p[0] && strcmp(p, "-") != 0;
}

int fsgd_cli_check_distinct(const char *what, const fsgd_cli_path_t *outs, int nout, const fsgd_cli_path_t *ins,
                            int nin)
{
    for (int i = 0; i < nout; i++) {
        if (!path_given(outs[i].path))
            continue;
        for (int j = 0; j < nin; j++)
            if (path_given(ins[j].path) && fsgd_outfile_same(outs[i].path, ins[j].path)) {
                fsgd_cli_error("%s: %s '%s' is the same file as %s '%s': an output never replaces an input; "
                               "name another %s",
                               what, outs[i].opt, outs[i].path, ins[j].opt, ins[j].path, outs[i].opt);
                return FSGD_EXIT_USAGE;
            }
        for (int j = 0; j < i; j++)
            if (path_given(outs[j].path) && fsgd_outfile_same(outs[i].path, outs[j].path)) {
                fsgd_cli_error("%s: %s '%s' and %s '%s' are the same file: each output needs a path of its own",
                               what, outs[j].opt, outs[j].path, outs[i].opt, outs[i].path);
                return FSGD_EXIT_USAGE;
            }
    }
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: fsgd <command> [options]   (fsgd <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        fprintf(out, "  %-11s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "  %-11s %s\n", "features", "list what this binary was built with");
    fprintf(out, "\nquick start:  fsgd train --data train.svm --test test.svm --model logistic\n");
    fsgd_cli_print_exit_codes(out);
}

static int features(void)
{
    printf("fsgd %s\n", FSGD_VERSION);
    printf("backends: %s\n", fsgd_backend_list());
    printf("codecs: %s\n", fsgd_codec_list());
    printf("strategies (--codec): %s\n", fsgd_strategy_list());
    char why[256] = "";
    int cuda_built = strstr(fsgd_backend_list(), "cuda") != NULL;
    int have_device = cuda_built && fsgd_backend_available("cuda", why, sizeof why);
    printf("cuda backend: %s\n", fsgd_backend_cuda_build());
    /* no GPU at all is not a driver problem: the CUDA runtime's "driver
     * version is insufficient" said so on machines without one; a plugin
     * that does not load is its own problem, said as it is */
    if (cuda_built && !have_device && !strstr(why, "cannot load the CUDA plugin") &&
        access("/dev/nvidiactl", F_OK) != 0 && access("/proc/driver/nvidia", F_OK) != 0)
        snprintf(why, sizeof why, "no NVIDIA GPU or driver on this machine (no /dev/nvidiactl): the cpu backend runs");
    if (cuda_built)
        printf("cuda device check: %s\n", have_device ? "a device is available" : why);
    printf("kafka: librdkafka (embedded mock cluster available)\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return FSGD_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version") || !strcmp(cmd, "features"))
        return features();
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        if (!strcmp(cmd, subcommands[i].name))
            return subcommands[i].run(argc - 1, argv + 1);
    const char *names[sizeof subcommands / sizeof *subcommands + 1];
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        names[i] = subcommands[i].name;
    names[sizeof subcommands / sizeof *subcommands] = "features";
    const char *near = fsgd_cli_suggest(cmd, names, sizeof names / sizeof *names);
    if (near) { /* the list would bury the one line that matters */
        fsgd_cli_error("unknown command '%s'; did you mean '%s'? (fsgd --help lists the commands)", cmd, near);
        return FSGD_EXIT_USAGE;
    }
    fsgd_cli_error("unknown command '%s'", cmd);
    usage(stderr);
    return FSGD_EXIT_USAGE;
}
