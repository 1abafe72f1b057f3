/* The CPU backend: margins row by row, then the transposed product into an
 * accumulator that is reset only on the keys the batch touched, so a step
 * costs O(nnz + touched·log touched) however large the model is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "fsgd/error.h"
#include "fsgd/keysort.h"
#include "fsgd/prefetch.h"
#include "fsgd/loss_formulas.h"
#include "fsgd/rowlabel.h"

typedef struct cpu_slot {
    uint64_t tag; /* key + 1; 0: empty */
    double sum;
} cpu_slot_t;

#define HASH_MAX_NNZ ((size_t)1 << 20)

typedef struct cpu_state {
    uint64_t dim;
    const float *theta;
    double *acc;      /* dim entries, zero outside a gradient call */
    /* One bit per key, set for keys touched in the current call: 2 MiB at
     * 2^24 keys, so it stays in cache where a byte per key (16 MiB) missed
     * on every rare key beside acc's own miss. */
    uint64_t *seen;
    uint32_t *touched;
    size_t touched_cap;
    /* The accumulator of a batch of up to HASH_MAX_NNZ nonzeros: an open
     * addressing table of at least twice its nonzeros, which stays in
     * cache, where acc (a miss on nearly every key of a big model) is
     * mostly never touched. Each key's sum takes the same additions in the
     * same order either way. */
    struct cpu_slot *tab;
    size_t tab_bits;
    uint32_t *slot_of; /* the slot of touched[i] until touched is sorted */
    fsgd_sparse_t grad; /* gradient_encoded's gradient */
} cpu_state_t;

static int cpu_available(char *err, size_t errsz)
{
    (void)err;
    (void)errsz;
    return 1;
}

static void cpu_destroy(void *p)
{
    cpu_state_t *s = p;
    if (!s)
        return;
    free(s->acc);
    free(s->seen);
    free(s->touched);
    free(s->tab);
    free(s->slot_of);
    fsgd_sparse_free(&s->grad);
    free(s);
}

static void *cpu_create(uint64_t dim, const float *host_theta, char *err, size_t errsz)
{
    cpu_state_t *s = calloc(1, sizeof *s);
    if (!s || !(s->acc = calloc(dim ? dim : 1, sizeof *s->acc)) || !(s->seen = calloc(dim / 64 + 1, sizeof *s->seen))) {
        cpu_destroy(s);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cpu backend: cannot allocate accumulators for dim %llu",
                     (unsigned long long)dim);
        return NULL;
    }
    s->dim = dim;
    s->theta = host_theta;
    return s;
}

static const char *cpu_device(void *p)
{
    (void)p;
    return "cpu";
}

static inline size_t slot_find(const cpu_slot_t *tab, size_t bits, uint32_t k)
{
    size_t mask = ((size_t)1 << bits) - 1, h = (size_t)((k * 0x9E3779B97F4A7C15ull) >> (64 - bits));
    while (tab[h].tag != (uint64_t)k + 1 && tab[h].tag != 0)
        h = (h + 1) & mask;
    return h;
}

/* Row r's loss derivative at its margin x_r·θ; adds its loss to *loss. */
static inline double row_deriv(const cpu_state_t *s, const fsgd_csr_t *X, size_t r, fsgd_loss_kind_t kind,
                               double *loss)
{
    double m = 0;
    if (X->val)
        for (uint64_t i = X->row_ptr[r]; i < X->row_ptr[r + 1]; i++)
            m += (double)s->theta[X->col[i]] * X->val[i];
    else /* a binary batch (fsgd/csr.h): θ times 1, the same sum */
        for (uint64_t i = X->row_ptr[r]; i < X->row_ptr[r + 1]; i++)
            m += (double)s->theta[X->col[i]];
    double y = fsgd_loss_label(kind, X->label[r]);
    /* a classification label's magnitude is the row's importance weight (fsgd/rowlabel.h) */
    double w = kind == FSGD_LOSS_SQUARED ? 1.0 : fsgd_rowlabel_weight(X->label[r]);
    *loss += w * fsgd_loss_formula_value(kind, m, y);
    return w * fsgd_loss_formula_deriv(kind, m, y);
}

