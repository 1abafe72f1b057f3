/* Job configuration: YAML files, --set and flags share one field table;
 * every error names the key (and for YAML the line and column). */
#include <stdlib.h>

#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/train.h"
#include "testlib.h"

static int load_yaml_text(fsgd_job_t *job, const char *text, char *err, size_t errsz)
{
    const char *path = fsgd_test_tmp("job.yaml");
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, text, strlen(text)), 0);
    return fsgd_job_load_yaml(job, path, err, errsz);
}

static void test_yaml_sections_and_flat_keys(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512] = "";
    int rc = load_yaml_text(&job,
                            "data:\n  data: a.svm\n  test: b.svm\nmodel:\n  model: svm\n  bias: false\n"
                            "optimizer: {lr: 0.5, epochs: 7, batch: 0.01}\ncodec: \"fastsgd:b=1.2\"\nworkers: 4\n",
                            err, sizeof err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(job.train.data, "a.svm");
    CU_ASSERT_STRING_EQUAL(job.train.test, "b.svm");
    CU_ASSERT_EQUAL(job.train.model, FSGD_LOSS_HINGE);
    CU_ASSERT_EQUAL(job.train.bias, 0);
    CU_ASSERT_DOUBLE_EQUAL(job.train.lr, 0.5, 0);
    CU_ASSERT_EQUAL(job.train.epochs, 7);
    CU_ASSERT_DOUBLE_EQUAL(job.train.batch, 0.01, 0);
    CU_ASSERT_STRING_EQUAL(job.train.codec, "fastsgd:b=1.2");
    CU_ASSERT_EQUAL(job.dist.workers, 4);
}

static void test_yaml_unknown_key_names_place(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512] = "";
    int rc = load_yaml_text(&job, "data: a.svm\noptimizer:\n  lrate: 0.1\n", err, sizeof err);
    CU_ASSERT_EQUAL(rc, FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "job.yaml:3:10");
    FSGD_ASSERT_CONTAINS(err, "unknown key 'optimizer.lrate'");
}

static void test_yaml_bad_value_names_key(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512] = "";
    CU_ASSERT_EQUAL(load_yaml_text(&job, "epochs: many\n", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "job.yaml:1:9");
    FSGD_ASSERT_CONTAINS(err, "key 'epochs': expected a number, got 'many'");
    CU_ASSERT_EQUAL(load_yaml_text(&job, "model: forest\n", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "key 'model': expected logistic, linear or svm, got 'forest'");
    CU_ASSERT_EQUAL(load_yaml_text(&job, "lr: -1\n", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "key 'lr': -1 is out of range");
    CU_ASSERT_EQUAL(load_yaml_text(&job, "epochs: 2.5\n", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "key 'epochs': expected an integer");
}

static void test_yaml_syntax_error_names_line(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512] = "";
    CU_ASSERT_EQUAL(load_yaml_text(&job, "lr: 0.1\nepochs: [1, 2\n", err, sizeof err) < 0, 1);
    FSGD_ASSERT_CONTAINS(err, "job.yaml:2:");
    CU_ASSERT_EQUAL(fsgd_job_load_yaml(&job, "/nonexistent/x.yaml", err, sizeof err), FSGD_E_IO);
    FSGD_ASSERT_CONTAINS(err, "/nonexistent/x.yaml");
}

static void test_flags_override_yaml(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512] = "";
    const char *path = fsgd_test_tmp("flags.yaml");
    const char *text = "data: a.svm\nlr: 0.2\nepochs: 3\n";
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, text, strlen(text)), 0);
    char *argv[] = {"train", "--epochs", "9", (char *)path, "--set", "lr=0.3", "--no-bias", "--test-fraction=0.1",
                    "--quiet"};
    int rc = fsgd_job_parse_args(&job, 9, argv, err, sizeof err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(job.train.epochs, 9);
    CU_ASSERT_DOUBLE_EQUAL(job.train.lr, 0.3, 0);
    CU_ASSERT_EQUAL(job.train.bias, 0);
    CU_ASSERT_EQUAL(job.train.quiet, 1);
    CU_ASSERT_DOUBLE_EQUAL(job.train.test_fraction, 0.1, 0);
    CU_ASSERT_STRING_EQUAL(job.train.data, "a.svm");
}

