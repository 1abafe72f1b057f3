/* `fsgd produce`: the rows of a file into <job>.data, round-robin over
 * partitions: row blocks of K parsed rows (fsgd/rowblock.h), parsed on two
 * threads ahead of the sends (produce_reader.h), or with block_rows 1 one
 * text row a message, each line checked with the job's format
 * (fsgd/rowfmt.h) and sent as it is. A delimited spec's header line is
 * skipped (the topic holds rows only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/bus.h"
#include "fsgd/auth.h"
#include "fsgd/clock.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/input.h"
#include "fsgd/kbus.h"
#include "fsgd/rowblock.h"
#include "fsgd/rowfmt.h"
#include "fsgd/zsource.h"
#include "data_summary.h"
#include "produce_reader.h"

/* The caller's stop flag (a signal handler sets it), read between chunks. */
static int stopped(const fsgd_role_env_t *env, char *err, size_t errsz)
{
    return env->stop && *env->stop ? fsgd_err_fmt(err, errsz, FSGD_E_STATE, "produce: stopped by a signal") : 0;
}

int fsgd_produce_partitions_needed(uint64_t bytes)
{
    /* Headroom: the mock stores record batches with their overhead and Kafka
     * headers; 2 MiB of text per 5 MiB partition stays well clear even if
     * lz4 gains nothing. */
    uint64_t per = 2u * 1024u * 1024u;
    uint64_t n = (bytes + per - 1) / per;
    return n < 1 ? 1 : (int)n;
}

/* Lines of f, each at most FSGD_INPUT_MAX_LINE bytes: getline would grow
 * without end on an input with no line end (a stream from /dev/zero). */
typedef struct line_reader {
    FILE *f;
    char *buf;
    size_t cap, pos, len;
    int eof;
} line_reader_t;

/* The next line (its '\n' replaced by a NUL) in *line and its length; -1 at
 * the end, -2 for a line past the bound, -3 out of memory. */
static ssize_t next_line(line_reader_t *r, char **line)
{
    for (;;) {
        char *nl = r->len > r->pos ? memchr(r->buf + r->pos, '\n', r->len - r->pos) : NULL;
        if (nl || (r->eof && r->pos < r->len)) {
            size_t n = nl ? (size_t)(nl - (r->buf + r->pos)) : r->len - r->pos;
            *line = r->buf + r->pos;
            (*line)[n] = '\0'; /* the '\n', or the spare byte kept below */
            r->pos += n + (nl ? 1 : 0);
            return (ssize_t)n;
        }
        if (r->eof)
            return -1;
        if (r->pos) /* (the first call has no buffer yet) */
            memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
        if (r->len + 1 >= r->cap) { /* one spare byte for the last line's NUL */
            if (r->cap > FSGD_INPUT_MAX_LINE)
                return -2;
            size_t cap = r->cap ? 2 * r->cap : (size_t)1 << 20;
            char *b = realloc(r->buf, cap);
            if (!b)
                return -3;
            r->buf = b;
            r->cap = cap;
        }
        size_t got = fread(r->buf + r->len, 1, r->cap - 1 - r->len, r->f);
        r->len += got;
        if (got == 0)
            r->eof = 1;
    }
}

uint32_t fsgd_produce_block_rows(const fsgd_dist_job_t *job, int partitions)
{
    if (job->dist->block_rows > 0)
        return (uint32_t)job->dist->block_rows;
    /* A step takes batch / partitions rows of each partition, in whole
     * messages: blocks of that many rows make it one message a partition
     * (a batch given as a fraction: the default's 256). */
    double B = job->train->batch >= 1 ? job->train->batch : 256;
    double k = floor(B / (partitions > 0 ? partitions : 1));
    return k < 1 ? 1 : k > FSGD_PRODUCE_BLOCK_MAX_ROWS ? FSGD_PRODUCE_BLOCK_MAX_ROWS : (uint32_t)k;
}

