/* What the cost model of the CTR regime (tests/bench/lib/cost_model.py)
 * takes from this machine and these data: how a step's keys grow with the
 * workers, what they weigh on the wire, and what each piece of a step costs
 * one core.
 *
 * Data: fsgd gen's CTR rows, 2^24 features, 40 nonzeros a row, Zipf 1.1,
 * seed 1 (tests/bench/dist_vs_local.sh's and bench_agg_capacity's),
 * BENCH_SCALE_ROWS rows (default 2^20). A step of P workers takes P·B
 * consecutive rows, worker i the i-th B of them (as bench_agg_capacity), so
 * one curve holds both key counts the model needs: keys(B), a worker's own
 * (its gradient's keys, and what a working-set worker pulls), and keys(P·B),
 * the step's union (what a full replica receives).
 * Lines:
 *   bench scale_inputs kind=keys rows=N windows=W keys=.. key_bytes=..
 *     up_codec_bytes=..
 *   bench scale_inputs kind=costs batch=B grad_ns_row=.. encode_ns_key=..
 *     keyenc_ns_key=.. apply_ns_key=.. answer_ns_key=.. train1_ns_row=..
 *     batch_ns_row=..
 *   bench scale_inputs kind=start read_ns_row=.. block_rows=..
 * keys: the distinct keys of N consecutive rows; key_bytes: that key list
 * as the wire's keys block (codec/include/fsgd/keys.h), exact;
 * up_codec_bytes: a gradient on them as codec none's message
 * (codec/FORMAT.md), exact.
 * Frame, step-state and body headers are constants the model adds
 * (trainer/KAFKA_FORMAT.md). Costs on one core, warm: grad_ns_row the cpu
 * backend's gradient a row; encode_ns_key codec none's encode a key;
 * keyenc_ns_key a keys block's encode a key; apply_ns_key a replica taking
 * a model delta a key (decode the keys, scatter the values); answer_ns_key
 * a shard answering a pull a key (decode the request's keys, gather the
 * values in their order: the working-set mode of issue 37); train1_ns_row
 * what fsgd train --threads 1 does a row (gradient + Adam on P·B-row steps);
 * batch_ns_row a step's rows copied from the worker's cache into its batch.
 * kind=start, what a worker pays once a job, not a step: read_ns_row a row
 * taken from NAME.data's row blocks (block_rows rows a block, as fsgd's
 * producer cuts them) into its cache (CPU of the calling thread). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/adam.h"
#include "fsgd/backend.h"
#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/gen.h"
#include "fsgd/keys.h"
#include "fsgd/keysort.h"
#include "fsgd/rowblock.h"
#include "fsgd/strategy.h"

#include "bench_ctr_rows.h"

#define DIM ((uint64_t)1 << 24)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The distinct columns of rows [first, first + n), sorted, into keys
 * (stamp: one entry a column, marked with a fresh id). */
static size_t distinct(const fsgd_csr_t *d, size_t first, size_t n, uint32_t *stamp, uint32_t id, uint32_t *keys)
{
    size_t k = 0;
    for (uint64_t j = d->row_ptr[first]; j < d->row_ptr[first + n]; j++)
        if (stamp[d->col[j]] != id) {
            stamp[d->col[j]] = id;
            keys[k++] = d->col[j];
        }
    fsgd_keysort(keys, k);
    return k;
}

typedef struct scratch {
    uint32_t *stamp, *keys, *dec;
    uint8_t *block, *msg;
    float *vals, *replica;
    size_t cap, msg_cap;
    uint32_t id;
} scratch_t;

static size_t key_bytes(scratch_t *s, size_t n)
{
    size_t len = 0;
    char err[128];
    if (fsgd_keys_encode(s->keys, n, s->block, fsgd_keys_bound(n), &len, err, sizeof err) < 0)
        return 0;
    return len;
}

/* kind=keys: the distinct keys of n consecutive rows, averaged over up to
 * 64 disjoint windows (n rows are one worker's step of n rows, or the union
 * of a step of P workers of n / P rows each). */