static void test_flag_errors(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512] = "";
    char *a1[] = {"train", "--epochz", "3"};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 3, a1, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "unknown option '--epochz'");
    char *a2[] = {"train", "--lr"};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 2, a2, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "option '--lr' needs a value");
    char *a3[] = {"train", "--set", "nope=1"};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 3, a3, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "unknown key 'nope'");
    char *a4[] = {"train", "--help"};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 2, a4, err, sizeof err), 1);
    fsgd_job_defaults(&job);
    CU_ASSERT_EQUAL(fsgd_job_check(&job, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "--data");
}

/* A key given twice in a YAML file is an error naming both lines (libyaml
 * lets duplicates through; the second value used to win silently), also
 * through an alias ("lr" and "optimizer.lr"). */
static void test_yaml_duplicate_keys(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512] = "";
    CU_ASSERT_EQUAL(load_yaml_text(&job, "data: a.svm\nepochs: 3\nepochs: 4\n", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "job.yaml:3:9: key 'epochs' is given twice (first at line 2)");
    fsgd_job_defaults(&job);
    CU_ASSERT_EQUAL(load_yaml_text(&job, "lr: 0.1\noptimizer:\n  lr: 0.2\n", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "job.yaml:3:7: key 'optimizer.lr' is given twice (first at line 1)");
    fsgd_job_defaults(&job);
    CU_ASSERT_EQUAL(load_yaml_text(&job, "kafka:\n  sasl.username: a\n  sasl.username: b\n", err, sizeof err),
                    FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "job.yaml:3:18: key 'kafka.sasl.username' is given twice (first at line 2)");
    /* a section given twice: its keys would merge silently (issue 42) */
    fsgd_job_defaults(&job);
    CU_ASSERT_EQUAL(load_yaml_text(&job, "optimizer:\n  lr: 0.1\nepochs: 1\noptimizer:\n  beta1: 0.9\n", err,
                                   sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "job.yaml:5:3: section 'optimizer' given twice (first at line 2)");
    /* the same key in two different sections is two keys */
    fsgd_job_defaults(&job);
    CU_ASSERT_EQUAL(load_yaml_text(&job, "data:\n  data: a.svm\n  test: b.svm\nepochs: 2\n", err, sizeof err), 0);
}

/* Kafka security settings: a kafka: map in YAML or repeated --kafka-opt;
 * only security.*, sasl.*, ssl.* (and enable.ssl.certificate.verification). */
/* auto: cpu for a process's share of a step below FSGD_AUTO_CUDA_MIN_ROWS,
 * as it is at or above it or when the share is unknown; a named backend is
 * never changed. */
static void test_backend_auto(void)
{
    fsgd_job_t j;
    fsgd_job_defaults(&j);
    snprintf(j.train.backend, sizeof j.train.backend, "auto");
    CU_ASSERT_STRING_EQUAL(fsgd_train_backend(&j.train, 256), "cpu");
    CU_ASSERT_STRING_EQUAL(fsgd_train_backend(&j.train, FSGD_AUTO_CUDA_MIN_ROWS - 1), "cpu");
    CU_ASSERT_STRING_EQUAL(fsgd_train_backend(&j.train, FSGD_AUTO_CUDA_MIN_ROWS), "auto");
    CU_ASSERT_STRING_EQUAL(fsgd_train_backend(&j.train, 0), "auto");
    snprintf(j.train.backend, sizeof j.train.backend, "cuda");
    CU_ASSERT_STRING_EQUAL(fsgd_train_backend(&j.train, 256), "cuda");
}

static void test_kafka_options(void)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512] = "";
    CU_ASSERT_EQUAL(load_yaml_text(&job,
                                   "kafka:\n  security.protocol: SASL_SSL\n  sasl.mechanism: PLAIN\n"
                                   "  ssl.ca.location: /etc/ca.pem\n",
                                   err, sizeof err),
                    0);
    char *argv[] = {"run", "--kafka-opt", "sasl.username=fsgd", "--kafka-opt=sasl.password=a=b", NULL};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 4, argv, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(job.cluster.kafka, "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nssl.ca.location=/etc/ca.pem\n"
                                      "sasl.username=fsgd\nsasl.password=a=b\n");
    CU_ASSERT_EQUAL(fsgd_job_set(&job, "kafka.enable.ssl.certificate.verification", "false", err, sizeof err), 0);
    CU_ASSERT_EQUAL(load_yaml_text(&job, "kafka:\n  fetch.wait.max.ms: 500\n", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "job.yaml:2:22: kafka option 'fetch.wait.max.ms' is not passed to Kafka clients");
    char *bad[] = {"run", "--kafka-opt", "sasl.mechanism", NULL};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 3, bad, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "expected KEY=VALUE");
}

