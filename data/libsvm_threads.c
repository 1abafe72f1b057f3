/* Loading a LIBSVM file with several threads: the file is read in blocks,
 * each block cut at line ends into one part per thread, the parts parsed in
 * parallel by fsgd_libsvm_parse (which knows each part's first line number,
 * so errors name the same file:line:col as the one-thread reader) and
 * appended in order. Parsing is most of the load time; the appends stay on
 * the calling thread, and the next block is read while this one is parsed. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/input.h"
#include "fsgd/libsvm.h"
#include "fsgd/zsource.h"
#include "libsvm_weights.h"

#define BLOCK (32u << 20) /* each of the two */
#define MAX_PARTS 16

typedef struct part {
    const char *buf;
    size_t len;
    uint64_t first_line;
    const char *path;
    const fsgd_libsvm_opts_t *opts;
    fsgd_libsvm_opts_t own_opts;   /* opts with weights pointing at w (row weights read) */
    fsgd_libsvm_weights_t w;       /* this part's row weights, appended after its rows */
    fsgd_csr_t rows;
    fsgd_libsvm_stats_t st;
    long got;
    char err[512];
    int ones;        /* a binary load: every value parsed is 1 (only the columns are copied) */
    fsgd_csr_t *dst; /* append_parts: where the rows go, from row and nz on */
    size_t row, nz;
    int appended;
} part_t;

static void *parse_part(void *arg)
{
    part_t *p = arg;
    const fsgd_parse_ctx_t at = {.src = p->path, .first_line = p->first_line, .stats = &p->st};
    p->got = fsgd_libsvm_parse(p->buf, p->len, p->opts, &at, &p->rows, p->err, sizeof p->err);
    /* checked here, on the part's own thread, rather than by the calling
     * thread's fsgd_csr_append_rows (CTR data: every part) */
    p->ones = p->opts->binary && p->rows.val;
    for (size_t i = 0; p->ones && i < p->rows.nnz; i++)
        p->ones = p->rows.val[i] == 1.0f;
    return NULL;
}

static size_t count_lines(const char *b, size_t n)
{
    size_t c = 0;
    for (const char *e = b + n; (b = memchr(b, '\n', (size_t)(e - b))) != NULL; b++)
        c++;
    return c;
}

/* Copies part p's rows into p->dst at rows p->row.., nonzeros p->nz.. (room
 * made, the layouts alike: both binary, both with values, or a binary dst
 * and a part whose values are all 1). */
static void *copy_part(void *arg)
{
    part_t *p = arg;
    const fsgd_csr_t *src = &p->rows;
    fsgd_csr_t *dst = p->dst;
    if (!src->n_rows)
        return NULL;
    if (src->nnz) {
        memcpy(dst->col + p->nz, src->col, src->nnz * sizeof *src->col);
        if (src->val && dst->val) /* else a binary dst and values all 1 */
            memcpy(dst->val + p->nz, src->val, src->nnz * sizeof *src->val);
    }
    memcpy(dst->label + p->row, src->label, src->n_rows * sizeof *src->label);
    for (size_t r = 0; r < src->n_rows; r++)
        dst->row_ptr[p->row + r + 1] = p->nz + src->row_ptr[r + 1];
    return NULL;
}

/* Appends the parsed parts up to the first that failed (the rows before its
 * error kept) to out, each on its own thread: one thread copying them all
 * (~150 MB for 900k CTR rows) kept the other cores idle. Only where every
 * part is laid out as out is (binary, or all its values 1, or with values
 * into rows with values); the others are left to fsgd_csr_append_rows
 * (appended stays 0). Returns 0 or -1 (no memory). */
