/* Replayed messages (fsgd/replay.h, issue 42): tags' nonces are a sender
 * incarnation and an increasing sequence; a reader takes each (incarnation,
 * sequence) once, lets a reordered one within the window pass, remembers
 * its verdicts by offset (a range read twice gets the same ones), and a
 * restarted sender (a new incarnation) is never a replay. Row messages get
 * the verdict on the nonce fsgd_auth_row_ok accepted. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsgd/auth.h"
#include "fsgd/crc32c.h"
#include "fsgd/dist.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/replay.h"
#include "testlib.h"

static void nonce_of(uint8_t n[FSGD_REPLAY_NONCE_BYTES], uint64_t inc, uint64_t seq)
{
    fsgd_le_put64(n, inc);
    fsgd_le_put64(n + 8, seq);
}

static int check(fsgd_replay_t *r, int32_t stream, int64_t off, uint64_t inc, uint64_t seq)
{
    uint8_t n[FSGD_REPLAY_NONCE_BYTES];
    nonce_of(n, inc, seq);
    return fsgd_replay_check(r, stream, off, n);
}

static void test_sequences(void)
{
    fsgd_replay_t *r = fsgd_replay_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(fsgd_replay_next(r, 0), -1);
    CU_ASSERT_EQUAL(check(r, 0, 0, 7, 1), 0);
    CU_ASSERT_EQUAL(check(r, 0, 1, 7, 2), 0);
    CU_ASSERT_EQUAL(check(r, 0, 2, 7, 1), 1); /* a copy of offset 0 */
    CU_ASSERT_EQUAL(check(r, 0, 3, 9, 1), 0); /* a restarted sender: a new incarnation, sequence 1 again */
    CU_ASSERT_EQUAL(check(r, 0, 4, 7, 5), 0); /* gaps are fine (other partitions, compaction) */
    CU_ASSERT_EQUAL(check(r, 0, 5, 7, 3), 0); /* reordered by a retry, never seen: within the window */
    CU_ASSERT_EQUAL(check(r, 0, 6, 7, 3), 1);
    CU_ASSERT_EQUAL(check(r, 0, 7, 7, 5), 1);
    CU_ASSERT_EQUAL(check(r, 1, 0, 7, 1), 0); /* streams are apart */
    char first[200];
    CU_ASSERT_EQUAL(fsgd_replay_count(r, first, sizeof first), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(first, "stream 0 offset 2"));
    /* read again: the same verdicts, whatever the nonce says now */
    CU_ASSERT_EQUAL(check(r, 0, 2, 7, 99), 1);
    CU_ASSERT_EQUAL(check(r, 0, 1, 7, 2), 0);
    CU_ASSERT_EQUAL(check(r, 0, 6, 7, 3), 1);
    CU_ASSERT_EQUAL(fsgd_replay_next(r, 0), 8);
    CU_ASSERT_EQUAL(fsgd_replay_count(r, NULL, 0), 3);
    /* the window: 256 below the highest is too old to tell, a replay */
    CU_ASSERT_EQUAL(check(r, 0, 8, 7, 1000), 0);
    CU_ASSERT_EQUAL(check(r, 0, 9, 7, 1000 - 255), 0);
    CU_ASSERT_EQUAL(check(r, 0, 10, 7, 1000 - 256), 1);
    CU_ASSERT_EQUAL(check(r, 0, 11, 7, 1000 - 255), 1);
    /* a jump past the window forgets what was below */
    CU_ASSERT_EQUAL(check(r, 0, 12, 7, 1000 + 64 + 3), 0);
    CU_ASSERT_EQUAL(check(r, 0, 13, 7, 1000 + 3), 0);
    CU_ASSERT_EQUAL(check(r, 0, 14, 7, 1000), 1);
    CU_ASSERT_EQUAL(check(r, 0, 15, 7, 1000 + 64), 0);
    /* a reader that started at offset 100 knows nothing before it */
    CU_ASSERT_EQUAL(check(r, 2, 100, 7, 1), 0);
    CU_ASSERT_EQUAL(check(r, 2, 50, 7, 1), 0);
    CU_ASSERT_EQUAL(fsgd_replay_next(r, 2), 101);
    fsgd_replay_destroy(r);
    fsgd_replay_destroy(NULL);
}

