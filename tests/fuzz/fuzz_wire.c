/* Fuzz target: the message body decoders of the distributed job
 * (trainer/distributed/wire.c, trainer/KAFKA_FORMAT.md): gradient (kind 1), step
 * state, delta (kind 2), packed delta (kind 4) and snapshot (kind 3), alone
 * and as the model message bodies the workers and `fsgd model assemble`
 * read (step state, then the kind's part).
 *
 * Input: byte 0 picks the decoder (mod 8), bytes 1..4 the dimension (deltas;
 * 1 + x mod 2^24) or the partition count (gradients; 1 + x mod 4096), the
 * rest is the body (copied to its own allocation so reads past it trap).
 * Whatever decodes must hold: keys < dim and strictly increasing, finite
 * values, counts consistent with the bytes consumed; and it must re-encode
 * with the writer to the same bytes (packed deltas, whose encoder chooses
 * its own bit lengths and compression: to a block that decodes to the same
 * keys and values). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/le.h"
#include "fsgd/sparse.h"

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(int rc, const char *err)
{
    if (rc >= 0 || !memchr(err, '\0', 256) || !err[0])
        abort(); /* a failure always says why */
}

static void check_sparse(const fsgd_sparse_t *s, uint64_t dim)
{
    if (s->n > dim)
        abort();
    for (size_t i = 0; i < s->n; i++)
        if (s->keys[i] >= dim || (i && s->keys[i] <= s->keys[i - 1]) || !isfinite(s->vals[i]))
            abort();
}

static void same_bytes(const fsgd_wire_buf_t *b, const uint8_t *p, size_t n)
{
    if (b->n != n || (n && memcmp(b->p, p, n)))
        abort();
}

static void check_state(const uint8_t *p, size_t len)
{
    fsgd_wire_state_t s = {0};
    size_t off = 0;
    char err[256] = "";
    int rc = fsgd_wire_state_get(p, len, &off, &s, err, sizeof err);
    if (rc == 0) {
        if (off != 16 + 28 * (size_t)s.nparts || off > len)
            abort();
        for (uint32_t i = 0; i < s.nparts; i++)
            if (s.pos[i] < s.start[i] || s.pos[i] > s.end[i])
                abort();
        fsgd_wire_buf_t b = {0};
        if (fsgd_wire_state_put(&b, &s) < 0)
            abort();
        same_bytes(&b, p, off);
        free(b.p);
        /* what follows read as a strategy feedback section (flag SECTION) */
        const uint8_t *sec;
        size_t slen, at = off;
        err[0] = '\0';
        rc = fsgd_wire_section_get(p, len, &off, &sec, &slen, err, sizeof err);
        if (rc == 0 && (slen == 0 || slen > FSGD_WIRE_SECTION_MAX || sec != p + at + 4 || off != at + 4 + slen ||
                        off > len))
            abort();
        if (rc < 0)
            check_err(rc, err);
    } else {
        check_err(rc, err);
    }
    fsgd_wire_state_free(&s);
}

static void check_grad(const uint8_t *p, size_t len, uint32_t max_parts)
{
    fsgd_wire_grad_t g;
    char err[256] = "";
    int rc = fsgd_wire_grad_get(p, len, max_parts, &g, err, sizeof err);
    if (rc == 0) {
        if (g.nranges > max_parts || (g.rows && !g.nranges) || (!g.rows && g.nranges && g.codec_len) ||
            !isfinite(g.loss_sum) ||
            !isfinite(g.t_grad) || !isfinite(g.t_encode))
            abort();
        for (uint32_t i = 0; i < g.nranges; i++)
            if (g.ranges[i].part >= max_parts || g.ranges[i].end <= g.ranges[i].start)
                abort();
        size_t head = 48 + 20 * (size_t)g.nranges + 4;
        if (g.codec != p + head || head + g.codec_len != len)
            abort();
        fsgd_wire_buf_t b = {0};
        if (fsgd_wire_grad_put(&b, &g) < 0)
            abort();
        same_bytes(&b, p, len);
        free(b.p);
    } else {
        check_err(rc, err);
    }
    free(g.ranges);
}

