/* What keeps fsgd train's memory down without changing its model: binary
 * batches (fsgd/csr.h: no values where every value is 1), LIBSVM rows
 * loaded that way, the step batches in a temporary file
 * (trainer/core/train_spill.h) and early stopping's best weights in one
 * (train_best.h). Each is checked against the layout it replaces: the same
 * rows, the same gradients, the same model byte for byte. */
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_best.h"
#include "train_pages.h"
#include "train_spill.h"
#include "fsgd/backend.h"
#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/sparse.h"
#include "fsgd/job.h"
#include "fsgd/train.h"
#include "testlib.h"

/* rows random binary rows over dim columns (some empty), labels ±1. */
static void binary_rows(fsgd_csr_t *m, size_t rows, uint32_t dim, uint64_t *rng)
{
    uint32_t col[64];
    float one[64];
    for (size_t i = 0; i < 64; i++)
        one[i] = 1.0f;
    for (size_t r = 0; r < rows; r++) {
        size_t n = 0;
        for (uint32_t c = (uint32_t)(fsgd_test_rand(rng) % 9); c < dim && n < 64;
             c += 1 + (uint32_t)(fsgd_test_rand(rng) % 9))
            col[n++] = c;
        double y = (col[0] % 3 == 0) != (fsgd_test_rand(rng) % 10 == 0) ? 1 : -1;
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(m, y, col, one, n), 0);
    }
}

/* The same rows (max_col aside: a shrunk batch keeps its old one). */
static void same_rows(const fsgd_csr_t *a, const fsgd_csr_t *b)
{
    CU_ASSERT_EQUAL_FATAL(a->n_rows, b->n_rows);
    CU_ASSERT_EQUAL_FATAL(a->nnz, b->nnz);
    CU_ASSERT_EQUAL(memcmp(a->row_ptr, b->row_ptr, (a->n_rows + 1) * sizeof *a->row_ptr), 0);
    CU_ASSERT_EQUAL(memcmp(a->label, b->label, a->n_rows * sizeof *a->label), 0);
    CU_ASSERT_EQUAL(memcmp(a->col, b->col, a->nnz * sizeof *a->col), 0);
    for (size_t i = 0; i < a->nnz; i++) {
        float va = a->val ? a->val[i] : 1.0f, vb = b->val ? b->val[i] : 1.0f;
        if (va != vb) {
            CU_FAIL("values differ");
            fprintf(stderr, "\n  value %zu: %g against %g\n", i, (double)va, (double)vb);
            return;
        }
    }
}

/* A binary batch stays one through reserve and appends of binary rows;
 * a value other than 1 gives it values, 1 for those before; a binary
 * source appended to a batch with values reads as ones. */
static void test_csr_binary(void)
{
    uint64_t rng = fsgd_test_seed();
    fsgd_csr_t src = {0}, bin, valued = {0};
    binary_rows(&src, 300, 500, &rng);
    CU_ASSERT_TRUE(fsgd_csr_all_ones(&src));
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_init_binary(&bin, 0, 0), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&bin, &src, 0, 100), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&bin, &src, 100, 200), 0); /* grows */
    CU_ASSERT_PTR_NULL(bin.val);
    CU_ASSERT_TRUE(fsgd_csr_all_ones(&bin));
    same_rows(&bin, &src);
    CU_ASSERT_EQUAL(bin.max_col, src.max_col);
    /* binary into valued: ones */
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&valued, &bin, 0, bin.n_rows), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(valued.val);
    same_rows(&valued, &src);
    /* a row with a 0.5 turns bin into a batch with values */
    uint32_t c[2] = {3, 7};
    float v[2] = {1.0f, 0.5f};
    fsgd_csr_t odd = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&odd, 1, c, v, 2), 0);
    CU_ASSERT_FALSE(fsgd_csr_all_ones(&odd));
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&bin, &odd, 0, 1), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bin.val);
    CU_ASSERT_EQUAL(bin.n_rows, 301);
    CU_ASSERT_EQUAL(bin.val[src.nnz - 1], 1.0f);
    /* Σ|x|: a binary batch's nnz, then with the row of 1 and 0.5 */
    CU_ASSERT_DOUBLE_EQUAL(fsgd_csr_abs_sum(&src), (double)src.nnz, 0);
    CU_ASSERT_DOUBLE_EQUAL(fsgd_csr_abs_sum(&bin), (double)src.nnz + 1.5, 0);
    CU_ASSERT_EQUAL(bin.val[src.nnz], 1.0f);
    CU_ASSERT_EQUAL(bin.val[src.nnz + 1], 0.5f);
    CU_ASSERT_EQUAL(bin.col[src.nnz + 1], 7);
    fsgd_csr_free(&src);
    fsgd_csr_free(&bin);
    fsgd_csr_free(&valued);
    fsgd_csr_free(&odd);
}

