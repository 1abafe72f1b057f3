/* fsgd serve: score rows over HTTP with one or more model files, each
 * replaced live by its newer versions (fsgd/serve.h, docs/serve.md). */
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist_cli.h"
#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/serve.h"

static const char usage_text[] =
    "usage: fsgd serve --model [NAME=]FILE [--model NAME=FILE ...] [--port P] [--threads N] [options]\n"
    "       fsgd serve --brokers HOST:PORT --name JOB [--job-key-file FILE] [--model ...] [options]\n"
    "Serves the models over HTTP/1.1 (docs/serve.md):\n"
    "  POST /score[/NAME]  rows in the body, one score a line back in request order: the\n"
    "                      probability for a logistic model (?output=margin: the margin),\n"
    "                      the margin otherwise; the same numbers as fsgd predict [--proba].\n"
    "                      Body: the rows the model was trained on: LIBSVM lines (hashed with its\n"
    "                      --hash-bits), its delimited rows (Criteo TSV), or VW text (each tag\n"
    "                      after its score); or JSON {\"rows\":[{\"indices\":[1,7],\"values\":[0.5,1]}]}\n"
    "                      ({\"fields\":[...]} for a delimited model; {\"line\":\"TEXT\"} for any),\n"
    "                      answered as JSON\n"
    "  GET /model[/NAME], /healthz, /metrics (Prometheus)\n"
    "Every score answer names the model version that scored it (X-Fsgd-Model-Version). A model\n"
    "file replaced (by rename: fsgd train --out does) is loaded off the request threads, checked\n"
    "(format, CRC, same loss, dimension and hashing) and swapped in while requests in flight\n"
    "finish on the old version; a bad file is refused, logged and counted and the old one serves.\n"
    "  --model [NAME=]FILE  a model file (fsgd train --out); NAME (default 'default') is its path\n"
    "                /score/NAME; /score is the only model, or the one named default\n"
    "  --metrics-json [NAME=]FILE  the metrics JSON written with model NAME (fsgd train --metrics-json):\n"
    "                GET /model shows its rows trained and held-out (test) metrics; a change of\n"
    "                either file is a new version. It describes the model when no older than it\n"
    "  --min-auc A   refuse a version whose held-out AUC (its metrics JSON's test AUC, or what the\n"
    "                job recorded on JOB.ctl: train with --test) is below A, or unknown; at start-up\n"
    "                that is an error (exit 3). A topic then serves the job's recorded versions only\n"
    "  --brokers B, --name JOB  also serve job JOB's model, named JOB, from its topic JOB.model (as\n"
    "                fsgd predict --brokers reads it); each new step seen at a poll is a new version.\n"
    "                A poll reads the topic (from its start) only when its ends moved. Rows trained\n"
    "                and held-out metrics: the job's record of the step on JOB.ctl, when it has one\n"
    "                --job-key-file: the job's key; frames without its tag are skipped\n"
    "  --addr A      numeric address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)\n"
    "  --port P      port (default 8080; 0: a free one, printed on stderr)\n"
    "  --threads N   request threads (default 4)\n"
    "  --max-body B  largest request body in bytes (default 16777216); larger: 413\n"
    "  --max-conns N open connections at most (default 1024)\n"
    "  --timeout S   close a connection idle, or a client this slow, for S seconds (default 30)\n"
    "  --poll-ms MS  check the model files for a new version every MS ms (default 1000; 0: never)\n"
    "  --drain-s S   on SIGTERM/SIGINT, stop accepting and wait up to S s for the requests in\n"
    "                flight (default 10), then exit 0\n"
    "Errors: 400 a malformed row (the answer names its line and field), 404, 405, 413, 415.\n";

typedef struct serve_args {
    fsgd_serve_conf_t conf;
    const char *model[64];
    int n_models;
    const char *metrics[64]; /* [NAME=]FILE */
    int n_metrics;
    const char *brokers, *name, *key_file; /* a job's model topic */
    unsigned drain_s;
} serve_args_t;


