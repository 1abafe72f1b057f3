/* Golden files of the efsign (id 5) and sketchml (id 6) codecs, format
 * version 1 (tests/golden/codec/v1/{efsign,sketchml}_*.bin): each .bin must
 * keep decoding to the "dec" lines of its .txt exactly, and the encoder must
 * keep producing the same bytes from the "in" lines. efsign's decode is also
 * checked against the definition (block means of |v| with signs).
 * FSGD_GOLDEN_WRITE=1 build/unit/test_codec_golden_sparsify regenerates the
 * files (and the fuzz seeds tests/fuzz/corpus/{efsign,sketchml}/golden_*);
 * only for a new case, never to paper over a change. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/codec.h"
#include "testlib.h"

#define GOLDEN_DIR "tests/golden/codec/v1"

typedef struct gcase {
    const char *name, *spec;
    uint64_t dim;
    size_t n;
} gcase_t;

static const gcase_t cases[] = {
    /* layout=ids: the default until the classes moved into the key order */
    {"efsign_default", "efsign:layout=ids", 5000, 300},
    {"efsign_block5", "efsign:block=5,classes=1", 1000, 23},
    {"efsign_classes8", "efsign:block=4,classes=8,layout=ids", 3000, 90},
    {"efsign_empty", "efsign:layout=ids", 100, 0},
    /* layout=keys, the default: one key block per class */
    {"efsign_keys", "efsign", 5000, 300},
    {"efsign_keys8", "efsign:block=4,classes=8", 3000, 90},
    {"efsign_keysempty", "efsign", 100, 0},
    {"sketchml_default", "sketchml", 2000000, 1500},
    {"sketchml_small", "sketchml:q=8,groups=2,rows=3,col_ratio=0.5", 1000, 40},
    {"sketchml_single", "sketchml", 50, 1},
};
#define NCASES (sizeof cases / sizeof *cases)

static void make_input(const gcase_t *gc, uint32_t *k, float *v)
{
    uint64_t s = 0x601D0000ull + gc->n;
    uint64_t key = fsgd_test_rand(&s) % 5;
    for (size_t i = 0; i < gc->n; i++) {
        k[i] = (uint32_t)key;
        uint64_t gap = gc->dim / (gc->n + 1) * 2;
        key += 1 + fsgd_test_rand(&s) % (gap > 1 ? gap : 1);
        if (key >= gc->dim)
            key = k[i] + 1;
        double mag = exp(-(double)(fsgd_test_rand(&s) % 1000) / 150.0);
        v[i] = (float)((fsgd_test_rand(&s) & 1) ? -mag : mag);
        if (i % 11 == 4)
            v[i] = 0;
    }
}

static void write_files(void)
{
    char err[256], path[512];
    for (size_t t = 0; t < NCASES; t++) {
        const gcase_t *gc = &cases[t];
        uint32_t *k = malloc((gc->n + 1) * 4);
        float *v = malloc((gc->n + 1) * 4);
        make_input(gc, k, v);
        fsgd_codec_t *c = fsgd_codec_new(gc->spec, gc->dim, err, sizeof err);
        size_t cap = fsgd_codec_bound(c, gc->n);
        uint8_t *buf = malloc(cap);
        fsgd_outbuf_t msg = {buf, cap, 0};
        fsgd_sparse_t out = {0};
        if (fsgd_codec_encode(c, k, v, gc->n, &msg, err, sizeof err) < 0 ||
            fsgd_codec_decode(buf, msg.len, gc->dim, &out, err, sizeof err) < 0) {
            fprintf(stderr, "golden %s: %s\n", gc->name, err);
            exit(1);
        }
        size_t len = msg.len;
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.bin", gc->name);
        fsgd_test_write_file(path, buf, len);
        snprintf(path, sizeof path, "tests/fuzz/corpus/%.*s/golden_%s", (int)strcspn(gc->name, "_"), gc->name,
                 gc->name);
        fsgd_test_write_file(path, buf, len);
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.txt", gc->name);
        FILE *f = fopen(path, "w");
        fprintf(f, "# fsgd codec golden file, format version 1 (see test_codec_golden_sparsify.c)\n");
        fprintf(f, "spec %s\ndim %llu\nbytes %zu\n", fsgd_codec_spec(c), (unsigned long long)gc->dim, len);
        for (size_t i = 0; i < gc->n; i++)
            fprintf(f, "in %u %a\n", k[i], (double)v[i]);
        for (size_t i = 0; i < out.n; i++)
            fprintf(f, "dec %u %a\n", out.keys[i], (double)out.vals[i]);
        fclose(f);
        fsgd_sparse_free(&out);
        fsgd_codec_destroy(c);
        free(buf);
        free(k);
        free(v);
    }
    printf("golden files written to " GOLDEN_DIR "\n");
}

