/* A sharded aggregator (job key shards > 1, issue 25): this process owns the
 * keys k with k mod S = shard (fsgd/shard.h), as local keys k / S. It reads
 * partition `shard` of NAME.grads and writes partition `shard` of
 * NAME.model (frames with sender = shard).
 *
 * Shard 0 leads: it decides the job's membership, drops and epochs exactly
 * as an unsharded aggregator does. Every other shard follows its steps:
 * a step's gradients are taken only once shard 0's model message for that
 * step is on NAME.model partition 0, and only those whose data ranges end
 * where shard 0's step state says (the ranges it applied). The follower's
 * own positions, epochs, quotas and end then come out the same as the
 * leader's, since they are functions of the applied ranges; a worker
 * dropped by the leader is dropped by every shard, and no follower decides
 * on a timeout of its own. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregator_internal.h"
#include "assemble.h"
#include "fsgd/shard.h"
#include "fsgd/train.h"

/* The leader's step states not yet used (steps after this shard's). */
typedef struct lead_step {
    uint64_t step;
    uint32_t gen;
    int final;
    fsgd_wire_state_t st;
} lead_step_t;

struct agg_lead {
    fsgd_bus_client_t *c;
    fsgd_kasm_t *as;
    lead_step_t *q;
    size_t n, cap;
    uint32_t gen;      /* the leader's generation being followed */
    double last_heard; /* when the leader's last message came */
    uint64_t decided;  /* the open step whose state came, and when */
    double decided_at;
    uint64_t open_step; /* the step the leader's generation opened at */
    int64_t hi_at_open, next_offset; /* partition 0's end when this shard started, and where it reads */
    fsgd_replay_t *replay;           /* copies of the leader's messages (fsgd/replay.h) */
};

/* How long a follower waits on shard 0 before it ends the job: longer than
 * the leader's own step timeout, after which the leader drops the silent
 * and moves on (or sends its model again). */
static double lead_patience(double step_timeout)
{
    return step_timeout * 3 > 60 ? step_timeout * 3 : 60;
}

int agg_shard_setup(agg_t *a)
{
    const fsgd_dist_job_t *job = a->job;
    a->shards = job->train->shards > 1 ? (uint32_t)job->train->shards : 1;
    a->shard = job->dist->shard;
    if (a->shards == 1)
        return 0;
    if (a->shard >= a->shards)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, "shard %u of %u: shards are numbered 0 to %u", a->shard,
                            a->shards, a->shards - 1);
    return fsgd_agg_shards_check(job, a->err, a->errsz);
}

int fsgd_agg_shards_check(const fsgd_dist_job_t *job, char *err, size_t errsz)
{
    /* what agg_table_choose refuses, said before any process starts */
    if (job->dist->table == FSGD_TABLE_SPARSE && job->train->shards <= 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "table sparse is a shard's table: give --shards 2 or more (one aggregator scores the test "
                            "set and writes the model from a dense θ)");
    if (job->dist->table == FSGD_TABLE_SPARSE && fsgd_dist_replica(job->train, job->dist) != FSGD_REPLICA_WORKING_SET)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "table sparse needs --replica working_set (full replicas take every step's values from a "
                            "dense θ)");
    if (job->train->shards <= 1)
        return 0;
    const char *why = NULL;
    if (job->dist->follow) /* before epochs: a follow job has none */
        why = "follow (continuous training) is not sharded yet";
    else if (job->train->epochs == 0)
        why = "epochs auto scores held-out rows on the whole model: give a number of epochs";
    else if (job->train->init[0])
        why = "init (a model to start from) is not sharded yet";
    else if (job->train->optimizer == FSGD_OPTIMIZER_FTRL)
        why = "the ftrl optimizer is not sharded yet";
    if (why)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "shards %d: %s", job->train->shards, why);
    char e[256];
    if (fsgd_strategy_check_shards(job->train->codec, job->train->shards, e, sizeof e) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s", e);
    return 0;
}

int agg_shard_dims(agg_t *a, uint64_t dim)
{
    a->dim = dim;
    a->mdim = a->dim + (a->job->train->bias ? 1 : 0);
    a->gweights = a->mdim;
    if (a->shards > 1)
        a->mdim = fsgd_shard_dim(a->gweights, a->shard, a->shards);
    a->s->shard = a->shard;
    a->s->shards = a->shards;
    a->s->weights_held = a->mdim;
    if (a->job->dist->max_model_weights && a->mdim > a->job->dist->max_model_weights)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_ARG, FSGD_EMBEDDED_MODEL_LIMIT_MSG, (unsigned long long)a->mdim,
                            a->mdim * 4.0 / 1048576.0, (unsigned long long)a->job->dist->max_model_weights);
    a->s->dim = a->dim;
    return 0;
}