/* load_threads with binary: a binary file is loaded without values, the
 * same rows as the plain load; a file with another value gets values, as
 * the plain load has them. Small read blocks: many regions appended. */
static void test_libsvm_binary_load(void)
{
    const char *bin_path = fsgd_test_tmp("bin.svm"), *mixed_path = fsgd_test_tmp("mixed.svm");
    char text[64 * 1024];
    size_t len = 0;
    uint64_t rng = 11;
    for (int r = 0; r < 1000; r++) {
        len += (size_t)snprintf(text + len, sizeof text - len, "%s", r % 3 ? "+1" : "-1");
        for (unsigned c = 1 + (unsigned)(fsgd_test_rand(&rng) % 5); c < 400; c += 1 + (unsigned)(fsgd_test_rand(&rng) % 90))
            len += (size_t)snprintf(text + len, sizeof text - len, " %u:1", c);
        len += (size_t)snprintf(text + len, sizeof text - len, "\n");
    }
    CU_ASSERT_TRUE_FATAL(len < sizeof text - 64);
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(bin_path, text, len), 0);
    /* the same with one 2.5 in the middle of the file */
    char *mid = strstr(text + len / 2, ":1");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mid);
    char mixed[sizeof text + 8];
    size_t at = (size_t)(mid - text) + 1;
    memcpy(mixed, text, at);
    memcpy(mixed + at, "2.5", 3);
    memcpy(mixed + at + 3, text + at + 1, len - at - 1);
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(mixed_path, mixed, len + 2), 0);
    const char *paths[2] = {bin_path, mixed_path};
    /* parts whose values are all 1 are copied by threads, columns only; a
     * block with a part holding the 2.5 goes through the one-thread append
     * (on 3 and 5 threads, the 2.5 is in a later part than the first) */
    for (int run = 0; run < 6; run++) {
        int f = run % 2, threads = run < 2 ? 2 : run < 4 ? 3 : 5;
        fsgd_libsvm_opts_t plain = {.read_buf = 4096}, bin = {.read_buf = 4096, .binary = 1};
        fsgd_csr_t a = {0}, b = {0};
        char err[512];
        CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(paths[f], &plain, &a, NULL, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load_threads(paths[f], &bin, threads, &b, NULL, err, sizeof err), 0);
        CU_ASSERT_EQUAL(a.n_rows, 1000);
        CU_ASSERT_PTR_NOT_NULL(a.val);
        if (f == 0)
            CU_ASSERT_PTR_NULL(b.val);
        if (f == 1)
            CU_ASSERT_PTR_NOT_NULL(b.val);
        same_rows(&a, &b);
        fsgd_csr_free(&a);
        fsgd_csr_free(&b);
    }
}

/* The cpu backend's gradient of a binary batch is the gradient of the same
 * batch with every value 1 written out, bit for bit, on both of its
 * accumulators (a small model: dense; 2^22 keys: the hash table). */
