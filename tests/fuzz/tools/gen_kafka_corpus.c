/* One-off generator of the seed corpora of the Kafka-side fuzz targets
 * (fuzz_kframe, fuzz_wire, fuzz_assemble, fuzz_checkpoint, fuzz_ctl), made
 * with the real encoders. Not part of `make`; run from the repository root:
 *
 *   make build/fuzz-tools/gen_kafka_corpus && build/fuzz-tools/gen_kafka_corpus tests/fuzz/corpus
 *
 * Every valid seed is checked with its decoder before it is written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/model.h"

#include "agg_ckpt.h"
#include "ctl.h"
#include "wire.h"

static const char *root;

static void die(const char *what)
{
    fprintf(stderr, "gen_kafka_corpus: %s\n", what);
    exit(1);
}

static void out(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f))
        die(path);
}

/* control byte(s) + body */
static void out2(const char *dir, const char *name, const uint8_t *pre, size_t npre, const fsgd_wire_buf_t *b)
{
    fsgd_wire_buf_t o = {0};
    fsgd_wire_put(&o, pre, npre);
    fsgd_wire_put(&o, b->p, b->n);
    out(dir, name, o.p, o.n);
    free(o.p);
}

static void frame(fsgd_wire_buf_t *s, uint8_t kind, uint16_t flags, uint32_t gen, uint32_t sender, uint64_t step,
                  uint32_t chunk, uint32_t n, const uint8_t *body, size_t len)
{
    fsgd_kframe_t f = {kind, flags, gen, sender, step, chunk, n, body, (uint32_t)len};
    uint8_t *tmp = malloc(len + FSGD_KFRAME_OVERHEAD);
    size_t w = fsgd_kframe_write(tmp, &f, NULL);
    fsgd_wire_put(s, tmp, w);
    free(tmp);
}

/* a record of fuzz_kframe: u16 length + bytes */
static void rec(fsgd_wire_buf_t *s, const uint8_t *p, size_t n)
{
    uint8_t l[2];
    fsgd_le_put16(l, (uint16_t)n);
    fsgd_wire_put(s, l, 2);
    fsgd_wire_put(s, p, n);
}

static void krec(fsgd_wire_buf_t *s, uint8_t kind, uint16_t flags, uint32_t gen, uint32_t sender, uint64_t step,
                 uint32_t chunk, uint32_t n, const uint8_t *body, size_t len)
{
    fsgd_wire_buf_t f = {0};
    frame(&f, kind, flags, gen, sender, step, chunk, n, body, len);
    rec(s, f.p, f.n);
    free(f.p);
}

static void state(fsgd_wire_buf_t *b, uint32_t epoch, uint64_t t)
{
    fsgd_wire_state_t s = {0};
    fsgd_wire_state_alloc(&s, 3);
    s.epoch = epoch;
    s.adam_t = t;
    uint64_t ends[3] = {600, 400, 250};
    for (int i = 0; i < 3; i++) {
        s.start[i] = 0;
        s.end[i] = ends[i];
        s.pos[i] = 10 * t < ends[i] ? 10 * t : ends[i];
        s.quota[i] = 10;
    }
    fsgd_wire_state_put(b, &s);
    fsgd_wire_state_free(&s);
}

static uint8_t codec_msg[4096];
static size_t codec_len;

/* empty: 1 nothing this step; 2 ranges of messages without rows, passed over */
static void grad_body(fsgd_wire_buf_t *b, int empty)
{
    fsgd_wire_range_t r[2] = {{0, 0, 10}, {2, 0, 10}};
    fsgd_wire_grad_t g = {.epoch = 1, .nranges = empty == 1 ? 0 : 2, .rows = empty ? 0 : 20, .loss_sum = 13.5,
                     .t_grad = 0.001, .t_encode = 0.0002, .raw_entries = empty ? 0 : 260, .ranges = r,
                     .codec = codec_msg, .codec_len = empty ? 0 : (uint32_t)codec_len};
    b->n = 0;
    fsgd_wire_grad_put(b, &g);
    fsgd_wire_grad_t back;
    char e[256];
    if (fsgd_wire_grad_get(b->p, b->n, 3, &back, e, sizeof e) < 0)
        die(e);
    free(back.ranges);
}

