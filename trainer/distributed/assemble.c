/* Rebuilding a model file from <job>.model: the last complete snapshot plus
 * every later delta of the same generation (deltas hold absolute values, so
 * order within a generation is all that matters). A sharded job's shards
 * (frame sender I, partition I) are each assembled so, in their local keys,
 * then interleaved (fsgd/shard.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/bus.h"
#include "fsgd/auth.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/hugepages.h"
#include "fsgd/strategy.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/replay.h"
#include "fsgd/shard.h"
#include "assemble.h"
#include "wire.h"

typedef struct asm_state {
    fsgd_kasm_t *as;
    fsgd_model_t m; /* a sharded job's shard: only the model's shape; its weights in the whole one */
    uint64_t nloc;
    uint32_t shard, shards;
    int have;
    uint32_t gen;
    uint64_t step;
    int final;
    fsgd_sparse_t d;
    /* A sharded job's shard in the whole model's weights (asm_all_t gw):
     * the local keys written there since its last dense write, so that a
     * sparse snapshot clears only those (a dense one writes every one of
     * the shard's places, and at 2^30 weights that is every page: 4 GiB for
     * a model of a few million keys). gw_dense: a dense snapshot was
     * written, so a sparse one writes every place too. */
    uint32_t *gw_keys;
    size_t gw_n, gw_cap;
    int gw_dense;
    /* pairs mode (fsgd_model_assemble_topic_pairs): the shard's weights
     * that are not +0, local keys increasing, instead of the whole model's
     * array; stale: a delta with values came after them (a newer snapshot
     * must replace them) */
    fsgd_sparse_t pairs;
    int stale;
    uint64_t bad;
    uint64_t unauth; /* frames without this job key's tag, skipped */
} asm_state_t;

/* One state per sender: shard I of a sharded job sends as I. */
typedef struct asm_all {
    asm_state_t sh[FSGD_SHARDS_MAX];
    uint64_t unauth;
    fsgd_replay_t *replay; /* copies of a message its sender wrote before: skipped, counted */
    uint64_t old_snapshots; /* of the generation taken, older than its snapshot taken: skipped */
    /* a sharded job: the whole model's weights, each shard's written in
     * place (one copy of the model, not one per shard and one joined) */
    float *gw;
    uint64_t gn;
    uint32_t gshards;
    uint64_t max_step; /* frames of later steps are left out (UINT64_MAX: none) */
    /* pairs mode: each shard's weights kept as pairs and joined into out,
     * never a dense array of the whole model (a sharded job only) */
    int pairs;
    fsgd_sparse_t *out;
    const fsgd_auth_t *auth; /* the job's key: frames without its tag are skipped */
} asm_all_t;

static int feed_one(asm_all_t *all, asm_state_t *s, const fsgd_kframe_t *fp, const uint8_t *p, size_t len,
                    char *err, size_t errsz);

/* One message at offset of partition (a stream: its index). */
static int feed(asm_all_t *all, const uint8_t *p, size_t len, int32_t partition, int64_t offset, char *err,
                size_t errsz)
{
    fsgd_kframe_t f;
    char e[256];
    int rc = fsgd_kframe_parse(p, len, &f, NULL, all->auth, e, sizeof e);
    if (rc == FSGD_E_AUTH && fsgd_auth_enabled(all->auth)) {
        all->unauth++;
        return 0;
    }
    if (rc == 0 && !all->replay && !(all->replay = fsgd_replay_new()))
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
    int rp = rc == 0 ? fsgd_replay_frame(all->replay, partition, offset, p, len) : 0;
    if (rp < 0)
        return fsgd_err_fmt(err, errsz, rp, "assemble: out of memory");
    if (rp)
        return 0; /* counted by the replay check */
    if (rc == 0 && f.sender >= FSGD_SHARDS_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "model topic: a message from sender %u (shards are 0 to %d)",
                            f.sender, FSGD_SHARDS_MAX - 1);
    if (rc == 0 && f.step > all->max_step)
        return 0;
    asm_state_t *s = &all->sh[rc == 0 ? f.sender : 0];
    if (!s->as && !(s->as = fsgd_kasm_new()))
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
    return feed_one(all, s, &f, p, len, err, errsz);
}