static void test_cpu_binary_gradient(void)
{
    uint64_t rng = fsgd_test_seed();
    const uint64_t dims[2] = {600, 1u << 22};
    for (int d = 0; d < 2; d++) {
        fsgd_csr_t valued = {0}, bin;
        binary_rows(&valued, 200, 500, &rng);
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_init_binary(&bin, 0, 0), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&bin, &valued, 0, valued.n_rows), 0);
        CU_ASSERT_PTR_NULL_FATAL(bin.val);
        float *theta = malloc(dims[d] * sizeof *theta);
        CU_ASSERT_PTR_NOT_NULL_FATAL(theta);
        for (uint64_t k = 0; k < dims[d]; k++)
            theta[k] = (float)((double)(fsgd_test_rand(&rng) % 2001) / 1000.0 - 1.0);
        char err[256];
        fsgd_backend_t *be = fsgd_backend_new("cpu", dims[d], theta, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(be);
        const fsgd_loss_kind_t losses[3] = {FSGD_LOSS_LOGISTIC, FSGD_LOSS_SQUARED, FSGD_LOSS_HINGE};
        for (int l = 0; l < 3; l++) {
            fsgd_sparse_t ga = {0}, gb = {0};
            double la = 0, lb = 0;
            fsgd_grad_request_t req = {.batch = &valued, .batch_id = -1, .loss = losses[l], .scale = 0.01, .l2 = 1e-3};
            CU_ASSERT_EQUAL_FATAL(fsgd_backend_gradient(be, &req, &ga, &la, err, sizeof err), 0);
            req.batch = &bin;
            CU_ASSERT_EQUAL_FATAL(fsgd_backend_gradient(be, &req, &gb, &lb, err, sizeof err), 0);
            CU_ASSERT_EQUAL_FATAL(ga.n, gb.n);
            CU_ASSERT_TRUE(ga.n > 100);
            CU_ASSERT_EQUAL(memcmp(ga.keys, gb.keys, ga.n * sizeof *ga.keys), 0);
            CU_ASSERT_EQUAL(memcmp(ga.vals, gb.vals, ga.n * sizeof *ga.vals), 0);
            CU_ASSERT_EQUAL(memcmp(&la, &lb, sizeof la), 0);
            fsgd_sparse_free(&ga);
            fsgd_sparse_free(&gb);
        }
        fsgd_backend_destroy(be);
        free(theta);
        fsgd_csr_free(&valued);
        fsgd_csr_free(&bin);
    }
}

/* Slices put in the spill file come back as they were, binary or not,
 * and the slice entries keep their sizes only; without a temporary
 * directory every slice stays in memory and get hands it back as it is. */
static void test_spill_roundtrip(void)
{
    uint64_t rng = fsgd_test_seed();
    for (int binary = 0; binary < 2; binary++) {
        fsgd_csr_t orig[3] = {{0}}, kept[3] = {{0}};
        for (int i = 0; i < 3; i++) {
            CU_ASSERT_EQUAL_FATAL(fsgd_csr_reserve(&orig[i], 0, 0), 0);
            binary_rows(&orig[i], (size_t)(i * 40), 300, &rng); /* slice 0: no rows */
            CU_ASSERT_EQUAL_FATAL(binary ? fsgd_csr_init_binary(&kept[i], 0, 0) : fsgd_csr_reserve(&kept[i], 0, 0), 0);
            CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&kept[i], &orig[i], 0, orig[i].n_rows), 0);
        }
        fsgd_spill_t s;
        CU_ASSERT_EQUAL_FATAL(fsgd_spill_open(&s, 3, binary), 0);
        CU_ASSERT_TRUE_FATAL(s.file);
        for (int i = 2; i >= 0; i--)
            fsgd_spill_put(&s, (size_t)i, &kept[i]);
        for (int i = 0; i < 3; i++) {
            CU_ASSERT_PTR_NULL(kept[i].col);
            CU_ASSERT_EQUAL(kept[i].n_rows, orig[i].n_rows);
        }
        fsgd_csr_t buf = {0};
        char err[256];
        for (int pass = 0; pass < 2; pass++) /* each slice twice, into the one buffer */
            for (int i = 0; i < 3; i++) {
                const fsgd_csr_t *got;
                CU_ASSERT_EQUAL_FATAL(fsgd_spill_get(&s, (size_t)i, &kept[i], &buf, &got, err, sizeof err), 0);
                CU_ASSERT_PTR_EQUAL(got, &buf);
                CU_ASSERT_EQUAL(got->val == NULL, binary);
                same_rows(got, &orig[i]);
            }
        fsgd_spill_close(&s);
        fsgd_csr_free(&buf);
        for (int i = 0; i < 3; i++) {
            fsgd_csr_free(&orig[i]);
            fsgd_csr_free(&kept[i]);
        }
    }
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", fsgd_test_tmp("no/such/dir"), 1);
    fsgd_csr_t one = {0};
    binary_rows(&one, 10, 50, &rng);
    fsgd_spill_t s;
    CU_ASSERT_EQUAL_FATAL(fsgd_spill_open(&s, 1, 0), 0);
    CU_ASSERT_FALSE(s.file);
    fsgd_spill_put(&s, 0, &one);
    CU_ASSERT_PTR_NOT_NULL(one.col);
    const fsgd_csr_t *got;
    char err[256];
    CU_ASSERT_EQUAL(fsgd_spill_get(&s, 0, &one, NULL, &got, err, sizeof err), 0);
    CU_ASSERT_PTR_EQUAL(got, &one);
    fsgd_spill_close(&s);
    fsgd_csr_free(&one);
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
}

