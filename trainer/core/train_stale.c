/* fsgd train --staleness: the ring of the last τ updates (train_stale.h). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "train_stale.h"

int fsgd_stale_init(fsgd_stale_t *s, int tau)
{
    memset(s, 0, sizeof *s);
    s->before = calloc((size_t)tau, sizeof *s->before);
    s->after = calloc((size_t)tau, sizeof *s->after);
    if (!s->before || !s->after) {
        fsgd_stale_free(s);
        return FSGD_E_NOMEM;
    }
    s->tau = tau;
    return 0;
}

int fsgd_stale_push(fsgd_stale_t *s, const fsgd_sparse_t *before, const float *theta)
{
    fsgd_sparse_t *b = &s->before[s->head], *a = &s->after[s->head];
    FSGD_TRY(fsgd_sparse_reserve(b, before->n));
    FSGD_TRY(fsgd_sparse_reserve(a, before->n));
    memcpy(b->keys, before->keys, before->n * sizeof *b->keys);
    memcpy(b->vals, before->vals, before->n * sizeof *b->vals);
    memcpy(a->keys, before->keys, before->n * sizeof *a->keys);
    for (size_t i = 0; i < before->n; i++)
        a->vals[i] = theta[before->keys[i]];
    b->n = a->n = before->n;
    s->head = (s->head + 1) % (size_t)s->tau;
    if (s->n < (size_t)s->tau)
        s->n++;
    return 0;
}

void fsgd_stale_rewind(const fsgd_stale_t *s, float *theta)
{
    for (size_t j = 0; j < s->n; j++) {
        const fsgd_sparse_t *b = &s->before[(s->head + (size_t)s->tau - 1 - j) % (size_t)s->tau];
        for (size_t i = 0; i < b->n; i++)
            theta[b->keys[i]] = b->vals[i];
    }
}

void fsgd_stale_replay(const fsgd_stale_t *s, float *theta)
{
    for (size_t j = s->n; j-- > 0;) {
        const fsgd_sparse_t *a = &s->after[(s->head + (size_t)s->tau - 1 - j) % (size_t)s->tau];
        for (size_t i = 0; i < a->n; i++)
            theta[a->keys[i]] = a->vals[i];
    }
}

void fsgd_stale_free(fsgd_stale_t *s)
{
    for (int i = 0; s->before && i < s->tau; i++)
        fsgd_sparse_free(&s->before[i]);
    for (int i = 0; s->after && i < s->tau; i++)
        fsgd_sparse_free(&s->after[i]);
    free(s->before);
    free(s->after);
    memset(s, 0, sizeof *s);
}