/* kind 2, 3 or 4 starting at *off; with_state: the step state first */
static void check_model(const uint8_t *p, size_t len, int kind, uint64_t dim, int with_state)
{
    size_t off = 0;
    char err[256] = "";
    int rc = 0;
    if (with_state) {
        fsgd_wire_state_t s = {0};
        rc = fsgd_wire_state_get(p, len, &off, &s, err, sizeof err);
        fsgd_wire_state_free(&s);
        if (rc < 0) {
            check_err(rc, err);
            return;
        }
    }
    size_t start = off;
    if (kind == 3) {
        fsgd_wire_model_t m;
        rc = fsgd_wire_model_get(p, len, &off, &m, err, sizeof err);
        if (rc < 0) {
            check_err(rc, err);
            return;
        }
        int sparse = m.w == NULL;
        size_t head = m.shards > 1 ? 36 : 28;
        if (m.kind < 1 || m.kind > 3 || m.has_bias > 1 || m.n != m.dim + m.has_bias || off > len ||
            m.nloc > m.n || m.shard >= m.shards ||
            off - start != (sparse ? head + 8 + 8 * m.nnz : head + 4 * m.nloc) ||
            (sparse ? m.kv != p + start + head + 8 : m.w != p + start + head))
            abort();
        float *w = malloc(m.nloc ? 4 * m.nloc : 1), *again = malloc(m.nloc ? 4 * m.nloc : 1);
        if (!w || !again) {
            free(w);
            free(again);
            return;
        }
        fsgd_wire_model_weights(&m, w);
        /* re-encoded (dense or sparse, whichever is smaller), it decodes to
         * the same weights bit for bit */
        fsgd_wire_buf_t b = {0};
        if (fsgd_wire_model_put_shard(&b, m.kind, m.has_bias, m.bias, m.dim, w, m.n, m.shard, m.shards) < 0)
            abort();
        fsgd_wire_model_t m2;
        size_t off2 = 0;
        if (fsgd_wire_model_get(b.p, b.n, &off2, &m2, err, sizeof err) < 0 || off2 != b.n || m2.n != m.n ||
            m2.nloc != m.nloc || m2.shard != m.shard || m2.shards != m.shards)
            abort();
        fsgd_wire_model_weights(&m2, again);
        if (memcmp(w, again, 4 * m.nloc))
            abort();
        free(b.p);
        free(w);
        free(again);
        return;
    }
    fsgd_sparse_t d = {0};
    rc = kind == 4 ? fsgd_wire_pdelta_get(p, len, &off, dim, &d, err, sizeof err)
                   : fsgd_wire_delta_get(p, len, &off, dim, &d, err, sizeof err);
    if (rc < 0) {
        check_err(rc, err);
        fsgd_sparse_free(&d);
        return;
    }
    check_sparse(&d, dim);
    if (off > len)
        abort();
    fsgd_wire_buf_t b = {0};
    if (kind == 2) {
        if (off - start != 8 + 8 * d.n || fsgd_wire_delta_put(&b, d.keys, d.vals, d.n) < 0)
            abort();
        same_bytes(&b, p + start, off - start);
    } else {
        if (fsgd_wire_pdelta_put(&b, d.keys, d.vals, d.n, err, sizeof err) < 0)
            abort();
        fsgd_sparse_t back = {0};
        size_t o2 = 0;
        if (fsgd_wire_pdelta_get(b.p, b.n, &o2, dim, &back, err, sizeof err) < 0 || o2 != b.n || back.n != d.n ||
            (d.n && (memcmp(back.keys, d.keys, d.n * sizeof *d.keys) ||
                     memcmp(back.vals, d.vals, d.n * sizeof *d.vals))))
            abort();
        fsgd_sparse_free(&back);
    }
    free(b.p);
    fsgd_sparse_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    int mode = data[0] % 8;
    uint32_t x = fsgd_le_get32(data + 1);
    size_t len = size - 5;
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return 0;
    memcpy(p, data + 5, len);
    uint64_t dim = 1 + (x % (1u << 24));
    switch (mode) {
    case 0:
        check_grad(p, len, 1 + x % 4096);
        break;
    case 1:
        check_model(p, len, 2, dim, 0);
        break;
    case 2:
        check_model(p, len, 4, dim, 0);
        break;
    case 3:
        check_model(p, len, 3, dim, 0);
        break;
    case 4:
        check_state(p, len);
        break;
    default:
        check_model(p, len, mode == 5 ? 2 : mode == 6 ? 4 : 3, dim, 1);
        break;
    }
    free(p);
    return 0;
}
