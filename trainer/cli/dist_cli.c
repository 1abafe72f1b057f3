#include "dist_cli.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fsgd/ckpt_set.h"
#include "fsgd/auth.h"
#include "fsgd/bus.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/rowfmt.h"

const char *dcli_take(int *argc, char **argv, const char *name, int has_value, const char **all, int *n_all)
{
    static char slots[64][1024];
    static int next;
    const char *found = NULL;
    size_t nl = strlen(name);
    int k = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        int consumed = 0;
        if (!strncmp(a, name, nl) && a[nl] == '\0') {
            if (has_value && i + 1 < *argc) {
                v = argv[i + 1];
                consumed = 2;
            } else if (!has_value) {
                v = "1";
                consumed = 1;
            }
        } else if (has_value && !strncmp(a, name, nl) && a[nl] == '=') {
            v = a + nl + 1;
            consumed = 1;
        }
        if (!consumed) {
            argv[k++] = argv[i];
            continue;
        }
        char *slot = slots[next++ % 64];
        snprintf(slot, sizeof slots[0], "%s", v);
        found = slot;
        if (all && *n_all < 16)
            all[(*n_all)++] = slot;
        i += consumed - 1;
    }
    *argc = k;
    argv[k] = NULL;
    return found;
}

/* The help of every job option; with only (a NULL-ended list of "--flag "
 * followed by a space) the options a command reads: fsgd produce listed
 * --lr, --beta1 and --optimizer (issue 40 item 7); with brief, the options
 * it names alone, each on a line of its short text and the full line's
 * default (fsgd train/run --help: 121 and 104 lines were too many to read).
 * A section with none of them left is left out too. */
static void print_job_help(const char *usage, const fsgd_job_t *d, const char *const *only, const dcli_brief_t *brief,
                           FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = only || brief ? open_memstream(&text, &len) : NULL;
    fsgd_job_print_help_with(usage, d, mem ? mem : out);
    if (!mem)
        return;
    fclose(mem);
    char section[64] = "";
    int in_sections = 0; /* the usage's own option lines (before "data:") are kept */
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        size_t n = strlen(line);
        if (n && n < sizeof section && line[0] != ' ' && line[n - 1] == ':' && !strchr(line, ' ')) {
            snprintf(section, sizeof section, "%s", line); /* printed before its first kept option */
            in_sections = 1;
            continue;
        }
        if (!in_sections || strncmp(line, "  --", 4) != 0) {
            fprintf(out, "%s\n", line);
            continue;
        }
        size_t flag_len = strcspn(line + 2, " ");
        int keep = 0;
        const char *short_text = NULL;
        for (const char *const *o = only; o && *o && !keep; o++)
            keep = !strncmp(line + 2, *o, strlen(*o));
        for (const dcli_brief_t *b = brief; b && b->flag && !keep; b++)
            if (strlen(b->flag) == flag_len && !strncmp(line + 2, b->flag, flag_len)) {
                keep = 1;
                short_text = b->text;
            }
        if (!keep)
            continue;
        if (section[0]) {
            fprintf(out, "%s\n", section);
            section[0] = '\0';
        }
        const char *def = NULL; /* the full line's last " (default ...)" */
        for (const char *p = strstr(line, " (default "); p; p = strstr(p + 1, " (default "))
            def = p;
        if (short_text)
            fprintf(out, "  %-20.*s %s%s\n", (int)flag_len, line + 2, short_text, def ? def : "");
        else
            fprintf(out, "%s\n", line);
    }
    free(text);
}

/* fsgd run --help: the common options (cmd_run.c keeps the usage --help all prints, with every
 * run-only option); here to keep cmd_run.c within its size */
const char dcli_run_usage_brief[] =
    "usage: fsgd run [JOB.yaml] [--data FILE] [--test FILE] [--workers N] [--brokers LIST] [options]\n"
    "Runs the producer, N worker processes and the aggregator of a job. Without --brokers an embedded\n"
    "Kafka-protocol cluster (librdkafka's mock) runs inside this process; its address is printed.\n"
    "The common options; every one (and --broker-only, --no-produce, --fault, --metrics-addr) with\n"
    "fsgd run --help all; docs/run.md, docs/defaults.md.\n"
    "  --fresh | --resume   start over, the job's checkpoint deleted | go on from it (neither: one is an error)\n"
    "  --metrics-port PORT  Prometheus metrics of every process (the aggregator on PORT, worker i on PORT+i)";
