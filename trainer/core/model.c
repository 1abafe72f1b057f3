/* Linear models and their binary file format (trainer/MODEL_FORMAT.md), and
 * the LIBLINEAR text export. The reader trusts nothing: every field is
 * bounds-checked before it is read and every error names the field and the
 * byte offset. */
#include "fsgd/model.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/hugepages.h"
#include "fsgd/le.h"
#include "fsgd/outfile.h"

#define MODEL_MAGIC "FSGDMODL"
#define MODEL_VERSION 4    /* the newest this build writes and reads */
#define MODEL_VERSION_MIN 1 /* version 1: no input section; still written for LIBSVM models */
#define FLAG_BIAS 1u
#define FLAG_INPUT 2u      /* version 2 and 3: an input section follows body_crc */
#define FLAG_STATE 4u      /* version 3: an optimizer state section follows (required there) */
#define STATE_HEAD 20      /* kind, reserved, step, n */
#define STATE_ENTRY 16     /* key, a, b, c */
#define HEADER_BYTES 44 /* up to and including header_crc */
#define ENTRY_BYTES 8
#define MAX_DIM (UINT64_C(1) << 32)

/* Header fields, for reading and for naming the place of a short file. */
enum { F_MAGIC, F_VERSION, F_KIND, F_FLAGS, F_RESERVED, F_DIM, F_NNZ, F_BIAS, F_BIASW, F_HCRC, F_COUNT };
static const struct {
    size_t off, len;
    const char *name;
} field[F_COUNT] = {
    {0, 8, "magic"}, {8, 2, "version"}, {10, 1, "kind"},   {11, 1, "flags"},        {12, 4, "reserved"},
    {16, 8, "dim"},  {24, 8, "nnz"},    {32, 4, "bias"},   {36, 4, "bias_weight"}, {40, 4, "header_crc"},
};

int fsgd_model_init(fsgd_model_t *m, fsgd_loss_kind_t kind, uint64_t dim, int has_bias, float bias)
{
    memset(m, 0, sizeof *m);
    if (dim > MAX_DIM || dim + 1 > SIZE_MAX / sizeof(float))
        return FSGD_E_RANGE;
    m->w = calloc((size_t)dim + 1, sizeof *m->w);
    if (!m->w)
        return FSGD_E_NOMEM;
    m->kind = kind;
    m->dim = dim;
    m->has_bias = has_bias ? 1 : 0;
    m->bias = bias;
    return FSGD_E_OK;
}

static void state_free(fsgd_model_state_t *st)
{
    free(st->keys);
    free(st->a);
    free(st->b);
    free(st->c);
    memset(st, 0, sizeof *st);
}

void fsgd_model_free(fsgd_model_t *m)
{
    if (!m)
        return;
    free(m->w);
    state_free(&m->state);
    memset(m, 0, sizeof *m);
}

int fsgd_model_state_alloc(fsgd_model_t *m, fsgd_model_state_kind_t kind, uint64_t n)
{
    state_free(&m->state);
    if (n > (uint64_t)SIZE_MAX / sizeof(float))
        return FSGD_E_NOMEM;
    size_t k = n ? (size_t)n : 1;
    fsgd_model_state_t *st = &m->state;
    st->keys = calloc(k, sizeof *st->keys);
    st->a = calloc(k, sizeof *st->a);
    st->b = calloc(k, sizeof *st->b);
    st->c = calloc(k, sizeof *st->c);
    if (!st->keys || !st->a || !st->b || !st->c) {
        state_free(st);
        return FSGD_E_NOMEM;
    }
    st->kind = kind;
    st->n = n;
    return FSGD_E_OK;
}

const char *fsgd_model_state_name(fsgd_model_state_kind_t kind)
{
    switch (kind) {
    case FSGD_MODEL_STATE_ADAM:
        return "adam";
    case FSGD_MODEL_STATE_ADAM_COUNTED:
        return "adam (per-key counts)";
    case FSGD_MODEL_STATE_FTRL:
        return "ftrl";
    default:
        return "none";
    }
}

/* The rules of a state section's values (MODEL_FORMAT.md), for writer and
 * reader alike: NULL when entry i is valid, else what is wrong. */
static const char *state_entry_problem(int kind, uint64_t step, uint64_t limit, uint32_t key, uint32_t prev,
                                       uint64_t i, float a, float b, uint32_t c)
{
    (void)step;
    if (key >= limit)
        return "key beyond dim (+1 for the intercept)";
    if (i > 0 && key <= prev)
        return "key not above the previous key";
    if (!isfinite(a) || !isfinite(b))
        return "value not finite";
    if (b < 0)
        return "second value (v or n) negative";
    if (kind == FSGD_MODEL_STATE_ADAM_COUNTED ? c > 32767 : c != 0)
        return kind == FSGD_MODEL_STATE_ADAM_COUNTED ? "count above 32767" : "count must be 0";
    return NULL;
}