/* Where rows go and what is counted of them. */
typedef struct block_out {
    fsgd_bus_client_t *rk;
    const char *topic;
    int P;
    const fsgd_rowfmt_t *fmt;
    fsgd_data_summary_t *sum;
    fsgd_produce_stats_t *st;
    uint64_t *sent;      /* messages a partition */
    uint32_t *part_rows; /* rows a partition */
    const char *path;
    uint64_t lineno;
    uint8_t *buf;
    size_t cap;
    /* cutting blocks out of parsed chunks */
    uint32_t K;
    int uniform;         /* every block K rows but the last */
    size_t block_rows;   /* rows and nonzeros of the block being cut */
    size_t block_nnz;
    fsgd_csr_t pending;  /* its rows from chunks before this one */
} block_out_t;

/* Sends rows [first, first + count) of rows as one message to the next
 * partition round-robin: the text line given (one row), or else a row
 * block of them, encoded straight from the parsed rows. */
static int send_rows(block_out_t *o, const fsgd_csr_t *rows, size_t first, size_t count, const char *line, size_t n,
                     char *err, size_t errsz)
{
    const void *val = line;
    size_t len = n;
    if (!line) {
        size_t need = fsgd_rowblock_bound(rows, first, count);
        if (need > o->cap) {
            uint8_t *b = realloc(o->buf, need);
            if (!b)
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "produce: out of memory");
            o->buf = b;
            o->cap = need;
        }
        len = fsgd_rowblock_encode(rows, first, count, o->fmt->block_id, o->buf);
        val = o->buf;
    }
    int32_t p = (int32_t)(o->st->messages % (uint64_t)o->P);
    /* with a job key, each row message carries its tag (KAFKA_FORMAT.md) */
    char mac[FSGD_AUTH_TAG_HEX + 1] = "";
    fsgd_auth_t *auth = fsgd_bus_client_auth(o->rk);
    if (fsgd_auth_enabled(auth))
        fsgd_auth_row_tag_hex(auth, mac, p, val, len);
    char e[256];
    const fsgd_bus_out_t m = {.topic = o->topic, .partition = p, .val = val, .len = len, .mac = mac[0] ? mac : NULL};
    if (fsgd_bus_produce(o->rk, &m, e, sizeof e))
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "produce %s:%llu: %s", o->path, (unsigned long long)o->lineno,
                            e);
    if (o->sum) { /* the summary reads labels and values: a view of the rows sent */
        fsgd_csr_t v = *rows;
        uint64_t lo = rows->row_ptr[first];
        v.n_rows = count;
        v.nnz = (size_t)(rows->row_ptr[first + count] - lo);
        v.row_ptr = rows->row_ptr + first;
        v.col = rows->col + lo;
        v.val = rows->val ? rows->val + lo : NULL;
        v.label = rows->label + first;
        fsgd_data_summary_add(o->sum, &v);
    }
    o->sent[p]++;
    o->part_rows[p] += (uint32_t)count;
    o->st->messages++;
    o->st->rows += count;
    return 0;
}

/* Sends the block being cut: the pending rows and rows [first, first +
 * count) of c. Without pending rows straight from c, no copy. */
static int send_block(block_out_t *o, const fsgd_csr_t *c, size_t first, size_t count, char *err, size_t errsz)
{
    int rc;
    if (o->pending.n_rows == 0) {
        rc = send_rows(o, c, first, count, NULL, 0, err, errsz);
    } else {
        if (count && fsgd_csr_append_rows(&o->pending, c, first, count) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "produce: out of memory");
        rc = send_rows(o, &o->pending, 0, o->pending.n_rows, NULL, 0, err, errsz);
        fsgd_csr_clear(&o->pending);
    }
    o->block_rows = o->block_nnz = 0;
    return rc;
}

/* Cuts a chunk's rows into blocks as they come: a block ends after K rows,
 * or before a row that would take its bound past FSGD_PRODUCE_BLOCK_BYTES
 * (a message stays well under the broker's 1 MB). A block the chunk ends
 * in the middle of is kept pending for the next chunk. */