const dcli_brief_t dcli_run_help_options[] = {
    {"--data", "training data, a file in the job's format"},
    {"--test", "test data, same format (without it, fsgd run scores no test set)"},
    {"--format", "libsvm, criteo, vw, or a column spec tsv:COLUMNS / csv:COLUMNS (docs/ctr-inputs.md)"},
    {"--model", NULL},
    {"--l2", "L2 strength on the mean loss; auto = 1/n_train (LIBLINEAR's C=1)"},
    {"--optimizer", "adam | ftrl"},
    {"--lr", "Adam learning rate; auto = 0.15/sqrt(steps per epoch) in [0.001, 0.02]"},
    {"--batch", "rows per step; auto = 256 rows a worker, capped at max(256, n_train / 2000)"},
    {"--epochs", "passes over the data; auto = until the holdout loss stops improving"},
    {"--codec", "compression of the gradients, e.g. none, fastsgd, topk:ratio=0.01 (fsgd features)"},
    {"--out", NULL},
    {"--metrics-json", NULL},
    {"--quiet", NULL},
    {"--name", NULL},
    {"--brokers", NULL},
    {"--workers", NULL},
    {"--shards", "aggregator shards: key k held by shard k mod S, each its own process"},
    {"--checkpoint", NULL},
    {"--follow", "continuous training: keep reading NAME.data, publish model versions (docs/run.md)"},
    {"--job-key-file", "the job key (64 hex digits, mode 600) that signs every message; fsgd run makes one"},
    {NULL, NULL},
};

int dcli_help_all(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if ((!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) && !strcmp(argv[i + 1], "all"))
            return 1;
    return 0;
}

void dcli_print_job_help(const char *usage, const fsgd_job_t *defaults, const dcli_brief_t *brief, FILE *out)
{
    print_job_help(usage, defaults, NULL, brief, out);
}

typedef struct job_help {
    const char *usage, *usage_brief;
    const char *const *only;
    const dcli_brief_t *brief;
} job_help_t;

static int job_parse(int argc, char **argv, const job_help_t *h, fsgd_job_t *job);

int dcli_job_only(int argc, char **argv, const char *usage, const char *const *only, fsgd_job_t *job)
{
    return job_parse(argc, argv, &(job_help_t){.usage = usage, .only = only}, job);
}

int dcli_job_brief(int argc, char **argv, const char *usage, const char *usage_brief, const dcli_brief_t *brief,
                   fsgd_job_t *job)
{
    return job_parse(argc, argv, &(job_help_t){.usage = usage, .usage_brief = usage_brief, .brief = brief}, job);
}