static void test_golden(void)
{
    if (getenv("FSGD_GOLDEN_WRITE")) {
        write_files();
        return;
    }
    char err[256], path[512], line[256];
    for (size_t t = 0; t < NCASES; t++) {
        const gcase_t *gc = &cases[t];
        size_t len = 0;
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.bin", gc->name);
        uint8_t *bin = fsgd_test_read_file(path, &len);
        CU_ASSERT_FATAL(bin != NULL);
        snprintf(path, sizeof path, GOLDEN_DIR "/%s.txt", gc->name);
        FILE *f = fopen(path, "r");
        CU_ASSERT_FATAL(f != NULL);
        char spec[192] = "";
        unsigned long long dim = 0;
        uint32_t *ik = malloc((gc->n + 1) * 4), *dk = malloc((gc->n + 1) * 4);
        float *iv = malloc((gc->n + 1) * 4), *dv = malloc((gc->n + 1) * 4);
        size_t ni = 0, nd = 0;
        while (fgets(line, sizeof line, f)) {
            unsigned key;
            double val;
            if (sscanf(line, "spec %191s", spec) == 1 || sscanf(line, "dim %llu", &dim) == 1)
                continue;
            if (sscanf(line, "in %u %la", &key, &val) == 2 && ni < gc->n) {
                ik[ni] = key;
                iv[ni++] = (float)val;
            } else if (sscanf(line, "dec %u %la", &key, &val) == 2 && nd < gc->n) {
                dk[nd] = key;
                dv[nd++] = (float)val;
            }
        }
        fclose(f);
        fsgd_sparse_t out = {0};
        CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(bin, len, dim, &out, err, sizeof err), 0);
        CU_ASSERT_EQUAL(out.n, nd);
        for (size_t i = 0; i < out.n && i < nd; i++)
            CU_ASSERT(out.keys[i] == dk[i] && out.vals[i] == dv[i]);
        /* the encoder still writes the same bytes */
        fsgd_codec_t *c = fsgd_codec_new(spec, dim, err, sizeof err);
        CU_ASSERT_FATAL(c != NULL);
        size_t cap = fsgd_codec_bound(c, ni), l2 = 0;
        uint8_t *re = malloc(cap);
        fsgd_outbuf_t ob2 = {re, cap, 0};
        CU_ASSERT_EQUAL(fsgd_codec_encode(c, ik, iv, ni, &ob2, err, sizeof err), 0);
        l2 = ob2.len;
        CU_ASSERT(l2 == len && !memcmp(re, bin, len));
        if (strstr(spec, "efsign") && strstr(spec, "classes=1,")) { /* the definition, key-order blocks */
            size_t B = strstr(spec, "block=") ? (size_t)atoi(strstr(spec, "block=") + 6) : 128, j = 0;
            for (size_t b0 = 0; b0 < nd; b0 += B) {
                double l1 = 0;
                size_t cnt = 0, j0 = j;
                for (; j < ni && cnt < B; j++)
                    if (iv[j] != 0) {
                        l1 += fabs(iv[j]);
                        cnt++;
                    }
                for (size_t q = j0, d = b0; q < j; q++)
                    if (iv[q] != 0) {
                        CU_ASSERT(dk[d] == ik[q] && dv[d] == (float)((iv[q] < 0 ? -1 : 1) * (float)(l1 / (double)cnt)));
                        d++;
                    }
            }
        }
        free(re);
        fsgd_codec_destroy(c);
        fsgd_sparse_free(&out);
        free(bin);
        free(ik);
        free(iv);
        free(dk);
        free(dv);
    }
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t tc[] = {
        {"efsign and sketchml golden files of version 1 still decode, encoders unchanged", test_golden},
        {NULL, NULL},
    };
    fsgd_test_suite("codec golden (efsign, sketchml)", tc);
}
