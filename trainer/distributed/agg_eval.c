/* The model's metrics on the job's test rows: each epoch's end, each
 * follow version and the job's end score θ the same way. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/model.h"
#include "agg_eval.h"

int agg_evaluate(const fsgd_train_params_t *tp, uint64_t dim, const float *theta, const fsgd_csr_t *test,
                 fsgd_metrics_t *out, const agg_env_t *e)
{
    memset(out, 0, sizeof *out);
    if (!test)
        return 0;
    /* w is only read: fsgd_model_margin takes the model const */
    fsgd_model_t m = {.kind = tp->model, .dim = dim, .has_bias = tp->bias, .bias = (float)tp->bias_value,
                      .w = (float *)theta};
    size_t n = test->n_rows;
    double *margin = malloc((n ? n : 1) * sizeof *margin);
    if (!margin)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "evaluate: out of memory");
    for (size_t r = 0; r < n; r++) {
        uint64_t lo = test->row_ptr[r];
        margin[r] = fsgd_model_margin(&m, test->col + lo, test->val + lo, test->row_ptr[r + 1] - lo);
    }
    *out = fsgd_metrics_compute(tp->model, margin, test->label, n);
    free(margin);
    return 0;
}
