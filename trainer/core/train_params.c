/* What core makes of its parameters (fsgd/train_params.h): the backend to
 * create, the class weights, the optimizer's name. */
#include "fsgd/train_params.h"

#include <string.h>

#include "fsgd/error.h"
#include "fsgd/rowlabel.h"

const char *fsgd_train_backend(const fsgd_train_params_t *p, double rows_per_process)
{
    if (!strcmp(p->backend, "auto") && rows_per_process > 0 && rows_per_process < FSGD_AUTO_CUDA_MIN_ROWS)
        return "cpu";
    return p->backend;
}

const char *fsgd_optimizer_name(fsgd_job_optimizer_t o)
{
    return o == FSGD_OPTIMIZER_FTRL ? "ftrl" : "adam";
}

int fsgd_train_class_weight(const fsgd_train_params_t *p, double *pos, double *neg, char *err, size_t errsz)
{
    *pos = *neg = 1;
    if (!p->class_weight[0])
        return 0;
    if (fsgd_rowlabel_class_weight_parse(p->class_weight, strlen(p->class_weight), pos, neg) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "class_weight: '%s' is not POS,NEG (two numbers > 0: the weights of the positive and the "
                            "negative class's rows, e.g. 1,0.25)",
                            p->class_weight);
    return 0;
}