static int job_parse(int argc, char **argv, const job_help_t *h, fsgd_job_t *job)
{
    char err[1024];
    fsgd_job_dist_defaults(job); /* l2, lr, epochs and batch auto (agg_auto.c) */
    int rc = fsgd_job_parse_args(job, argc, argv, err, sizeof err);
    if (rc == 1) {
        fsgd_job_t d;
        fsgd_job_dist_defaults(&d);
        int all = !h->brief || dcli_help_all(argc, argv);
        print_job_help(all ? h->usage : h->usage_brief, &d, h->only, all ? NULL : h->brief, stdout);
        fsgd_cli_print_exit_codes(stdout);
        return 1;
    }
    if (rc < 0) {
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    /* follow: no epochs, no holdout (fsgd_job_check_dist refuses them given);
     * the aggregator never ends an epoch (agg_follow.c) */
    if (job->dist.follow && !fsgd_job_given(job, "epochs"))
        job->train.epochs = 1;
    if (job->train.epochs == 0 && job->train.holdout <= 0) {
        fsgd_cli_error("epochs auto stops on held-out rows: give holdout > 0, or a number of epochs");
        return FSGD_EXIT_USAGE;
    }
    if (fsgd_job_check_dist(job, err, sizeof err) < 0) {
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    /* The row format, before any role starts: a spec that does not parse,
     * hash_bits without a hashed format, or a dim other than 2^bits. A
     * hashed job's dim is 2^bits from here on (the embedded cluster's model
     * limit is checked on it). */
    fsgd_rowfmt_t f;
    /* row and class weights ride in the labels of the rows the roles parse */
    int frc = fsgd_train_fold_input(&job->train, err, sizeof err);
    if (frc == FSGD_E_PARSE || frc == FSGD_E_IO) { /* a cross naming a column the file lacks; its header unreadable */
        fsgd_cli_error("%s", err);
        return fsgd_cli_status(frc);
    }
    if (frc < 0 || fsgd_train_fold_weights(&job->train, err, sizeof err) < 0 ||
        fsgd_rowfmt_init(&f, job->train.format, job->train.hash_bits, job->train.skip_bad, err, sizeof err) < 0 ||
        fsgd_rowfmt_dim(&f, job->train.dim, &job->train.dim, err, sizeof err) < 0) {
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    /* Rows with crosses (VW or delimited) travel as their text, one a message, and the
     * workers build the crosses: row blocks would carry the crossed
     * columns and NAME.data would grow with them */
    if (((f.vw && f.vw_spec.n_terms) || (f.hashed && f.spec.n_crosses) || (!f.vw && !f.hashed && f.opts.fields.n_terms)) &&
        !fsgd_job_given(job, "block_rows"))
        job->dist.block_rows = 1;
    return 0;
}

int dcli_job(int argc, char **argv, const char *usage, fsgd_job_t *job)
{
    return dcli_job_only(argc, argv, usage, NULL, job);
}

static fsgd_auth_t *cli_auth;

static void auth_wipe(void)
{
    fsgd_auth_destroy(cli_auth);
    cli_auth = NULL;
}

fsgd_auth_t *dcli_auth_of(void)
{
    return cli_auth;
}

/* Replaces the command's security (one command may load a second job's). */
static int auth_keep(const uint8_t *key, const char *job)
{
    static int registered;
    if (!registered)
        registered = atexit(auth_wipe) == 0;
    auth_wipe();
    cli_auth = fsgd_auth_new(key, job);
    return cli_auth != NULL;
}

int dcli_auth(const fsgd_job_t *job, const char *who)
{
    if (!job->cluster.job_key_file[0]) {
        /* no key: tags are neither made nor checked, but NAME.ctl events are
         * still this job's only */
        if (!auth_keep(NULL, job->dist.name)) {
            fsgd_cli_error("%s: libsodium did not start", who);
            return FSGD_EXIT_INTERNAL;
        }
        if (!job->train.quiet && !getenv("FSGD_RUN_CHILD"))
            fprintf(stderr, "fsgd: %s: job %s: messages are NOT authenticated (no job_key_file): anyone who can write "
                            "to its topics can steer it\n",
                    who, job->dist.name);
        return 0;
    }
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    char err[FSGD_JOB_PATH_MAX + 256];
    if (fsgd_auth_key_load(job->cluster.job_key_file, key, err, sizeof err) < 0) {
        fsgd_cli_error("%s: %s", who, err);
        return FSGD_EXIT_USAGE;
    }
    int kept = auth_keep(key, job->dist.name);
    sodium_memzero(key, sizeof key);
    if (!kept) {
        fsgd_cli_error("%s: libsodium did not start", who);
        return FSGD_EXIT_INTERNAL;
    }
    fsgd_auth_set_unsigned_rows(cli_auth, job->cluster.unsigned_rows);
    fsgd_auth_set_skip_bad_rows(cli_auth, job->train.skip_bad);
    /* Said once: by fsgd run (not again by each role it starts) or by a role
     * started by hand; not with --quiet. Issue 40 item 9. */
    if (job->train.quiet || getenv("FSGD_RUN_CHILD"))
        return 0;
    fprintf(stderr, "fsgd: %s: job %s: messages on %s.grads, .model and .ctl are authenticated (key %s); rows on %s.data %s\n",
            who, job->dist.name, job->dist.name, job->cluster.job_key_file, job->dist.name,
            job->cluster.unsigned_rows ? "may be unsigned"
            : job->train.skip_bad    ? "without its tag are skipped"
                               : "must carry its tag");
    return 0;
}

static char cli_kafka[4096];

static void kafka_wipe(void)
{
    fsgd_kbus_options_wipe(cli_kafka, sizeof cli_kafka);
}

int dcli_kafka(const fsgd_job_t *job, const char *who)
{
    static int registered;
    if (!registered)
        registered = atexit(kafka_wipe) == 0;
    char err[1024];
    if (fsgd_kbus_options_resolve(job->cluster.kafka, cli_kafka, sizeof cli_kafka, err, sizeof err) < 0) {
        fsgd_cli_error("%s: %s", who, err);
        return FSGD_EXIT_USAGE;
    }
    return 0;
}


fsgd_bus_t *dcli_bus(const char *brokers, const char *who)
{
    char err[1024];
    fsgd_bus_t *bus = fsgd_bus_kafka_new(brokers, cli_kafka, err, sizeof err);
    if (!bus) {
        fsgd_cli_error("%s: %s", who, err);
        return NULL;
    }
    fsgd_bus_set_auth(bus, cli_auth);
    return bus;
}

fsgd_bus_client_t *dcli_client(const char *brokers, fsgd_kclient_t kind, fsgd_bus_t **bus, char *err, size_t errsz)
{
    *bus = fsgd_bus_kafka_new(brokers, cli_kafka, err, errsz);
    if (!*bus)
        return NULL;
    fsgd_bus_set_auth(*bus, cli_auth);
    fsgd_bus_client_t *c = fsgd_bus_client_new(*bus, kind, err, errsz);
    if (!c) {
        fsgd_bus_destroy(*bus);
        *bus = NULL;
    }
    return c;
}

int dcli_partitions(const char *brokers, const char *topic, int timeout_ms, char *err, size_t errsz)
{
    fsgd_bus_t *bus;
    fsgd_bus_client_t *c = dcli_client(brokers, FSGD_KCLIENT_CONSUMER, &bus, err, errsz);
    int n = c ? fsgd_bus_partitions(c, topic, timeout_ms, err, errsz) : FSGD_E_KAFKA;
    fsgd_bus_client_destroy(c);
    fsgd_bus_destroy(bus);
    return n;
}

int dcli_connect(const fsgd_job_t *job, const char *who)
{
    /* not by the roles fsgd run starts on its embedded cluster: it is up */
    const char *child = getenv("FSGD_RUN_CHILD");
    if (!job->train.quiet && !(child && !strcmp(child, "embedded")))
        fprintf(stderr, "fsgd: %s: connecting to %s (job %s; giving up after %.1f s, connect_timeout_ms)\n", who,
                job->cluster.brokers, job->dist.name, job->cluster.connect_timeout_ms / 1e3);
    char err[1024];
    fsgd_kconf_t kc = {job->cluster.brokers, cli_kafka};
    if (fsgd_kbus_connect(&kc, job->cluster.connect_timeout_ms, err, sizeof err) < 0) {
        fsgd_cli_error("%s: %s", who, err);
        return FSGD_EXIT_BROKER;
    }
    return 0;
}

void dcli_bad_rows(const char *where, uint64_t n, const char (*first)[160])
{
    if (!n)
        return;
    fprintf(stderr, "fsgd: %s: skipped %llu malformed rows (skip_bad); first:\n", where, (unsigned long long)n);
    for (uint64_t i = 0; i < n && i < FSGD_LIBSVM_BAD_KEPT; i++)
        fprintf(stderr, "  %s\n", first[i]);
}

int dcli_metrics(int *argc, char **argv, const char *who, int max_offset, const char **addr, int *port)
{
    const char *p = dcli_take(argc, argv, "--metrics-port", 1, NULL, NULL);
    const char *a = dcli_take(argc, argv, "--metrics-addr", 1, NULL, NULL);
    *addr = a && *a ? a : "127.0.0.1";
    *port = -1;
    if (!p) {
        if (a) {
            fsgd_cli_error("%s: --metrics-addr needs --metrics-port", who);
            return FSGD_EXIT_USAGE;
        }
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (!*p || *end || errno || v < 0 || v + max_offset > 65535) {
        fsgd_cli_error("%s: --metrics-port expects 0 (any free port) or 1..%d, got '%s'", who, 65535 - max_offset, p);
        return FSGD_EXIT_USAGE;
    }
    *port = (int)v;
    return 0;
}

/* Every output of aggregator shards first..last of a job with S shards,
 * the names fsgd derives from the ones given included: a derived name
 * clobbers an input as surely as a given one (issue 42: --metrics-json
 * T with --test T.shard1 replaced the test file by shard 1's JSON). */
int dcli_outputs(const fsgd_job_t *job, const char *ckpt, int S, int first, int last, dcli_outputs_t *o)
{
    int shards = last - first + 1;
    o->n = 0;
    o->cap = 1 + 3 * shards;
    o->p = calloc((size_t)o->cap, sizeof *o->p);
    o->names = calloc((size_t)o->cap, sizeof *o->names);
    if (!o->p || !o->names) {
        dcli_outputs_free(o);
        return -1;
    }
    if (first == 0)
        o->p[o->n++] = (fsgd_cli_path_t){"--out", job->train.out};
    for (int i = first; i <= last; i++) {
        const char *bases[2] = {job->train.metrics_json, ckpt};
        const char *opts[2] = {"--metrics-json", job->dist.checkpoint[0] ? "--checkpoint" : "checkpoint (OUT.ckpt)"};
        for (int b = 0; b < 2; b++)
            for (int prev = 0; prev < 1 + (b == 1 && S > 1); prev++) {
                if (!bases[b] || !bases[b][0])
                    continue;
                dcli_name_t *nm = &o->names[o->n];
                if (i == 0 && !prev) {
                    o->p[o->n++] = (fsgd_cli_path_t){opts[b], bases[b]};
                    continue;
                }
                fsgd_ckpt_set_path(bases[b], (unsigned)i, prev, nm->path, sizeof nm->path);
                snprintf(nm->opt, sizeof nm->opt, "%s (aggregator shard %d's %sfile)", opts[b], i,
                         prev ? "previous " : "");
                o->p[o->n++] = (fsgd_cli_path_t){nm->opt, nm->path};
            }
    }
    return 0;
}

void dcli_outputs_free(dcli_outputs_t *o)
{
    free(o->p);
    free(o->names);
    o->p = NULL;
    o->names = NULL;
    o->n = o->cap = 0;
}