/* A snapshot: the model (or a shard's part of the joined one) as it was at
 * its step, unless an older copy or another generation's. */
/* Local keys the shard wrote into gw, remembered (asm_state_t gw_keys). */
static int gw_remember(asm_state_t *s, const uint32_t *keys, size_t n, size_t stride)
{
    if (s->gw_dense || !n)
        return 0;
    if (s->gw_n + n > s->gw_cap) {
        size_t cap = s->gw_cap ? s->gw_cap : 1024;
        while (cap < s->gw_n + n)
            cap *= 2;
        uint32_t *k = realloc(s->gw_keys, cap * sizeof *k);
        if (!k)
            return FSGD_E_NOMEM;
        s->gw_keys = k;
        s->gw_cap = cap;
    }
    for (size_t i = 0; i < n; i++)
        s->gw_keys[s->gw_n++] = keys[i * stride];
    return 0;
}

/* Shard s's snapshot wm into the whole model's weights: a sparse one clears
 * what the shard wrote before and writes its pairs (the pages touched
 * follow the keys held, not the shard's dim); a dense one every place. */
static int gw_put_snapshot(asm_all_t *all, asm_state_t *s, const fsgd_wire_model_t *wm)
{
    if (wm->w || s->gw_dense) {
        fsgd_wire_model_weights_strided(wm, all->gw, wm->shards, wm->shard);
        s->gw_dense = 1;
        s->gw_n = 0;
        return 0;
    }
    for (size_t i = 0; i < s->gw_n; i++)
        all->gw[fsgd_shard_global(s->gw_keys[i], wm->shard, wm->shards)] = 0;
    s->gw_n = 0;
    fsgd_wire_model_weights_into_zeros(wm, all->gw, wm->shards, wm->shard);
    uint32_t k[256];
    for (uint64_t i = 0; i < wm->nnz; i += 256) {
        size_t n = wm->nnz - i < 256 ? (size_t)(wm->nnz - i) : 256;
        for (size_t j = 0; j < n; j++)
            k[j] = fsgd_le_get32(wm->kv + 8 * (i + j));
        FSGD_TRY(gw_remember(s, k, n, 1));
    }
    return 0;
}

/* Pairs mode: the shard's snapshot as its pairs of weights not +0. */
static int pairs_put_snapshot(asm_state_t *s, const fsgd_wire_model_t *wm)
{
    uint64_t n = wm->w ? 0 : wm->nnz;
    for (uint64_t i = 0; wm->w && i < wm->nloc; i++)
        n += fsgd_le_getf32(wm->w + 4 * i) != 0;
    FSGD_TRY(fsgd_sparse_reserve(&s->pairs, n ? n : 1));
    s->pairs.n = 0;
    for (uint64_t i = 0; !wm->w && i < wm->nnz; i++) {
        s->pairs.keys[s->pairs.n] = fsgd_le_get32(wm->kv + 8 * i);
        s->pairs.vals[s->pairs.n++] = fsgd_le_getf32(wm->kv + 8 * i + 4);
    }
    for (uint64_t i = 0; wm->w && i < wm->nloc; i++) {
        float x = fsgd_le_getf32(wm->w + 4 * i);
        if (x != 0) {
            s->pairs.keys[s->pairs.n] = (uint32_t)i;
            s->pairs.vals[s->pairs.n++] = x;
        }
    }
    s->stale = 0;
    return 0;
}