/* The best weights come back as last saved, from the file or, without a
 * temporary directory, from memory; none saved is an error. */
static void test_best_store(void)
{
    const size_t n = 100000;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *out = malloc(n * sizeof *out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a && b && out ? a : NULL);
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = -(float)i;
    }
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    for (int no_dir = 0; no_dir < 2; no_dir++) {
        if (no_dir)
            setenv("TMPDIR", fsgd_test_tmp("no/such/dir"), 1);
        fsgd_best_t best;
        char err[256];
        CU_ASSERT_EQUAL_FATAL(fsgd_best_open(&best, n), 0);
        CU_ASSERT_EQUAL(best.file, !no_dir);
        CU_ASSERT_EQUAL(fsgd_best_load(&best, out, err, sizeof err), FSGD_E_ARG);
        CU_ASSERT_EQUAL_FATAL(fsgd_best_save(&best, a), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_best_save(&best, b), 0);
        CU_ASSERT_EQUAL_FATAL(fsgd_best_load(&best, out, err, sizeof err), 0);
        CU_ASSERT_EQUAL(memcmp(out, b, n * sizeof *out), 0);
        fsgd_best_close(&best);
        fsgd_best_close(&best); /* closed: a no-op */
    }
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
    free(a);
    free(b);
    free(out);
}

/* Early stopping's looks (fsgd_early_look) on the holdout losses of
 * tests/bench/vw_compare.sh's planted set, linear (4 looks an epoch,
 * patience 4): the weights kept are those of the lowest loss seen (epoch
 * 2.0's 0.593805, below epoch 1.5's 0.593828 by less than 1e-4), while
 * the stop still waits for a loss 1e-4 lower than 1.5's: it stops at 2.5. */
