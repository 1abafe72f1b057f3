/* The open step's bookkeeping: opening it, taking a gradient into its
 * accounts, and its memory. */
#include <stdlib.h>
#include <string.h>

#include "agg_members.h"
#include "agg_open.h"

void agg_open_begin(agg_open_step_t *o, const fsgd_wire_state_t *st, uint64_t step)
{
    o->napplied = 0;
    o->up_entries_step = 0;
    o->up_bytes_step = 0;
    memset(o->claimed, 0, st->nparts);
    memcpy(o->newpos, st->pos, st->nparts * sizeof *o->newpos);
    o->rows_step = 0;
    o->loss_step = 0;
    fsgd_kasm_prune(o->as, step);
}

void agg_open_take(agg_open_step_t *o, fsgd_agg_stats_t *s, uint32_t sender, const fsgd_wire_grad_t *g, size_t entries,
                   unsigned lag)
{
    for (uint32_t i = 0; i < g->nranges; i++) {
        o->claimed[g->ranges[i].part] = 1;
        o->newpos[g->ranges[i].part] = g->ranges[i].end;
    }
    o->rows_step += g->rows;
    o->loss_step += g->loss_sum;
    s->t_grad += g->t_grad;
    s->t_encode += g->t_encode;
    s->raw_bytes += 8 * g->raw_entries;
    s->codec_bytes += g->codec_len;
    s->grads_accepted++;
    s->up_msgs++;
    o->up_entries_step += entries;
    s->up_entries += entries;
    o->up_bytes_step += g->codec_len;
    if (lag) {
        s->grads_stale++;
        if (lag > s->lag_max)
            s->lag_max = lag;
    }
    agg_add_set(&o->applied, &o->napplied, &o->cap_applied, sender);
}

void agg_open_free(agg_open_step_t *o)
{
    fsgd_sparse_free(&o->g);
    fsgd_kasm_destroy(o->as);
    o->as = NULL;
    agg_early_free(&o->early);
    free(o->applied);
    free(o->claimed);
    free(o->newpos);
    o->applied = NULL;
    o->claimed = NULL;
    o->newpos = NULL;
    o->napplied = o->cap_applied = 0;
}
