/* Sparse ("lazy") Adam over a dense parameter vector.
 *
 * Only the keys of a step's gradient are updated (their m, v and θ); the
 * bias corrections use the global step t, as dense Adam does:
 *   m_k = β1 m_k + (1-β1) g_k ;  v_k = β2 v_k + (1-β2) g_k²
 *   θ_k -= lr · (m_k / (1-β1^t)) / (sqrt(v_k / (1-β2^t)) + ε)
 * When every key is touched in every step this is exactly dense Adam.
 * L2 is not applied here: callers add λθ_k to g_k for touched keys. */
#ifndef FSGD_ADAM_H
#define FSGD_ADAM_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/reduce.h"
#include "fsgd/sparse.h"

typedef struct fsgd_adam_params {
    double lr;    /* default 0.01 */
    double beta1; /* default 0.9 */
    double beta2; /* default 0.999 */
    double eps;   /* default 1e-8 */
} fsgd_adam_params_t;

/* The defaults above. */
fsgd_adam_params_t fsgd_adam_defaults(void);

/* A key's Adam state with per-key counts (fsgd_adam_count_keys): 10
 * bytes, packed (a 4-byte count padded the key to 12: 34 MB more at 2^24
 * keys, for counts that stop at FSGD_ADAM_COUNT_MAX). */
typedef struct fsgd_adam_key {
    float m, v;
    uint16_t count; /* updates so far, saturating at FSGD_ADAM_COUNT_MAX */
} __attribute__((packed)) fsgd_adam_key_t;

typedef struct fsgd_adam {
    fsgd_adam_params_t p;
    uint64_t dim;
    uint64_t t; /* steps applied so far */
    float *theta;
    float *m;
    float *v;
    /* After fsgd_adam_count_keys: each key's m, v and update count side by
     * side (m and v above are then NULL), and the correction factors by count. */
    struct fsgd_adam_key *keys;
    float *corr;
    /* With counted keys, optional (NULL: lr for every key), not owned: key
     * k's step is lr·min(sqrt(rarity[k]), rarity_cap), rarity being the
     * steps an epoch over the steps that touch k (fsgd train, lr auto). */
    const float *rarity;
    float rarity_cap;
} fsgd_adam_t;

/* Allocates θ, m, v of dim zeros. Returns 0 or FSGD_E_NOMEM. */
int fsgd_adam_init(fsgd_adam_t *a, uint64_t dim, const fsgd_adam_params_t *p);

/* θ alone, m and v not allocated: for a trainer whose optimizer is another
 * (fsgd/ftrl.h) but whose backends and model read θ here and count steps
 * in t. fsgd_adam_apply must not be called on it. Returns 0 or FSGD_E_NOMEM. */
int fsgd_adam_init_weights(fsgd_adam_t *a, uint64_t dim);

/* One step with a sparse gradient (keys strictly increasing, < dim):
 * increments t, updates m, v, θ on those keys only. */
void fsgd_adam_step(fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n);

/* The update of step a->t on a subset of keys, without advancing t: lets
 * threads update disjoint key ranges of one step in parallel (advance t once
 * with fsgd_adam_advance first). fsgd_adam_step = advance + apply. */
void fsgd_adam_advance(fsgd_adam_t *a);
void fsgd_adam_apply(const fsgd_adam_t *a, const uint32_t *keys, const float *grad, size_t n);

/* Per-key counts stop here: β2^32767 < 1e-14, so both corrections are 1. */
#define FSGD_ADAM_COUNT_MAX 32767

/* Switches to per-key bias corrections: key k's m and v are corrected with
 * its own update count t_k (1 - β^t_k) rather than the global step t, so a
 * key first seen late starts with a step of lr, not ~3.2·lr. Costs 2 bytes
 * a key (m, v and the count then live in one array of fsgd_adam_key_t); fsgd train uses it, the Kafka aggregator does not. Call before the
 * first step. Returns 0 or FSGD_E_NOMEM. Apply stays thread safe on
 * disjoint key ranges. */
int fsgd_adam_count_keys(fsgd_adam_t *a);

/* fsgd_adam_init then fsgd_adam_count_keys, without ever allocating the
 * separate m and v (fresh ones are all zero: reading them only maps 8
 * bytes a key of zero pages, 2^24 keys: 70 ms). Returns 0 or FSGD_E_NOMEM. */
int fsgd_adam_init_counted(fsgd_adam_t *a, uint64_t dim, const fsgd_adam_params_t *p);

/* Keys below n_keys updated at least once (nonzero v, or a nonzero count
 * after fsgd_adam_count_keys); 0 for fsgd_adam_init_weights. */