/* A sender seen longest ago is forgotten past the bound, the same for every
 * reader; the senders of now stay. */
static void test_many_senders(void)
{
    fsgd_replay_t *r = fsgd_replay_new();
    int64_t off = 0;
    CU_ASSERT_EQUAL(check(r, 0, off++, 1, 1), 0);
    for (uint64_t i = 0; i < 10000; i++) {
        CU_ASSERT_EQUAL(check(r, 0, off++, 1000 + i, 5), 0);
        if (i % 100 == 0)
            CU_ASSERT_EQUAL(check(r, 0, off++, 1, 2 + i), 0); /* sender 1 keeps writing */
    }
    CU_ASSERT_EQUAL(check(r, 0, off++, 1, 2), 1);
    CU_ASSERT_EQUAL(check(r, 0, off++, 1000 + 9999, 5), 1);
    CU_ASSERT_EQUAL(check(r, 0, off++, 1000, 5), 0); /* forgotten */
    fsgd_replay_destroy(r);
}

/* The key the tags below are made with (NULL: untagged). */
static fsgd_auth_t *key;

static void set_key(const char *job)
{
    uint8_t k[FSGD_AUTH_KEY_BYTES];
    for (int i = 0; i < FSGD_AUTH_KEY_BYTES; i++)
        k[i] = (uint8_t)i;
    fsgd_auth_destroy(key);
    key = fsgd_auth_new(k, job);
    CU_ASSERT_PTR_NOT_NULL_FATAL(key);
}

static void clear_key(void)
{
    fsgd_auth_destroy(key);
    key = NULL;
}

/* Tags' nonces: one incarnation, sequences 1, 2, ... in tagging order; a
 * child process gets its own incarnation. */
static void test_nonces(void)
{
    set_key(NULL);
    uint8_t a[FSGD_AUTH_TAG_BYTES], b[FSGD_AUTH_TAG_BYTES];
    fsgd_auth_tag(key, a, FSGD_AUTH_FRAME, "x", 1, NULL, 0);
    fsgd_auth_tag(key, b, FSGD_AUTH_CTL, "y", 1, NULL, 0);
    CU_ASSERT_EQUAL(memcmp(a, b, 8), 0);
    CU_ASSERT_EQUAL(fsgd_le_get64(b + 8), fsgd_le_get64(a + 8) + 1);
    int fds[2];
    CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        uint8_t c[FSGD_AUTH_TAG_BYTES];
        fsgd_auth_tag(key, c, FSGD_AUTH_FRAME, "x", 1, NULL, 0);
        _exit(write(fds[1], c, sizeof c) == (ssize_t)sizeof c ? 0 : 1);
    }
    uint8_t c[FSGD_AUTH_TAG_BYTES];
    CU_ASSERT_EQUAL(read(fds[0], c, sizeof c), (ssize_t)sizeof c);
    waitpid(pid, NULL, 0);
    close(fds[0]);
    close(fds[1]);
    CU_ASSERT_NOT_EQUAL(memcmp(a, c, 8), 0);
    CU_ASSERT_EQUAL(fsgd_le_get64(c + 8), 1);
    clear_key();
}

/* A row message copied back into its own partition verifies (the same
 * bytes, the same tag) and is then a replay. */
