/* A worker's clients and what it reads (worker_open), and its end
 * (worker_close): the group it leaves, the memory it frees. */
#include "worker_internal.h"

/* The group consumer only tracks ownership; rows are read by offset
 * through the fetch consumer. parts are sorted. */
static void on_rebalance(void *opaque, int assigned, const int32_t *parts, int n)
{
    worker_t *w = opaque;
    if (assigned) {
        int32_t *a = realloc(w->assigned, (n ? n : 1) * sizeof *a);
        if (!a)
            return;
        w->assigned = a;
        memcpy(w->assigned, parts, (size_t)n * sizeof *a);
        w->nassigned = n;
        w->have_assignment = 1;
    } else {
        w->nassigned = 0;
    }
    w->assign_dirty = 1;
    w->hold = 1;
}


int worker_open(worker_t *w, fsgd_bus_t *bus)
{
    const fsgd_dist_job_t *job = w->job;
    char *err = w->err;
    size_t errsz = w->errsz;
    char group[128];
    fsgd_kbus_topic(group, sizeof group, job->dist->name, "workers");
    int rc = fsgd_rowfmt_init(&w->fmt, job->train->format, job->train->hash_bits, job->train->skip_bad, err, errsz);
    if (!rc && (!(w->as = fsgd_kasm_new()) || !(w->replay_rows = fsgd_replay_new()) ||
                !(w->replay_model = fsgd_replay_new()) || !(w->replay_ctl = fsgd_replay_new())))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "worker: out of memory");
    if (!rc && !(w->prod = fsgd_bus_client_new(bus, FSGD_KCLIENT_PRODUCER, err, errsz)))
        rc = FSGD_E_KAFKA;
    /* The producer learns where NAME.grads and NAME.ctl live now, not at
     * their first message: an unknown topic's metadata came back only after
     * librdkafka's refresh backoff, and step 1 waited half a second for it
     * (the first worker_assignment on NAME.ctl reached the broker 0.9 s
     * after it was made, and the aggregator waited for it). */
    if (!rc) {
        fsgd_bus_partitions(w->prod, w->topic.grads, 5000, NULL, 0);
        fsgd_bus_partitions(w->prod, w->topic.ctl, 5000, NULL, 0);
    }
    if (!rc && fsgd_dist_replica(job->train, job->dist) == FSGD_REPLICA_WORKING_SET)
        rc = worker_pull_open(w);
    if (!rc && !(w->fetch = fsgd_bus_client_new(bus, FSGD_KCLIENT_READER, err, errsz)))
        rc = FSGD_E_KAFKA;
    if (!rc && !(w->model_c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, errsz)))
        rc = FSGD_E_KAFKA;
    if (!rc && w->shards > 1) {
        int P = fsgd_bus_partitions(w->model_c, w->topic.model, 10000, err, errsz);
        if (P >= 0 && P < (int)w->shards)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                              "worker: %s has %d partition%s, and %u aggregator shards (--shards) need one each: is the "
                              "job sharded?", w->topic.model, P, P == 1 ? "" : "s", w->shards);
        else if (P < 0)
            rc = P;
    }
    if (!rc) {
        /* the model from its start; NAME.ctl from now on (job_end events);
         * a sharded job: every shard's partition */
        fsgd_bus_tp_t l[FSGD_SHARDS_MAX + 2];
        int n = 0;
        for (uint32_t i = 0; i < w->shards; i++)
            l[n++] = (fsgd_bus_tp_t){w->topic.model, (int32_t)i, FSGD_BUS_OFFSET_BEGINNING};
        int64_t lo = 0, hi = 0;
        if (fsgd_bus_watermarks(w->model_c, w->topic.ctl, 0, &lo, &hi, 5000, NULL, 0) == 0)
            l[n++] = (fsgd_bus_tp_t){w->topic.ctl, 0, hi};
        w->ctl_read = n == (int)w->shards + 1;
        if (w->pull.on)
            l[n++] = worker_pull_partition(w);
        rc = fsgd_bus_assign(w->model_c, l, n, err, errsz);
    }
    if (!rc && !(w->group = fsgd_bus_group_new(bus, group, w->topic.data, on_rebalance, w, err, errsz)))
        rc = FSGD_E_KAFKA;
    return rc;
}

void worker_close(worker_t *w)
{
    worker_unpark(w, 1);
    if (w->prod) {
        w->nassigned = 0;
        w->have_assignment = 0;
        worker_report_assignment(w, "worker_leave");
    }
    if (w->prod)
        fsgd_bus_flush(w->prod, 5000, NULL, 0); /* what is left is dropped below */
    fsgd_bus_client_destroy(w->group);
    fsgd_bus_client_destroy(w->model_c);
    fsgd_bus_client_destroy(w->fetch);
    fsgd_bus_client_destroy(w->prod);
    for (uint32_t i = 0; i < w->ncache; i++) {
        fsgd_csr_free(&w->cache[i].rows);
        free(w->cache[i].row_of);
    }
    free(w->cache);
    free(w->wm_lo);
    free(w->wm_hi);
    fsgd_backend_destroy(w->be);
    for (uint32_t i = 0; i < w->shards; i++) {
        fsgd_sworker_destroy(w->strat[i]);
        fsgd_sparse_free(&w->sh_part[i]);
    }
    for (size_t i = 0; i < w->nlead; i++)
        fsgd_wire_state_free(&w->lead[i].st);
    free(w->lead);
    free(w->theta);
    free(w->assigned);
    fsgd_kasm_destroy(w->as);
    fsgd_replay_destroy(w->replay_rows);
    fsgd_replay_destroy(w->replay_model);
    fsgd_replay_destroy(w->replay_ctl);
    worker_pull_free(w);
    fsgd_csr_free(&w->batch);
    fsgd_csr_free(&w->tmp);
    fsgd_sparse_free(&w->g);
    fsgd_sparse_free(&w->delta);
    free(w->buf.p);
    free(w->enc);
    fsgd_wire_state_free(&w->st);
    inflight_free(&w->fl);
    free(w->next_pos);
    fsgd_cj_free(&w->cj);
    free(w);
}
