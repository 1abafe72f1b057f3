#include "fsgd/reduce.h"

#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/keysort.h"
#include "common_testing.h"

/* Adds folded by merging before the reducer turns dense: a merge costs the
 * running sum's length, so many small adds into a large sum would cost more
 * than the random accesses they avoid. It also bounds the runs waiting. */
#define FSGD_REDUCER_MAX_MERGES 16

/* Two ways to hold the running sum, chosen per step by what arrives:
 * - merged: while every add has strictly increasing keys (every decoded
 *   message does), the sum is a sorted list. Sequential passes instead of
 *   two random accesses a key into dim-sized arrays, which at 2^22 weights
 *   and more were most of a step's reduce cost. The first add becomes the
 *   base list; a later one is only copied as a run, and the first read
 *   (sorted_keys, sum, sorted, count, take) merges all runs into the base at
 *   once: merging each add into the running sum cost the union's size an
 *   add, P times the union a step.
 * - dense: an unsorted add, or more than FSGD_REDUCER_MAX_MERGES adds, moves
 *   the sum into a dense accumulator (allocated on first need) until clear.
 * Both add each key's values in double in the order they were added (a
 * merge of runs takes a key's base sum first, then the runs in add order),
 * so the sums are bit-identical however a step went and whenever it was
 * read. */
