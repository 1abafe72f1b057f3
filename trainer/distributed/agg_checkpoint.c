/* The aggregator's checkpoint file: everything a restarted aggregator needs
 * to go on from the last snapshot step (trainer/KAFKA_FORMAT.md). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agg_ckpt.h"
#include "agg_follow.h"
#include "fsgd/ckpt_set.h"
#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/le.h"
#include "fsgd/loss.h"
#include "fsgd/outfile.h"
#include "fsgd/shard.h"

/* --- checkpoints --- */

/* A magic of its own: version 1 began with "FSGC", the codec messages' magic,
 * so a checkpoint and a gradient could not be told apart by their first
 * bytes. Version 1 files are refused with a message that says so. */
#define CKPT_MAGIC "FSGDCKPT"
/* Version 3 (main): each key's Adam update count after v (u16 each), when
 * Adam counts keys (lr auto). Versions 4 and 5: 2 and 3 with the model kind
 * and intercept after everything (u32 each), so --resume of a job with
 * another --model is refused. 2 and 3 are still read. */
#define CKPT_VERSION 4
#define CKPT_VERSION_COUNTS 5
#define CKPT_VERSION_OLD 2
#define CKPT_VERSION_OLD_COUNTS 3
/* Versions 6 and 7: 4 and 5 of a follow job, with its section after
 * everything (agg_follow_ckpt_put): the version number, the progressive
 * loss, the rows seen and the rows trained per partition. A follow job's
 * windows move on with the topic, so its ranges are not checked against a
 * new scan; the windows are checked against the topic instead. */
#define CKPT_FOLLOW_SHIFT 2
/* Versions 8 to 11: 4 to 7 with the file's identity right after the header
 * (u32 shard, u32 shards, u8 job name length, the name's bytes), so a shard
 * file renamed to another shard's name, or a file of another job, is
 * refused instead of trained on (a swapped PATH and PATH.shard1 of the same
 * size used to resume silently with each shard's weights in the other). */
#define CKPT_IDENT_SHIFT 4
#define CKPT_VERSION_IDENT (CKPT_VERSION + CKPT_IDENT_SHIFT)
/* Versions 12 and 13: 8 and 9 of a shard with a sparse table (job key
 * table; never a follow job's): after the epochs, u64 keys and the keys
 * (u32 each, in slot order), then θ, the optimizer's arrays and the counts
 * of those keys only, in slot order. */
#define CKPT_SPARSE_SHIFT 4
#define CKPT_VERSION_SPARSE (CKPT_VERSION_IDENT + CKPT_SPARSE_SHIFT)
#define CKPT_VERSION_MAX (CKPT_VERSION_COUNTS + CKPT_IDENT_SHIFT + CKPT_SPARSE_SHIFT)
#define CKPT_HEADER 40 /* magic, version, gen, step, rows, weights */
#define CKPT_JOB_MAX 63

/* Where checkpoint bytes go: appended to a buffer (b), or written to a file
 * (fd) as they come, with the CRC kept on the way: a checkpoint is 16 bytes
 * a weight, and building it whole first doubled the aggregator's peak
 * memory (a shard's at 2^26 / 4: +270 MB). */
typedef struct ckpt_sink {
    fsgd_wire_buf_t *b;
    int fd;
    uint32_t crc;
    int rc;
    char *err;
    size_t errsz;
} ckpt_sink_t;

static void sink_put(ckpt_sink_t *k, const void *p, size_t n)
{
    if (k->rc || !n)
        return;
    if (k->b) {
        if (fsgd_wire_put(k->b, p, n))
            k->rc = FSGD_E_NOMEM;
        return;
    }
    k->crc = fsgd_crc32c(k->crc, p, n);
    const uint8_t *q = p;
    while (n) {
        ssize_t w = write(k->fd, q, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            k->rc = fsgd_err_fmt(k->err, k->errsz, FSGD_E_IO, "write failed: %s", strerror(errno));
            return;
        }
        q += w;
        n -= (size_t)w;
    }
}

/* A small part built in a buffer, then sent to the sink. */
static void sink_buf(ckpt_sink_t *k, fsgd_wire_buf_t *part, int rc)
{
    if (rc && !k->rc)
        k->rc = FSGD_E_NOMEM;
    sink_put(k, part->p, part->n);
    part->n = 0;
}

/* The checkpoint bytes of ctx's state (seconds: training time so far; env->s:
 * the run's counters and epochs) into the sink, its CRC32C last. */
