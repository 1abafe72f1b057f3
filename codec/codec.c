/* The codec registry and everything codecs share: spec parsing, the common
 * message header and CRC (FORMAT.md), input validation and error feedback. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "fsgd/crc32c.h"
#include "codec_testing.h"

static const fsgd_codec_vt_t *const registry[] = {
    &fsgd_codec_vt_fastsgd,
    &fsgd_codec_vt_none,
    &fsgd_codec_vt_logquant,
    &fsgd_codec_vt_mqgrad,
    &fsgd_codec_vt_topk,
    &fsgd_codec_vt_efsign,
    &fsgd_codec_vt_sketchml,
};
#define N_CODECS (sizeof registry / sizeof *registry)

static const codec_param_def_t ef_param = {"ef", PARAM_INT, 0, 1, 0, 0, NULL};

static const fsgd_codec_vt_t *find_by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < N_CODECS; i++)
        if (strlen(registry[i]->name) == len && memcmp(registry[i]->name, name, len) == 0)
            return registry[i];
    return NULL;
}

static const fsgd_codec_vt_t *find_by_id(int id)
{
    for (size_t i = 0; i < N_CODECS; i++)
        if (registry[i]->id == id)
            return registry[i];
    return NULL;
}

const char *fsgd_codec_list(void) { return "fastsgd none logquant mqgrad topk efsign sketchml"; }

/* The parameter table of a codec with "ef" appended for lossy codecs. */
static size_t n_params(const fsgd_codec_vt_t *vt) { return vt->n_params + (vt->lossy ? 1 : 0); }
static const codec_param_def_t *param_def(const fsgd_codec_vt_t *vt, size_t i)
{
    return i < vt->n_params ? &vt->params[i] : &ef_param;
}

/* Shortest %g form that reads back to the same double. */
static void fmt_real(char *buf, size_t sz, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sz, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static int parse_value(const fsgd_codec_vt_t *vt, const codec_param_def_t *d, const char *val, size_t vlen,
                       double *out, char *err, size_t errsz)
{
    char buf[64];
    if (vlen == 0 || vlen >= sizeof buf)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: parameter %s: missing or too long value",
                            vt->name, d->name);
    memcpy(buf, val, vlen);
    buf[vlen] = '\0';
    if (d->kind == PARAM_ENUM) {
        for (int i = 0; d->choices[i]; i++)
            if (strcmp(d->choices[i], buf) == 0) {
                *out = i;
                return 0;
            }
        char opts[128] = "";
        for (int i = 0; d->choices[i]; i++) {
            strncat(opts, i ? "|" : "", sizeof opts - strlen(opts) - 1);
            strncat(opts, d->choices[i], sizeof opts - strlen(opts) - 1);
        }
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: parameter %s: '%s' is not one of %s", vt->name,
                            d->name, buf, opts);
    }
    char *end;
    double v = strtod(buf, &end);
    if (end == buf || *end != '\0' || !isfinite(v))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: parameter %s: '%s' is not a number", vt->name,
                            d->name, buf);
    if (d->kind == PARAM_INT && v != floor(v))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: parameter %s: '%s' is not an integer", vt->name,
                            d->name, buf);
    if ((d->lo_open ? v <= d->lo : v < d->lo) || v > d->hi) {
        char lo[32], hi[32];
        fmt_real(lo, sizeof lo, d->lo);
        fmt_real(hi, sizeof hi, d->hi);
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: parameter %s=%s out of range %s%s, %s]", vt->name,
                            d->name, buf, d->lo_open ? "(" : "[", lo, hi);
    }
    *out = v;
    return 0;
}

