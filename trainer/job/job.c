/* The job field table and its three front ends: YAML, --set, flags. */
#include "fsgd/job.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "fsgd/error.h"
#include "fsgd/ftrl.h"
#include "fsgd/kbus.h"
#include "fsgd/delim.h"
#include "fsgd/rowfmt.h"
#include "fsgd/strategy.h"
#include "fsgd/vw.h"
#include "job_testing.h"

typedef enum { F_STR, F_DOUBLE, F_INT, F_U64, F_BOOL, F_MODEL, F_KAFKA, F_OPTIMIZER, F_TERMS, F_REPLICA, F_TABLE } field_type_t;

typedef struct field {
    const char *key;
    const char *section; /* YAML section it may also appear under ("optimizer" -> optimizer.lr) */
    field_type_t type;
    size_t offset, size;
    double min, max;     /* numeric bounds, inclusive */
    const char *help;
} field_t;

#define OFF(f) offsetof(fsgd_job_t, f), sizeof(((fsgd_job_t *)0)->f)
static const field_t fields[] = {
    {"data", "data", F_STR, OFF(train.data), 0, 0, "training data, a file in the job's format"},
    {"test", "data", F_STR, OFF(train.test), 0, 0, "test data, same format (without it fsgd train holds test_fraction of the data out as its test set; fsgd run scores no test set)"},
    {"test_fraction", "data", F_DOUBLE, OFF(train.test_fraction), 0, 0.9, "fsgd train: fraction of the data held out as the test set when no --test is given (0: none)"},
    {"skip_bad", "data", F_BOOL, OFF(train.skip_bad), 0, 1, "skip malformed rows (report them) instead of stopping: LIBSVM files, and NAME.data rows in any format (a delimited file still stops)"},
    {"format", "data", F_STR, OFF(train.format), 0, 0,
     "input format: libsvm, criteo (label, 13 integer and 26 categorical TSV columns), or a column spec "
     "tsv:COLUMNS[:header=1][:bits=B][:seed=S] / csv:..., COLUMNS like label,num*13,cat*26,skip; "
     "raw fields are hashed with xxHash into 2^bits columns (dim is then 2^bits); fsgd train, and fsgd run/produce/"
     "worker/aggregator, which send the raw lines through NAME.data (a header=1 line is skipped, never sent; "
     "outside clients must not send it); the model records the spec for fsgd predict; vw: Vowpal Wabbit text rows "
     "(label [importance] [tag]|ns feature[:value] ...), hashed as VW 9 hashes them (docs/ctr-inputs.md); any "
     "input may be gzip or zstd compressed"},
    {"hash_bits", "data", F_INT, OFF(train.hash_bits), 0, 32,
     "hashed formats: 2^B feature columns (0: the spec's bits, default 24); libsvm: 1..32 hashes the indices "
     "into 2^B weights, so any index fits a bounded model (0: indices kept, dim from the data); alias bits (VW's -b)"},
    {"interactions", "data", F_TERMS, OFF(train.interactions), 0, 0,
     "vw format: feature crosses of namespaces by their first letters, VW's -q ab / --cubic abc / --interactions "
     "ab,abc (aliases q, quadratic, cubic; each use adds its crosses); :: crosses every pair of namespaces; hashed "
     "into the model's 2^bits columns and recorded in the model file, so fsgd predict needs no flag; criteo, tsv:, "
     "csv: cross columns by 1-based number or name instead (-q 15*16, -q C1*C2 with Criteo's names I1..I13, "
     "C1..C26, or a header=1 file's own, --interactions 'age*city*C3'); libsvm: the letters of --fields"},
    {"fields", "data", F_STR, OFF(train.fields), 0, 0,
     "libsvm format: fields of index ranges, NAME:FIRST-LAST or NAME:INDEX, e.g. a:1-14,b:15-100 (a name's first "
     "letter is its letter; indices as the file writes them), or @FILE: lines 'INDEX NAME' or 'FIRST-LAST NAME'; "
     "so -q ab / --cubic / --interactions / :: cross LIBSVM rows as VW crosses namespaces; hashed into 2^bits "
     "columns (default 18), recorded in the model"},
    {"ignore", "data", F_STR, OFF(train.ignore), 0, 0, "vw format: namespaces (first letters, e.g. abc) left out (VW's --ignore)"},
    {"keep", "data", F_STR, OFF(train.keep), 0, 0, "vw format: the only namespaces read (first letters; VW's --keep)"},
    {"row_weights", "data", F_BOOL, OFF(train.row_weights), 0, 1,
     "libsvm format: a row's label may carry an importance weight, label:weight (XGBoost's LIBSVM extension; "
     "VW's importance: a number >= 0, 1 when absent; rows of weight 0 are left out of training); fsgd train and "
     "fsgd run, cpu backend; fsgd predict reads such files with --row-weights and scores them unweighted"},
    {"class_weight", "data", F_STR, OFF(train.class_weight), 0, 0,
     "POS,NEG: each row's loss weighted by its class (LIBLINEAR's -w1/-w-1), on top of a VW row's importance; "
     "fsgd train and fsgd run, classification models, cpu backend"},
    {"cache", "data", F_STR, OFF(train.cache), 0, 0,
     "fsgd train: write the training rows to this binary cache on the first pass and stream every epoch "
     "from it, for files larger than memory (the holdout and test split, at most 50k and 100k rows, are kept "
     "in it too). A later run with the same cache reuses it without reading the text when it was made from "
     "the same file (path, size, mtime), format, hash bits, skip_bad, holdout/test fraction and seed; "
     "otherwise, or when it is cut short or corrupt, it is rewritten with a line saying why. --threads "
     "splits each step as in memory"},
    {"dim", "data", F_U64, OFF(train.dim), 0, 4294967296.0, "feature dimension (0: from the data)"},
    {"model", "model", F_MODEL, OFF(train.model), 0, 0, "the loss: logistic | linear | svm (alias loss)"},
    {"bias", "model", F_BOOL, OFF(train.bias), 0, 1, "learn an intercept"},
    {"bias_value", "model", F_DOUBLE, OFF(train.bias_value), 1e-6, 1e6, "value of the intercept's constant feature"},
    {"l2", "model", F_DOUBLE, OFF(train.l2), 0, 1e6,
     "L2 strength λ on the mean loss, applied on touched keys; auto = 1/n_train, fsgd train and fsgd run "
     "(LIBLINEAR's C=1); "
     "with ftrl, FTRL's λ2 = l2·n_train"},
    {"l1", "model", F_DOUBLE, OFF(train.l1), 0, 1e6,
     "L1 strength on the mean loss (objective mean loss + l1·|w|₁ + l2/2·|w|²), optimizer ftrl only: FTRL's "
     "λ1 = l1·n_train; weights whose |z| stays below λ1 are exactly 0 and not stored"},
    {"init", "model", F_STR, OFF(train.init), 0, 0,
     "start from this model file (its weights, and its optimizer state when it has this run's: --save-state) "
     "instead of zeros; it must have the data's dim, the same model (loss), intercept and input format; fsgd "
     "run/aggregator: a checkpoint found at start wins over it"},
    {"optimizer", "optimizer", F_OPTIMIZER, OFF(train.optimizer), 0, 0,
     "adam | ftrl: sparse Adam, or FTRL-Proximal with per-coordinate rates (McMahan et al. KDD'13; "
     "fsgd train and fsgd run); YAML optimizer: ftrl, or optimizer.name"},
    {"alpha", "optimizer", F_DOUBLE, OFF(train.alpha), 1e-12, 1e6,
     "ftrl: α of the per-coordinate rate α/(β + sqrt(Σg²)) (VW: --ftrl_alpha); auto = 2/sqrt(steps per epoch) "
     "in [0.01, 0.5]"},
    {"beta", "optimizer", F_DOUBLE, OFF(train.beta), 0, 1e6, "ftrl: β of that rate (VW: --ftrl_beta)"},
    {"lr", "optimizer", F_DOUBLE, OFF(train.lr), 1e-12, 1e3,
     "Adam learning rate; auto (fsgd train and fsgd run) = 0.15/sqrt(steps per epoch) in [0.001, 0.02], "
     "per-key bias corrections; under a bounded delay τ (staleness) at most 0.8/((τ+1)·a row's mean Σ|x|)"},
    {"beta1", "optimizer", F_DOUBLE, OFF(train.beta1), 0, 0.999999,
     "Adam β1; auto = 0.9, or 0 with lr auto under a bounded delay (fsgd run's staleness > 0, fsgd train "
     "--staleness): the delay carries past steps into each update already"},
    {"beta2", "optimizer", F_DOUBLE, OFF(train.beta2), 0, 0.999999999, "Adam β2"},
    {"eps", "optimizer", F_DOUBLE, OFF(train.eps), 1e-30, 1, "Adam ε"},
    {"batch", "optimizer", F_DOUBLE, OFF(train.batch), 1e-9, 1e12,
     "rows per step (>= 1) or fraction of the training rows (< 1); auto = 256 rows a worker, capped at "
     "max(256, n_train / 2000) (fsgd run and its roles; fsgd train's auto is 256)"},
    {"epochs", "optimizer", F_INT, OFF(train.epochs), 1, 1e6,
     "passes over the training data, exactly; auto (fsgd train and fsgd run) = until the holdout loss stops improving "
     "(at most max_epochs), keeping the best weights"},
    {"max_epochs", "optimizer", F_INT, OFF(train.max_epochs), 1, 1e6, "most passes when epochs is auto"},
    {"holdout", "optimizer", F_DOUBLE, OFF(train.holdout), 0, 0.5,
     "fraction of the training rows held out to stop early when epochs is auto (unused otherwise)"},
    {"seed", "optimizer", F_U64, OFF(train.seed), 0, 1.8e19, "random seed (shuffling, split)"},
    {"threads", "compute", F_INT, OFF(train.threads), 1, 1024, "local worker threads in fsgd train"},
    {"backend", "compute", F_STR, OFF(train.backend), 0, 0, "cpu | cuda | auto (cuda when a device answers and each process gets 2048+ rows a step)"},
    {"codec", "compute", F_STR, OFF(train.codec), 0, 0, "compression strategy spec NAME:key=value,... (fsgd features lists them; strategy/FORMAT.md), e.g. none, fastsgd:b=1.1,tau=128,l=2, topk:ratio=0.01"},
    {"downlink", "compute", F_STR, OFF(train.downlink), 0, 0,
     "model updates to workers (fsgd run): auto (compressed with the codec when it is lossy), full (float32 values), or a lossy codec spec"},
    {"out", "output", F_STR, OFF(train.out), 0, 0, "model file to write"},
    {"metrics_json", "output", F_STR, OFF(train.metrics_json), 0, 0, "metrics JSON file to write"},
    {"save_state", "output", F_BOOL, OFF(train.save_state), 0, 1,
     "fsgd train: also write the optimizer state (Adam's m, v and counts, or FTRL's z and n; 16 bytes a touched "
     "key) into the model file, so that --init resumes training where it stopped (VW: --save_resume)"},
    {"target_auc", "output", F_DOUBLE, OFF(train.target_auc), 0, 1, "record the time when test AUC first reaches this"},
    {"eval_every", "output", F_INT, OFF(train.eval_every), 0, 1e9, "also evaluate every N steps (0: at epoch ends)"},
    {"quiet", "output", F_BOOL, OFF(train.quiet), 0, 1, "no progress lines"},
    {"name", "job", F_STR, OFF(dist.name), 0, 0, "job name; topics are NAME.data/.grads/.model/.ctl"},
    {"brokers", "cluster", F_STR, OFF(cluster.brokers), 0, 0, "Kafka bootstrap servers (empty: embedded cluster)"},
    {"workers", "cluster", F_INT, OFF(dist.workers), 1, 1024, "worker processes in fsgd run"},
    {"partitions", "cluster", F_INT, OFF(dist.partitions), 0, 100000, "data topic partitions (0: auto)"},
    {"block_rows", "cluster", F_INT, OFF(dist.block_rows), 0, 4096,
     "rows per data message fsgd writes (0: auto, from batch and partitions; 1: one text row a message)"},
    {"replication_factor", "cluster", F_INT, OFF(cluster.replication_factor), 0, 32,
     "replicas of each job topic on a real cluster (0: min(3, brokers); the embedded cluster keeps 1)"},
    {"min_insync_replicas", "cluster", F_INT, OFF(cluster.min_insync_replicas), 0, 32,
     "topics' min.insync.replicas: acks=all writes need this many replicas (0: 2 with 3+ replicas, else 1)"},
    {"step_timeout_ms", "cluster", F_INT, OFF(dist.step_timeout_ms), 100, 3.6e6, "drop a worker missing a step this long"},
    {"connect_timeout_ms", "cluster", F_INT, OFF(cluster.connect_timeout_ms), 100, 3.6e6,
     "every role's bound on reaching the brokers at start (TLS handshake and SASL included): past it, exit 4 "
     "naming the broker and librdkafka's cause"},
    {"snapshot_every", "cluster", F_INT, OFF(dist.snapshot_every), 1, 1e9,
     "full model snapshot (and checkpoint) every N steps; auto = max(100, weights / 4096), so a snapshot costs "
     "the same 16 KiB a step whatever the model's size (100 on the embedded cluster, which keeps 5 MiB a partition)"},
    {"staleness", "cluster", F_INT, OFF(train.staleness), 0, 255,
     "bounded delay τ: a worker may send the gradient of step t+1+τ while the model of step t is the newest it "
     "has (0: synchronous; gTop-k and GradiVeQ always run at 0)"},
    {"replica", "cluster", F_REPLICA, OFF(dist.replica), 0, 0,
     "what a worker of fsgd run holds: full (the whole model, every step's update broadcast on NAME.model to every "
     "worker), working_set (before each step a worker pulls the values of the keys its rows use from the "
     "aggregator shards that own them (answers on NAME.pull): its downlink does not grow with the number of "
     "workers, nor its memory with the model), or auto: working_set when --dim or --bits gives a model of 2^25 "
     "weights or more (and the codec's workers do not run the optimizer), full otherwise (docs/run.md)"},
    {"table", "cluster", F_TABLE, OFF(dist.table), 0, 0,
     "how an aggregator shard holds its part of the model: dense (every weight of its key range), sparse (only "
     "the keys the data ever touched, a key -> slot table: for models far larger than the data's vocabulary), or "
     "auto: sparse when the job has 2+ shards and working-set workers and the data's nonzeros could touch under "
     "a quarter of a shard's weights, dense otherwise (docs/run.md)"},
    {"shards", "cluster", F_INT, OFF(train.shards), 1, 64,
     "aggregator shards: the model's keys split over S aggregator processes (key k to shard k mod S), each "
     "holding its part of the weights and optimizer state; fsgd train simulates the same split in one process"},
    {"checkpoint", "cluster", F_STR, OFF(dist.checkpoint), 0, 0, "aggregator checkpoint file"},
    {"follow", "cluster", F_BOOL, OFF(dist.follow), 0, 1,
     "continuous training (fsgd run, worker, aggregator): keep consuming NAME.data as rows arrive, publish a "
     "numbered model version every snapshot_every steps (alias version_every) or version_seconds, score each "
     "step's rows before training on them (progressive validation: it replaces the holdout, so epochs, "
     "max_epochs and holdout do not apply) and stop only on SIGTERM/SIGINT, with a final version and checkpoint"},
    {"version_seconds", "cluster", F_DOUBLE, OFF(dist.version_seconds), 0.01, 1e9,
     "follow: also publish a model version (snapshot and checkpoint) when this many seconds have passed since "
     "the last one and rows were trained since"},
    {"job_key_file", "cluster", F_STR, OFF(cluster.job_key_file), 0, 0,
     "file with the job key (64 hex digits, mode 600) that authenticates every message on the job's topics; "
     "fsgd run makes one for its job when none is given"},
    {"unsigned_rows", "cluster", F_BOOL, OFF(cluster.unsigned_rows), 0, 1,
     "with a job key: accept rows on NAME.data that carry no tag (written by kcat or another client without the "
     "key); a tag that is there is always checked"},
    {"kafka_opt", "cluster", F_KAFKA, OFF(cluster.kafka), 0, 0,
     "KEY=VALUE librdkafka security setting for every client, repeatable (YAML: a kafka: map); keys "
     "security.*, sasl.*, ssl.*, enable.ssl.certificate.verification"},
    {"target_loss", "cluster", F_DOUBLE, OFF(dist.target_loss), 0, 1e6,
     "aggregator: record seconds from step 1 until the training loss (mean of the last 8 steps) first reaches this (0: off)"},
};
#undef OFF
#define N_FIELDS (sizeof fields / sizeof *fields)
_Static_assert(N_FIELDS <= 128, "fsgd_job_t.given holds 128 bits");