#define DIM 124
static void delta_keys(uint32_t *k, float *v, size_t *n, int flat)
{
    size_t m = 0;
    for (uint32_t i = 0; i < DIM; i += 1 + (i % 5 == 0 ? 3 : 0)) {
        k[m] = i;
        v[m] = flat ? 0.25f : 0.01f * (float)i - 0.3f;
        m++;
    }
    *n = m;
}

static void snapshot(fsgd_wire_buf_t *b, float base)
{
    float w[DIM + 1];
    for (int i = 0; i <= DIM; i++)
        w[i] = base + 0.001f * (float)i;
    fsgd_wire_model_put(b, 1, 1, 1.0f, DIM, w, DIM + 1);
}

static void gen_wire(void)
{
    uint8_t pre[5];
    fsgd_wire_buf_t b = {0};
    uint32_t keys[DIM];
    float vals[DIM];
    size_t n;
    char e[256];
    /* 0: gradients, 3 partitions -> x = 2 */
    pre[0] = 0;
    fsgd_le_put32(pre + 1, 2);
    grad_body(&b, 0);
    out2("wire", "grad", pre, 5, &b);
    b.n = 0;
    grad_body(&b, 1);
    out2("wire", "grad_empty", pre, 5, &b);
    b.n = 0;
    grad_body(&b, 2);
    out2("wire", "grad_pass_over", pre, 5, &b);
    b.n = 0;
    grad_body(&b, 0);
    b.p[b.n - codec_len - 4] ^= 1; /* codec length off by one */
    out2("wire", "bad_grad_codec_len", pre, 5, &b);
    b.n = 0;
    grad_body(&b, 0);
    fsgd_le_put64(b.p + 48 + 4 + 8, 0); /* range end 0 <= start */
    out2("wire", "bad_grad_range", pre, 5, &b);
    /* 1: delta kind 2, dim DIM+1 -> x = DIM */
    fsgd_le_put32(pre + 1, DIM);
    pre[0] = 1;
    delta_keys(keys, vals, &n, 0);
    b.n = 0;
    fsgd_wire_delta_put(&b, keys, vals, n);
    out2("wire", "delta", pre, 5, &b);
    fsgd_le_put32(b.p + 8 + 4 * 3, 1); /* key 3 below key 2 */
    out2("wire", "bad_delta_order", pre, 5, &b);
    /* 2: packed delta, raw and LZ4 values */
    pre[0] = 2;
    b.n = 0;
    if (fsgd_wire_pdelta_put(&b, keys, vals, n, e, sizeof e) < 0)
        die(e);
    out2("wire", "pdelta_raw", pre, 5, &b);
    delta_keys(keys, vals, &n, 1);
    b.n = 0;
    if (fsgd_wire_pdelta_put(&b, keys, vals, n, e, sizeof e) < 0)
        die(e);
    fsgd_sparse_t d = {0};
    size_t off = 0;
    if (fsgd_wire_pdelta_get(b.p, b.n, &off, DIM + 1, &d, e, sizeof e) < 0 || off != b.n)
        die(e);
    fsgd_sparse_free(&d);
    out2("wire", "pdelta_lz4", pre, 5, &b);
    b.n = 0;
    if (fsgd_wire_pdelta_put(&b, keys, vals, 0, e, sizeof e) < 0)
        die(e);
    out2("wire", "pdelta_empty", pre, 5, &b);
    /* 3: snapshot; 4: state */
    pre[0] = 3;
    b.n = 0;
    snapshot(&b, 0.5f);
    out2("wire", "snapshot", pre, 5, &b);
    fsgd_le_put64(b.p + 20, DIM); /* n != dim + has_bias */
    out2("wire", "bad_snapshot_n", pre, 5, &b);
    pre[0] = 4;
    b.n = 0;
    state(&b, 2, 7);
    out2("wire", "state", pre, 5, &b);
    fsgd_le_put64(b.p + 16 + 8, 601); /* pos > end */
    out2("wire", "bad_state_pos", pre, 5, &b);
    /* 5..7: model message bodies */
    delta_keys(keys, vals, &n, 0);
    pre[0] = 5;
    b.n = 0;
    state(&b, 1, 3);
    fsgd_wire_delta_put(&b, keys, vals, n);
    out2("wire", "msg_delta", pre, 5, &b);
    pre[0] = 6;
    b.n = 0;
    state(&b, 1, 3);
    fsgd_wire_pdelta_put(&b, keys, vals, n, e, sizeof e);
    out2("wire", "msg_pdelta", pre, 5, &b);
    pre[0] = 7;
    b.n = 0;
    state(&b, 1, 0);
    snapshot(&b, 0);
    out2("wire", "msg_snapshot", pre, 5, &b);
    free(b.p);
}