static void make_spec(fsgd_codec_t *c)
{
    const fsgd_codec_vt_t *vt = c->vt;
    size_t pos = (size_t)snprintf(c->spec, sizeof c->spec, "%s", vt->name);
    for (size_t i = 0; i < n_params(vt) && pos < sizeof c->spec; i++) {
        const codec_param_def_t *d = param_def(vt, i);
        char v[40];
        if (d->kind == PARAM_ENUM)
            snprintf(v, sizeof v, "%s", d->choices[(int)c->p[i]]);
        else if (d->kind == PARAM_INT)
            snprintf(v, sizeof v, "%.0f", c->p[i]);
        else
            fmt_real(v, sizeof v, c->p[i]);
        pos += (size_t)snprintf(c->spec + pos, sizeof c->spec - pos, "%c%s=%s", i ? ',' : ':', d->name, v);
    }
}

fsgd_codec_t *fsgd_codec_new(const char *spec, uint64_t dim, char *err, size_t errsz)
{
    if (!spec) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec: no spec");
        return NULL;
    }
    if (dim == 0 || dim > (1ull << 32)) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec '%s': dim %llu out of range [1, 2^32]", spec,
                     (unsigned long long)dim);
        return NULL;
    }
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const fsgd_codec_vt_t *vt = find_by_name(spec, nlen);
    if (!vt) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unknown codec '%.*s' (known: %s)", (int)nlen, spec,
                     fsgd_codec_list());
        return NULL;
    }
    fsgd_codec_t *c = calloc(1, sizeof *c);
    if (!c) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "codec %s: out of memory", vt->name);
        return NULL;
    }
    c->vt = vt;
    c->dim = dim;
    size_t np = n_params(vt);
    for (size_t i = 0; i < np; i++)
        c->p[i] = param_def(vt, i)->def;
    if (vt->lossy)
        c->p[np - 1] = vt->ef_default;
    const char *s = colon ? colon + 1 : NULL;
    while (s && *s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        size_t klen = eq ? (size_t)(eq - s) : len;
        size_t i = 0;
        for (; i < np; i++)
            if (strlen(param_def(vt, i)->name) == klen && memcmp(param_def(vt, i)->name, s, klen) == 0)
                break;
        if (i == np) {
            char known[128] = "";
            for (size_t j = 0; j < np; j++) {
                strncat(known, j ? ", " : "", sizeof known - strlen(known) - 1);
                strncat(known, param_def(vt, j)->name, sizeof known - strlen(known) - 1);
            }
            fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: unknown parameter '%.*s' (known: %s)", vt->name,
                         (int)klen, s, np ? known : "none");
            goto fail;
        }
        if (!eq) {
            fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: parameter %s: expected %s=value", vt->name,
                         param_def(vt, i)->name, param_def(vt, i)->name);
            goto fail;
        }
        if (c->given[i]) {
            fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: parameter %s given twice", vt->name,
                         param_def(vt, i)->name);
            goto fail;
        }
        if (parse_value(vt, param_def(vt, i), eq + 1, len - klen - 1, &c->p[i], err, errsz) < 0)
            goto fail;
        c->given[i] = 1;
        s = comma ? comma + 1 : NULL;
        if (comma && !*s) {
            fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: trailing ',' in spec", vt->name);
            goto fail;
        }
    }
    if (colon && !colon[1]) {
        fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: empty parameter list after ':'", vt->name);
        goto fail;
    }
    c->ef = vt->lossy ? (int)c->p[np - 1] : 0;
    if (vt->check && vt->check(c, err, errsz) < 0)
        goto fail;
    make_spec(c);
    return c;
fail:
    free(c);
    return NULL;
}

void fsgd_codec_destroy(fsgd_codec_t *c)
{
    if (!c)
        return;
    fsgd_sparse_free(&c->residual);
    fsgd_sparse_free(&c->merged);
    fsgd_sparse_free(&c->sent);
    fsgd_sparse_free(&c->nextres);
    free(c->scratch);
    free(c);
}

