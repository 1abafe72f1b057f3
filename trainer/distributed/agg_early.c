/* Gradients that arrive before their step opens (bounded staleness, job key
 * staleness): a worker may be up to τ steps ahead of the newest model it has
 * applied, so frames of steps open+1 .. open+τ are held here, whole, and
 * taken in arrival order when their step opens. Steps are still applied in
 * step order, so the model does not depend on arrival order. Memory is
 * bounded: at most τ steps of every member's messages, and a frame repeated
 * exactly is dropped as a duplicate before it is stored. */
#include <stdlib.h>
#include <string.h>

#include "agg_early.h"
#include "fsgd/error.h"

/* τ steps of every member's chunks; beyond that a sender is flooding. */
#define EARLY_BYTES_MAX ((size_t)1 << 30)

int agg_early_hold(agg_early_set_t *h, const agg_env_t *e, const fsgd_kframe_t *f, const void *payload, size_t len,
                   int64_t offset)
{
    for (size_t i = 0; i < h->n; i++) {
        const agg_early_t *x = &h->held[i];
        if (x->step == f->step && x->sender == f->sender && x->chunk == f->chunk) {
            agg_env_reject(e, FSGD_AGG_REJ_DUPLICATE, "sender %u step %llu chunk %u/%u: held for its step already",
                           f->sender, (unsigned long long)f->step, f->chunk, f->nchunks);
            return 0;
        }
    }
    if (h->bytes + len > EARLY_BYTES_MAX) {
        agg_env_reject(e, FSGD_AGG_REJ_OVERSIZE, "sender %u step %llu: %zu bytes already wait for later steps",
                       f->sender, (unsigned long long)f->step, h->bytes);
        return 0;
    }
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 64;
        agg_early_t *ne = realloc(h->held, nc * sizeof *ne);
        if (!ne)
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        h->held = ne;
        h->cap = nc;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    memcpy(copy, payload, len);
    h->held[h->n++] = (agg_early_t){f->step, f->sender, f->chunk, offset, copy, len};
    h->bytes += len;
    e->s->grads_early++;
    return 0;
}

int agg_early_due(agg_early_set_t *h, const agg_env_t *e, uint64_t open_step, agg_early_t **take, size_t *ntake)
{
    size_t k = 0, n = h->n;
    *take = NULL;
    *ntake = 0;
    for (size_t i = 0; i < n; i++) {
        agg_early_t x = h->held[i];
        if (x.step > open_step) {
            h->held[k++] = x;
            continue;
        }
        if (!*take && !(*take = malloc(n * sizeof **take)))
            return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        h->bytes -= x.len;
        (*take)[(*ntake)++] = x; /* x.step < open_step: its step closed without it (a drop); taking it rejects it as stale */
    }
    h->n = k;
    return 0;
}

void agg_early_free(agg_early_set_t *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->held[i].bytes);
    free(h->held);
    h->held = NULL;
    h->n = h->cap = h->bytes = 0;
}