/* Other names of a key: VW's names of FTRL's rate, and optimizer.name for
 * the optimizer inside an optimizer: mapping. */
static const struct {
    const char *alias, *key;
} aliases[] = {{"ftrl_alpha", "alpha"}, {"ftrl_beta", "beta"}, {"optimizer.name", "optimizer"},
               {"save_resume", "save_state"}, {"version_every", "snapshot_every"},
               {"bits", "hash_bits"}, {"q", "interactions"}, {"quadratic", "interactions"},
               {"cubic", "interactions"}, {"loss", "model"}};

void fsgd_job_defaults(fsgd_job_t *job)
{
    memset(job, 0, sizeof *job);
    job->train.test_fraction = 0.2;
    job->dist.replica = FSGD_REPLICA_AUTO;
    snprintf(job->train.format, sizeof job->train.format, "libsvm");
    job->train.model = FSGD_LOSS_LOGISTIC;
    job->train.bias = 1;
    job->train.bias_value = 1;
    job->train.l2 = 0;
    job->train.lr = 0.01;
    job->train.beta1 = FSGD_JOB_AUTO;
    job->train.beta2 = 0.999;
    job->train.eps = 1e-8;
    job->train.batch = 256;
    job->train.epochs = 20;
    job->train.seed = 1;
    job->train.threads = 2;
    snprintf(job->train.backend, sizeof job->train.backend, "cpu");
    snprintf(job->train.codec, sizeof job->train.codec, "none");
    snprintf(job->train.downlink, sizeof job->train.downlink, "auto");
    snprintf(job->dist.name, sizeof job->dist.name, "fsgd");
    job->dist.workers = 2;
    job->dist.step_timeout_ms = 10000;
    job->cluster.connect_timeout_ms = 15000;
    job->dist.snapshot_every = 0; /* auto */
    job->train.staleness = FSGD_JOB_STALENESS_DEFAULT;
    job->train.shards = 1;
    job->train.max_epochs = 50;
    job->train.holdout = 0.1;
    job->train.optimizer = FSGD_OPTIMIZER_ADAM;
    job->train.alpha = FSGD_JOB_AUTO;
    job->train.beta = FSGD_FTRL_BETA;
    job->dist.version_seconds = 60;
}

