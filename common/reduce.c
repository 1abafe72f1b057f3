#include "fsgd/reduce.h"

#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/keysort.h"
#include "common_testing.h"

/* Adds folded by merging before the reducer turns dense: a merge costs the
 * running sum's length, so many small adds into a large sum would cost more
 * than the random accesses they avoid. */
#define FSGD_REDUCER_MAX_MERGES 16

/* Two ways to hold the running sum, chosen per step by what arrives:
 * - merged: while every add has strictly increasing keys (every decoded
 *   message does), the sum is one sorted list and each add is merged into it.
 *   Sequential passes instead of two random accesses a key into dim-sized
 *   arrays, which at 2^22 weights and more were most of a step's reduce cost.
 * - dense: an unsorted add, or more than FSGD_REDUCER_MAX_MERGES adds, moves
 *   the sum into a dense accumulator (allocated on first need) until clear.
 * Both add each key's values in double in the order they were added, so the
 * sums are bit-identical whichever way a step went. */
struct fsgd_reducer {
    uint64_t dim;
    int dense;
    size_t n_adds;
    /* merged: keys increasing, the sums beside them; nxt_* the merge target */
    uint32_t *keys, *nxt_keys;
    double *sums, *nxt_sums;
    size_t n, cap;
    /* dense: acc and seen have dim entries, zero except on touched keys */
    double *acc;
    uint8_t *seen;
    uint32_t *touched;
    size_t n_touched, touched_cap;
    int touched_sorted;
};

fsgd_reducer_t *fsgd_reducer_new(uint64_t dim)
{
    fsgd_reducer_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->dim = dim;
    return r;
}

void fsgd_reducer_destroy(fsgd_reducer_t *r)
{
    if (!r)
        return;
    free(r->keys);
    free(r->nxt_keys);
    free(r->sums);
    free(r->nxt_sums);
    free(r->acc);
    free(r->seen);
    free(r->touched);
    free(r);
}

/* The next capacity at or above need, doubling from cap (1024 at first). */
static size_t grown(size_t cap, size_t need)
{
    cap = cap ? cap : 1024;
    while (cap < need)
        cap *= 2;
    return cap;
}

static int reserve_merged(fsgd_reducer_t *r, size_t need)
{
    if (need <= r->cap)
        return FSGD_E_OK;
    size_t cap = grown(r->cap, need);
    uint32_t *k = realloc(r->keys, cap * sizeof *k);
    if (k)
        r->keys = k;
    uint32_t *nk = k ? realloc(r->nxt_keys, cap * sizeof *nk) : NULL;
    if (nk)
        r->nxt_keys = nk;
    double *s = nk ? realloc(r->sums, cap * sizeof *s) : NULL;
    if (s)
        r->sums = s;
    double *ns = s ? realloc(r->nxt_sums, cap * sizeof *ns) : NULL;
    if (!ns)
        return FSGD_E_NOMEM;
    r->nxt_sums = ns;
    r->cap = cap;
    return FSGD_E_OK;
}

static int reserve_touched(fsgd_reducer_t *r, size_t need)
{
    if (need <= r->touched_cap)
        return FSGD_E_OK;
    size_t cap = grown(r->touched_cap, need);
    uint32_t *t = realloc(r->touched, cap * sizeof *t);
    if (!t)
        return FSGD_E_NOMEM;
    r->touched = t;
    r->touched_cap = cap;
    return FSGD_E_OK;
}

/* The merged sum moves into the dense accumulator (exactly: each sum is
 * stored as it is, so later adds continue the same double sums). */
static int go_dense(fsgd_reducer_t *r)
{
    if (!r->acc) {
        r->acc = calloc(r->dim ? r->dim : 1, sizeof *r->acc);
        r->seen = calloc(r->dim ? r->dim : 1, 1);
        if (!r->acc || !r->seen) {
            free(r->acc);
            free(r->seen);
            r->acc = NULL;
            r->seen = NULL;
            return FSGD_E_NOMEM;
        }
    }
    FSGD_TRY(reserve_touched(r, r->n));
    for (size_t i = 0; i < r->n; i++) {
        r->acc[r->keys[i]] = r->sums[i];
        r->seen[r->keys[i]] = 1;
        r->touched[i] = r->keys[i];
    }
    r->n_touched = r->n;
    r->touched_sorted = 1;
    r->n = 0;
    r->dense = 1;
    return FSGD_E_OK;
}

