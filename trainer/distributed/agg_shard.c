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

#include "agg_clock.h"
#include "agg_lead.h"
#include "agg_shard.h"
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

int agg_shard_setup(const fsgd_dist_job_t *job, uint32_t *shard, uint32_t *shards, const agg_env_t *e)
{
    *shards = job->train->shards > 1 ? (uint32_t)job->train->shards : 1;
    *shard = job->dist->shard;
    if (*shards == 1)
        return 0;
    if (*shard >= *shards)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_ARG, "shard %u of %u: shards are numbered 0 to %u", *shard,
                            *shards, *shards - 1);
    return fsgd_agg_shards_check(job, e->err, e->errsz);
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

int agg_shard_dims(const fsgd_dist_job_t *job, uint32_t shard, uint32_t shards, uint64_t dim, uint64_t *mdim,
                   uint64_t *gweights, const agg_env_t *e)
{
    *mdim = dim + (job->train->bias ? 1 : 0);
    *gweights = *mdim;
    if (shards > 1)
        *mdim = fsgd_shard_dim(*gweights, shard, shards);
    e->s->shard = shard;
    e->s->shards = shards;
    e->s->weights_held = *mdim;
    if (job->dist->max_model_weights && *mdim > job->dist->max_model_weights)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_ARG, FSGD_EMBEDDED_MODEL_LIMIT_MSG, (unsigned long long)*mdim,
                            *mdim * 4.0 / 1048576.0, (unsigned long long)job->dist->max_model_weights);
    e->s->dim = dim;
    return 0;
}

int agg_lead_open(agg_lead_t **lead, fsgd_bus_t *bus, const agg_lead_ctx_t *c, const agg_env_t *e)
{
    if (c->shards == 1 || c->shard == 0)
        return 0;
    struct agg_lead *l = calloc(1, sizeof *l);
    if (!l || !(l->as = fsgd_kasm_new()) || !(l->replay = fsgd_replay_new())) {
        if (l)
            fsgd_kasm_destroy(l->as);
        free(l);
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    }
    *lead = l; /* before the client: a failure below leaves it to the caller's agg_lead_free */
    if (!(l->c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, e->err, e->errsz)))
        return FSGD_E_KAFKA;
    fsgd_bus_tp_t tp = {c->model_topic, 0, FSGD_BUS_OFFSET_BEGINNING};
    l->last_heard = agg_now();
    int64_t lo = 0;
    FSGD_TRY(fsgd_bus_watermarks(l->c, c->model_topic, 0, &lo, &l->hi_at_open, 10000, e->err, e->errsz));
    return fsgd_bus_assign(l->c, &tp, 1, e->err, e->errsz);
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
static int lead_take(agg_lead_t *l, const agg_lead_ctx_t *c, const agg_env_t *e, const fsgd_bus_msg_t *m)
{
    fsgd_kframe_t f;
    char why[256];
    l->next_offset = m->offset + 1;
    if (fsgd_kframe_parse(m->val, m->len, &f, NULL, c->auth, why, sizeof why) < 0 || f.kind == FSGD_KMSG_GRAD ||
        f.sender != 0)
        return 0; /* not the leader's: the workers' checks count such messages */
    int rp = fsgd_replay_frame(l->replay, m->partition, m->offset, m->val, m->len);
    if (rp < 0)
        return fsgd_err_fmt(e->err, e->errsz, rp, "aggregator: out of memory");
    if (rp) {
        agg_env_reject_on(e, c->model_topic, FSGD_AGG_REJ_REPLAYED,
                          "offset %lld: generation %u step %llu: a copy of a message shard 0 wrote before",
                          (long long)m->offset, f.gen, (unsigned long long)f.step);
        return 0;
    }
    const uint8_t *body;
    size_t len;
    if (fsgd_kasm_feed(l->as, &f, &body, &len, why, sizeof why) != FSGD_KASM_DONE)
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
    if (f.step <= c->step || lead_find(l, f.step))
        return 0;
    fsgd_wire_state_t s = {0};
    size_t off = 0;
    if (fsgd_wire_state_get(body, len, &off, &s, why, sizeof why) < 0 || s.nparts != c->st->nparts) {
        fsgd_wire_state_free(&s);
        agg_env_log(e, "shard %u: a step-%llu message of shard 0 does not parse: %s", c->shard,
                    (unsigned long long)f.step, why);
        return 0;
    }
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        lead_step_t *nq = realloc(l->q, nc * sizeof *nq);
        if (!nq) {
            fsgd_wire_state_free(&s);
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        }
        l->q = nq;
        l->cap = nc;
    }
    l->q[l->n++] = (lead_step_t){f.step, f.gen, (f.flags & FSGD_KFLAG_FINAL) != 0, s};
    return 0;
}