static int feed_snapshot(asm_all_t *all, asm_state_t *s, const fsgd_kframe_t *f, const uint8_t *body, size_t blen,
                         size_t off, char *err, size_t errsz)
{
    char e[256];
    int rc;
    fsgd_wire_model_t wm;
    rc = fsgd_wire_model_get(body, blen, &off, &wm, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "snapshot step %llu: %s", (unsigned long long)f->step, e);
    if (s->have && f->gen < s->gen)
        return 0;
    /* a generation's snapshots come in step order: an untagged older
     * one after a newer is a copy (no tag to tell), and must not take
     * the model back. A tagged one's copies are caught by its nonce
     * (feed); a tagged snapshot far ahead (an insider's) must not hide
     * the job's own final one that comes after it. Nor may an untagged
     * one: a generation's final snapshot is written once, at its end, so
     * no copy of an older snapshot is final, and one far ahead that is
     * not (forged) gives way to it. */
    const int final_after_forged = (f->flags & FSGD_KFLAG_FINAL) && !s->final;
    if (s->have && f->gen == s->gen && f->step < s->step && !(f->flags & FSGD_KFLAG_AUTH) && !final_after_forged) {
        all->old_snapshots++;
        return 0;
    }
    if (wm.shards > 1 && wm.shard != f->sender)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "snapshot step %llu: shard %u's weights sent as shard %u",
                            (unsigned long long)f->step, wm.shard, f->sender);
    if (wm.shards > 1 && all->gshards && (all->gn != wm.n || all->gshards != wm.shards))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "snapshot step %llu: shard %u of %u of a %llu-weight model, after shards of %u of a "
                            "%llu-weight one", (unsigned long long)f->step, wm.shard, wm.shards,
                            (unsigned long long)wm.n, all->gshards, (unsigned long long)all->gn);
    if (all->pairs && wm.shards < 2)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "snapshot step %llu: not a shard's (pairs are a sharded job's)",
                            (unsigned long long)f->step);
    if (wm.shards > 1 && !all->gshards) {
        all->gn = wm.n;
        all->gshards = wm.shards;
    }
    if (wm.shards > 1 && !all->gw && !all->pairs) {
        if (!(all->gw = calloc(wm.n ? wm.n : 1, sizeof *all->gw)))
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "snapshot: out of memory for %llu weights",
                                (unsigned long long)wm.n);
        all->gn = wm.n;
        all->gshards = wm.shards;
    }
    fsgd_model_free(&s->m);
    rc = fsgd_model_init(&s->m, (fsgd_loss_kind_t)wm.kind, wm.shards > 1 ? 0 : wm.dim, (int)wm.has_bias, wm.bias);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "snapshot: out of memory");
    s->m.dim = wm.dim; /* a shard's: the shape only */
    s->shard = wm.shard;
    s->shards = wm.shards;
    s->nloc = wm.nloc;
    if (all->pairs) {
        if (pairs_put_snapshot(s, &wm) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "snapshot: out of memory");
    } else if (wm.shards > 1) {
        if (gw_put_snapshot(all, s, &wm) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "snapshot: out of memory");
    } else if (!wm.w) {
        /* sparse: s->m.w is fresh zeros (calloc's untouched pages), so
         * only the pairs present are written: the memory a snapshot
         * costs follows its bytes, not the dim it declares (a 128-byte
         * frame declaring 2^30 weights took 4.2 GB, issue 42) */
        for (uint64_t i = 0; i < wm.nnz; i++)
            s->m.w[fsgd_le_get32(wm.kv + 8 * i)] = fsgd_le_getf32(wm.kv + 8 * i + 4);
    } else {
        fsgd_wire_model_weights(&wm, s->m.w);
    }
    s->have = 1;
    s->gen = f->gen;
    s->step = f->step;
    s->final = (f->flags & FSGD_KFLAG_FINAL) != 0;
    return 0;
}

/* A delta after the snapshot held: the touched keys' values (or, coded,
 * their additive updates, which need every step). */
