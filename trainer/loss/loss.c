/* The three losses (fsgd/loss.h); the formulas themselves are in
 * fsgd/loss_formulas.h, shared with the CUDA device code. */
#include "fsgd/loss.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/loss_formulas.h"
#include "loss_testing.h"

const char *fsgd_loss_name(fsgd_loss_kind_t k)
{
    switch (k) {
    case FSGD_LOSS_LOGISTIC:
        return "logistic";
    case FSGD_LOSS_SQUARED:
        return "linear";
    case FSGD_LOSS_HINGE:
        return "svm";
    }
    return "unknown";
}

fsgd_loss_kind_t fsgd_loss_parse(const char *name)
{
    if (!strcmp(name, "logistic") || !strcmp(name, "lr"))
        return FSGD_LOSS_LOGISTIC;
    if (!strcmp(name, "linear") || !strcmp(name, "squared"))
        return FSGD_LOSS_SQUARED;
    if (!strcmp(name, "svm") || !strcmp(name, "hinge"))
        return FSGD_LOSS_HINGE;
    return (fsgd_loss_kind_t)0;
}

double fsgd_loss_value(fsgd_loss_kind_t k, double m, double y) { return fsgd_loss_formula_value(k, m, y); }

double fsgd_loss_deriv(fsgd_loss_kind_t k, double m, double y) { return fsgd_loss_formula_deriv(k, m, y); }

void fsgd_label_set_add(fsgd_label_set_t *s, const double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const double v = s->classes ? (y[i] > 0 ? 1.0 : -1.0) : y[i];
        int k = 0;
        while (k < s->n && s->v[k] != v)
            k++;
        if (k < s->n)
            continue;
        if (s->n < FSGD_LABELS_KEPT)
            s->v[s->n++] = v;
        else
            s->more = 1;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int fsgd_loss_check_labels(fsgd_loss_kind_t k, const fsgd_label_set_t *s, char *err, size_t errsz)
{
    if (k == FSGD_LOSS_SQUARED)
        return 0;
    double v[FSGD_LABELS_KEPT];
    int n = s->n;
    memcpy(v, s->v, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    if (n == 2 && !s->more && v[1] == 1 && (v[0] == 0 || v[0] == -1))
        return 0;
    char set[160] = "";
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof set; i++)
        used += (size_t)snprintf(set + used, sizeof set - used, "%s%g", i ? ", " : "", v[i]);
    if (s->more && used < sizeof set)
        snprintf(set + used, sizeof set - used, ", ...");
    if (n == 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "no rows: a %s model needs rows of both classes",
                            fsgd_loss_name(k));
    if (n == 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "every row has label %g: a %s model needs both classes (labelled 0/1 or -1/1); with "
                            "one class there is nothing to separate and AUC is undefined",
                            v[0], fsgd_loss_name(k));
    return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                        "labels {%s}: a %s model needs two classes labelled {0, 1} or {-1, 1} (use --model linear "
                        "for regression)",
                        set, fsgd_loss_name(k));
}