int agg_lead_open(agg_t *a, fsgd_bus_t *bus)
{
    if (a->shards == 1 || a->shard == 0)
        return 0;
    struct agg_lead *l = calloc(1, sizeof *l);
    if (!l || !(l->as = fsgd_kasm_new()) || !(l->replay = fsgd_replay_new())) {
        if (l)
            fsgd_kasm_destroy(l->as);
        free(l);
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    }
    a->lead = l;
    if (!(l->c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, a->err, a->errsz)))
        return FSGD_E_KAFKA;
    fsgd_bus_tp_t tp = {a->topic.model, 0, FSGD_BUS_OFFSET_BEGINNING};
    l->last_heard = agg_now();
    int64_t lo = 0;
    FSGD_TRY(fsgd_bus_watermarks(l->c, a->topic.model, 0, &lo, &l->hi_at_open, 10000, a->err, a->errsz));
    return fsgd_bus_assign(l->c, &tp, 1, a->err, a->errsz);
}

void agg_lead_free(agg_lead_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        fsgd_wire_state_free(&l->q[i].st);
    free(l->q);
    fsgd_kasm_destroy(l->as);
    fsgd_replay_destroy(l->replay);
    fsgd_bus_client_destroy(l->c);
    free(l);
}

static const lead_step_t *lead_find(const agg_lead_t *l, uint64_t step)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (l->q[i].step == step && l->q[i].gen == l->gen)
            return &l->q[i];
    return NULL;
}

/* One message of partition 0 of NAME.model: a step state to keep. */
static int lead_take(agg_t *a, const fsgd_bus_msg_t *m)
{
    struct agg_lead *l = a->lead;
    fsgd_kframe_t f;
    char e[256];
    l->next_offset = m->offset + 1;
    if (fsgd_kframe_parse(m->val, m->len, &f, NULL, a->auth, e, sizeof e) < 0 || f.kind == FSGD_KMSG_GRAD || f.sender != 0)
        return 0; /* not the leader's: the workers' checks count such messages */
    int rp = fsgd_replay_frame(l->replay, m->partition, m->offset, m->val, m->len);
    if (rp < 0)
        return fsgd_err_fmt(a->err, a->errsz, rp, "aggregator: out of memory");
    if (rp) {
        agg_reject_on(a, a->topic.model, FSGD_AGG_REJ_REPLAYED, "offset %lld: generation %u step %llu: a copy of a "
                      "message shard 0 wrote before", (long long)m->offset, f.gen, (unsigned long long)f.step);
        return 0;
    }
    const uint8_t *body;
    size_t len;
    if (fsgd_kasm_feed(l->as, &f, &body, &len, e, sizeof e) != FSGD_KASM_DONE)
        return 0;
    l->last_heard = agg_now();
    if (f.gen < l->gen)
        return 0;
    if (f.gen > l->gen) { /* a restarted leader: its steps replace the old one's */
        for (size_t i = 0; i < l->n; i++)
            fsgd_wire_state_free(&l->q[i].st);
        l->n = 0;
        l->gen = f.gen;
        l->open_step = f.step; /* a generation opens with its snapshot */
    }
    if (f.step <= a->step || lead_find(l, f.step))
        return 0;
    fsgd_wire_state_t s = {0};
    size_t off = 0;
    if (fsgd_wire_state_get(body, len, &off, &s, e, sizeof e) < 0 || s.nparts != a->st.nparts) {
        fsgd_wire_state_free(&s);
        agg_log(a, "shard %u: a step-%llu message of shard 0 does not parse: %s", a->shard,
                (unsigned long long)f.step, e);
        return 0;
    }
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        lead_step_t *nq = realloc(l->q, nc * sizeof *nq);
        if (!nq) {
            fsgd_wire_state_free(&s);
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        }
        l->q = nq;
        l->cap = nc;
    }
    l->q[l->n++] = (lead_step_t){f.step, f.gen, (f.flags & FSGD_KFLAG_FINAL) != 0, s};
    return 0;
}

