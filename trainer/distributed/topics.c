/* A job's four topics on a real cluster, with the settings a deployment
 * needs (trainer/KAFKA_FORMAT.md, "Topic settings"). The embedded cluster
 * makes its topics itself (fsgd_kmock_topic) and has no such settings. */
#include <stdio.h>
#include <string.h>

#include "fsgd/bus.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "pull.h"

/* Kafka's default max.message.bytes. Set on every topic so that a cluster
 * with a smaller broker default still takes fsgd's 512 KiB chunks (frame,
 * Kafka headers and record overhead included) and single LIBSVM rows. */
#define TOPIC_MAX_MESSAGE "1048588"

int fsgd_dist_replication(const fsgd_dist_job_t *job, int brokers, int *rf, int *min_isr, char *err, size_t errsz)
{
    int r = job->cluster->replication_factor > 0 ? job->cluster->replication_factor : (brokers < 3 ? brokers : 3);
    if (r < 1)
        r = 1;
    if (r > brokers)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "replication_factor %d needs at least %d brokers; the cluster has %d", r, r, brokers);
    /* 2 of 3: acks=all writes survive one broker down and still reach two
     * copies; 1 of 2 or 1 of 1 is all such clusters can keep writable. */
    int m = job->cluster->min_insync_replicas > 0 ? job->cluster->min_insync_replicas : (r >= 3 ? 2 : 1);
    if (m > r)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "min_insync_replicas %d is more than replication_factor %d: no write could succeed", m,
                            r);
    *rf = r;
    *min_isr = m;
    return 0;
}

int fsgd_dist_topics_create(fsgd_bus_client_t *c, const fsgd_dist_job_t *job, int data_partitions, char *err,
                            size_t errsz)
{
    int nb = fsgd_bus_broker_count(c, 10000, err, errsz);
    if (nb < 0)
        return nb;
    int rf, m;
    FSGD_TRY(fsgd_dist_replication(job, nb, &rf, &m, err, errsz));
    char isr[16];
    snprintf(isr, sizeof isr, "%d", m);
    /* data: the dataset itself; an epoch is [0, high watermark) of every
     * partition, so nothing may ever be deleted by time or size. */
    const char *data[] = {"cleanup.policy", "delete", "retention.ms", "-1", "retention.bytes", "-1",
                          "min.insync.replicas", isr, "max.message.bytes", TOPIC_MAX_MESSAGE, NULL};
    /* grads: read live only (a restarted aggregator starts at the end). */
    const char *grads[] = {"cleanup.policy", "delete", "retention.ms", "3600000", "segment.ms", "600000",
                           "min.insync.replicas", isr, "max.message.bytes", TOPIC_MAX_MESSAGE, NULL};
    /* model: compacted. Snapshot chunk i has key "snapshot.i" and delta
     * chunk i of step s "delta.(s mod snapshot_every).i", so compaction
     * keeps the newest snapshot whole and every delta after it (fewer than
     * snapshot_every of them), and drops what a newer message replaces: a
     * late joiner always finds a full snapshot, the log stays bounded. */
    const char *model[] = {"cleanup.policy", "compact", "segment.ms", "600000", "min.cleanable.dirty.ratio", "0.5",
                           "min.insync.replicas", isr, "max.message.bytes", TOPIC_MAX_MESSAGE, NULL};
    /* ctl: small; the aggregator reads it from the start (assignments). */
    const char *ctl[] = {"cleanup.policy", "delete", "retention.ms", "-1", "min.insync.replicas", isr,
                         "max.message.bytes", TOPIC_MAX_MESSAGE, NULL};
    static const char *sfx[] = {"data", "grads", "model", "ctl"};
    const char *const *cf[] = {data, grads, model, ctl};
    for (int i = data_partitions > 0 ? 0 : 1; i < 4; i++) {
        char t[128];
        fsgd_kbus_topic(t, sizeof t, job->dist->name, sfx[i]);
        /* grads and model: a partition per aggregator shard (KAFKA_FORMAT.md) */
        int parts = i == 0 ? data_partitions : i == 3 || job->train->shards < 2 ? 1 : job->train->shards;
        FSGD_TRY(fsgd_bus_create_topic(c, t, parts, rf, cf[i], 30000, err, errsz));
    }
    if (fsgd_dist_replica(job->train, job->dist) == FSGD_REPLICA_WORKING_SET) {
        /* pull: answers to working-set workers, each on the partition of its
         * id (fsgd_pull_partition), read live only like grads */
        char t[128];
        fsgd_kbus_topic(t, sizeof t, job->dist->name, "pull");
        FSGD_TRY(fsgd_bus_create_topic(c, t, FSGD_PULL_PARTITIONS, rf, grads, 30000, err, errsz));
    }
    return 0;
}

int fsgd_dist_topics_unused(fsgd_bus_client_t *c, const fsgd_dist_job_t *job, int data_too, char *err, size_t errsz)
{
    static const char *sfx[] = {"model", "data"};
    for (int i = 0; i < (data_too ? 2 : 1); i++) {
        char t[128];
        fsgd_kbus_topic(t, sizeof t, job->dist->name, sfx[i]);
        int P = fsgd_bus_partitions(c, t, 10000, err, errsz);
        if (P < 0)
            return P;
        int64_t held = 0;
        for (int p = 0; p < P; p++) {
            int64_t lo, hi;
            FSGD_TRY(fsgd_bus_watermarks(c, t, p, &lo, &hi, 10000, err, errsz));
            held += hi - lo;
        }
        if (held > 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, /* a usage error: pick another name */
                                "job name '%s' was used before on these brokers: %s holds %lld messages (a job "
                                "name is for one job: choose a new --name, or delete %s.data/.grads/.model/.ctl)",
                                job->dist->name, t, (long long)held, job->dist->name);
    }
    return 0;
}
