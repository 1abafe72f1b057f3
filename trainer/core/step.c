/* The one step function (fsgd/step.h). */
#include "fsgd/step.h"

#include "fsgd/error.h"
#include "fsgd/reduce.h"
#include "sparse_table.h"

/* θ of out's keys into o->before, when asked (fsgd train --staleness). */
static int keep_before(const fsgd_step_opt_t *o, const fsgd_sparse_t *out)
{
    if (!o->before)
        return 0;
    FSGD_TRY(fsgd_sparse_reserve(o->before, out->n));
    for (size_t i = 0; i < out->n; i++) {
        o->before->keys[i] = out->keys[i];
        o->before->vals[i] = o->adam->theta[out->keys[i]];
    }
    o->before->n = out->n;
    return 0;
}

int fsgd_step_apply(const fsgd_step_opt_t *o, fsgd_sagg_t *agg, const fsgd_step_info_t *info, fsgd_sparse_t *out,
                    char *err, size_t errsz)
{
    char e[256];
    fsgd_reducer_t *red = fsgd_sagg_take(agg, info, e, sizeof e);
    if (!red)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "strategy: %s", e);
    fsgd_adam_t *a = o->adam;
    if (info->rows == 0) {
        fsgd_reducer_clear(red);
        out->n = 0;
        return keep_before(o, out);
    }
    if (o->table && (o->ftrl || fsgd_sagg_optimizer(agg) == FSGD_OPT_APPLY)) {
        fsgd_reducer_clear(red);
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "a sparse table takes Adam's update only");
    }
    if (o->table) {
        /* the step's keys to their slots (new keys get new ones), then Adam on the slots */
        size_t n;
        const uint32_t *keys = fsgd_reducer_sorted_keys(red, &n), *at;
        int rc = sparse_table_slots(o->table, a, keys, n, &at);
        if (rc < 0) {
            fsgd_reducer_clear(red);
            return fsgd_err_fmt(err, errsz, rc, "sparse table: %s", rc == FSGD_E_RANGE ? "more than 2^31 keys" : "out of memory");
        }
        FSGD_TRY(fsgd_adam_step_reduced(a, red, at, 1.0 / (double)info->rows, o->l2, out, o->before));
    } else if (fsgd_sagg_optimizer(agg) == FSGD_OPT_APPLY) {
        /* the workers ran the optimizer: the mean of what they sent is the step */
        FSGD_TRY(fsgd_reducer_take(red, -1.0 / (double)(info->n_senders ? info->n_senders : 1), out));
        FSGD_TRY(keep_before(o, out));
        for (size_t i = 0; i < out->n; i++)
            a->theta[out->keys[i]] += out->vals[i];
        a->t++;
    } else if (o->ftrl) {
        /* FTRL takes the step's summed gradient, without λθ (fsgd/ftrl.h) */
        FSGD_TRY(fsgd_reducer_take_step(red, 1.0, 0, NULL, out));
        FSGD_TRY(keep_before(o, out));
        fsgd_adam_advance(a);
        fsgd_ftrl_apply(o->ftrl, a->theta, out->keys, out->vals, out->n);
    } else {
        FSGD_TRY(fsgd_adam_step_reduced(a, red, NULL, 1.0 / (double)info->rows, o->l2, out, o->before));
    }
    return 0;
}