int agg_lead_poll(agg_t *a, int *open_decided)
{
    struct agg_lead *l = a->lead;
    *open_decided = 0;
    if (!l)
        return 0;
    int rc = 0, had_open = lead_find(l, a->step + 1) != NULL;
    for (int i = 0; i < 256 && !rc; i++) {
        fsgd_bus_msg_t *m = fsgd_bus_poll(l->c, 0);
        if (!m)
            break;
        if (!m->err)
            rc = lead_take(a, m);
        fsgd_bus_msg_destroy(m);
    }
    if (!rc && l->gen != a->gen)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE,
                            "shard %u: shard 0 started generation %u (from step %llu) while this shard follows "
                            "generation %u: every shard restarts with it (fsgd run does; by hand, restart this one "
                            "with --resume)", a->shard, l->gen, (unsigned long long)l->open_step, a->gen);
    /* states of steps this shard has applied are spent */
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->q[i].step > a->step && l->q[i].gen == l->gen)
            l->q[k++] = l->q[i];
        else
            fsgd_wire_state_free(&l->q[i].st);
    l->n = k;
    /* the open step's gradients waited for this: the caller takes them now, in order */
    *open_decided = !rc && !had_open && lead_find(l, a->step + 1);
    return rc;
}

int agg_lead_decided(const agg_lead_t *l, uint64_t step)
{
    return lead_find(l, step) != NULL;
}

/* Where the leader's step leaves partition p: its position, or its end
 * when the step closed the epoch (the state then starts the next one). */
static uint64_t lead_end(const fsgd_wire_state_t *st, const lead_step_t *d, uint32_t p)
{
    return d->st.epoch != st->epoch || d->final ? st->end[p] : d->st.pos[p];
}

int agg_lead_applied(const agg_lead_t *l, const fsgd_wire_state_t *st, uint64_t step, const fsgd_wire_range_t *r,
                     uint32_t n)
{
    const lead_step_t *d = lead_find(l, step);
    if (!d)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (r[i].part >= st->nparts || r[i].end != lead_end(st, d, r[i].part))
            return 0;
    return 1;
}

int agg_lead_complete(const agg_lead_t *l, const fsgd_wire_state_t *st, const agg_open_step_t *o, uint64_t step)
{
    const lead_step_t *d = lead_find(l, step);
    if (!d)
        return 0;
    for (uint32_t p = 0; p < st->nparts; p++) {
        uint64_t at = o->claimed[p] ? o->newpos[p] : st->pos[p];
        if (at != lead_end(st, d, p))
            return 0;
    }
    return 1;
}

int agg_lead_wait_start(agg_t *a)
{
    struct agg_lead *l = a->lead;
    double t0 = agg_now(), logged = t0;
    /* the newest generation of shard 0 (partition 0 read to where it was
     * when this shard started), and one after this shard's checkpoint's */
    const uint32_t after = a->gen;
    while (!l->gen || l->gen <= after || l->next_offset < l->hi_at_open) {
        FSGD_TRY(agg_crashed(a));
        fsgd_bus_msg_t *m = fsgd_bus_poll(l->c, 100);
        if (m) {
            int rc = m->err ? 0 : lead_take(a, m);
            fsgd_bus_msg_destroy(m);
            FSGD_TRY(rc);
            continue;
        }
        const agg_ctl_ctx_t cc = agg_ctl_ctx(a);
        const agg_env_t env = agg_env(a);
        agg_ctl_drain(&a->members, &cc, &env, 0);
        double t = agg_now();
        if (t - t0 > 120)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_TIMEOUT,
                                "shard %u: no opening snapshot from shard 0 on %s partition 0 after %.0f s: is "
                                "shard 0's aggregator running?", a->shard, a->topic.model, t - t0);
        if (t - logged >= 10) {
            logged = t;
            agg_log(a, "shard %u: waiting %.0f s for shard 0 to open the job on %s partition 0", a->shard, t - t0,
                    a->topic.model);
        }
    }
    if (l->open_step != a->step)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_STATE,
                            "shard %u is at step %llu (%s) but shard 0 opened generation %u at step %llu: every shard "
                            "starts from the same step (fsgd run restarts them together, FSGD_RESUME_STEP)", a->shard,
                            (unsigned long long)a->step, a->step ? "its checkpoint" : "a fresh start", l->gen,
                            (unsigned long long)l->open_step);
    a->gen = a->s->gen = l->gen;
    agg_log(a, "shard %u of %u: %llu of the model's %llu weights (keys k with k mod %u = %u); following shard 0's "
               "steps, generation %u", a->shard, a->shards, (unsigned long long)a->mdim,
            (unsigned long long)a->gweights, a->shards, a->shard, a->gen);
    return 0;
}

