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

static void set_key(const char *hex)
{
    uint8_t k[FSGD_AUTH_KEY_BYTES];
    for (int i = 0; i < FSGD_AUTH_KEY_BYTES; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        k[i] = (uint8_t)v;
    }
    CU_ASSERT_EQUAL_FATAL(fsgd_auth_set_key(k), 0);
}

static void test_tag_value(void)
{
    set_key(key_hex);
    /* nonce 00..0f; tests/integration/lib/auth.py computes the same:
     * Poly1305 (RFC 8439) of "abc" under BLAKE2b(key=00..1f, "2" 0x01 nonce
     * 0x00), no job name */
    fsgd_auth_set_job(NULL);
    static const char want[] = "000102030405060708090a0b0c0d0e0f3733afbea20594737ea8be49a79853a9";
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(want, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(want, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "ab", 2, "c", 1), 1);
    /* another domain, other bytes, a short tag */
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(want, FSGD_AUTH_TAG_HEX, FSGD_AUTH_CTL, "abc", 3, NULL, 0), 0);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(want, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abd", 3, NULL, 0), 0);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(want, FSGD_AUTH_TAG_HEX - 2, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    /* fresh nonces: two tags of one message differ, both verify */
    char h1[FSGD_AUTH_TAG_HEX + 1], h2[FSGD_AUTH_TAG_HEX + 1];
    fsgd_auth_tag_hex(h1, FSGD_AUTH_FRAME, "abc", 3, NULL, 0);
    fsgd_auth_tag_hex(h2, FSGD_AUTH_FRAME, "abc", 3, NULL, 0);
    CU_ASSERT(strcmp(h1, h2) != 0);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(h1, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(h2, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    /* a nonce changed under the same Poly1305 tag */
    h1[0] = h1[0] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(h1, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    fsgd_auth_set_key(NULL);
}

static size_t make_frame(uint8_t *out, const uint8_t *body, uint32_t len)
{
    fsgd_kframe_t f = {.kind = FSGD_KMSG_SNAPSHOT, .flags = FSGD_KFLAG_FINAL, .gen = 3, .sender = 0, .step = 9,
                       .chunk = 0, .nchunks = 1, .body = body, .body_len = len};
    return fsgd_kframe_write(out, &f);
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
    size_t plain = make_frame(b, body, 100);
    CU_ASSERT_EQUAL(plain, 100 + FSGD_KFRAME_OVERHEAD);
    CU_ASSERT_EQUAL(fsgd_kframe_parse(b, plain, &f, NULL, err, sizeof err), 0);
    /* a key: flag AUTH and 32 bytes of tag */
    set_key(key_hex);
    size_t n = make_frame(a, body, 100);
    CU_ASSERT_EQUAL(n, plain + FSGD_KFRAME_TAG);
    CU_ASSERT_EQUAL(fsgd_kframe_parse(a, n, &f, &used, err, sizeof err), 0);
    CU_ASSERT_EQUAL(used, n);
    CU_ASSERT(f.flags & FSGD_KFLAG_AUTH);
    CU_ASSERT(f.flags & FSGD_KFLAG_FINAL);
    /* the unsigned frame, valid CRC and all: refused */
    CU_ASSERT_EQUAL(fsgd_kframe_parse(b, plain, &f, NULL, err, sizeof err), FSGD_E_AUTH);
    FSGD_ASSERT_CONTAINS(err, "no tag");
    /* one tag bit flipped, then one body byte changed with its CRC fixed */
    a[n - 1] ^= 1;
    CU_ASSERT_EQUAL(fsgd_kframe_parse(a, n, &f, NULL, err, sizeof err), FSGD_E_AUTH);
    a[n - 1] ^= 1;
    memcpy(b, a, n);
    b[FSGD_KFRAME_HEADER + 5] ^= 1;
    fsgd_le_put32(b + FSGD_KFRAME_HEADER + 100, fsgd_crc32c(0, b, FSGD_KFRAME_HEADER + 100));
    CU_ASSERT_EQUAL(fsgd_kframe_parse(b, n, &f, NULL, err, sizeof err), FSGD_E_AUTH);
    FSGD_ASSERT_CONTAINS(err, "not this job key's");
    /* another key's frame */
    set_key("ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
    CU_ASSERT_EQUAL(fsgd_kframe_parse(a, n, &f, NULL, err, sizeof err), FSGD_E_AUTH);
    /* no key at all: a tagged frame cannot be checked, so it is refused;
     * only the unverified parse (a name's reuse) reads it */
    fsgd_auth_set_key(NULL);
    CU_ASSERT_EQUAL(fsgd_kframe_parse(a, n, &f, NULL, err, sizeof err), FSGD_E_AUTH);
    FSGD_ASSERT_CONTAINS(err, "no job key was given");
    CU_ASSERT_EQUAL(fsgd_kframe_parse_unverified(a, n, &f, &used, err, sizeof err), 0);
    CU_ASSERT_EQUAL(used, n);
    /* a tag cut short */
    CU_ASSERT_EQUAL(fsgd_kframe_parse_unverified(a, n - 1, &f, NULL, err, sizeof err), FSGD_E_TRUNCATED);
}

/* NAME.data rows: no key, anything; a key, a valid tag; unsigned rows
 * allowed, no tag too, but a wrong tag never. */
/* A tag binds its job: the same bytes under the same key file are another
 * job's message (issue 42: a finished job's snapshot, control events and
 * rows copied into another job's topics were taken). Values from
 * tests/integration/lib/auth.py. */
static void test_bound_to_job(void)
{
    set_key(key_hex);
    fsgd_auth_set_job("jobA");
    static const char a[] = "000102030405060708090a0b0c0d0e0f67531763592d4ac272602cf4c21a4f93";
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(a, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 1);
    CU_ASSERT_STRING_EQUAL(fsgd_auth_job(), "jobA");
    fsgd_auth_set_job("jobB");
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(a, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    fsgd_auth_set_job("jobAx"); /* a name that starts with the other is another name */
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(a, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    fsgd_auth_set_job(NULL);
    CU_ASSERT_EQUAL(fsgd_auth_check_hex(a, FSGD_AUTH_TAG_HEX, FSGD_AUTH_FRAME, "abc", 3, NULL, 0), 0);
    /* a row: job A, partition 3 */
    static const char r[] = "000102030405060708090a0b0c0d0e0ffac0e1f141b049d8f89748685d60306f";
    const char row[] = "+1 3:1 7:0.5";
    fsgd_auth_set_unsigned_rows(0);
    fsgd_auth_set_job("jobA");
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(r, FSGD_AUTH_TAG_HEX, 3, row, strlen(row)), 1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(r, FSGD_AUTH_TAG_HEX, 2, row, strlen(row)), 0); /* another partition */
    fsgd_auth_set_job("jobB");
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(r, FSGD_AUTH_TAG_HEX, 3, row, strlen(row)), 0); /* another job */
    /* made here and checked here: partition by partition */
    char hex[FSGD_AUTH_TAG_HEX + 1];
    fsgd_auth_row_tag_hex(hex, 7, row, strlen(row));
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(hex, FSGD_AUTH_TAG_HEX, 7, row, strlen(row)), 1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row)), 0);
    fsgd_auth_set_job(NULL);
    fsgd_auth_set_key(NULL);
}

static void test_rows(void)
{
    const char row[] = "+1 3:1 7:0.5";
    char hex[FSGD_AUTH_TAG_HEX + 1];
    fsgd_auth_set_key(NULL);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(NULL, 0, 0, row, strlen(row)), 1);
    set_key(key_hex);
    fsgd_auth_set_unsigned_rows(0);
    fsgd_auth_row_tag_hex(hex, 0, row, strlen(row));
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row)), 1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row) - 1), 0);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(NULL, 0, 0, row, strlen(row)), 0);
    fsgd_auth_set_unsigned_rows(1);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(NULL, 0, 0, row, strlen(row)), 1);
    hex[0] = hex[0] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row)), 0);
    /* a frame's tag of the same bytes is not a row's */
    fsgd_auth_tag_hex(hex, FSGD_AUTH_FRAME, row, strlen(row), NULL, 0);
    CU_ASSERT_EQUAL(fsgd_auth_row_ok(hex, FSGD_AUTH_TAG_HEX, 0, row, strlen(row)), 0);
    fsgd_auth_set_unsigned_rows(0);
    fsgd_auth_set_key(NULL);
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
