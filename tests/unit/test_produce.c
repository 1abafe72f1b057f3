/* fsgd_produce_file on the in-memory bus: NAME.data holds exactly the
 * messages of the plain one-line-at-a-time producer (same row blocks, same
 * order, same partitions, same data summary), whatever the chunks the file
 * is read and parsed in on the producer's threads (FSGD_PRODUCE_CHUNK_KB: a
 * chunk of 1 KiB cuts blocks and lines across many of them, one of 64 KiB
 * is shorter than the wide rows' lines), and parsed on the sending thread
 * alone (FSGD_PRODUCE_THREADS=0). The reference below is that plain
 * producer: each line stripped of its line end and parsed alone, appended
 * to the block, the block sent at K rows or before a row that would take
 * it past FSGD_PRODUCE_BLOCK_BYTES, round-robin over the partitions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/bus.h"
#include "bus_mem.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/job.h"
#include "fsgd/rowblock.h"
#include "fsgd/rowfmt.h"
#include "testlib.h"

typedef struct msgs {
    size_t n, cap;
    int32_t *part;
    uint8_t **val;
    size_t *len;
    char summary[16384]; /* the data_summary event, "" when none */
} msgs_t;

static void msgs_add(msgs_t *m, int32_t p, const void *val, size_t len)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 256;
        m->part = realloc(m->part, m->cap * sizeof *m->part);
        m->val = realloc(m->val, m->cap * sizeof *m->val);
        m->len = realloc(m->len, m->cap * sizeof *m->len);
    }
    m->part[m->n] = p;
    m->val[m->n] = malloc(len ? len : 1);
    memcpy(m->val[m->n], val, len);
    m->len[m->n] = len;
    m->n++;
}

static void msgs_free(msgs_t *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->val[i]);
    free(m->part);
    free(m->val);
    free(m->len);
    memset(m, 0, sizeof *m);
}

static fsgd_bus_fault_t capture(void *ctx, const char *topic, int32_t partition, const void *val, size_t len,
                                int *delay_ms)
{
    (void)delay_ms;
    msgs_t *m = ctx;
    size_t tl = strlen(topic);
    if (tl > 5 && !strcmp(topic + tl - 5, ".data"))
        msgs_add(m, partition, val, len);
    else if (strstr(topic, ".ctl") && val && memmem(val, len, "\"data_summary\"", 14) && len < sizeof m->summary)
        memcpy(m->summary, val, len), m->summary[len] = '\0';
    return FSGD_BUS_DELIVER;
}

/* What the producer did with the file at path. */
typedef struct outcome {
    msgs_t m;
    int rc;
    char err[512];
    fsgd_produce_stats_t st;
    double xsum; /* Σ|x| of the rows (the reference's) */
} outcome_t;

static void produce(const char *path, const fsgd_job_t *job, int P, int chunk_kb, const char *threads, outcome_t *o)
{
    setenv("FSGD_PRODUCE_THREADS", threads, 1);
    memset(o, 0, sizeof *o);
    char kb[32];
    snprintf(kb, sizeof kb, "%d", chunk_kb);
    if (chunk_kb)
        setenv("FSGD_PRODUCE_CHUNK_KB", kb, 1);
    else
        unsetenv("FSGD_PRODUCE_CHUNK_KB");
    fsgd_bus_t *bus = fsgd_bus_mem_new();
    fsgd_bus_mem_set_hook(bus, capture, &o->m);
    fsgd_role_env_t env = {.bus = bus};
    o->rc = fsgd_produce_file(&env, FSGD_JOB_DIST(job), path, P, &o->st, NULL, o->err, sizeof o->err);
    fsgd_bus_destroy(bus);
    unsetenv("FSGD_PRODUCE_CHUNK_KB");
    unsetenv("FSGD_PRODUCE_THREADS");
}

typedef struct ref_block {
    fsgd_csr_t rows;
    msgs_t *m;
    const fsgd_rowfmt_t *fmt;
    int P;
    uint64_t *ends, *part_rows;
} ref_block_t;