void fsgd_job_train_defaults(fsgd_job_t *job)
{
    fsgd_job_defaults(job);
    job->train.l2 = FSGD_JOB_AUTO;
    job->train.lr = FSGD_JOB_AUTO;
    job->train.epochs = 0;
}

void fsgd_job_dist_defaults(fsgd_job_t *job)
{
    fsgd_job_train_defaults(job);
    job->train.batch = FSGD_JOB_AUTO;
}

/* Keys that also take "auto" (stored as FSGD_JOB_AUTO, or 0 for integers):
 * fsgd train then picks the value from the data (see fsgd_train). */
static int auto_ok(const field_t *f)
{
    return !strcmp(f->key, "l2") || !strcmp(f->key, "epochs") || !strcmp(f->key, "lr") || !strcmp(f->key, "alpha") ||
           !strcmp(f->key, "beta1") || !strcmp(f->key, "snapshot_every") || !strcmp(f->key, "batch");
}

static void normalize_key(const char *in, char *out, size_t cap)
{
    size_t i = 0;
    while (*in == '-')
        in++;
    for (; *in && i + 1 < cap; in++)
        out[i++] = *in == '-' ? '_' : *in;
    out[i] = '\0';
}

/* The key an alias stands for, or k itself. */
static const char *unalias(const char *k)
{
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (!strcmp(aliases[i].alias, k))
            return aliases[i].key;
    return k;
}

