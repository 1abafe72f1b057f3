/* Authenticated messages on a job's topics (trainer/KAFKA_FORMAT.md,
 * "Authentication").
 *
 * A job key is 32 random bytes kept in a file as 64 hex digits (a trailing
 * newline allowed). Every fsgd process of the job loads it; every message it
 * writes on a job topic carries a tag — a 16-byte nonce never used before
 * (the writer's incarnation and sequence number, fsgd/replay.h) and the
 * Poly1305 tag (crypto_onetimeauth) of the message's bytes under a one-time
 * key, keyed BLAKE2b (crypto_generichash) of the job key over the scheme's
 * version, a domain byte, the nonce and the job's name — and every message
 * it reads must carry a valid one. A message is so bound to its job (the
 * name) and its topic (the domain); a row also to its partition; and the
 * nonce lets readers tell a replayed copy from the original. The primitives are libsodium's, never code of our own;
 * tags are compared in constant time.
 *
 * The key is process-wide (like the Kafka security options, fsgd/kbus.h):
 * set once by main before any role starts, read by the frame, control and
 * data paths. It is never printed, logged or written anywhere but the key
 * file that fsgd_auth_key_generate makes. */
#ifndef FSGD_AUTH_H
#define FSGD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define FSGD_AUTH_KEY_BYTES 32
#define FSGD_AUTH_NONCE_BYTES 16
#define FSGD_AUTH_TAG_BYTES 32 /* a random nonce, then a Poly1305 tag */
#define FSGD_AUTH_TAG_HEX (2 * FSGD_AUTH_TAG_BYTES) /* a tag in a Kafka header, hex digits */

/* What a tag covers: one domain per kind of message, so a tag made for one
 * can never pass as another's. */
typedef enum fsgd_auth_domain {
    FSGD_AUTH_FRAME = 1, /* NAME.grads and NAME.model frames: every byte up to and with the CRC32C */
    FSGD_AUTH_CTL = 2,   /* NAME.ctl: the Kafka key (event type), a zero byte, the JSON value */
    FSGD_AUTH_DATA = 3,  /* NAME.data: the message value (rows as text) */
} fsgd_auth_domain_t;

/* Reads a key file: a regular file (never a link), owned by this user,
 * readable by nobody else (mode & 077 == 0, as ssh asks of a private key),
 * holding exactly 64 hex digits and an optional newline. 0, or FSGD_E_ARG
 * naming the file and what is wrong (never its content). */
int fsgd_auth_key_load(const char *path, uint8_t key[FSGD_AUTH_KEY_BYTES], char *err, size_t errsz);

/* Makes a new key file at path (O_EXCL, mode 0600) from libsodium's CSPRNG.
 * Fails when the file exists. 0, or FSGD_E_ARG/IO naming the path. */
int fsgd_auth_key_generate(const char *path, char *err, size_t errsz);

/* Sets the process's job key (NULL: messages are neither tagged nor
 * checked, the default). Copies the key. 0, or FSGD_E_STATE when libsodium
 * cannot start. Call before any role thread starts. */
int fsgd_auth_set_key(const uint8_t *key);

/* 1 when a job key is set. */
int fsgd_auth_enabled(void);

/* The job every tag is bound to (NULL or "": none; longer names are cut to
 * FSGD_AUTH_JOB_MAX bytes). Process-wide like the key, set by main before
 * any role starts; also the job whose NAME.ctl events are acted on
 * (fsgd_ctl_verify checks their "job" field against it). */
#define FSGD_AUTH_JOB_MAX 63
void fsgd_auth_set_job(const char *job);
const char *fsgd_auth_job(void);

/* NAME.data rows: with a job key, every message must carry a tag unless
 * the job allows unsigned rows (job key unsigned_rows: rows an outside
 * client writes with kcat). Set before any role starts. */
void fsgd_auth_set_unsigned_rows(int allowed);

/* 1 when a NAME.data message of this partition with this (hex) tag header
 * (NULL when absent) and value may be used: no key, unsigned rows allowed
 * and no tag, or a valid tag. A tag that is present is always checked. A
 * row's tag covers its partition (u32 little-endian) before the value: a
 * row copied into another partition (or job) is not this one's. */
int fsgd_auth_row_ok(const void *hex, size_t hexlen, int32_t partition, const void *value, size_t len);
/* The nonce (sender incarnation and sequence, fsgd/replay.h) of the row
 * message whose tag the calling thread's last fsgd_auth_row_ok accepted: 1,
 * or 0 when that call found no tag to accept (no key, unsigned rows, a bad
 * tag). Inside a read_range callback (fsgd/bus.h) it is the callback's
 * message. */
int fsgd_auth_row_nonce(uint8_t nonce[FSGD_AUTH_NONCE_BYTES]);
/* The tag a row message for partition gets (hex_out: FSGD_AUTH_TAG_HEX + 1
 * bytes). Only when enabled. */
void fsgd_auth_row_tag_hex(char *hex_out, int32_t partition, const void *value, size_t len);

/* skip_bad for NAME.data (job key skip_bad): a row message that fails
 * fsgd_auth_row_ok is read as an empty message (no rows) and counted,
 * instead of stopping the job; every role reads it so, so the rows per
 * offset agree. Set before any role starts. */
void fsgd_auth_set_skip_bad_rows(int skip);
int fsgd_auth_skip_bad_rows(void);
/* Counts one such row; the first is remembered as "topic T partition P
 * offset O: why". Thread safe. */
void fsgd_auth_note_skipped_row(const char *topic, int32_t partition, int64_t offset, const char *why);
/* Rows skipped so far in this process, and the first one (may be ""). */
uint64_t fsgd_auth_skipped_rows(char *first, size_t cap);

/* tag = a nonce (this process's incarnation and next sequence number,
 * fsgd/replay.h) and the Poly1305 tag of a[0, alen) b[0, blen) under
 * the one-time key of (domain, nonce); b may be NULL. Thread safe. Only when
 * enabled. */
void fsgd_auth_tag(uint8_t tag[FSGD_AUTH_TAG_BYTES], fsgd_auth_domain_t domain, const void *a, size_t alen,
                   const void *b, size_t blen);

/* 1 when tag is the tag of (domain, a, b) under the job key (constant-time
 * comparison), else 0. */
int fsgd_auth_check(const uint8_t tag[FSGD_AUTH_TAG_BYTES], fsgd_auth_domain_t domain, const void *a, size_t alen,
                    const void *b, size_t blen);

/* The same with the tag as FSGD_AUTH_TAG_HEX hex digits (a Kafka header
 * value, len bytes, not NUL-terminated): hex_out gets FSGD_AUTH_TAG_HEX + 1
 * bytes (NUL-terminated). */
void fsgd_auth_tag_hex(char *hex_out, fsgd_auth_domain_t domain, const void *a, size_t alen, const void *b,
                       size_t blen);
int fsgd_auth_check_hex(const void *hex, size_t len, fsgd_auth_domain_t domain, const void *a, size_t alen,
                        const void *b, size_t blen);

#endif