static void ref_emit(ref_block_t *b)
{
    uint8_t *buf = malloc(fsgd_rowblock_bound(&b->rows, 0, b->rows.n_rows));
    size_t len = fsgd_rowblock_encode(&b->rows, 0, b->rows.n_rows, b->fmt->block_id, buf);
    int32_t p = (int32_t)(b->m->n % (size_t)b->P);
    msgs_add(b->m, p, buf, len);
    b->ends[p]++;
    b->part_rows[p] += b->rows.n_rows;
    free(buf);
    fsgd_csr_clear(&b->rows);
}

/* The plain producer's messages for the file at path (see the top). */
static void reference(const char *path, const fsgd_job_t *job, int P, outcome_t *o, fsgd_libsvm_stats_t *lst,
                      int *uniform, uint64_t *ends, uint64_t *part_rows)
{
    memset(o, 0, sizeof *o);
    memset(lst, 0, sizeof *lst);
    fsgd_rowfmt_t fmt;
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&fmt, job->train.format, job->train.hash_bits, job->train.skip_bad, o->err, sizeof o->err), 0);
    const uint32_t K = fsgd_produce_block_rows(FSGD_JOB_DIST(job), P);
    size_t len;
    char *text = (char *)fsgd_test_read_file(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    ref_block_t b = {.m = &o->m, .fmt = &fmt, .P = P, .ends = ends, .part_rows = part_rows};
    memset(ends, 0, P * sizeof *ends);
    memset(part_rows, 0, P * sizeof *part_rows);
    *uniform = 1;
    fsgd_csr_t one = {0};
    uint64_t lineno = 0;
    for (size_t pos = 0; pos < len && !o->rc;) {
        char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        char *line = text + pos;
        pos += n + (nl ? 1 : 0);
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            n--;
        if (lineno == 1 && fmt.hashed && fmt.spec.header)
            continue;
        fsgd_csr_clear(&one);
        const fsgd_parse_ctx_t at = {.src = path, .first_line = lineno, .stats = lst};
        long r = fsgd_rowfmt_parse(&fmt, line, n, &at, &one, o->err, sizeof o->err);
        if (r < 0)
            o->rc = (int)r;
        if (r <= 0)
            continue;
        o->st.rows++;
        o->xsum += fsgd_csr_abs_sum(&one);
        if (b.rows.n_rows > 0 && fsgd_rowblock_bound(&b.rows, 0, b.rows.n_rows) + fsgd_rowblock_bound(&one, 0, 1) >
                                     FSGD_PRODUCE_BLOCK_BYTES) {
            *uniform = 0;
            ref_emit(&b);
        }
        CU_ASSERT_EQUAL_FATAL(fsgd_csr_append_rows(&b.rows, &one, 0, 1), 0);
        if (b.rows.n_rows >= K)
            ref_emit(&b);
    }
    if (!o->rc && b.rows.n_rows > 0)
        ref_emit(&b);
    o->st.messages = o->m.n;
    fsgd_csr_free(&one);
    fsgd_csr_free(&b.rows);
    free(text);
}

/* Produces path with each chunk size and compares with the reference:
 * messages, partitions, rows, errors, bad rows, and the summary's counts. */
