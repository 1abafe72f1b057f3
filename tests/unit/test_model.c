/* Model files: round trips, every truncation and every corrupted byte
 * rejected with an error naming the place, semantic checks, atomic saves,
 * and the LIBLINEAR export checked against liblinear-predict itself. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/le.h"
#include "fsgd/libsvm.h"
#include "fsgd/metrics.h"
#include "fsgd/model.h"
#include "testlib.h"

/* Layout constants from trainer/MODEL_FORMAT.md (written out here, not taken
 * from model.c, so the test checks the spec). */
#define HDR 44
#define ENTRY 8

static double urand(uint64_t *s) { return (double)(fsgd_test_rand(s) >> 11) / 9007199254740992.0; }

/* A random model: about `density` of the weights nonzero. */
static void random_model(fsgd_model_t *m, fsgd_loss_kind_t kind, uint64_t dim, int has_bias, double density,
                         uint64_t *s)
{
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(m, kind, dim, has_bias, has_bias ? 1.0f : 0.0f), 0);
    for (uint64_t k = 0; k < dim; k++)
        if (urand(s) < density)
            m->w[k] = (float)(urand(s) * 2 - 1);
    if (has_bias)
        m->w[dim] = (float)(urand(s) - 0.5);
}

static int same_model(const fsgd_model_t *a, const fsgd_model_t *b)
{
    if (a->kind != b->kind || a->dim != b->dim || a->has_bias != b->has_bias)
        return 0;
    if (memcmp(&a->bias, &b->bias, sizeof a->bias) != 0)
        return 0;
    size_t n = (size_t)a->dim + (a->has_bias ? 1 : 0);
    return memcmp(a->w, b->w, n * sizeof *a->w) == 0;
}

static void test_round_trip(void)
{
    uint64_t s = fsgd_test_seed() ^ 0x1234;
    const fsgd_loss_kind_t kinds[] = {FSGD_LOSS_LOGISTIC, FSGD_LOSS_SQUARED, FSGD_LOSS_HINGE};
    const uint64_t dims[] = {1, 7, 123, 5000};
    char err[512];
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < 4; d++)
            for (int b = 0; b < 2; b++) {
                fsgd_model_t m, r;
                random_model(&m, kinds[k], dims[d], b, d == 3 ? 0.05 : 0.6, &s);
                const char *path = fsgd_test_tmp("rt.fsgd");
                int rc = fsgd_model_save(&m, path, err, sizeof err);
                CU_ASSERT_EQUAL(rc, 0);
                if (rc)
                    fprintf(stderr, "\n  %s\n", err);
                rc = fsgd_model_load(&r, path, err, sizeof err);
                CU_ASSERT_EQUAL(rc, 0);
                if (rc)
                    fprintf(stderr, "\n  %s\n", err);
                CU_ASSERT_TRUE(same_model(&m, &r));
                /* the file holds exactly the nonzero weights */
                size_t len;
                uint8_t *bytes = fsgd_test_read_file(path, &len);
                CU_ASSERT_EQUAL(len, 48 + 8 * fsgd_model_nnz(&m));
                /* encode gives the same bytes as save */
                uint8_t *enc;
                size_t elen;
                CU_ASSERT_EQUAL(fsgd_model_encode(&m, &enc, &elen, err, sizeof err), 0);
                CU_ASSERT_TRUE(elen == len && memcmp(enc, bytes, len) == 0);
                free(enc);
                free(bytes);
                fsgd_model_free(&m);
                fsgd_model_free(&r);
            }
}

/* Forward declaration: craft() builds files with valid CRCs (below). */
static size_t craft(uint8_t *b, int kind, int flags, uint64_t dim, float bias, float bias_w, const uint32_t *keys,
                    const float *vals, size_t n);

static void test_large_sparse_dim(void)
{
    /* dim 2^32, the largest the format allows, keys at both ends. Loading would
     * allocate 16 GiB of dense weights, so max_dim refuses it -- but only after
     * the whole file was checked, so RANGE here means "valid, too big". */
    uint8_t b[128];
    uint32_t k[2] = {0, UINT32_MAX};
    float v[2] = {1.5f, -2.5f};
    const uint64_t dim = UINT64_C(1) << 32;
    size_t len = craft(b, 1, 1, dim, 1.0f, 0.25f, k, v, 2);
    fsgd_model_t m;
    char err[512];
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&m, b, len, "big.fsgd", 1 << 20, err, sizeof err), FSGD_E_RANGE);
    CU_ASSERT_STRING_EQUAL(err, "big.fsgd: dim 4294967296 at byte 16 exceeds the limit 1048576");
    CU_ASSERT_PTR_NULL(m.w);
    uint32_t kbad[2] = {UINT32_MAX, 0};
    len = craft(b, 1, 1, dim, 1.0f, 0.25f, kbad, v, 2);
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&m, b, len, "big.fsgd", 1 << 20, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "key 0 of weight 1 at byte 52 is not above the previous key 4294967295");
    CU_ASSERT_EQUAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, dim + 1, 0, 0), FSGD_E_RANGE);
    /* a model with dim 2^20 at the limit loads */
    len = craft(b, 3, 0, 1 << 20, 0.0f, 0.0f, (uint32_t[]){(1 << 20) - 1}, v, 1);
    CU_ASSERT_EQUAL_FATAL(fsgd_model_load_mem(&m, b, len, "edge.fsgd", 1 << 20, err, sizeof err), 0);
    CU_ASSERT_EQUAL(m.w[(1 << 20) - 1], 1.5f);
    CU_ASSERT_EQUAL(m.kind, FSGD_LOSS_HINGE);
    fsgd_model_free(&m);
}