static const field_t *find_field(const char *key)
{
    char k[128];
    normalize_key(key, k, sizeof k);
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(fields[i].key, unalias(k)))
            return &fields[i];
    /* "optimizer.lr" is an alias of "lr" when the section matches. */
    const char *dot = strrchr(k, '.');
    if (dot) {
        for (size_t i = 0; i < N_FIELDS; i++)
            if (!strcmp(fields[i].key, unalias(dot + 1)) && strlen(fields[i].section) == (size_t)(dot - k) &&
                !strncmp(fields[i].section, k, (size_t)(dot - k)))
                return &fields[i];
    }
    return NULL;
}

/* Appends "key=value\n" to the job's Kafka settings (those kafka/ lets a
 * job pass: fsgd_kbus_options_add). */
static int add_kafka(fsgd_job_t *job, const char *key, const char *value, char *err, size_t errsz)
{
    return fsgd_kbus_options_add(job->cluster.kafka, sizeof job->cluster.kafka, key, value, err, errsz);
}

static int parse_bool(const char *v, int *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return *out = 1, 0;
        if (!strcasecmp(v, no[i]))
            return *out = 0, 0;
    }
    return -1;
}

static int set_value(fsgd_job_t *job, const field_t *f, const char *value, char *err, size_t errsz);