static void check_file(const char *path, const fsgd_job_t *job, int P)
{
    outcome_t ref;
    fsgd_libsvm_stats_t lst;
    int uniform;
    uint64_t *ends = calloc(P, sizeof *ends), *part_rows = calloc(P, sizeof *part_rows);
    reference(path, job, P, &ref, &lst, &uniform, ends, part_rows);
    /* each chunk size on two parsing threads; 1 KiB also parsed by the
     * sending thread itself (FSGD_PRODUCE_THREADS=0) */
    static const int chunks_kb[] = {0, 1, 64, 1};
    static const char *threads[] = {"2", "2", "2", "0"};
    for (size_t c = 0; c < sizeof chunks_kb / sizeof *chunks_kb; c++) {
        outcome_t got;
        produce(path, job, P, chunks_kb[c], threads[c], &got);
        CU_ASSERT_EQUAL(got.rc, ref.rc);
        if (ref.rc) {
            CU_ASSERT_STRING_EQUAL(got.err, ref.err);
        } else {
            if (got.rc)
                fprintf(stderr, "\n  produce %s: %s\n", path, got.err);
            CU_ASSERT_EQUAL(got.st.rows, ref.st.rows);
            CU_ASSERT_EQUAL(got.st.messages, ref.st.messages);
            CU_ASSERT_EQUAL(got.st.bad_rows, lst.bad_rows);
            for (uint64_t i = 0; i < lst.bad_rows && i < FSGD_LIBSVM_BAD_KEPT; i++)
                CU_ASSERT_STRING_EQUAL(got.st.first_bad[i], lst.first_bad[i]);
        }
        CU_ASSERT_EQUAL(got.m.n, ref.m.n);
        size_t same = 0;
        for (size_t i = 0; i < got.m.n && i < ref.m.n; i++)
            same += got.m.part[i] == ref.m.part[i] && got.m.len[i] == ref.m.len[i] &&
                    !memcmp(got.m.val[i], ref.m.val[i], ref.m.len[i]);
        CU_ASSERT_EQUAL(same, ref.m.n);
        if (same != ref.m.n || got.m.n != ref.m.n)
            fprintf(stderr, "\n  %s, chunk %d KiB, %s threads: %zu of %zu messages as the plain producer's (it sent %zu)\n",
                    path, chunks_kb[c], threads[c], same, ref.m.n, got.m.n);
        /* a summary when every block but the last is K rows, saying so */
        if (!ref.rc && uniform && ref.st.rows) {
            char want[256];
            snprintf(want, sizeof want, "\"rows\": %llu,", (unsigned long long)ref.st.rows);
            CU_ASSERT_PTR_NOT_NULL(strstr(got.m.summary, want));
            snprintf(want, sizeof want, "\"block_rows\": %u,", fsgd_produce_block_rows(FSGD_JOB_DIST(job), P));
            CU_ASSERT_PTR_NOT_NULL(strstr(got.m.summary, want));
            char ends_s[4096] = "\"ends\": [", rows_s[4096] = "\"part_rows\": [";
            for (int p = 0; p < P; p++) {
                snprintf(ends_s + strlen(ends_s), sizeof ends_s - strlen(ends_s), "%s%llu", p ? ", " : "",
                         (unsigned long long)ends[p]);
                snprintf(rows_s + strlen(rows_s), sizeof rows_s - strlen(rows_s), "%s%llu", p ? ", " : "",
                         (unsigned long long)part_rows[p]);
            }
            CU_ASSERT_PTR_NOT_NULL(strstr(got.m.summary, ends_s));
            CU_ASSERT_PTR_NOT_NULL(strstr(got.m.summary, rows_s));
            /* Σ|x| (lr auto under a delay): the rows', in any order of blocks */
            const char *xs = strstr(got.m.summary, "\"xsum\": ");
            CU_ASSERT_PTR_NOT_NULL_FATAL(xs);
            CU_ASSERT_DOUBLE_EQUAL(strtod(xs + 8, NULL), ref.xsum, 1e-9 * ref.xsum + 1e-9);
        } else {
            CU_ASSERT_STRING_EQUAL(got.m.summary, "");
        }
        msgs_free(&got.m);
    }
    msgs_free(&ref.m);
    free(ends);
    free(part_rows);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* LIBSVM rows of 0..59 nonzeros, most of them binary, with blank lines,
 * comments, CRLF line ends, and a last line without its line end; bad:
 * line bad_line is malformed (0: none). */
static const char *write_libsvm(const char *name, int rows, int bad_line)
{
    const char *path = fsgd_test_tmp(name);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 1; i <= rows; i++) {
        if (i == bad_line)
            fprintf(f, "+1 5:1 3:1 oops");
        else if (i % 97 == 0)
            fprintf(f, "   ");
        else if (i % 131 == 0)
            fprintf(f, "# a comment");
        else {
            int binary = next_rand() % 10 < 7, n = (int)(next_rand() % 60);
            fprintf(f, next_rand() % 2 ? "+1" : (binary ? "-1" : "0.25"));
            uint64_t col = 0;
            for (int j = 0; j < n; j++) {
                col += 1 + next_rand() % 20000;
                if (binary)
                    fprintf(f, " %llu:1", (unsigned long long)col);
                else
                    fprintf(f, " %llu:%.3g", (unsigned long long)col, (double)(next_rand() % 1000) / 37.0 - 9);
            }
        }
        if (i < rows)
            fputs(i % 7 == 0 ? "\r\n" : "\n", f);
    }
    CU_ASSERT_EQUAL(fclose(f), 0);
    return path;
}