static int ckpt_encode_to(const agg_ckpt_ctx_t *ctx, const agg_env_t *env, double seconds, ckpt_sink_t *k)
{
    int counted = ctx->model->adam.keys != NULL;
    /* the aggregator writes the current versions; a re-encode of a read file
     * (fsgd_agg_ckpt_check) writes its version back */
    uint32_t version = ctx->job ? (counted ? CKPT_VERSION_COUNTS : CKPT_VERSION) : ctx->ckpt->version;
    const fsgd_sparse_table_t *table = ctx->model->table;
    if (!ctx->job && version >= CKPT_VERSION_SPARSE)
        version -= CKPT_SPARSE_SHIFT;
    if (ctx->job && *ctx->follow)
        version += CKPT_FOLLOW_SHIFT;
    if (ctx->job)
        version += CKPT_IDENT_SHIFT;
    const uint32_t ident = version >= CKPT_VERSION_IDENT;
    if (ident)
        version -= CKPT_IDENT_SHIFT;
    const uint32_t follow_v = version > CKPT_VERSION_COUNTS;
    fsgd_wire_buf_t part = {0};
    fsgd_wire_buf_t *b = &part;
    if (table && (!ident || follow_v))
        return FSGD_E_STATE; /* a sparse table is a shard's, never a follow job's (agg_table_choose) */
    int rc = fsgd_wire_put(b, CKPT_MAGIC, 8) |
             fsgd_wire_u32(b, version + (ident ? CKPT_IDENT_SHIFT : 0) + (table ? CKPT_SPARSE_SHIFT : 0)) |
             fsgd_wire_u32(b, *ctx->gen) | fsgd_wire_u64(b, *ctx->step) | fsgd_wire_u64(b, env->s->dataset_rows) |
             fsgd_wire_u64(b, ctx->mdim);
    if (ident) {
        const char *job = ctx->job ? ctx->job->dist->name : ctx->ckpt->job;
        size_t jn = strlen(job) > CKPT_JOB_MAX ? CKPT_JOB_MAX : strlen(job);
        uint8_t n8 = (uint8_t)jn;
        rc |= fsgd_wire_u32(b, ctx->job ? ctx->shard : ctx->ckpt->shard) |
              fsgd_wire_u32(b, ctx->job ? ctx->shards : ctx->ckpt->shards) | fsgd_wire_put(b, &n8, 1) |
              fsgd_wire_put(b, job, jn);
    }
    rc |= fsgd_wire_state_put(b, ctx->st) |
             fsgd_wire_u64(b, ctx->model->adam.t) | fsgd_wire_u64(b, ctx->open->rows_epoch) |
             fsgd_wire_f64(b, ctx->open->loss_epoch) |
             fsgd_wire_u64(b, env->s->rows_total) | fsgd_wire_f64(b, seconds) |
             fsgd_wire_u32(b, (uint32_t)env->s->n_epochs);
    for (int i = 0; i < env->s->n_epochs; i++) {
        const fsgd_agg_epoch_t *e = &env->s->epochs[i];
        rc |= fsgd_wire_u32(b, (uint32_t)e->epoch) | fsgd_wire_f64(b, e->seconds) | fsgd_wire_f64(b, e->train_loss) |
              fsgd_wire_u64(b, e->rows) | fsgd_wire_u64(b, e->test.n) | fsgd_wire_f64(b, e->test.auc) |
              fsgd_wire_f64(b, e->test.logloss) | fsgd_wire_f64(b, e->test.loss) | fsgd_wire_f64(b, e->test.accuracy);
    }
    /* a sparse table: its keys, then its arrays as long as they are */
    const uint64_t held = table ? fsgd_sparse_table_size(table) : ctx->mdim;
    if (table)
        rc |= fsgd_wire_u64(b, held);
    sink_buf(k, b, rc);
    if (table)
        sink_put(k, fsgd_sparse_table_keys(table), held * 4);
    sink_put(k, ctx->model->adam.theta, held * 4);
    if (!counted) {
        sink_put(k, ctx->model->adam.m, held * 4);
        sink_put(k, ctx->model->adam.v, held * 4);
    }
    /* the per-key state, little-endian, a block at a time */
    enum { BLOCK = 16384 };
    uint8_t blk[BLOCK * 4];
    for (int arr = 0; counted && arr < 3; arr++)
        for (uint64_t i = 0; i < held; i += BLOCK) {
            uint64_t n = held - i < BLOCK ? held - i : BLOCK;
            for (uint64_t j = 0; j < n; j++) {
                const fsgd_adam_key_t *key = &ctx->model->adam.keys[i + j];
                if (arr == 2)
                    fsgd_le_put16(blk + 2 * j, (uint16_t)key->count);
                else
                    fsgd_le_putf32(blk + 4 * j, arr == 0 ? key->m : key->v);
            }
            sink_put(k, blk, n * (arr == 2 ? 2 : 4));
        }
    rc = 0;
    if (version >= CKPT_VERSION)
        rc |= fsgd_wire_u32(b, ctx->job ? (uint32_t)ctx->job->train->model : ctx->ckpt->model) |
              fsgd_wire_u32(b, ctx->job ? (ctx->job->train->bias ? 1u : 0u) : ctx->ckpt->bias);
    if (follow_v && !rc)
        rc = agg_follow_ckpt_put(*ctx->follow, b);
    sink_buf(k, b, rc);
    if (k->b && !k->rc) /* a buffer's CRC is over all of it */
        k->crc = fsgd_crc32c(0, k->b->p, k->b->n);
    uint8_t crc[4];
    fsgd_le_put32(crc, k->crc);
    if (k->b) {
        if (!k->rc && fsgd_wire_put(k->b, crc, 4))
            k->rc = FSGD_E_NOMEM;
    } else {
        sink_put(k, crc, 4);
    }
    free(part.p);
    return k->rc;
}

