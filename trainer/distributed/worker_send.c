/* A step: the rows the state names, the gradient, its parts for the shards,
 * and the sends (worker_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/clock.h"
#include "worker_internal.h"

/* Whether this worker's next step, ahead of the model, has rows to take
 * (a worker with none answers each step only when it opens). */
static int rows_ahead(const worker_t *w)
{
    for (int i = 0; i < w->nassigned; i++) {
        int32_t p = w->assigned[i];
        if (p >= 0 && (uint32_t)p < w->st.nparts && w->next_pos[p] < w->st.end[p] && w->st.quota[p] > 0)
            return 1;
    }
    return 0;
}

/* May the worker send its next gradient now? Always once the model has
 * answered all it sent; up to τ steps ahead of the model when it has rows
 * for them (bounded staleness). */
int worker_may_send(worker_t *w)
{
    if (!w->valid || !w->have_assignment)
        return 0;
    if (worker_pull_waiting(w))
        return 0; /* replica working_set: the values the step needs are on their way */
    uint64_t ahead = inflight_ahead(&w->fl, w->gen, w->step);
    if (ahead == 0) {
        w->hold = 0;
        return 1;
    }
    return ahead <= (uint64_t)w->tau && !w->hold && rows_ahead(w);
}

/* Sends one gradient body framed for step s to partition `shard` of NAME.grads. */
static int send_grad(worker_t *w, uint32_t shard, uint32_t gen, uint64_t s, uint16_t flags, const uint8_t *body,
                     size_t len)
{
    fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .flags = flags, .gen = gen, .sender = w->id, .step = s};
    const fsgd_bus_out_t out = {.topic = w->topic.grads,
                                .partition = w->shards > 1 ? (int32_t)shard : FSGD_BUS_PARTITION_ANY,
                                .job = w->job->dist->name, .hdr = &h, .val = body, .len = len};
    return fsgd_bus_send(w->prod, &out, &w->stats->bytes_up, w->err, w->errsz);
}

/* A sharded job: the step's gradient (w->g, global keys) split by shard,
 * each part encoded by its shard's strategy and sent to its partition with
 * the same header (ranges, rows, loss). w->buf keeps the parts for a
 * resend: per shard u32 length, then the body. */
static int send_shard_parts(worker_t *w, fsgd_wire_grad_t *gm, uint64_t s, uint16_t flags)
{
    fsgd_wire_buf_t one = {0};
    double t0 = fsgd_clock_s();
    int rc = gm->rows ? fsgd_shard_split(&w->g, w->shards, w->sh_part) : 0;
    if (rc < 0)
        return fsgd_err_fmt(w->err, w->errsz, rc, "worker: out of memory");
    w->buf.n = 0;
    double t_part = t0; /* each part's message carries its own encode time (the split with part 0's) */
    /* every shard runs the same spec: the whole's scale once for all parts */
    double whole = gm->rows ? fsgd_sworker_whole_scale(w->strat[0], w->g.vals, w->g.n) : NAN;
    for (uint32_t i = 0; i < w->shards && !rc; i++) {
        size_t elen = 0;
        if (gm->rows) {
            const fsgd_sparse_t *part = &w->sh_part[i];
            size_t cap = fsgd_sworker_bound(w->strat[i], part->n);
            if (cap > w->enc_cap) {
                uint8_t *ne = realloc(w->enc, cap);
                if (!ne) {
                    rc = fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
                    break;
                }
                w->enc = ne;
                w->enc_cap = cap;
            }
            fsgd_sworker_set_whole(w->strat[i], whole);
            fsgd_outbuf_t msg = {w->enc, w->enc_cap, 0};
            rc = fsgd_sworker_encode(w->strat[i], part->keys, part->vals, part->n, gm->rows, &msg, w->err,
                                     w->errsz);
            elen = msg.len;
        }
        gm->codec = w->enc;
        gm->codec_len = (uint32_t)elen;
        double t_done = fsgd_clock_s();
        gm->t_encode = t_done - t_part;
        t_part = t_done;
        one.n = 0;
        if (!rc)
            rc = fsgd_wire_grad_put(&one, gm);
        if (!rc)
            rc = fsgd_wire_u32(&w->buf, (uint32_t)one.n) | fsgd_wire_put(&w->buf, one.p, one.n) ? FSGD_E_NOMEM : 0;
        if (!rc)
            rc = send_grad(w, i, w->gen, s, flags, one.p, one.n);
    }
    w->stats->t_encode += fsgd_clock_s() - t0;
    free(one.p);
    return rc;
}

