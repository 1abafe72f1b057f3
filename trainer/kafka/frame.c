/* Frames and reassembly (trainer/KAFKA_FORMAT.md, "Frame").
 *
 * Layout, little-endian:
 *   0 magic "FSGK" | 4 version u8 | 5 kind u8 | 6 flags u16 | 8 gen u32 |
 *   12 sender u32 | 16 step u64 | 24 chunk u32 | 28 nchunks u32 |
 *   32 body_len u32 | 36 body | 36+len crc32c u32 of bytes [0, 36+len) |
 *   with flag AUTH: 40+len tag (32 bytes, fsgd/auth.h) of bytes [0, 40+len). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/auth.h"
#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "kasm_probe.h"

#define KNOWN_FLAGS (FSGD_KFLAG_FINAL | FSGD_KFLAG_SECTION | FSGD_KFLAG_AUTH)

size_t fsgd_kframe_write(uint8_t *out, const fsgd_kframe_t *f, fsgd_auth_t *auth)
{
    memcpy(out, FSGD_KFRAME_MAGIC, 4);
    out[4] = FSGD_KFRAME_VERSION;
    out[5] = f->kind;
    const int tagged = fsgd_auth_enabled(auth);
    fsgd_le_put16(out + 6, (uint16_t)((f->flags & ~FSGD_KFLAG_AUTH) | (tagged ? FSGD_KFLAG_AUTH : 0)));
    fsgd_le_put32(out + 8, f->gen);
    fsgd_le_put32(out + 12, f->sender);
    fsgd_le_put64(out + 16, f->step);
    fsgd_le_put32(out + 24, f->chunk);
    fsgd_le_put32(out + 28, f->nchunks);
    fsgd_le_put32(out + 32, f->body_len);
    if (f->body_len)
        memcpy(out + FSGD_KFRAME_HEADER, f->body, f->body_len);
    size_t n = FSGD_KFRAME_HEADER + (size_t)f->body_len;
    fsgd_le_put32(out + n, fsgd_crc32c(0, out, n));
    if (!tagged)
        return n + 4;
    fsgd_auth_tag(auth, out + n + 4, FSGD_AUTH_FRAME, out, n + 4, NULL, 0);
    return n + 4 + FSGD_KFRAME_TAG;
}

static int parse(const uint8_t *buf, size_t len, fsgd_kframe_t *f, size_t *used, const fsgd_auth_t *auth, int verify,
                 char *err, size_t errsz)
{
    memset(f, 0, sizeof *f);
    if (len < FSGD_KFRAME_OVERHEAD)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "frame: %zu bytes, need at least %d", len,
                            FSGD_KFRAME_OVERHEAD);
    if (memcmp(buf, FSGD_KFRAME_MAGIC, 4))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "frame: bad magic at byte 0");
    if (buf[4] != FSGD_KFRAME_VERSION)
        return fsgd_err_fmt(err, errsz, FSGD_E_VERSION, "frame: version %u at byte 4, expected %u", buf[4],
                            FSGD_KFRAME_VERSION);
    f->kind = buf[5];
    if (f->kind < FSGD_KMSG_GRAD || f->kind > FSGD_KMSG_KIND_LAST)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "frame: unknown kind %u at byte 5", f->kind);
    f->flags = fsgd_le_get16(buf + 6);
    unsigned known = KNOWN_FLAGS | (f->kind == FSGD_KMSG_GRAD ? FSGD_KFLAG_LAG_MASK : 0) |
                     (f->kind == FSGD_KMSG_PULL ? FSGD_KFLAG_BY_ID : 0);
    if (f->flags & ~known)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "frame: reserved flag bits 0x%x set at byte 6",
                            f->flags & ~known);
    f->gen = fsgd_le_get32(buf + 8);
    f->sender = fsgd_le_get32(buf + 12);
    f->step = fsgd_le_get64(buf + 16);
    f->chunk = fsgd_le_get32(buf + 24);
    f->nchunks = fsgd_le_get32(buf + 28);
    f->body_len = fsgd_le_get32(buf + 32);
    if (f->nchunks == 0 || f->nchunks > FSGD_KBUS_MAX_CHUNKS || f->chunk >= f->nchunks)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "frame: chunk %u of %u at byte 24", f->chunk, f->nchunks);
    if (f->body_len > len - FSGD_KFRAME_OVERHEAD)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "frame: body length %u at byte 32 but %zu bytes follow",
                            f->body_len, len - FSGD_KFRAME_HEADER);
    size_t n = FSGD_KFRAME_HEADER + (size_t)f->body_len;
    uint32_t want = fsgd_le_get32(buf + n), got = fsgd_crc32c(0, buf, n);
    if (want != got)
        return fsgd_err_fmt(err, errsz, FSGD_E_CRC, "frame: crc32c 0x%08x at byte %zu, computed 0x%08x", want, n,
                            got);
    size_t total = n + 4;
    if (f->flags & FSGD_KFLAG_AUTH) {
        if (len - total < FSGD_KFRAME_TAG)
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "frame: flag AUTH but %zu bytes of tag at byte %zu",
                                len - total, total);
        total += FSGD_KFRAME_TAG;
    }
    /* CRC32C finds accidents; the tag, made with the job key, finds
     * messages that did not come from the job's processes */
    if (verify && fsgd_auth_enabled(auth) && !(f->flags & FSGD_KFLAG_AUTH))
        return fsgd_err_fmt(err, errsz, FSGD_E_AUTH, "frame: no tag (flag AUTH unset) and this job is authenticated");
    if (verify && fsgd_auth_enabled(auth) && !fsgd_auth_check(auth, buf + n + 4, FSGD_AUTH_FRAME, buf, n + 4, NULL, 0))
        return fsgd_err_fmt(err, errsz, FSGD_E_AUTH, "frame: the tag at byte %zu is not this job key's", n + 4);
    if (verify && !fsgd_auth_enabled(auth) && (f->flags & FSGD_KFLAG_AUTH))
        return fsgd_err_fmt(err, errsz, FSGD_E_AUTH,
                            "frame: authenticated (flag AUTH) but no job key was given to check it (--job-key-file)");
    f->body = buf + FSGD_KFRAME_HEADER;
    if (used)
        *used = total;
    return 0;
}

