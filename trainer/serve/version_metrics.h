/* What training recorded about a model version (private to trainer/serve):
 * the rows it was trained on and its held-out metrics, read from the
 * metrics JSON that fsgd train --metrics-json (or fsgd run's) wrote beside
 * the model file. The model file itself records neither. */
#ifndef FSGD_SERVE_VERSION_METRICS_H
#define FSGD_SERVE_VERSION_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/model.h"

typedef struct serve_metrics {
    int known;          /* 1: read, and it describes this version's model */
    uint64_t rows;      /* rows trained: train_rows (fsgd train) or rows_applied (fsgd run) */
    uint64_t test_rows; /* 0: trained without --test (no held-out AUC) */
    double test_auc, test_logloss; /* NAN when not recorded */
    char note[320];     /* why not known ("m.json is older than the model"), or "" */
} serve_metrics_t;

/* Reads the metrics JSON buf[0..len) (named name in errors) for model m:
 * its "dim" must be m's, and its "model" (the loss, fsgd train's) m's loss
 * when present, else FSGD_E_FORMAT ("m.json: dim 124, the model has 123").
 * Returns 0 with out filled (known = 1), FSGD_E_PARSE (not JSON: the line
 * and column) or FSGD_E_FORMAT (a field missing or of the wrong type,
 * named). Thread safe. */
int serve_metrics_parse(const char *buf, size_t len, const char *name, const fsgd_model_t *m, serve_metrics_t *out,
                        char *err, size_t errsz);

/* 0 when a version with these metrics may serve under min_auc (<= 0: no
 * bound); otherwise FSGD_E_RANGE (its held-out AUC is below min_auc) or
 * FSGD_E_FORMAT (it has none to compare), err saying which and why. */
int serve_metrics_check_auc(const serve_metrics_t *mt, double min_auc, char *err, size_t errsz);

#endif