static void job_for(fsgd_job_t *job, double batch, int block_rows)
{
    fsgd_job_defaults(job);
    snprintf(job->dist.name, sizeof job->dist.name, "prod");
    job->train.batch = batch;
    job->dist.block_rows = block_rows;
}

static void test_libsvm_blocks(void)
{
    const char *path = write_libsvm("rows.svm", 6000, 0);
    fsgd_job_t job;
    job_for(&job, 474, 0); /* K = 39 over 12 partitions */
    check_file(path, &job, 12);
    job_for(&job, 256, 7);
    check_file(path, &job, 3);
    job_for(&job, 256, 1024); /* a block from many chunks */
    check_file(path, &job, 1);
}

/* Rows of up to 47375 nonzeros with values (each line longer than a 64
 * KiB chunk): a block ends before the row that would take its bound past
 * 768 KiB; the sizes put blocks within a few bytes of it on either side
 * (two rows of 40000 + 47375 nonzeros fit, by 3 bytes). */
static void test_wide_rows(void)
{
    const char *path = fsgd_test_tmp("wide.svm");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static const int nnz[] = {40000, 47375, 1, 40000, 47367, 1, 3, 2, 5, 30000, 30000, 30000, 5, 30000};
    for (int i = 0; i < (int)(sizeof nnz / sizeof *nnz); i++) {
        int n = nnz[i];
        fprintf(f, "%d", i % 2 ? 1 : -1);
        for (int j = 0; j < n; j++)
            fprintf(f, " %d:0.%d", 1 + 3 * j, 1 + (i + j) % 9);
        fputc('\n', f);
    }
    CU_ASSERT_EQUAL(fclose(f), 0);
    fsgd_job_t job;
    job_for(&job, 474, 0);
    check_file(path, &job, 2);
}

/* A hashed delimited format with a header line: never sent. */
static void test_csv_header(void)
{
    const char *path = fsgd_test_tmp("rows.csv");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("label,n,a,b\n", f);
    for (int i = 0; i < 3000; i++)
        fprintf(f, "%d,%d,k%llu,v%llu%s", i % 3 == 0, i % 17, (unsigned long long)(next_rand() % 500),
                (unsigned long long)(next_rand() % 9000), i % 5 ? "\n" : "\r\n");
    CU_ASSERT_EQUAL(fclose(f), 0);
    fsgd_job_t job;
    job_for(&job, 100, 0);
    snprintf(job.train.format, sizeof job.train.format, "csv:label,num,cat*2:header=1");
    job.train.hash_bits = 16;
    check_file(path, &job, 4);
}

/* A malformed line: the same error (file:line:col) and the blocks before
 * it; with skip_bad the same rows, the bad one counted and named. */
static void test_bad_line(void)
{
    const char *path = write_libsvm("bad.svm", 5000, 3217);
    fsgd_job_t job;
    job_for(&job, 474, 0);
    check_file(path, &job, 12);
    job.train.skip_bad = 1;
    check_file(path, &job, 12);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"LIBSVM rows: the plain producer's blocks, partitions and summary, any chunking", test_libsvm_blocks},
        {"wide rows: blocks cut before 768 KiB, lines longer than a chunk", test_wide_rows},
        {"a hashed CSV with a header line", test_csv_header},
        {"a malformed line: the same error, or with skip_bad the same rows", test_bad_line},
        {NULL, NULL},
    };
    fsgd_test_suite("produce", cases);
}