/* The checkpoint bytes of ctx's state into *b (fsgd_agg_ckpt_check's re-encode). */
static int ckpt_encode(const agg_ckpt_ctx_t *ctx, const agg_env_t *env, double seconds, fsgd_wire_buf_t *b)
{
    ckpt_sink_t k = {.b = b, .fd = -1};
    return ckpt_encode_to(ctx, env, seconds, &k) ? FSGD_E_NOMEM : 0;
}

/* A checkpoint is 16 or more bytes a weight, written and synced: tens of
 * milliseconds at 2^20 weights, seconds at 2^24. Written at every snapshot
 * (every 100 steps on the embedded cluster) it was most of the aggregator's
 * time on small steps; paced by its own cost it takes at most 1/20 of the
 * run, and a crash loses at most about 20 times that much progress (a small
 * model's first checkpoint comes with the first snapshot; at 2^24 weights
 * only after about half a minute of training). */
int fsgd_agg_ckpt_due(double since_last_s, double last_cost_s)
{
    return since_last_s >= FSGD_AGG_CKPT_COST_RATIO * last_cost_s;
}

int agg_ckpt_due(const agg_ckpt_state_t *c, double t0, uint64_t mdim, uint32_t shards)
{
    /* a sharded job's shards checkpoint at the same steps (every snapshot
     * and epoch end), so a restart finds one step that all of them have */
    if (shards > 1)
        return 1;
    if (c->n)
        return fsgd_agg_ckpt_due(agg_now() - c->at, c->cost);
    /* θ, Adam's m and v (or FTRL's z and n), per-key counts: 16 bytes a weight */
    return fsgd_agg_ckpt_due(agg_now() - t0, 16.0 * (double)mdim / FSGD_AGG_CKPT_EST_BYTES_S);
}

void agg_ckpt_path(const fsgd_dist_job_t *job, uint32_t shard, char *out, size_t cap)
{
    fsgd_ckpt_set_path(job->dist->checkpoint, shard, 0, out, cap);
}

int agg_ckpt_write(const agg_ckpt_ctx_t *ctx, const agg_env_t *env)
{
    char path[FSGD_JOB_PATH_MAX + 16], prev[FSGD_JOB_PATH_MAX + 24];
    if (!ctx->job->dist->checkpoint[0])
        return 0;
    agg_ckpt_path(ctx->job, ctx->shard, path, sizeof path);
    /* a shard keeps the one before as PATH.prev (another shard may not have
     * written this step's), retired only once the new one is durable */
    snprintf(prev, sizeof prev, "%s.prev", path);
    double t0 = agg_now();
    /* Through fsgd/outfile.h: a temporary file renamed into place, never over
     * a device or through a link; removed on any error. The bytes go
     * straight to it (ckpt_sink_t). */
    fsgd_outfile_t o;
    char e[FSGD_OUTFILE_PATH_MAX + 256];
    int rc = fsgd_outfile_open(&o, path, e, sizeof e);
    if (rc == 0) {
        ckpt_sink_t k = {.fd = o.fd, .err = e, .errsz = sizeof e};
        rc = ckpt_encode_to(ctx, env, ctx->clock->seconds_before + agg_now() - ctx->clock->t0, &k);
        if (rc == FSGD_E_NOMEM)
            snprintf(e, sizeof e, "out of memory");
        if (rc == 0)
            rc = ctx->shards > 1 ? fsgd_outfile_commit_keep(&o, prev, e, sizeof e)
                                 : fsgd_outfile_commit(&o, e, sizeof e);
        else
            fsgd_outfile_abort(&o);
    }
    if (rc < 0)
        return fsgd_err_fmt(env->err, env->errsz, rc, "checkpoint: %s", e);
    ctx->ckpt->n++;
    ctx->ckpt->at = agg_now();
    ctx->ckpt->cost = ctx->ckpt->at - t0;
    env->s->checkpoints = ctx->ckpt->n;
    env->s->checkpoint_s += ctx->ckpt->cost;
    return 0;
}

/* A file version's parts: the base version (2 to 5) and whether it has the
 * writer's identity, a follow section, a sparse table. */
static void ckpt_version_parts(uint32_t file_version, uint32_t *base, int *ident, int *follow, int *sparse)
{
    *sparse = file_version >= CKPT_VERSION_SPARSE;
    *ident = file_version >= CKPT_VERSION_IDENT;
    const uint32_t v = file_version - (*ident ? CKPT_IDENT_SHIFT : 0) - (*sparse ? CKPT_SPARSE_SHIFT : 0);
    *follow = v > CKPT_VERSION_COUNTS;
    *base = *follow ? v - CKPT_FOLLOW_SHIFT : v;
}

/* The file version has Adam's per-key counts (lr auto). */
static int ckpt_version_counted(uint32_t file_version)
{
    uint32_t base;
    int ident, follow, sparse;
    ckpt_version_parts(file_version, &base, &ident, &follow, &sparse);
    return base == CKPT_VERSION_COUNTS || base == CKPT_VERSION_OLD_COUNTS;
}