double fsgd_model_margin(const fsgd_model_t *m, const uint32_t *col, const float *val, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        if (col[i] < m->dim)
            s += (double)m->w[col[i]] * val[i];
    if (m->has_bias)
        s += (double)m->bias * m->w[m->dim];
    return s;
}

uint64_t fsgd_model_nnz(const fsgd_model_t *m)
{
    uint64_t n = 0;
    for (uint64_t k = 0; k < m->dim; k++)
        n += m->w[k] != 0;
    return n;
}

static int valid_kind(int k)
{
    return k == FSGD_LOSS_LOGISTIC || k == FSGD_LOSS_SQUARED || k == FSGD_LOSS_HINGE;
}

/* ---- writing ---------------------------------------------------------- */

/* Where encoded bytes go: a file descriptor (through a buffer) or memory. */
typedef struct sink {
    int fd;            /* >= 0: write to this file */
    uint8_t *mem;      /* otherwise: append here (pre-sized) */
    size_t pos;
    uint8_t buf[1 << 16];
    size_t used;
} sink_t;

static int sink_flush(sink_t *s)
{
    size_t off = 0;
    while (off < s->used) {
        ssize_t w = write(s->fd, s->buf + off, s->used - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    s->used = 0;
    return 0;
}

static int sink_put(sink_t *s, const uint8_t *p, size_t n)
{
    if (s->fd < 0) {
        memcpy(s->mem + s->pos, p, n);
        s->pos += n;
        return 0;
    }
    if (s->used + n > sizeof s->buf && sink_flush(s) < 0)
        return -1;
    memcpy(s->buf + s->used, p, n);
    s->used += n;
    s->pos += n;
    return 0;
}

/* Checks that m can be written; counts its nonzero weights. */
static int check_model(const fsgd_model_t *m, uint64_t *nnz, char *err, size_t errsz)
{
    if (!valid_kind(m->kind))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "model kind %d is not logistic, linear or svm", (int)m->kind);
    if (m->dim == 0 || m->dim > MAX_DIM)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "model dim %llu is outside 1..2^32",
                            (unsigned long long)m->dim);
    if (!m->w)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "model has no weights");
    if (!isfinite(m->bias))
        return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "model bias value is %g", (double)m->bias);
    uint64_t n = 0;
    for (uint64_t k = 0; k <= m->dim; k++) {
        if (k == m->dim && !m->has_bias)
            break;
        if (!isfinite(m->w[k])) {
            if (k == m->dim)
                return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "model intercept weight is %g", (double)m->w[k]);
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "model weight of column %llu is %g",
                                (unsigned long long)k, (double)m->w[k]);
        }
        n += k < m->dim && m->w[k] != 0;
    }
    *nnz = n;
    const fsgd_model_state_t *st = &m->state;
    if (st->kind != FSGD_MODEL_STATE_NONE) {
        if (st->kind < FSGD_MODEL_STATE_ADAM || st->kind > FSGD_MODEL_STATE_FTRL)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "model state kind %d is unknown", (int)st->kind);
        if (st->kind == FSGD_MODEL_STATE_FTRL && st->step)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "ftrl state with a step count");
        const uint64_t limit = m->dim + (m->has_bias ? 1 : 0);
        if (st->n > limit)
            return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "%llu state entries for %llu keys",
                                (unsigned long long)st->n, (unsigned long long)limit);
        for (uint64_t i = 0; i < st->n; i++) {
            const char *why = state_entry_problem(st->kind, st->step, limit, st->keys[i], i ? st->keys[i - 1] : 0, i,
                                                  st->a[i], st->b[i], st->c[i]);
            if (why)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "model state entry %llu (key %u): %s",
                                    (unsigned long long)i, st->keys[i], why);
        }
    }
    return FSGD_E_OK;
}

/* Version 4: an input spec a version-2/3 reader would misread (hashed
 * LIBSVM, VW text, crosses): everything but a plain tsv:/csv: spec. */
static int input_needs_v4(const char *input)
{
    if (!input[0])
        return 0;
    if (strncmp(input, "tsv:", 4) && strncmp(input, "csv:", 4))
        return 1;
    return strstr(input, ":interactions=") != NULL;
}

int fsgd_model_version(const fsgd_model_t *m)
{
    return input_needs_v4(m->input) ? 4 : m->state.kind != FSGD_MODEL_STATE_NONE ? 3 : m->input[0] ? 2 : 1;
}