/* a model message body of the given kind into b */
static void model_body(fsgd_wire_buf_t *b, int kind, uint64_t step, float base)
{
    uint32_t keys[DIM];
    float vals[DIM];
    size_t n;
    char e[256];
    b->n = 0;
    state(b, 1, step);
    if (kind == 3) {
        snapshot(b, base);
        return;
    }
    delta_keys(keys, vals, &n, 0);
    for (size_t i = 0; i < n; i++)
        vals[i] += base;
    if (kind == 2)
        fsgd_wire_delta_put(b, keys, vals, n);
    else if (fsgd_wire_pdelta_put(b, keys, vals, n, e, sizeof e) < 0)
        die(e);
}

static void gen_kframe_assemble(void)
{
    fsgd_wire_buf_t body = {0}, s = {0}, st = {0};
    uint8_t c = 0;
    /* fuzz_kframe */
    grad_body(&body, 0);
    fsgd_wire_put(&s, &c, 1);
    krec(&s, 1, 0, 7, 3, 1, 0, 1, body.p, body.n);
    out("kframe", "grad_single", s.p, s.n);
    s.n = 0;
    fsgd_wire_put(&s, &c, 1);
    model_body(&body, 3, 4, 0.1f);
    size_t third = body.n / 3;
    krec(&s, 3, 0, 7, 0, 4, 2, 3, body.p + 2 * third, body.n - 2 * third);
    krec(&s, 3, 0, 7, 0, 4, 0, 3, body.p, third);
    krec(&s, 3, 0, 7, 0, 4, 0, 3, body.p, third); /* duplicate */
    krec(&s, 4, 0, 7, 0, 5, 0, 1, body.p, 50);     /* another message in between */
    krec(&s, 3, 0, 7, 0, 4, 1, 3, body.p + third, third);
    krec(&s, 3, 0, 7, 0, 4, 1, 3, body.p + third, third); /* after completion */
    out("kframe", "chunks_out_of_order", s.p, s.n);
    s.n = 0;
    fsgd_wire_put(&s, &c, 1);
    krec(&s, 1, 0, 7, 1, 9, 0, 2, body.p, 10);
    krec(&s, 1, 0, 7, 1, 9, 1, 3, body.p, 10); /* count differs */
    krec(&s, 1, 0, 7, 1, 9, 1, 2, body.p, 0);
    out("kframe", "count_conflict", s.p, s.n);
    s.n = 0;
    fsgd_wire_put(&s, &c, 1);
    krec(&s, 2, 1, 7, 0, 100, 65535, 65536, body.p, 5); /* huge count */
    krec(&s, 2, 1, 7, 0, 3, 0, 2, body.p, 5);
    uint8_t below[2] = {50, 0};
    rec(&s, below, 2); /* prune below step 50 */
    krec(&s, 2, 1, 7, 0, 3, 1, 2, body.p, 5);
    krec(&s, 2, 1, 7, 0, 100, 0, 65536, body.p, 5);
    out("kframe", "huge_count_prune", s.p, s.n);
    /* regression: a message whose chunks are all empty (the reassembler
     * once copied into a NULL output buffer, UBSan) */
    s.n = 0;
    fsgd_wire_put(&s, &c, 1);
    krec(&s, 1, 0, 7, 2, 1, 0, 1, body.p, 0);
    krec(&s, 1, 0, 7, 2, 2, 1, 2, body.p, 0);
    krec(&s, 1, 0, 7, 2, 2, 0, 2, body.p, 0);
    out("kframe", "regress_empty_body", s.p, s.n);
    /* 40 chunks in a scrambled order with duplicates (past the reassembler's
     * switch from a list to a bitmap of received chunks) */
    s.n = 0;
    fsgd_wire_put(&s, &c, 1);
    for (uint32_t i = 0; i < 44; i++) {
        uint32_t k = (i * 17) % 40;
        krec(&s, 4, 0, 7, 0, 6, k, 40, body.p + k, 3);
    }
    out("kframe", "many_chunks", s.p, s.n);
    /* invalid frames */
    static const struct {
        const char *name;
        size_t at;
        uint8_t x;
    } bad[] = {{"bad_magic", 0, 'X'}, {"bad_version", 4, 2}, {"bad_kind", 5, 9}, {"bad_flags", 6, 2},
               {"bad_chunk", 24, 5}, {"bad_crc", 40, 0xff}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fsgd_wire_buf_t f = {0};
        frame(&f, 1, 0, 7, 3, 1, 0, 1, body.p, 60);
        f.p[bad[i].at] = bad[i].x;
        s.n = 0;
        fsgd_wire_put(&s, &c, 1);
        rec(&s, f.p, f.n);
        out("kframe", bad[i].name, s.p, s.n);
        free(f.p);
    }
    s.n = 0;
    c = 1; /* fix-up mode: lengths and CRCs are wrong on purpose */
    fsgd_wire_put(&s, &c, 1);
    {
        fsgd_wire_buf_t f = {0};
        frame(&f, 4, 0, 8, 0, 2, 0, 2, body.p, 70);
        memset(f.p + f.n - 4, 0, 4);
        fsgd_le_put32(f.p + 32, 9999);
        rec(&s, f.p, f.n);
        f.n = 0;
        frame(&f, 4, 0, 8, 0, 2, 1, 2, body.p, 30);
        memset(f.p + f.n - 4, 0, 4);
        rec(&s, f.p, f.n);
        free(f.p);
    }
    out("kframe", "fixup_two_chunks", s.p, s.n);
    c = 0;
    s.n = 0;
    fsgd_wire_put(&s, &c, 1);
    {
        fsgd_wire_buf_t f = {0};
        frame(&f, 1, 0, 7, 3, 1, 0, 1, body.p, 60);
        rec(&s, f.p, f.n - 7); /* truncated */
        free(f.p);
    }
    out("kframe", "truncated", s.p, s.n);

    /* fuzz_assemble: a whole job's model topic, with chunking */
    s.n = 0;
    c = 2; /* require FINAL */
    fsgd_wire_put(&s, &c, 1);
    model_body(&body, 3, 0, 0.0f);
    frame(&s, 3, 0, 20, 0, 0, 0, 1, body.p, body.n);
    model_body(&body, 4, 1, 0.1f);
    frame(&s, 4, 0, 20, 0, 1, 0, 1, body.p, body.n);
    frame(&s, 4, 0, 20, 0, 1, 0, 1, body.p, body.n); /* duplicate */
    model_body(&body, 2, 2, 0.2f);
    frame(&s, 2, 0, 20, 0, 2, 0, 1, body.p, body.n);
    model_body(&body, 4, 3, 0.3f);
    third = body.n / 3;
    frame(&s, 4, 0, 20, 0, 3, 1, 3, body.p + third, third);
    frame(&s, 4, 0, 20, 0, 3, 0, 3, body.p, third);
    frame(&s, 4, 0, 20, 0, 3, 2, 3, body.p + 2 * third, body.n - 2 * third);
    size_t partial = s.n;
    model_body(&body, 3, 4, 0.4f);
    frame(&s, 3, 1, 20, 0, 4, 0, 1, body.p, body.n);
    fsgd_model_t m;
    uint64_t step;
    char e[256];
    if (fsgd_model_assemble_stream(s.p + 1, s.n - 1, NULL, 1, &m, &step, e, sizeof e) < 0 || step != 4)
        die(e);
    fsgd_model_free(&m);
    out("assemble", "job_final", s.p, s.n);
    out("assemble", "job_partial_no_final", s.p, partial);
    s.p[0] = 0;
    out("assemble", "job_partial_ok", s.p, partial);
    /* a restart: an older generation's messages after a newer snapshot */
    model_body(&body, 3, 2, 0.9f);
    frame(&s, 3, 0, 19, 0, 2, 0, 1, body.p, body.n);
    model_body(&body, 4, 5, 0.5f);
    frame(&s, 4, 0, 19, 0, 5, 0, 1, body.p, body.n);
    out("assemble", "old_generation_after", s.p, s.n);
    s.n = 1;
    grad_body(&body, 0);
    frame(&s, 1, 0, 20, 1, 1, 0, 1, body.p, body.n);
    out("assemble", "bad_grad_frame", s.p, s.n);
    s.n = 1;
    s.p[0] = 1; /* fix-up: a delta before any snapshot, lengths off */
    model_body(&body, 2, 1, 0.1f);
    frame(&s, 2, 0, 20, 0, 1, 0, 1, body.p, body.n);
    fsgd_le_put32(s.p + 1 + 32, 3);
    out("assemble", "fixup_delta_first", s.p, s.n);
    free(body.p);
    free(s.p);
    free(st.p);
}

