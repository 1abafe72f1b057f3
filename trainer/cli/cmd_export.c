/* fsgd export: write a model file in another tool's format. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fsgd/error.h"
#include "fsgd/model.h"
#include "fsgd/outfile.h"

static const char usage_text[] =
    "usage: fsgd export --model M --format liblinear --out FILE\n"
    "Writes the fsgd model file M in another format.\n"
    "  --model M            model file written by fsgd train\n"
    "  --format liblinear   LIBLINEAR's text model (liblinear-predict reads it):\n"
    "                       logistic -> L2R_LR, svm -> L2R_L2LOSS_SVC,\n"
    "                       linear -> L2R_L2LOSS_SVR; labels \"1 -1\"\n"
    "  --out FILE           output file (written atomically; must be absent or a regular file);\n"
    "                       '-' or /dev/stdout: stdout (this command's own line then on stderr)\n"
    "A model with more than 2^31-1 features cannot be exported (LIBLINEAR counts them in an int).\n";

static int export_command(int argc, char **argv)
{
    const char *model = NULL, *format = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char **slot = NULL;
        const char *name = argv[i];
        if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
            fputs(usage_text, stdout);
            fsgd_cli_print_exit_codes(stdout);
            return 0;
        }
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        if (nlen == 7 && !strncmp(name, "--model", 7))
            slot = &model;
        else if (nlen == 8 && !strncmp(name, "--format", 8))
            slot = &format;
        else if (nlen == 5 && !strncmp(name, "--out", 5))
            slot = &out;
        if (!slot) {
            fsgd_cli_error("export: unknown argument '%s' (fsgd export --help)", name);
            return FSGD_EXIT_USAGE;
        }
        if (eq) {
            *slot = eq + 1;
        } else if (i + 1 < argc) {
            *slot = argv[++i];
        } else {
            fsgd_cli_error("export: %s needs a value", name);
            return FSGD_EXIT_USAGE;
        }
    }
    if (!model || !format || !out) {
        fsgd_cli_error("export: %s is required (fsgd export --help)",
                       !model ? "--model" : !format ? "--format" : "--out");
        return FSGD_EXIT_USAGE;
    }
    if (strcmp(format, "liblinear") != 0) {
        fsgd_cli_error("export: unknown format '%s' (known: liblinear)", format);
        return FSGD_EXIT_USAGE;
    }
    const fsgd_cli_path_t wr[] = {{"--out", out}};
    const fsgd_cli_path_t rd[] = {{"--model", model}};
    int rc = fsgd_cli_check_distinct("export", wr, 1, rd, 1);
    if (rc)
        return rc;
    const char *outs[] = {out};
    rc = fsgd_cli_check_outputs("export", outs, 1);
    if (rc)
        return rc;
    fsgd_cli_cleanup_on_signal();
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    fsgd_model_t m;
    /* LIBLINEAR's nr_feature is an int: refuse a larger model from its
     * header, before 2^32 weights are allocated and scanned. */
    rc = fsgd_model_load_max(&m, model, INT_MAX, err, sizeof err);
    /* liblinear-predict reads raw LIBSVM indices: a model whose columns are
     * hashed LIBSVM indices, VW features or crosses has no such file to score */
    if (rc == 0 && (!strncmp(m.input, "libsvm:", 7) || !strncmp(m.input, "vw:", 3) ||
                    strstr(m.input, ":interactions="))) {
        rc = fsgd_err_fmt(err, sizeof err, FSGD_E_UNSUPPORTED,
                          "%s was trained on input %s: its weights belong to %s, which no LIBSVM file that "
                          "liblinear-predict reads holds; score it with fsgd predict",
                          model, m.input,
                          strstr(m.input, ":interactions=") ? "hashed feature crosses"
                          : m.input[0] == 'v'               ? "hashed VW features"
                                                            : "hashed LIBSVM indices");
        fsgd_model_free(&m);
    }
    if (rc == 0) {
        rc = fsgd_model_export_liblinear(&m, out, err, sizeof err);
        if (rc == 0) /* LIBLINEAR's text is dense: say how sparse the model is */
            printf("exported %s: %llu features, %llu nonzero weights%s\n", fsgd_cli_out_name(out), (unsigned long long)m.dim,
                   (unsigned long long)fsgd_model_nnz(&m), m.has_bias ? " + intercept" : "");
        fsgd_model_free(&m);
    }
    if (rc < 0) {
        fsgd_cli_error("export: %s%s", err,
                       rc == FSGD_E_RANGE ? " (LIBLINEAR counts features in an int: at most 2147483647)" : "");
        return fsgd_cli_status(rc);
    }
    return 0;
}

/* --out - and devices (/dev/stdout, /dev/null, a FIFO): fsgd_cli_run_streamed. */
int fsgd_cmd_export(int argc, char **argv) { return fsgd_cli_run_streamed(export_command, argc, argv, "export", 0); }
