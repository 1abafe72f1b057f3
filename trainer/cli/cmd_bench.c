/* fsgd bench codec: encode/decode speed and size of every codec on real
 * gradients (LIBSVM datasets through the CPU backend) and on synthetic
 * CTR-shaped gradients (fsgd gen) at 10^6..10^8 dimensions, beside memcpy and
 * LZ4_compress_default of the same raw 8-byte (key, value) pairs measured in
 * the same run. Prints machine-readable lines "bench codec key=value ...". */
#include <errno.h>
#include <lz4.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fsgd/backend.h"
#include "fsgd/codec.h"
#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/gen.h"
#include "fsgd/libsvm.h"
#include "fsgd/loss.h"
#include "fsgd/sparse.h"

typedef struct bench_opts {
    int quick;
    double min_time;      /* seconds per timed measurement */
    const char *data_dir;
    const char *datasets; /* comma separated */
    const char *dims;     /* comma separated synthetic dims */
    const char *batches;  /* comma separated fractions of the rows */
    uint64_t gen_rows;    /* notional rows of the synthetic set */
    const char *codecs;   /* ';' separated specs */
    int sweep;
} bench_opts_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: robust on a shared machine */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static volatile uint64_t sink;

/* Seconds per call of a timed operation, repeated until min_time passed. */
#define TIME_LOOP(min_time, out_sec, body)                                                                           \
    do {                                                                                                             \
        long reps_ = 0;                                                                                              \
        double t0_ = now(), el_;                                                                                     \
        do {                                                                                                         \
            body;                                                                                                    \
            reps_++;                                                                                                 \
        } while ((el_ = now() - t0_) < (min_time));                                                                  \
        (out_sec) = el_ / (double)reps_;                                                                             \
    } while (0)

/* log2(C(D, d)) / d: the fewest bits per key any code can spend on d keys of D. */
static double floor_bits(uint64_t D, uint64_t d)
{
    if (d == 0 || d >= D)
        return 0;
    double lc = lgamma((double)D + 1) - lgamma((double)d + 1) - lgamma((double)(D - d) + 1);
    return lc / log(2.0) / (double)d;
}

/* SketchML's key coder (a 2-bit flag and 1, 2 or 4 bytes of delta a key) on
 * keys as ONE increasing group: set against its cost on the codec's own value
 * groups (fsgd_codec_stats_t.key_coder_bits), it is the price of the grouping. */
static uint64_t sketchml_coder_bits_one_group(const fsgd_sparse_t *keys)
{
    uint64_t bits = 0;
    uint32_t prev = 0;
    for (size_t i = 0; i < keys->n; i++) {
        uint32_t d = keys->keys[i] - prev;
        bits += 2 + 8 * (uint64_t)(d < 256 ? 1 : d < 65536 ? 2 : 4);
        prev = keys->keys[i];
    }
    return bits;
}

