/* Compressed input (fsgd/zsource.h): gzip and zstd files, told by their
 * magic, read as the text they hold by every row reader; concatenated
 * members and frames read through; a corrupt or truncated stream is an
 * error naming the file and the byte offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/zsource.h"
#include "testlib.h"

/* Rows long enough that the compressed files span several of the
 * decoder's input reads when read in small pieces. */
static char *make_text(size_t rows, size_t *len)
{
    char *t = malloc(rows * 64);
    size_t n = 0;
    uint64_t s = 7;
    for (size_t r = 0; r < rows; r++)
        n += (size_t)sprintf(t + n, "%d 1:%u 7:%u %u:1\n", (int)(r & 1) * 2 - 1, (unsigned)(fsgd_test_rand(&s) % 9),
                             (unsigned)(r % 5), 10 + (unsigned)(fsgd_test_rand(&s) % 1000));
    *len = n;
    return t;
}

static size_t gzip_into(const char *src, size_t len, unsigned char *dst, size_t cap)
{
    z_stream zs = {0};
    CU_ASSERT_FATAL(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    zs.next_in = (unsigned char *)src;
    zs.avail_in = (uInt)len;
    zs.next_out = dst;
    zs.avail_out = (uInt)cap;
    CU_ASSERT_FATAL(deflate(&zs, Z_FINISH) == Z_STREAM_END);
    size_t n = zs.total_out;
    deflateEnd(&zs);
    return n;
}

/* The file: two gzip members (or two zstd frames) of the text's halves. */
static size_t compress_two(fsgd_zsource_codec_t codec, const char *text, size_t len, unsigned char *dst, size_t cap)
{
    size_t half = len / 2, n = 0;
    if (codec == FSGD_ZSOURCE_GZIP) {
        n = gzip_into(text, half, dst, cap);
        n += gzip_into(text + half, len - half, dst + n, cap - n);
    } else {
        n = ZSTD_compress(dst, cap, text, half, 3);
        CU_ASSERT_FATAL(!ZSTD_isError(n));
        size_t m = ZSTD_compress(dst + n, cap - n, text + half, len - half, 3);
        CU_ASSERT_FATAL(!ZSTD_isError(m));
        n += m;
    }
    return n;
}

static char *read_all(const char *path, size_t piece, size_t *len, int *rc, char *err, size_t errsz)
{
    fsgd_zsource_t *z = fsgd_zsource_open(path, err, errsz);
    CU_ASSERT_PTR_NOT_NULL_FATAL(z);
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    ssize_t got;
    *rc = 0;
    while ((got = fsgd_zsource_read(z, buf + n, n + piece <= cap ? piece : cap - n, err, errsz)) > 0) {
        n += (size_t)got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    if (got < 0) {
        *rc = (int)got;
        CU_ASSERT_EQUAL(fsgd_zsource_read(z, buf, piece, NULL, 0), got); /* the error stays */
    }
    fsgd_zsource_close(z);
    *len = n;
    return buf;
}

static void test_codecs_read_as_text(void)
{
    size_t len;
    char *text = make_text(20000, &len);
    size_t cap = len + 4096;
    unsigned char *z = malloc(cap);
    char err[512];
    const fsgd_zsource_codec_t codecs[] = {FSGD_ZSOURCE_PLAIN, FSGD_ZSOURCE_GZIP, FSGD_ZSOURCE_ZSTD};
    for (int c = 0; c < 3; c++) {
        const char *path = fsgd_test_tmp(c == 0 ? "text.svm" : c == 1 ? "text.svm.gz" : "text.svm.zst");
        size_t zn = c == 0 ? (memcpy(z, text, len), len) : compress_two(codecs[c], text, len, z, cap);
        fsgd_test_write_file(path, z, zn);
        fsgd_zsource_t *src = fsgd_zsource_open(path, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(src);
        CU_ASSERT_EQUAL(fsgd_zsource_codec(src), codecs[c]);
        fsgd_zsource_close(src);
        const size_t pieces[] = {1, 7, 65536};
        for (int p = 0; p < 3; p++) {
            int rc;
            size_t n;
            char *back = read_all(path, pieces[p], &n, &rc, err, sizeof err);
            CU_ASSERT_EQUAL(rc, 0);
            CU_ASSERT_EQUAL_FATAL(n, len);
            CU_ASSERT_EQUAL(memcmp(back, text, len), 0);
            free(back);
        }
        uint64_t tb = 1;
        CU_ASSERT_EQUAL(fsgd_zsource_check(path, &tb, err, sizeof err), 0);
        CU_ASSERT_EQUAL(tb, c == 0 ? 0 : len);
    }
    free(z);
    free(text);
}

/* The cut and the flipped bytes each fail with the file and an offset. */
static void test_corrupt_and_truncated_named(void)
{
    size_t len;
    char *text = make_text(20000, &len);
    size_t cap = len + 4096;
    unsigned char *z = malloc(cap);
    char err[512];
    for (int c = 1; c <= 2; c++) {
        size_t zn = compress_two(c, text, len, z, cap);
        const char *cut = fsgd_test_tmp(c == 1 ? "cut.gz" : "cut.zst");
        fsgd_test_write_file(cut, z, zn / 3);
        int rc;
        size_t n;
        free(read_all(cut, 4096, &n, &rc, err, sizeof err));
        CU_ASSERT_EQUAL(rc, FSGD_E_TRUNCATED);
        FSGD_ASSERT_CONTAINS(err, cut);
        FSGD_ASSERT_CONTAINS(err, c == 1 ? "truncated gzip stream" : "truncated zstd stream");
        char at[64];
        snprintf(at, sizeof at, "at byte %zu", zn / 3);
        FSGD_ASSERT_CONTAINS(err, at);
        CU_ASSERT_EQUAL(fsgd_zsource_check(cut, NULL, err, sizeof err), FSGD_E_TRUNCATED);

        const char *bad = fsgd_test_tmp(c == 1 ? "bad.gz" : "bad.zst");
        memset(z + zn / 4, 0xff, 16);
        fsgd_test_write_file(bad, z, zn);
        free(read_all(bad, 4096, &n, &rc, err, sizeof err));
        CU_ASSERT_EQUAL(rc, FSGD_E_FORMAT);
        FSGD_ASSERT_CONTAINS(err, bad);
        FSGD_ASSERT_CONTAINS(err, c == 1 ? "corrupt gzip stream at byte" : "corrupt zstd stream at byte");

        /* bytes after the last member are not silently dropped */
        if (c == 1) {
            zn = compress_two(c, text, len, z, cap);
            memcpy(z + zn, "junk", 4);
            const char *tail = fsgd_test_tmp("tail.gz");
            fsgd_test_write_file(tail, z, zn + 4);
            free(read_all(tail, 4096, &n, &rc, err, sizeof err));
            CU_ASSERT_EQUAL(rc, FSGD_E_FORMAT);
            FSGD_ASSERT_CONTAINS(err, "not a gzip member");
        }
    }
    free(z);
    free(text);
}

/* Every reader takes the compressed file as its text: the LIBSVM stream and
 * threaded loaders, the delimited loader, and the stdio stream (produce). */
static void test_readers_take_compressed(void)
{
    size_t len;
    char *text = make_text(5000, &len);
    size_t cap = len + 4096;
    unsigned char *z = malloc(cap);
    char err[512];
    const char *plain = fsgd_test_tmp("r.svm"), *gz = fsgd_test_tmp("r.svm.gz"), *zs = fsgd_test_tmp("r.svm.zst");
    fsgd_test_write_file(plain, text, len);
    fsgd_test_write_file(gz, z, compress_two(FSGD_ZSOURCE_GZIP, text, len, z, cap));
    fsgd_test_write_file(zs, z, compress_two(FSGD_ZSOURCE_ZSTD, text, len, z, cap));
    fsgd_csr_t want = {0};
    CU_ASSERT_EQUAL_FATAL(fsgd_libsvm_load(plain, NULL, &want, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(want.n_rows, 5000);
    const char *paths[] = {gz, zs};
    for (int i = 0; i < 2; i++) {
        fsgd_csr_t a = {0}, b = {0};
        CU_ASSERT_EQUAL(fsgd_libsvm_load(paths[i], NULL, &a, NULL, err, sizeof err), 0);
        fsgd_libsvm_opts_t o = {.read_buf = 4096}; /* many blocks */
        CU_ASSERT_EQUAL(fsgd_libsvm_load_threads(paths[i], &o, 3, &b, NULL, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(a.n_rows, want.n_rows);
        CU_ASSERT_EQUAL_FATAL(b.n_rows, want.n_rows);
        CU_ASSERT_EQUAL_FATAL(a.nnz, want.nnz);
        CU_ASSERT_EQUAL_FATAL(b.nnz, want.nnz);
        CU_ASSERT_EQUAL(memcmp(a.col, want.col, want.nnz * sizeof *want.col), 0);
        CU_ASSERT_EQUAL(memcmp(b.col, want.col, want.nnz * sizeof *want.col), 0);
        CU_ASSERT_EQUAL(memcmp(b.label, want.label, want.n_rows * sizeof *want.label), 0);
        fsgd_csr_free(&a);
        fsgd_csr_free(&b);

        FILE *f = fsgd_zsource_fopen(paths[i], err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        char *back = malloc(len + 1);
        CU_ASSERT_EQUAL(fread(back, 1, len + 1, f), len);
        CU_ASSERT_FALSE(ferror(f));
        CU_ASSERT_EQUAL(memcmp(back, text, len), 0);
        free(back);
        fclose(f);
    }
    fsgd_csr_free(&want);

    /* a truncated file fails each reader with the stream's error */
    size_t zn = compress_two(FSGD_ZSOURCE_GZIP, text, len, z, cap);
    const char *cut = fsgd_test_tmp("r.cut.gz");
    fsgd_test_write_file(cut, z, zn - 10);
    fsgd_csr_t m = {0};
    CU_ASSERT_EQUAL(fsgd_libsvm_load(cut, NULL, &m, NULL, err, sizeof err), FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, "truncated gzip stream");
    fsgd_csr_free(&m);
    fsgd_libsvm_opts_t o = {.read_buf = 4096};
    CU_ASSERT_EQUAL(fsgd_libsvm_load_threads(cut, &o, 3, &m, NULL, err, sizeof err), FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, cut);
    fsgd_csr_free(&m);
    FILE *f = fsgd_zsource_fopen(cut, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char *back = malloc(len + 1);
    CU_ASSERT(fread(back, 1, len + 1, f) <= len); /* the text may all come out before the cut trailer */
    CU_ASSERT_TRUE(ferror(f));
    CU_ASSERT_EQUAL(fsgd_zsource_file_error(err, sizeof err), FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, cut);
    free(back);
    fclose(f);

    /* delimited text, zstd */
    const char *tsv = "1\tab\tcd\n0\tef\tab\n";
    const char *tz = fsgd_test_tmp("rows.tsv.zst");
    size_t n = ZSTD_compress(z, cap, tsv, strlen(tsv), 1);
    fsgd_test_write_file(tz, z, n);
    fsgd_delim_spec_t s;
    CU_ASSERT_EQUAL_FATAL(fsgd_delim_spec_parse("tsv:label,cat,cat:bits=10", &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_delim_load(tz, &s, 0, &m, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(m.n_rows, 2);
    CU_ASSERT_EQUAL(m.nnz, 4);
    fsgd_csr_free(&m);
    fsgd_test_write_file(tz, z, n - 3);
    CU_ASSERT_EQUAL(fsgd_delim_load(tz, &s, 0, &m, NULL, err, sizeof err), FSGD_E_TRUNCATED);
    FSGD_ASSERT_CONTAINS(err, "truncated zstd stream");
    fsgd_csr_free(&m);
    free(z);
    free(text);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"plain, gzip (two members) and zstd (two frames) read as the same text in any piece size",
         test_codecs_read_as_text},
        {"corrupt, truncated and trailing-garbage streams name the file and byte offset",
         test_corrupt_and_truncated_named},
        {"libsvm, threaded libsvm, delimited and stdio readers take compressed files", test_readers_take_compressed},
        {NULL, NULL},
    };
    fsgd_test_suite("zsource", cases);
}