/* The field a reader must name when the file ends at byte len (spec table). */
static void expected_truncation(size_t len, size_t nnz, char *what, size_t cap, size_t *at)
{
    static const struct {
        size_t off;
        const char *name;
    } f[] = {{0, "magic"},  {8, "version"}, {10, "kind"}, {11, "flags"},       {12, "reserved"},
             {16, "dim"},   {24, "nnz"},    {32, "bias"}, {36, "bias_weight"}, {40, "header_crc"}};
    for (int i = 9; i >= 0; i--)
        if (len >= f[i].off) {
            if (len < HDR) {
                snprintf(what, cap, "reading %s", f[i].name);
                *at = f[i].off;
                return;
            }
            break;
        }
    size_t end = HDR + nnz * ENTRY;
    if (len < end) {
        size_t i = (len - HDR) / ENTRY, in = (len - HDR) % ENTRY;
        snprintf(what, cap, "reading weight %zu of %zu (%s)", i, nnz, in < 4 ? "key" : "value");
        *at = HDR + i * ENTRY + (in < 4 ? 0 : 4);
        return;
    }
    snprintf(what, cap, "reading body_crc after %zu weights", nnz);
    *at = end;
}

static void test_every_truncation(void)
{
    uint64_t s = fsgd_test_seed() ^ 0x77;
    fsgd_model_t m;
    random_model(&m, FSGD_LOSS_LOGISTIC, 12, 1, 1.0, &s);
    const char *path = fsgd_test_tmp("full.fsgd");
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_save(&m, path, err, sizeof err), 0);
    size_t len;
    uint8_t *full = fsgd_test_read_file(path, &len);
    CU_ASSERT_EQUAL_FATAL(len, 48 + 12 * 8);
    const char *tpath = fsgd_test_tmp("m.fsgd");
    for (size_t cut = 0; cut < len; cut++) {
        CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(tpath, full, cut), 0);
        fsgd_model_t r;
        err[0] = 0;
        int rc = fsgd_model_load(&r, tpath, err, sizeof err);
        CU_ASSERT_EQUAL(rc, FSGD_E_TRUNCATED);
        CU_ASSERT_PTR_NULL(r.w);
        char what[128], want[512];
        size_t at;
        expected_truncation(cut, 12, what, sizeof what, &at);
        snprintf(want, sizeof want, "%s: truncated at byte %zu %s (file has %zu bytes)", tpath, at, what, cut);
        FSGD_ASSERT_CONTAINS(err, want);
    }
    fsgd_model_free(&m);
    /* a concrete example, as the spec shows it */
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&m, full, 65, "m.fsgd", 0, err, sizeof err), FSGD_E_TRUNCATED);
    CU_ASSERT_STRING_EQUAL(err, "m.fsgd: truncated at byte 64 reading weight 2 of 12 (value) (file has 65 bytes)");
    fsgd_model_free(&m);
    free(full);
}

static void test_every_byte_flip(void)
{
    uint64_t s = fsgd_test_seed() ^ 0x99;
    fsgd_model_t m;
    random_model(&m, FSGD_LOSS_HINGE, 40, 1, 0.5, &s);
    uint8_t *enc;
    size_t len;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &enc, &len, err, sizeof err), 0);
    fsgd_model_free(&m);
    uint8_t *bad = malloc(len);
    const uint8_t masks[] = {0x01, 0x80, 0xFF, 0x10};
    for (size_t i = 0; i < len; i++)
        for (int k = 0; k < 4; k++) {
            memcpy(bad, enc, len);
            bad[i] ^= masks[k];
            fsgd_model_t r;
            err[0] = 0;
            int rc = fsgd_model_load_mem(&r, bad, len, "flip.fsgd", 0, err, sizeof err);
            CU_ASSERT_TRUE(rc == FSGD_E_CRC || rc == FSGD_E_FORMAT || rc == FSGD_E_VERSION ||
                           rc == FSGD_E_TRUNCATED);
            if (rc == 0)
                fprintf(stderr, "\n  byte %zu ^ 0x%02x accepted\n", i, masks[k]);
            CU_ASSERT_PTR_NULL(r.w);
            FSGD_ASSERT_CONTAINS(err, "flip.fsgd: ");
            FSGD_ASSERT_CONTAINS(err, "byte ");
            /* damage inside the header after the version is caught by the header CRC */
            if (i >= 10 && i < 44)
                CU_ASSERT_EQUAL(rc, FSGD_E_CRC);
            if (i >= 44 && rc != FSGD_E_CRC)
                fprintf(stderr, "\n  byte %zu: %s\n", i, err);
            if (i >= 44)
                CU_ASSERT_EQUAL(rc, FSGD_E_CRC);
        }
    free(bad);
    free(enc);
}