/* Sends again an inflight body (a sharded one: each part to its shard). */
int worker_resend_body(worker_t *w, const inflight_t *e)
{
    if (w->shards == 1)
        return send_grad(w, 0, e->gen, e->step, e->flags, e->body.p, e->body.n);
    size_t off = 0;
    for (uint32_t i = 0; i < w->shards && off + 4 <= e->body.n; i++) {
        uint32_t n = fsgd_le_get32(e->body.p + off);
        off += 4;
        if (n > e->body.n - off)
            break;
        FSGD_TRY(send_grad(w, i, e->gen, e->step, e->flags, e->body.p + off, n));
        off += n;
    }
    return 0;
}

int worker_select_rows(worker_t *w, fsgd_wire_range_t *rg, uint32_t *nranges)
{
    const uint64_t *pos = w->next_pos;
    fsgd_csr_clear(&w->batch);
    uint32_t nr = 0;
    int rc = worker_load_pending(w);
    for (int i = 0; i < w->nassigned && !rc; i++) {
        int32_t p = w->assigned[i];
        if (p < 0 || (uint32_t)p >= w->st.nparts)
            continue;
        if (pos[p] >= w->st.end[p] || w->st.quota[p] == 0)
            continue;
        rc = worker_load_partition(w, (uint32_t)p);
        if (rc)
            break;
        pcache_t *c = &w->cache[p];
        /* Whole messages, as many as come nearest the quota (a row block
         * holds many rows), and one at least; messages of no rows (a bad
         * row skipped) go with the rows before them, never alone */
        uint64_t o = pos[p], first = c->row_of[o - c->start];
        while (o < c->end) {
            uint64_t taken = c->row_of[o - c->start] - first, next = c->row_of[o + 1 - c->start] - (first + taken);
            if (taken > 0 && next > 0 && 2 * taken + next >= 2 * (uint64_t)w->st.quota[p])
                break;
            o++;
        }
        uint64_t last = c->row_of[o - c->start];
        if (last > first)
            rc = fsgd_csr_append_rows(&w->batch, &c->rows, first, last - first);
        rg[nr++] = (fsgd_wire_range_t){(uint32_t)p, pos[p], o};
    }
    *nranges = nr;
    return rc;
}

/* The data topic never changes at an offset, so the ranges name the
 * batch's content: a device backend may keep it resident and reuse it when
 * the same ranges come round next epoch. FNV-1a, 62 bits. */
static int64_t batch_id(const fsgd_wire_range_t *rg, uint32_t nr)
{
    uint64_t id = 1469598103934665603ull;
    for (uint32_t i = 0; i < nr; i++) {
        uint64_t parts[3] = {rg[i].part, rg[i].start, rg[i].end};
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 8; k++)
                id = (id ^ ((parts[j] >> (8 * k)) & 0xFF)) * 1099511628211ull;
    }
    return (int64_t)(id >> 2);
}