static int feed_delta(asm_all_t *all, asm_state_t *s, const fsgd_kframe_t *f, const uint8_t *body, size_t blen,
                      size_t off, char *err, size_t errsz)
{
    char e[256];
    int rc;
    if (!s->have || f->gen != s->gen || f->step <= s->step)
        return 0;
    /* a shard's keys are local: decoded against its part, then put in place */
    const int sharded = s->shards > 1;
    if (all->pairs) {
        /* the values of a delta go into a shard's next snapshot, the one
         * pairs mode reads (working-set shards' deltas carry none) */
        fsgd_wire_cdelta_t cd;
        rc = f->kind == FSGD_KMSG_DELTA_CODED ? fsgd_wire_cdelta_get(body, blen, &off, &cd, e, sizeof e)
             : f->kind == FSGD_KMSG_DELTA_PACKED ? fsgd_wire_pdelta_get(body, blen, &off, s->nloc, &s->d, e, sizeof e)
                                                 : fsgd_wire_delta_get(body, blen, &off, s->nloc, &s->d, e, sizeof e);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "delta step %llu: %s", (unsigned long long)f->step, e);
        s->stale |= f->kind == FSGD_KMSG_DELTA_CODED || s->d.n > 0;
        s->step = f->step;
        return 0;
    }
    uint64_t n = sharded ? s->nloc : s->m.dim + (s->m.has_bias ? 1 : 0);
    float *w = sharded ? all->gw : s->m.w;
    if (f->kind == FSGD_KMSG_DELTA_CODED) {
        /* Additive updates: one missing step and the sum is wrong; wait for
         * the next snapshot instead. */
        if (f->step != s->step + 1) {
            s->have = 0;
            return 0;
        }
        fsgd_wire_cdelta_t cd;
        rc = fsgd_wire_cdelta_get(body, blen, &off, &cd, e, sizeof e);
        if (rc == 0)
            rc = fsgd_sworker_downlink_decode(cd.msg, cd.msg_len, n, &s->d, e, sizeof e);
        if (rc == 0 && sharded && gw_remember(s, s->d.keys, s->d.n, 1) < 0)
            rc = FSGD_E_NOMEM;
        for (size_t i = 0; rc == 0 && sharded && i < s->d.n; i++)
            s->d.keys[i] = (uint32_t)fsgd_shard_global(s->d.keys[i], s->shard, s->shards);
        if (rc == 0)
            rc = fsgd_sworker_downlink_apply(w, sharded ? all->gn : n, &s->d, e, sizeof e);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "coded delta step %llu: %s", (unsigned long long)f->step, e);
        s->step = f->step;
        return 0;
    }
    rc = f->kind == FSGD_KMSG_DELTA_PACKED ? fsgd_wire_pdelta_get(body, blen, &off, n, &s->d, e, sizeof e)
                                          : fsgd_wire_delta_get(body, blen, &off, n, &s->d, e, sizeof e);
    if (rc == 0 && sharded && gw_remember(s, s->d.keys, s->d.n, 1) < 0)
        rc = fsgd_err_fmt(e, sizeof e, FSGD_E_NOMEM, "out of memory");
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "delta step %llu: %s", (unsigned long long)f->step, e);
    for (size_t i = 0; i < s->d.n; i++)
        w[sharded ? fsgd_shard_global(s->d.keys[i], s->shard, s->shards) : s->d.keys[i]] = s->d.vals[i];
    s->step = f->step;
    return 0;
}

static int feed_one(asm_all_t *all, asm_state_t *s, const fsgd_kframe_t *fp, const uint8_t *p, size_t len,
                    char *err, size_t errsz)
{
    fsgd_kframe_t f = *fp;
    char e[256];
    int rc = fsgd_kframe_parse(p, len, &f, NULL, all->auth, e, sizeof e);
    /* With the job key, a frame that is not the job's (a forged snapshot
     * appended to the topic) is skipped, never assembled; without the key an
     * authenticated topic cannot be read at all (the parse says so). */
    if (rc == FSGD_E_AUTH && fsgd_auth_enabled(all->auth)) {
        s->unauth++;
        return 0;
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "model topic: %s", e);
    if (f.kind == FSGD_KMSG_GRAD)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "model topic: a gradient frame (kind 1) is not a model message");
    const uint8_t *body;
    size_t blen;
    rc = fsgd_kasm_feed(s->as, &f, &body, &blen, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "model topic: %s", e);
    if (rc != FSGD_KASM_DONE)
        return 0;
    fsgd_wire_state_t st = {0};
    size_t off = 0;
    rc = fsgd_wire_state_get(body, blen, &off, &st, e, sizeof e);
    fsgd_wire_state_free(&st);
    if (rc == 0 && (f.flags & FSGD_KFLAG_SECTION)) {
        const uint8_t *sec; /* the strategy's feedback: for workers only */
        size_t slen;
        rc = fsgd_wire_section_get(body, blen, &off, &sec, &slen, e, sizeof e);
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "model message step %llu: %s", (unsigned long long)f.step, e);
    if (f.kind == FSGD_KMSG_SNAPSHOT)
        return feed_snapshot(all, s, &f, body, blen, off, err, errsz);
    return feed_delta(all, s, &f, body, blen, off, err, errsz);
}

