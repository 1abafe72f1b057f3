/* The worker's queue of gradients sent ahead of the model (inflight.h). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "inflight.h"

int inflight_push(inflight_queue_t *q, uint64_t step, uint32_t gen, uint16_t flags, uint64_t rows,
                  const fsgd_wire_range_t *ranges, uint32_t nranges, const uint8_t *body, size_t len)
{
    if (q->n == q->cap) {
        size_t nc = q->cap ? 2 * q->cap : 4;
        inflight_t *ne = realloc(q->e, nc * sizeof *ne);
        if (!ne)
            return FSGD_E_NOMEM;
        memset(ne + q->cap, 0, (nc - q->cap) * sizeof *ne);
        q->e = ne;
        q->cap = nc;
    }
    inflight_t *e = &q->e[q->n]; /* a slot keeps its buffers from an earlier use */
    if (nranges > 0) {
        fsgd_wire_range_t *r = realloc(e->ranges, nranges * sizeof *r);
        if (!r)
            return FSGD_E_NOMEM;
        memcpy(r, ranges, nranges * sizeof *r);
        e->ranges = r;
    }
    if (len > e->body.cap) {
        uint8_t *b = realloc(e->body.p, len);
        if (!b)
            return FSGD_E_NOMEM;
        e->body.p = b;
        e->body.cap = len;
    }
    if (len)
        memcpy(e->body.p, body, len);
    e->body.n = len;
    e->step = step;
    e->gen = gen;
    e->flags = flags;
    e->doomed = 0;
    e->rows = rows;
    e->nranges = nranges;
    q->n++;
    return 0;
}

void inflight_pop(inflight_queue_t *q)
{
    if (!q->n)
        return;
    inflight_t first = q->e[0]; /* its buffers go to the free slot at the end */
    memmove(q->e, q->e + 1, (q->n - 1) * sizeof *q->e);
    q->e[--q->n] = first;
}

void inflight_clear(inflight_queue_t *q) { q->n = 0; }

void inflight_free(inflight_queue_t *q)
{
    for (size_t i = 0; i < q->cap; i++) {
        free(q->e[i].ranges);
        free(q->e[i].body.p);
    }
    free(q->e);
    memset(q, 0, sizeof *q);
}

uint64_t inflight_ahead(const inflight_queue_t *q, uint32_t gen, uint64_t step)
{
    if (!q->n || q->e[q->n - 1].gen != gen || q->e[q->n - 1].step <= step)
        return 0;
    return q->e[q->n - 1].step - step;
}

size_t inflight_project(inflight_queue_t *q, uint32_t gen, uint64_t step, const uint64_t *base, uint32_t nparts,
                        uint64_t *pos)
{
    memcpy(pos, base, nparts * sizeof *pos);
    size_t doomed = 0;
    for (size_t i = 0; i < q->n; i++) {
        inflight_t *e = &q->e[i];
        if (e->gen != gen || e->step <= step || e->doomed)
            continue;
        int on_chain = !doomed;
        for (uint32_t j = 0; on_chain && j < e->nranges; j++)
            on_chain = e->ranges[j].part >= nparts || e->ranges[j].start == pos[e->ranges[j].part];
        if (!on_chain) {
            e->doomed = 1;
            doomed++;
            continue;
        }
        for (uint32_t j = 0; j < e->nranges; j++)
            if (e->ranges[j].part < nparts)
                pos[e->ranges[j].part] = e->ranges[j].end;
    }
    return doomed;
}