static void encode_header(const fsgd_model_t *m, uint64_t nnz, float bias_w, uint8_t h[HEADER_BYTES])
{
    memset(h, 0, HEADER_BYTES);
    memcpy(h, MODEL_MAGIC, 8);
    /* Version 1 unless there is an input spec, so LIBSVM models stay readable
     * by version-1 readers byte for byte. */
    const int state = m->state.kind != FSGD_MODEL_STATE_NONE;
    fsgd_le_put16(h + 8, (uint16_t)fsgd_model_version(m));
    h[10] = (uint8_t)m->kind;
    h[11] = (uint8_t)((m->has_bias ? FLAG_BIAS : 0) | (m->input[0] ? FLAG_INPUT : 0) | (state ? FLAG_STATE : 0));
    fsgd_le_put64(h + 16, m->dim);
    fsgd_le_put64(h + 24, nnz);
    fsgd_le_putf32(h + 32, m->bias);
    /* Without an intercept the bias weight is stored as +0 whatever w[dim] holds. */
    fsgd_le_putf32(h + 36, m->has_bias ? bias_w : 0.0f);
    fsgd_le_put32(h + 40, fsgd_crc32c(0, h, 40));
}

/* Version 2's input section: u32 length, the spec text, u32 CRC32C of both. */
static int encode_input(const fsgd_model_t *m, sink_t *s)
{
    size_t n = strnlen(m->input, FSGD_MODEL_INPUT_MAX - 1);
    uint8_t b[4 + FSGD_MODEL_INPUT_MAX + 4];
    fsgd_le_put32(b, (uint32_t)n);
    memcpy(b + 4, m->input, n);
    fsgd_le_put32(b + 4 + n, fsgd_crc32c(0, b, 4 + n));
    return sink_put(s, b, 8 + n);
}

static size_t input_bytes(const fsgd_model_t *m)
{
    return m->input[0] ? 8 + strnlen(m->input, FSGD_MODEL_INPUT_MAX - 1) : 0;
}

static size_t state_bytes(const fsgd_model_t *m)
{
    return m->state.kind != FSGD_MODEL_STATE_NONE ? STATE_HEAD + (size_t)m->state.n * STATE_ENTRY + 4 : 0;
}

/* Version 3's state section: kind, reserved, step, n, the entries, CRC32C. */
static int encode_state(const fsgd_model_t *m, sink_t *s)
{
    const fsgd_model_state_t *st = &m->state;
    uint8_t h[STATE_HEAD] = {0};
    h[0] = (uint8_t)st->kind;
    fsgd_le_put64(h + 4, st->step);
    fsgd_le_put64(h + 12, st->n);
    uint32_t crc = fsgd_crc32c(0, h, sizeof h);
    if (sink_put(s, h, sizeof h) < 0)
        return -1;
    for (uint64_t i = 0; i < st->n; i++) {
        uint8_t e[STATE_ENTRY];
        fsgd_le_put32(e, st->keys[i]);
        fsgd_le_putf32(e + 4, st->a[i]);
        fsgd_le_putf32(e + 8, st->b[i]);
        fsgd_le_put32(e + 12, st->c[i]);
        crc = fsgd_crc32c(crc, e, sizeof e);
        if (sink_put(s, e, sizeof e) < 0)
            return -1;
    }
    uint8_t c[4];
    fsgd_le_put32(c, crc);
    return sink_put(s, c, sizeof c);
}

/* Writes header, entries and body_crc into s. Returns 0 or -1 (write failed). */
/* One weight entry, into the sink and the entries' CRC. */
static int put_entry(sink_t *s, uint32_t *crc, uint32_t k, float w)
{
    uint8_t e[ENTRY_BYTES];
    fsgd_le_put32(e, k);
    fsgd_le_putf32(e + 4, w);
    *crc = fsgd_crc32c(*crc, e, sizeof e);
    return sink_put(s, e, sizeof e);
}

/* m's file; its weights are m->w, or pairs when not NULL (fsgd_model_save_pairs). */
static int encode_to(const fsgd_model_t *m, const fsgd_sparse_t *pairs, uint64_t nnz, sink_t *s)
{
    uint8_t h[HEADER_BYTES];
    float bias_w = 0.0f;
    if (!pairs)
        bias_w = m->w[m->dim];
    else if (pairs->n && pairs->keys[pairs->n - 1] == m->dim)
        bias_w = pairs->vals[pairs->n - 1];
    encode_header(m, nnz, bias_w, h);
    if (sink_put(s, h, sizeof h) < 0)
        return -1;
    uint32_t crc = 0;
    for (size_t i = 0; pairs && i < pairs->n; i++)
        if (pairs->keys[i] < m->dim && pairs->vals[i] != 0 && put_entry(s, &crc, pairs->keys[i], pairs->vals[i]) < 0)
            return -1;
    for (uint64_t k = 0; !pairs && k < m->dim; k++)
        if (m->w[k] != 0 && put_entry(s, &crc, (uint32_t)k, m->w[k]) < 0)
            return -1;
    uint8_t c[4];
    fsgd_le_put32(c, crc);
    if (sink_put(s, c, sizeof c) < 0)
        return -1;
    if (m->input[0] && encode_input(m, s) < 0)
        return -1;
    return m->state.kind != FSGD_MODEL_STATE_NONE ? encode_state(m, s) : 0;
}