/* Pairs mode: every shard's pairs, local keys, into all->out with global
 * keys increasing: key l of shard i is l·S + i, so the order is by l, then
 * by shard (a merge of S sorted lists). */
static int join_pairs(asm_all_t *all, char *err, size_t errsz)
{
    asm_state_t *sh = all->sh;
    const uint32_t S = sh[0].shards;
    size_t total = 0, at[FSGD_SHARDS_MAX] = {0};
    for (uint32_t i = 0; i < S; i++) {
        if (sh[i].stale)
            return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "model topic: shard %u has values after its last snapshot "
                                "(step %llu): a sparse assembly reads snapshots only", i, (unsigned long long)sh[i].step);
        total += sh[i].pairs.n;
    }
    if (fsgd_sparse_reserve(all->out, total ? total : 1) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory for %zu weights", total);
    all->out->n = 0;
    for (size_t k = 0; k < total; k++) {
        uint32_t best = S;
        for (uint32_t i = 0; i < S; i++)
            if (at[i] < sh[i].pairs.n && (best == S || sh[i].pairs.keys[at[i]] < sh[best].pairs.keys[at[best]]))
                best = i;
        uint64_t g = fsgd_shard_global(sh[best].pairs.keys[at[best]], best, S);
        if (g > UINT32_MAX)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "assemble: key %llu of shard %u is past 2^32",
                                (unsigned long long)g, best);
        all->out->keys[all->out->n] = (uint32_t)g;
        all->out->vals[all->out->n++] = sh[best].pairs.vals[at[best]++];
    }
    return 0;
}

/* A sharded job's shards, complete and of one model, interleaved into s[0].m
 * (the model at the oldest shard's step; final when every shard's is). */
static int join_shards(asm_all_t *all, char *err, size_t errsz)
{
    asm_state_t *sh = all->sh;
    const uint32_t S = sh[0].shards;
    for (uint32_t i = 0; i < S; i++) {
        const asm_state_t *s = &sh[i];
        if (!s->have)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "model topic: no complete snapshot of shard %u of %u", i,
                                S);
        if (s->shards != S || s->shard != i || s->gen != sh[0].gen || s->m.dim != sh[0].m.dim ||
            s->m.has_bias != sh[0].m.has_bias || s->m.kind != sh[0].m.kind)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "model topic: shard %u's snapshot (shard %u of %u, generation %u) is not of shard "
                                "0's model (%u shards, generation %u)", i, s->shard, s->shards, s->gen, S, sh[0].gen);
    }
    for (uint32_t i = S; i < FSGD_SHARDS_MAX; i++)
        if (sh[i].have)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "model topic: a shard %u in a job of %u shards", i, S);
    if (all->pairs)
        FSGD_TRY(join_pairs(all, err, errsz));
    fsgd_model_t m;
    if (fsgd_model_init(&m, sh[0].m.kind, 0, sh[0].m.has_bias, sh[0].m.bias) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
    free(m.w); /* the whole model's weights are all->gw, taken over */
    m.dim = sh[0].m.dim;
    m.w = all->gw;
    all->gw = NULL;
    int final = 1;
    uint64_t step = sh[0].step;
    for (uint32_t i = 0; i < S; i++) {
        final &= sh[i].final;
        if (sh[i].step < step)
            step = sh[i].step;
    }
    fsgd_model_free(&sh[0].m);
    sh[0].m = m;
    sh[0].final = final;
    sh[0].step = step;
    return 0;
}

