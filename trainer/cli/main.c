/* fsgd: dispatches to the subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fsgd/backend.h"
#include "fsgd/codec.h"
#include "fsgd/error.h"
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
    {"model", fsgd_cmd_model, "model topic tools (model assemble)"},
};

void fsgd_cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("fsgd: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int fsgd_cli_status(int err)
{
    if (err == FSGD_E_OK)
        return 0;
    if (err == FSGD_E_ARG || err == FSGD_E_PARSE)
        return 2;
    return 1;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: fsgd <command> [options]   (fsgd <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        fprintf(out, "  %-11s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "  %-11s %s\n", "features", "list what this binary was built with");
    fprintf(out, "\nquick start:  fsgd train --data train.svm --test test.svm --model logistic\n");
}

static int features(void)
{
    printf("fsgd %s\n", FSGD_VERSION);
    printf("backends: %s\n", fsgd_backend_list());
    printf("codecs: %s\n", fsgd_codec_list());
    char why[256] = "";
    int cuda_built = strstr(fsgd_backend_list(), "cuda") != NULL;
    int have_device = cuda_built && fsgd_backend_available("cuda", why, sizeof why);
    printf("cuda backend: %s\n", fsgd_backend_cuda_build());
    if (cuda_built)
        printf("cuda device check: %s\n", have_device ? "a device is available" : why);
    printf("kafka: librdkafka (embedded mock cluster available)\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
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
    fsgd_cli_error("unknown command '%s'", cmd);
    usage(stderr);
    return 2;
}