static void test_early_keeps_lowest(void)
{
    static const double loss[] = {0.613580, 0.600687, 0.596767, 0.594609, 0.594276,
                                  0.593828, 0.594824, 0.593805, 0.595834, 0.594813, 0.5};
    fsgd_early_t e = {.best_loss = INFINITY, .kept_loss = INFINITY, .patience = 4};
    fsgd_best_t best;
    fsgd_train_stats_t st;
    memset(&st, 0, sizeof st);
    char err[256];
    float w[1];
    CU_ASSERT_EQUAL_FATAL(fsgd_best_open(&best, 1), 0);
    int looks = 0;
    for (size_t i = 0; i < sizeof loss / sizeof *loss && !e.stop; i++, looks++) {
        w[0] = (float)i;
        CU_ASSERT_EQUAL(fsgd_early_look(&e, &best, w, loss[i], 0.25 * (double)(i + 1), &st, err, sizeof err), 0);
    }
    CU_ASSERT_EQUAL(looks, 10); /* stopped at 2.5 epochs, as with the threshold alone */
    CU_ASSERT_DOUBLE_EQUAL(st.best_epoch, 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st.holdout_loss, 0.593805, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(e.best_loss, 0.593828, 1e-12); /* the patience's reference */
    CU_ASSERT_EQUAL_FATAL(fsgd_best_load(&best, w, err, sizeof err), 0);
    CU_ASSERT_EQUAL(w[0], 7.0f); /* the eighth look's weights */
    /* a NaN look is never kept and never restarts the patience */
    fsgd_early_t n = {.best_loss = INFINITY, .kept_loss = INFINITY, .patience = 2};
    CU_ASSERT_EQUAL(fsgd_early_look(&n, &best, w, NAN, 0.25, &st, err, sizeof err), 0);
    CU_ASSERT_EQUAL(n.kept_loss, INFINITY);
    CU_ASSERT_EQUAL(fsgd_early_look(&n, &best, w, NAN, 0.5, &st, err, sizeof err), 0);
    CU_ASSERT_EQUAL(n.stop, 1);
    fsgd_best_close(&best);
}

static void train_job(fsgd_job_t *job)
{
    fsgd_job_train_defaults(job);
    job->train.quiet = 1;
    job->train.threads = 2;
}

/* a9a is binary: the defaults (early stopping, its best weights in a
 * file) train from binary batches, in memory and spilled to a file, the
 * model the same rows train with their values written out. Those carry one
 * more nonzero of value 0 in a column of no other row (not binary any
 * more): it adds exactly 0 to every sum, and that column's weight stays 0. */
static void test_same_model_a9a(void)
{
    FSGD_TEST_DATA(path, "a9a");
    fsgd_csr_t data = {0}, zero = {0};
    char err[512];
    fsgd_libsvm_opts_t bin = {.binary = 1};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load_threads(path, &bin, 2, &data, NULL, err, sizeof err), 0);
    CU_ASSERT_PTR_NULL_FATAL(data.val); /* a9a's values are all 1 */
    const uint64_t dim = data.max_col + 1, extra = data.max_col;
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&zero, &data, 0, data.n_rows), 0);
    /* row 0 gets (extra, 0) at its end: rebuild it */
    fsgd_csr_t valued = {0};
    for (size_t r = 0; r < zero.n_rows; r++) {
        uint32_t col[256];
        float val[256];
        size_t lo = (size_t)zero.row_ptr[r], n = (size_t)(zero.row_ptr[r + 1] - lo);
        CU_ASSERT_TRUE_FATAL(n < 255);
        memcpy(col, zero.col + lo, n * sizeof *col);
        memcpy(val, zero.val + lo, n * sizeof *val);
        if (r == 0) {
            col[n] = (uint32_t)extra;
            val[n++] = 0.0f;
        }
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_row(&valued, zero.label[r], col, val, n), 0);
    }
    CU_ASSERT_FALSE(fsgd_csr_all_ones(&valued));
    fsgd_job_t job;
    train_job(&job);
    fsgd_model_t ref = {0}, mem = {0}, spilled = {0};
    fsgd_train_stats_t sr, sm, ss;
    setenv("FSGD_SPILL_MB", "-1", 1);
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job.train, &(fsgd_train_input_t){.rows = &valued, .dim = dim}, NULL,
                                     &ref, &sr, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job.train, &(fsgd_train_input_t){.rows = &data, .dim = dim}, NULL, &mem,
                                     &sm, NULL, err, sizeof err), 0);
    setenv("FSGD_SPILL_MB", "0", 1);
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job.train, &(fsgd_train_input_t){.rows = &data, .dim = dim}, NULL,
                                     &spilled, &ss, NULL, err, sizeof err), 0);
    unsetenv("FSGD_SPILL_MB");
    CU_ASSERT_TRUE(sr.holdout_rows > 0); /* early stopping ran: the best weights came back */
    CU_ASSERT_TRUE(sr.steps > 0);
    CU_ASSERT_EQUAL(sr.steps, sm.steps);
    CU_ASSERT_EQUAL(sr.steps, ss.steps);
    CU_ASSERT_EQUAL(ref.w[extra], 0.0f);
    CU_ASSERT_EQUAL(memcmp(ref.w, mem.w, (dim + 1) * sizeof *ref.w), 0);
    CU_ASSERT_EQUAL(memcmp(ref.w, spilled.w, (dim + 1) * sizeof *ref.w), 0);
    fsgd_model_free(&ref);
    fsgd_model_free(&mem);
    fsgd_model_free(&spilled);
    fsgd_csr_free(&data);
    fsgd_csr_free(&zero);
    fsgd_csr_free(&valued);
}