static void free_all(asm_all_t *all)
{
    fsgd_replay_destroy(all->replay);
    all->replay = NULL;
    free(all->gw);
    all->gw = NULL;
    for (int i = 0; i < FSGD_SHARDS_MAX; i++) {
        fsgd_model_free(&all->sh[i].m);
        fsgd_sparse_free(&all->sh[i].d);
        fsgd_sparse_free(&all->sh[i].pairs);
        free(all->sh[i].gw_keys);
        all->sh[i].gw_keys = NULL;
        all->sh[i].gw_n = all->sh[i].gw_cap = 0;
        all->sh[i].gw_dense = 0;
        fsgd_kasm_destroy(all->sh[i].as);
    }
}

static int finish(asm_all_t *all, int require_final, fsgd_model_t *m, uint64_t *step, char *err, size_t errsz)
{
    asm_state_t *s = &all->sh[0];
    s->unauth = all->unauth;
    int rc = 0;
    if (s->have && s->shards > 1)
        rc = join_shards(all, err, errsz);
    else
        for (int i = 1; i < FSGD_SHARDS_MAX && !rc; i++)
            if (all->sh[i].have)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "model topic: snapshots from sender %d of a job that is "
                                  "not sharded", i);
    if (rc) {
    } else if (!s->have)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "model topic: no complete snapshot found");
    else if (require_final && !s->final)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                          "model topic: the job's final snapshot is missing (last step %llu); the job is still "
                          "running or was stopped (use --partial to assemble anyway)",
                          (unsigned long long)s->step);
    uint64_t replays = fsgd_replay_count(all->replay, NULL, 0) + all->old_snapshots;
    if (!rc) {
        *m = s->m;
        memset(&s->m, 0, sizeof s->m);
        if (step)
            *step = s->step;
        if (s->unauth && replays)
            fsgd_err_fmt(err, errsz, 0, "skipped %llu messages without this job key's tag and %llu replayed ones",
                         (unsigned long long)s->unauth, (unsigned long long)replays);
        else if (s->unauth)
            fsgd_err_fmt(err, errsz, 0, "skipped %llu messages without this job key's tag",
                         (unsigned long long)s->unauth);
        else if (replays)
            fsgd_err_fmt(err, errsz, 0,
                         "skipped %llu replayed messages (copies of a model message its sender wrote before)",
                         (unsigned long long)replays);
    } else if (s->unauth) {
        size_t n = strlen(err);
        if (n < errsz)
            snprintf(err + n, errsz - n, " (and %llu messages without this job key's tag were skipped)",
                     (unsigned long long)s->unauth);
    }
    free_all(all);
    return rc;
}

int fsgd_model_assemble_stream(const uint8_t *buf, size_t len, const fsgd_auth_t *auth, int require_final,
                               fsgd_model_t *m, uint64_t *step, char *err, size_t errsz)
{
    asm_all_t *all = calloc(1, sizeof *all);
    memset(m, 0, sizeof *m);
    if (!all)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
    all->max_step = UINT64_MAX;
    all->auth = auth;
    size_t off = 0, nframes = 0;
    int rc = 0;
    while (off < len) {
        fsgd_kframe_t f;
        size_t used = 0;
        char e[256];
        /* the frame's length first; feed checks its tag */
        rc = fsgd_kframe_parse_unverified(buf + off, len - off, &f, &used, e, sizeof e);
        if (rc == 0)
            rc = feed(all, buf + off, used, 0, (int64_t)nframes++, e, sizeof e);
        if (rc < 0) {
            free_all(all);
            free(all);
            return fsgd_err_fmt(err, errsz, rc, "at byte %zu of the stream: %s", off, e);
        }
        off += used;
    }
    rc = finish(all, require_final, m, step, err, errsz);
    free(all);
    return rc;
}

typedef struct topic_ctx {
    asm_all_t *all;
} topic_ctx_t;

static int topic_msg(void *ctx, int32_t partition, int64_t offset, const void *val, size_t len, char *err,
                     size_t errsz)
{
    topic_ctx_t *t = ctx;
    char e[256];
    int rc = feed(t->all, val, len, partition, offset, e, sizeof e);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "partition %d offset %lld: %s", (int)partition, (long long)offset, e);
    return 0;
}

/* What a read of the topic assembles: the final snapshot required, frames
 * up to max_step, and pairs mode's output (NULL: the dense model). */