int fsgd_kframe_parse(const uint8_t *buf, size_t len, fsgd_kframe_t *f, size_t *used, const fsgd_auth_t *auth,
                      char *err, size_t errsz)
{
    return parse(buf, len, f, used, auth, 1, err, errsz);
}

int fsgd_kframe_parse_unverified(const uint8_t *buf, size_t len, fsgd_kframe_t *f, size_t *used, char *err,
                                 size_t errsz)
{
    return parse(buf, len, f, used, NULL, 0, err, errsz);
}

/* --- reassembly --- */

#define DONE_RING 8192

/* A message whose chunks are arriving. Memory grows with the chunks
 * received, not with the count a frame announces (up to 65536): a stray
 * frame costs its own bytes, not a table of 65536 entries. */
typedef struct pending {
    uint8_t kind;
    uint32_t gen, sender, nchunks, have, cap;
    uint64_t step;
    uint32_t *idx;       /* chunk index of the i-th chunk received */
    uint8_t **parts;     /* its bytes */
    uint32_t *part_len;
    uint8_t *seen;       /* bitmap of received indices, made once have > SEEN_AFTER */
    size_t bytes;        /* body bytes held */
} pending_t;

#define SEEN_AFTER 32

typedef struct done_key {
    uint64_t step;
    uint32_t gen, sender;
    uint8_t kind;
    uint8_t used;
} done_key_t;

struct fsgd_kasm {
    pending_t *p;
    size_t n, cap;
    done_key_t done[DONE_RING];
    size_t done_next;
    uint8_t *out;
    size_t out_cap;
    size_t held, held_max;       /* body bytes in pending messages, now and at most */
    size_t lim_msg, lim_total;   /* 0: no limit */
};

fsgd_kasm_t *fsgd_kasm_new(void) { return calloc(1, sizeof(fsgd_kasm_t)); }

static void pending_free(pending_t *p)
{
    for (uint32_t i = 0; p->parts && i < p->have; i++)
        free(p->parts[i]);
    free(p->idx);
    free(p->parts);
    free(p->part_len);
    free(p->seen);
}

static int pending_has(const pending_t *p, uint32_t chunk)
{
    if (p->seen)
        return (p->seen[chunk / 8] >> (chunk % 8)) & 1;
    for (uint32_t i = 0; i < p->have; i++)
        if (p->idx[i] == chunk)
            return 1;
    return 0;
}