int fsgd_model_encode(const fsgd_model_t *m, uint8_t **out, size_t *len, char *err, size_t errsz)
{
    uint64_t nnz;
    *out = NULL;
    *len = 0;
    FSGD_TRY(check_model(m, &nnz, err, errsz));
    size_t total = HEADER_BYTES + (size_t)nnz * ENTRY_BYTES + 4 + input_bytes(m) + state_bytes(m);
    sink_t *s = malloc(sizeof *s);
    uint8_t *buf = malloc(total);
    if (!s || !buf) {
        free(s);
        free(buf);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cannot allocate %zu bytes for the model", total);
    }
    s->fd = -1;
    s->mem = buf;
    s->pos = 0;
    s->used = 0;
    encode_to(m, NULL, nnz, s);
    free(s);
    *out = buf;
    *len = total;
    return FSGD_E_OK;
}

/* Writes m's file (pairs: its weights, or NULL: m->w) to path atomically. */
static int save_to(const fsgd_model_t *m, const fsgd_sparse_t *pairs, uint64_t nnz, const char *path, char *err,
                   size_t errsz)
{
    fsgd_outfile_t a;
    FSGD_TRY(fsgd_outfile_open(&a, path, err, errsz));
    sink_t *s = malloc(sizeof *s);
    if (!s) {
        fsgd_outfile_abort(&a);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
    }
    s->fd = a.fd;
    s->mem = NULL;
    s->pos = 0;
    s->used = 0;
    if (encode_to(m, pairs, nnz, s) < 0 || sink_flush(s) < 0) {
        int e = errno;
        free(s);
        fsgd_outfile_abort(&a);
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: write failed: %s", path, strerror(e));
    }
    free(s);
    return fsgd_outfile_commit(&a, err, errsz);
}

int fsgd_model_save(const fsgd_model_t *m, const char *path, char *err, size_t errsz)
{
    uint64_t nnz;
    char why[256];
    int rc = check_model(m, &nnz, why, sizeof why);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s: cannot save: %s", path, why);
    return save_to(m, NULL, nnz, path, err, errsz);
}

int fsgd_model_save_pairs(const fsgd_model_t *shape, const fsgd_sparse_t *w, const char *path, char *err, size_t errsz)
{
    if (!valid_kind(shape->kind) || shape->dim == 0 || shape->dim > MAX_DIM || !isfinite(shape->bias) ||
        shape->state.kind != FSGD_MODEL_STATE_NONE)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s: cannot save: a model of kind %d, dim %llu, bias %g%s", path,
                            (int)shape->kind, (unsigned long long)shape->dim, (double)shape->bias,
                            shape->state.kind != FSGD_MODEL_STATE_NONE ? " with optimizer state" : "");
    uint64_t nnz = 0;
    for (size_t i = 0; i < w->n; i++) {
        const uint32_t k = w->keys[i];
        if ((i && k <= w->keys[i - 1]) || k > shape->dim || (k == shape->dim && !shape->has_bias))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s: cannot save: weight %zu's key %u is out of order or past "
                                "dim %llu", path, i, k, (unsigned long long)shape->dim);
        if (!isfinite(w->vals[i]))
            return fsgd_err_fmt(err, errsz, FSGD_E_NONFINITE, "%s: cannot save: %s %u is %g", path,
                                k == shape->dim ? "the intercept weight, key" : "the weight of column", k,
                                (double)w->vals[i]);
        nnz += k < shape->dim && w->vals[i] != 0;
    }
    return save_to(shape, w, nnz, path, err, errsz);
}

/* ---- reading ---------------------------------------------------------- */

/* Is [off, off+n) inside the file? Otherwise a truncation error naming what. */
#define NEED(off_, n_, ...)                                                                                  \
    do {                                                                                                     \
        if ((uint64_t)len < (uint64_t)(off_) + (n_)) {                                                       \
            char what_[96];                                                                                  \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                                      \
            return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "%s: truncated at byte %llu reading %s (file has %zu bytes)", \
                                name, (unsigned long long)(off_), what_, len);                               \
        }                                                                                                    \
    } while (0)

/* What parse_check found in a valid file, for fsgd_model_load_mem. */
typedef struct {
    int kind, has_bias, has_input, has_state;
    uint64_t dim, nnz;
    float bias, bias_w;
    char input[FSGD_MODEL_INPUT_MAX];
    uint64_t state_off; /* 0: no state section */
} model_head_t;