static int append_parts(part_t *parts, int n, fsgd_csr_t *out)
{
    size_t rows = 0, nnz = 0;
    int m = 0;
    while (m < n) {
        const fsgd_csr_t *r = &parts[m].rows;
        int alike = (r->val == NULL) == (out->val == NULL) || (!out->val && parts[m].ones);
        if (r->n_rows && !alike)
            return 0;
        rows += r->n_rows;
        nnz += r->nnz;
        if (parts[m++].got < 0)
            break;
    }
    if (fsgd_csr_reserve(out, rows, nnz) < 0)
        return -1;
    pthread_t tid[MAX_PARTS];
    int started[MAX_PARTS] = {0};
    size_t row = out->n_rows, nz = out->nnz;
    for (int k = 0; k < m; k++) {
        part_t *p = &parts[k];
        p->dst = out;
        p->row = row;
        p->nz = nz;
        p->appended = 1;
        row += p->rows.n_rows;
        nz += p->rows.nnz;
        if (p->rows.n_rows && p->rows.max_col > out->max_col)
            out->max_col = p->rows.max_col;
        if (k > 0)
            started[k] = pthread_create(&tid[k], NULL, copy_part, p) == 0;
    }
    for (int k = 0; k < m; k++) {
        if (!started[k])
            copy_part(&parts[k]);
    }
    for (int k = 1; k < m; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
    out->n_rows = row;
    out->nnz = nz;
    return 0;
}

/* What the regions of one load share. */
typedef struct load {
    const fsgd_libsvm_opts_t *opts;
    int threads;      /* parts a region is cut into, at most */
    fsgd_parse_ctx_t at; /* src: the path; first_line: the next region's; stats: the whole load's */
    fsgd_csr_t *keep; /* [k]: part k's row buffer, emptied and kept for the next region: a fresh one
                         per region would fault in (and the kernel zero) as much memory again as
                         the whole data set */
} load_t;

/* Parses region[0..len) (whole lines) in up to l->threads parts and appends
 * the rows to out in order; l->at.first_line moves past them. Returns 0 or
 * the first part's error (rows of earlier parts kept, as the one-thread
 * reader keeps rows before an error). */
static int parse_region(load_t *l, const char *region, size_t len, fsgd_csr_t *out, char *err, size_t errsz)
{
    const int nt = l->threads;
    const char *path = l->at.src;
    const fsgd_libsvm_opts_t *opts = l->opts;
    uint64_t *line = &l->at.first_line;
    fsgd_libsvm_stats_t *st = l->at.stats;
    fsgd_csr_t *keep = l->keep;
    part_t parts[MAX_PARTS];
    pthread_t tid[MAX_PARTS];
    int started[MAX_PARTS] = {0};
    size_t start = 0;
    int n = 0;
    for (int k = 0; k < nt && start < len; k++) {
        size_t end = k == nt - 1 ? len : len * (size_t)(k + 1) / (size_t)nt;
        if (end < start)
            end = start;
        const char *nl = end < len ? memchr(region + end, '\n', len - end) : NULL;
        end = nl ? (size_t)(nl - region) + 1 : len;
        parts[n] = (part_t){.buf = region + start, .len = end - start, .first_line = *line, .path = path, .opts = opts,
                            .rows = keep[n]};
        if (opts->row_weights && opts->weights) { /* each part its own weights, joined in order below */
            parts[n].own_opts = *opts;
            parts[n].own_opts.weights = &parts[n].w;
            parts[n].opts = &parts[n].own_opts;
        }
        *line += count_lines(region + start, end - start);
        start = end;
        n++;
    }
    if (len && region[len - 1] != '\n')
        (*line)++; /* a last line without a newline */
    if (n == 0) /* an empty region (a 0-byte file): no part to parse */
        return FSGD_E_OK;
    for (int k = 1; k < n; k++)
        started[k] = pthread_create(&tid[k], NULL, parse_part, &parts[k]) == 0;
    parse_part(&parts[0]);
    for (int k = 1; k < n; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            parse_part(&parts[k]);
    }
    int rc = append_parts(parts, n, out) < 0 ? fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path)
                                              : FSGD_E_OK;
    for (int k = 0; k < n; k++) {
        part_t *p = &parts[k];
        if (!p->appended && rc == 0 && p->rows.n_rows) {
            if (fsgd_csr_append_rows(out, &p->rows, 0, p->rows.n_rows) < 0)
                rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
        }
        if (rc == 0 && p->w.n && fsgd_libsvm_weights_append(opts->weights, &p->w) < 0)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
        fsgd_libsvm_weights_free(&p->w);
        if (rc == 0) {
            st->lines += p->st.lines;
            st->rows += p->st.rows;
            st->bytes += p->st.bytes;
            st->feature_entries += p->st.feature_entries;
            st->cross_entries += p->st.cross_entries;
            st->slots_used += p->st.slots_used;
            st->slots_collided += p->st.slots_collided;
            for (uint64_t i = 0; i < p->st.bad_rows; i++) {
                if (st->bad_rows < FSGD_LIBSVM_BAD_KEPT && i < FSGD_LIBSVM_BAD_KEPT)
                    memcpy(st->first_bad[st->bad_rows], p->st.first_bad[i], sizeof st->first_bad[0]);
                st->bad_rows++;
            }
            if (p->got < 0)
                rc = fsgd_err_fmt(err, errsz, (int)p->got, "%s", p->err);
        }
        fsgd_csr_clear(&p->rows);
        keep[k] = p->rows;
    }
    return rc;
}

/* One read block and how much of it holds data; filled by fill, on the
 * calling thread or on a reader thread of its own (fill_thread). */
typedef struct block {
    fsgd_zsource_t *src;
    char *buf;
    size_t cap, len;
    int eof, err; /* err: the read's fsgd_err_t, 0 when none (msg says it) */
    char msg[512];
} block_t;

