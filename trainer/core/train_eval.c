/* Scoring rows with a model: the holdout's and test rows' margins on the
 * job's threads (train_eval.h), and fsgd_train_evaluate (fsgd/train.h). */
#include "train_eval.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/keysort.h"
#include "fsgd/train.h"

static void margins_range(const float *theta, uint64_t model_dim, const fsgd_csr_t *rows, size_t lo, size_t hi,
                          double *out)
{
    for (size_t r = lo; r < hi; r++) {
        double m = 0;
        /* θ of the next row, while this row's misses are waited for */
        if (r + 1 < hi)
            for (uint64_t i = rows->row_ptr[r + 1]; i < rows->row_ptr[r + 2]; i++)
                if (rows->col[i] < model_dim)
                    __builtin_prefetch(&theta[rows->col[i]], 0, 3);
        for (uint64_t i = rows->row_ptr[r]; i < rows->row_ptr[r + 1]; i++)
            if (rows->col[i] < model_dim) /* a binary batch's values are 1 */
                m += (double)theta[rows->col[i]] * (rows->val ? rows->val[i] : 1.0f);
        out[r] = m;
    }
}

/* Scoring rows (holdout looks, test) on all the job's threads: chunks of
 * rows taken from a shared counter, so a thread that starts late or is
 * preempted leaves its share to the others. Each row's sum is the same on
 * any thread. Threads are started per call: a call scores tens of
 * thousands of rows, far more than a thread's start costs. */
typedef struct margins_job {
    const float *theta;
    uint64_t dim;
    const fsgd_csr_t *rows;
    double *out;
    atomic_size_t next;
} margins_job_t;

#define MARGINS_CHUNK 2048

static void *margins_chunks(void *arg)
{
    margins_job_t *j = arg;
    const size_t n = j->rows->n_rows;
    for (;;) {
        size_t lo = atomic_fetch_add(&j->next, MARGINS_CHUNK);
        if (lo >= n)
            return NULL;
        margins_range(j->theta, j->dim, j->rows, lo, n - lo < MARGINS_CHUNK ? n : lo + MARGINS_CHUNK, j->out);
    }
}

void fsgd_train_margins(int threads, const float *theta, uint64_t model_dim, const fsgd_csr_t *rows, double *out)
{
    size_t most = rows->n_rows / (2 * MARGINS_CHUNK); /* at least two chunks a thread */
    if (threads > 16)
        threads = 16;
    if ((size_t)threads > most)
        threads = (int)most;
    if (threads < 2) {
        margins_range(theta, model_dim, rows, 0, rows->n_rows, out);
        return;
    }
    margins_job_t j = {.theta = theta, .dim = model_dim, .rows = rows, .out = out};
    atomic_init(&j.next, 0);
    pthread_t tid[16];
    int started = 0;
    while (started < threads - 1 && pthread_create(&tid[started], NULL, margins_chunks, &j) == 0)
        started++;
    margins_chunks(&j); /* alone if no thread started */
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
}

int fsgd_train_evaluate(const fsgd_model_t *model, const fsgd_csr_t *rows, fsgd_metrics_t *out)
{
    double *m = malloc((rows->n_rows ? rows->n_rows : 1) * sizeof *m);
    /* a binary batch's values: 1 for the longest row */
    size_t longest = 0;
    for (size_t r = 0; r < rows->n_rows && !rows->val; r++)
        if (rows->row_ptr[r + 1] - rows->row_ptr[r] > longest)
            longest = (size_t)(rows->row_ptr[r + 1] - rows->row_ptr[r]);
    float *ones = rows->val ? NULL : malloc((longest ? longest : 1) * sizeof *ones);
    if (!m || (!rows->val && !ones)) {
        free(m);
        free(ones);
        return FSGD_E_NOMEM;
    }
    for (size_t i = 0; i < longest; i++)
        ones[i] = 1.0f;
    for (size_t r = 0; r < rows->n_rows; r++) {
        uint64_t lo = rows->row_ptr[r];
        m[r] = fsgd_model_margin(model, rows->col + lo, rows->val ? rows->val + lo : ones,
                                 (size_t)(rows->row_ptr[r + 1] - lo));
    }
    free(ones);
    *out = fsgd_metrics_compute(model->kind, m, rows->label, rows->n_rows);
    free(m);
    return FSGD_E_OK;
}

/* The index of key in keys[0, n) (increasing), or n when absent. */
static size_t find_key(const uint32_t *keys, size_t n, uint32_t key)
{
    size_t lo = fsgd_keys_lower_bound(keys, n, key);
    return lo < n && keys[lo] == key ? lo : n;
}

int fsgd_train_evaluate_pairs(const fsgd_model_t *shape, const fsgd_sparse_t *w, const fsgd_csr_t *rows,
                              fsgd_metrics_t *out)
{
    /* The rows' own columns, sorted once: a model over them alone (weights
     * looked up in w) and the rows on its columns score exactly as the
     * whole model would, in the same order of sums. */
    uint32_t *cols = malloc((rows->nnz ? rows->nnz : 1) * sizeof *cols);
    uint32_t *local = malloc((rows->nnz ? rows->nnz : 1) * sizeof *local);
    float *lw = NULL;
    int rc = cols && local ? 0 : FSGD_E_NOMEM;
    size_t n = 0;
    if (!rc) {
        memcpy(cols, rows->col, rows->nnz * sizeof *cols);
        fsgd_keysort(cols, rows->nnz);
        for (size_t i = 0; i < rows->nnz; i++)
            if (cols[i] < shape->dim && (n == 0 || cols[i] != cols[n - 1]))
                cols[n++] = cols[i];
        lw = calloc(n + 1, sizeof *lw);
        rc = lw ? 0 : FSGD_E_NOMEM;
    }
    for (size_t j = 0; !rc && j < n; j++) {
        size_t at = find_key(w->keys, w->n, cols[j]);
        lw[j] = at < w->n ? w->vals[at] : 0.0f;
    }
    if (!rc && shape->has_bias && w->n && w->keys[w->n - 1] == shape->dim)
        lw[n] = w->vals[w->n - 1];
    /* a column past the model's dim stays past the local one: skipped as before */
    for (size_t i = 0; !rc && i < rows->nnz; i++)
        local[i] = rows->col[i] < shape->dim ? (uint32_t)find_key(cols, n, rows->col[i]) : (uint32_t)n + 1;
    if (!rc) {
        fsgd_model_t m = *shape;
        m.dim = n;
        m.w = lw;
        fsgd_csr_t r = *rows;
        r.col = local;
        rc = fsgd_train_evaluate(&m, &r, out);
    }
    free(cols);
    free(local);
    free(lw);
    return rc;
}
