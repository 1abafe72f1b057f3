/* fsgd model assemble: rebuild a model file from a job's model topic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/outfile.h"

static const char usage[] =
    "usage: fsgd model info MODEL\n"
    "Prints what a model file holds: its loss, dim, intercept, nonzero weights, input format and\n"
    "optimizer state (--save-state), and the format version.\n"
    "       fsgd model assemble (--brokers HOST:PORT --name JOB | --input FILE|-) --out MODEL [--partial]\n"
    "                           [--kafka-opt KEY=VALUE]...   (security.*, sasl.*, ssl.* settings)\n"
    "                           [--connect-timeout-ms MS]   (give up on brokers that do not answer, exit 4;\n"
    "                                                        default 15000)\n"
    "                           [--job-key-file FILE]   (the job's key: only messages with its tag are assembled;\n"
    "                                                    without it an authenticated topic is refused; tags are\n"
    "                                                    bound to the job, so --input with a key needs --name JOB;\n"
    "                                                    another job's model is never assembled, exit 3)\n"
    "Rebuilds the model from JOB.model (the last snapshot plus later deltas), either read from\n"
    "the brokers or from a file of concatenated message values, e.g.\n"
    "  kcat -C -b HOST:PORT -t JOB.model -o beginning -e -f '%s' | fsgd model assemble --input - --out m.fsgd\n"
    "Without --partial it fails unless the job's final snapshot is there.";

static int read_all(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    while (b) {
        if (n == cap) {
            uint8_t *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    if (f != stdin)
        fclose(f);
    *out = b;
    *len = n;
    return b ? 0 : -1;
}

/* fsgd model info: one line a field, for people and for grep. */
static int model_info(int argc, char **argv)
{
    if (argc != 3) {
        fsgd_cli_error("model info: expected one model file\n%s", usage);
        return FSGD_EXIT_USAGE;
    }
    char err[1024];
    fsgd_model_t m;
    int rc = fsgd_model_load(&m, argv[2], err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("model info: %s", err);
        return fsgd_cli_status(rc);
    }
    const uint64_t nnz = fsgd_model_nnz(&m);
    const int version = fsgd_model_version(&m);
    printf("model: %s\nformat version: %d\nloss: %s\ndim: %llu\n", argv[2], version, fsgd_loss_name(m.kind),
           (unsigned long long)m.dim);
    if (m.has_bias)
        printf("intercept: %.9g (feature value %g)\n", (double)m.w[m.dim], (double)m.bias);
    else
        printf("intercept: none\n");
    printf("nonzero weights: %llu (%.2f%% of dim)\n", (unsigned long long)nnz, 100.0 * (double)nnz / (double)m.dim);
    printf("input: %s\n", m.input[0] ? m.input : "libsvm");
    if (m.state.kind != FSGD_MODEL_STATE_NONE)
        printf("optimizer state: %s, %llu keys, step %llu\n", fsgd_model_state_name(m.state.kind),
               (unsigned long long)m.state.n, (unsigned long long)m.state.step);
    else
        printf("optimizer state: none\n");
    fsgd_model_free(&m);
    return 0;
}

/* model assemble's client settings: the same security settings as fsgd run /
 * worker / aggregator, the connect timeout and the job's key. 0 or the exit
 * status (error printed). */
static int assemble_settings(fsgd_job_t *kj, const char *const *kopts, int n_kopts, const char *connect_ms,
                             const char *key_file, const char *name)
{
    fsgd_job_defaults(kj);
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    for (int i = 0; i < n_kopts; i++)
        if (fsgd_job_set(kj, "kafka_opt", kopts[i], err, sizeof err) < 0) {
            fsgd_cli_error("model assemble: %s", err);
            return FSGD_EXIT_USAGE;
        }
    int st = dcli_kafka(kj, "model assemble"); /* none given: none from an earlier command either (Python) */
    if (st)
        return st;
    if (connect_ms && fsgd_job_set(kj, "connect_timeout_ms", connect_ms, err, sizeof err) < 0) {
        fsgd_cli_error("model assemble: %s", err);
        return FSGD_EXIT_USAGE;
    }
    if (key_file && !name) {
        /* a tag is bound to its job's name: without it none can be checked */
        fsgd_cli_error("model assemble: --input with --job-key-file needs --name JOB (each message's tag is bound "
                       "to its job's name)\n%s", usage);
        return FSGD_EXIT_USAGE;
    }
    if (key_file) {
        snprintf(kj->cluster.job_key_file, sizeof kj->cluster.job_key_file, "%s", key_file);
        snprintf(kj->dist.name, sizeof kj->dist.name, "%s", name);
        return dcli_auth(kj, "model assemble");
    }
    /* no key: none from an earlier command of this process (Python) either;
     * nothing to say about it (the job's roles say it) */
    snprintf(kj->dist.name, sizeof kj->dist.name, "%s", name ? name : "");
    kj->train.quiet = 1;
    int rc = dcli_auth(kj, "model assemble");
    kj->train.quiet = 0;
    return rc;
}