static void fill(block_t *b)
{
    while (b->len < b->cap) {
        ssize_t got = fsgd_zsource_read(b->src, b->buf + b->len, b->cap - b->len, b->msg, sizeof b->msg);
        if (got < 0) {
            b->err = (int)got;
            return;
        }
        if (got == 0) {
            b->eof = 1;
            return;
        }
        b->len += (size_t)got;
    }
}

static void *fill_thread(void *arg)
{
    fill(arg);
    return NULL;
}

/* Gives b at least cap bytes (its data kept). 0 or -1. */
static int grow(block_t *b, size_t cap)
{
    if (b->cap >= cap)
        return 0;
    char *n = realloc(b->buf, cap);
    if (!n)
        return -1;
    b->buf = n;
    b->cap = cap;
    return 0;
}

int fsgd_libsvm_load_threads(const char *path, const fsgd_libsvm_opts_t *opts, int threads, fsgd_csr_t *out,
                             fsgd_libsvm_stats_t *stats, char *err, size_t errsz)
{
    static const fsgd_libsvm_opts_t defaults;
    if (!opts)
        opts = &defaults;
    if (threads < 2 || !strcmp(path, "-"))
        return fsgd_libsvm_load(path, opts, out, stats, err, errsz);
    if (threads > MAX_PARTS)
        threads = MAX_PARTS;
    /* a FIFO or a device goes to the reader that bounds streams, unopened
     * here: a FIFO's writer sees its reader close and stops */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return fsgd_libsvm_load(path, opts, out, stats, err, errsz);
    fsgd_zsource_t *src = fsgd_zsource_open(path, err, errsz); /* gzip and zstd parsed in parallel too */
    if (!src)
        return FSGD_E_IO;

    fsgd_libsvm_stats_t st = {0};
    /* Two blocks: the next is read (the kernel's copy out of the page cache,
     * ~0.1 s for 375 MB) on a thread of its own while this one is parsed,
     * instead of between the parses with the parsing threads idle. */
    size_t cap = opts->read_buf ? opts->read_buf : BLOCK; /* read_buf: small blocks in tests */
    block_t blk[2] = {{.src = src, .cap = cap, .buf = malloc(cap)}, {.src = src, .cap = cap, .buf = malloc(cap)}};
    int rc = !blk[0].buf || !blk[1].buf ? FSGD_E_NOMEM
             : opts->binary && !out->col ? fsgd_csr_init_binary(out, 0, 0)
                                         : fsgd_csr_reserve(out, 0, 0);
    if (rc < 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
    fsgd_csr_t keep[MAX_PARTS] = {{0}};
    load_t l = {.opts = opts, .threads = threads, .at = {.src = path, .first_line = 1, .stats = &st}, .keep = keep};
    int cur = 0;
    if (rc == 0)
        fill(&blk[0]);
    while (rc == 0) {
        block_t *b = &blk[cur], *next = &blk[1 - cur];
        if (b->err) {
            rc = fsgd_err_fmt(err, errsz, b->err, "%s", b->msg);
            break;
        }
        /* whole lines only, unless the file ends here */
        size_t cut = b->len;
        if (!b->eof) {
            const char *nl = b->len ? memrchr(b->buf, '\n', b->len) : NULL;
            if (!nl && b->cap >= FSGD_INPUT_MAX_LINE) {
                rc = fsgd_input_line_error(err, errsz, path, l.at.first_line);
                break;
            }
            if (!nl) { /* one line longer than the block: grow */
                if (grow(b, b->cap * 2) < 0) {
                    rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s:%llu: line too long", path,
                                      (unsigned long long)l.at.first_line);
                    break;
                }
                fill(b);
                continue;
            }
            cut = (size_t)(nl - b->buf) + 1;
        }
        /* the rest of the last line starts the next block */
        pthread_t reader;
        int reading = 0;
        if (!b->eof) {
            if (grow(next, b->cap) < 0) {
                rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: out of memory", path);
                break;
            }
            memcpy(next->buf, b->buf + cut, b->len - cut);
            next->len = b->len - cut;
            reading = pthread_create(&reader, NULL, fill_thread, next) == 0;
        }
        rc = parse_region(&l, b->buf, cut, out, err, errsz);
        if (reading)
            pthread_join(reader, NULL);
        else if (!b->eof && rc == 0)
            fill(next);
        if (b->eof)
            break;
        b->len = 0;
        cur = 1 - cur;
    }
    fsgd_zsource_close(src);
    free(blk[0].buf);
    free(blk[1].buf);
    for (int k = 0; k < MAX_PARTS; k++)
        fsgd_csr_free(&keep[k]);
    if (stats)
        *stats = st;
    return rc;
}