static int cut_blocks(block_out_t *o, const fsgd_csr_t *c, char *err, size_t errsz)
{
    size_t start = 0; /* c's first row in the block being cut */
    for (size_t i = 0; i < c->n_rows; i++) {
        size_t k = (size_t)(c->row_ptr[i + 1] - c->row_ptr[i]);
        if (o->block_rows > 0 && fsgd_rowblock_bound_n(o->block_rows, o->block_nnz) + fsgd_rowblock_bound_n(1, k) >
                                     FSGD_PRODUCE_BLOCK_BYTES) {
            o->uniform = 0;
            FSGD_TRY(send_block(o, c, start, i - start, err, errsz));
            start = i;
        }
        o->block_rows++;
        o->block_nnz += k;
        if (o->block_rows >= o->K) {
            FSGD_TRY(send_block(o, c, start, i + 1 - start, err, errsz));
            start = i + 1;
        }
    }
    if (start < c->n_rows && fsgd_csr_append_rows(&o->pending, c, start, c->n_rows - start) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "produce: out of memory");
    return 0;
}

/* One produce's reading side: where its rows go, what it counts, whom it
 * tells how far it got. */
typedef struct produce {
    block_out_t out;
    fsgd_libsvm_stats_t lst;
    const fsgd_role_env_t *env;
    fsgd_produce_progress_fn progress;
    double t0, last;
} produce_t;

/* The caller's progress hook, once a second at most. */
static void say_progress(produce_t *p)
{
    double t = fsgd_clock_s();
    if (!p->progress || t - p->last < 1.0)
        return;
    p->last = t;
    p->out.st->seconds = t - p->t0;
    p->progress(p->env->ctx, p->out.st, 0);
}

/* Rows in binary blocks of K rows (fsgd/rowblock.h), parsed in chunks by
 * the reader's threads. */
static int send_blocks(produce_t *p, FILE *f, char *err, size_t errsz)
{
    fsgd_produce_reader_t *reader = fsgd_produce_reader_new(f, p->out.path, p->out.fmt, 0);
    if (!reader)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "produce: out of memory");
    int rc = 0;
    while (!rc) {
        const fsgd_produce_chunk_t *c = fsgd_produce_reader_next(reader);
        if (!c)
            break;
        p->out.lineno = c->end_line;
        p->out.st->bytes += c->bytes;
        rc = stopped(p->env, err, errsz);
        if (!rc)
            rc = cut_blocks(&p->out, &c->rows, err, errsz);
        p->lst.lines += c->st.lines;
        p->lst.rows += c->st.rows;
        for (uint64_t i = 0; i < c->st.bad_rows; i++) {
            if (p->lst.bad_rows < FSGD_LIBSVM_BAD_KEPT && i < FSGD_LIBSVM_BAD_KEPT)
                memcpy(p->lst.first_bad[p->lst.bad_rows], c->st.first_bad[i], sizeof p->lst.first_bad[0]);
            p->lst.bad_rows++;
        }
        if (!rc && c->rc)
            rc = fsgd_err_fmt(err, errsz, c->rc, "%s", c->err);
        if (!rc)
            say_progress(p);
    }
    if (!rc && p->out.block_rows > 0)
        rc = send_block(&p->out, &p->out.pending, 0, 0, err, errsz);
    fsgd_produce_reader_destroy(reader);
    return rc;
}

/* block_rows 1: each row a message of its own text, checked first. */
static int send_text_rows(produce_t *p, FILE *f, char *err, size_t errsz)
{
    const char *path = p->out.path;
    char src[1200];
    snprintf(src, sizeof src, "%s", path);
    line_reader_t lr = {.f = f};
    fsgd_csr_t one = {0};
    uint64_t lineno = 0;
    int rc = 0;
    while (!rc) {
        char *line;
        ssize_t n = next_line(&lr, &line);
        if (n == -1)
            break;
        lineno++;
        if (n < 0) {
            rc = n == -2 ? fsgd_input_line_error(err, errsz, path, lineno)
                         : fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "produce: out of memory reading '%s'", path);
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (lineno == 1 && p->out.fmt->hashed && p->out.fmt->spec.header)
            continue; /* the header names the columns: never sent */
        if ((rc = stopped(p->env, err, errsz)) != 0)
            break;
        fsgd_csr_clear(&one);
        const fsgd_parse_ctx_t at = {.src = src, .first_line = lineno, .stats = &p->lst};
        long r = fsgd_rowfmt_parse(p->out.fmt, line, (size_t)n, &at, &one, err, errsz);
        if (r < 0) {
            rc = (int)r;
            break;
        }
        if (r == 0)
            continue; /* blank, comment, or skipped bad row */
        p->out.st->bytes += (uint64_t)n + 1;
        p->out.lineno = lineno;
        if ((rc = send_rows(&p->out, &one, 0, one.n_rows, line, (size_t)n, err, errsz)) == 0)
            say_progress(p);
    }
    free(lr.buf);
    fsgd_csr_free(&one);
    return rc;
}