static void test_magic_and_version(void)
{
    fsgd_model_t m;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, 3, 0, 0), 0);
    m.w[1] = 2;
    uint8_t *enc;
    size_t len;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &enc, &len, err, sizeof err), 0);
    fsgd_model_free(&m);

    const char *path = fsgd_test_tmp("text.model");
    const char *text = "solver_type L2R_LR\nnr_class 2\n";
    fsgd_test_write_file(path, text, strlen(text));
    CU_ASSERT_EQUAL(fsgd_model_load(&m, path, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, path);
    FSGD_ASSERT_CONTAINS(err, "not an fsgd model file: bad magic at byte 0 (expected \"FSGDMODL\", got \"solver_t\")");

    /* a short file with a wrong start is "not a model", not "truncated" */
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&m, "\x01\x02", 2, "x", 0, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "got \"\\x01\\x02\"");

    uint8_t v4[256];
    memcpy(v4, enc, len);
    fsgd_le_put16(v4 + 8, 5);
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&m, v4, len, "new.fsgd", 0, err, sizeof err), FSGD_E_VERSION);
    CU_ASSERT_STRING_EQUAL(err,
                           "new.fsgd: unsupported model format version 5 at byte 8 (this build reads versions 1 to 4)");

    CU_ASSERT_EQUAL(fsgd_model_load(&m, fsgd_test_tmp("missing.fsgd"), err, sizeof err), FSGD_E_IO);
    FSGD_ASSERT_CONTAINS(err, "missing.fsgd': No such file or directory");
    free(enc);
}

/* Builds a file with valid CRCs from parts, to reach the semantic checks. */
static size_t craft(uint8_t *b, int kind, int flags, uint64_t dim, float bias, float bias_w, const uint32_t *keys,
                    const float *vals, size_t n)
{
    memset(b, 0, HDR);
    memcpy(b, "FSGDMODL", 8);
    fsgd_le_put16(b + 8, 1);
    b[10] = (uint8_t)kind;
    b[11] = (uint8_t)flags;
    fsgd_le_put64(b + 16, dim);
    fsgd_le_put64(b + 24, n);
    fsgd_le_putf32(b + 32, bias);
    fsgd_le_putf32(b + 36, bias_w);
    fsgd_le_put32(b + 40, fsgd_crc32c(0, b, 40));
    for (size_t i = 0; i < n; i++) {
        fsgd_le_put32(b + HDR + 8 * i, keys[i]);
        fsgd_le_putf32(b + HDR + 8 * i + 4, vals[i]);
    }
    fsgd_le_put32(b + HDR + 8 * n, fsgd_crc32c(0, b + HDR, 8 * n));
    return HDR + 8 * n + 4;
}

static void expect_bad(const uint8_t *b, size_t len, int code, const char *msg)
{
    fsgd_model_t m;
    char err[512] = "";
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&m, b, len, "c.fsgd", 0, err, sizeof err), code);
    CU_ASSERT_PTR_NULL(m.w);
    FSGD_ASSERT_CONTAINS(err, msg);
}