const char *fsgd_codec_name(const fsgd_codec_t *c) { return c->vt->name; }
const char *fsgd_codec_spec(const fsgd_codec_t *c) { return c->spec; }
int fsgd_codec_id(const fsgd_codec_t *c) { return c->vt->id; }
int fsgd_codec_is_lossless(const fsgd_codec_t *c) { return !c->vt->lossy; }
void fsgd_codec_last_stats(const fsgd_codec_t *c, fsgd_codec_stats_t *st) { *st = c->last; }
const fsgd_sparse_t *fsgd_codec_residual(const fsgd_codec_t *c) { return &c->residual; }
double fsgd_codec_whole_scale(const fsgd_codec_t *c, const float *whole, size_t n)
{
    return c->vt->whole_scale ? c->vt->whole_scale(whole, n) : NAN;
}

void fsgd_codec_set_whole(fsgd_codec_t *c, double scale)
{
    c->whole_set = c->vt->whole_scale != NULL && !isnan(scale);
    c->whole_sum = c->whole_set ? scale : 0;
}

void fsgd_codec_reset(fsgd_codec_t *c)
{
    c->residual.n = 0;
    c->can_undo = 0;
}

int fsgd_codec_undo_last(fsgd_codec_t *c)
{
    if (!c->ef || !c->can_undo)
        return 0;
    /* ef_update swapped the residual before the encode into nextres. */
    fsgd_sparse_t t = c->residual;
    c->residual = c->nextres;
    c->nextres = t;
    c->can_undo = 0;
    return 1;
}

size_t fsgd_codec_bound(const fsgd_codec_t *c, size_t n)
{
    /* Under error feedback the residual can add up to min(dim, ...) entries. */
    if (c->ef) {
        size_t extra = c->residual.n;
        n = (n + extra > c->dim) ? (size_t)c->dim : n + extra;
        if (n < c->residual.n)
            n = c->residual.n;
    }
    return FSGD_CODEC_HDR + c->vt->bound(c, n) + FSGD_CODEC_TRAILER;
}

int fsgd_codec_scratch(fsgd_codec_t *c, size_t bytes)
{
    if (bytes <= c->scratch_cap)
        return 0;
    size_t cap = c->scratch_cap ? c->scratch_cap : 4096;
    while (cap < bytes)
        cap *= 2;
    void *p = realloc(c->scratch, cap);
    if (!p)
        return FSGD_E_NOMEM;
    c->scratch = p;
    c->scratch_cap = cap;
    return 0;
}

/* Keys strictly increasing and < dim, values finite: one pass. */
static int check_input(const fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, char *err,
                       size_t errsz)
{
    if (n > UINT32_MAX || n > c->dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: %zu entries for dim %llu", c->vt->name, n,
                            (unsigned long long)c->dim);
    if (n == 0)
        return 0;
    /* Two branch-free passes the compiler vectorizes; the slow loop below
     * runs only to name the first bad entry. */
    uint32_t inf = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &vals[i], 4);
        inf |= (u & 0x7f800000u) == 0x7f800000u;
    }
    for (size_t i = 1; i < n; i++)
        bad |= keys[i] <= keys[i - 1];
    bad |= (uint64_t)keys[n - 1] >= c->dim;
    if (!bad && !inf)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(vals[i]))
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "codec %s: value %g at entry %zu (key %u)",
                                c->vt->name, (double)vals[i], i, keys[i]);
        if (i > 0 && keys[i] <= keys[i - 1])
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "codec %s: keys not strictly increasing at entry %zu (%u after %u)", c->vt->name,
                                i, keys[i], keys[i - 1]);
        if ((uint64_t)keys[i] >= c->dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "codec %s: key %u >= dim %llu at entry %zu",
                                c->vt->name, keys[i], (unsigned long long)c->dim, i);
    }
    return 0;
}