/* A key's gradient from its summed derivatives; l2 = 0: the term is 0·θ,
 * so θ (a miss a key) is not read. */
static inline float drain_value(const cpu_state_t *s, const fsgd_grad_request_t *req, double sum, uint32_t k)
{
    return (float)(sum * req->scale + (req->l2 != 0 ? req->l2 * s->theta[k] : 0.0));
}

/* Slots of the table for a batch of nnz nonzeros: at least twice as many. */
static size_t table_bits(size_t nnz)
{
    size_t bits = 6;
    while (((size_t)1 << bits) < 2 * nnz)
        bits++;
    return bits;
}

/* The table pays only where the dense accumulator is far bigger than it.
 * Measured (best of 25 passes, 20 batches of 1,500 dist_net rows: 150k
 * nonzeros, ~50k distinct Zipf keys, an 8 MiB table): dense 1.7 ms against
 * 2.5 at 2^20 weights (dense 8 MiB) and 2.9 against 3.8 at 2^22 (32 MiB);
 * on the generated CTR set at 2^24 (128 MiB against a 4 MiB table) the
 * table halved the gradient round. */
static int table_pays(uint64_t dim, size_t nnz)
{
    return nnz <= HASH_MAX_NNZ && ((uint64_t)sizeof(cpu_slot_t) << table_bits(nnz)) * 16 <= dim * sizeof(double);
}

/* cpu_gradient with the accumulator in the hash table (s->tab). */
static int cpu_gradient_hashed(cpu_state_t *s, const fsgd_grad_request_t *req, fsgd_sparse_t *out,
                               double *loss_sum, char *err, size_t errsz)
{
    const fsgd_csr_t *X = req->batch;
    size_t bits = table_bits(X->nnz);
    if (bits > s->tab_bits) {
        free(s->tab);
        s->tab = calloc((size_t)1 << bits, sizeof *s->tab);
        s->tab_bits = s->tab ? bits : 0;
        if (!s->tab)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cpu backend: out of memory");
    }
    /* the table in use is its first 2^bits slots, always cleared after use */
    cpu_slot_t *tab = s->tab;
    size_t n_touched = 0;
    double loss = 0;
    for (size_t r = 0; r < X->n_rows; r++) {
        uint64_t lo = X->row_ptr[r], hi = X->row_ptr[r + 1];
        /* θ of the next rows, while this row's misses are waited for */
        uint64_t ahead = hi + (hi - lo) < X->nnz ? hi + (hi - lo) : X->nnz;
        for (uint64_t i = hi; i < ahead; i++)
            __builtin_prefetch(&s->theta[X->col[i]], 0, 3);
        double g = row_deriv(s, X, r, req->loss, &loss);
        for (uint64_t i = lo; i < hi; i++) {
            uint32_t k = X->col[i];
            size_t h = slot_find(tab, bits, k);
            if (!tab[h].tag) {
                tab[h].tag = (uint64_t)k + 1;
                s->slot_of[n_touched] = (uint32_t)h;
                s->touched[n_touched++] = k;
            }
            tab[h].sum += X->val ? g * X->val[i] : g;
        }
    }
    int rc = fsgd_sparse_reserve(out, n_touched);
    if (rc == 0) {
        fsgd_keysort(s->touched, n_touched);
        for (size_t i = 0; i < n_touched; i++) {
            uint32_t k = s->touched[i];
            out->keys[i] = k;
            out->vals[i] = drain_value(s, req, tab[slot_find(tab, bits, k)].sum, k);
        }
        out->n = n_touched;
        *loss_sum += loss;
    }
    /* cleared only now: an emptied slot would cut the probe chains of the
     * lookups above */
    for (size_t i = 0; i < n_touched; i++) {
        tab[s->slot_of[i]].tag = 0;
        tab[s->slot_of[i]].sum = 0;
    }
    if (rc < 0)
        return fsgd_err_fmt(err, errsz, rc, "cpu backend: out of memory for %zu gradient entries", n_touched);
    return FSGD_E_OK;
}