static void test_semantic_checks(void)
{
    uint8_t b[512];
    uint32_t k[3] = {1, 5, 9};
    float v[3] = {0.5f, -1.0f, 2.0f};
    fsgd_model_t m;
    char err[512];
    size_t len = craft(b, 1, 1, 10, 1.0f, 0.5f, k, v, 3);
    CU_ASSERT_EQUAL_FATAL(fsgd_model_load_mem(&m, b, len, "c.fsgd", 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(m.w[5], -1.0f);
    CU_ASSERT_EQUAL(m.w[10], 0.5f);
    CU_ASSERT_EQUAL(m.w[0], 0.0f);
    fsgd_model_free(&m);

    len = craft(b, 4, 1, 10, 1.0f, 0.5f, k, v, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "c.fsgd: unknown model kind 4 at byte 10");
    len = craft(b, 1, 3, 10, 1.0f, 0.5f, k, v, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "reserved flag bits set at byte 11");
    len = craft(b, 1, 0, 10, 1.0f, 0.5f, k, v, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "bias_weight at byte 36 is 0.5 but the model has no intercept");
    len = craft(b, 1, 1, 0, 1.0f, 0.5f, k, v, 0);
    expect_bad(b, len, FSGD_E_FORMAT, "dim 0 at byte 16 is outside 1..2^32");
    len = craft(b, 1, 1, (UINT64_C(1) << 32) + 1, 1.0f, 0.5f, k, v, 0);
    expect_bad(b, len, FSGD_E_FORMAT, "dim 4294967297 at byte 16 is outside 1..2^32");
    len = craft(b, 1, 1, 2, 1.0f, 0.5f, k, v, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "nnz 3 at byte 24 exceeds dim 2");
    len = craft(b, 1, 1, 10, NAN, 0.5f, k, v, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "bias value at byte 32 is not finite");
    len = craft(b, 1, 1, 9, 1.0f, 0.5f, k, v, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "key 9 of weight 2 at byte 60 >= dim 9");
    uint32_t k2[3] = {1, 5, 5};
    len = craft(b, 1, 1, 10, 1.0f, 0.5f, k2, v, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "key 5 of weight 2 at byte 60 is not above the previous key 5");
    float v2[3] = {0.5f, 0.0f, 1.0f};
    len = craft(b, 1, 1, 10, 1.0f, 0.5f, k, v2, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "value of weight 1 (key 5) at byte 56 is 0 (zero weights are not stored)");
    float v3[3] = {0.5f, INFINITY, 1.0f};
    len = craft(b, 1, 1, 10, 1.0f, 0.5f, k, v3, 3);
    expect_bad(b, len, FSGD_E_FORMAT, "value of weight 1 (key 5) at byte 56 is inf");
    len = craft(b, 1, 1, 10, 1.0f, 0.5f, k, v, 3);
    b[len] = 0;
    expect_bad(b, len + 1, FSGD_E_FORMAT, "1 trailing bytes at byte 72 after body_crc");
    b[50] ^= 4;
    expect_bad(b, len, FSGD_E_CRC, "c.fsgd: weights checksum mismatch at byte 68");
    fsgd_le_put32(b + 12, 7);
    expect_bad(b, len, FSGD_E_CRC, "c.fsgd: header checksum mismatch at byte 40");
    fsgd_le_put32(b + 40, fsgd_crc32c(0, b, 40));
    expect_bad(b, len, FSGD_E_FORMAT, "reserved field at byte 12 is 0x00000007, must be 0");
}

static int count_tmp_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static void test_save_errors_and_atomicity(void)
{
    fsgd_model_t m;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_SQUARED, 4, 0, 0), 0);
    m.w[2] = NAN;
    const char *path = fsgd_test_tmp("nan.fsgd");
    CU_ASSERT_EQUAL(fsgd_model_save(&m, path, err, sizeof err), FSGD_E_NONFINITE);
    FSGD_ASSERT_CONTAINS(err, "nan.fsgd: cannot save: model weight of column 2 is nan");
    m.w[2] = 3;
    /* saving over an existing file replaces it and leaves no temporary files */
    const char *dirpath = fsgd_test_tmp("");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", dirpath);
    CU_ASSERT_EQUAL(fsgd_model_save(&m, path, err, sizeof err), 0);
    m.w[1] = -7;
    CU_ASSERT_EQUAL(fsgd_model_save(&m, path, err, sizeof err), 0);
    fsgd_model_t r;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_load(&r, path, err, sizeof err), 0);
    CU_ASSERT_TRUE(same_model(&m, &r));
    fsgd_model_free(&r);
    CU_ASSERT_EQUAL(count_tmp_files(dir), 0);
    CU_ASSERT_EQUAL(fsgd_model_save(&m, "/nonexistent-dir/x.fsgd", err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "/nonexistent-dir/x.fsgd': directory '/nonexistent-dir': No such file or directory");
    /* without an intercept, w[dim] is not part of the model */
    m.w[4] = 5;
    CU_ASSERT_EQUAL(fsgd_model_save(&m, path, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_model_load(&r, path, err, sizeof err), 0);
    CU_ASSERT_EQUAL(r.w[4], 0.0f);
    fsgd_model_free(&r);
    fsgd_model_free(&m);
}

static void test_margin(void)
{
    fsgd_model_t m;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, 4, 1, 2.0f), 0);
    m.w[0] = 1;
    m.w[3] = -0.5f;
    m.w[4] = 0.25f; /* intercept */
    uint32_t col[] = {0, 3, 4, 100};
    float val[] = {2, 4, 9, 9};
    CU_ASSERT_DOUBLE_EQUAL(fsgd_model_margin(&m, col, val, 4), 2 - 2 + 0.5, 1e-12);
    m.has_bias = 0;
    CU_ASSERT_DOUBLE_EQUAL(fsgd_model_margin(&m, col, val, 4), 0, 1e-12);
    fsgd_model_free(&m);
}

/* ---- LIBLINEAR export, checked with liblinear-predict ------------------ */

static void test_export_text(void)
{
    fsgd_model_t m;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, 3, 1, 1.0f), 0);
    m.w[0] = 0.1f;
    m.w[2] = -3;
    m.w[3] = 0.5f;
    const char *path = fsgd_test_tmp("ll.txt");
    CU_ASSERT_EQUAL_FATAL(fsgd_model_export_liblinear(&m, path, err, sizeof err), 0);
    size_t len;
    char *t = (char *)fsgd_test_read_file(path, &len);
    t = realloc(t, len + 1);
    t[len] = 0;
    CU_ASSERT_STRING_EQUAL(t, "solver_type L2R_LR\nnr_class 2\nlabel 1 -1\nnr_feature 3\nbias 1\nw\n"
                              "0.10000000149011612 \n0 \n-3 \n0.5 \n");
    free(t);
    m.kind = FSGD_LOSS_SQUARED;
    m.has_bias = 0;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_export_liblinear(&m, path, err, sizeof err), 0);
    t = (char *)fsgd_test_read_file(path, &len);
    t = realloc(t, len + 1);
    t[len] = 0;
    CU_ASSERT_STRING_EQUAL(t, "solver_type L2R_L2LOSS_SVR\nnr_class 2\nnr_feature 3\nbias -1\nw\n"
                              "0.10000000149011612 \n0 \n-3 \n");
    free(t);
    m.kind = FSGD_LOSS_HINGE;
    m.has_bias = 1;
    m.bias = -1;
    CU_ASSERT_EQUAL(fsgd_model_export_liblinear(&m, path, err, sizeof err), FSGD_E_UNSUPPORTED);
    FSGD_ASSERT_CONTAINS(err, "bias value -1 < 0");
    fsgd_model_free(&m);
}

/* Runs a shell command; fails the test (with its output) unless it exits 0. */
static int sh(const char *cmd)
{
    static char out[65536];
    int rc = fsgd_test_run(cmd, out, sizeof out);
    if (rc != 0)
        fprintf(stderr, "\n  command failed (%d): %s\n%s\n", rc, cmd, out);
    return rc;
}

/* Reads one number per line (skipping a "labels ..." header); returns count. */
static size_t read_column(const char *path, int col, double *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        if (!strncmp(line, "labels", 6))
            continue;
        char *p = line, *end;
        double v = 0;
        for (int c = 0; c <= col; c++) {
            v = strtod(p, &end);
            p = end;
        }
        out[n++] = v;
    }
    fclose(f);
    return n;
}