/* A checkpoint as the aggregator writes it (KAFKA_FORMAT.md "Checkpoint"),
 * checked with fsgd_agg_ckpt_check: it must restore and write back the same bytes. */
static void ckpt(fsgd_wire_buf_t *b, uint64_t rows, uint64_t mdim, const fsgd_wire_state_t *s, uint32_t nepochs)
{
    b->n = 0;
    fsgd_wire_put(b, "FSGDCKPT", 8);
    fsgd_wire_u32(b, 2);
    fsgd_wire_u32(b, 1700000000u);
    fsgd_wire_u64(b, 17);
    fsgd_wire_u64(b, rows);
    fsgd_wire_u64(b, mdim);
    fsgd_wire_state_put(b, s);
    fsgd_wire_u64(b, 17);
    fsgd_wire_u64(b, 170);
    fsgd_wire_f64(b, 91.25);
    fsgd_wire_u64(b, 1170);
    fsgd_wire_f64(b, 3.5);
    fsgd_wire_u32(b, nepochs);
    for (uint32_t i = 0; i < nepochs; i++) {
        fsgd_wire_u32(b, i + 1);
        fsgd_wire_f64(b, 1.5 * (i + 1));
        fsgd_wire_f64(b, 0.6 - 0.1 * i);
        fsgd_wire_u64(b, rows);
        fsgd_wire_u64(b, i ? 300 : 0);
        fsgd_wire_f64(b, 0.8);
        fsgd_wire_f64(b, 0.4);
        fsgd_wire_f64(b, 0.4);
        fsgd_wire_f64(b, 0.81);
    }
    for (int arr = 0; arr < 3; arr++)
        for (uint64_t i = 0; i < mdim; i++)
            fsgd_wire_f32(b, arr == 0 ? 0.01f * (float)i : arr == 1 ? -0.001f * (float)i : 1e-6f * (float)i);
    fsgd_wire_u32(b, fsgd_crc32c(0, b->p, b->n));
    uint8_t *re = NULL;
    size_t relen = 0;
    char e[256];
    if (fsgd_agg_ckpt_check(b->p, b->n, rows, mdim, s, &re, &relen, e, sizeof e) != 1 || relen != b->n ||
        memcmp(re, b->p, relen))
        die(e);
    free(re);
}