static void bench_gradient(const bench_opts_t *o, const char *source, double batch, uint64_t dim,
                           const fsgd_sparse_t *g)
{
    size_t n = g->n, raw = 8 * n;
    if (n == 0)
        return;
    /* the raw pairs, interleaved, for memcpy and lz4 */
    uint8_t *pairs = malloc(raw), *copy = malloc(raw);
    int lz4cap = LZ4_compressBound((int)raw);
    char *lz = malloc((size_t)lz4cap);
    for (size_t i = 0; i < n; i++) {
        memcpy(pairs + 8 * i, &g->keys[i], 4);
        memcpy(pairs + 8 * i + 4, &g->vals[i], 4);
    }
    double t_memcpy, t_lz4;
    int lz4_len = 0;
    TIME_LOOP(o->min_time, t_memcpy, { memcpy(copy, pairs, raw); sink += copy[reps_ % raw]; });
    TIME_LOOP(o->min_time, t_lz4, { lz4_len = LZ4_compress_default((const char *)pairs, lz, (int)raw, lz4cap); });
    double mb = (double)raw / 1e6;
    printf("bench codec source=%s batch=%g dim=%llu n=%zu codec=memcpy enc_MBps=%.1f\n", source, batch,
           (unsigned long long)dim, n, mb / t_memcpy);
    printf("bench codec source=%s batch=%g dim=%llu n=%zu codec=lz4_raw_pairs enc_MBps=%.1f ratio=%.3f "
           "enc_vs_memcpy=%.3f\n",
           source, batch, (unsigned long long)dim, n, mb / t_lz4, (double)raw / lz4_len, t_memcpy / t_lz4);

    char specs[1024];
    snprintf(specs, sizeof specs, "%s", o->codecs);
    char *save = NULL;
    fsgd_sparse_t out = {0};
    for (char *spec = strtok_r(specs, ";", &save); spec; spec = strtok_r(NULL, ";", &save)) {
        char err[256];
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        if (!c) {
            fsgd_cli_error("bench codec: %s", err);
            continue;
        }
        size_t cap = fsgd_codec_bound(c, n);
        fsgd_outbuf_t buf = {malloc(cap), cap, 0};
        double t_enc, t_dec;
        int rc = 0;
        /* error feedback state would grow between repetitions: reset each call */
        TIME_LOOP(o->min_time, t_enc, {
            fsgd_codec_reset(c);
            rc |= fsgd_codec_encode(c, g->keys, g->vals, n, &buf, err, sizeof err);
        });
        fsgd_codec_stats_t st;
        fsgd_codec_last_stats(c, &st);
        TIME_LOOP(o->min_time, t_dec, { rc |= fsgd_codec_decode(buf.dst, buf.len, dim, &out, err, sizeof err); });
        if (rc) {
            fsgd_cli_error("bench codec %s: %s", spec, err);
        } else {
            double sent = st.n_sent ? (double)st.n_sent : 1;
            printf("bench codec source=%s batch=%g dim=%llu n=%zu codec=%s sent=%llu bytes=%zu ratio=%.3f "
                   "bits_per_key=%.3f bits_per_value=%.3f floor_bits_per_key=%.3f enc_MBps=%.1f dec_MBps=%.1f "
                   "enc_vs_memcpy=%.3f enc_vs_lz4=%.3f dec_vs_memcpy=%.3f dec_vs_lz4=%.3f\n",
                   source, batch, (unsigned long long)dim, n, fsgd_codec_spec(c), (unsigned long long)st.n_sent, buf.len,
                   (double)raw / (double)buf.len, (double)st.key_bits / sent, (double)st.value_bits / sent,
                   floor_bits(dim, st.n_sent), mb / t_enc, mb / t_dec, t_memcpy / t_enc, t_lz4 / t_enc,
                   t_memcpy / t_dec, t_lz4 / t_dec);
            if (st.key_coder_bits) /* the decoded keys are the sent ones, in order */
                printf("bench codec_sketchml_coder source=%s batch=%g dim=%llu n=%zu codec=%s sent=%llu "
                       "bits_per_key=%.3f coder_own_groups_bits_per_key=%.3f coder_one_group_bits_per_key=%.3f "
                       "header_bits_per_key=%.3f\n",
                       source, batch, (unsigned long long)dim, n, fsgd_codec_spec(c), (unsigned long long)st.n_sent,
                       (double)st.key_bits / sent, (double)st.key_coder_bits / sent,
                       (double)sketchml_coder_bits_one_group(&out) / sent,
                       8.0 * (double)st.header_bytes / sent);
        }
        free(buf.dst);
        fsgd_codec_destroy(c);
    }
    if (o->sweep) { /* the paper's Table VI: l = 1..5, beside the optimal lengths and the floor */
        for (int l = 1; l <= 5; l++) {
            double bits[2];
            uint64_t sent = 0;
            for (int opt = 0; opt < 2; opt++) {
                char spec[64], err[256];
                snprintf(spec, sizeof spec, "fastsgd:l=%d%s", l, opt ? ",levels=optimal" : "");
                fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
                size_t cap = fsgd_codec_bound(c, n);
                fsgd_outbuf_t buf = {malloc(cap), cap, 0};
                fsgd_codec_encode(c, g->keys, g->vals, n, &buf, err, sizeof err);
                fsgd_codec_stats_t st;
                fsgd_codec_last_stats(c, &st);
                sent = st.n_sent;
                bits[opt] = st.n_sent ? (double)st.key_bits / (double)st.n_sent : 0;
                free(buf.dst);
                fsgd_codec_destroy(c);
            }
            printf("bench codec_l source=%s batch=%g dim=%llu n=%zu sent=%llu l=%d bits_per_key_paper=%.3f "
                   "bits_per_key_optimal=%.3f floor_bits_per_key=%.3f\n",
                   source, batch, (unsigned long long)dim, n, (unsigned long long)sent, l, bits[0], bits[1],
                   floor_bits(dim, sent));
        }
    }
    fflush(stdout);
    fsgd_sparse_free(&out);
    free(pairs);
    free(copy);
    free(lz);
}