/* Random model of each kind -> fsgd export -> liblinear-predict on a9a.t:
 * labels identical to fsgd predict, probabilities within 1e-6, regression
 * values within 1e-9. dim 110 < the data's 123 features also checks that
 * both ignore features the model does not know. */
static void test_export_matches_liblinear_predict(void)
{
    FSGD_TEST_DATA(data, "a9a.t");
    const char *bin = fsgd_test_bin();
    uint64_t s = fsgd_test_seed() ^ 0xabc;
    const fsgd_loss_kind_t kinds[] = {FSGD_LOSS_LOGISTIC, FSGD_LOSS_HINGE, FSGD_LOSS_SQUARED};
    const size_t cap = 20000;
    double *ours = malloc(cap * sizeof *ours), *theirs = malloc(cap * sizeof *theirs);
    double *prob = malloc(cap * sizeof *prob);
    char err[512], cmd[4096];
    for (int k = 0; k < 3; k++)
        for (int dimcase = 0; dimcase < 2; dimcase++) {
            fsgd_model_t m;
            random_model(&m, kinds[k], dimcase ? 110 : 123, !dimcase, 0.8, &s);
            const char *mp = fsgd_test_tmp("x.fsgd"), *tp = fsgd_test_tmp("x.txt");
            const char *sp = fsgd_test_tmp("x.scores"), *lp = fsgd_test_tmp("x.ll");
            CU_ASSERT_EQUAL_FATAL(fsgd_model_save(&m, mp, err, sizeof err), 0);
            snprintf(cmd, sizeof cmd, "%s export --model %s --format liblinear --out %s", bin, mp, tp);
            CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
            snprintf(cmd, sizeof cmd, "%s predict --model %s --data %s --out %s%s", bin, mp, data, sp,
                     kinds[k] == FSGD_LOSS_LOGISTIC ? " --proba" : "");
            CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
            snprintf(cmd, sizeof cmd, "liblinear-predict %s %s %s %s", kinds[k] == FSGD_LOSS_LOGISTIC ? "-b 1" : "",
                     data, tp, lp);
            CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
            size_t n = read_column(sp, 0, ours, cap);
            size_t n2 = read_column(lp, 0, theirs, cap);
            CU_ASSERT_EQUAL(n, 16281);
            CU_ASSERT_EQUAL(n2, n);
            size_t label_diff = 0, pos = 0;
            double worst = 0;
            if (kinds[k] == FSGD_LOSS_SQUARED) {
                for (size_t i = 0; i < n && i < n2; i++) {
                    double d = fabs(ours[i] - theirs[i]);
                    worst = d > worst ? d : worst;
                }
                CU_ASSERT_TRUE(worst <= 1e-9);
            } else {
                if (kinds[k] == FSGD_LOSS_LOGISTIC)
                    read_column(lp, 1, prob, cap); /* P(label 1) */
                for (size_t i = 0; i < n && i < n2; i++) {
                    /* our score: probability for logistic (> 0.5 <=> margin > 0), margin otherwise */
                    double lab = kinds[k] == FSGD_LOSS_LOGISTIC ? (ours[i] > 0.5 ? 1 : -1) : (ours[i] > 0 ? 1 : -1);
                    label_diff += lab != theirs[i];
                    pos += lab > 0;
                    if (kinds[k] == FSGD_LOSS_LOGISTIC) {
                        double d = fabs(ours[i] - prob[i]);
                        worst = d > worst ? d : worst;
                    }
                }
                CU_ASSERT_EQUAL(label_diff, 0);
                CU_ASSERT_TRUE(pos > 0 && pos < n); /* both labels occur: the sign convention is tested */
                CU_ASSERT_TRUE(worst <= 1e-6);
            }
            if (label_diff || worst > 1e-6)
                fprintf(stderr, "\n  %s dim %llu: %zu label differences, worst value difference %g\n",
                        fsgd_loss_name(kinds[k]), (unsigned long long)m.dim, label_diff, worst);
            fsgd_model_free(&m);
        }
    free(ours);
    free(theirs);
    free(prob);
}

