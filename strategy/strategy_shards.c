/* Strategies on a sharded aggregator (strategy/FORMAT.md, "Sharded
 * aggregators"): which run per shard, which are refused and why, and the
 * spec each shard runs. One place, so fsgd train --shards and the
 * distributed shards cannot decide differently. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/shard.h"
#include "strategy_internal.h"

/* Strategies whose state or decision spans every key of the model. */
static const struct {
    const char *name, *why;
} refused[] = {
    {"gradiveq", "its PCA basis is fitted on one dense slice of the most touched keys of the whole model, "
                 "and the slice's keys interleave over every shard, so no shard can fit or apply it"},
    {"mqgrad", "one SARSA agent chooses the bits for every key from the step's global loss and time; "
               "an agent per shard would learn from a part of the reward and choose bits that differ by shard"},
};

/* Strategies whose spec may hold a count of entries (k=N) selected per
 * message: each shard gets its own budget, the budgets add up to N. */
static int counts_entries(const char *name)
{
    return strcmp(name, "topk") == 0 || strcmp(name, "gtopk") == 0;
}

/* The value of "k=" in spec's parameters (*found 0 when absent). */
static int spec_count(const char *spec, unsigned long long *k, int *found, char *err, size_t errsz)
{
    *found = 0;
    const char *p = strchr(spec, ':');
    while (p && *p) {
        p++;
        if (strncmp(p, "k=", 2) == 0) {
            errno = 0;
            char *end;
            *k = strtoull(p + 2, &end, 10);
            if (errno || end == p + 2 || (*end && *end != ','))
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy spec '%s': k must be a count of entries", spec);
            *found = 1;
        }
        p = strchr(p, ',');
    }
    return 0;
}

int fsgd_strategy_check_shards(const char *spec, int shards, char *err, size_t errsz)
{
    char name[64];
    if (fsgd_strategy_spec_name(spec, name, sizeof name) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy: empty or overlong name in '%s'", spec ? spec : "");
    if (shards < 1 || shards > FSGD_SHARDS_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "shards %d: 1 to %d", shards, FSGD_SHARDS_MAX);
    if (shards == 1)
        return 0;
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (strcmp(name, refused[i].name) == 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy %s cannot run on %d shards (shards > 1): %s",
                                name, shards, refused[i].why);
    if (counts_entries(name)) {
        unsigned long long k = 0;
        int found;
        FSGD_TRY(spec_count(spec, &k, &found, err, errsz));
        if (found && k < (unsigned long long)shards)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "strategy %s: k=%llu entries cannot be split over %d shards (at least one each)",
                                name, k, shards);
    }
    return 0;
}

/* gtopk's k of a model of dim keys when its spec gives a density (default
 * 0.001): ceil(density x dim), as gtopk.c takes it. */
static int gtopk_density_k(const char *spec, uint64_t dim, unsigned long long *k, char *err, size_t errsz)
{
    double d = 0.001;
    const char *p = strstr(spec, "density=");
    if (p) {
        char *end;
        errno = 0;
        d = strtod(p + 8, &end);
        if (errno || end == p + 8 || (*end && *end != ',') || !(d > 0 && d <= 1))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy spec '%s': density must be in (0, 1]", spec);
    }
    double kk = ceil(d * (double)dim);
    *k = (unsigned long long)(kk < 1 ? 1 : kk > (double)dim ? (double)dim : kk);
    return 0;
}

int fsgd_strategy_shard_spec(const char *spec, uint64_t dim, uint32_t shard, uint32_t shards, char *out,
                             size_t outsz, char *err, size_t errsz)
{
    FSGD_TRY(fsgd_strategy_check_shards(spec, (int)shards, err, errsz));
    if (shard >= shards)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "shard %u of %u", shard, shards);
    if (dim < shards) /* key k to shard k mod S: a shard past the last key would own none */
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%u shards for a model of %llu keys: at most one shard a key",
                            shards, (unsigned long long)dim);
    /* the strategy's own parser first: a spec it refuses is not rewritten
     * into one it accepts (gtopk's budget drops its other parameters) */
    FSGD_TRY(fsgd_strategy_check(spec, dim, err, errsz));
    char name[64];
    fsgd_strategy_spec_name(spec, name, sizeof name);
    unsigned long long k = 0;
    int found = 0;
    if (shards > 1 && counts_entries(name))
        FSGD_TRY(spec_count(spec, &k, &found, err, errsz));
    size_t n = 0;
    if (shards > 1 && !found && strcmp(name, "gtopk") == 0) {
        /* gtopk's global budget is of the whole model: the shards split
         * ceil(density x dim), not each take that of its own dim */
        FSGD_TRY(gtopk_density_k(spec, dim, &k, err, errsz));
        if (k < shards)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "strategy gtopk: k = ceil(density x dim %llu) = %llu entries cannot be split over %u "
                                "shards (at least one each): give k=N with N >= %u",
                                (unsigned long long)dim, k, shards, shards);
        unsigned long long ki = k / shards + (shard < k % shards ? 1 : 0);
        n = (size_t)snprintf(out, outsz, "gtopk:k=%llu", ki);
    } else if (!found) {
        n = (size_t)snprintf(out, outsz, "%s", spec);
    } else {
        /* the same spec with its k=N replaced by this shard's budget */
        unsigned long long ki = k / shards + (shard < k % shards ? 1 : 0);
        out[0] = '\0';
        const char *p = spec;
        while (*p && n < outsz) {
            const char *tok_end = p + strcspn(p, ",:");
            int is_k = (p > spec && (p[-1] == ':' || p[-1] == ',') && strncmp(p, "k=", 2) == 0);
            int w = is_k ? snprintf(out + n, outsz - n, "k=%llu", ki)
                         : snprintf(out + n, outsz - n, "%.*s", (int)(tok_end - p), p);
            n += (size_t)(w < 0 ? 0 : w);
            if (!*tok_end || n >= outsz)
                break;
            if (n + 1 < outsz) {
                out[n++] = *tok_end;
                out[n] = '\0';
            } else {
                n = outsz;
            }
            p = tok_end + 1;
        }
    }
    if (n >= outsz)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "strategy spec '%s' too long for shard %u", spec, shard);
    return 0;
}