/* merged = input + residual over the union of keys. */
static int ef_merge(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, char *err, size_t errsz)
{
    const fsgd_sparse_t *r = &c->residual;
    if (fsgd_sparse_reserve(&c->merged, n + r->n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "codec %s: out of memory", c->vt->name);
    fsgd_sparse_t *m = &c->merged;
    size_t i = 0, j = 0, o = 0;
    while (i < n || j < r->n) {
        if (j == r->n || (i < n && keys[i] < r->keys[j])) {
            m->keys[o] = keys[i];
            m->vals[o++] = vals[i++];
        } else if (i == n || r->keys[j] < keys[i]) {
            m->keys[o] = r->keys[j];
            m->vals[o++] = r->vals[j++];
        } else {
            float s = vals[i] + r->vals[j];
            if (!isfinite(s))
                return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE,
                                    "codec %s: value + residual overflows at key %u", c->vt->name, keys[i]);
            m->keys[o] = keys[i];
            m->vals[o++] = s;
            i++;
            j++;
        }
    }
    m->n = o;
    return 0;
}

/* residual = merged - sent (sent's keys are a subset of merged's). */
static int ef_update(fsgd_codec_t *c, char *err, size_t errsz)
{
    const fsgd_sparse_t *m = &c->merged, *s = &c->sent;
    fsgd_sparse_t *r = &c->nextres;
    if (fsgd_sparse_reserve(r, m->n) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "codec %s: out of memory", c->vt->name);
    size_t j = 0, o = 0;
    for (size_t i = 0; i < m->n; i++) {
        float v = m->vals[i];
        if (j < s->n && s->keys[j] == m->keys[i])
            v = v - s->vals[j++];
        if (v != 0.0f) {
            r->keys[o] = m->keys[i];
            r->vals[o++] = v;
        }
    }
    r->n = o;
    fsgd_sparse_t t = c->residual;
    c->residual = *r;
    *r = t;
    return 0;
}

size_t fsgd_codec_frame_write(const fsgd_codec_t *c, uint8_t *msg, uint32_t count, size_t body_len)
{
    memcpy(msg, FSGD_CODEC_MAGIC, 4);
    msg[4] = FSGD_CODEC_VERSION;
    msg[5] = c->vt->id;
    fsgd_le_put16(msg + 6, 0);
    fsgd_le_put64(msg + 8, c->dim);
    fsgd_le_put32(msg + 16, count);
    fsgd_le_put32(msg + 20, (uint32_t)body_len);
    size_t total = FSGD_CODEC_HDR + body_len;
    fsgd_le_put32(msg + total, fsgd_crc32c(0, msg, total));
    return total + FSGD_CODEC_TRAILER;
}

/* fsgd_codec_encode; when sent != NULL (ef off), also what the decoder of
 * the message will produce. */
static int encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, fsgd_outbuf_t *buf,
                  fsgd_sparse_t *sent, char *err, size_t errsz)
{
    uint8_t *out = buf->dst;
    size_t cap = buf->cap;
    buf->len = 0;
    c->can_undo = 0;
    FSGD_TRY(check_input(c, keys, vals, n, err, errsz));
    if (sent) {
        if (fsgd_sparse_reserve(sent, n) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "codec %s: out of memory", c->vt->name);
        sent->n = 0;
    } else if (c->ef) {
        FSGD_TRY(ef_merge(c, keys, vals, n, err, errsz));
        keys = c->merged.keys;
        vals = c->merged.vals;
        n = c->merged.n;
        if (fsgd_sparse_reserve(&c->sent, n) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "codec %s: out of memory", c->vt->name);
        c->sent.n = 0;
    }
    if (cap < FSGD_CODEC_HDR + FSGD_CODEC_TRAILER)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "codec %s: buffer of %zu bytes < header", c->vt->name,
                            cap);
    fsgd_codec_stats_t st = c->last;
    memset(&c->last, 0, sizeof c->last);
    size_t blen = 0;
    uint32_t count = 0;
    int rc = c->vt->encode(c, keys, vals, n, out + FSGD_CODEC_HDR, cap - FSGD_CODEC_HDR - FSGD_CODEC_TRAILER,
                           &blen, &count, sent ? sent : c->ef ? &c->sent : NULL, err, errsz);
    if (rc < 0) {
        c->last = st;
        return rc;
    }
    size_t total = fsgd_codec_frame_write(c, out, count, blen);
    if (c->ef && !sent) {
        FSGD_TRY(ef_update(c, err, errsz));
        c->can_undo = 1;
    }
    c->last.n_in = n;
    c->last.n_sent = count;
    c->last.bytes = total;
    c->last.header_bytes += FSGD_CODEC_HDR + FSGD_CODEC_TRAILER;
    buf->len = total;
    return 0;
}