/* A whole decimal number in [lo, hi], else -1 with the error printed. */
static int parse_num(const char *opt, const char *v, unsigned long long lo, unsigned long long hi,
                     unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno || v[0] == '-' || x < lo || x > hi) {
        fsgd_cli_error("serve: %s '%s': expected a whole number %llu..%llu", opt, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, serve_args_t *a)
{
    memset(a, 0, sizeof *a);
    fsgd_serve_conf_defaults(&a->conf);
    a->drain_s = 10;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        unsigned long long x = 0;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_text, stdout);
            fsgd_cli_print_exit_codes(stdout);
            return 1;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--model", &missing))) {
            if (a->n_models == (int)(sizeof a->model / sizeof *a->model)) {
                fsgd_cli_error("serve: more than %d --model", a->n_models);
                return -1;
            }
            a->model[a->n_models++] = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--metrics-json", &missing))) {
            if (a->n_metrics == (int)(sizeof a->metrics / sizeof *a->metrics)) {
                fsgd_cli_error("serve: more than %d --metrics-json", a->n_metrics);
                return -1;
            }
            a->metrics[a->n_metrics++] = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--min-auc", &missing))) {
            char *end;
            errno = 0;
            double auc = strtod(v, &end);
            if (!*v || *end || errno || !(auc > 0 && auc <= 1)) {
                fsgd_cli_error("serve: --min-auc '%s': expected a number in (0, 1]", v);
                return -1;
            }
            a->conf.min_auc = auc;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--brokers", &missing))) {
            a->brokers = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--name", &missing))) {
            a->name = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--job-key-file", &missing))) {
            a->key_file = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--addr", &missing))) {
            a->conf.addr = v;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--port", &missing))) {
            if (parse_num("--port", v, 0, 65535, &x) < 0)
                return -1;
            a->conf.port = (int)x;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--threads", &missing))) {
            if (parse_num("--threads", v, 1, 1024, &x) < 0)
                return -1;
            a->conf.threads = (int)x;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--max-body", &missing))) {
            if (parse_num("--max-body", v, 1, (unsigned long long)1 << 40, &x) < 0)
                return -1;
            a->conf.max_body = (size_t)x;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--max-conns", &missing))) {
            if (parse_num("--max-conns", v, 1, 1000000, &x) < 0)
                return -1;
            a->conf.max_conns = (unsigned)x;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--timeout", &missing))) {
            if (parse_num("--timeout", v, 1, 86400, &x) < 0)
                return -1;
            a->conf.timeout_s = (unsigned)x;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--poll-ms", &missing))) {
            if (parse_num("--poll-ms", v, 0, 3600000, &x) < 0)
                return -1;
            a->conf.poll_ms = (unsigned)x;
        } else if ((v = fsgd_cli_opt_value(argc, argv, &i, "--drain-s", &missing))) {
            if (parse_num("--drain-s", v, 0, 3600, &x) < 0)
                return -1;
            a->drain_s = (unsigned)x;
        } else if (missing) {
            fsgd_cli_error("serve: %s needs a value", argv[i]);
            return -1;
        } else {
            fsgd_cli_error("serve: unknown argument '%s' (fsgd serve --help)", argv[i]);
            return -1;
        }
    }
    if (!a->brokers != !a->name) {
        fsgd_cli_error("serve: --brokers and --name go together (the model of job NAME on those brokers)");
        return -1;
    }
    if (a->key_file && !a->brokers) {
        fsgd_cli_error("serve: --job-key-file is for --brokers/--name");
        return -1;
    }
    if (a->n_models == 0 && !a->brokers) {
        fsgd_cli_error("serve: --model or --brokers/--name is required (fsgd serve --help)");
        return -1;
    }
    return 0;
}

static void log_line(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "fsgd serve: %s\n", line);
}

static void split_model(const char *spec, char *name, size_t cap, const char **path);

static int serve_args_has_model(const serve_args_t *a, const char *name)
{
    for (int i = 0; i < a->n_models; i++) {
        char mname[128];
        const char *mpath;
        split_model(a->model[i], mname, sizeof mname, &mpath);
        if (!strcmp(mname, name))
            return 1;
    }
    return 0;
}

/* "NAME=FILE" into name and path; a plain FILE is named "default". A path
 * may hold '=' too: only a prefix without '/' is taken for a name. */
