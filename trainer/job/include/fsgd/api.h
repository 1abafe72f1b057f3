/* The stable C API for bindings (the Python package, python/fsgd/_lib.py):
 * what a binding may rely on across releases of libfsgd.so without knowing
 * the layout of any struct. Models are opaque handles read through
 * accessors; a binding never mirrors fsgd_model_t (a field added there must
 * not break it).
 *
 * FSGD_API_VERSION counts incompatible changes to the functions below: a
 * binding built for version N refuses a library whose fsgd_api_version()
 * is not N. Functions added keep the version. */
#ifndef FSGD_API_H
#define FSGD_API_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/model.h"

#define FSGD_API_VERSION 1

/* FSGD_API_VERSION as the library was built. */
int fsgd_api_version(void);

/* Reads and checks the model file at path (fsgd_model_load) into a new
 * handle *out, which the caller releases with fsgd_api_model_free. Returns
 * 0, or an fsgd error (*out NULL) with err set. */
int fsgd_api_model_load(const char *path, fsgd_model_t **out, char *err, size_t errsz);

/* The model's loss (fsgd_loss_kind_t: 1 logistic, 2 squared, 3 hinge), its feature columns, whether it has an
 * intercept and that feature's value. */
int fsgd_api_model_kind(const fsgd_model_t *m);
uint64_t fsgd_api_model_dim(const fsgd_model_t *m);
int fsgd_api_model_has_bias(const fsgd_model_t *m);
float fsgd_api_model_bias_value(const fsgd_model_t *m);

/* Its weights: dim floats, then the intercept's weight when it has one.
 * Valid until fsgd_api_model_free. */
const float *fsgd_api_model_weights(const fsgd_model_t *m);

/* The input row format the model was trained on ("" for LIBSVM; a column
 * spec otherwise, fsgd/rowfmt.h). Valid until fsgd_api_model_free. */
const char *fsgd_api_model_input(const fsgd_model_t *m);

/* Releases a handle of fsgd_api_model_load; NULL is a no-op. */
void fsgd_api_model_free(fsgd_model_t *m);

/* Its file's bytes (what fsgd_model_save writes) in a new buffer *out of
 * *len bytes, which the caller releases with fsgd_api_buffer_free. Returns
 * 0, or an fsgd error with err set. */
int fsgd_api_model_encode(const fsgd_model_t *m, void **out, size_t *len, char *err, size_t errsz);

/* Scores the rows of the file at path with m, read as the model's input
 * says (fsgd predict's reader, fsgd/predict_file.h: LIBSVM, hashed
 * formats, VW text; gzip or zstd compressed too): *n margins (x.w + bias)
 * in file order in a new buffer *margins (fsgd_api_buffer_free). skip_bad:
 * LIBSVM rows that do not parse are skipped. Returns 0, or an fsgd error
 * with err set. */
int fsgd_api_model_score_file(const fsgd_model_t *m, const char *path, int skip_bad, double **margins, size_t *n,
                              char *err, size_t errsz);

/* Releases a buffer of this API; NULL is a no-op. */
void fsgd_api_buffer_free(void *p);

/* Training on rows a binding holds in CSR form (SciPy's csr_matrix arrays),
 * with no text in between: fsgd train's job for a LIBSVM file of the same
 * rows, with its defaults (threads: the machine's cores), its keys
 * (fsgd_api_train_set) and its checks; without test rows, test_fraction of
 * the rows held out as fsgd train holds them out of --data; labels checked,
 * and any two values mapped, as the file's; row weights and class_weight as
 * fsgd train applies VW's importance weights. The model is the one fsgd
 * train writes for that file with those options, bit for bit. A handle
 * trains once; one thread a handle at a time, handles are independent. The
 * library copies the arrays: the caller's are only read, during the call. */
typedef struct fsgd_api_train fsgd_api_train_t;

/* A new handle *out (fsgd_api_train_free). Returns 0 or FSGD_E_NOMEM. */
int fsgd_api_train_new(fsgd_api_train_t **out, char *err, size_t errsz);

/* A new handle *out that trains on files, as `fsgd train` does
 * (fsgd/train_files.h): the keys data and test name them, and every key of
 * fsgd train is taken (format, cache, init, ...) but out and metrics_json
 * (the caller writes what it wants of the model and fsgd_api_train_metrics).
 * The model is the one fsgd train writes with those options, bit for bit.
 * Returns 0 or FSGD_E_NOMEM. */
