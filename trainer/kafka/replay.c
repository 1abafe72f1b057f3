/* Replayed messages (fsgd/replay.h): per stream, each sender
 * incarnation's highest sequence and a 256-bit window below it, and the
 * offsets found to be replays. */
#include "fsgd/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "fsgd/auth.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"

#define WORDS (FSGD_REPLAY_WINDOW / 64)
/* Incarnations a stream remembers. fsgd's processes are a handful a job;
 * tags of an older writer (a random nonce each, tests/integration/lib/auth.py
 * before sequences) are an incarnation a message. Past the bound the half
 * seen longest ago is forgotten, by offset, so every reader forgets alike. */
#define SENDERS_MAX 4096

typedef struct sender {
    uint64_t inc, top; /* incarnation, highest sequence taken */
    uint64_t win[WORDS]; /* bit i: sequence top - i was taken */
    int64_t last;        /* offset of its last message: who is forgotten first */
    int used;
} sender_t;

typedef struct stream {
    int64_t from, next; /* verdicts are kept for [from, next); next -1: nothing read */
    sender_t *tab;      /* open addressing by incarnation, cap a power of two */
    size_t cap, n;
    int64_t *replays; /* offsets in [from, next) found to be replays, increasing */
    size_t nrep, caprep;
} stream_t;

struct fsgd_replay {
    stream_t *s;
    size_t ns;
    uint64_t count;
    char first[200];
};

fsgd_replay_t *fsgd_replay_new(void) { return calloc(1, sizeof(fsgd_replay_t)); }

void fsgd_replay_destroy(fsgd_replay_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->ns; i++) {
        free(r->s[i].tab);
        free(r->s[i].replays);
    }
    free(r->s);
    free(r);
}

static stream_t *stream_of(fsgd_replay_t *r, int32_t stream)
{
    if (stream < 0)
        return NULL;
    if ((size_t)stream >= r->ns) {
        size_t n = (size_t)stream + 1;
        stream_t *s = realloc(r->s, n * sizeof *s);
        if (!s)
            return NULL;
        for (size_t i = r->ns; i < n; i++)
            s[i] = (stream_t){.next = -1};
        r->s = s;
        r->ns = n;
    }
    return &r->s[stream];
}

static size_t slot_of(const stream_t *s, uint64_t inc)
{
    size_t i = (size_t)(inc * 0x9E3779B97F4A7C15ull) & (s->cap - 1);
    while (s->tab[i].used && s->tab[i].inc != inc)
        i = (i + 1) & (s->cap - 1);
    return i;
}

static int cmp_last_desc(const void *a, const void *b)
{
    int64_t x = ((const sender_t *)a)->last, y = ((const sender_t *)b)->last;
    return (x < y) - (x > y);
}

/* The table at cap (a power of two), keeping the `keep` senders seen last. */
static int rebuild(stream_t *s, size_t cap, size_t keep)
{
    sender_t *old = s->tab;
    size_t oldcap = s->cap, n = 0;
    sender_t *live = malloc((s->n ? s->n : 1) * sizeof *live);
    sender_t *tab = calloc(cap, sizeof *tab);
    if (!live || !tab) {
        free(live);
        free(tab);
        return FSGD_E_NOMEM;
    }
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].used)
            live[n++] = old[i];
    if (n > keep) {
        qsort(live, n, sizeof *live, cmp_last_desc);
        n = keep;
    }
    s->tab = tab;
    s->cap = cap;
    s->n = n;
    for (size_t i = 0; i < n; i++)
        s->tab[slot_of(s, live[i].inc)] = live[i];
    free(live);
    free(old);
    return 0;
}

static int get_bit(const sender_t *e, uint64_t d) { return (int)((e->win[d / 64] >> (d % 64)) & 1); }
static void set_bit(sender_t *e, uint64_t d) { e->win[d / 64] |= (uint64_t)1 << (d % 64); }

/* Moves the window up by d sequences. */
static void shift(sender_t *e, uint64_t d)
{
    if (d >= FSGD_REPLAY_WINDOW) {
        memset(e->win, 0, sizeof e->win);
        return;
    }
    unsigned words = (unsigned)(d / 64), bits = (unsigned)(d % 64);
    for (int i = WORDS - 1; i >= 0; i--) {
        uint64_t v = i - (int)words >= 0 ? e->win[i - words] << bits : 0;
        if (bits && i - (int)words - 1 >= 0)
            v |= e->win[i - words - 1] >> (64 - bits);
        e->win[i] = v;
    }
}

/* 0 fresh (recorded), 1 replay; seen: the highest sequence before it. */
static int decide(stream_t *s, uint64_t inc, uint64_t seq, int64_t offset, uint64_t *seen)
{
    if (s->n + 1 > s->cap / 2) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        size_t keep = s->n;
        if (s->n >= SENDERS_MAX) {
            cap = s->cap;
            keep = SENDERS_MAX / 2;
        }
        if (rebuild(s, cap, keep) < 0)
            return FSGD_E_NOMEM;
    }
    sender_t *e = &s->tab[slot_of(s, inc)];
    *seen = e->used ? e->top : 0;
    if (!e->used) {
        *e = (sender_t){.inc = inc, .top = seq, .last = offset, .used = 1};
        set_bit(e, 0);
        s->n++;
        return 0;
    }
    e->last = offset;
    if (seq > e->top) {
        shift(e, seq - e->top);
        e->top = seq;
        set_bit(e, 0);
        return 0;
    }
    uint64_t d = e->top - seq;
    if (d >= FSGD_REPLAY_WINDOW || get_bit(e, d))
        return 1;
    set_bit(e, d);
    return 0;
}