/* Real gradients: the logistic loss gradient of the first batch*rows rows at a
 * small random θ, from the CPU backend. */
static int bench_dataset(const bench_opts_t *o, const char *name, const double *fracs, int nfrac)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", o->data_dir, name);
    fsgd_csr_t all = {0}, batch = {0};
    int rc = fsgd_libsvm_load(path, NULL, &all, NULL, err, sizeof err);
    if (rc < 0) {
        fsgd_cli_error("bench codec: %s", err);
        return rc;
    }
    uint64_t dim = all.max_col ? all.max_col : 1;
    float *theta = malloc(dim * sizeof *theta);
    uint64_t s = 42;
    for (uint64_t i = 0; i < dim; i++)
        theta[i] = (float)(((double)(splitmix(&s) >> 11) * 0x1p-53 - 0.5) * 0.02);
    fsgd_backend_t *be = fsgd_backend_new("cpu", dim, theta, err, sizeof err);
    if (!be) {
        fsgd_cli_error("bench codec: %s", err);
        free(theta);
        fsgd_csr_free(&all);
        return FSGD_E_DEVICE;
    }
    fsgd_sparse_t g = {0};
    for (int f = 0; f < nfrac; f++) {
        size_t rows = (size_t)ceil(fracs[f] * (double)all.n_rows);
        rows = rows < 1 ? 1 : (rows > all.n_rows ? all.n_rows : rows);
        fsgd_csr_clear(&batch);
        fsgd_csr_append_rows(&batch, &all, 0, rows);
        fsgd_grad_request_t req = {&batch, -1, FSGD_LOSS_LOGISTIC, 1.0 / (double)rows, 0};
        double loss = 0;
        rc = fsgd_backend_gradient(be, &req, &g, &loss, err, sizeof err);
        if (rc < 0) {
            fsgd_cli_error("bench codec: %s", err);
            break;
        }
        bench_gradient(o, name, fracs[f], dim, &g);
    }
    fsgd_sparse_free(&g);
    fsgd_backend_destroy(be);
    free(theta);
    fsgd_csr_free(&batch);
    fsgd_csr_free(&all);
    return rc < 0 ? rc : 0;
}

/* Sorts (key, val) pairs by key (LSD radix, stable) and sums repeats. */
static size_t sort_and_sum(uint32_t *k, float *v, size_t n)
{
    uint32_t *k2 = malloc(n * 4 + 4);
    float *v2 = malloc(n * 4 + 4);
    for (int sh = 0; sh < 32; sh += 8) {
        size_t cnt[257] = {0};
        for (size_t i = 0; i < n; i++)
            cnt[((k[i] >> sh) & 255) + 1]++;
        for (int b = 0; b < 256; b++)
            cnt[b + 1] += cnt[b];
        for (size_t i = 0; i < n; i++) {
            size_t p = cnt[(k[i] >> sh) & 255]++;
            k2[p] = k[i];
            v2[p] = v[i];
        }
        memcpy(k, k2, n * 4);
        memcpy(v, v2, n * 4);
    }
    free(k2);
    free(v2);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o && k[o - 1] == k[i]) {
            v[o - 1] += v[i];
        } else {
            k[o] = k[i];
            v[o++] = v[i];
        }
    }
    return o;
}

/* Synthetic gradients: batch*gen_rows rows of fsgd gen (Zipf 1.1, 20 nonzeros
 * per row, values k/1000), residual sigmoid(m) - y with m the generator's
 * margin scaled by 0.1 (a model part way to the truth). */
static int bench_synthetic(const bench_opts_t *o, uint64_t dim, const double *fracs, int nfrac)
{
    char err[256], src[64];
    fsgd_gen_opts_t go;
    fsgd_gen_opts_default(&go);
    go.dim = dim;
    go.real_values = 1;
    snprintf(src, sizeof src, "gen%.0e", (double)dim);
    for (int f = 0; f < nfrac; f++) {
        fsgd_gen_t *gen = fsgd_gen_new(&go, err, sizeof err);
        if (!gen) {
            fsgd_cli_error("bench codec: %s", err);
            return FSGD_E_ARG;
        }
        size_t rows = (size_t)ceil(fracs[f] * (double)o->gen_rows), maxr = fsgd_gen_max_row(gen);
        fsgd_sparse_t g = {0};
        fsgd_sparse_reserve(&g, rows * maxr + 1);
        size_t n = 0;
        for (size_t r = 0; r < rows; r++) {
            double label, margin;
            size_t m = fsgd_gen_next(gen, g.keys + n, g.vals + n, &label, &margin);
            double res = (1 / (1 + exp(-0.1 * margin)) - (label > 0 ? 1 : 0)) / (double)rows;
            for (size_t i = 0; i < m; i++)
                g.vals[n + i] = (float)(g.vals[n + i] * res);
            n += m;
        }
        g.n = sort_and_sum(g.keys, g.vals, n);
        bench_gradient(o, src, fracs[f], dim, &g);
        fsgd_sparse_free(&g);
        fsgd_gen_destroy(gen);
    }
    return 0;
}

