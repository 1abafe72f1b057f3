/* Authenticated messages (fsgd/auth.h, issue 27): key files are checked
 * (permissions, owner, links, content) and never echoed in errors; tags
 * are a nonce and Poly1305 under a one-time key from keyed BLAKE2b (the
 * value tests/integration/lib/auth.py computes); frames carry a tag with a key set and
 * are refused without a valid one; frames of another key, a flipped tag
 * byte, a dropped flag all fail. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/auth.h"
#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "testlib.h"

static const char key_hex[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

static void write_file(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    fchmod(fd, mode);
    close(fd);
}

static void test_key_file_checks(void)
{
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    char err[512], text[80];
    const char *p = fsgd_test_tmp("k1");
    snprintf(text, sizeof text, "%s\n", key_hex);
    write_file(p, text, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), 0);
    CU_ASSERT_EQUAL(key[0], 0);
    CU_ASSERT_EQUAL(key[31], 31);
    /* readable by others: refused, and the error never holds the key */
    write_file(p, text, 0644);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "mode 0644");
    CU_ASSERT_PTR_NULL(strstr(err, "0001020304"));
    /* wrong content */
    write_file(p, "00112233\n", 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "expected 64 hex digits");
    snprintf(text, sizeof text, "%s00\n", key_hex);
    write_file(p, text, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), FSGD_E_ARG);
    snprintf(text, sizeof text, "%.63sg", key_hex);
    write_file(p, text, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), FSGD_E_ARG);
    /* a Windows line end (issue 42: refused as "more than 64 hex digits") */
    snprintf(text, sizeof text, "%s\r\n", key_hex);
    write_file(p, text, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), 0);
    CU_ASSERT_EQUAL(key[31], 31);
    snprintf(text, sizeof text, "%s\r", key_hex);
    write_file(p, text, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), 0);
    snprintf(text, sizeof text, "%s0\r\n", key_hex); /* 65 digits and a CRLF */
    write_file(p, text, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "more than 64 hex digits");
    snprintf(text, sizeof text, "%s\n\n", key_hex); /* two line ends: not a key file */
    write_file(p, text, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), FSGD_E_ARG);
    /* a symbolic link to a good key file is refused */
    snprintf(text, sizeof text, "%s", key_hex);
    write_file(p, text, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(p, key, err, sizeof err), 0);
    const char *l = fsgd_test_tmp("k1.link");
    unlink(l);
    CU_ASSERT_EQUAL_FATAL(symlink(p, l), 0);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(l, key, err, sizeof err), FSGD_E_ARG);
    FSGD_ASSERT_CONTAINS(err, "symbolic link");
    CU_ASSERT_EQUAL(fsgd_auth_key_load(fsgd_test_tmp("absent"), key, err, sizeof err), FSGD_E_ARG);
    /* generate: mode 0600, loads, never over an existing file */
    const char *g = fsgd_test_tmp("gen.key");
    unlink(g);
    CU_ASSERT_EQUAL(fsgd_auth_key_generate(g, err, sizeof err), 0);
    struct stat st;
    CU_ASSERT_EQUAL(stat(g, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
    CU_ASSERT_EQUAL(fsgd_auth_key_load(g, key, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_auth_key_generate(g, err, sizeof err), FSGD_E_ARG);
}

/* The security of job `job` under the key of hex (NULL: no key). */
static fsgd_auth_t *auth_of(const char *hex, const char *job)
{
    uint8_t k[FSGD_AUTH_KEY_BYTES];
    for (int i = 0; hex && i < FSGD_AUTH_KEY_BYTES; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        k[i] = (uint8_t)v;
    }
    fsgd_auth_t *a = fsgd_auth_new(hex ? k : NULL, job);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    return a;
}

static void test_tag_value(void)
{
    /* nonce 00..0f; tests/integration/lib/auth.py computes the same:
     * Poly1305 (RFC 8439) of "abc" under BLAKE2b(key=00..1f, "2" 0x01 nonce
     * 0x00), no job name */
    fsgd_auth_t *k = auth_of(key_hex, NULL);
    CU_ASSERT_EQUAL(fsgd_auth_enabled(k), 1);
    CU_ASSERT_STRING_EQUAL(fsgd_auth_job(k), "");
    static const char want[] = "000102030405060708090a0b0c0d0e0f3733afbea20594737ea8be49a79853a9";
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, want, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, want, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "ab", 2, "c", 1), 1);
    /* another domain, other bytes, a short tag */
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, want, FSGD_AUTH_TAG_HEX, FSGD_AUTH_CTL, "abc", 3, NULL, 0), 0);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, want, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abd", 3, NULL, 0), 0);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, want, FSGD_AUTH_TAG_HEX - 2, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    /* fresh nonces: two tags of one message differ, both verify */
    char h1[FSGD_AUTH_TAG_HEX + 1], h2[FSGD_AUTH_TAG_HEX + 1];
    fsgd_auth_tag_hex(k, h1, FSGD_AUTH_FRAME, "abc", 3, NULL, 0);
    fsgd_auth_tag_hex(k, h2, FSGD_AUTH_FRAME, "abc", 3, NULL, 0);
    CU_ASSERT(strcmp(h1, h2) != 0);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, h1, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, h2, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    /* a nonce changed under the same Poly1305 tag */
    h1[0] = h1[0] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, h1, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    /* two objects of one key: each its own incarnation, so their nonces
     * never collide (the one-time key's condition) */
    fsgd_auth_t *k2 = auth_of(key_hex, NULL);
    fsgd_auth_tag_hex(k2, h2, FSGD_AUTH_FRAME, "abc", 3, NULL, 0);
    CU_ASSERT(memcmp(h1 + 2, h2 + 2, 14) != 0); /* incarnations (h1's first digit was changed above) */
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(k, h2, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    fsgd_auth_destroy(k2);
    fsgd_auth_destroy(k);
    /* none: no key, no job */
    CU_ASSERT_EQUAL(fsgd_auth_enabled(NULL), 0);
    CU_ASSERT_STRING_EQUAL(fsgd_auth_job(NULL), "");
}