static int keys_line(const fsgd_csr_t *d, scratch_t *s, size_t n, fsgd_sworker_t *enc)
{
    size_t windows = d->n_rows / n;
    if (windows > 64)
        windows = 64;
    if (!windows)
        return 0;
    double keys = 0, kbytes = 0, up = 0;
    char err[256];
    for (size_t w = 0; w < windows; w++) {
        size_t k = distinct(d, w * n, n, s->stamp, ++s->id, s->keys);
        keys += (double)k;
        kbytes += (double)key_bytes(s, k);
        for (size_t j = 0; j < k; j++)
            s->vals[j] = 1e-3f * (float)(j % 97) - 0.05f; /* gradient-like values; none sends them raw */
        fsgd_outbuf_t msg = {s->msg, s->msg_cap, 0};
        if (fsgd_sworker_encode(enc, s->keys, s->vals, k, n, &msg, err, sizeof err) < 0) {
            printf("bench scale_inputs error=\"%s\"\n", err);
            return -1;
        }
        up += (double)msg.len;
    }
    double nw = (double)windows;
    printf("bench scale_inputs kind=keys rows=%zu windows=%zu keys=%.1f key_bytes=%.1f up_codec_bytes=%.1f\n", n,
           windows, keys / nw, kbytes / nw, up / nw);
    fflush(stdout);
    return 0;
}

/* kind=costs: each piece timed over the same steps of B rows. */
static int costs_line(const fsgd_csr_t *d, scratch_t *s, size_t B, fsgd_sworker_t *enc)
{
    char err[256] = "";
    int rc = -1;
    fsgd_adam_t one = {0};
    fsgd_adam_params_t ap = fsgd_adam_defaults();
    ap.lr = 0.003;
    fsgd_backend_t *be = NULL, *be_one = NULL;
    fsgd_csr_t batch = {0};
    fsgd_sparse_t g = {0};
    size_t steps = d->n_rows / B;
    if (steps > 400)
        steps = 400;
    double t_batch = 0, t_grad = 0, t_enc = 0, t_keyenc = 0, t_apply = 0, t_answer = 0, t_train = 0, keys = 0;
    if (fsgd_adam_init_counted(&one, DIM, &ap) < 0)
        goto out;
    fsgd_adam_map_pages(&one);
    if (!(be = fsgd_backend_new("cpu", DIM, s->replica, err, sizeof err)) ||
        !(be_one = fsgd_backend_new("cpu", DIM, one.theta, err, sizeof err)))
        goto out;
    for (size_t st = 0; st < steps; st++) {
        double tb = now_s();
        fsgd_csr_clear(&batch);
        if (fsgd_csr_append_rows(&batch, d, st * B, B) < 0)
            goto out;
        fsgd_grad_request_t req = {.batch = &batch, .batch_id = -1, .loss = FSGD_LOSS_LOGISTIC, .scale = 1.0};
        double ls = 0, t0 = now_s();
        t_batch += t0 - tb;
        if (fsgd_backend_gradient(be, &req, &g, &ls, err, sizeof err) < 0)
            goto out;
        double t1 = now_s();
        fsgd_outbuf_t msg = {s->msg, s->msg_cap, 0};
        if (fsgd_sworker_encode(enc, g.keys, g.vals, g.n, B, &msg, err, sizeof err) < 0)
            goto out;
        double t2 = now_s();
        size_t kb = 0;
        if (fsgd_keys_encode(g.keys, g.n, s->block, fsgd_keys_bound(g.n), &kb, err, sizeof err) < 0)
            goto out;
        double t3 = now_s();
        /* a replica taking a delta of these keys: decode the block, scatter */
        uint32_t n = 0;
        if (fsgd_keys_decode(s->block, kb, DIM, s->dec, s->cap, &n, err, sizeof err) < 0)
            goto out;
        for (uint32_t j = 0; j < n; j++)
            s->replica[s->dec[j]] = g.vals[j];
        double t4 = now_s();
        /* a shard answering a pull of these keys: decode the request's
         * block, gather the values in its order */
        if (fsgd_keys_decode(s->block, kb, DIM, s->dec, s->cap, &n, err, sizeof err) < 0)
            goto out;
        for (uint32_t j = 0; j < n; j++)
            s->vals[j] = s->replica[s->dec[j]];
        t_answer += now_s() - t4;
        t4 = now_s();
        fsgd_grad_request_t one_req = {
            .batch = &batch, .batch_id = -1, .loss = FSGD_LOSS_LOGISTIC, .scale = 1.0 / (double)B, .l2 = 1e-6};
        if (fsgd_backend_gradient(be_one, &one_req, &g, &ls, err, sizeof err) < 0)
            goto out;
        fsgd_adam_step(&one, g.keys, g.vals, g.n);
        double t5 = now_s();
        t_grad += t1 - t0, t_enc += t2 - t1, t_keyenc += t3 - t2, t_apply += t4 - t3, t_train += t5 - t4;
        keys += (double)n;
    }
    double rows = (double)steps * (double)B;
    printf("bench scale_inputs kind=costs batch=%zu steps=%zu grad_ns_row=%.1f encode_ns_key=%.2f "
           "keyenc_ns_key=%.2f apply_ns_key=%.2f answer_ns_key=%.2f train1_ns_row=%.1f batch_ns_row=%.1f\n",
           B, steps, 1e9 * t_grad / rows, 1e9 * t_enc / keys, 1e9 * t_keyenc / keys, 1e9 * t_apply / keys,
           1e9 * t_answer / keys, 1e9 * t_train / rows, 1e9 * t_batch / rows);
    fflush(stdout);
    rc = 0;
out:
    if (rc)
        printf("bench scale_inputs error=\"%s\"\n", err[0] ? err : "out of memory");
    fsgd_backend_destroy(be);
    fsgd_backend_destroy(be_one);
    fsgd_adam_free(&one);
    fsgd_csr_free(&batch);
    fsgd_sparse_free(&g);
    return rc;
}

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* kind=start: NAME.data's rows read from their blocks into a cache. */
static int start_line(const fsgd_csr_t *d)
{
    const size_t block_rows = 256;
    char err[256] = "";
    int rc = -1;
    fsgd_csr_t cache = {0};
    uint8_t *block = NULL;
    size_t cap = 0;
    double t_read = 0;
    for (size_t r = 0; r < d->n_rows; r += block_rows) {
        size_t n = d->n_rows - r < block_rows ? d->n_rows - r : block_rows;
        size_t need = fsgd_rowblock_bound(d, r, n);
        if (need > cap && (free(block), block = malloc(cap = need)) == NULL)
            goto out;
        size_t len = fsgd_rowblock_encode(d, r, n, 0, block);
        double t1 = thread_cpu_s();
        if (fsgd_rowblock_decode(block, len, 0, "bench", &cache, err, sizeof err) < 0)
            goto out;
        t_read += thread_cpu_s() - t1;
    }
    printf("bench scale_inputs kind=start read_ns_row=%.1f block_rows=%zu\n", 1e9 * t_read / (double)d->n_rows,
           block_rows);
    fflush(stdout);
    rc = 0;
out:
    if (rc)
        printf("bench scale_inputs error=\"%s\"\n", err[0] ? err : "out of memory");
    free(block);
    fsgd_csr_free(&cache);
    return rc;
}