/* A file that does not start like a model is "not a model", however short. */
static int check_magic(const uint8_t *p, size_t len, const char *name, char *err, size_t errsz)
{
    size_t cmp = len < 8 ? len : 8;
    if (cmp == 0 || memcmp(p, MODEL_MAGIC, cmp) == 0)
        return FSGD_E_OK;
    char got[40] = "";
    for (size_t i = 0; i < cmp; i++)
        snprintf(got + 4 * i, sizeof got - 4 * i, "\\x%02x", p[i]);
    for (size_t i = 0; i < cmp; i++)
        if (p[i] < 0x20 || p[i] > 0x7e)
            goto hex;
    memcpy(got, p, cmp);
    got[cmp] = '\0';
hex:
    return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                        "%s: not an fsgd model file: bad magic at byte 0 (expected \"%s\", got \"%s\")", name,
                        MODEL_MAGIC, got);
}

/* The version's flags: the sections each version has or may have. */
static int check_flags(unsigned version, unsigned flags, const char *name, char *err, size_t errsz)
{
    const unsigned known = version >= 3 ? FLAG_BIAS | FLAG_INPUT | FLAG_STATE
                           : version == 2 ? FLAG_BIAS | FLAG_INPUT
                                          : FLAG_BIAS;
    if (flags & ~known)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: reserved flag bits set at byte 11 (flags 0x%02x)", name,
                            flags);
    if (version == 2 && !(flags & FLAG_INPUT))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "%s: version 2 without an input section at byte 11 (flags 0x%02x; bit 1 must be set)",
                            name, flags);
    if (version == 4 && !(flags & FLAG_INPUT))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "%s: version 4 without an input section at byte 11 (flags 0x%02x; bit 1 must be set)",
                            name, flags);
    if (version == 3 && !(flags & FLAG_STATE))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "%s: version 3 without a state section at byte 11 (flags 0x%02x; bit 2 must be set)",
                            name, flags);
    return FSGD_E_OK;
}

/* The 44-byte header: magic, version, its CRC, then each field in turn. */
static int check_header(const uint8_t *p, size_t len, const char *name, model_head_t *h, char *err, size_t errsz)
{
    FSGD_TRY(check_magic(p, len, name, err, errsz));
    for (int f = F_MAGIC; f <= F_VERSION; f++)
        NEED(field[f].off, field[f].len, "%s", field[f].name);
    unsigned version = fsgd_le_get16(p + 8);
    if (version < MODEL_VERSION_MIN || version > MODEL_VERSION)
        return fsgd_err_fmt(err, errsz, FSGD_E_VERSION,
                            "%s: unsupported model format version %u at byte 8 (this build reads versions %d to %d)",
                            name, version, MODEL_VERSION_MIN, MODEL_VERSION);
    for (int f = F_KIND; f < F_COUNT; f++)
        NEED(field[f].off, field[f].len, "%s", field[f].name);
    uint32_t hcrc = fsgd_le_get32(p + 40), hcalc = fsgd_crc32c(0, p, 40);
    if (hcrc != hcalc)
        return fsgd_err_fmt(err, errsz, FSGD_E_CRC,
                            "%s: header checksum mismatch at byte 40 (stored 0x%08x, computed 0x%08x over bytes 0..39)",
                            name, hcrc, hcalc);
    h->kind = p[10];
    if (!valid_kind(h->kind))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: unknown model kind %d at byte 10 (1 logistic, 2 linear, 3 svm)",
                            name, h->kind);
    FSGD_TRY(check_flags(version, p[11], name, err, errsz));
    h->has_input = (p[11] & FLAG_INPUT) != 0;
    h->has_state = (p[11] & FLAG_STATE) != 0;
    h->has_bias = p[11] & FLAG_BIAS;
    if (fsgd_le_get32(p + 12) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: reserved field at byte 12 is 0x%08x, must be 0", name,
                            fsgd_le_get32(p + 12));
    h->dim = fsgd_le_get64(p + 16);
    if (h->dim == 0 || h->dim > MAX_DIM)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: dim %llu at byte 16 is outside 1..2^32", name,
                            (unsigned long long)h->dim);
    h->nnz = fsgd_le_get64(p + 24);
    if (h->nnz > h->dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: nnz %llu at byte 24 exceeds dim %llu", name,
                            (unsigned long long)h->nnz, (unsigned long long)h->dim);
    h->bias = fsgd_le_getf32(p + 32);
    h->bias_w = fsgd_le_getf32(p + 36);
    if (!isfinite(h->bias))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: bias value at byte 32 is not finite", name);
    if (!isfinite(h->bias_w))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: bias_weight at byte 36 is not finite", name);
    if (!h->has_bias && fsgd_le_get32(p + 36) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "%s: bias_weight at byte 36 is %g but the model has no intercept (flags bit 0 clear)",
                            name, (double)h->bias_w);
    return FSGD_E_OK;
}