uint64_t fsgd_adam_touched(const fsgd_adam_t *a, uint64_t n_keys);

/* Maps every page of θ and of the optimizer state (m and v, or the key
 * states) for writing, without changing a byte, so that no step pays a
 * first-touch page fault (at 2^24 keys those were a third of the
 * aggregator's update). Safe while other threads read and write the arrays;
 * slow (the arrays' size in page clears), so callers run it on a thread of
 * their own before the steps. Returns 1 when the system could (Linux 5.14),
 * 0 when nothing was mapped. */
int fsgd_adam_map_pages(const fsgd_adam_t *a);

/* Frees the arrays. NULL is a no-op. */
void fsgd_adam_free(fsgd_adam_t *a);

/* The one step gradient of key k that fsgd train and the aggregator both feed
 * to Adam: the reduced sum times scale (1 / rows of the step) plus the L2
 * term on the key's current weight, computed in double and rounded once, so
 * the two trainers cannot drift apart. */
static inline float fsgd_adam_step_grad(double sum, double scale, double l2, float theta_k)
{
    return (float)(sum * scale + l2 * (double)theta_k);
}

/* Drains a reducer (fsgd/reduce.h) into the step gradients Adam takes:
 * out->vals[i] = fsgd_adam_step_grad(sum of key i, scale, l2, theta[key]),
 * keys increasing. Returns 0 or FSGD_E_NOMEM. */
int fsgd_reducer_take_step(fsgd_reducer_t *r, double scale, double l2, const float *theta, fsgd_sparse_t *out);

/* fsgd_reducer_take_step then fsgd_adam_step, in one pass over the keys
 * (the same bits): drains r into out (the keys and their step gradients)
 * and applies them. before, if not NULL, receives θ of out's keys before
 * the update. at: NULL, or the index of the i-th key's θ and state (a
 * sparse table's slots, below; out and before still get the keys). Returns
 * 0, FSGD_E_NOMEM, or FSGD_E_ARG for at with per-key rarity (by key). */
int fsgd_adam_step_reduced(fsgd_adam_t *a, fsgd_reducer_t *r, const uint32_t *at, double scale, double l2,
                           fsgd_sparse_t *out, fsgd_sparse_t *before);

/* A sparse table: θ and Adam's state for the keys ever touched, in a key
 * space far larger (an aggregator shard of a 2^30-weight model whose data
 * touches a few million keys; job key table). Each new key gets the next
 * slot (a key -> slot map, open addressing at most half full) and a's
 * arrays, indexed by slot, grow by doubling (fsgd_adam_grow). Keys are
 * mapped at the edges: a step's reduced keys (fsgd/step.h, the same bits as
 * a dense θ), a pull's keys, a snapshot's and a checkpoint's lists. Adam
 * only. Not thread safe. */
typedef struct fsgd_sparse_table fsgd_sparse_table_t;

/* An empty table with room for about expect keys before it grows; its
 * optimizer is the caller's (fsgd_adam_init or fsgd_adam_init_counted with
 * dim = expect). NULL when out of memory. */
fsgd_sparse_table_t *fsgd_sparse_table_new(size_t expect);
/* NULL is a no-op. */
void fsgd_sparse_table_destroy(fsgd_sparse_table_t *t);
/* The keys held (slots given). */
size_t fsgd_sparse_table_size(const fsgd_sparse_table_t *t);
/* θ of key: 0 for a key never touched (every weight starts at 0). */
float fsgd_sparse_table_theta(const fsgd_sparse_table_t *t, const fsgd_adam_t *a, uint32_t key);
/* The keys in slot order (fsgd_sparse_table_size of them; owned by t,
 * valid until it changes): a checkpoint's list. */
const uint32_t *fsgd_sparse_table_keys(const fsgd_sparse_table_t *t);
/* Every key in increasing order into keys and its slot into slots (the
 * caller's arrays of fsgd_sparse_table_size): a snapshot's pairs. Returns
 * 0 or FSGD_E_NOMEM. */
int fsgd_sparse_table_sorted(const fsgd_sparse_table_t *t, uint32_t *keys, uint32_t *slots);
/* Replaces t's keys with keys[0, n) in slot order (a checkpoint's) and
 * grows a to hold them. Returns 0, FSGD_E_NOMEM, or FSGD_E_FORMAT with
 * *bad the index of a key given twice. */
int fsgd_sparse_table_load(fsgd_sparse_table_t *t, fsgd_adam_t *a, const uint32_t *keys, size_t n, size_t *bad);

#endif