int main(void)
{
    const char *env = getenv("BENCH_SCALE_ROWS");
    size_t rows = env ? (size_t)strtoull(env, NULL, 10) : (size_t)1 << 20;
    char err[256] = "";
    fsgd_csr_t data;
    if (bench_ctr_rows(&data, rows, DIM, err, sizeof err) < 0) {
        printf("bench scale_inputs error=\"%s\"\n", err);
        return 1;
    }
    scratch_t s = {0};
    s.cap = (size_t)DIM;
    s.msg_cap = 64 << 20;
    s.stamp = calloc(DIM, sizeof *s.stamp);
    s.keys = malloc(s.cap * sizeof *s.keys);
    s.dec = malloc(s.cap * sizeof *s.dec);
    s.vals = malloc(s.cap * sizeof *s.vals);
    s.replica = calloc(DIM, sizeof *s.replica);
    s.block = malloc(fsgd_keys_bound(s.cap));
    s.msg = malloc(s.msg_cap);
    fsgd_sworker_t *enc = fsgd_sworker_new("none", DIM, 1, err, sizeof err);
    if (s.replica) /* mapped before any timing, as a worker maps its replica at start */
        memset(s.replica, 0, DIM * sizeof *s.replica);
    int rc = s.stamp && s.keys && s.dec && s.vals && s.replica && s.block && s.msg && enc ? 0 : 1;
    if (rc)
        printf("bench scale_inputs error=\"%s\"\n", err[0] ? err : "out of memory");
    /* rows: 16 .. all of them, four points an octave */
    for (double n = 16; !rc && (size_t)n <= rows; n *= 1.189207115)
        rc = keys_line(&data, &s, (size_t)n, enc) < 0;
    static const size_t batches[] = {128, 256, 512, 1024};
    for (size_t b = 0; !rc && b < sizeof batches / sizeof *batches; b++)
        rc = costs_line(&data, &s, batches[b], enc) < 0;
    if (!rc)
        rc = start_line(&data) < 0;
    fsgd_sworker_destroy(enc);
    free(s.stamp), free(s.keys), free(s.dec), free(s.vals), free(s.replica), free(s.block), free(s.msg);
    fsgd_csr_free(&data);
    return rc;
}