static void gen_checkpoint(void)
{
    fsgd_wire_state_t s = {0};
    fsgd_wire_state_alloc(&s, 2); /* the fixed data of fuzz_checkpoint */
    s.epoch = 2;
    s.adam_t = 17;
    s.end[0] = 600;
    s.end[1] = 400;
    s.pos[0] = 70;
    s.pos[1] = 100;
    s.quota[0] = s.quota[1] = 10;
    fsgd_wire_buf_t b = {0};
    uint8_t c = 0;
    ckpt(&b, 1000, 124, &s, 1);
    out2("checkpoint", "fixed_data", &c, 1, &b);
    c = 2;
    out2("checkpoint", "self_data", &c, 1, &b);
    c = 6;
    out2("checkpoint", "self_data_rows_differ", &c, 1, &b);
    c = 2 | 4 | (2 << 3);
    out2("checkpoint", "self_data_range_differs", &c, 1, &b);
    fsgd_wire_state_alloc(&s, 5);
    for (int i = 0; i < 5; i++) {
        s.start[i] = 100 * (uint64_t)i;
        s.pos[i] = s.start[i] + 5;
        s.end[i] = s.start[i] + 50;
        s.quota[i] = 3;
    }
    c = 2;
    ckpt(&b, 250, 9, &s, 3);
    out2("checkpoint", "self_data_3_epochs", &c, 1, &b);
    ckpt(&b, 250, 0, &s, 0);
    out2("checkpoint", "self_data_empty_model", &c, 1, &b);
    b.p[b.n - 1] ^= 0x40;
    out2("checkpoint", "bad_crc", &c, 1, &b);
    c = 3;
    out2("checkpoint", "bad_crc_fixed", &c, 1, &b);
    ckpt(&b, 250, 9, &s, 3);
    b.n -= 4 + 12; /* one weight short */
    fsgd_wire_u32(&b, fsgd_crc32c(0, b.p, b.n));
    c = 2;
    out2("checkpoint", "truncated_weights", &c, 1, &b);
    out("checkpoint", "short", "\002FSGDCKPT\002\000\000\000", 13);
    /* version 1 began with the codec messages' magic: refused, by name */
    ckpt(&b, 1000, 124, &s, 0);
    memcpy(b.p, "FSGC\001\000\000\000", 8);
    c = 1;
    out2("checkpoint", "old_magic_v1", &c, 1, &b);
    fsgd_wire_state_free(&s);
    free(b.p);
}