int agg_lead_poll(agg_lead_t *l, const agg_lead_ctx_t *c, const agg_env_t *e, int *open_decided)
{
    *open_decided = 0;
    if (!l)
        return 0;
    int rc = 0, had_open = lead_find(l, c->step + 1) != NULL;
    for (int i = 0; i < 256 && !rc; i++) {
        fsgd_bus_msg_t *m = fsgd_bus_poll(l->c, 0);
        if (!m)
            break;
        if (!m->err)
            rc = lead_take(l, c, e, m);
        fsgd_bus_msg_destroy(m);
    }
    if (!rc && l->gen != *c->gen)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_STATE,
                            "shard %u: shard 0 started generation %u (from step %llu) while this shard follows "
                            "generation %u: every shard restarts with it (fsgd run does; by hand, restart this one "
                            "with --resume)", c->shard, l->gen, (unsigned long long)l->open_step, *c->gen);
    /* states of steps this shard has applied are spent */
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->q[i].step > c->step && l->q[i].gen == l->gen)
            l->q[k++] = l->q[i];
        else
            fsgd_wire_state_free(&l->q[i].st);
    l->n = k;
    /* the open step's gradients waited for this: the caller takes them now, in order */
    *open_decided = !rc && !had_open && lead_find(l, c->step + 1);
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

int agg_lead_wait_start(agg_lead_t *l, const agg_lead_ctx_t *c, const agg_env_t *e, void (*on_idle)(void *),
                        void *idle_arg)
{
    double t0 = agg_now(), logged = t0;
    /* the newest generation of shard 0 (partition 0 read to where it was
     * when this shard started), and one after this shard's checkpoint's */
    const uint32_t after = *c->gen;
    while (!l->gen || l->gen <= after || l->next_offset < l->hi_at_open) {
        FSGD_TRY(agg_env_crashed(e, c->crash, c->stopped));
        fsgd_bus_msg_t *m = fsgd_bus_poll(l->c, 100);
        if (m) {
            int rc = m->err ? 0 : lead_take(l, c, e, m);
            fsgd_bus_msg_destroy(m);
            FSGD_TRY(rc);
            continue;
        }
        on_idle(idle_arg);
        double t = agg_now();
        if (t - t0 > 120)
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_TIMEOUT,
                                "shard %u: no opening snapshot from shard 0 on %s partition 0 after %.0f s: is "
                                "shard 0's aggregator running?", c->shard, c->model_topic, t - t0);
        if (t - logged >= 10) {
            logged = t;
            agg_env_log(e, "shard %u: waiting %.0f s for shard 0 to open the job on %s partition 0", c->shard, t - t0,
                        c->model_topic);
        }
    }
    if (l->open_step != c->step)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_STATE,
                            "shard %u is at step %llu (%s) but shard 0 opened generation %u at step %llu: every shard "
                            "starts from the same step (fsgd run restarts them together, FSGD_RESUME_STEP)", c->shard,
                            (unsigned long long)c->step, c->step ? "its checkpoint" : "a fresh start", l->gen,
                            (unsigned long long)l->open_step);
    *c->gen = e->s->gen = l->gen;
    agg_env_log(e, "shard %u of %u: %llu of the model's %llu weights (keys k with k mod %u = %u); following shard 0's "
                   "steps, generation %u", c->shard, c->shards, (unsigned long long)c->mdim,
                (unsigned long long)c->gweights, c->shards, c->shard, *c->gen);
    return 0;
}