/* The broker kept everything: the mock cluster silently drops the oldest
 * data past 5 MiB per partition, real Kafka by retention; and nobody else
 * wrote meanwhile. lo0, hi0: the partitions' ends before, sent: messages a
 * partition. */
static int check_kept(fsgd_bus_client_t *rk, const char *topic, int P, const int64_t *lo0, const int64_t *hi0,
                      const uint64_t *sent, char *err, size_t errsz)
{
    if (P <= 0)
        return 0;
    int64_t *lo1 = calloc((size_t)P, sizeof *lo1), *hi1 = calloc((size_t)P, sizeof *hi1);
    int rc = lo1 && hi1 ? fsgd_bus_watermarks_all(rk, topic, P, lo1, hi1, 10000, err, errsz)
                        : fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "produce: out of memory");
    for (int p = 0; !rc && p < P; p++) {
        int64_t lo = lo1[p], hi = hi1[p];
        /* More rows than were written: another writer at the same time, most
         * likely a second job of the same name (not the broker's doing). */
        if (lo == lo0[p] && hi - lo > hi0[p] - lo0[p] + (int64_t)sent[p])
            rc = fsgd_err_fmt(err, errsz, FSGD_E_LOST,
                              "%s [%d] holds offsets [%lld, %lld) after this producer wrote %llu messages onto [%lld, "
                              "%lld): another client wrote %lld messages into it at the same time. Is another job of "
                              "the same name running on these brokers? A job name is for one job at a time",
                              topic, p, (long long)lo, (long long)hi, (unsigned long long)sent[p], (long long)lo0[p],
                              (long long)hi0[p], (long long)(hi - hi0[p] - (int64_t)sent[p]));
        else if (lo != lo0[p] || hi - lo != hi0[p] - lo0[p] + (int64_t)sent[p])
            rc = fsgd_err_fmt(err, errsz, FSGD_E_LOST,
                              "data lost: %s [%d] holds offsets [%lld, %lld) after writing %llu messages onto "
                              "[%lld, %lld): the broker dropped data (on a real cluster: the topic's retention; "
                              "the embedded cluster keeps at most 5 MiB per partition: use more partitions)",
                              topic, p, (long long)lo, (long long)hi, (unsigned long long)sent[p],
                              (long long)lo0[p], (long long)hi0[p]);
    }
    free(lo1);
    free(hi1);
    return rc;
}