int worker_send_step(worker_t *w, uint64_t s, uint64_t lag, const fsgd_wire_range_t *rg, uint32_t nr)
{
    int rc = 0;
    fsgd_wire_grad_t gm = {.epoch = w->st.epoch, .nranges = nr, .rows = w->batch.n_rows,
                           .ranges = (fsgd_wire_range_t *)rg};
    double loss = 0;
    if (!rc && w->batch.n_rows > 0) {
        double t0 = fsgd_clock_s();
        fsgd_grad_request_t req = {.batch = &w->batch, .batch_id = batch_id(rg, nr), .loss = (fsgd_loss_kind_t)w->kind,
                                   .scale = 1.0, .l2 = 0};
        /* Adam strategies: the aggregator adds λθ once (agg_step.c). A strategy
         * whose workers run the optimizer (efsign) gets λ in its gradient sum,
         * λθ per row on the replica's touched keys, so --l2 is the same
         * objective for every strategy. */
        if (fsgd_sworker_optimizer(w->strat[0]) == FSGD_OPT_APPLY && w->job->train->l2 > 0)
            req.l2 = w->job->train->l2 * (double)w->batch.n_rows;
        /* A device that encodes on the card hands back only the message
         * (gradient and encoding fused; its time counts as gradient). */
        fsgd_codec_t *dc = fsgd_sworker_device_codec(w->strat[0]);
        int fused = w->shards == 1 && !w->local_keys && dc && fsgd_backend_encodes_on_device(w->be, dc);
        size_t cap = 0, elen = 0, raw_entries = 0;
        if (fused) {
            cap = fsgd_backend_encoded_bound(dc, &w->batch);
        } else {
            rc = fsgd_backend_gradient(w->be, &req, &w->g, &loss, w->err, w->errsz);
            /* a working-set step ran on local columns: back to the model's
             * keys (an increasing map, so still in order) */
            for (size_t j = 0; !rc && w->local_keys && j < w->g.n; j++)
                w->g.keys[j] = w->local_keys[w->g.keys[j]];
            cap = w->shards == 1 ? fsgd_sworker_bound(w->strat[0], w->g.n) : 0; /* the parts': send_shard_parts */
            raw_entries = w->g.n;
        }
        double t1 = fsgd_clock_s();
        if (!rc && cap > w->enc_cap) {
            uint8_t *ne = realloc(w->enc, cap);
            if (!ne)
                rc = fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
            else {
                w->enc = ne;
                w->enc_cap = cap;
            }
        }
        if (!rc && fused) {
            fsgd_outbuf_t msg = {w->enc, w->enc_cap, 0};
            rc = fsgd_backend_gradient_encoded(w->be, &req, dc, &msg, &loss, w->err, w->errsz);
            elen = msg.len;
            fsgd_codec_stats_t cst;
            fsgd_codec_last_stats(dc, &cst);
            raw_entries = cst.n_in;
            t1 = fsgd_clock_s();
        } else if (!rc && w->shards == 1) {
            fsgd_outbuf_t msg = {w->enc, w->enc_cap, 0};
            rc = fsgd_sworker_encode(w->strat[0], w->g.keys, w->g.vals, w->g.n, gm.rows, &msg, w->err, w->errsz);
            elen = msg.len;
        }
        double t2 = fsgd_clock_s();
        gm.loss_sum = loss;
        gm.t_grad = t1 - t0;
        gm.t_encode = t2 - t1;
        gm.raw_entries = raw_entries;
        gm.codec = w->enc;
        gm.codec_len = (uint32_t)elen;
        w->stats->t_grad += gm.t_grad;
        w->stats->t_encode += gm.t_encode;
    } else if (!rc) {
        /* Nothing to contribute (no partitions, or ours are done for the
         * epoch): answer the barrier without spinning. */
        struct timespec ns = {0, 20 * 1000000};
        nanosleep(&ns, NULL);
    }
    uint16_t flags = (uint16_t)(lag << FSGD_KFLAG_LAG_SHIFT);
    if (!rc && w->shards > 1) {
        rc = send_shard_parts(w, &gm, s, flags);
    } else if (!rc) {
        w->buf.n = 0;
        rc = fsgd_wire_grad_put(&w->buf, &gm);
        fsgd_kframe_t h = {.kind = FSGD_KMSG_GRAD, .flags = flags, .gen = w->gen, .sender = w->id, .step = s};
        if (!rc)
            rc = fsgd_bus_send(w->prod,
                               &(fsgd_bus_out_t){.topic = w->topic.grads, .partition = FSGD_BUS_PARTITION_ANY,
                                                 .job = w->job->dist->name, .hdr = &h, .val = w->buf.p, .len = w->buf.n},
                               &w->stats->bytes_up, w->err, w->errsz);
    }
    if (!rc && inflight_push(&w->fl, s, w->gen, flags, gm.rows, rg, nr, w->buf.p, w->buf.n) < 0)
        rc = fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    for (uint32_t i = 0; !rc && i < nr; i++)
        w->next_pos[rg[i].part] = rg[i].end;
    if (rc)
        return rc;
    w->sent_gen = w->gen;
    w->sent_step = s;
    w->sent_at = w->last_send = fsgd_clock_s();
    w->stats->steps_sent++;
    w->stats->rows += gm.rows;
    if (w->on_step) /* the caller's hook (/metrics) */
        w->on_step(w->log_ctx, w->stats);
    return 0;
}

int worker_do_step(worker_t *w)
{
    uint64_t ahead = inflight_ahead(&w->fl, w->gen, w->step);
    uint64_t s = w->step + 1 + ahead; /* computed on the model of step s - 1 - ahead */
    fsgd_wire_range_t ranges[1024];
    fsgd_wire_range_t *rg = w->nassigned <= 1024 ? ranges : malloc(w->nassigned * sizeof *rg);
    if (!rg)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory");
    uint32_t nr = 0;
    int rc = worker_select_rows(w, rg, &nr);
    if (!rc)
        rc = worker_send_step(w, s, ahead, rg, nr);
    if (rg != ranges)
        free(rg);
    return rc;
}