/* Spilled batches with 3 step threads and the shrinking entry point, on
 * binary rows loaded without values: the model of the same job with the
 * batches in memory, and the kept head of the rows as loaded. */
static void test_spill_threads_shrinking(void)
{
    uint64_t rng = fsgd_test_seed();
    fsgd_csr_t a = {0}, b, head = {0};
    binary_rows(&a, 30000, 2000, &rng);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_init_binary(&b, 0, 0), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&b, &a, 0, a.n_rows), 0);
    CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&head, &a, 0, 100), 0);
    fsgd_job_t job;
    train_job(&job);
    job.train.threads = 3;
    job.train.batch = 6000; /* ~100k nonzeros a step: 3 step threads */
    fsgd_model_t ma = {0}, mb = {0};
    fsgd_train_stats_t sa, sb;
    char err[512];
    setenv("FSGD_SPILL_MB", "-1", 1);
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job.train, &(fsgd_train_input_t){.rows = &a, .dim = 2000}, NULL, &ma,
                                     &sa, NULL, err, sizeof err), 0);
    setenv("FSGD_SPILL_MB", "0", 1);
    CU_ASSERT_EQUAL_FATAL(
        fsgd_train(&job.train, &(fsgd_train_input_t){.source = FSGD_TRAIN_ROWS_OWNED, .owned_rows = &b, .keep_rows = 100,
                                               .dim = 2000}, NULL, &mb, &sb, NULL, err, sizeof err), 0);
    unsetenv("FSGD_SPILL_MB");
    CU_ASSERT_EQUAL(sa.threads_used, 3);
    CU_ASSERT_EQUAL(sb.threads_used, 3);
    CU_ASSERT_EQUAL(memcmp(ma.w, mb.w, 2001 * sizeof *ma.w), 0);
    same_rows(&b, &head);
    fsgd_model_free(&ma);
    fsgd_model_free(&mb);
    fsgd_csr_free(&a);
    fsgd_csr_free(&b);
    fsgd_csr_free(&head);
}

/* Resident pages of this process (/proc/self/statm), or -1. */
static long resident_pages(void)
{
    long size = -1, res = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = -1;
        fclose(f);
    }
    return res;
}

typedef struct pages_writer {
    unsigned char *p;
    size_t bytes;
} pages_writer_t;

/* Writes a pattern every 4097 bytes: pages being mapped by the helper
 * meanwhile must keep every byte written. */
static void *write_pattern(void *arg)
{
    pages_writer_t *w = arg;
    for (size_t i = 0; i < w->bytes; i += 4097)
        w->p[i] = (unsigned char)(1 + i % 251);
    return NULL;
}

/* The page mapper: the pages are resident after it (RSS grows by the
 * array), and not one byte changes, even with another thread writing to
 * the array while it maps. */
