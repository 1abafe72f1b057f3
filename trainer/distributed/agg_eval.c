/* The model's metrics on the job's test rows: each epoch's end, each
 * follow version and the job's end score θ the same way. */
#include <stdlib.h>
#include <string.h>

#include "aggregator_internal.h"

int agg_evaluate(agg_t *a, fsgd_metrics_t *out)
{
    memset(out, 0, sizeof *out);
    if (!a->have_test)
        return 0;
    fsgd_model_t m = {.kind = a->job->train->model, .dim = a->dim, .has_bias = a->job->train->bias,
                      .bias = (float)a->job->train->bias_value, .w = a->model.adam.theta};
    size_t n = a->test.n_rows;
    double *margin = malloc((n ? n : 1) * sizeof *margin);
    if (!margin)
        return fsgd_err_fmt(a->err, a->errsz, FSGD_E_NOMEM, "evaluate: out of memory");
    for (size_t r = 0; r < n; r++) {
        uint64_t lo = a->test.row_ptr[r];
        margin[r] = fsgd_model_margin(&m, a->test.col + lo, a->test.val + lo, a->test.row_ptr[r + 1] - lo);
    }
    *out = fsgd_metrics_compute(a->job->train->model, margin, a->test.label, n);
    free(margin);
    return 0;
}