/* The model from a file of frames (--input) or the job's topic, saved to
 * out. The exit status. */
static int assemble_and_save(fsgd_job_t *kj, const char *input, const char *brokers, const char *name, int partial,
                             const char *out)
{
    char err[FSGD_OUTFILE_PATH_MAX + 256];
    fsgd_model_t m;
    uint64_t step = 0;
    int rc, st;
    err[0] = '\0';
    if (input) {
        uint8_t *buf;
        size_t len;
        if (read_all(input, &buf, &len) < 0) {
            fsgd_cli_error("model assemble: cannot read '%s'", input);
            return FSGD_EXIT_IO;
        }
        rc = fsgd_model_assemble_stream(buf, len, dcli_auth_of(), !partial, &m, &step, err, sizeof err);
        free(buf);
    } else {
        /* the roles' bound: an unreachable broker or a failed handshake is said within connect_timeout_ms */
        snprintf(kj->cluster.brokers, sizeof kj->cluster.brokers, "%s", brokers);
        snprintf(kj->dist.name, sizeof kj->dist.name, "%s", name);
        if ((st = dcli_connect(kj, "model assemble")) != 0)
            return st;
        fsgd_bus_t *bus = dcli_bus(brokers, "model assemble");
        if (!bus)
            return FSGD_EXIT_BROKER;
        rc = fsgd_model_assemble_topic(bus, name, !partial, &m, &step, err, sizeof err);
        fsgd_bus_destroy(bus);
    }
    if (rc == 0 && err[0])
        fprintf(stderr, "fsgd: model assemble: %s\n", err); /* frames of another key skipped */
    if (rc == 0)
        rc = fsgd_model_save(&m, out, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("model assemble: %s", err);
        return fsgd_cli_status(rc);
    }
    printf("model: %s (step %llu, dim %llu%s)\n", out, (unsigned long long)step, (unsigned long long)m.dim,
           m.has_bias ? ", with intercept" : "");
    fsgd_model_free(&m);
    return 0;
}

/* fsgd model assemble; argv[0] is "assemble". */
static int model_assemble(int argc, char **argv)
{
    const char *brokers = dcli_take(&argc, argv, "--brokers", 1, NULL, NULL);
    const char *name = dcli_take(&argc, argv, "--name", 1, NULL, NULL);
    const char *input = dcli_take(&argc, argv, "--input", 1, NULL, NULL);
    const char *out = dcli_take(&argc, argv, "--out", 1, NULL, NULL);
    const char *key_file = dcli_take(&argc, argv, "--job-key-file", 1, NULL, NULL);
    int partial = dcli_take(&argc, argv, "--partial", 0, NULL, NULL) != NULL;
    const char *connect_ms = dcli_take(&argc, argv, "--connect-timeout-ms", 1, NULL, NULL);
    const char *kopts[16];
    int n_kopts = 0;
    dcli_take(&argc, argv, "--kafka-opt", 1, kopts, &n_kopts);
    if (dcli_take(&argc, argv, "--help", 0, NULL, NULL)) {
        puts(usage);
        fsgd_cli_print_exit_codes(stdout);
        return 0;
    }
    if (argc > 1 || !out || (!input && (!brokers || !name))) {
        fsgd_cli_error("model assemble: %s\n%s", argc > 1 ? "unexpected argument" : "missing option", usage);
        return FSGD_EXIT_USAGE;
    }
    const fsgd_cli_path_t wr[] = {{"--out", out}};
    const fsgd_cli_path_t rd[] = {{"--input", input}, {"--job-key-file", key_file}};
    int st = fsgd_cli_check_distinct("model assemble", wr, 1, rd, 2);
    if (st)
        return st;
    const char *outs[] = {out};
    st = fsgd_cli_check_outputs("model assemble", outs, 1);
    if (st)
        return st;
    fsgd_cli_cleanup_on_signal();
    fsgd_job_t kj;
    if ((st = assemble_settings(&kj, kopts, n_kopts, connect_ms, key_file, name)) != 0)
        return st;
    return assemble_and_save(&kj, input, brokers, name, partial, out);
}

int fsgd_cmd_model(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "info"))
        return model_info(argc, argv);
    if (argc < 2 || strcmp(argv[1], "assemble")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            puts(usage);
            fsgd_cli_print_exit_codes(stdout);
            return 0;
        }
        fsgd_cli_error("model: expected 'info' or 'assemble'\n%s", usage);
        return FSGD_EXIT_USAGE;
    }
    return model_assemble(argc - 1, argv + 1);
}