struct fsgd_reducer {
    uint64_t dim;
    int dense;
    size_t n_adds;
    /* merged: the base, keys increasing, the sums beside them; nxt_* the
     * merge target. cap covers the base plus every run (the union's bound),
     * so reading the sum never allocates. */
    uint32_t *keys, *nxt_keys;
    double *sums, *nxt_sums;
    size_t n, cap;
    /* merged: adds not yet in the base, one after another; run i ends at
     * run_end[i] (the base takes the first add, so at most MAX - 1 runs) */
    uint32_t *run_keys;
    float *run_vals;
    size_t run_end[FSGD_REDUCER_MAX_MERGES];
    size_t n_runs, run_len, run_cap;
    struct merge_window *window; /* the merge's scratch, once two runs wait */
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
    free(r->run_keys);
    free(r->run_vals);
    free(r->window);
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

static int reserve_runs(fsgd_reducer_t *r, size_t need)
{
    if (need <= r->run_cap)
        return FSGD_E_OK;
    size_t cap = grown(r->run_cap, need);
    uint32_t *k = realloc(r->run_keys, cap * sizeof *k);
    if (k)
        r->run_keys = k;
    float *v = k ? realloc(r->run_vals, cap * sizeof *v) : NULL;
    if (!v)
        return FSGD_E_NOMEM;
    r->run_vals = v;
    r->run_cap = cap;
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

/* The merged sum moves into the dense accumulator exactly: the base's sums
 * are stored as they are, then the runs added in add order, the operations
 * a merge would have done, so later adds continue the same double sums. */
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
    /* room for every key first, so no run is left half added */
    FSGD_TRY(reserve_touched(r, r->n + r->run_len));
    for (size_t i = 0; i < r->n; i++) {
        r->acc[r->keys[i]] = r->sums[i];
        r->seen[r->keys[i]] = 1;
        r->touched[i] = r->keys[i];
    }
    r->n_touched = r->n;
    r->touched_sorted = 1;
    for (size_t i = 0, from = 0; i < r->n_runs; from = r->run_end[i++])
        add_dense(r, r->run_keys + from, r->run_vals + from, r->run_end[i] - from);
    r->n = 0;
    r->n_runs = r->run_len = 0;
    r->dense = 1;
    return FSGD_E_OK;
}

/* base ∪ g into nxt, then swap: keys in both add g's value to the sum. */
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

/* Two runs or more merge a window of MERGE_WINDOW keys at a time: the base,
 * then each run in add order, scatters its keys in the window into a
 * window-sized accumulator, which then comes out in key order by its
 * bitmap. No compares between runs (a heap's per key cost about what
 * merging one add at a time did), and the accumulator stays in L2, where a
 * dim-sized one (dense) misses on most keys; a smaller window costs more
 * in passes over the runs than it gains (bench_agg_capacity). */
#define MERGE_WINDOW (1u << 15)
#define WINDOW_WORDS (MERGE_WINDOW / 64)

/* The window's accumulator, its bitmap of touched slots and a bitmap of
 * the bitmap's non-zero words; all zero between merges. */
typedef struct merge_window {
    double acc[MERGE_WINDOW];
    uint64_t touched[WINDOW_WORDS];
    uint64_t words[WINDOW_WORDS / 64];
} merge_window_t;

static void window_mark(merge_window_t *w, uint32_t slot)
{
    w->touched[slot / 64] |= (uint64_t)1 << (slot % 64);
    w->words[slot / 4096] |= (uint64_t)1 << (slot / 64 % 64);
}

/* The window's sums in key order into ok/os from o, the window zeroed;
 * returns the new o. */
static size_t window_drain(merge_window_t *w, uint64_t lo, uint32_t *ok, double *os, size_t o)
{
    for (uint32_t q = 0; q < WINDOW_WORDS / 64; q++) {
        for (uint64_t words = w->words[q]; words; words &= words - 1) {
            uint32_t word = q * 64 + (uint32_t)__builtin_ctzll(words);
            for (uint64_t bits = w->touched[word]; bits; bits &= bits - 1) {
                uint32_t slot = word * 64 + (uint32_t)__builtin_ctzll(bits);
                ok[o] = (uint32_t)(lo + slot);
                os[o++] = w->acc[slot];
                w->acc[slot] = 0.0;
            }
            w->touched[word] = 0;
        }
        w->words[q] = 0;
    }
    return o;
}

/* Base and runs into nxt, then swap. A key's sum starts from the base's (as
 * stored) or 0.0 + the first run's value, then adds the later runs' values
 * in add order, as adds merged one by one would have. */
static void merge_runs(fsgd_reducer_t *r)
{
    merge_window_t *w = r->window;
    size_t next[FSGD_REDUCER_MAX_MERGES], base = 0, o = 0;
    for (size_t i = 0; i < r->n_runs; i++)
        next[i] = i ? r->run_end[i - 1] : 0;
    for (;;) {
        uint64_t lo = base < r->n ? r->keys[base] : UINT64_MAX;
        for (size_t i = 0; i < r->n_runs; i++)
            if (next[i] < r->run_end[i] && r->run_keys[next[i]] < lo)
                lo = r->run_keys[next[i]];
        if (lo == UINT64_MAX)
            break;
        uint64_t hi = lo + MERGE_WINDOW;
        for (; base < r->n && r->keys[base] < hi; base++) {
            uint32_t slot = (uint32_t)(r->keys[base] - lo);
            w->acc[slot] = r->sums[base];
            window_mark(w, slot);
        }
        for (size_t i = 0; i < r->n_runs; i++)
            for (size_t j = next[i]; j < r->run_end[i] && r->run_keys[j] < hi; j = ++next[i]) {
                uint32_t slot = (uint32_t)(r->run_keys[j] - lo);
                w->acc[slot] += (double)r->run_vals[j];
                window_mark(w, slot);
            }
        o = window_drain(w, lo, r->nxt_keys, r->nxt_sums, o);
    }
    uint32_t *k = r->keys;
    double *s = r->sums;
    r->keys = r->nxt_keys, r->nxt_keys = k;
    r->sums = r->nxt_sums, r->nxt_sums = s;
    r->n = o;
}

/* Merged: folds the runs into the base before anything reads the sum. The
 * room was reserved by the adds, so this cannot fail. */
static void materialize(fsgd_reducer_t *r)
{
    if (r->n_runs == 1)
        add_merged(r, r->run_keys, r->run_vals, r->run_len);
    else if (r->n_runs > 1)
        merge_runs(r);
    r->n_runs = r->run_len = 0;
}

/* Copies g as the next run, with room for the base to take it later. */
static int append_run(fsgd_reducer_t *r, const uint32_t *keys, const float *vals, size_t n)
{
    FSGD_TRY(reserve_runs(r, r->run_len + n));
    FSGD_TRY(reserve_merged(r, r->n + r->run_len + n));
    if (r->n_runs && !r->window && !(r->window = calloc(1, sizeof *r->window)))
        return FSGD_E_NOMEM;
    if (n) { /* an empty add is a run of none: no buffer may exist yet */
        memcpy(r->run_keys + r->run_len, keys, n * sizeof *keys);
        memcpy(r->run_vals + r->run_len, vals, n * sizeof *vals);
    }
    r->run_len += n;
    r->run_end[r->n_runs++] = r->run_len;
    return FSGD_E_OK;
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
    if (r->n || r->n_runs)
        return append_run(r, keys, vals, n);
    /* nothing to merge with: g is the sum, converted once */
    FSGD_TRY(reserve_merged(r, n));
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
        materialize(r);
        *n = r->n;
        return r->keys;
    }
    sort_touched(r);
    *n = r->n_touched;
    return r->touched;
}

double fsgd_reducer_sum(fsgd_reducer_t *r, uint32_t key)
{
    if (key >= r->dim)
        return 0.0;
    if (r->dense)
        return r->acc[key];
    materialize(r);
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
    r->n_runs = r->run_len = 0;
    r->n_adds = 0;
    r->dense = 0;
}

size_t fsgd_reducer_count(fsgd_reducer_t *r)
{
    if (r->dense)
        return r->n_touched;
    materialize(r);
    return r->n;
}

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