static int set_field(fsgd_job_t *job, const field_t *f, const char *value, char *err, size_t errsz)
{
    FSGD_TRY(set_value(job, f, value, err, errsz));
    size_t i = (size_t)(f - fields);
    job->given[i / 64] |= UINT64_C(1) << (i % 64);
    if (f->offset == offsetof(fsgd_job_t, train.staleness)) /* core reads whether τ was given */
        job->train.staleness_given = 1;
    return FSGD_E_OK;
}

static int parse_table(const char *key, const char *value, fsgd_job_table_t *dst, char *err, size_t errsz)
{
    if (!strcmp(value, "dense"))
        *dst = FSGD_TABLE_DENSE;
    else if (!strcmp(value, "sparse"))
        *dst = FSGD_TABLE_SPARSE;
    else if (!strcmp(value, "auto"))
        *dst = FSGD_TABLE_AUTO;
    else
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': expected auto, dense or sparse, got '%s'", key, value);
    return FSGD_E_OK;
}

static int parse_replica(const char *key, const char *value, fsgd_job_replica_t *dst, char *err, size_t errsz)
{
    if (!strcmp(value, "full"))
        *dst = FSGD_REPLICA_FULL;
    else if (!strcmp(value, "working_set") || !strcmp(value, "working-set"))
        *dst = FSGD_REPLICA_WORKING_SET;
    else if (!strcmp(value, "auto"))
        *dst = FSGD_REPLICA_AUTO;
    else
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': expected auto, full or working_set, got '%s'", key,
                            value);
    return FSGD_E_OK;
}

fsgd_dist_job_t fsgd_job_dist(const fsgd_job_t *job)
{
    return (fsgd_dist_job_t){.train = &job->train, .dist = &job->dist, .cluster = &job->cluster};
}

int fsgd_job_given(const fsgd_job_t *job, const char *key)
{
    const field_t *f = find_field(key);
    if (!f)
        return 0;
    size_t i = (size_t)(f - fields);
    return (job->given[i / 64] >> (i % 64)) & 1;
}

static int set_value(fsgd_job_t *job, const field_t *f, const char *value, char *err, size_t errsz)
{
    char *dst = (char *)job + f->offset;
    char *end;
    switch (f->type) {
    case F_TERMS: /* each use adds its crosses (-q ab -q cd) */
        if (*dst && *value) {
            if (strlen(dst) + 1 + strlen(value) >= f->size)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': value longer than %zu characters", f->key,
                                    f->size - 1);
            strcat(strcat(dst, ","), value);
            return FSGD_E_OK;
        }
        /* fall through */
    case F_STR:
        if (strlen(value) >= f->size)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': value longer than %zu characters", f->key,
                                f->size - 1);
        memcpy(dst, value, strlen(value) + 1);
        return FSGD_E_OK;
    case F_BOOL: {
        int b;
        if (parse_bool(value, &b) != 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': expected true or false, got '%s'", f->key,
                                value);
        *(int *)dst = b;
        return FSGD_E_OK;
    }
    case F_KAFKA: {
        char kv[1200];
        snprintf(kv, sizeof kv, "%s", value);
        char *eq = strchr(kv, '=');
        if (!eq)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': expected KEY=VALUE, got '%s'", f->key, value);
        *eq = '\0';
        return add_kafka(job, kv, eq + 1, err, errsz);
    }
    case F_MODEL: {
        fsgd_loss_kind_t k = fsgd_loss_parse(value);
        /* predict's --model is the model file; here it is the loss: a path
         * given here is said to be one (issue 40 item 15) */
        if (!k)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': expected logistic, linear or svm, got '%s'%s",
                                f->key, value,
                                strpbrk(value, "./") ? " (model here is the loss, alias loss; the model file "
                                                       "is written with out and read with init)"
                                                     : "");
        *(fsgd_loss_kind_t *)dst = k;
        return FSGD_E_OK;
    }
    case F_OPTIMIZER: {
        if (!strcmp(value, "adam"))
            *(fsgd_job_optimizer_t *)dst = FSGD_OPTIMIZER_ADAM;
        else if (!strcmp(value, "ftrl"))
            *(fsgd_job_optimizer_t *)dst = FSGD_OPTIMIZER_FTRL;
        else
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': expected adam or ftrl, got '%s'", f->key, value);
        return FSGD_E_OK;
    }
    case F_REPLICA:
        return parse_replica(f->key, value, (fsgd_job_replica_t *)dst, err, errsz);
    case F_TABLE:
        return parse_table(f->key, value, (fsgd_job_table_t *)dst, err, errsz);
    case F_DOUBLE:
    case F_INT:
    case F_U64: {
        if (auto_ok(f) && !strcmp(value, "auto")) {
            if (f->type == F_DOUBLE)
                *(double *)dst = FSGD_JOB_AUTO;
            else
                *(int *)dst = 0;
            return FSGD_E_OK;
        }
        errno = 0;
        double d = strtod(value, &end);
        while (end && isspace((unsigned char)*end))
            end++;
        if (end == value || *end || errno == ERANGE || !isfinite(d))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': expected a number, got '%s'", f->key, value);
        if (d < f->min || d > f->max)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': %s is out of range [%g, %g]", f->key, value,
                                f->min, f->max);
        if (f->type != F_DOUBLE && d != floor(d))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "key '%s': expected an integer, got '%s'", f->key, value);
        if (f->type == F_DOUBLE)
            *(double *)dst = d;
        else if (f->type == F_INT)
            *(int *)dst = (int)d;
        else /* integers above 2^53 lose nothing through strtoull */
            *(uint64_t *)dst = strtoull(value, NULL, 0);
        return FSGD_E_OK;
    }
    }
    return FSGD_E_ARG;
}