/* The input section at *tail: length, text, CRC; *tail moves past it. */
static int check_input(const uint8_t *p, size_t len, const char *name, uint64_t *tail, model_head_t *h, char *err,
                       size_t errsz)
{
    const uint64_t t = *tail;
    NEED(t, 4, "input_len");
    uint32_t il = fsgd_le_get32(p + t);
    if (il == 0 || il >= FSGD_MODEL_INPUT_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: input_len %u at byte %llu is outside 1..%d", name, il,
                            (unsigned long long)t, FSGD_MODEL_INPUT_MAX - 1);
    NEED(t + 4, il, "input (%u bytes)", il);
    NEED(t + 4 + il, 4, "input_crc");
    uint32_t icrc = fsgd_le_get32(p + t + 4 + il), icalc = fsgd_crc32c(0, p + t, 4 + (size_t)il);
    if (icrc != icalc)
        return fsgd_err_fmt(err, errsz, FSGD_E_CRC,
                            "%s: input checksum mismatch at byte %llu (stored 0x%08x, computed 0x%08x)", name,
                            (unsigned long long)(t + 4 + il), icrc, icalc);
    for (uint32_t i = 0; i < il; i++)
        if (p[t + 4 + i] < 0x20 || p[t + 4 + i] > 0x7e)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: input byte %u at byte %llu is not printable ASCII",
                                name, i, (unsigned long long)(t + 4 + i));
    memcpy(h->input, p + t + 4, il);
    h->input[il] = '\0';
    *tail = t + 8 + il;
    return FSGD_E_OK;
}

/* The state section at *tail: the length (from state_n) and the CRC first,
 * as for the header, so damage to kind, step or an entry is reported as
 * damage; then each entry. *tail moves past it. */
static int check_state(const uint8_t *p, size_t len, const char *name, uint64_t *tail, model_head_t *h, char *err,
                       size_t errsz)
{
    const uint64_t s0 = *tail;
    NEED(s0, STATE_HEAD, "state header (kind, step, state_n)");
    const uint64_t sn = fsgd_le_get64(p + s0 + 12), limit = h->dim + (h->has_bias ? 1 : 0);
    if (sn > limit)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: state_n %llu at byte %llu exceeds the %llu keys", name,
                            (unsigned long long)sn, (unsigned long long)s0 + 12, (unsigned long long)limit);
    const uint64_t e0 = s0 + STATE_HEAD, send = e0 + sn * STATE_ENTRY; /* sn <= 2^32 + 1: no overflow */
    if ((uint64_t)len < send) {
        uint64_t i = ((uint64_t)len - e0) / STATE_ENTRY;
        NEED(e0 + i * STATE_ENTRY, STATE_ENTRY, "state entry %llu of %llu", (unsigned long long)i,
             (unsigned long long)sn);
    }
    NEED(send, 4, "state_crc after %llu state entries", (unsigned long long)sn);
    uint32_t scrc = fsgd_le_get32(p + send), scalc = fsgd_crc32c(0, p + s0, (size_t)(send - s0));
    if (scrc != scalc)
        return fsgd_err_fmt(err, errsz, FSGD_E_CRC,
                            "%s: state checksum mismatch at byte %llu (stored 0x%08x, computed 0x%08x)", name,
                            (unsigned long long)send, scrc, scalc);
    int sk = p[s0];
    if (sk < FSGD_MODEL_STATE_ADAM || sk > FSGD_MODEL_STATE_FTRL)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "%s: unknown state kind %d at byte %llu (1 adam, 2 adam with per-key counts, 3 ftrl)",
                            name, sk, (unsigned long long)s0);
    if (p[s0 + 1] | p[s0 + 2] | p[s0 + 3])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: reserved state bytes at byte %llu must be 0", name,
                            (unsigned long long)s0 + 1);
    uint64_t step = fsgd_le_get64(p + s0 + 4);
    if (sk == FSGD_MODEL_STATE_FTRL && step)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: state_step %llu at byte %llu: ftrl state has none", name,
                            (unsigned long long)step, (unsigned long long)s0 + 4);
    uint32_t prev = 0;
    for (uint64_t i = 0; i < sn; i++) {
        const uint8_t *e = p + e0 + i * STATE_ENTRY;
        uint32_t key = fsgd_le_get32(e);
        const char *why = state_entry_problem(sk, step, limit, key, prev, i, fsgd_le_getf32(e + 4),
                                              fsgd_le_getf32(e + 8), fsgd_le_get32(e + 12));
        if (why)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: state entry %llu (key %u) at byte %llu: %s", name,
                                (unsigned long long)i, key, (unsigned long long)(e - p), why);
        prev = key;
    }
    h->state_off = s0;
    *tail = send + 4;
    return FSGD_E_OK;
}

/* The weights' CRC (bytes 44 to end, where body_crc sits), then each entry:
 * keys below dim and increasing, values finite and nonzero. */