int agg_lead_check_alive(agg_t *a, double step_timeout)
{
    struct agg_lead *l = a->lead;
    double t = agg_now();
    if (!agg_lead_decided(l, a->step + 1)) {
        if (t - l->last_heard > lead_patience(step_timeout))
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_TIMEOUT,
                                "shard %u: nothing from shard 0 on %s partition 0 for %.0f s (step %llu open): shard "
                                "0 is gone", a->shard, a->topic.model, t - l->last_heard,
                                (unsigned long long)a->step + 1);
        return 0;
    }
    if (l->decided != a->step + 1) {
        l->decided = a->step + 1;
        l->decided_at = t;
    }
    /* Shard 0 applied ranges whose part never came here (a worker killed
     * between its sends, a message lost with it): past a step timeout, the
     * step goes on without that part, as shard 0 counted it, so every
     * shard's rows and positions stay shard 0's. Live workers resend
     * sooner (a quarter of the step timeout). */
    if (t - l->decided_at > step_timeout && !agg_lead_complete(l, &a->st, &a->open, a->step + 1)) {
        const lead_step_t *d = lead_find(l, a->step + 1);
        for (uint32_t p = 0; p < a->st.nparts; p++) {
            uint64_t at = a->open.claimed[p] ? a->open.newpos[p] : a->st.pos[p], to = lead_end(&a->st, d, p);
            if (at == to || a->open.claimed[p] || to < at)
                continue;
            uint64_t s0 = a->st.start[p];
            a->open.rows_step += a->data.rows_at[p][to - s0] - a->data.rows_at[p][at - s0];
            a->open.claimed[p] = 1;
            a->open.newpos[p] = to;
            a->s->parts_missing++;
            agg_log(a, "shard %u: step %llu: the gradient part for %s partition %u offsets [%llu, %llu) that shard 0 "
                       "applied never came here in %.0f s (its worker gone?): the step goes on without it",
                    a->shard, (unsigned long long)a->step + 1, a->topic.data, p, (unsigned long long)at,
                    (unsigned long long)to, t - l->decided_at);
        }
    }
    return 0;
}

int agg_shard_final(agg_t *a)
{
    const fsgd_dist_job_t *job = a->job;
    if (!job->train->out[0] && !a->test.n_rows)
        return 0;
    /* The job is over: this shard's θ, optimizer and strategy state (the
     * downlink replica with it) go before the whole model is read, so the
     * shard's peak stays its training peak (one copy of the model, read in
     * place: assemble.c). */
    agg_pages_join(&a->model);
    /* sparse tables: the model is assembled as pairs, scored and written
     * from them, never held dense (4 GiB at 2^30 for a few million keys) */
    const int as_pairs = a->model.table != NULL;
    fsgd_sparse_t pairs = {0};
    fsgd_adam_free(&a->model.adam);
    fsgd_sparse_table_destroy(a->model.table);
    a->model.table = NULL;
    fsgd_sagg_destroy(a->model.strat);
    a->model.strat = NULL;
    double t0 = agg_now(), logged = t0, patience = lead_patience(job->dist->step_timeout_ms / 1e3);
    fsgd_model_t m;
    char e[512];
    int rc;
    for (;;) {
        rc = as_pairs ? fsgd_model_assemble_topic_pairs(a->bus, job->dist->name, 1, &m, &pairs, NULL, e, sizeof e)
                      : fsgd_model_assemble_topic(a->bus, job->dist->name, 1, &m, NULL, e, sizeof e);
        if (rc != FSGD_E_TRUNCATED || agg_now() - t0 > patience)
            break;
        if (agg_now() - logged >= 10) {
            logged = agg_now();
            agg_log(a, "shard 0: waiting %.0f s for every shard's final snapshot on %s: %s", logged - t0, a->topic.model, e);
        }
        struct timespec ns = {0, 200 * 1000000};
        nanosleep(&ns, NULL);
    }
    if (rc < 0) {
        fsgd_sparse_free(&pairs);
        return fsgd_err_fmt(a->err, a->errsz, rc, "shard 0: the whole model from %s: %s", a->topic.model, e);
    }
    fsgd_rowfmt_input(&a->fmt, m.input, sizeof m.input);
    if (a->test.n_rows) {
        rc = as_pairs ? fsgd_train_evaluate_pairs(&m, &pairs, &a->test, &a->s->test)
                      : fsgd_train_evaluate(&m, &a->test, &a->s->test);
        if (!rc && a->s->n_epochs)
            a->s->epochs[a->s->n_epochs - 1].test = a->s->test;
    }
    if (!rc && job->train->out[0])
        rc = as_pairs ? fsgd_model_save_pairs(&m, &pairs, job->train->out, a->err, a->errsz)
                      : fsgd_model_save(&m, job->train->out, a->err, a->errsz);
    else if (rc < 0)
        rc = fsgd_err_fmt(a->err, a->errsz, rc, "shard 0: scoring the test set on the whole model failed");
    fsgd_sparse_free(&pairs);
    fsgd_model_free(&m);
    return rc;
}