int fsgd_job_set(fsgd_job_t *job, const char *key, const char *value, char *err, size_t errsz)
{
    if (!strncmp(key, "kafka.", 6))
        return add_kafka(job, key + 6, value, err, errsz);
    const field_t *f = find_field(key);
    if (!f)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unknown key '%s' (see --help for the list)", key);
    return set_field(job, f, value, err, errsz);
}

/* The state of load_yaml_events' walk over the YAML events. */
typedef struct yaml_walk {
    const char *path;
    char prefix[8][128];  /* key of each open mapping level */
    int depth;            /* index of the innermost open mapping */
    int expecting_key[8];
    char key[128];
    /* A key given twice is an error (libyaml reports mappings as events and
     * lets duplicates through): the second value would win silently. Aliases
     * count as the same key ("lr" and "optimizer.lr"). */
    size_t first_line[N_FIELDS];
    char kafka_seen[32][512];
    size_t kafka_line[32];
    int n_kafka;
    /* so is a section given twice: its keys would merge silently */
    char section_seen[32][256];
    size_t section_line[32];
    int n_sections;
} yaml_walk_t;

/* A nested mapping opens under the current key: its dotted name must be
 * new. */
static int yaml_open_mapping(yaml_walk_t *w, size_t line, size_t col, char *err, size_t errsz)
{
    if (w->depth >= 0 && w->expecting_key[w->depth])
        return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%zu:%zu: a mapping cannot be a key", w->path, line, col);
    if (w->depth + 1 >= 8)
        return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%zu:%zu: nested too deeply", w->path, line, col);
    if (w->depth >= 0) {
        const int depth = w->depth;
        snprintf(w->prefix[depth], sizeof w->prefix[depth], "%s", w->key);
        w->expecting_key[depth] = 1;
        char name[256] = "";
        for (int i = 0; i <= depth; i++)
            snprintf(name + strlen(name), sizeof name - strlen(name), "%s%s", i ? "." : "", w->prefix[i]);
        for (int i = 0; i < w->n_sections; i++)
            if (!strcmp(w->section_seen[i], name))
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "%s:%zu:%zu: section '%s' given twice (first at line %zu): merge them into one",
                                    w->path, line, col, name, w->section_line[i]);
        if (w->n_sections < 32) {
            snprintf(w->section_seen[w->n_sections], sizeof w->section_seen[w->n_sections], "%s", name);
            w->section_line[w->n_sections++] = line;
        }
    }
    w->depth++;
    w->expecting_key[w->depth] = 1;
    return FSGD_E_OK;
}

/* Where the first line of key full is kept (a field's, aliases shared, or a
 * Kafka setting's); NULL when none is (an unknown key, or past 32 Kafka
 * settings). */
static size_t *yaml_first_line(yaml_walk_t *w, const char *full, const field_t *f)
{
    if (f)
        return &w->first_line[f - fields];
    if (strncmp(full, "kafka.", 6))
        return NULL;
    int k = 0;
    while (k < w->n_kafka && strcmp(w->kafka_seen[k], full + 6))
        k++;
    if (k == w->n_kafka && w->n_kafka < 32) {
        snprintf(w->kafka_seen[w->n_kafka], sizeof w->kafka_seen[0], "%s", full + 6);
        w->kafka_line[w->n_kafka++] = 0;
    }
    return k < w->n_kafka ? &w->kafka_line[k] : NULL;
}

/* The value of the current key: set on job under its dotted name, once. */
static int yaml_set_value(yaml_walk_t *w, fsgd_job_t *job, const char *text, size_t line, size_t col, char *err,
                          size_t errsz)
{
    char full[512] = "";
    for (int i = 0; i < w->depth; i++) {
        strncat(full, w->prefix[i], sizeof full - strlen(full) - 1);
        strncat(full, ".", sizeof full - strlen(full) - 1);
    }
    strncat(full, w->key, sizeof full - strlen(full) - 1);
    char why[640];
    const field_t *f = find_field(full);
    size_t *first = yaml_first_line(w, full, f);
    int r2;
    if (first && *first) {
        snprintf(why, sizeof why, "key '%s' is given twice (first at line %zu)", full, *first);
        r2 = FSGD_E_ARG;
    } else if (f) {
        r2 = set_field(job, f, text, why, sizeof why);
    } else if (!strncmp(full, "kafka.", 6)) {
        r2 = add_kafka(job, full + 6, text, why, sizeof why);
    } else {
        snprintf(why, sizeof why, "unknown key '%s'", full);
        r2 = FSGD_E_ARG;
    }
    if (first && !*first)
        *first = line;
    w->expecting_key[w->depth] = 1;
    if (r2 < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s:%zu:%zu: %s", w->path, line, col, why);
    return FSGD_E_OK;
}

/* A scalar: a key, or the value of the key before it. */
static int yaml_scalar(yaml_walk_t *w, fsgd_job_t *job, const char *text, size_t line, size_t col, char *err,
                       size_t errsz)
{
    if (w->depth < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%zu:%zu: expected a mapping of keys, got '%s'", w->path,
                            line, col, text);
    if (!w->expecting_key[w->depth])
        return yaml_set_value(w, job, text, line, col, err, errsz);
    snprintf(w->key, sizeof w->key, "%s", text);
    w->expecting_key[w->depth] = 0;
    return FSGD_E_OK;
}

/* YAML: a mapping of scalars, nested mappings flattened with '.'. Runs the
 * event loop over a parser whose input is set; path names the source. */
static int load_yaml_events(fsgd_job_t *job, yaml_parser_t *parser, const char *path, char *err, size_t errsz)
{
    yaml_walk_t w;
    memset(&w, 0, sizeof w);
    w.path = path;
    w.depth = -1;
    int rc = FSGD_E_OK, done = 0;
    while (!done && rc == FSGD_E_OK) {
        yaml_event_t ev;
        if (!yaml_parser_parse(parser, &ev)) {
            rc = fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%zu:%zu: %s", path, parser->problem_mark.line + 1,
                              parser->problem_mark.column + 1, parser->problem ? parser->problem : "YAML error");
            break;
        }
        size_t line = ev.start_mark.line + 1, col = ev.start_mark.column + 1;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_MAPPING_START_EVENT:
            rc = yaml_open_mapping(&w, line, col, err, errsz);
            break;
        case YAML_MAPPING_END_EVENT:
            w.depth--;
            break;
        case YAML_SEQUENCE_START_EVENT:
            rc = fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%zu:%zu: key '%s': lists are not supported here", path,
                              line, col, w.key);
            break;
        case YAML_ALIAS_EVENT:
            rc = fsgd_err_fmt(err, errsz, FSGD_E_PARSE, "%s:%zu:%zu: aliases are not supported", path, line, col);
            break;
        case YAML_SCALAR_EVENT:
            rc = yaml_scalar(&w, job, (const char *)ev.data.scalar.value, line, col, err, errsz);
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    return rc;
}