/* A checkpoint being read: its bytes, where the reader is, and what its
 * header said (ckpt_parse's parts fill it in file order). */
typedef struct ckpt_in {
    const char *path;
    const uint8_t *p;
    size_t len, off;
    uint32_t file_version, version, gen;
    int ident, follow_v, counted, sparse;
    uint64_t step, rows, mdim;
    char *err; /* the reader's error buffer */
    size_t errsz;
} ckpt_in_t;

static int ckpt_truncated(const ckpt_in_t *c)
{
    return fsgd_err_fmt(c->err, c->errsz, FSGD_E_TRUNCATED, "checkpoint '%s': truncated at byte %zu", c->path, c->off);
}

/* The magic, the version and what it encodes (follow, per-key counts), the
 * crc, the header's counts; c->len then excludes the crc. */
static int ckpt_read_header(const agg_ckpt_ctx_t *ctx, const agg_env_t *env, ckpt_in_t *c)
{
    const uint8_t *p = c->p;
    const char *path = c->path;
    if (p && c->len >= 8 && !memcmp(p, "FSGC", 4) && fsgd_le_get32(p + 4) == 1)
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_VERSION,
                            "checkpoint '%s' is in the version 1 format (magic FSGC) of an older fsgd; this one reads "
                            "version %d (magic %s): finish that job with the fsgd that wrote it, or remove the file "
                            "to start over (fsgd run --fresh)",
                            path, CKPT_VERSION, CKPT_MAGIC);
    c->file_version = p && c->len >= 12 ? fsgd_le_get32(p + 8) : 0;
    if (!p || c->len < CKPT_HEADER + 4 || memcmp(p, CKPT_MAGIC, 8) || c->file_version < CKPT_VERSION_OLD ||
        c->file_version > CKPT_VERSION_MAX)
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_FORMAT, "checkpoint '%s': not an fsgd checkpoint (v%d to v%d)",
                            path, CKPT_VERSION_OLD, CKPT_VERSION_MAX);
    ckpt_version_parts(c->file_version, &c->version, &c->ident, &c->follow_v, &c->sparse);
    if (ctx->job && c->follow_v != (*ctx->follow != NULL))
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_ARG,
                            "checkpoint '%s' was written by a job %s follow; this one runs %s it: resume it the way it "
                            "ran, or start over (fsgd run --fresh)",
                            path, c->follow_v ? "with" : "without", *ctx->follow ? "with" : "without");
    if (ctx->job && c->sparse != (ctx->model->table != NULL))
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_ARG,
                            "checkpoint '%s' was written by a shard with a %s table; this one has a %s table: resume "
                            "with --table %s, or start over (fsgd run --fresh)",
                            path, c->sparse ? "sparse" : "dense", ctx->model->table ? "sparse" : "dense",
                            c->sparse ? "sparse" : "dense");
    c->counted = c->version == CKPT_VERSION_COUNTS || c->version == CKPT_VERSION_OLD_COUNTS;
    if (c->counted != (ctx->model->adam.keys != NULL))
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_STATE,
                            "checkpoint '%s' was written with %s, this job has %s: resume with the lr it was written "
                            "with",
                            path, c->counted ? "lr auto (per-key Adam counts)" : "an explicit lr",
                            ctx->model->adam.keys ? "lr auto" : "an explicit lr");
    if (fsgd_le_get32(p + c->len - 4) != fsgd_crc32c(0, p, c->len - 4))
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_CRC, "checkpoint '%s': crc32c mismatch at byte %zu", path,
                            c->len - 4);
    c->len -= 4;
    c->gen = fsgd_le_get32(p + 12);
    c->step = fsgd_le_get64(p + 16);
    c->rows = fsgd_le_get64(p + 24);
    c->mdim = fsgd_le_get64(p + 32);
    c->off = CKPT_HEADER;
    return 0;
}

/* Which shard of which job wrote it, into k: a file under another shard's
 * name (swapped by hand) or of another job is refused, not trained on (job
 * NULL: no job to check it against, fsgd_agg_ckpt_check). */
static int ckpt_read_ident(ckpt_in_t *c, agg_ckpt_state_t *k, const char *job, uint32_t shard, uint32_t shards)
{
    const uint8_t *p = c->p;
    const char *path = c->path;
    size_t off = c->off;
    if (c->len - off < 9 || c->len - off - 9 < p[off + 8])
        return ckpt_truncated(c);
    k->shard = fsgd_le_get32(p + off);
    k->shards = fsgd_le_get32(p + off + 4);
    size_t jn = p[off + 8];
    if (jn > CKPT_JOB_MAX || k->shards == 0 || k->shard >= k->shards)
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_FORMAT,
                            "checkpoint '%s': shard %u of %u, job name of %zu bytes at byte %zu", path, k->shard,
                            k->shards, jn, off);
    memcpy(k->job, p + off + 9, jn);
    k->job[jn] = '\0';
    c->off = off + 9 + jn;
    if (job && k->shards != shards)
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_ARG,
                            "checkpoint '%s' was written by a job with %u aggregator shard%s (as shard %u); this one "
                            "has %u: resume with --shards %u, or start over (fsgd run --fresh)",
                            path, k->shards, k->shards == 1 ? "" : "s", k->shard, shards, k->shards);
    if (job && k->shard != shard)
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_ARG,
                            "checkpoint '%s' was written by aggregator shard %u of %u; this is shard %u of %u: "
                            "put each shard's file back under its own name, or start over (fsgd run --fresh)",
                            path, k->shard, k->shards, shard, shards);
    if (job && strcmp(k->job, job) != 0)
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_ARG,
                            "checkpoint '%s' was written by job '%s'; this job is '%s': resume it with --name %s, "
                            "or start over (fsgd run --fresh)",
                            path, k->job, job, k->job);
    return 0;
}