static int check_weights(const uint8_t *p, uint64_t end, const char *name, const model_head_t *h, char *err,
                         size_t errsz)
{
    uint32_t bcrc = fsgd_le_get32(p + end), bcalc = fsgd_crc32c(0, p + HEADER_BYTES, (size_t)(end - HEADER_BYTES));
    if (bcrc != bcalc)
        return fsgd_err_fmt(err, errsz, FSGD_E_CRC,
                            "%s: weights checksum mismatch at byte %llu (stored 0x%08x, computed 0x%08x over bytes "
                            "44..%llu)",
                            name, (unsigned long long)end, bcrc, bcalc, (unsigned long long)end - 1);
    uint64_t prev = 0;
    for (uint64_t i = 0; i < h->nnz; i++) {
        const uint8_t *e = p + HEADER_BYTES + i * ENTRY_BYTES;
        uint64_t off = (uint64_t)(e - p);
        uint32_t key = fsgd_le_get32(e);
        float v = fsgd_le_getf32(e + 4);
        if (key >= h->dim)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: key %u of weight %llu at byte %llu >= dim %llu", name,
                                key, (unsigned long long)i, (unsigned long long)off, (unsigned long long)h->dim);
        if (i > 0 && key <= prev)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "%s: key %u of weight %llu at byte %llu is not above the previous key %llu", name, key,
                                (unsigned long long)i, (unsigned long long)off, (unsigned long long)prev);
        if (!isfinite(v) || v == 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: value of weight %llu (key %u) at byte %llu is %g%s",
                                name, (unsigned long long)i, key, (unsigned long long)off + 4, (double)v,
                                v == 0 ? " (zero weights are not stored)" : "");
        prev = key;
    }
    return FSGD_E_OK;
}

/* Validates buf completely, section by section in file order (every length
 * before the checksums after it); fills h. No allocation. */
static int parse_check(const uint8_t *p, size_t len, const char *name, uint64_t max_dim, model_head_t *h, char *err,
                       size_t errsz)
{
    memset(h, 0, sizeof *h);
    FSGD_TRY(check_header(p, len, name, h, err, errsz));
    /* Entries, then body_crc: name the entry where the bytes run out. */
    const uint64_t n = h->nnz;
    const uint64_t end = HEADER_BYTES + n * ENTRY_BYTES; /* offset of body_crc; n <= 2^32, no overflow */
    if ((uint64_t)len < end) {
        uint64_t i = ((uint64_t)len - HEADER_BYTES) / ENTRY_BYTES;
        uint64_t in = ((uint64_t)len - HEADER_BYTES) % ENTRY_BYTES;
        uint64_t at = HEADER_BYTES + i * ENTRY_BYTES + (in < 4 ? 0 : 4);
        NEED(at, 4, "weight %llu of %llu (%s)", (unsigned long long)i, (unsigned long long)n,
             in < 4 ? "key" : "value");
    }
    NEED(end, 4, "body_crc after %llu weights", (unsigned long long)n);
    uint64_t tail = end + 4; /* end of the file as far as checked */
    if (h->has_input)
        FSGD_TRY(check_input(p, len, name, &tail, h, err, errsz));
    if (h->has_state)
        FSGD_TRY(check_state(p, len, name, &tail, h, err, errsz));
    if ((uint64_t)len > tail)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: %llu trailing bytes at byte %llu after %s", name,
                            (unsigned long long)(len - tail), (unsigned long long)tail,
                            h->has_state ? "state_crc" : h->has_input ? "input_crc" : "body_crc");
    FSGD_TRY(check_weights(p, end, name, h, err, errsz));
    /* Checked last, so a valid file beyond the limit says "too big", not "bad". */
    if (max_dim && h->dim > max_dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "%s: dim %llu at byte 16 exceeds the limit %llu", name,
                            (unsigned long long)h->dim, (unsigned long long)max_dim);
    return FSGD_E_OK;
}
#undef NEED