static int cpu_gradient(void *p, const fsgd_grad_request_t *req, fsgd_sparse_t *out, double *loss_sum,
                        char *err, size_t errsz)
{
    cpu_state_t *s = p;
    const fsgd_csr_t *X = req->batch;
    if (X->max_col > s->dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "batch has column %llu >= model dim %llu",
                            (unsigned long long)(X->max_col - 1), (unsigned long long)s->dim);
    if (X->nnz > s->touched_cap) {
        uint32_t *t = realloc(s->touched, X->nnz * sizeof *t);
        if (!t)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cpu backend: out of memory");
        s->touched = t;
        uint32_t *so = realloc(s->slot_of, X->nnz * sizeof *so);
        if (!so)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "cpu backend: out of memory");
        s->slot_of = so;
        s->touched_cap = X->nnz;
    }
    if (table_pays(s->dim, X->nnz))
        return cpu_gradient_hashed(s, req, out, loss_sum, err, errsz);
    size_t n_touched = 0;
    double loss = 0;
    for (size_t r = 0; r < X->n_rows; r++) {
        uint64_t lo = X->row_ptr[r], hi = X->row_ptr[r + 1];
        /* The next row's weights and sums: its misses overlap this row's work. */
        if (r + 1 < X->n_rows)
            for (uint64_t i = hi, e = X->row_ptr[r + 2]; i < e; i++) {
                FSGD_PREFETCH(&s->theta[X->col[i]]);
                FSGD_PREFETCH(&s->acc[X->col[i]]);
            }
        double g = row_deriv(s, X, r, req->loss, &loss);
        for (uint64_t i = lo; i < hi; i++) {
            uint32_t k = X->col[i];
            uint64_t bit = 1ull << (k & 63);
            if (!(s->seen[k >> 6] & bit)) {
                s->seen[k >> 6] |= bit;
                s->touched[n_touched++] = k;
            }
            s->acc[k] += X->val ? g * X->val[i] : g;
        }
    }
    fsgd_keysort(s->touched, n_touched);
    int rc = fsgd_sparse_reserve(out, n_touched);
    if (rc < 0) {
        for (size_t i = 0; i < n_touched; i++) {
            s->acc[s->touched[i]] = 0;
            s->seen[s->touched[i] >> 6] = 0;
        }
        return fsgd_err_fmt(err, errsz, rc, "cpu backend: out of memory for %zu gradient entries", n_touched);
    }
    for (size_t i = 0; i < n_touched; i++) {
        uint32_t k = s->touched[i];
        if (i + FSGD_PREFETCH_AHEAD < n_touched)
            FSGD_PREFETCH(&s->acc[s->touched[i + FSGD_PREFETCH_AHEAD]]);
        out->keys[i] = k;
        out->vals[i] = drain_value(s, req, s->acc[k], k);
        s->acc[k] = 0;
        s->seen[k >> 6] = 0;
    }
    out->n = n_touched;
    *loss_sum += loss;
    return FSGD_E_OK;
}

static int cpu_apply(void *p, const uint32_t *keys, const float *vals, size_t n, char *err, size_t errsz)
{
    /* θ is read in place from the caller's array; nothing to mirror. */
    (void)p;
    (void)keys;
    (void)vals;
    (void)n;
    (void)err;
    (void)errsz;
    return FSGD_E_OK;
}

/* The gradient, then the codec library's encoder. */
static int cpu_gradient_encoded(void *p, const fsgd_grad_request_t *req, fsgd_codec_t *codec, fsgd_outbuf_t *out,
                                double *loss_sum, char *err, size_t errsz)
{
    cpu_state_t *s = p;
    double loss = 0;
    out->len = 0;
    FSGD_TRY(cpu_gradient(s, req, &s->grad, &loss, err, errsz));
    FSGD_TRY(fsgd_codec_encode(codec, s->grad.keys, s->grad.vals, s->grad.n, out, err, errsz));
    *loss_sum += loss;
    return FSGD_E_OK;
}

const fsgd_backend_ops_t fsgd_backend_cpu_ops = {
    .name = "cpu",
    .available = cpu_available,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .device = cpu_device,
    .gradient = cpu_gradient,
    .apply = cpu_apply,
    .gradient_encoded = cpu_gradient_encoded,
};