/* The same data as the topic (rows, weights, partitions and their ranges).
 * A checkpoint of another job is the user's mistake (--resume), not
 * fsgd's: FSGD_E_ARG, exit 2. */
static int ckpt_check_data(const agg_ckpt_ctx_t *ctx, const agg_env_t *env, ckpt_in_t *c, fsgd_wire_state_t *s)
{
    const char *path = c->path;
    char e[256];
    int rc;
    /* the same data, but written by a job with another number of shards:
     * say so (its part of the model has another size) */
    for (uint32_t S = 1;
         ctx->job && c->rows == env->s->dataset_rows && c->mdim != ctx->mdim && S <= FSGD_SHARDS_MAX; S++)
        if (S != ctx->shards && ctx->shard < S && fsgd_shard_dim(ctx->gweights, ctx->shard, S) == c->mdim)
            return fsgd_err_fmt(env->err, env->errsz, FSGD_E_ARG,
                                "checkpoint '%s' was written by a job with %u aggregator shard%s (%llu weights here); "
                                "this one has %u: resume with --shards %u, or start over (fsgd run --fresh)",
                                path, S, S == 1 ? "" : "s", (unsigned long long)c->mdim, ctx->shards, S);
    if ((!c->follow_v && c->rows != env->s->dataset_rows) || c->mdim != ctx->mdim)
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_ARG,
                            "checkpoint '%s' is for other data (%llu rows, %llu weights; topic has %llu rows, %llu "
                            "weights): resume with the data it was written for, or start over (fsgd run --fresh)",
                            path, (unsigned long long)c->rows, (unsigned long long)c->mdim,
                            (unsigned long long)env->s->dataset_rows, (unsigned long long)ctx->mdim);
    if ((rc = fsgd_wire_state_get(c->p, c->len, &c->off, s, e, sizeof e)) < 0)
        return fsgd_err_fmt(env->err, env->errsz, rc, "checkpoint '%s': %s", path, e);
    if (s->nparts != ctx->st->nparts)
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_ARG, "checkpoint '%s': %u partitions, topic has %u", path,
                            s->nparts, ctx->st->nparts);
    for (uint32_t i = 0; i < s->nparts && !c->follow_v; i++)
        if (s->start[i] != ctx->st->start[i] || s->end[i] != ctx->st->end[i])
            return fsgd_err_fmt(env->err, env->errsz, FSGD_E_ARG, "checkpoint '%s': partition %u range differs",
                                path, i);
    return 0;
}

/* The run's counters (into env->s, ctx's open step and clock) and every
 * epoch's record; *t is Adam's step count. */
static int ckpt_read_progress(const agg_ckpt_ctx_t *ctx, const agg_env_t *env, ckpt_in_t *c, uint64_t *t)
{
    const uint8_t *p = c->p;
    if (c->len - c->off < 8 + 8 + 8 + 8 + 8 + 4)
        return ckpt_truncated(c);
    size_t off = c->off;
    *t = fsgd_le_get64(p + off);
    ctx->open->rows_epoch = fsgd_le_get64(p + off + 8);
    ctx->open->loss_epoch = fsgd_le_getf64(p + off + 16);
    env->s->rows_total = fsgd_le_get64(p + off + 24);
    ctx->clock->seconds_before = fsgd_le_getf64(p + off + 32);
    uint32_t ne = fsgd_le_get32(p + off + 40);
    c->off = off += 44;
    /* the weights' bytes: a sparse table's are counted once its keys are read */
    if (c->len - off <
        (uint64_t)ne * 68 + (c->sparse ? 8 : ctx->mdim * (c->counted ? 14 : 12)) + (c->version >= CKPT_VERSION ? 8 : 0))
        return ckpt_truncated(c);
    /* every epoch of the run (bounded by the bytes above, 68 each) */
    env->s->n_epochs = 0;
    for (uint32_t i = 0; i < ne; i++, env->s->n_epochs++) {
        fsgd_agg_epoch_t *ep = fsgd_agg_epoch_next(env->s);
        if (!ep)
            return fsgd_err_fmt(env->err, env->errsz, FSGD_E_NOMEM, "checkpoint '%s': out of memory", c->path);
        ep->epoch = (int)fsgd_le_get32(p + off);
        ep->seconds = fsgd_le_getf64(p + off + 4);
        ep->train_loss = fsgd_le_getf64(p + off + 12);
        ep->rows = fsgd_le_get64(p + off + 20);
        ep->test.n = (size_t)fsgd_le_get64(p + off + 28);
        ep->test.auc = fsgd_le_getf64(p + off + 36);
        ep->test.logloss = fsgd_le_getf64(p + off + 44);
        ep->test.loss = fsgd_le_getf64(p + off + 52);
        ep->test.accuracy = fsgd_le_getf64(p + off + 60);
        ep->seconds_from_step1 = -1; /* measured by the aggregator before the restart */
        off += 68;
    }
    c->off = off;
    return 0;
}

