#include "dist_cli.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fsgd/auth.h"
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

int dcli_job(int argc, char **argv, const char *usage, fsgd_job_t *job)
{
    char err[512];
    fsgd_job_dist_defaults(job); /* l2, lr, epochs and batch auto (agg_auto.c) */
    int rc = fsgd_job_parse_args(job, argc, argv, err, sizeof err);
    if (rc == 1) {
        fsgd_job_t d;
        fsgd_job_dist_defaults(&d);
        fsgd_job_print_help_with(usage, &d, stdout);
        fsgd_cli_print_exit_codes(stdout);
        return 1;
    }
    if (rc < 0) {
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    /* follow: no epochs, no holdout (fsgd_job_check_dist refuses them given);
     * the aggregator never ends an epoch (agg_follow.c) */
    if (job->follow && !fsgd_job_given(job, "epochs"))
        job->epochs = 1;
    if (job->epochs == 0 && job->holdout <= 0) {
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
    if (job->class_weight[0]) { /* refused, not ignored: the roles do not weigh rows yet */
        fsgd_cli_error("class_weight: fsgd train weighs rows by class; fsgd run and its roles do not yet");
        return FSGD_EXIT_USAGE;
    }
    fsgd_rowfmt_t f;
    if (fsgd_job_fold_input(job, err, sizeof err) < 0 ||
        fsgd_rowfmt_init(&f, job->format, job->hash_bits, job->skip_bad, err, sizeof err) < 0 ||
        fsgd_rowfmt_dim(&f, job->dim, &job->dim, err, sizeof err) < 0) {
        fsgd_cli_error("%s", err);
        return FSGD_EXIT_USAGE;
    }
    /* Rows with crosses (VW or delimited) travel as their text, one a message, and the
     * workers build the crosses: row blocks would carry the crossed
     * columns and NAME.data would grow with them */
    if (((f.vw && f.vw_spec.n_terms) || (f.hashed && f.spec.n_crosses)) && !fsgd_job_given(job, "block_rows"))
        job->block_rows = 1;
    return 0;
}

int dcli_auth(const fsgd_job_t *job, const char *who)
{
    if (!job->job_key_file[0]) {
        fprintf(stderr, "fsgd: %s: job %s: messages are NOT authenticated (no job_key_file): anyone who can write "
                        "to its topics can steer it\n", who, job->name);
        return 0;
    }
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    char err[FSGD_JOB_PATH_MAX + 256];
    if (fsgd_auth_key_load(job->job_key_file, key, err, sizeof err) < 0) {
        fsgd_cli_error("%s: %s", who, err);
        return FSGD_EXIT_USAGE;
    }
    int rc = fsgd_auth_set_key(key);
    sodium_memzero(key, sizeof key);
    fsgd_auth_set_unsigned_rows(job->unsigned_rows);
    fsgd_auth_set_skip_bad_rows(job->skip_bad);
    if (rc < 0) {
        fsgd_cli_error("%s: libsodium did not start", who);
        return FSGD_EXIT_INTERNAL;
    }
    fprintf(stderr, "fsgd: %s: job %s: messages on %s.grads, .model and .ctl are authenticated (job key from %s); "
                    "unauthenticated ones are dropped and counted; rows on %s.data %s\n", who, job->name, job->name,
            job->job_key_file, job->name,
            job->unsigned_rows ? "may come without a tag (unsigned_rows), a tag that is there is checked"
            : job->skip_bad    ? "must carry the key's tag (skip_bad: a row message without it is skipped and counted)"
                               : "must carry the key's tag");
    return 0;
}

int dcli_connect(const fsgd_job_t *job, const char *who)
{
    if (!job->quiet)
        fprintf(stderr, "fsgd: %s: connecting to %s (job %s; giving up after %.1f s, connect_timeout_ms)\n", who,
                job->brokers, job->name, job->connect_timeout_ms / 1e3);
    char err[1024];
    if (fsgd_kbus_connect(job->brokers, job->connect_timeout_ms, err, sizeof err) < 0) {
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