int fsgd_model_load_mem(fsgd_model_t *m, const void *buf, size_t len, const char *name, uint64_t max_dim,
                        char *err, size_t errsz)
{
    memset(m, 0, sizeof *m);
    if (!name)
        name = "model";
    const uint8_t *p = buf;
    model_head_t h;
    FSGD_TRY(parse_check(p, len, name, max_dim, &h, err, errsz));
    const uint64_t dim = h.dim, nnz = h.nnz;
    int rc = fsgd_model_init(m, (fsgd_loss_kind_t)h.kind, dim, h.has_bias, h.bias);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s: cannot allocate weights for dim %llu", name,
                            (unsigned long long)dim);
    memcpy(m->input, h.input, sizeof h.input);
    /* Weights at this density touch most of the array's 4 KiB pages anyway:
     * huge pages make the load's page faults 512 times fewer (a 2^24-weight
     * model: 16k faults, most of its load; fsgd serve swaps versions under
     * load) for about the same memory. A sparser file keeps 4 KiB pages: its
     * memory follows its bytes, not the dim it declares. */
    if (nnz >= dim / 1024)
        fsgd_hugepages_advise(m->w, (size_t)(dim + 1) * sizeof *m->w);
    for (uint64_t i = 0; i < nnz; i++) {
        const uint8_t *e = p + HEADER_BYTES + i * ENTRY_BYTES;
        m->w[fsgd_le_get32(e)] = fsgd_le_getf32(e + 4);
    }
    m->w[dim] = h.has_bias ? h.bias_w : 0.0f;
    if (h.state_off) {
        const uint8_t *sp = p + h.state_off;
        uint64_t sn = fsgd_le_get64(sp + 12);
        rc = fsgd_model_state_alloc(m, (fsgd_model_state_kind_t)sp[0], sn);
        if (rc < 0) {
            fsgd_model_free(m);
            return fsgd_err_fmt(err, errsz, rc, "%s: cannot allocate %llu state entries", name,
                                (unsigned long long)sn);
        }
        m->state.step = fsgd_le_get64(sp + 4);
        for (uint64_t i = 0; i < sn; i++) {
            const uint8_t *e = sp + STATE_HEAD + i * STATE_ENTRY;
            m->state.keys[i] = fsgd_le_get32(e);
            m->state.a[i] = fsgd_le_getf32(e + 4);
            m->state.b[i] = fsgd_le_getf32(e + 8);
            m->state.c[i] = fsgd_le_get32(e + 12);
        }
    }
    return FSGD_E_OK;
}

int fsgd_model_load(fsgd_model_t *m, const char *path, char *err, size_t errsz)
{
    return fsgd_model_load_max(m, path, 0, err, errsz);
}

int fsgd_model_load_max(fsgd_model_t *m, const char *path, uint64_t max_dim, char *err, size_t errsz)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot open model '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: not a regular file%s%s", path, e ? ": " : "",
                            e ? strerror(e) : "");
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: cannot allocate %zu bytes", path, len);
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            free(buf);
            return fsgd_err_fmt(err, errsz, FSGD_E_IO, "%s: read failed at byte %zu: %s", path, got, strerror(e));
        }
        if (r == 0)
            break; /* shrank while reading: judged as truncated below */
        got += (size_t)r;
    }
    close(fd);
    int rc = fsgd_model_load_mem(m, buf, got, path, max_dim, err, errsz);
    free(buf);
    return rc;
}

/* ---- LIBLINEAR export ------------------------------------------------- */

int fsgd_model_export_liblinear(const fsgd_model_t *m, const char *path, char *err, size_t errsz)
{
    uint64_t nnz;
    char why[256];
    int rc = check_model(m, &nnz, why, sizeof why);
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "%s: cannot export: %s", path, why);
    if (m->dim > INT_MAX)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE,
                            "%s: dim %llu is more than LIBLINEAR's nr_feature can hold (%d)", path,
                            (unsigned long long)m->dim, INT_MAX);
    if (m->has_bias && m->bias < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_UNSUPPORTED,
                            "%s: bias value %g < 0 means \"no bias\" to LIBLINEAR; cannot export this intercept", path,
                            (double)m->bias);
    const char *solver = m->kind == FSGD_LOSS_LOGISTIC ? "L2R_LR"
                         : m->kind == FSGD_LOSS_HINGE  ? "L2R_L2LOSS_SVC"
                                                       : "L2R_L2LOSS_SVR";
    fsgd_outfile_t a;
    FSGD_TRY(fsgd_outfile_open(&a, path, err, errsz));
    FILE *f = fsgd_outfile_stream(&a, err, errsz);
    if (!f) {
        fsgd_outfile_abort(&a);
        return FSGD_E_IO;
    }
    /* Numbers in the C locale whatever the process locale is (thread-local switch). */
    locale_t c_loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c_loc ? uselocale(c_loc) : (locale_t)0;
    fprintf(f, "solver_type %s\nnr_class 2\n", solver);
    if (m->kind != FSGD_LOSS_SQUARED)
        fputs("label 1 -1\n", f);
    fprintf(f, "nr_feature %llu\n", (unsigned long long)m->dim);
    fprintf(f, "bias %.17g\nw\n", m->has_bias ? (double)m->bias : -1.0);
    for (uint64_t k = 0; k < m->dim + (m->has_bias ? 1 : 0); k++)
        fprintf(f, "%.17g \n", (double)m->w[k]);
    if (c_loc) {
        uselocale(old);
        freelocale(c_loc);
    }
    /* flush, fsync, close and rename; a stream error is a write error */
    return fsgd_outfile_commit(&a, err, errsz);
}