/* Stores a copy of chunk (len bytes). 0 or FSGD_E_NOMEM (p unchanged). */
static int pending_add(pending_t *p, uint32_t chunk, const uint8_t *body, uint32_t len)
{
    if (p->have == p->cap) {
        uint32_t nc = p->cap ? 2 * p->cap : 4;
        if (nc > p->nchunks)
            nc = p->nchunks;
        uint32_t *ni = realloc(p->idx, nc * sizeof *ni);
        if (ni)
            p->idx = ni;
        uint8_t **np = realloc(p->parts, nc * sizeof *np);
        if (np)
            p->parts = np;
        uint32_t *nl = realloc(p->part_len, nc * sizeof *nl);
        if (nl)
            p->part_len = nl;
        if (!ni || !np || !nl)
            return FSGD_E_NOMEM;
        p->cap = nc;
    }
    if (!p->seen && p->have >= SEEN_AFTER) {
        p->seen = calloc((p->nchunks + 7) / 8, 1);
        if (!p->seen)
            return FSGD_E_NOMEM;
        for (uint32_t i = 0; i < p->have; i++)
            p->seen[p->idx[i] / 8] |= (uint8_t)(1u << (p->idx[i] % 8));
    }
    uint8_t *c = malloc(len ? len : 1);
    if (!c)
        return FSGD_E_NOMEM;
    if (len)
        memcpy(c, body, len);
    p->idx[p->have] = chunk;
    p->parts[p->have] = c;
    p->part_len[p->have] = len;
    p->have++;
    p->bytes += len;
    if (p->seen)
        p->seen[chunk / 8] |= (uint8_t)(1u << (chunk % 8));
    return 0;
}

void fsgd_kasm_destroy(fsgd_kasm_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        pending_free(&a->p[i]);
    free(a->p);
    free(a->out);
    free(a);
}

static int is_done(const fsgd_kasm_t *a, const fsgd_kframe_t *f)
{
    for (size_t i = 0; i < DONE_RING; i++) {
        const done_key_t *d = &a->done[i];
        if (d->used && d->step == f->step && d->gen == f->gen && d->sender == f->sender && d->kind == f->kind)
            return 1;
    }
    return 0;
}

static void remove_pending(fsgd_kasm_t *a, size_t i)
{
    a->held -= a->p[i].bytes;
    pending_free(&a->p[i]);
    a->p[i] = a->p[--a->n];
}

void fsgd_kasm_prune(fsgd_kasm_t *a, uint64_t below_step)
{
    for (size_t i = 0; i < a->n;)
        if (a->p[i].step < below_step)
            remove_pending(a, i);
        else
            i++;
}

void fsgd_kasm_set_limits(fsgd_kasm_t *a, size_t max_message, size_t max_total)
{
    a->lim_msg = max_message;
    a->lim_total = max_total;
}

size_t fsgd_kasm_held(const fsgd_kasm_t *a) { return a->held; }

int fsgd_kasm_completed(const fsgd_kasm_t *a, const fsgd_kframe_t *f) { return is_done(a, f); }

size_t fsgd_kasm_held_max(const fsgd_kasm_t *a) { return a->held_max; }

void fsgd_kasm_forget(fsgd_kasm_t *a, const fsgd_kframe_t *f)
{
    for (size_t i = 0; i < DONE_RING; i++) {
        done_key_t *d = &a->done[i];
        if (d->used && d->step == f->step && d->gen == f->gen && d->sender == f->sender && d->kind == f->kind)
            d->used = 0;
    }
    for (size_t i = 0; i < a->n; i++) {
        const pending_t *p = &a->p[i];
        if (p->step == f->step && p->gen == f->gen && p->sender == f->sender && p->kind == f->kind) {
            remove_pending(a, i);
            break;
        }
    }
}

/* The pending message f belongs to (*i), made when f is its first frame. */
static int pending_of(fsgd_kasm_t *a, const fsgd_kframe_t *f, size_t *i, char *err, size_t errsz)
{
    for (*i = 0; *i < a->n; ++*i) {
        const pending_t *p = &a->p[*i];
        if (p->step == f->step && p->gen == f->gen && p->sender == f->sender && p->kind == f->kind)
            return 0;
    }
    if (a->n == a->cap) {
        size_t nc = a->cap ? 2 * a->cap : 16;
        pending_t *np = realloc(a->p, nc * sizeof *np);
        if (!np)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "reassembly: out of memory");
        a->p = np;
        a->cap = nc;
    }
    pending_t *p = &a->p[a->n];
    memset(p, 0, sizeof *p);
    p->kind = f->kind;
    p->gen = f->gen;
    p->sender = f->sender;
    p->step = f->step;
    p->nchunks = f->nchunks;
    a->n++;
    return 0;
}