/* KDD12-shaped keys (FastSGD paper, Table V): D = 54,686,452 features, keys
 * a Bernoulli(1/2) process (geometric gaps) over a prefix of the key space
 * (key bits depend only on the gaps),
 * the density at which FastSGD with its defaults spends the paper's 6.04
 * bits per sent key; values heavy-tailed of both signs. The paper's figures
 * on these keys: SketchML 9.95, FastSGD 6.04 bits per key
 * (tests/unit/test_codec_sketchml.c checks both to 10%). */
static void bench_kdd12(const bench_opts_t *o)
{
    const uint64_t dim = 54686452;
    size_t n = 400000;
    fsgd_sparse_t g = {0};
    if (fsgd_sparse_reserve(&g, n) < 0)
        return;
    uint64_t s = 0x4B444431;
    double k = -1;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix(&s) >> 11) * 0x1p-53, w = (double)(splitmix(&s) >> 11) * 0x1p-53;
        k += 1 + floor(log(1 - u) / log(0.5));
        g.keys[i] = (uint32_t)k;
        double v = (w - 0.5) * exp(6 * (double)(splitmix(&s) >> 11) * 0x1p-53 - 3) * 1e-3;
        g.vals[i] = (float)(v == 0 ? 1e-6 : v);
    }
    g.n = n;
    /* dim = the prefix the keys span, so floor_bits_per_key is the floor for them */
    (void)dim;
    bench_gradient(o, "kdd12", 1, (uint64_t)g.keys[n - 1] + 1, &g);
    fsgd_sparse_free(&g);
}

static int parse_list(const char *s, double *out, int max)
{
    int n = 0;
    char *end;
    while (*s && n < max) {
        out[n++] = strtod(s, &end);
        if (end == s)
            return -1;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return n;
}

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: fsgd bench codec [options]\n"
               "\n"
               "Encode/decode speed (MB/s of raw 8-byte key/value pairs, and ratios to memcpy\n"
               "and LZ4_compress_default of the same bytes in the same run), bits per key and\n"
               "value, compression ratio and the floor log2(C(D,d))/d for every codec, on\n"
               "gradients of real datasets (CPU backend) and synthetic fsgd gen gradients;\n"
               "plus the l = 1..5 sweep of FastSGD's key lengths (paper Table VI), and\n"
               "KDD12-shaped keys (source=kdd12; paper Table V: SketchML 9.95, FastSGD 6.04 bits/key).\n"
               "For sketchml, a codec_sketchml_coder line: its key coder's bits a key on its own\n"
               "value groups and on all keys as one group (the price of the grouping).\n"
               "\n"
               "  --quick            a short run (a9a, 10^6 dims, two batch sizes)\n"
               "  --data-dir DIR     datasets directory (default $FSGD_DATA, else build/datasets:\n"
               "                     make data fills it from data/sets)\n"
               "  --datasets A,B     dataset files (default a9a,w8a,ijcnn1,reuters)\n"
               "  --dims D,D         synthetic dimensions (default 1e6,1e7,1e8)\n"
               "  --batches F,F      batch sizes as fractions of the rows (default 0.001,0.01,0.1)\n"
               "  --gen-rows N       rows of the synthetic set (default 1e6)\n"
               "  --codecs S;S       codec specs (default none;none:lz4=1;fastsgd;fastsgd:levels=optimal;\n"
               "                     logquant;topk:ratio=0.01;mqgrad:bits=2;mqgrad:bits=8;efsign;sketchml)\n"
               "  --min-time SEC     time per measurement (default 0.2, quick 0.03)\n"
               "  --no-sweep         skip the l sweep\n");
}

/* --help was printed: the command succeeds without measuring. */
#define BENCH_HELP_PRINTED (-1)

/* bench codec's options after "codec", over the defaults. 0,
 * BENCH_HELP_PRINTED, or the exit status (error printed). */