static void test_cli_errors(void)
{
    char out[4096], cmd[2048];
    const char *bin = fsgd_test_bin();
    FSGD_TEST_DATA(a9a_t, "a9a.t");
    snprintf(cmd, sizeof cmd, "%s predict --help", bin);
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 0);
    FSGD_ASSERT_CONTAINS(out, "usage: fsgd predict --model M --data F");
    snprintf(cmd, sizeof cmd, "%s export --help", bin);
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 0);
    FSGD_ASSERT_CONTAINS(out, "usage: fsgd export --model M --format liblinear --out FILE");
    snprintf(cmd, sizeof cmd, "%s predict --data x", bin);
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 2);
    FSGD_ASSERT_CONTAINS(out, "--model is required");
    snprintf(cmd, sizeof cmd, "%s export --model x --format onnx --out y", bin);
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 2);
    FSGD_ASSERT_CONTAINS(out, "unknown format 'onnx' (known: liblinear)");

    /* a truncated model file: the CLI passes the loader's message through */
    fsgd_model_t m;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_HINGE, 5, 0, 0), 0);
    m.w[1] = m.w[2] = 1;
    uint8_t *enc;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &enc, &len, err, sizeof err), 0);
    const char *mp = fsgd_test_tmp("cut.fsgd");
    fsgd_test_write_file(mp, enc, len - 11);
    snprintf(cmd, sizeof cmd, "%s predict --model %s --data %s", bin, mp, a9a_t);
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 3); /* bad input data */
    FSGD_ASSERT_CONTAINS(out, "cut.fsgd: truncated at byte 52 reading weight 1 of 2 (key) (file has 53 bytes)");
    snprintf(cmd, sizeof cmd, "%s export --model %s --format liblinear --out %s", bin, mp, fsgd_test_tmp("cut.txt"));
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 3);
    FSGD_ASSERT_CONTAINS(out, "cut.fsgd: truncated at byte 52");
    /* an output that cannot be written is refused before the model is read */
    snprintf(cmd, sizeof cmd, "%s export --model %s --format liblinear --out /dev/null/x", bin, mp);
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 2);
    FSGD_ASSERT_CONTAINS(out, "export: output '/dev/null/x'");
    /* --proba on a non-logistic model */
    fsgd_test_write_file(mp, enc, len);
    snprintf(cmd, sizeof cmd, "%s predict --model %s --data %s --proba", bin, mp, a9a_t);
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 2);
    FSGD_ASSERT_CONTAINS(out, "--proba needs a logistic model");
    free(enc);
    fsgd_model_free(&m);
}

/* fsgd predict's metrics equal fsgd_metrics_compute over the same margins. */
static void test_predict_metrics(void)
{
    FSGD_TEST_DATA(data, "a9a.t");
    fsgd_csr_t rows = {0};
    char err[512], cmd[2048];
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(data, NULL, &rows, NULL, err, sizeof err), 0);
    uint64_t s = fsgd_test_seed() ^ 0x5150;
    fsgd_model_t m;
    random_model(&m, FSGD_LOSS_LOGISTIC, 123, 1, 0.9, &s);
    double *mg = malloc(rows.n_rows * sizeof *mg);
    for (size_t r = 0; r < rows.n_rows; r++)
        mg[r] = fsgd_model_margin(&m, rows.col + rows.row_ptr[r], rows.val + rows.row_ptr[r],
                                  (size_t)(rows.row_ptr[r + 1] - rows.row_ptr[r]));
    fsgd_metrics_t want = fsgd_metrics_compute(m.kind, mg, rows.label, rows.n_rows);
    const char *mp = fsgd_test_tmp("pm.fsgd");
    CU_ASSERT_EQUAL_FATAL(fsgd_model_save(&m, mp, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "%s predict --model %s --data %s --out - >/dev/null", fsgd_test_bin(), mp, data);
    char out[4096], line[512];
    CU_ASSERT_EQUAL(fsgd_test_run(cmd, out, sizeof out), 0);
    snprintf(line, sizeof line, "%zu rows: auc %.6f logloss %.6f accuracy %.6f", rows.n_rows, want.auc,
             want.logloss, want.accuracy);
    FSGD_ASSERT_CONTAINS(out, line);
    free(mg);
    fsgd_model_free(&m);
    fsgd_csr_free(&rows);
}

/* Version 2: a model with an input spec records it after body_crc and reads
 * it back; without one the bytes are version 1's. */
static void test_input_section(void)
{
    fsgd_model_t m, back;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, 16, 1, 1.0f), 0);
    m.w[3] = 0.5f;
    m.w[16] = -0.25f;
    uint8_t *v1, *v2;
    size_t l1, l2;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &v1, &l1, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_le_get16(v1 + 8), 1);
    CU_ASSERT_EQUAL(l1, 48 + 8);
    const char *spec = "tsv:label,num*13,cat*26:header=0:bits=4:seed=0";
    snprintf(m.input, sizeof m.input, "%s", spec);
    CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &v2, &l2, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_le_get16(v2 + 8), 2);
    CU_ASSERT_EQUAL(v2[11], 3);
    CU_ASSERT_EQUAL(l2, 48 + 8 + 8 + strlen(spec));
    CU_ASSERT_EQUAL_FATAL(fsgd_model_load_mem(&back, v2, l2, "v2", 0, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(back.input, spec);
    CU_ASSERT_EQUAL(back.w[3], 0.5f);
    CU_ASSERT_EQUAL(back.w[16], -0.25f);
    fsgd_model_free(&back);
    /* a damaged spec byte fails the input CRC, a cut one is named */
    v2[l2 - 6] ^= 1;
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&back, v2, l2, "v2", 0, err, sizeof err), FSGD_E_CRC);
    FSGD_ASSERT_CONTAINS(err, "input checksum mismatch");
    v2[l2 - 6] ^= 1;
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&back, v2, l2 - 1, "v2", 0, err, sizeof err), FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, "reading input_crc");
    /* a version-1 file cannot carry the input flag */
    uint8_t bad[64];
    memcpy(bad, v1, l1);
    bad[11] |= 2;
    fsgd_le_put32(bad + 40, fsgd_crc32c(0, bad, 40));
    CU_ASSERT_EQUAL(fsgd_model_load_mem(&back, bad, l1, "v1", 0, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "reserved flag bits");
    free(v1);
    free(v2);
    fsgd_model_free(&m);
}

/* Version 4: an input spec that version-2/3 readers would misread (hashed
 * LIBSVM, VW, crosses) makes a version-4 file, read back; a plain tsv: spec
 * stays version 2; version 4 requires the input section. */