static void test_rows(void)
{
    set_key("jobR");
    const char *rows[] = {"+1 3:1", "-1 4:1", "+1 5:1"};
    char tags[3][FSGD_AUTH_TAG_HEX + 1];
    for (int i = 0; i < 3; i++)
        fsgd_auth_row_tag_hex(key, tags[i], 2, rows[i], strlen(rows[i]));
    fsgd_replay_t *r = fsgd_replay_new();
    int order[] = {0, 1, 2, 0, 1};
    for (int i = 0; i < 5; i++) {
        int k = order[i];
        CU_ASSERT_EQUAL(fsgd_auth_row_ok(key, tags[k], FSGD_AUTH_TAG_HEX, 2, rows[k], strlen(rows[k])), 1);
        CU_ASSERT_EQUAL(fsgd_replay_row(r, 2, 10 + i), i >= 3);
    }
    /* a row without a tag (unsigned rows allowed) says nothing, but is read */
    fsgd_auth_set_unsigned_rows(key, 1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(key, NULL, 0, 2, rows[0], strlen(rows[0])), 1);
    CU_ASSERT_EQUAL(fsgd_replay_row(r, 2, 15), 0);
    CU_ASSERT_EQUAL(fsgd_replay_next(r, 2), 16);
    fsgd_auth_set_unsigned_rows(key, 0);
    CU_ASSERT_EQUAL(fsgd_replay_count(r, NULL, 0), 2);
    fsgd_replay_destroy(r);
    clear_key();
}

/* A signed frame's nonce is at its end; a ctl tag's in its first 32 hex
 * digits. */
static void test_nonce_places(void)
{
    set_key(NULL);
    static const uint8_t body[5] = {1, 2, 3, 4, 5};
    fsgd_kframe_t f = {.kind = FSGD_KMSG_SNAPSHOT, .gen = 3, .step = 4, .nchunks = 1, .body = body, .body_len = 5};
    uint8_t buf[5 + FSGD_KFRAME_OVERHEAD + FSGD_AUTH_TAG_BYTES + 7];
    size_t n = fsgd_kframe_write(buf, &f, key);
    CU_ASSERT_EQUAL_FATAL(n, sizeof buf - 7);
    uint8_t nonce[FSGD_REPLAY_NONCE_BYTES], again[FSGD_REPLAY_NONCE_BYTES];
    CU_ASSERT_EQUAL(fsgd_replay_frame_nonce(buf, n, nonce), 1);
    /* bytes after the tag (a parse lets them be) are no nonce */
    memset(buf + n, 0xEE, 7);
    CU_ASSERT_EQUAL(fsgd_replay_frame_nonce(buf, n + 7, again), 1);
    CU_ASSERT_EQUAL(memcmp(again, nonce, sizeof nonce), 0);
    CU_ASSERT_EQUAL(fsgd_replay_frame_nonce(buf, n - 1, again), 0); /* a cut tag */
    fsgd_kframe_write(buf, &f, key);
    CU_ASSERT_EQUAL(fsgd_replay_frame_nonce(buf, n, again), 1);
    CU_ASSERT_EQUAL(fsgd_le_get64(again + 8), fsgd_le_get64(nonce + 8) + 1);
    char hex[FSGD_AUTH_TAG_HEX + 1];
    fsgd_auth_tag_hex(key, hex, FSGD_AUTH_CTL, "k", 2, "{}", 2);
    CU_ASSERT_EQUAL(fsgd_replay_hex_nonce(hex, FSGD_AUTH_TAG_HEX, nonce), 1);
    CU_ASSERT_EQUAL(fsgd_le_get64(nonce + 8), fsgd_le_get64(again + 8) + 1);
    CU_ASSERT_EQUAL(fsgd_replay_hex_nonce(hex, FSGD_AUTH_TAG_HEX - 1, nonce), 0);
    hex[3] = 'z';
    CU_ASSERT_EQUAL(fsgd_replay_hex_nonce(hex, FSGD_AUTH_TAG_HEX, nonce), 0);
    clear_key();
    n = fsgd_kframe_write(buf, &f, key);
    CU_ASSERT_EQUAL(fsgd_replay_frame_nonce(buf, n, nonce), 0); /* unsigned */
}

/* A snapshot frame of generation 5 at step (flags: FSGD_KFLAG_FINAL or
 * 0): a 1-partition step state and a logistic model of dim 3 with bias,
 * every weight w. Tagged when a key is set. */