int fsgd_codec_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, fsgd_outbuf_t *out,
                      char *err, size_t errsz)
{
    return encode(c, keys, vals, n, out, NULL, err, errsz);
}

int fsgd_codec_encode_sent(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, fsgd_outbuf_t *out,
                           fsgd_sparse_t *sent, char *err, size_t errsz)
{
    out->len = 0;
    if (c->ef)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "codec %s: encode_sent needs ef=0 (the residual keeps what "
                            "was not sent)", c->vt->name);
    return encode(c, keys, vals, n, out, sent, err, errsz);
}

int fsgd_codec_decode(const uint8_t *msg, size_t len, uint64_t dim, fsgd_sparse_t *out, char *err,
                      size_t errsz)
{
    out->n = 0;
    if (len < FSGD_CODEC_HDR + FSGD_CODEC_TRAILER)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field header at offset 0: message of %zu bytes < %d",
                            len, FSGD_CODEC_HDR + FSGD_CODEC_TRAILER);
    if (memcmp(msg, FSGD_CODEC_MAGIC, 4) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field magic at offset 0: not an fsgd codec message");
    if (msg[4] != FSGD_CODEC_VERSION)
        return fsgd_err_fmt(err, errsz, FSGD_E_VERSION, "field version at offset 4: version %u (supported: %d)",
                            msg[4], FSGD_CODEC_VERSION);
    uint32_t blen = fsgd_le_get32(msg + 20);
    if ((uint64_t)blen + FSGD_CODEC_HDR + FSGD_CODEC_TRAILER > len)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                            "field body_len at offset 20: %u body bytes but only %zu present", blen,
                            len - FSGD_CODEC_HDR - FSGD_CODEC_TRAILER);
    if ((uint64_t)blen + FSGD_CODEC_HDR + FSGD_CODEC_TRAILER < len)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field body_len at offset 20: %zu trailing bytes",
                            len - blen - FSGD_CODEC_HDR - FSGD_CODEC_TRAILER);
    size_t crc_off = FSGD_CODEC_HDR + blen;
    uint32_t want = fsgd_le_get32(msg + crc_off), got = fsgd_crc32c(0, msg, crc_off);
    if (want != got)
        return fsgd_err_fmt(err, errsz, FSGD_E_CRC, "field crc32c at offset %zu: stored %08x, computed %08x",
                            crc_off, want, got);
    const fsgd_codec_vt_t *vt = find_by_id(msg[5]);
    if (!vt)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field codec_id at offset 5: unknown codec id %u", msg[5]);
    if (fsgd_le_get16(msg + 6) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field flags at offset 6: reserved bits set (0x%04x)",
                            fsgd_le_get16(msg + 6));
    uint64_t mdim = fsgd_le_get64(msg + 8);
    if (mdim == 0 || mdim > (1ull << 32))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field dim at offset 8: %llu out of range [1, 2^32]",
                            (unsigned long long)mdim);
    if (dim && mdim != dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "field dim at offset 8: message dim %llu != expected %llu",
                            (unsigned long long)mdim, (unsigned long long)dim);
    uint32_t count = fsgd_le_get32(msg + 16);
    if (count > mdim)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field count at offset 16: %u entries > dim %llu", count,
                            (unsigned long long)mdim);
    int rc = vt->decode(msg, FSGD_CODEC_HDR, blen, count, mdim, out, err, errsz);
    if (rc < 0)
        out->n = 0;
    return rc;
}