/* A sharded job's checkpoint with a sparse table (versions 12 and 13:
 * the writer's identity, then after the epochs u64 keys, the keys in slot
 * order and the arrays of those keys only), restored and written back. */
static void ckpt_sparse(fsgd_wire_buf_t *b, int counted, uint32_t dup)
{
    fsgd_wire_state_t s = {0};
    fsgd_wire_state_alloc(&s, 2);
    s.epoch = 1;
    s.adam_t = 9;
    s.end[0] = 30;
    s.end[1] = 20;
    s.pos[0] = 12;
    s.pos[1] = 8;
    s.quota[0] = s.quota[1] = 4;
    const uint64_t rows = 50, mdim = 4000;
    const uint32_t keys[] = {3900, 7, 512, 8, 3999};
    const uint32_t n = 5;
    b->n = 0;
    fsgd_wire_put(b, "FSGDCKPT", 8);
    fsgd_wire_u32(b, counted ? 13 : 12);
    fsgd_wire_u32(b, 1700000000u);
    fsgd_wire_u64(b, 9);
    fsgd_wire_u64(b, rows);
    fsgd_wire_u64(b, mdim);
    fsgd_wire_u32(b, 1); /* shard 1 of 2, job "js" */
    fsgd_wire_u32(b, 2);
    fsgd_wire_put(b, "\002js", 3);
    fsgd_wire_state_put(b, &s);
    fsgd_wire_u64(b, 9);
    fsgd_wire_u64(b, 20);
    fsgd_wire_f64(b, 11.5);
    fsgd_wire_u64(b, 20);
    fsgd_wire_f64(b, 0.75);
    fsgd_wire_u32(b, 0);
    fsgd_wire_u64(b, n);
    for (uint32_t i = 0; i < n; i++)
        fsgd_wire_u32(b, dup && i == n - 1 ? keys[0] : keys[i]);
    for (int arr = 0; arr < 3; arr++)
        for (uint32_t i = 0; i < n; i++)
            fsgd_wire_f32(b, arr == 0 ? 0.25f * (float)(i + 1) : arr == 1 ? -0.01f * (float)i : 1e-4f * (float)(i + 1));
    for (uint32_t i = 0; counted && i < n; i++) {
        uint8_t c2[2] = {(uint8_t)(i + 1), 0};
        fsgd_wire_put(b, c2, 2);
    }
    fsgd_wire_u32(b, 0); /* logistic, no intercept */
    fsgd_wire_u32(b, 0);
    fsgd_wire_u32(b, fsgd_crc32c(0, b->p, b->n));
    uint8_t *re = NULL;
    size_t relen = 0;
    char e[256];
    int rc = fsgd_agg_ckpt_check(b->p, b->n, rows, mdim, &s, &re, &relen, e, sizeof e);
    if (dup ? rc >= 0 || !strstr(e, "twice") : rc != 1 || relen != b->n || memcmp(re, b->p, relen))
        die(e);
    free(re);
    fsgd_wire_state_free(&s);
}

static void gen_checkpoint_sparse(void)
{
    fsgd_wire_buf_t b = {0};
    uint8_t c = 2;
    ckpt_sparse(&b, 0, 0);
    out2("checkpoint", "sparse_v12_self", &c, 1, &b);
    ckpt_sparse(&b, 1, 0);
    out2("checkpoint", "sparse_v13_counts_self", &c, 1, &b);
    ckpt_sparse(&b, 0, 1);
    out2("checkpoint", "sparse_v12_key_twice", &c, 1, &b);
    free(b.p);
}