/* A complete message's chunks in order into a->out (*total bytes). */
static int pending_join(fsgd_kasm_t *a, const pending_t *p, size_t *total, char *err, size_t errsz)
{
    /* every index 0..n-1 arrived once: order[c] = where chunk c is */
    uint32_t *order = malloc(p->nchunks * sizeof *order);
    if (!order)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "reassembly: out of memory");
    size_t sum = 0;
    for (uint32_t c = 0; c < p->nchunks; c++) {
        order[p->idx[c]] = c;
        sum += p->part_len[c];
    }
    if (!a->out || sum > a->out_cap) {
        uint8_t *no = realloc(a->out, sum ? sum : 1);
        if (!no) {
            free(order);
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "reassembly: out of memory for %zu bytes", sum);
        }
        a->out = no;
        a->out_cap = sum ? sum : 1;
    }
    size_t off = 0;
    for (uint32_t c = 0; c < p->nchunks; c++) {
        uint32_t k = order[c];
        if (p->part_len[k])
            memcpy(a->out + off, p->parts[k], p->part_len[k]);
        off += p->part_len[k];
    }
    free(order);
    *total = sum;
    return 0;
}

int fsgd_kasm_feed(fsgd_kasm_t *a, const fsgd_kframe_t *f, const uint8_t **body, size_t *len, char *err,
                   size_t errsz)
{
    if (is_done(a, f))
        return FSGD_KASM_DUP;
    /* With limits, no frame can make the reassembler hold more than a
     * message's worth per message and max_total in all: senders never write
     * chunks above FSGD_KBUS_CHUNK_MAX, so a larger one is not theirs. */
    if (a->lim_msg && f->body_len > FSGD_KBUS_CHUNK_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                            "reassembly: sender %u step %llu chunk of %u bytes, above the %u-byte chunks fsgd writes",
                            f->sender, (unsigned long long)f->step, f->body_len, FSGD_KBUS_CHUNK_MAX);
    if (a->lim_total && a->held + f->body_len > a->lim_total)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                            "reassembly: sender %u step %llu: holding %zu bytes of incomplete messages already, "
                            "limit %zu",
                            f->sender, (unsigned long long)f->step, a->held, a->lim_total);
    size_t i;
    int rc = pending_of(a, f, &i, err, errsz);
    if (rc < 0)
        return rc;
    pending_t *p = &a->p[i];
    if (p->nchunks != f->nchunks)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "reassembly: sender %u step %llu chunk %u says %u chunks, earlier chunks said %u",
                            f->sender, (unsigned long long)f->step, f->chunk, f->nchunks, p->nchunks);
    if (pending_has(p, f->chunk))
        return FSGD_KASM_DUP;
    if (a->lim_msg && p->bytes + f->body_len > a->lim_msg) {
        size_t had = p->bytes;
        if (p->have == 0)
            remove_pending(a, i); /* made for this frame: leave nothing behind */
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                            "reassembly: sender %u step %llu: message of %u chunks grows past %zu bytes (%zu held)",
                            f->sender, (unsigned long long)f->step, f->nchunks, a->lim_msg, had);
    }
    if (pending_add(p, f->chunk, f->body, f->body_len) < 0) {
        if (p->have == 0)
            remove_pending(a, i);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "reassembly: out of memory");
    }
    a->held += f->body_len;
    if (a->held > a->held_max)
        a->held_max = a->held;
    if (p->have < p->nchunks)
        return FSGD_KASM_PENDING;
    size_t total = 0;
    if ((rc = pending_join(a, p, &total, err, errsz)) < 0)
        return rc;
    done_key_t *d = &a->done[a->done_next++ % DONE_RING];
    d->step = p->step;
    d->gen = p->gen;
    d->sender = p->sender;
    d->kind = p->kind;
    d->used = 1;
    remove_pending(a, i);
    *body = a->out;
    *len = total;
    return FSGD_KASM_DONE;
}