static void test_version4_inputs(void)
{
    fsgd_model_t m, back;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, 16, 1, 1.0f), 0);
    m.w[5] = 0.75f;
    const char *v4[] = {"libsvm:bits=4", "vw:bits=4", "tsv:label,cat*2:header=0:bits=4:seed=0:interactions=12"};
    for (int i = 0; i < 3; i++) {
        snprintf(m.input, sizeof m.input, "%s", v4[i]);
        uint8_t *b;
        size_t l;
        CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &b, &l, err, sizeof err), 0);
        CU_ASSERT_EQUAL(fsgd_le_get16(b + 8), 4);
        CU_ASSERT_EQUAL(b[11], 3);
        CU_ASSERT_EQUAL_FATAL(fsgd_model_load_mem(&back, b, l, "v4", 0, err, sizeof err), 0);
        CU_ASSERT_STRING_EQUAL(back.input, v4[i]);
        CU_ASSERT_EQUAL(back.w[5], 0.75f);
        fsgd_model_free(&back);
        if (i == 0) { /* without its input section a version-4 file is refused */
            b[11] &= (uint8_t)~2u;
            fsgd_le_put32(b + 40, fsgd_crc32c(0, b, 40));
            CU_ASSERT_EQUAL(fsgd_model_load_mem(&back, b, l, "v4", 0, err, sizeof err), FSGD_E_FORMAT);
            FSGD_ASSERT_CONTAINS(err, "version 4 without an input section");
        }
        free(b);
    }
    snprintf(m.input, sizeof m.input, "tsv:label,cat*2:header=0:bits=4:seed=0");
    uint8_t *b;
    size_t l;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &b, &l, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_le_get16(b + 8), 2);
    free(b);
    fsgd_model_free(&m);
}

/* A model with an FTRL state of 3 keys (one the intercept's, key dim). */
static void state_model(fsgd_model_t *m, int with_input)
{
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(m, FSGD_LOSS_LOGISTIC, 16, 1, 1.0f), 0);
    m->w[3] = 0.5f;
    m->w[16] = -0.25f;
    if (with_input)
        snprintf(m->input, sizeof m->input, "csv:label,cat*3:header=1:bits=4:seed=0");
    CU_ASSERT_EQUAL_FATAL(fsgd_model_state_alloc(m, FSGD_MODEL_STATE_FTRL, 3), 0);
    const uint32_t keys[3] = {3, 9, 16};
    const float z[3] = {-7.5f, 0.25f, 3.0f}, n[3] = {4.0f, 1.0f, 9.0f};
    for (int i = 0; i < 3; i++)
        m->state.keys[i] = keys[i], m->state.a[i] = z[i], m->state.b[i] = n[i];
}

/* Rewrites the state CRC of a version 3 buffer after an edit at byte off of
 * its state section (which starts at s0 and has n entries). */
static void fix_state_crc(uint8_t *b, size_t s0, uint64_t n)
{
    size_t end = s0 + 20 + 16 * (size_t)n;
    fsgd_le_put32(b + end, fsgd_crc32c(0, b + s0, end - s0));
}

/* Version 3: the optimizer state section after body_crc (and the input
 * section) round-trips; every damaged or cut byte of it is named; its value
 * rules hold for reader and writer. */
