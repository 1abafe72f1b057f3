/* The producer's input read and parsed ahead of sending (produce_reader.h).
 * Parsing was most of `fsgd produce`'s CPU (perf: 43% in parse_line) and ran
 * between the sends on one thread: here two threads each take the next
 * chunk of whole lines in turn (reading it is serialised, the parse is
 * not) and the caller takes the parsed chunks in file order from a ring of
 * SLOTS, so reading, parsing and sending overlap and memory stays bounded. */
#include "produce_reader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/input.h"
#include "fsgd/zsource.h"

#define THREADS 2
#define SLOTS 4 /* one being sent, one ready, two being parsed */
#define CHUNK_DEFAULT ((size_t)2 << 20)

typedef struct slot {
    fsgd_produce_chunk_t c;
    char *buf; /* whole lines */
    size_t cap, len;
    size_t skip;         /* header bytes at the start (a hashed spec's first line) */
    uint64_t first_line; /* the number of the first line after the header */
    int last;            /* nothing follows: the end, or an error in c.rc */
    int ready;           /* parsed; under m */
} slot_t;

struct fsgd_produce_reader {
    FILE *f;
    const char *path;
    const fsgd_rowfmt_t *fmt;
    size_t chunk;
    /* reading, under rm */
    pthread_mutex_t rm;
    char *carry; /* the unfinished last line of the chunk before */
    size_t carry_len, carry_cap;
    uint64_t line; /* the number of the next line */
    int eof;
    /* the ring, under m */
    pthread_mutex_t m;
    pthread_cond_t cv_free, cv_ready;
    slot_t slots[SLOTS];
    uint64_t next_read, consumed;
    int read_done, stop;
    /* the caller's */
    int handed, finished;
    pthread_t tid[THREADS];
    int nthreads;
};

static int grow(char **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    char *b = realloc(*buf, need);
    if (!b)
        return -1;
    *buf = b;
    *cap = need;
    return 0;
}

static uint64_t count_lines(const char *b, size_t n)
{
    uint64_t c = 0;
    for (const char *e = b + n; (b = memchr(b, '\n', (size_t)(e - b))) != NULL; b++)
        c++;
    return c;
}

/* Fills s with the next whole lines (under rm): the carried start of a
 * line, then up to a chunk more, cut after the last line end; the rest is
 * carried to the next chunk. */
static void read_into(fsgd_produce_reader_t *r, slot_t *s)
{
    fsgd_produce_chunk_t *c = &s->c;
    c->rc = 0;
    c->err[0] = '\0';
    s->len = s->skip = 0;
    s->last = 0;
    if (grow(&s->buf, &s->cap, r->carry_len + r->chunk) < 0)
        goto nomem;
    if (r->carry_len)
        memcpy(s->buf, r->carry, r->carry_len);
    s->len = r->carry_len;
    r->carry_len = 0;
    size_t cut;
    for (;;) {
        size_t want = s->cap - s->len;
        size_t got = fread(s->buf + s->len, 1, want, r->f);
        s->len += got;
        if (got < want) {
            if (ferror(r->f)) {
                if (!(c->rc = fsgd_zsource_file_error(c->err, sizeof c->err))) /* a gzip or zstd file's error */
                    c->rc = fsgd_err_fmt(c->err, sizeof c->err, FSGD_E_IO, "reading '%s': %m", r->path);
                s->last = 1;
                return;
            }
            r->eof = 1;
        }
        const char *nl = s->len ? memrchr(s->buf, '\n', s->len) : NULL;
        if (r->eof) {
            cut = s->len;
            break;
        }
        if (nl) {
            cut = (size_t)(nl - s->buf) + 1;
            break;
        }
        if (s->len > FSGD_INPUT_MAX_LINE) { /* /dev/zero: refused, not read without end */
            c->rc = fsgd_input_line_error(c->err, sizeof c->err, r->path, r->line);
            s->last = 1;
            return;
        }
        if (grow(&s->buf, &s->cap, 2 * s->cap) < 0)
            goto nomem;
    }
    if (s->len > cut) {
        if (grow(&r->carry, &r->carry_cap, s->len - cut) < 0)
            goto nomem;
        memcpy(r->carry, s->buf + cut, s->len - cut);
    }
    r->carry_len = s->len - cut;
    s->len = cut;
    s->first_line = r->line;
    if (r->line == 1 && r->fmt->hashed && r->fmt->spec.header) {
        const char *nl = memchr(s->buf, '\n', s->len); /* the header names the columns: never sent */
        s->skip = nl ? (size_t)(nl - s->buf) + 1 : s->len;
        s->first_line = 2;
    }
    r->line += count_lines(s->buf, s->len);
    if (s->len && s->buf[s->len - 1] != '\n')
        r->line++; /* a last line without a line end */
    c->end_line = r->line - 1;
    c->bytes = s->len - s->skip;
    s->last = r->eof;
    return;
nomem:
    c->rc = fsgd_err_fmt(c->err, sizeof c->err, FSGD_E_NOMEM, "produce: out of memory reading '%s'", r->path);
    s->last = 1;
}