static int add_dense(fsgd_reducer_t *r, const uint32_t *keys, const float *vals, size_t n)
{
    FSGD_TRY(reserve_touched(r, r->n_touched + n));
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        if (!r->seen[k]) {
            r->seen[k] = 1;
            r->touched[r->n_touched++] = k;
            r->touched_sorted = 0;
        }
        r->acc[k] += vals[i];
    }
    return FSGD_E_OK;
}

/* sum ∪ g into nxt, then swap: keys in both add g's value to the sum. */
static void add_merged(fsgd_reducer_t *r, const uint32_t *keys, const float *vals, size_t n)
{
    const uint32_t *a = r->keys;
    const double *as = r->sums;
    uint32_t *ok = r->nxt_keys;
    double *os = r->nxt_sums;
    size_t i = 0, j = 0, o = 0, na = r->n;
    while (i < na && j < n) {
        if (a[i] < keys[j]) {
            ok[o] = a[i];
            os[o++] = as[i++];
        } else if (a[i] > keys[j]) {
            ok[o] = keys[j];
            os[o++] = 0.0 + (double)vals[j++];
        } else {
            ok[o] = a[i];
            os[o++] = as[i++] + (double)vals[j++];
        }
    }
    for (; i < na; i++, o++)
        ok[o] = a[i], os[o] = as[i];
    for (; j < n; j++, o++)
        ok[o] = keys[j], os[o] = 0.0 + (double)vals[j];
    r->nxt_keys = r->keys, r->keys = ok;
    r->nxt_sums = r->sums, r->sums = os;
    r->n = o;
}

int fsgd_reducer_add(fsgd_reducer_t *r, const uint32_t *keys, const float *vals, size_t n)
{
    int sorted = 1;
    for (size_t i = 0; i < n; i++) {
        if (keys[i] >= r->dim)
            return FSGD_E_RANGE;
        sorted &= !i || keys[i] > keys[i - 1];
    }
    if (!r->dense && (!sorted || r->n_adds >= FSGD_REDUCER_MAX_MERGES))
        FSGD_TRY(go_dense(r));
    r->n_adds++;
    if (r->dense)
        return add_dense(r, keys, vals, n);
    FSGD_TRY(reserve_merged(r, r->n + n));
    add_merged(r, keys, vals, n);
    return FSGD_E_OK;
}

/* Dense: the touched keys sorted, once per step. */
static void sort_touched(fsgd_reducer_t *r)
{
    if (!r->touched_sorted)
        fsgd_keysort(r->touched, r->n_touched);
    r->touched_sorted = 1;
}

const uint32_t *fsgd_reducer_sorted_keys(fsgd_reducer_t *r, size_t *n)
{
    if (!r->dense) {
        *n = r->n;
        return r->keys;
    }
    sort_touched(r);
    *n = r->n_touched;
    return r->touched;
}

double fsgd_reducer_sum(const fsgd_reducer_t *r, uint32_t key)
{
    if (key >= r->dim)
        return 0.0;
    if (r->dense)
        return r->acc[key];
    size_t lo = fsgd_keys_lower_bound(r->keys, r->n, key);
    return lo < r->n && r->keys[lo] == key ? r->sums[lo] : 0.0;
}

int fsgd_reducer_sorted(fsgd_reducer_t *r, const uint32_t **keys, const double **sums, size_t *n)
{
    if (r->dense) {
        sort_touched(r);
        FSGD_TRY(reserve_merged(r, r->n_touched));
        for (size_t i = 0; i < r->n_touched; i++)
            r->sums[i] = r->acc[r->touched[i]];
    }
    *keys = fsgd_reducer_sorted_keys(r, n);
    *sums = r->sums;
    return FSGD_E_OK;
}

void fsgd_reducer_clear(fsgd_reducer_t *r)
{
    if (r->dense) {
        for (size_t i = 0; i < r->n_touched; i++) {
            r->acc[r->touched[i]] = 0;
            r->seen[r->touched[i]] = 0;
        }
    }
    r->n_touched = 0;
    r->n = 0;
    r->n_adds = 0;
    r->dense = 0;
}

size_t fsgd_reducer_count(const fsgd_reducer_t *r) { return r->dense ? r->n_touched : r->n; }

int fsgd_reducer_take(fsgd_reducer_t *r, double scale, fsgd_sparse_t *out)
{
    const uint32_t *keys;
    const double *sums;
    size_t n;
    FSGD_TRY(fsgd_reducer_sorted(r, &keys, &sums, &n));
    FSGD_TRY(fsgd_sparse_reserve(out, n));
    for (size_t i = 0; i < n; i++) {
        out->keys[i] = keys[i];
        out->vals[i] = (float)(sums[i] * scale);
    }
    out->n = n;
    fsgd_reducer_clear(r);
    return FSGD_E_OK;
}
