/* fsgd export: write a model file in another tool's format. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fsgd/error.h"
#include "fsgd/model.h"

static const char usage_text[] =
    "usage: fsgd export --model M --format liblinear --out FILE\n"
    "Writes the fsgd model file M in another format.\n"
    "  --model M            model file written by fsgd train\n"
    "  --format liblinear   LIBLINEAR's text model (liblinear-predict reads it):\n"
    "                       logistic -> L2R_LR, svm -> L2R_L2LOSS_SVC,\n"
    "                       linear -> L2R_L2LOSS_SVR; labels \"1 -1\"\n"
    "  --out FILE           output file (written atomically)\n";

int fsgd_cmd_export(int argc, char **argv)
{
    const char *model = NULL, *format = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char **slot = NULL;
        const char *name = argv[i];
        if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
            fputs(usage_text, stdout);
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
            return 2;
        }
        if (eq) {
            *slot = eq + 1;
        } else if (i + 1 < argc) {
            *slot = argv[++i];
        } else {
            fsgd_cli_error("export: %s needs a value", name);
            return 2;
        }
    }
    if (!model || !format || !out) {
        fsgd_cli_error("export: %s is required (fsgd export --help)",
                       !model ? "--model" : !format ? "--format" : "--out");
        return 2;
    }
    if (strcmp(format, "liblinear") != 0) {
        fsgd_cli_error("export: unknown format '%s' (known: liblinear)", format);
        return 2;
    }
    char err[512];
    fsgd_model_t m;
    int rc = fsgd_model_load(&m, model, err, sizeof err);
    if (rc == 0) {
        rc = fsgd_model_export_liblinear(&m, out, err, sizeof err);
        fsgd_model_free(&m);
    }
    if (rc < 0) {
        fsgd_cli_error("%s", err);
        return fsgd_cli_status(rc);
    }
    return 0;
}