int fsgd_job_load_yaml_text(fsgd_job_t *job, const char *name, const char *text, size_t len, char *err,
                            size_t errsz)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: cannot start the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int rc = load_yaml_events(job, &parser, name, err, errsz);
    yaml_parser_delete(&parser);
    return rc;
}

int fsgd_job_load_yaml(fsgd_job_t *job, const char *path, char *err, size_t errsz)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot open job file '%s': %s", path, strerror(errno));
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        fclose(fp);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: cannot start the YAML parser", path);
    }
    yaml_parser_set_input_file(&parser, fp);
    int rc = load_yaml_events(job, &parser, path, err, errsz);
    yaml_parser_delete(&parser);
    fclose(fp);
    if (!rc)
        snprintf(job->train.job_file, sizeof job->train.job_file, "%s", path);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int fsgd_job_parse_args(fsgd_job_t *job, int argc, char **argv, char *err, size_t errsz)
{
    /* Job files first, so flags override them wherever they appear. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        if (!strcmp(a, "--job")) {
            if (i + 1 >= argc)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "--job needs a file");
            FSGD_TRY(fsgd_job_load_yaml(job, argv[++i], err, errsz));
        } else if (a[0] != '-' && (ends_with(a, ".yaml") || ends_with(a, ".yml"))) {
            FSGD_TRY(fsgd_job_load_yaml(job, a, err, errsz));
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--job")) {
            i++;
            continue;
        }
        if (a[0] != '-') {
            if (ends_with(a, ".yaml") || ends_with(a, ".yml"))
                continue;
            if (job->train.data[0])
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unexpected argument '%s'", a);
            FSGD_TRY(fsgd_job_set(job, "data", a, err, errsz));
            continue;
        }
        if (!strcmp(a, "--set")) {
            if (i + 1 >= argc || !strchr(argv[i + 1], '='))
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "--set needs key=value");
            char kv[1200];
            snprintf(kv, sizeof kv, "%s", argv[++i]);
            char *eq = strchr(kv, '=');
            *eq = '\0';
            FSGD_TRY(fsgd_job_set(job, kv, eq + 1, err, errsz));
            continue;
        }
        char name[128];
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        snprintf(name, sizeof name, "%.*s", (int)len, a);
        const field_t *f = find_field(name);
        int negated = 0;
        if (!f && !strncmp(name, "--no-", 5)) {
            f = find_field(name + 5);
            negated = f && f->type == F_BOOL;
            if (!negated)
                f = NULL;
        }
        if (!f)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "unknown option '%s' (see --help)", name);
        const char *value;
        if (negated) {
            value = "false";
        } else if (eq) {
            value = eq + 1;
        } else if (f->type == F_BOOL) {
            int b;
            value = (i + 1 < argc && parse_bool(argv[i + 1], &b) == 0) ? argv[++i] : "true";
        } else {
            if (i + 1 >= argc)
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "option '%s' needs a value", name);
            value = argv[++i];
        }
        char why[512];
        if (set_field(job, f, value, why, sizeof why) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "option %s: %s", name, why);
    }
    return 0;
}

static void format_default(const fsgd_job_t *d, const field_t *f, char *out, size_t cap)
{
    const char *p = (const char *)d + f->offset;
    switch (f->type) {
    case F_TERMS:
    case F_STR:
        snprintf(out, cap, "%s", *p ? p : "\"\"");
        break;
    case F_DOUBLE:
        if (auto_ok(f) && *(const double *)p == FSGD_JOB_AUTO)
            snprintf(out, cap, "auto");
        else
            snprintf(out, cap, "%g", *(const double *)p);
        break;
    case F_INT:
        if (auto_ok(f) && *(const int *)p == 0)
            snprintf(out, cap, "auto");
        else
            snprintf(out, cap, "%d", *(const int *)p);
        break;
    case F_U64:
        snprintf(out, cap, "%llu", (unsigned long long)*(const uint64_t *)p);
        break;
    case F_BOOL:
        snprintf(out, cap, "%s", *(const int *)p ? "true" : "false");
        break;
    case F_MODEL:
        snprintf(out, cap, "%s", fsgd_loss_name(*(const fsgd_loss_kind_t *)p));
        break;
    case F_KAFKA:
        snprintf(out, cap, "none");
        break;
    case F_OPTIMIZER:
        snprintf(out, cap, "%s", fsgd_optimizer_name(*(const fsgd_job_optimizer_t *)p));
        break;
    case F_REPLICA:
        snprintf(out, cap, "%s", *(const fsgd_job_replica_t *)p == FSGD_REPLICA_WORKING_SET ? "working_set"
                                 : *(const fsgd_job_replica_t *)p == FSGD_REPLICA_AUTO      ? "auto"
                                                                                              : "full");
        break;
    case F_TABLE:
        snprintf(out, cap, "%s", *(const fsgd_job_table_t *)p == FSGD_TABLE_SPARSE ? "sparse"
                                 : *(const fsgd_job_table_t *)p == FSGD_TABLE_DENSE ? "dense"
                                                                                    : "auto");
        break;
    }
}

void fsgd_job_print_help_with(const char *usage_line, const fsgd_job_t *defaults, void *file)
{
    FILE *out = file;
    const fsgd_job_t d = *defaults;
    fprintf(out, "%s\n\nEvery option is also a key of a YAML job file (flat, or under its section)\n"
                 "and can be overridden with --set key=value. Booleans: --key, --no-key, --key=false.\n\n",
            usage_line);
    const char *section = "";
    for (size_t i = 0; i < N_FIELDS; i++) {
        const field_t *f = &fields[i];
        if (strcmp(section, f->section)) {
            section = f->section;
            fprintf(out, "%s:\n", section);
        }
        char def[64], flag[64];
        format_default(&d, f, def, sizeof def);
        snprintf(flag, sizeof flag, "--%s", f->key);
        for (char *c = flag + 2; *c; c++)
            if (*c == '_')
                *c = '-';
        fprintf(out, "  %-20s %s (default %s)\n", flag, f->help, def);
    }
}

int fsgd_job_check(const fsgd_job_t *job, char *err, size_t errsz)
{
    if (!job->train.data[0])
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "no training data: give --data FILE (or data: in the job file)");
    if (job->train.beta1 >= 1 || job->train.beta2 >= 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "Adam betas must be < 1");
    return FSGD_E_OK;
}

/* An option the chosen optimizer would ignore is a mistake worth stopping
 * for: --l1 with Adam would train a dense model. */
static int check_optimizer(const fsgd_job_t *job, char *err, size_t errsz)
{
    if (job->train.optimizer == FSGD_OPTIMIZER_ADAM) {
        if (job->train.l1 > 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "l1 %g needs optimizer ftrl (--optimizer ftrl): Adam has no L1 step and would "
                                "train a dense model",
                                job->train.l1);
        static const char *ftrl_only[] = {"alpha", "beta"};
        for (size_t i = 0; i < 2; i++)
            if (fsgd_job_given(job, ftrl_only[i]))
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "%s is FTRL's (--optimizer ftrl); Adam's step size is lr", ftrl_only[i]);
    } else {
        static const char *adam_only[] = {"lr", "beta1", "beta2", "eps"};
        for (size_t i = 0; i < 4; i++)
            if (fsgd_job_given(job, adam_only[i]))
                return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                    "%s is Adam's; optimizer ftrl takes alpha and beta (its per-coordinate rate "
                                    "alpha/(beta + sqrt(sum of g^2)))",
                                    adam_only[i]);
    }
    return FSGD_E_OK;
}