static void split_model(const char *spec, char *name, size_t cap, const char **path)
{
    const char *eq = strchr(spec, '=');
    const char *slash = strchr(spec, '/');
    if (eq && eq != spec && (!slash || slash > eq)) {
        snprintf(name, cap, "%.*s", (int)(eq - spec), spec);
        *path = eq + 1;
    } else {
        snprintf(name, cap, "default");
        *path = spec;
    }
}

/* The --metrics-json paired with model name, or NULL; -1 when one names no
 * --model (error printed). */
static int metrics_of(const serve_args_t *a, const char *name, const char **path)
{
    *path = NULL;
    for (int i = 0; i < a->n_metrics; i++) {
        char mname[128];
        const char *mpath;
        split_model(a->metrics[i], mname, sizeof mname, &mpath);
        if (!name && !serve_args_has_model(a, mname)) {
            fsgd_cli_error("serve: --metrics-json %s: no --model named '%s'", a->metrics[i], mname);
            return -1;
        }
        if (name && !strcmp(mname, name))
            *path = mpath;
    }
    return 0;
}

int fsgd_cmd_serve(int argc, char **argv)
{
    serve_args_t a;
    int prc = parse_args(argc, argv, &a);
    if (prc != 0)
        return prc > 0 ? 0 : FSGD_EXIT_USAGE;
    if (metrics_of(&a, NULL, &(const char *){NULL}) < 0)
        return FSGD_EXIT_USAGE;
    a.conf.log = log_line;
    char err[8192];
    fsgd_serve_t *s = fsgd_serve_new(&a.conf, err, sizeof err);
    if (!s) {
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    for (int i = 0; i < a.n_models; i++) {
        char name[128];
        const char *path;
        split_model(a.model[i], name, sizeof name, &path);
        const char *metrics;
        metrics_of(&a, name, &metrics);
        int rc = fsgd_serve_add_file(s, name, path, metrics, err, sizeof err);
        if (rc < 0) {
            fsgd_cli_error("serve: model %s: %s", name, err);
            fsgd_serve_destroy(s);
            return fsgd_cli_status(rc);
        }
    }
    if (a.brokers) {
        /* The job key checks the topic's tags, as for fsgd predict --brokers. */
        fsgd_job_t kj;
        fsgd_job_defaults(&kj);
        snprintf(kj.dist.name, sizeof kj.dist.name, "%s", a.name);
        if (a.key_file)
            snprintf(kj.cluster.job_key_file, sizeof kj.cluster.job_key_file, "%s", a.key_file);
        int rc = dcli_kafka(&kj, "serve");
        rc = rc ? rc : dcli_auth(&kj, "serve");
        fsgd_bus_t *bus = rc ? NULL : dcli_bus(a.brokers, "serve");
        if (rc == 0 && !bus)
            rc = FSGD_EXIT_BROKER;
        else if (rc == 0 && (rc = fsgd_serve_add_topic(s, a.name, a.brokers, a.name, bus, err, sizeof err)) < 0) {
            fsgd_cli_error("serve: model %s: %s", a.name, err);
            rc = fsgd_cli_status(rc);
        }
        if (rc != 0) {
            fsgd_serve_destroy(s);
            return rc;
        }
    }
    /* The server's threads inherit this mask: only this thread takes the
     * signals, with sigwait, and drains. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = fsgd_serve_start(s, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("%s", err);
        fsgd_serve_destroy(s);
        return fsgd_cli_status(rc);
    }
    fprintf(stderr, "fsgd serve: listening on http://%s%s%s:%d (%d model%s)\n", strchr(a.conf.addr ? a.conf.addr : "", ':') ? "[" : "",
            a.conf.addr ? a.conf.addr : "127.0.0.1", strchr(a.conf.addr ? a.conf.addr : "", ':') ? "]" : "",
            fsgd_serve_port(s), a.n_models + !!a.brokers, a.n_models + !!a.brokers == 1 ? "" : "s");
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "fsgd serve: %s: draining\n", strsignal(sig));
    int left = fsgd_serve_drain(s, a.drain_s * 1000);
    if (left > 0)
        fprintf(stderr, "fsgd serve: %d requests still in flight after %u s, closed\n", left, a.drain_s);
    fsgd_serve_destroy(s);
    fprintf(stderr, "fsgd serve: stopped\n");
    return 0;
}