static size_t make_frame(uint8_t *out, const uint8_t *body, uint32_t len, fsgd_auth_t *auth)
{
    fsgd_kframe_t f = {.kind = FSGD_KMSG_SNAPSHOT, .flags = FSGD_KFLAG_FINAL, .gen = 3, .sender = 0, .step = 9,
                       .chunk = 0, .nchunks = 1, .body = body, .body_len = len};
    return fsgd_kframe_write(out, &f, auth);
}

static void test_frames(void)
{
    uint8_t body[100], a[100 + FSGD_KFRAME_OVERHEAD + FSGD_KFRAME_TAG], b[sizeof a];
    for (int i = 0; i < 100; i++)
        body[i] = (uint8_t)(i * 7);
    char err[256];
    fsgd_kframe_t f;
    size_t used;
    /* no key: no tag, accepted as before */
    size_t plain = make_frame(b, body, 100, NULL);
    CU_ASSERT_EQUAL(plain, 100 + FSGD_KFRAME_OVERHEAD);
    CU_ASSERT_EQUAL(fsgd_kframe_parse(b, plain, &f, NULL, NULL, err, sizeof err), 0);
    /* a key: flag AUTH and 32 bytes of tag */
    fsgd_auth_t *k = auth_of(key_hex, NULL);
    size_t n = make_frame(a, body, 100, k);
    CU_ASSERT_EQUAL(n, plain + FSGD_KFRAME_TAG);
    CU_ASSERT_EQUAL(fsgd_kframe_parse(a, n, &f, &used, k, err, sizeof err), 0);
    CU_ASSERT_EQUAL(used, n);
    CU_ASSERT(f.flags & FSGD_KFLAG_AUTH);
    CU_ASSERT(f.flags & FSGD_KFLAG_FINAL);
    /* the unsigned frame, valid CRC and all: refused */
    CU_ASSERT_EQUAL(fsgd_kframe_parse(b, plain, &f, NULL, k, err, sizeof err), FSGD_E_AUTH);
    FSGD_ASSERT_CONTAINS(err, "no tag");
    /* one tag bit flipped, then one body byte changed with its CRC fixed */
    a[n - 1] ^= 1;
    CU_ASSERT_EQUAL(fsgd_kframe_parse(a, n, &f, NULL, k, err, sizeof err), FSGD_E_AUTH);
    a[n - 1] ^= 1;
    memcpy(b, a, n);
    b[FSGD_KFRAME_HEADER + 5] ^= 1;
    fsgd_le_put32(b + FSGD_KFRAME_HEADER + 100, fsgd_crc32c(0, b, FSGD_KFRAME_HEADER + 100));
    CU_ASSERT_EQUAL(fsgd_kframe_parse(b, n, &f, NULL, k, err, sizeof err), FSGD_E_AUTH);
    FSGD_ASSERT_CONTAINS(err, "not this job key's");
    /* another key's reader */
    fsgd_auth_t *other = auth_of("ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", NULL);
    CU_ASSERT_EQUAL(fsgd_kframe_parse(a, n, &f, NULL, other, err, sizeof err), FSGD_E_AUTH);
    /* no key at all: a tagged frame cannot be checked, so it is refused;
     * only the unverified parse (a name's reuse) reads it */
    CU_ASSERT_EQUAL(fsgd_kframe_parse(a, n, &f, NULL, NULL, err, sizeof err), FSGD_E_AUTH);
    FSGD_ASSERT_CONTAINS(err, "no job key was given");
    CU_ASSERT_EQUAL(fsgd_kframe_parse_unverified(a, n, &f, &used, err, sizeof err), 0);
    CU_ASSERT_EQUAL(used, n);
    /* a tag cut short */
    CU_ASSERT_EQUAL(fsgd_kframe_parse_unverified(a, n - 1, &f, NULL, err, sizeof err), FSGD_E_TRUNCATED);
    fsgd_auth_destroy(other);
    fsgd_auth_destroy(k);
}