int agg_lead_check_alive(agg_lead_t *l, const agg_lead_ctx_t *c, const agg_env_t *e, double step_timeout)
{
    double t = agg_now();
    if (!agg_lead_decided(l, c->step + 1)) {
        if (t - l->last_heard > lead_patience(step_timeout))
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_TIMEOUT,
                                "shard %u: nothing from shard 0 on %s partition 0 for %.0f s (step %llu open): shard "
                                "0 is gone", c->shard, c->model_topic, t - l->last_heard,
                                (unsigned long long)c->step + 1);
        return 0;
    }
    if (l->decided != c->step + 1) {
        l->decided = c->step + 1;
        l->decided_at = t;
    }
    /* Shard 0 applied ranges whose part never came here (a worker killed
     * between its sends, a message lost with it): past a step timeout, the
     * step goes on without that part, as shard 0 counted it, so every
     * shard's rows and positions stay shard 0's. Live workers resend
     * sooner (a quarter of the step timeout). */
    const fsgd_wire_state_t *st = c->st;
    agg_open_step_t *o = c->open;
    if (t - l->decided_at > step_timeout && !agg_lead_complete(l, st, o, c->step + 1)) {
        const lead_step_t *d = lead_find(l, c->step + 1);
        for (uint32_t p = 0; p < st->nparts; p++) {
            uint64_t at = o->claimed[p] ? o->newpos[p] : st->pos[p], to = lead_end(st, d, p);
            if (at == to || o->claimed[p] || to < at)
                continue;
            uint64_t s0 = st->start[p];
            o->rows_step += c->data->rows_at[p][to - s0] - c->data->rows_at[p][at - s0];
            o->claimed[p] = 1;
            o->newpos[p] = to;
            e->s->parts_missing++;
            agg_env_log(e, "shard %u: step %llu: the gradient part for %s partition %u offsets [%llu, %llu) that "
                           "shard 0 applied never came here in %.0f s (its worker gone?): the step goes on without it",
                        c->shard, (unsigned long long)c->step + 1, c->data_topic, p, (unsigned long long)at,
                        (unsigned long long)to, t - l->decided_at);
        }
    }
    return 0;
}

int agg_shard_final(const agg_shard_final_ctx_t *c, const agg_env_t *e)
{
    const fsgd_dist_job_t *job = c->job;
    agg_model_state_t *model = c->model;
    if (!job->train->out[0] && !c->test->n_rows)
        return 0;
    /* The job is over: this shard's θ, optimizer and strategy state (the
     * downlink replica with it) go before the whole model is read, so the
     * shard's peak stays its training peak (one copy of the model, read in
     * place: assemble.c). */
    agg_pages_join(model);
    /* sparse tables: the model is assembled as pairs, scored and written
     * from them, never held dense (4 GiB at 2^30 for a few million keys) */
    const int as_pairs = model->table != NULL;
    fsgd_sparse_t pairs = {0};
    fsgd_adam_free(&model->adam);
    fsgd_sparse_table_destroy(model->table);
    model->table = NULL;
    fsgd_sagg_destroy(model->strat);
    model->strat = NULL;
    double t0 = agg_now(), logged = t0, patience = lead_patience(job->dist->step_timeout_ms / 1e3);
    fsgd_model_t m;
    char why[512];
    int rc;
    for (;;) {
        rc = as_pairs
                 ? fsgd_model_assemble_topic_pairs(c->bus, job->dist->name, 1, &m, &pairs, NULL, why, sizeof why)
                 : fsgd_model_assemble_topic(c->bus, job->dist->name, 1, &m, NULL, why, sizeof why);
        if (rc != FSGD_E_TRUNCATED || agg_now() - t0 > patience)
            break;
        if (agg_now() - logged >= 10) {
            logged = agg_now();
            agg_env_log(e, "shard 0: waiting %.0f s for every shard's final snapshot on %s: %s", logged - t0,
                        c->model_topic, why);
        }
        struct timespec ns = {0, 200 * 1000000};
        nanosleep(&ns, NULL);
    }
    if (rc < 0) {
        fsgd_sparse_free(&pairs);
        return fsgd_err_fmt(e->err, e->errsz, rc, "shard 0: the whole model from %s: %s", c->model_topic, why);
    }
    fsgd_rowfmt_input(c->fmt, m.input, sizeof m.input);
    fsgd_agg_stats_t *s = e->s;
    if (c->test->n_rows) {
        rc = as_pairs ? fsgd_train_evaluate_pairs(&m, &pairs, c->test, &s->test)
                      : fsgd_train_evaluate(&m, c->test, &s->test);
        if (!rc && s->n_epochs)
            s->epochs[s->n_epochs - 1].test = s->test;
    }
    if (!rc && job->train->out[0])
        rc = as_pairs ? fsgd_model_save_pairs(&m, &pairs, job->train->out, e->err, e->errsz)
                      : fsgd_model_save(&m, job->train->out, e->err, e->errsz);
    else if (rc < 0)
        rc = fsgd_err_fmt(e->err, e->errsz, rc, "shard 0: scoring the test set on the whole model failed");
    fsgd_sparse_free(&pairs);
    fsgd_model_free(&m);
    return rc;
}