static size_t snapshot_frame(uint8_t *out, uint64_t step, uint16_t flags, float w)
{
    uint8_t body[44 + 28 + 16];
    fsgd_le_put32(body, 1);       /* epoch */
    fsgd_le_put32(body + 4, 1);   /* nparts */
    fsgd_le_put64(body + 8, 0);   /* adam t */
    fsgd_le_put64(body + 16, 0);  /* start */
    fsgd_le_put64(body + 24, 0);  /* pos */
    fsgd_le_put64(body + 32, 5);  /* end */
    fsgd_le_put32(body + 40, 5);  /* quota */
    fsgd_le_put32(body + 44, 1);  /* logistic */
    fsgd_le_put32(body + 48, 1);  /* has_bias */
    fsgd_le_putf32(body + 52, 1.0f);
    fsgd_le_put64(body + 56, 3);  /* dim */
    fsgd_le_put64(body + 64, 4);  /* weights */
    for (int i = 0; i < 4; i++)
        fsgd_le_putf32(body + 72 + 4 * i, w);
    fsgd_kframe_t f = {.kind = FSGD_KMSG_SNAPSHOT, .flags = flags, .gen = 5, .step = step, .nchunks = 1,
                       .body = body, .body_len = sizeof body};
    return fsgd_kframe_write(out, &f, key);
}

/* fsgd model assemble: a tagged snapshot copied after the final one is a
 * replay (skipped, counted); a tagged snapshot far ahead (an insider's)
 * does not hide the job's own final snapshot after it; without tags an
 * older snapshot of the generation after a newer one is a copy and does
 * not take the model back. */
static void test_assemble(void)
{
    uint8_t stream[4 * 256];
    fsgd_model_t m;
    uint64_t step = 0;
    char err[256] = "";
    set_key(NULL);
    size_t first = snapshot_frame(stream, 0, 0, 1.0f), n = first;
    n += snapshot_frame(stream + n, 100000, 0, 9.0f);
    n += snapshot_frame(stream + n, 7, FSGD_KFLAG_FINAL, 3.0f);
    memcpy(stream + n, stream, first); /* the opening snapshot, copied */
    n += first;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_assemble_stream(stream, n, key, 1, &m, &step, err, sizeof err), 0);
    CU_ASSERT_EQUAL(step, 7);
    CU_ASSERT_EQUAL(m.w[0], 3.0f);
    FSGD_ASSERT_CONTAINS(err, "skipped 1 replayed messages");
    fsgd_model_free(&m);
    clear_key();
    /* untagged: step 3's after step 7's (an exact copy of a message read
     * is a duplicate to the reassembly already) */
    n = snapshot_frame(stream, 0, 0, 1.0f);
    n += snapshot_frame(stream + n, 7, 0, 3.0f);
    n += snapshot_frame(stream + n, 3, 0, 1.0f);
    err[0] = 0;
    CU_ASSERT_EQUAL_FATAL(fsgd_model_assemble_stream(stream, n, key, 0, &m, &step, err, sizeof err), 0);
    CU_ASSERT_EQUAL(step, 7);
    CU_ASSERT_EQUAL(m.w[0], 3.0f);
    FSGD_ASSERT_CONTAINS(err, "skipped 1 replayed messages");
    fsgd_model_free(&m);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"sequences: each taken once, a window for reordering, verdicts kept by offset", test_sequences},
        {"senders past the bound: the one seen longest ago is forgotten", test_many_senders},
        {"tag nonces: one incarnation a process, sequences in order", test_nonces},
        {"a row copied into its own partition is a replay", test_rows},
        {"where the nonce is: a frame's end, a ctl tag's hex", test_nonce_places},
        {"assemble: replays skipped, a snapshot ahead hides no final one, no untagged step back", test_assemble},
        {NULL, NULL},
    };
    fsgd_test_suite("replayed messages", cases);
}