static void gen_ctl(void)
{
    fsgd_ctl_json_t j = {0};
    uint8_t c = 1, size = 40;
    fsgd_wire_buf_t b = {0};
    uint32_t parts[3] = {0, 4, 11};
#define EMIT(name)                                                                                        \
    do {                                                                                                  \
        fsgd_cj_end(&j);                                                                                       \
        b.n = 0;                                                                                          \
        fsgd_wire_put(&b, &c, 1);                                                                              \
        fsgd_wire_put(&b, &size, 1);                                                                           \
        fsgd_wire_put(&b, j.p, j.n);                                                                           \
        out("ctl", name, b.p, b.n);                                                                       \
    } while (0)
    fsgd_cj_begin(&j, "job_start", "a9a-dist");
    fsgd_cj_u64(&j, "gen", 1700000000u);
    fsgd_cj_str(&j, "codec", "fastsgd");
    fsgd_cj_u64(&j, "dataset_rows", 32561);
    fsgd_cj_i64(&j, "resumed_from_step", -1);
    fsgd_cj_f64(&j, "batch", 0.01);
    EMIT("job_start");
    fsgd_cj_begin(&j, "worker_assignment", "a9a-dist");
    fsgd_cj_i64(&j, "worker", 3);
    fsgd_cj_u32s(&j, "partitions", parts, 3);
    fsgd_cj_i64(&j, "assigned", 1);
    EMIT("worker_assignment");
    fsgd_cj_begin(&j, "job_end", "a9a-dist");
    fsgd_cj_u64(&j, "gen", 1700000001u);
    fsgd_cj_str(&j, "status", "failed");
    fsgd_cj_str(&j, "error", "checkpoint 'x\ty': \"crc\" \\ mismatch\n");
    fsgd_cj_str(&j, "error_code", "FSGD_E_CRC");
    fsgd_cj_f64(&j, "test_auc", 0.0 / 0.0);
    EMIT("job_end_failed");
    static const char *junk[] = {
        "{\"event\": \"worker_assignment\", \"nested\": {\"worker\": 9, \"partitions\": [1]}, \"worker\": 2, "
        "\"partitions\": [1, 2, 99999999999]}",
        "{\"event\": \"job_end\", \"gen\": 1e400, \"status\": \"do",
        "{\"event\\\"\": \"x\", \"event\" : \"\\u00e9\\ud83d\\ude00\\ud800z\\u12\", \"gen\":-0}",
        "[{\"event\": \"job_end\"}]",
        "{\"partitions\": [4294967295, 4294967296], \"worker\": \"7\", \"gen\": \"1\"}",
        "{\"job\": \"\\",
    };
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        char name[32];
        snprintf(name, sizeof name, "junk_%zu", i);
        b.n = 0;
        size = (uint8_t)(7 * i);
        fsgd_wire_put(&b, &c, 1);
        fsgd_wire_put(&b, &size, 1);
        fsgd_wire_put(&b, junk[i], strlen(junk[i]));
        out("ctl", name, b.p, b.n);
    }
    /* writer round trips: c = 0, event\0 job\0 u64 i64 f64 u32... */
    static const struct {
        const char *name, *ev, *job;
    } rt[] = {{"rt_plain", "epoch_end", "a9a"},
              {"rt_quotes", "x\"y", "\\\"event\\\": \"job_end\""},
              {"rt_control", "tab\there", "nl\nbell\x07\x1f"},
              {"rt_utf8", "\xc3\xa9v\xe2\x82\xac", "\xff\xfe"}};
    for (size_t i = 0; i < sizeof rt / sizeof *rt; i++) {
        b.n = 0;
        c = 0;
        fsgd_wire_put(&b, &c, 1);
        fsgd_wire_put(&b, rt[i].ev, strlen(rt[i].ev) + 1);
        fsgd_wire_put(&b, rt[i].job, strlen(rt[i].job) + 1);
        fsgd_wire_u64(&b, 1700000000ull + i);
        fsgd_wire_u64(&b, (uint64_t)-5);
        fsgd_wire_f64(&b, i == 3 ? 1.0 / 0.0 : 0.125 * (double)i);
        for (uint32_t k = 0; k < 3 * i; k++)
            fsgd_wire_u32(&b, k * 1000003u);
        out("ctl", rt[i].name, b.p, b.n);
        c = 1;
    }
    free(b.p);
    fsgd_cj_free(&j);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: gen_kafka_corpus CORPUS_DIR");
    root = argv[1];
    char path[512];
    snprintf(path, sizeof path, "%s/codec/golden_fastsgd_default", root);
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path);
    codec_len = fread(codec_msg, 1, sizeof codec_msg, f);
    fclose(f);
    gen_wire();
    gen_kframe_assemble();
    gen_checkpoint();
    gen_checkpoint_sparse();
    gen_ctl();
    return 0;
}