static void parse_slot(fsgd_produce_reader_t *r, slot_t *s)
{
    fsgd_produce_chunk_t *c = &s->c;
    fsgd_csr_clear(&c->rows);
    memset(&c->st, 0, sizeof c->st);
    if (c->rc || s->len <= s->skip)
        return;
    const fsgd_parse_ctx_t at = {.src = r->path, .first_line = s->first_line, .stats = &c->st};
    long got = fsgd_rowfmt_parse(r->fmt, s->buf + s->skip, s->len - s->skip, &at, &c->rows, c->err, sizeof c->err);
    if (got < 0) {
        c->rc = (int)got;
        s->last = 1;
    }
}

/* Reads and parses the next chunk into its slot, waiting for a free one.
 * Returns 0 when there is nothing more to read (the end, or stopped). */
static int work_one(fsgd_produce_reader_t *r)
{
    pthread_mutex_lock(&r->rm);
    pthread_mutex_lock(&r->m);
    while (!r->stop && !r->read_done && r->next_read - r->consumed >= SLOTS)
        pthread_cond_wait(&r->cv_free, &r->m);
    if (r->stop || r->read_done) {
        pthread_mutex_unlock(&r->m);
        pthread_mutex_unlock(&r->rm);
        return 0;
    }
    slot_t *s = &r->slots[r->next_read++ % SLOTS];
    pthread_mutex_unlock(&r->m);
    read_into(r, s);
    if (s->last) {
        pthread_mutex_lock(&r->m);
        r->read_done = 1;
        pthread_mutex_unlock(&r->m);
    }
    pthread_mutex_unlock(&r->rm);
    parse_slot(r, s);
    pthread_mutex_lock(&r->m);
    s->ready = 1;
    pthread_cond_broadcast(&r->cv_ready);
    pthread_mutex_unlock(&r->m);
    return 1;
}

static void *parser_main(void *arg)
{
    while (work_one(arg))
        ;
    return NULL;
}

fsgd_produce_reader_t *fsgd_produce_reader_new(FILE *f, const char *path, const fsgd_rowfmt_t *fmt,
                                               size_t chunk_bytes)
{
    fsgd_produce_reader_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    const char *kb = getenv("FSGD_PRODUCE_CHUNK_KB");
    if (kb && atol(kb) > 0)
        chunk_bytes = (size_t)atol(kb) << 10;
    *r = (fsgd_produce_reader_t){.f = f, .path = path, .fmt = fmt, .chunk = chunk_bytes ? chunk_bytes : CHUNK_DEFAULT,
                                 .line = 1};
    pthread_mutex_init(&r->rm, NULL);
    pthread_mutex_init(&r->m, NULL);
    pthread_cond_init(&r->cv_free, NULL);
    pthread_cond_init(&r->cv_ready, NULL);
    /* without threads (none could start, or FSGD_PRODUCE_THREADS=0: the
     * bench's one-thread reference) the caller parses each chunk itself */
    const char *th = getenv("FSGD_PRODUCE_THREADS");
    int threads = th && *th ? atoi(th) : THREADS;
    for (int i = 0; i < threads && i < THREADS; i++) {
        if (pthread_create(&r->tid[r->nthreads], NULL, parser_main, r) != 0)
            break;
        r->nthreads++;
    }
    return r;
}

const fsgd_produce_chunk_t *fsgd_produce_reader_next(fsgd_produce_reader_t *r)
{
    if (r->handed) { /* the chunk given out before is done with: its slot is free */
        pthread_mutex_lock(&r->m);
        r->slots[r->consumed % SLOTS].ready = 0;
        r->consumed++;
        pthread_cond_broadcast(&r->cv_free);
        pthread_mutex_unlock(&r->m);
        r->handed = 0;
    }
    if (r->finished)
        return NULL;
    slot_t *s = &r->slots[r->consumed % SLOTS];
    pthread_mutex_lock(&r->m);
    while (!s->ready) {
        if (r->nthreads == 0) {
            pthread_mutex_unlock(&r->m);
            work_one(r);
            pthread_mutex_lock(&r->m);
            continue;
        }
        pthread_cond_wait(&r->cv_ready, &r->m);
    }
    pthread_mutex_unlock(&r->m);
    if (s->last)
        r->finished = 1;
    r->handed = 1;
    return &s->c;
}

void fsgd_produce_reader_destroy(fsgd_produce_reader_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->m);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv_free);
    pthread_mutex_unlock(&r->m);
    for (int i = 0; i < r->nthreads; i++)
        pthread_join(r->tid[i], NULL);
    for (int i = 0; i < SLOTS; i++) {
        fsgd_csr_free(&r->slots[i].c.rows);
        free(r->slots[i].buf);
    }
    free(r->carry);
    pthread_mutex_destroy(&r->rm);
    pthread_mutex_destroy(&r->m);
    pthread_cond_destroy(&r->cv_free);
    pthread_cond_destroy(&r->cv_ready);
    free(r);
}
