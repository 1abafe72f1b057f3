/* A model version's training metrics from a metrics JSON (version_metrics.h).
 * fsgd train writes {"model": "logistic", "train_rows": N, "dim": D,
 * "test": {"n": N, "auc": A, "logloss": L, ...}, ...}; fsgd run writes
 * "rows_applied" instead of "train_rows" and no "model". Non-finite numbers
 * are null in both. */
#include "version_metrics.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/loss.h"

/* A whole non-negative number field, or -1. */
static int get_count(const json_t *o, const char *key, uint64_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* A number field (null or absent: NAN), or -1 when of another type. */
static int get_real(const json_t *o, const char *key, double *out)
{
    const json_t *v = json_object_get(o, key);
    *out = NAN;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return 0;
}

int serve_metrics_parse(const char *buf, size_t len, const char *name, const fsgd_model_t *m, serve_metrics_t *out,
                        char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    out->test_auc = out->test_logloss = NAN;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%d:%d: not JSON: %s", name, je.line, je.column, je.text);
    int rc = 0;
    uint64_t dim = 0;
    const json_t *loss = json_object_get(root, "model");
    const json_t *test = json_object_get(root, "test");
    if (!json_is_object(root))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: expected a JSON object (a metrics JSON of fsgd train or run)",
                          name);
    else if (get_count(root, "dim", &dim) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: no whole number \"dim\"", name);
    else if (dim != m->dim)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: dim %llu, the model has %llu: another model's metrics", name,
                          (unsigned long long)dim, (unsigned long long)m->dim);
    else if (loss && (!json_is_string(loss) || strcmp(json_string_value(loss), fsgd_loss_name(m->kind))))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: \"model\" %.40s, the model is %s: another model's metrics",
                          name, json_is_string(loss) ? json_string_value(loss) : "(not a string)",
                          fsgd_loss_name(m->kind));
    else if (get_count(root, "train_rows", &out->rows) < 0 && get_count(root, "rows_applied", &out->rows) < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: no whole number \"train_rows\" or \"rows_applied\"", name);
    else if (test && !json_is_object(test))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s: \"test\": expected an object", name);
    else if (test && (get_count(test, "n", &out->test_rows) < 0 || get_real(test, "auc", &out->test_auc) < 0 ||
                      get_real(test, "logloss", &out->test_logloss) < 0))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                          "%s: \"test\": expected \"n\" a whole number, \"auc\" and \"logloss\" numbers or null", name);
    json_decref(root);
    if (rc < 0)
        return rc;
    if (out->test_rows == 0)
        out->test_auc = out->test_logloss = NAN;
    out->known = 1;
    return 0;
}

int serve_metrics_check_auc(const serve_metrics_t *mt, double min_auc, char *err, size_t errsz)
{
    if (!(min_auc > 0))
        return 0;
    if (!mt->known)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "no held-out AUC to check against --min-auc %g: %s", min_auc,
                            mt->note[0] ? mt->note : "no metrics JSON (fsgd serve --metrics-json)");
    if (isnan(mt->test_auc))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "no held-out AUC to check against --min-auc %g: its metrics have no test AUC (train with "
                            "--test)", min_auc);
    if (mt->test_auc < min_auc)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "held-out AUC %.6f (%llu test rows) below --min-auc %g",
                            mt->test_auc, (unsigned long long)mt->test_rows, min_auc);
    return 0;
}
