/* Gradients that arrive before their step opens (bounded staleness, job key
 * staleness): a worker may be up to τ steps ahead of the newest model it has
 * applied, so frames of steps open+1 .. open+τ are held here, whole, and
 * taken in arrival order when their step opens. Steps are still applied in
 * step order, so the model does not depend on arrival order. Memory is
 * bounded: at most τ steps of every member's messages, and a frame repeated
 * exactly is dropped as a duplicate before it is stored. */
#include <stdlib.h>
#include <string.h>

#include "aggregator_internal.h"

/* τ steps of every member's chunks; beyond that a sender is flooding. */
#define EARLY_BYTES_MAX ((size_t)1 << 30)

int agg_early_hold(agg_t *a, const fsgd_kframe_t *f, const void *payload, size_t len, int64_t offset)
{
    for (size_t i = 0; i < a->open.nearly; i++) {
        const agg_early_t *h = &a->open.early[i];
        if (h->step == f->step && h->sender == f->sender && h->chunk == f->chunk) {
            agg_reject(a, FSGD_AGG_REJ_DUPLICATE, "sender %u step %llu chunk %u/%u: held for its step already",
                       f->sender, (unsigned long long)f->step, f->chunk, f->nchunks);
            return 0;
        }
    }
    if (a->open.early_bytes + len > EARLY_BYTES_MAX) {
        agg_reject(a, FSGD_AGG_REJ_OVERSIZE, "sender %u step %llu: %zu bytes already wait for later steps",
                   f->sender, (unsigned long long)f->step, a->open.early_bytes);
        return 0;
    }
    if (a->open.nearly == a->open.cap_early) {
        size_t nc = a->open.cap_early ? 2 * a->open.cap_early : 64;
        agg_early_t *ne = realloc(a->open.early, nc * sizeof *ne);
        if (!ne)
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        a->open.early = ne;
        a->open.cap_early = nc;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
    memcpy(copy, payload, len);
    a->open.early[a->open.nearly++] = (agg_early_t){f->step, f->sender, f->chunk, offset, copy, len};
    a->open.early_bytes += len;
    a->s->grads_early++;
    return 0;
}

int agg_early_due(agg_t *a, agg_early_t **take, size_t *ntake)
{
    uint64_t open = a->step + 1;
    size_t k = 0, n = a->open.nearly;
    *take = NULL;
    *ntake = 0;
    for (size_t i = 0; i < n; i++) {
        agg_early_t h = a->open.early[i];
        if (h.step > open) {
            a->open.early[k++] = h;
            continue;
        }
        if (!*take && !(*take = malloc(n * sizeof **take)))
            return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "aggregator: out of memory");
        a->open.early_bytes -= h.len;
        (*take)[(*ntake)++] = h; /* h.step < open: its step closed without it (a drop); taking it rejects it as stale */
    }
    a->open.nearly = k;
    return 0;
}

void agg_early_free(agg_t *a)
{
    for (size_t i = 0; i < a->open.nearly; i++)
        free(a->open.early[i].bytes);
    free(a->open.early);
    a->open.early = NULL;
    a->open.nearly = a->open.cap_early = a->open.early_bytes = 0;
}