/* A tag binds its job: the same bytes under the same key file are another
 * job's message (issue 42: a finished job's snapshot, control events and
 * rows copied into another job's topics were taken). Values from
 * tests/integration/lib/auth.py. */
static void test_bound_to_job(void)
{
    fsgd_auth_t *ja = auth_of(key_hex, "jobA"), *jb = auth_of(key_hex, "jobB"), *jax = auth_of(key_hex, "jobAx"),
                *none = auth_of(key_hex, NULL);
    static const char a[] = "000102030405060708090a0b0c0d0e0f67531763592d4ac272602cf4c21a4f93";
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(ja, a, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    CU_ASSERT_STRING_EQUAL(fsgd_auth_job(ja), "jobA");
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(jb, a, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    /* a name that starts with the other is another name */
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(jax, a, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(none, a, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    /* a row: job A, partition 3 */
    static const char r[] = "000102030405060708090a0b0c0d0e0ffac0e1f141b049d8f89748685d60306f";
    const char row[] = "+1 3:1 7:0.5";
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(ja, r, FSGD_AUTH_TAG_HEX, 3, row, strlen(row)), 1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(ja, r, FSGD_AUTH_TAG_HEX, 2, row, strlen(row)), 0); /* another partition */
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(jb, r, FSGD_AUTH_TAG_HEX, 3, row, strlen(row)), 0); /* another job */
    /* made here and checked here: partition by partition */
    char hex[FSGD_AUTH_TAG_HEX + 1];
    fsgd_auth_row_tag_hex(jb, hex, 7, row, strlen(row));
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(jb, hex, FSGD_AUTH_TAG_HEX, 7, row, strlen(row)), 1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(jb, hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row)), 0);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(ja, hex, FSGD_AUTH_TAG_HEX, 7, row, strlen(row)), 0);
    fsgd_auth_destroy(ja);
    fsgd_auth_destroy(jb);
    fsgd_auth_destroy(jax);
    fsgd_auth_destroy(none);
}

/* NAME.data rows: no key, anything; a key, a valid tag; unsigned rows
 * allowed, no tag too, but a wrong tag never. */
static void test_rows(void)
{
    const char row[] = "+1 3:1 7:0.5";
    char hex[FSGD_AUTH_TAG_HEX + 1];
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(NULL, NULL, 0, 0, row, strlen(row)), 1);
    fsgd_auth_t *nokey = auth_of(NULL, "j");
    CU_ASSERT_EQUAL(fsgd_auth_enabled(nokey), 0);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(nokey, NULL, 0, 0, row, strlen(row)), 1);
    fsgd_auth_t *k = auth_of(key_hex, NULL);
    fsgd_auth_row_tag_hex(k, hex, 0, row, strlen(row));
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(k, hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row)), 1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(k, hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row) - 1), 0);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(k, NULL, 0, 0, row, strlen(row)), 0);
    fsgd_auth_set_unsigned_rows(k, 1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(k, NULL, 0, 0, row, strlen(row)), 1);
    hex[0] = hex[0] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(k, hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row)), 0);
    /* a frame's tag of the same bytes is not a row's */
    fsgd_auth_tag_hex(k, hex, FSGD_AUTH_FRAME, row, strlen(row), NULL, 0);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(k, hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row)), 0);
    /* skipped rows are counted per object */
    char first[256];
    CU_ASSERT_EQUAL(fsgd_auth_skipped_rows(k, first, sizeof first), 0);
    fsgd_auth_note_skipped_row(k, "j.data", 2, 40, "a row without a tag");
    fsgd_auth_note_skipped_row(k, "j.data", 3, 41, "a row without a tag");
    CU_ASSERT_EQUAL(fsgd_auth_skipped_rows(k, first, sizeof first), 2);
    CU_ASSERT_STRING_EQUAL(first, "topic j.data partition 2 offset 40: a row without a tag");
    CU_ASSERT_EQUAL(fsgd_auth_skipped_rows(nokey, first, sizeof first), 0);
    fsgd_auth_destroy(k);
    fsgd_auth_destroy(nokey);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"key files: permissions, owner, links, content, never echoed", test_key_file_checks},
        {"tags: nonce + Poly1305 under a per-message key, domain-separated", test_tag_value},
        {"frames: tagged with a key, refused without a valid tag", test_frames},
        {"data rows: tagged, or unsigned where the job allows", test_rows},
        {"tags are bound to the job, rows to their partition", test_bound_to_job},
        {NULL, NULL},
    };
    fsgd_test_suite("authenticated messages", cases);
}