/* A sparse table's keys (u64 n, then n keys in slot order) into table, and
 * adam grown to hold them: *n. Each key once, below mdim. */
static int ckpt_read_keys(ckpt_in_t *c, fsgd_sparse_table_t *table, fsgd_adam_t *adam, uint64_t mdim, uint64_t *n)
{
    const uint8_t *p = c->p;
    size_t off = c->off;
    uint64_t keys = fsgd_le_get64(p + off);
    off += 8;
    if (keys > mdim)
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_FORMAT, "checkpoint '%s': %llu keys of %llu weights at byte %zu",
                            c->path, (unsigned long long)keys, (unsigned long long)mdim, off - 8);
    if (c->len - off < keys * (c->counted ? 18 : 16) + (c->version >= CKPT_VERSION ? 8 : 0))
        return ckpt_truncated(c);
    uint32_t *list = malloc((keys ? keys : 1) * sizeof *list);
    if (!list)
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_NOMEM, "checkpoint '%s': out of memory for %llu keys", c->path,
                            (unsigned long long)keys);
    for (uint64_t i = 0; i < keys; i++) {
        list[i] = fsgd_le_get32(p + off + 4 * i);
        if (list[i] >= mdim) {
            free(list);
            return fsgd_err_fmt(c->err, c->errsz, FSGD_E_FORMAT, "checkpoint '%s': key %u >= %llu weights at byte %zu",
                                c->path, fsgd_le_get32(p + off + 4 * i), (unsigned long long)mdim, off + 4 * i);
        }
    }
    size_t bad = 0;
    int rc = fsgd_sparse_table_load(table, adam, list, keys, &bad);
    free(list);
    if (rc == FSGD_E_FORMAT)
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_FORMAT, "checkpoint '%s': key %u twice, at byte %zu", c->path,
                            fsgd_le_get32(p + off + 4 * bad), off + 4 * bad);
    if (rc < 0)
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_NOMEM, "checkpoint '%s': out of memory for %llu keys", c->path,
                            (unsigned long long)keys);
    c->off = off + 4 * keys;
    *n = keys;
    return 0;
}

/* θ, the optimizer's two arrays and (lr auto) the per-key counts of mdim
 * keys (a sparse table's: as many as it holds); the sizes were checked. */
static int ckpt_read_weights(ckpt_in_t *c, fsgd_adam_t *adam, uint64_t mdim)
{
    const uint8_t *p = c->p;
    size_t off = c->off;
    for (uint64_t i = 0; i < mdim; i++, off += 4)
        adam->theta[i] = fsgd_le_getf32(p + off);
    for (int arr = 1; arr < 3; arr++)
        for (uint64_t i = 0; i < mdim; i++, off += 4) {
            float x = fsgd_le_getf32(p + off);
            if (c->counted && arr == 1)
                adam->keys[i].m = x;
            else if (c->counted)
                adam->keys[i].v = x;
            else
                (arr == 1 ? adam->m : adam->v)[i] = x;
        }
    for (uint64_t i = 0; c->counted && i < mdim; i++, off += 2) {
        uint16_t n = fsgd_le_get16(p + off);
        if (n > FSGD_ADAM_COUNT_MAX)
            return fsgd_err_fmt(c->err, c->errsz, FSGD_E_FORMAT,
                                "checkpoint '%s': key %llu count %u at byte %zu > %d", c->path,
                                (unsigned long long)i, n, off, FSGD_ADAM_COUNT_MAX);
        adam->keys[i].count = n;
    }
    c->off = off;
    return 0;
}

/* The model kind and intercept it was written for (version 4 on), into k;
 * refused when train (not NULL) is another. */
static int ckpt_read_model_kind(ckpt_in_t *c, agg_ckpt_state_t *k, const fsgd_train_params_t *train)
{
    if (c->version < CKPT_VERSION)
        return 0;
    k->model = fsgd_le_get32(c->p + c->off);
    k->bias = fsgd_le_get32(c->p + c->off + 4);
    c->off += 8;
    if (train && (k->model != (uint32_t)train->model || k->bias != (train->bias ? 1u : 0u)))
        return fsgd_err_fmt(c->err, c->errsz, FSGD_E_ARG,
                            "checkpoint '%s' was written by a %s job%s; this job is %s%s: resume with the same "
                            "--model, or start over (fsgd run --fresh)",
                            c->path, fsgd_loss_name((fsgd_loss_kind_t)k->model),
                            k->bias ? " with an intercept" : " without an intercept",
                            fsgd_loss_name(train->model), train->bias ? " with an intercept" : " without an intercept");
    return 0;
}