/* batch auto: 256 rows a worker, at most n / 2000 when that is above 256;
 * explicit rows and fractions as given. */
/* replica auto: working sets for a model of 2^25 weights or more that the
 * job gives (dim or bits), unless the codec's workers run the optimizer. */
static void test_replica_auto(void)
{
    fsgd_job_t job;
    fsgd_job_dist_defaults(&job);
    CU_ASSERT_EQUAL(job.dist.replica, FSGD_REPLICA_AUTO);
    CU_ASSERT_EQUAL(fsgd_dist_replica(&job.train, &job.dist), FSGD_REPLICA_FULL); /* the size comes from the data: unknown */
    job.train.dim = ((uint64_t)1 << 25) - 1;
    CU_ASSERT_EQUAL(fsgd_dist_replica(&job.train, &job.dist), FSGD_REPLICA_FULL);
    job.train.dim = (uint64_t)1 << 25;
    CU_ASSERT_EQUAL(fsgd_dist_replica(&job.train, &job.dist), FSGD_REPLICA_WORKING_SET);
    snprintf(job.train.codec, sizeof job.train.codec, "efsign");
    CU_ASSERT_EQUAL(fsgd_dist_replica(&job.train, &job.dist), FSGD_REPLICA_FULL);
    char err[256];
    fsgd_job_dist_defaults(&job);
    char *bits[] = {"x", "--format", "criteo", "--bits", "26", NULL};
    CU_ASSERT_EQUAL_FATAL(fsgd_job_parse_args(&job, 5, bits, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_dist_replica(&job.train, &job.dist), FSGD_REPLICA_WORKING_SET);
    char *full[] = {"x", "--replica", "full", NULL};
    CU_ASSERT_EQUAL_FATAL(fsgd_job_parse_args(&job, 3, full, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_dist_replica(&job.train, &job.dist), FSGD_REPLICA_FULL);
    fsgd_job_dist_defaults(&job);
    char *ws[] = {"x", "--replica", "working_set", NULL};
    CU_ASSERT_EQUAL_FATAL(fsgd_job_parse_args(&job, 3, ws, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_dist_replica(&job.train, &job.dist), FSGD_REPLICA_WORKING_SET); /* small, but asked for */
    char *bad[] = {"x", "--replica", "some", NULL};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 3, bad, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected auto, full or working_set"));
}

static void test_batch_auto(void)
{
    fsgd_job_t job;
    fsgd_job_dist_defaults(&job);
    CU_ASSERT_EQUAL(job.train.batch, FSGD_JOB_AUTO);
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 1000000, 1), 256);     /* fsgd train */
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 949851, 2), 474);      /* the cap */
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 10000000, 2), 512);    /* 256 a worker */
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 10000000, 8), 2048);
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 32561, 3), 256);       /* a9a: never below 256 */
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 100, 4), 256);
    char err[256];
    char *argv[] = {"x", "--batch", "100", NULL};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 3, argv, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 10000000, 8), 100);
    job.train.batch = 0.001;
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 1000000, 8), 1000);
    job.train.batch = 1e-9;
    CU_ASSERT_EQUAL(fsgd_train_auto_batch(&job.train, 1000, 8), 1);
    char *argv2[] = {"x", "--batch", "auto", NULL};
    CU_ASSERT_EQUAL(fsgd_job_parse_args(&job, 3, argv2, err, sizeof err), 0);
    CU_ASSERT_EQUAL(job.train.batch, FSGD_JOB_AUTO);
    fsgd_job_train_defaults(&job);
    CU_ASSERT_EQUAL(job.train.batch, 256); /* fsgd train's default stays 256 rows */
}