int fsgd_job_check_train(const fsgd_job_t *job, char *err, size_t errsz)
{
    FSGD_TRY(fsgd_job_check(job, err, errsz));
    if (job->train.epochs == 0 && job->train.holdout <= 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "epochs auto stops on the holdout rows: give holdout > 0, or a number of epochs");
    FSGD_TRY(check_optimizer(job, err, errsz));
    if (job->train.init[0] && job->train.cache[0])
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "init does not combine with cache yet: drop one of them");
    if (job->train.save_state && job->train.cache[0])
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "save_state does not combine with cache yet: drop one of them");
    if (job->train.save_state && strcmp(job->train.codec, "none"))
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                            "save_state keeps the optimizer's state only: codec %s's own state (error feedback, "
                            "momentum) would be lost; use codec none",
                            job->train.codec);
    return FSGD_E_OK;
}

int fsgd_job_check_dist(const fsgd_job_t *job, char *err, size_t errsz)
{
    FSGD_TRY(check_optimizer(job, err, errsz));
    static const char *train_only[] = {"save_state"};
    for (size_t i = 0; i < 1; i++)
        if (fsgd_job_given(job, train_only[i]))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "%s is for fsgd train so far", train_only[i]);
    /* follow: rows keep coming, so there is no epoch to count or hold out from */
    static const char *not_follow[] = {"epochs", "max_epochs", "holdout"};
    for (size_t i = 0; i < 3 && job->dist.follow; i++)
        if (fsgd_job_given(job, not_follow[i]))
            return fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                                "%s does not apply with follow: training goes on until SIGTERM, and progressive "
                                "validation (each step scored before it is trained on) replaces the holdout",
                                not_follow[i]);
    if (fsgd_job_given(job, "version_seconds") && !job->dist.follow)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "version_seconds needs follow");
    return FSGD_E_OK;
}

