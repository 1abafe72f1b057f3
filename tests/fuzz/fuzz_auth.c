/* Fuzz target: authenticated frames (fsgd_kframe_parse with a job key set,
 * fsgd/auth.h; KAFKA_FORMAT.md "Authentication") and the job key file parser
 * (fsgd_auth_key_load).
 *
 * Input: one control byte, then bytes. Control bit 1: the bytes are a key
 * file's content (written to a temporary file of mode 0600 and loaded): a
 * load that succeeds must have read exactly 64 hex digits and an optional
 * newline. Otherwise the bytes are a frame, parsed under a fixed key; with
 * control bit 0 its body length, CRC32C and tag are fixed first (signed with
 * the key), so the fuzzer gets past them. An accepted frame must carry flag
 * AUTH and re-write to its bytes but the tag (a fresh nonce) with a tag that
 * verifies; a frame accepted under the key is
 * refused under another key and, unsigned, without one. Its nonce (the
 * replay check's incarnation and sequence, fsgd/replay.h) is read from the
 * tag after the CRC whatever follows the frame, taken once and refused as a
 * replay the second time, and the rewrite's nonce comes next in sequence;
 * the tag of a NAME.ctl header gives the same nonce as hex. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/auth.h"
#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "fsgd/replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void key_of(uint8_t k[FSGD_AUTH_KEY_BYTES], uint8_t seed)
{
    for (int i = 0; i < FSGD_AUTH_KEY_BYTES; i++)
        k[i] = (uint8_t)(i * 13 + seed);
}

static void key_file(const uint8_t *p, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/fsgd-fuzz-key-%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite(p, 1, n, f);
    fclose(f);
    chmod(path, 0600);
    uint8_t k[FSGD_AUTH_KEY_BYTES];
    char err[512];
    int rc = fsgd_auth_key_load(path, k, err, sizeof err);
    unlink(path);
    if (rc == 0) {
        size_t hex = n && p[n - 1] == '\n' ? n - 1 : n;
        if (hex != 2 * FSGD_AUTH_KEY_BYTES)
            abort();
        for (size_t i = 0; i < hex; i++)
            if (!isxdigit(p[i]))
                abort();
    } else if (rc != FSGD_E_ARG || strncmp(err, "job key file", 12) != 0) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    if (ctl & 2) {
        key_file(p, len);
        return 0;
    }
    uint8_t k[FSGD_AUTH_KEY_BYTES];
    key_of(k, 1);
    fsgd_auth_t *auth = fsgd_auth_new(k, NULL);
    if (!auth)
        abort();
    uint8_t *buf = malloc(len + 1);
    uint8_t *again = malloc(len + FSGD_KFRAME_OVERHEAD + FSGD_KFRAME_TAG + 1);
    if (!buf || !again)
        abort();
    memcpy(buf, p, len);
    if ((ctl & 1) && len >= FSGD_KFRAME_OVERHEAD + FSGD_KFRAME_TAG) {
        size_t body = len - FSGD_KFRAME_OVERHEAD - FSGD_KFRAME_TAG;
        fsgd_le_put32(buf + 32, (uint32_t)body);
        fsgd_le_put16(buf + 6, (uint16_t)(fsgd_le_get16(buf + 6) | FSGD_KFLAG_AUTH));
        fsgd_le_put32(buf + FSGD_KFRAME_HEADER + body, fsgd_crc32c(0, buf, FSGD_KFRAME_HEADER + body));
        fsgd_auth_tag(auth, buf + FSGD_KFRAME_OVERHEAD + body, FSGD_AUTH_FRAME, buf, FSGD_KFRAME_OVERHEAD + body, NULL,
                      0);
    }
    fsgd_kframe_t f;
    size_t used = 0;
    char err[256] = "";
    int rc = fsgd_kframe_parse(buf, len, &f, &used, auth, err, sizeof err);
    if (rc == 0) {
        if (!(f.flags & FSGD_KFLAG_AUTH) || used > len ||
            used != FSGD_KFRAME_OVERHEAD + FSGD_KFRAME_TAG + (size_t)f.body_len)
            abort();
        /* written again: the same bytes but the tag, whose nonce is fresh,
         * and that tag verifies too */
        fsgd_kframe_t g;
        if (fsgd_kframe_write(again, &f, auth) != used || memcmp(again, buf, used - FSGD_KFRAME_TAG) != 0 ||
            fsgd_kframe_parse(again, used, &g, NULL, auth, err, sizeof err) != 0)
            abort();
        uint8_t nonce[FSGD_REPLAY_NONCE_BYTES], next[FSGD_REPLAY_NONCE_BYTES];
        if (fsgd_replay_frame_nonce(buf, len, nonce) != 1 ||
            memcmp(nonce, buf + used - FSGD_KFRAME_TAG, sizeof nonce) != 0 ||
            fsgd_replay_frame_nonce(again, used, next) != 1 || memcmp(next, nonce, sizeof nonce) == 0)
            abort();
        /* signed here: the rewrite is this process's next message */
        if ((ctl & 1) && (memcmp(next, nonce, 8) != 0 || fsgd_le_get64(next + 8) <= fsgd_le_get64(nonce + 8)))
            abort();
        fsgd_replay_t *r = fsgd_replay_new();
        if (!r || fsgd_replay_frame(r, 0, 5, buf, len) != 0 || fsgd_replay_frame(r, 0, 6, buf, len) != 1 ||
            fsgd_replay_frame(r, 0, 5, buf, len) != 0 || fsgd_replay_frame(r, 1, 6, buf, len) != 0)
            abort();
        fsgd_replay_destroy(r);
        char hex[FSGD_AUTH_TAG_HEX + 1];
        for (int i = 0; i < FSGD_KFRAME_TAG; i++)
            snprintf(hex + 2 * i, 3, "%02x", buf[used - FSGD_KFRAME_TAG + i]);
        uint8_t from_hex[FSGD_REPLAY_NONCE_BYTES];
        if (fsgd_replay_hex_nonce(hex, FSGD_AUTH_TAG_HEX, from_hex) != 1 || memcmp(from_hex, nonce, sizeof nonce))
            abort();
        uint8_t other[FSGD_AUTH_KEY_BYTES];
        key_of(other, 2);
        fsgd_auth_t *wrong = fsgd_auth_new(other, NULL);
        if (!wrong || fsgd_kframe_parse(buf, len, &f, NULL, wrong, err, sizeof err) != FSGD_E_AUTH)
            abort();
        fsgd_auth_destroy(wrong);
        if (fsgd_kframe_parse(buf, len, &f, NULL, NULL, err, sizeof err) != FSGD_E_AUTH)
            abort();
    } else if (rc > 0 || !memchr(err, '\0', sizeof err)) {
        abort();
    }
    fsgd_auth_destroy(auth);
    free(buf);
    free(again);
    return 0;
}