static int parse_bench_args(int argc, char **argv, bench_opts_t *o)
{
    memset(o, 0, sizeof *o);
    const char *env = getenv("FSGD_DATA");
    o->data_dir = env ? env : "build/datasets";
    o->datasets = "a9a,w8a,ijcnn1,reuters";
    o->dims = "1e6,1e7,1e8";
    o->batches = "0.001,0.01,0.1";
    o->gen_rows = 1000000;
    o->codecs = "none;none:lz4=1;fastsgd;fastsgd:levels=optimal;logquant;topk:ratio=0.01;mqgrad:bits=2;mqgrad:bits=8;"
                "efsign;sketchml";
    o->min_time = -1;
    o->sweep = 1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            o->quick = 1;
            o->datasets = "a9a";
            o->dims = "1e6";
            o->batches = "0.01,0.1";
            o->gen_rows = 100000;
            continue;
        } else if (!strcmp(a, "--no-sweep")) {
            o->sweep = 0;
            continue;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            return BENCH_HELP_PRINTED;
        }
        if (!v) {
            fsgd_cli_error("bench codec: %s needs a value", a);
            return FSGD_EXIT_USAGE;
        }
        if (!strcmp(a, "--data-dir"))
            o->data_dir = v;
        else if (!strcmp(a, "--datasets"))
            o->datasets = v;
        else if (!strcmp(a, "--dims"))
            o->dims = v;
        else if (!strcmp(a, "--batches"))
            o->batches = v;
        else if (!strcmp(a, "--gen-rows"))
            o->gen_rows = (uint64_t)strtod(v, NULL);
        else if (!strcmp(a, "--codecs"))
            o->codecs = v;
        else if (!strcmp(a, "--min-time"))
            o->min_time = strtod(v, NULL);
        else {
            fsgd_cli_error("bench codec: unknown option %s", a);
            return FSGD_EXIT_USAGE;
        }
        i++;
    }
    if (o->min_time < 0)
        o->min_time = o->quick ? 0.03 : 0.2;
    return 0;
}

/* Every data set is checked first: a missing one failed only after the rest
 * had run (48 s), and after make run, which did not unpack them (issue 40
 * item 10). 0 or the exit status (error printed). */
static int check_datasets(const bench_opts_t *o)
{
    char list[512];
    snprintf(list, sizeof list, "%s", o->datasets);
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", o->data_dir, name);
        if (access(path, R_OK) != 0) {
            fsgd_cli_error("bench codec: cannot read data set %s: %s (make data unpacks the repository's sets into "
                           "build/datasets; --data-dir DIR or FSGD_DATA names another folder, --datasets others)",
                           path, strerror(errno));
            return FSGD_EXIT_IO;
        }
    }
    return 0;
}

int fsgd_cmd_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "codec") != 0) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            bench_usage(stdout);
            return 0;
        }
        fsgd_cli_error("bench: expected 'bench codec' (fsgd bench --help)");
        return FSGD_EXIT_USAGE;
    }
    bench_opts_t o;
    int rc = parse_bench_args(argc, argv, &o);
    if (rc)
        return rc == BENCH_HELP_PRINTED ? 0 : rc;
    double fracs[16], dims[16];
    int nf = parse_list(o.batches, fracs, 16), nd = *o.dims ? parse_list(o.dims, dims, 16) : 0;
    if (nf <= 0 || nd < 0) {
        fsgd_cli_error("bench codec: bad --batches or --dims list");
        return FSGD_EXIT_USAGE;
    }
    for (int i = 0; i < nf; i++)
        if (!(fracs[i] > 0 && fracs[i] <= 1)) {
            fsgd_cli_error("bench codec: batch fraction %g not in (0, 1]", fracs[i]);
            return FSGD_EXIT_USAGE;
        }
    if ((rc = check_datasets(&o)) != 0)
        return rc;
    printf("# fsgd bench codec: MB/s of raw 8-byte (key, value) pairs; ratios > 1 mean faster than the reference\n");
    char list[512];
    snprintf(list, sizeof list, "%s", o.datasets);
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
        if (bench_dataset(&o, name, fracs, nf) < 0)
            rc = FSGD_EXIT_DATA;
    for (int i = 0; i < nd; i++) {
        if (!(dims[i] >= 1 && dims[i] <= 4294967296.0)) {
            fsgd_cli_error("bench codec: dim %g out of range", dims[i]);
            return FSGD_EXIT_USAGE;
        }
        if (bench_synthetic(&o, (uint64_t)dims[i], fracs, nf) < 0)
            rc = FSGD_EXIT_INTERNAL;
    }
    bench_kdd12(&o);
    return rc;
}