/* Restores a checkpoint written for the same data from its bytes p[0, len)
 * (path names it in messages); returns 1 when resumed. ctx's state is
 * changed only as far as the bytes were read. */
static int ckpt_parse(const agg_ckpt_ctx_t *ctx, const agg_env_t *env, const char *path, const uint8_t *p, size_t len)
{
    ckpt_in_t c = {.path = path, .p = p, .len = len, .err = env->err, .errsz = env->errsz};
    fsgd_wire_state_t s = {0};
    uint64_t t = 0;
    int rc = ckpt_read_header(ctx, env, &c);
    if (rc == 0 && c.ident)
        rc = ckpt_read_ident(&c, ctx->ckpt, ctx->job ? ctx->job->dist->name : NULL, ctx->shard, ctx->shards);
    if (rc == 0)
        rc = ckpt_check_data(ctx, env, &c, &s);
    if (rc == 0)
        rc = ckpt_read_progress(ctx, env, &c, &t);
    uint64_t held = ctx->mdim;
    if (rc == 0 && c.sparse)
        rc = ctx->model->table ? ckpt_read_keys(&c, ctx->model->table, &ctx->model->adam, ctx->mdim, &held)
                               : FSGD_E_STATE;
    if (rc == 0)
        rc = ckpt_read_weights(&c, &ctx->model->adam, held);
    if (rc == 0)
        rc = ckpt_read_model_kind(&c, ctx->ckpt, ctx->job ? ctx->job->train : NULL);
    /* the windows are checked against the topic once restored
     * (agg_follow_resumed); the section's partition count is the file's state's */
    if (rc == 0 && c.follow_v)
        rc = agg_follow_ckpt_get(ctx->follow, s.nparts, path, p, c.len, &c.off, env);
    if (rc == 0) {
        ctx->ckpt->version = c.file_version;
        if (c.off != c.len) /* the layout is exact: anything more is another format */
            rc = fsgd_err_fmt(env->err, env->errsz, FSGD_E_FORMAT,
                              "checkpoint '%s': %zu bytes past the end at byte %zu", path, c.len - c.off, c.off);
    }
    if (rc == 0) {
        ctx->model->adam.t = t;
        fsgd_wire_state_copy(ctx->st, &s);
        *ctx->step = c.step;
        *ctx->gen = c.gen;
        env->s->resumed_from_step = (int)c.step;
        rc = 1;
    }
    fsgd_wire_state_free(&s);
    return rc;
}

int agg_ckpt_load(const agg_ckpt_ctx_t *ctx, const agg_env_t *env)
{
    char path[FSGD_JOB_PATH_MAX + 24];
    if (!ctx->job->dist->checkpoint[0])
        return 0;
    agg_ckpt_path(ctx->job, ctx->shard, path, sizeof path);
    /* a sharded job restarted as a whole: every shard from the same step
     * (fsgd run finds it: fsgd_ckpt_step of each shard's two files) */
    const char *want = ctx->shards > 1 ? getenv("FSGD_RESUME_STEP") : NULL;
    int from_prev = 0;
    if (want) {
        long long step = atoll(want), cur = fsgd_ckpt_step(path);
        if (step < 0)
            return 0; /* no step every shard has: all start over */
        if (cur != step) {
            size_t n = strlen(path);
            snprintf(path + n, sizeof path - n, ".prev");
            if (fsgd_ckpt_step(path) != step)
                return fsgd_err_fmt(env->err, env->errsz, FSGD_E_STATE,
                                    "shard %u: no checkpoint of step %lld (FSGD_RESUME_STEP) in %s or %s (its newest is "
                                    "step %lld)", ctx->shard, step, ctx->job->dist->checkpoint, path, cur);
            from_prev = 1;
        }
    }
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return 0;
    if (!S_ISREG(sb.st_mode)) /* never read a FIFO or device, never follow a link */
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_ARG, "checkpoint '%s' exists and is not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fsgd_err_fmt(env->err, env->errsz, FSGD_E_IO, "checkpoint '%s': %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = n > 0 ? malloc((size_t)n) : NULL;
    int ok = p && fread(p, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    int rc = ckpt_parse(ctx, env, path, ok ? p : NULL, ok ? (size_t)n : 0);
    free(p);
    if (rc == 1 && from_prev) {
        /* The newer file is of a step no other shard has: it goes, and the
         * one resumed from is PATH again (one rename: there is always a
         * checkpoint). Kept, it would be this shard's .prev after its next
         * checkpoint, a second file of that step from another generation,
         * while the other shards' .prev is this one's step. */
        char cur[FSGD_JOB_PATH_MAX + 24];
        agg_ckpt_path(ctx->job, ctx->shard, cur, sizeof cur);
        if (rename(path, cur) != 0)
            return fsgd_err_fmt(env->err, env->errsz, FSGD_E_IO, "checkpoint: %s -> %s: %s", path, cur,
                                strerror(errno));
    }
    return rc;
}

int fsgd_ckpt_probe(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISREG(sb.st_mode))
        return -1;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t h[8];
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n == 8 && !memcmp(h, CKPT_MAGIC, 8))
        return 1;
    if (n == 8 && !memcmp(h, "FSGC", 4) && fsgd_le_get32(h + 4) == 1)
        return 2;
    return -1;
}