int fsgd_api_train_new_files(fsgd_api_train_t **out, char *err, size_t errsz);

/* Sets a job key as `fsgd train --KEY VALUE` does (fsgd_job_set: "epochs",
 * "l2", "optimizer", "class_weight", ...); key "job" applies a YAML job
 * file. Keys naming files the arrays stand for (data, test, format, cache,
 * init, out, metrics_json, hash_bits) are refused. Returns 0 or FSGD_E_ARG
 * naming the key. */
int fsgd_api_train_set(fsgd_api_train_t *t, const char *key, const char *value, char *err, size_t errsz);

/* The training rows: n_rows rows, row r's entries col[row_ptr[r] ..
 * row_ptr[r + 1]) (0-based columns, strictly increasing within a row) with
 * values val (NULL: every value 1), and n_rows labels. Given once. Returns 0,
 * FSGD_E_FORMAT / FSGD_E_NONFINITE naming the row, or FSGD_E_NOMEM. */
int fsgd_api_train_data(fsgd_api_train_t *t, size_t n_rows, const int64_t *row_ptr, const uint32_t *col,
                        const double *val, const double *label, char *err, size_t errsz);

/* The test rows, as fsgd_api_train_data's (fsgd train --test): scored, never
 * trained on; without them test_fraction of the training rows are. */
int fsgd_api_train_test(fsgd_api_train_t *t, size_t n_rows, const int64_t *row_ptr, const uint32_t *col,
                        const double *val, const double *label, char *err, size_t errsz);

/* Each training row's weight (n of them, one a row of fsgd_api_train_data,
 * finite and >= 0; rows of weight 0 are left out), as VW's importance
 * weights: classification models only. Returns 0 or FSGD_E_ARG. */
int fsgd_api_train_weights(fsgd_api_train_t *t, const double *weight, size_t n, char *err, size_t errsz);

/* Trains (fsgd_train) and gives the model as a new handle *model
 * (fsgd_api_model_free). The rows are freed as training goes. Returns 0, or
 * an fsgd error (*model NULL) with err set. Releases no lock it does not
 * hold: a binding may run it without its interpreter's lock. */
int fsgd_api_train_run(fsgd_api_train_t *t, fsgd_model_t **model, char *err, size_t errsz);

/* A figure of the run after fsgd_api_train_run, by the name fsgd train's
 * --metrics-json gives it: train_rows, dim, steps, epochs_run, best_epoch,
 * stopped_early, holdout_rows, holdout_loss, lr, l2, alpha, l1, ftrl (1 when
 * the optimizer is FTRL), threads, weights_nonzero, weights_touched,
 * train_seconds, and the test set's test_n, test_auc, test_logloss,
 * test_accuracy, test_rmse, test_loss. NAN for another name or before the
 * run. */
double fsgd_api_train_stat(const fsgd_api_train_t *t, const char *name);

/* After fsgd_api_train_run on files: the metrics JSON fsgd train's
 * --metrics-json would hold (*len bytes at *json, valid until
 * fsgd_api_train_free). Returns 0, or FSGD_E_STATE when there is none. */
int fsgd_api_train_metrics(const fsgd_api_train_t *t, const char **json, size_t *len);

/* Releases a handle of fsgd_api_train_new; NULL is a no-op. */
void fsgd_api_train_free(fsgd_api_train_t *t);

/* --- a job's Kafka topics (trainer/job/api_kafka.c) --- */

/* The newest model of job `name` on brokers ("host:port,..."), rebuilt from
 * its topic NAME.model as fsgd model assemble rebuilds it: a new handle
 * *out (fsgd_api_model_free) and its step in *step (may be NULL).
 * settings: "key=value" lines (NULL: none): job_key_file=PATH (the job's
 * key: only messages with its tag are taken; a job of fsgd run is
 * authenticated), partial=1 (also a job still running: its newest model so
 * far), connect_timeout_ms=N (default 15000), and Kafka client settings
 * (security.*, sasl.*, ssl.*, fsgd_kbus_options_add). Returns 0, or an
 * fsgd error with err set (FSGD_E_KAFKA when the brokers cannot be read,
 * FSGD_E_ARG for a setting). */
int fsgd_api_model_from_topic(const char *brokers, const char *name, const char *settings, fsgd_model_t **out,
                              uint64_t *step, char *err, size_t errsz);

#endif