/* fsgd run's weights in the format (fsgd_train_fold_weights): a VW
 * classification job weighs its rows' importance, class_weight rides
 * beside it; folding the folded job again (a role) changes nothing; a
 * regression job or a bad class_weight is refused naming the key. */
static void test_fold_weights(void)
{
    fsgd_job_t job;
    char err[256], once[sizeof job.train.format];
    fsgd_job_dist_defaults(&job);
    char *vw[] = {"x", "--format", "vw", "--bits", "12", "-q", "ab", "--class-weight", "5,0.5", NULL};
    CU_ASSERT_EQUAL_FATAL(fsgd_job_parse_args(&job, 9, vw, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_input(&job.train, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_weights(&job.train, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(job.train.format, "vw:row_weights=1:class_weight=5,0.5:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(job.train.format, "interactions=ab"));
    memcpy(once, job.train.format, sizeof once);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_input(&job.train, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_weights(&job.train, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(job.train.format, once);
    /* libsvm: label:weight from fold_input, the class weights after the name */
    fsgd_job_dist_defaults(&job);
    char *svm[] = {"x", "--row-weights", "--class-weight", "2,1", NULL};
    CU_ASSERT_EQUAL_FATAL(fsgd_job_parse_args(&job, 4, svm, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_input(&job.train, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_weights(&job.train, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(job.train.format, "libsvm:class_weight=2,1:row_weights=1");
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_input(&job.train, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_weights(&job.train, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(job.train.format, "libsvm:class_weight=2,1:row_weights=1");
    /* regression: VW rows not weighed (importance refused when read), class weights refused */
    fsgd_job_dist_defaults(&job);
    char *lin[] = {"x", "--format", "vw", "--model", "linear", NULL};
    CU_ASSERT_EQUAL_FATAL(fsgd_job_parse_args(&job, 5, lin, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train_fold_weights(&job.train, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(job.train.format, "vw");
    snprintf(job.train.class_weight, sizeof job.train.class_weight, "2,1");
    CU_ASSERT_EQUAL(fsgd_train_fold_weights(&job.train, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "class_weight: row and class weights are for classification models"));
    fsgd_job_dist_defaults(&job);
    snprintf(job.train.class_weight, sizeof job.train.class_weight, "2;1");
    CU_ASSERT_EQUAL(fsgd_train_fold_weights(&job.train, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "class_weight: '2;1' is not POS,NEG"));
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"yaml sections and flat keys", test_yaml_sections_and_flat_keys},
        {"yaml unknown key names place", test_yaml_unknown_key_names_place},
        {"yaml bad value names key", test_yaml_bad_value_names_key},
        {"yaml syntax error names line", test_yaml_syntax_error_names_line},
        {"flags override yaml", test_flags_override_yaml},
        {"flag errors", test_flag_errors},
        {"yaml duplicate keys name both lines", test_yaml_duplicate_keys},
        {"kafka security options", test_kafka_options},
        {"backend auto takes the GPU only for large steps", test_backend_auto},
        {"batch auto: 256 rows a worker, 2000 steps an epoch", test_batch_auto},
        {"replica auto: working sets for large models the job names", test_replica_auto},
        {"fold weights: VW importance and class weights in the format, idempotent", test_fold_weights},
        {NULL, NULL},
    };
    fsgd_test_suite("job", cases);
}