int fsgd_produce_file(const fsgd_role_env_t *env, const fsgd_dist_job_t *job, const char *path, int partitions,
                      fsgd_produce_stats_t *st, fsgd_produce_progress_fn progress, char *err, size_t errsz)
{
    fsgd_bus_t *bus = env->bus;
    memset(st, 0, sizeof *st);
    fsgd_rowfmt_t fmt;
    FSGD_TRY(fsgd_rowfmt_init(&fmt, job->train->format, job->train->hash_bits, job->train->skip_bad, err, errsz));
    char topic[128];
    fsgd_kbus_topic(topic, sizeof topic, job->dist->name, "data");
    /* gzip and zstd read as their text; a compressed file is checked whole
     * first, so a corrupt or truncated one sends no row */
    FSGD_TRY(fsgd_zsource_check(path, NULL, err, errsz));
    FILE *f = fsgd_zsource_fopen(path, err, errsz);
    if (!f)
        return FSGD_E_IO;
    fsgd_bus_client_t *rk = fsgd_bus_client_new(bus, FSGD_KCLIENT_DATA_PRODUCER, err, errsz);
    if (!rk) {
        if (f != stdin)
            fclose(f);
        return FSGD_E_KAFKA;
    }
    int rc = 0, P = 0;
    int64_t *lo0 = NULL, *hi0 = NULL;
    uint64_t *sent = NULL;
    uint32_t *part_rows = NULL;
    fsgd_data_summary_t *sum = calloc(1, sizeof *sum);
    if (sum)
        sum->labels.classes = fsgd_rowfmt_weighs(&fmt); /* labels of weighted rows are ±weight */
    /* The job's topics with their settings (existing ones are kept: the
     * embedded cluster makes its own); a name whose model topic holds a job
     * already is refused (the new rows would mix into a finished job),
     * unless the job follows its data topic (follow: rows are meant to
     * arrive while it trains). */
    rc = fsgd_dist_topics_create(rk, job, partitions > 0 ? partitions : 12, err, errsz);
    if (!rc && !job->dist->follow)
        rc = fsgd_dist_topics_unused(rk, job, 0, err, errsz);
    if (!rc && (P = fsgd_bus_partitions(rk, topic, 10000, err, errsz)) < 0)
        rc = P;
    if (!rc) {
        lo0 = calloc(P, sizeof *lo0);
        hi0 = calloc(P, sizeof *hi0);
        sent = calloc(P, sizeof *sent);
        part_rows = calloc(P, sizeof *part_rows);
        if (!lo0 || !hi0 || !sent || !part_rows)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "produce: out of memory");
    }
    if (!rc)
        rc = fsgd_bus_watermarks_all(rk, topic, P, lo0, hi0, 10000, err, errsz);
    st->partitions = P;
    /* Rows go out in binary blocks of K rows (fsgd/rowblock.h), round-robin
     * over the partitions; block_rows 1 keeps one text row a message. */
    const uint32_t K = P > 0 ? fsgd_produce_block_rows(job, P) : 1;
    const int text = job->dist->block_rows == 1;
    /* uniform: every block K rows but the last, so the summary can say where rows are */
    produce_t pr = {.out = {.rk = rk, .topic = topic, .P = P, .fmt = &fmt, .sum = sum, .st = st, .sent = sent,
                            .part_rows = part_rows, .path = path, .K = K, .uniform = 1},
                    .env = env, .progress = progress, .t0 = fsgd_clock_s()};
    pr.last = pr.t0;
    if (!rc)
        rc = text ? send_text_rows(&pr, f, err, errsz) : send_blocks(&pr, f, err, errsz);
    free(pr.out.buf);
    if (!rc && ferror(f) && !(rc = fsgd_zsource_file_error(err, errsz)))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "reading '%s': %m", path);
    if (!rc)
        rc = fsgd_bus_flush(rk, 120000, err, errsz);
    if (!rc)
        rc = check_kept(rk, topic, P, lo0, hi0, sent, err, errsz);
    /* Rows into an empty topic: every message is one row, and the summary
     * of them spares the aggregator reading the whole topic back. */
    int was_empty = !rc && P > 0 && P <= FSGD_SUMMARY_MAX_PARTS;
    for (int p = 0; was_empty && p < P; p++)
        was_empty = lo0[p] == 0 && hi0[p] == 0 && sent[p] <= UINT32_MAX;
    if (!rc && sum && was_empty && pr.out.uniform && st->rows > 0) {
        sum->nparts = (uint32_t)P;
        sum->block_rows = text ? 1 : K;
        for (int p = 0; p < P; p++) {
            sum->ends[p] = (uint32_t)sent[p];
            sum->part_rows[p] = part_rows[p];
        }
        if (fsgd_data_summary_send(rk, job, sum) == 0)
            rc = fsgd_bus_flush(rk, 30000, err, errsz);
    }
    free(sum);
    st->seconds = fsgd_clock_s() - pr.t0;
    st->bad_rows = pr.lst.bad_rows;
    memcpy(st->first_bad, pr.lst.first_bad, sizeof st->first_bad);
    if (!rc && progress)
        progress(env->ctx, st, 1);
    free(lo0);
    free(hi0);
    free(sent);
    fsgd_csr_free(&pr.out.pending);
    free(part_rows);
    if (f != stdin)
        fclose(f);
    fsgd_bus_client_destroy(rk);
    return rc;
}