static void test_state_section(void)
{
    char err[512];
    for (int with_input = 0; with_input < 2; with_input++) {
        fsgd_model_t m, back;
        state_model(&m, with_input);
        uint8_t *enc;
        size_t len;
        CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &enc, &len, err, sizeof err), 0);
        const size_t s0 = 48 + 8 * 1 + (with_input ? 8 + strlen(m.input) : 0);
        CU_ASSERT_EQUAL(len, s0 + 20 + 16 * 3 + 4);
        CU_ASSERT_EQUAL(fsgd_le_get16(enc + 8), 3);
        CU_ASSERT_EQUAL(enc[11], 1 | (with_input ? 2 : 0) | 4);
        CU_ASSERT_EQUAL(enc[s0], FSGD_MODEL_STATE_FTRL);
        CU_ASSERT_EQUAL_FATAL(fsgd_model_load_mem(&back, enc, len, "v3", 0, err, sizeof err), 0);
        CU_ASSERT_EQUAL(back.state.kind, FSGD_MODEL_STATE_FTRL);
        CU_ASSERT_EQUAL_FATAL(back.state.n, 3);
        for (int i = 0; i < 3; i++) {
            CU_ASSERT_EQUAL(back.state.keys[i], m.state.keys[i]);
            CU_ASSERT_EQUAL(back.state.a[i], m.state.a[i]);
            CU_ASSERT_EQUAL(back.state.b[i], m.state.b[i]);
        }
        CU_ASSERT_STRING_EQUAL(back.input, m.input);
        CU_ASSERT_EQUAL(back.w[16], -0.25f);
        fsgd_model_free(&back);
        /* every flipped byte of the section fails its CRC; every cut names it */
        uint8_t *bad = malloc(len);
        for (size_t i = s0; i < len; i++) {
            memcpy(bad, enc, len);
            bad[i] ^= 0x10;
            int rc = fsgd_model_load_mem(&back, bad, len, "flip", 0, err, sizeof err);
            if (i >= s0 + 12 && i < s0 + 20) { /* state_n: more keys than dim, or bytes missing */
                CU_ASSERT_TRUE(rc == FSGD_E_FORMAT || rc == FSGD_E_TRUNCATED);
            } else {
                CU_ASSERT_EQUAL(rc, FSGD_E_CRC);
            }
            CU_ASSERT_PTR_NULL(back.w);
        }
        for (size_t cut = s0; cut < len; cut++) {
            int rc = fsgd_model_load_mem(&back, enc, cut, "cut", 0, err, sizeof err);
            CU_ASSERT_EQUAL(rc, FSGD_E_TRUNCATED);
            FSGD_ASSERT_CONTAINS(err, "state");
        }
        /* the rules, each with a correct CRC */
        struct {
            size_t off;
            uint32_t val;
            int width;
            const char *msg;
        } rules[] = {
            {0, 7, 1, "unknown state kind 7"},
            {1, 1, 1, "reserved state bytes"},
            {4, 5, 4, "ftrl state has none"},           /* step of an ftrl state */
            {12, 18, 4, "exceeds the 17 keys"},          /* n > dim + 1 */
            {20 + 16, 2, 4, "not above the previous key"}, /* second key 2 < 3 */
            {20 + 32, 17, 4, "key beyond dim"},           /* third key 17 > dim */
            {20 + 8, 0xBF800000u, 4, "negative"},         /* n = -1.0f */
            {20 + 4, 0x7F800000u, 4, "not finite"},       /* z = inf */
            {20 + 12, 1, 4, "count must be 0"},
        };
        for (size_t r = 0; r < sizeof rules / sizeof *rules; r++) {
            memcpy(bad, enc, len);
            if (rules[r].width == 1)
                bad[s0 + rules[r].off] = (uint8_t)rules[r].val;
            else
                fsgd_le_put32(bad + s0 + rules[r].off, rules[r].val);
            if (rules[r].off != 12)
                fix_state_crc(bad, s0, 3);
            expect_bad(bad, len, FSGD_E_FORMAT, rules[r].msg);
        }
        /* a version 3 file must carry the state flag; version 2 must not */
        memcpy(bad, enc, len);
        bad[11] &= (uint8_t)~4;
        fsgd_le_put32(bad + 40, fsgd_crc32c(0, bad, 40));
        expect_bad(bad, len, FSGD_E_FORMAT, "version 3 without a state section");
        memcpy(bad, enc, len);
        fsgd_le_put16(bad + 8, 2);
        bad[11] |= 2; /* v2 needs its input flag: then bit 2 is what is wrong */
        fsgd_le_put32(bad + 40, fsgd_crc32c(0, bad, 40));
        expect_bad(bad, len, FSGD_E_FORMAT, "reserved flag bits");
        free(bad);
        free(enc);
        /* the writer refuses what the reader would */
        m.state.keys[2] = 17;
        CU_ASSERT_EQUAL(fsgd_model_encode(&m, &enc, &len, err, sizeof err), FSGD_E_ARG);
        FSGD_ASSERT_CONTAINS(err, "state entry 2 (key 17)");
        m.state.keys[2] = 16;
        m.state.c[0] = 1;
        CU_ASSERT_EQUAL(fsgd_model_encode(&m, &enc, &len, err, sizeof err), FSGD_E_ARG);
        fsgd_model_free(&m);
    }
    /* Adam with counts: the count rule; and the writer's version */
    fsgd_model_t m, back;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_SQUARED, 4, 0, 0), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_model_state_alloc(&m, FSGD_MODEL_STATE_ADAM_COUNTED, 1), 0);
    m.state.step = 12345;
    m.state.keys[0] = 3, m.state.a[0] = -0.5f, m.state.b[0] = 0.25f, m.state.c[0] = 32767;
    uint8_t *enc;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_encode(&m, &enc, &len, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_model_load_mem(&back, enc, len, "adam", 0, err, sizeof err), 0);
    CU_ASSERT_EQUAL(back.state.step, 12345);
    CU_ASSERT_EQUAL(back.state.c[0], 32767);
    fsgd_model_free(&back);
    fsgd_le_put32(enc + 48 + 20 + 12, 32768); /* no weights: the state starts at byte 48 */
    fix_state_crc(enc, 48, 1);
    expect_bad(enc, len, FSGD_E_FORMAT, "count above 32767");
    free(enc);
    fsgd_model_free(&m);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t file[] = {
        {"version 2 records the input spec; version 1 without", test_input_section},
        {"version 4: hashed LIBSVM, VW and crossed inputs; plain specs stay version 2", test_version4_inputs},
        {"version 3: the optimizer state section, its damage and rules", test_state_section},
        {"round trip, all kinds, with and without intercept", test_round_trip},
        {"dim 2^32 and the max_dim limit", test_large_sparse_dim},
        {"every truncation length names the field and offset", test_every_truncation},
        {"every corrupted byte is rejected", test_every_byte_flip},
        {"wrong magic and version are named", test_magic_and_version},
        {"semantic checks name the entry and offset", test_semantic_checks},
        {"save: non-finite weights, atomic replace, bad path", test_save_errors_and_atomicity},
        {"margin ignores unknown columns, adds the intercept", test_margin},
        {NULL, NULL},
    };
    static const fsgd_test_case_t cli[] = {
        {"liblinear export text", test_export_text},
        {"export agrees with liblinear-predict on a9a.t", test_export_matches_liblinear_predict},
        {"predict and export errors and --help", test_cli_errors},
        {"predict prints the metrics of its scores", test_predict_metrics},
        {NULL, NULL},
    };
    fsgd_test_suite("model file", file);
    fsgd_test_suite("predict and export", cli);
}