static int was_replay(const stream_t *s, int64_t offset)
{
    size_t lo = 0, hi = s->nrep;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->replays[mid] < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->nrep && s->replays[lo] == offset;
}

int fsgd_replay_check(fsgd_replay_t *r, int32_t stream, int64_t offset, const uint8_t nonce[FSGD_REPLAY_NONCE_BYTES])
{
    if (!r)
        return 0;
    stream_t *s = stream_of(r, stream);
    if (!s)
        return FSGD_E_NOMEM;
    if (s->next < 0)
        s->from = s->next = offset;
    if (offset < s->from)
        return 0; /* before what this reader read first: never taken, nothing known */
    if (offset < s->next)
        return was_replay(s, offset);
    uint64_t inc = fsgd_le_get64(nonce), seq = fsgd_le_get64(nonce + 8), seen = 0;
    int v = decide(s, inc, seq, offset, &seen);
    if (v < 0)
        return v;
    s->next = offset + 1;
    if (!v)
        return 0;
    if (s->nrep == s->caprep) {
        size_t cap = s->caprep ? 2 * s->caprep : 16;
        int64_t *p = realloc(s->replays, cap * sizeof *p);
        if (!p)
            return FSGD_E_NOMEM;
        s->replays = p;
        s->caprep = cap;
    }
    s->replays[s->nrep++] = offset;
    if (!r->count++)
        snprintf(r->first, sizeof r->first,
                 "stream %d offset %lld: incarnation %016llx sequence %llu, at or below %llu taken before", (int)stream,
                 (long long)offset, (unsigned long long)inc, (unsigned long long)seq, (unsigned long long)seen);
    return 1;
}

int64_t fsgd_replay_next(const fsgd_replay_t *r, int32_t stream)
{
    return r && stream >= 0 && (size_t)stream < r->ns ? r->s[stream].next : -1;
}

uint64_t fsgd_replay_count(const fsgd_replay_t *r, char *first, size_t cap)
{
    if (first && cap)
        snprintf(first, cap, "%s", r ? r->first : "");
    return r ? r->count : 0;
}

int fsgd_replay_frame_nonce(const uint8_t *frame, size_t len, uint8_t nonce[FSGD_REPLAY_NONCE_BYTES])
{
    if (len < FSGD_KFRAME_OVERHEAD + FSGD_AUTH_TAG_BYTES || !(fsgd_le_get16(frame + 6) & FSGD_KFLAG_AUTH))
        return 0;
    /* after the body and its CRC, by the header's length: bytes past the
     * tag (a parse allows them) are no part of the frame */
    uint64_t at = (uint64_t)FSGD_KFRAME_OVERHEAD + fsgd_le_get32(frame + 32);
    if (at + FSGD_AUTH_TAG_BYTES > len)
        return 0;
    memcpy(nonce, frame + at, FSGD_REPLAY_NONCE_BYTES);
    return 1;
}

int fsgd_replay_hex_nonce(const void *hex, size_t len, uint8_t nonce[FSGD_REPLAY_NONCE_BYTES])
{
    size_t n = 0;
    return hex && len == FSGD_AUTH_TAG_HEX &&
           sodium_hex2bin(nonce, FSGD_REPLAY_NONCE_BYTES, hex, 2 * FSGD_REPLAY_NONCE_BYTES, NULL, &n, NULL) == 0 &&
           n == FSGD_REPLAY_NONCE_BYTES;
}

int fsgd_replay_frame(fsgd_replay_t *r, int32_t stream, int64_t offset, const uint8_t *frame, size_t len)
{
    uint8_t nonce[FSGD_REPLAY_NONCE_BYTES];
    return fsgd_replay_frame_nonce(frame, len, nonce) ? fsgd_replay_check(r, stream, offset, nonce) : 0;
}

int fsgd_replay_ctl(fsgd_replay_t *r, int64_t offset, const void *mac, size_t mac_len)
{
    uint8_t nonce[FSGD_REPLAY_NONCE_BYTES];
    return fsgd_replay_hex_nonce(mac, mac_len, nonce) ? fsgd_replay_check(r, 0, offset, nonce) : 0;
}

int fsgd_replay_row(fsgd_replay_t *r, int32_t partition, int64_t offset)
{
    uint8_t nonce[FSGD_REPLAY_NONCE_BYTES];
    if (!r)
        return 0;
    if (fsgd_auth_row_nonce(nonce))
        return fsgd_replay_check(r, partition, offset, nonce);
    /* read all the same: where a reader must catch up from counts every offset */
    stream_t *s = stream_of(r, partition);
    if (!s)
        return FSGD_E_NOMEM;
    if (s->next < 0)
        s->from = s->next = offset;
    if (offset >= s->next)
        s->next = offset + 1;
    return 0;
}