static void test_pages_map(void)
{
    const size_t bytes = (size_t)64 << 20;
    unsigned char *p = calloc(bytes, 1); /* this size: fresh pages, not yet mapped */
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    p[12345] = 7;
    long before = resident_pages();
    fsgd_pages_t m;
    fsgd_pages_start(&m, p + bytes / 2, bytes / 2);
    pages_writer_t w = {.p = p, .bytes = bytes};
    pthread_t tid;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tid, NULL, write_pattern, &w), 0);
    int here = fsgd_pages_map(p, bytes / 2);
    pthread_join(tid, NULL);
    fsgd_pages_join(&m);
    CU_ASSERT_FALSE(m.running);
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; i++) {
        unsigned char want = i % 4097 == 0 ? (unsigned char)(1 + i % 251) : i == 12345 ? 7 : 0;
        wrong += p[i] != want;
    }
    CU_ASSERT_EQUAL(wrong, 0);
    if (!here || !m.mapped) {
        free(p);
        fsgd_test_skip("no MADV_POPULATE_WRITE here (Linux < 5.14): the pages fault at first use");
        return;
    }
    long after = resident_pages();
    long page = sysconf(_SC_PAGESIZE);
    if (before >= 0 && after >= 0)
        CU_ASSERT_TRUE((after - before) * page >= (long)(bytes - (bytes >> 4))); /* all but a few pages */
    fsgd_pages_join(&m); /* joined: a no-op */
    free(p);
}

/* fsgd train on two threads maps θ and the key state on helpers (one step
 * thread still: the steps are small), and the model's weights take θ's
 * memory where --save-state does not keep it: the model of one thread and
 * of --save-state, byte for byte. */
static void test_pages_same_model(void)
{
    uint64_t rng = 7;
    fsgd_csr_t a = {0};
    binary_rows(&a, 20000, 3000, &rng);
    fsgd_job_t job;
    train_job(&job);
    job.train.batch = 64; /* ~4k nonzeros a step: one step thread (FSGD_TRAIN_MIN_NNZ_PER_THREAD) */
    fsgd_model_t one = {0}, two = {0}, kept = {0};
    fsgd_train_stats_t s1, s2, s3;
    char err[512];
    job.train.threads = 1;
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job.train, &(fsgd_train_input_t){.rows = &a, .dim = 3000}, NULL, &one,
                                     &s1, NULL, err, sizeof err), 0);
    job.train.threads = 2;
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job.train, &(fsgd_train_input_t){.rows = &a, .dim = 3000}, NULL, &two,
                                     &s2, NULL, err, sizeof err), 0);
    job.train.save_state = 1;
    CU_ASSERT_EQUAL_FATAL(fsgd_train(&job.train, &(fsgd_train_input_t){.rows = &a, .dim = 3000}, NULL, &kept,
                                     &s3, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(s2.threads_used, 1);
    CU_ASSERT_TRUE(s1.holdout_rows > 0); /* the best weights were read back into θ's memory */
    CU_ASSERT_TRUE(s1.steps > 0);
    CU_ASSERT_EQUAL(s1.steps, s2.steps);
    CU_ASSERT_EQUAL(memcmp(one.w, two.w, 3001 * sizeof *one.w), 0);
    CU_ASSERT_EQUAL(memcmp(one.w, kept.w, 3001 * sizeof *one.w), 0);
    fsgd_model_free(&one);
    fsgd_model_free(&two);
    fsgd_model_free(&kept);
    fsgd_csr_free(&a);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"binary batches: reserve, appends, values when one is not 1", test_csr_binary},
        {"libsvm threads binary: no values for 0/1 data, the same rows", test_libsvm_binary_load},
        {"cpu backend: binary batch gradient = all-ones batch, both accumulators", test_cpu_binary_gradient},
        {"spill file: slices back as put, in memory without a tmp dir", test_spill_roundtrip},
        {"best weights: file or memory, the last saved", test_best_store},
        {"early stopping keeps the lowest loss's weights, stops on a 1e-4 better one", test_early_keeps_lowest},
        {"a9a: binary, in memory and spilled, the model of the valued rows", test_same_model_a9a},
        {"spilled, 3 threads, shrinking: the in-memory model and head", test_spill_threads_shrinking},
        {"page mapper: resident after, no byte changed, with a writer", test_pages_map},
        {"pages mapped on helpers, θ adopted: the same model", test_pages_same_model},
        {NULL, NULL},
    };
    fsgd_test_suite("train_memory", cases);
}