typedef struct asm_opts {
    int require_final;
    uint64_t max_step;
    fsgd_sparse_t *pairs;
} asm_opts_t;

static int assemble_topic(struct fsgd_bus *bus, const char *job, const asm_opts_t *o, fsgd_model_t *m, uint64_t *step,
                          char *err, size_t errsz)
{
    memset(m, 0, sizeof *m);
    char topic[128];
    fsgd_kbus_topic(topic, sizeof topic, job, "model");
    fsgd_bus_client_t *c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, errsz);
    if (!c)
        return FSGD_E_KAFKA;
    asm_all_t *all = calloc(1, sizeof *all);
    int rc = all ? 0 : fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
    if (all) {
        all->max_step = o->max_step;
        all->auth = fsgd_bus_auth(bus);
        all->pairs = o->pairs != NULL;
        all->out = o->pairs;
    }
    /* a partition a shard (one unsharded) */
    int P = rc ? 0 : fsgd_bus_partitions(c, topic, 10000, err, errsz);
    if (P < 0)
        rc = P;
    topic_ctx_t t = {all};
    for (int p = 0; !rc && p < P && p < FSGD_SHARDS_MAX; p++) {
        int64_t lo = 0, hi = 0;
        rc = fsgd_bus_watermarks(c, topic, p, &lo, &hi, 10000, err, errsz);
        /* A log start past 0 is fine here: the snapshots are there for it.
         * NAME.model is compacted on real clusters: offsets may skip */
        if (!rc && hi > lo)
            rc = fsgd_bus_read_range(c,
                                     &(fsgd_bus_range_t){.topic = topic, .partition = p, .start = lo, .end = hi,
                                                         .timeout_ms = 30000, .mode = FSGD_BUS_READ_COMPACTED,
                                                         .fn = topic_msg, .ctx = &t},
                                     err, errsz);
    }
    if (!rc)
        rc = finish(all, o->require_final, m, step, err, errsz);
    else if (all)
        free_all(all), fsgd_model_free(m);
    free(all);
    fsgd_bus_client_destroy(c);
    return rc;
}

int fsgd_model_assemble_topic(struct fsgd_bus *bus, const char *job, int require_final, fsgd_model_t *m,
                              uint64_t *step, char *err, size_t errsz)
{
    const asm_opts_t o = {.require_final = require_final, .max_step = UINT64_MAX};
    return assemble_topic(bus, job, &o, m, step, err, errsz);
}

int fsgd_model_assemble_topic_pairs(struct fsgd_bus *bus, const char *job, int require_final, fsgd_model_t *m,
                                    fsgd_sparse_t *w, uint64_t *step, char *err, size_t errsz)
{
    const asm_opts_t o = {.require_final = require_final, .max_step = UINT64_MAX, .pairs = w};
    return assemble_topic(bus, job, &o, m, step, err, errsz);
}

int fsgd_model_assemble_topic_upto(struct fsgd_bus *bus, const char *job, uint64_t max_step, fsgd_model_t *m,
                                   uint64_t *step, char *err, size_t errsz)
{
    const asm_opts_t o = {.max_step = max_step};
    return assemble_topic(bus, job, &o, m, step, err, errsz);
}

/* --- following the topic: reads on from where the last read ended --- */

struct fsgd_model_follow {
    fsgd_bus_client_t *c;
    char topic[300];
    asm_all_t *all; /* the assembler's state after the frames read; NULL: read from the log start */
    int nparts;
    int64_t next[FSGD_SHARDS_MAX]; /* per partition: the next offset to read */
};

fsgd_model_follow_t *fsgd_model_follow_new(struct fsgd_bus *bus, const char *job, char *err, size_t errsz)
{
    fsgd_model_follow_t *f = calloc(1, sizeof *f);
    if (!f) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
        return NULL;
    }
    if (!(f->c = fsgd_bus_client_new(bus, FSGD_KCLIENT_CONSUMER, err, errsz))) {
        free(f);
        return NULL;
    }
    fsgd_kbus_topic(f->topic, sizeof f->topic, job, "model");
    return f;
}