/* The parts a checkpoint restores, for a file read without a job
 * (fsgd_agg_ckpt_check); on the heap: the clock alone is ~64 KB. */
typedef struct ckpt_parts {
    agg_ckpt_state_t ckpt;
    agg_model_state_t model;
    fsgd_wire_state_t st;
    uint32_t gen;
    uint64_t step;
    agg_open_step_t open;
    agg_clock_t clock;
    struct agg_follow *follow;
    fsgd_agg_stats_t s;
} ckpt_parts_t;

int fsgd_agg_ckpt_check(const uint8_t *p, size_t len, uint64_t dataset_rows, uint64_t mdim, const fsgd_wire_state_t *expect,
                   uint8_t **reenc, size_t *reenc_len, char *err, size_t errsz)
{
    if (mdim > ((uint64_t)1 << 32))
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "checkpoint: %llu weights", (unsigned long long)mdim);
    ckpt_parts_t *parts = calloc(1, sizeof *parts);
    if (!parts)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
    /* no job: the file is checked against the data alone, and written back
     * as it was */
    const agg_ckpt_ctx_t ctx = {.ckpt = &parts->ckpt, .model = &parts->model, .st = &parts->st, .gen = &parts->gen,
                                .step = &parts->step, .open = &parts->open, .clock = &parts->clock,
                                .follow = &parts->follow, .mdim = mdim};
    const agg_env_t env = {.err = err, .errsz = errsz, .s = &parts->s};
    int rc = 0;
    fsgd_adam_params_t ap = fsgd_adam_defaults();
    const int sparse = len >= 12 && fsgd_le_get32(p + 8) >= CKPT_VERSION_SPARSE && fsgd_le_get32(p + 8) <= CKPT_VERSION_MAX;
    if (fsgd_adam_init(&parts->model.adam, sparse ? 1 : mdim, &ap) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
    if (!rc && sparse && !(parts->model.table = fsgd_sparse_table_new(1)))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
    /* the Adam mode the file was written in (a restarted aggregator has its job's) */
    if (!rc && len >= 12 && ckpt_version_counted(fsgd_le_get32(p + 8)) && fsgd_adam_count_keys(&parts->model.adam) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
    if (!rc) {
        parts->s.dataset_rows = dataset_rows;
        rc = fsgd_wire_state_copy(&parts->st, expect);
        if (rc < 0)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
    }
    if (!rc)
        rc = ckpt_parse(&ctx, &env, "<memory>", p, len);
    if (rc == 1 && reenc) {
        fsgd_wire_buf_t b = {0};
        if (ckpt_encode(&ctx, &env, parts->clock.seconds_before, &b) < 0) {
            free(b.p);
            rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "checkpoint: out of memory");
        } else {
            *reenc = b.p;
            *reenc_len = b.n;
        }
    }
    fsgd_wire_state_free(&parts->st);
    fsgd_adam_free(&parts->model.adam);
    fsgd_sparse_table_destroy(parts->model.table);
    agg_follow_free(&parts->follow);
    fsgd_agg_stats_free(&parts->s);
    free(parts);
    return rc;
}


long long fsgd_ckpt_step(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return -1;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t h[CKPT_HEADER];
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n != sizeof h || memcmp(h, CKPT_MAGIC, 8))
        return -1;
    uint64_t step = fsgd_le_get64(h + 16);
    return step > (uint64_t)INT64_MAX ? -1 : (long long)step;
}

int fsgd_ckpt_info(const char *path, fsgd_ckpt_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->step = -1;
    int kind = fsgd_ckpt_probe(path);
    if (kind != 1)
        return kind;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t h[CKPT_HEADER + 9 + CKPT_JOB_MAX];
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n < CKPT_HEADER)
        return 1; /* a checkpoint by its magic, cut short: read it to say how */
    uint32_t version = fsgd_le_get32(h + 8);
    uint64_t step = fsgd_le_get64(h + 16);
    info->version = version;
    info->gen = fsgd_le_get32(h + 12);
    info->step = step > (uint64_t)INT64_MAX ? -1 : (long long)step;
    if (version >= CKPT_VERSION_IDENT && version <= CKPT_VERSION_MAX && n >= CKPT_HEADER + 9 &&
        h[CKPT_HEADER + 8] <= CKPT_JOB_MAX && n >= CKPT_HEADER + 9 + (size_t)h[CKPT_HEADER + 8]) {
        info->has_ident = 1;
        info->shard = fsgd_le_get32(h + CKPT_HEADER);
        info->shards = fsgd_le_get32(h + CKPT_HEADER + 4);
        memcpy(info->job, h + CKPT_HEADER + 9, h[CKPT_HEADER + 8]);
        info->job[h[CKPT_HEADER + 8]] = '\0';
    }
    return 1;
}