static void follow_reset(fsgd_model_follow_t *f)
{
    if (f->all) {
        free_all(f->all);
        free(f->all);
        f->all = NULL;
    }
}

void fsgd_model_follow_free(fsgd_model_follow_t *f)
{
    if (!f)
        return;
    follow_reset(f);
    fsgd_bus_client_destroy(f->c);
    free(f);
}

/* The model the state holds now, copied into *m (the state is kept). */
static int follow_copy(asm_all_t *all, fsgd_model_t *m, uint64_t *step, char *err, size_t errsz)
{
    const asm_state_t *s = &all->sh[0];
    for (int i = 1; i < FSGD_SHARDS_MAX; i++)
        if (all->sh[i].have)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "model topic: snapshots from sender %d of a job that is not sharded", i);
    if (!s->have)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "model topic: no complete snapshot found");
    if (fsgd_model_init(m, s->m.kind, s->m.dim, s->m.has_bias, s->m.bias) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory for %llu weights",
                            (unsigned long long)s->m.dim);
    size_t bytes = (size_t)(s->m.dim + 1) * sizeof *m->w;
    fsgd_hugepages_advise(m->w, bytes); /* every page is written: 512 times fewer faults */
    memcpy(m->w, s->m.w, bytes);
    memcpy(m->input, s->m.input, sizeof m->input);
    *step = s->step;
    if (all->unauth)
        fsgd_err_fmt(err, errsz, 0, "skipped %llu messages without this job key's tag",
                     (unsigned long long)all->unauth);
    return 0;
}

int fsgd_model_follow_read(fsgd_model_follow_t *f, fsgd_model_t *m, uint64_t *step, int *whole, char *err,
                           size_t errsz)
{
    memset(m, 0, sizeof *m);
    *whole = 0;
    int P = fsgd_bus_partitions(f->c, f->topic, 10000, err, errsz);
    if (P < 0)
        return P;
    if (P > FSGD_SHARDS_MAX)
        P = FSGD_SHARDS_MAX; /* as the whole read: the senders' partitions */
    int64_t lo[FSGD_SHARDS_MAX], hi[FSGD_SHARDS_MAX];
    for (int p = 0; p < P; p++)
        FSGD_TRY(fsgd_bus_watermarks(f->c, f->topic, p, &lo[p], &hi[p], 10000, err, errsz));
    /* From the log start again: the first read, other partitions, or
     * frames not read yet gone (deleted, compacted past) or a topic made
     * again (its end before where the last read ended). */
    int restart = !f->all || P != f->nparts;
    for (int p = 0; p < P && !restart; p++)
        restart = f->next[p] < lo[p] || f->next[p] > hi[p];
    if (restart) {
        follow_reset(f);
        if (!(f->all = calloc(1, sizeof *f->all)))
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "assemble: out of memory");
        f->all->max_step = UINT64_MAX;
        f->all->auth = fsgd_bus_client_auth(f->c);
        f->nparts = P;
        memcpy(f->next, lo, (size_t)P * sizeof *lo);
        *whole = 1;
    }
    topic_ctx_t t = {f->all};
    int rc = 0;
    for (int p = 0; p < P && !rc; p++) {
        if (hi[p] > f->next[p])
            rc = fsgd_bus_read_range(f->c,
                                     &(fsgd_bus_range_t){.topic = f->topic, .partition = p, .start = f->next[p],
                                                         .end = hi[p], .timeout_ms = 30000,
                                                         .mode = FSGD_BUS_READ_COMPACTED, .fn = topic_msg, .ctx = &t},
                                     err, errsz);
        f->next[p] = hi[p];
    }
    /* A sharded job's shards are joined by taking their state apart: read
     * whole every time (as before); so is a read that failed half-way. */
    if (!rc && f->all->sh[0].have && f->all->sh[0].shards > 1) {
        rc = finish(f->all, 0, m, step, err, errsz);
        free(f->all);
        f->all = NULL;
        return rc;
    }
    if (!rc)
        rc = follow_copy(f->all, m, step, err, errsz);
    if (rc < 0)
        follow_reset(f);
    return rc;
}
