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
 * A job's key, name and data-topic rules live in an fsgd_auth_t the caller
 * makes and hands to the transport it runs roles on (fsgd_bus_set_auth,
 * fsgd/bus.h), so roles of one process may belong to different jobs or
 * hold different keys. The key is never printed, logged or written
 * anywhere but the key file that fsgd_auth_key_generate makes; a destroyed
 * object's memory is wiped. */
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

/* One job's message security: its key (FSGD_AUTH_KEY_BYTES, copied; NULL:
 * messages are neither tagged nor checked) and the job every tag is bound
 * to (NULL or "": none; longer names are cut to FSGD_AUTH_JOB_MAX bytes),
 * also the job whose NAME.ctl events are acted on (fsgd_ctl_verify checks
 * their "job" field against it). NULL when libsodium cannot start or
 * without memory. Every reader below takes NULL as "no key, no job". */
#define FSGD_AUTH_JOB_MAX 63
typedef struct fsgd_auth fsgd_auth_t;
fsgd_auth_t *fsgd_auth_new(const uint8_t *key, const char *job);
/* Wipes the key and frees a (NULL: nothing). */
void fsgd_auth_destroy(fsgd_auth_t *a);

/* 1 when a has a key. */
int fsgd_auth_enabled(const fsgd_auth_t *a);
/* The job's name ("" for none). */
const char *fsgd_auth_job(const fsgd_auth_t *a);

/* NAME.data rows: with a job key, every message must carry a tag unless
 * the job allows unsigned rows (job key unsigned_rows: rows an outside
 * client writes with kcat). Set before a role uses a. */
void fsgd_auth_set_unsigned_rows(fsgd_auth_t *a, int allowed);

/* 1 when a NAME.data message of this partition with this (hex) tag header
 * (NULL when absent) and value may be used: no key, unsigned rows allowed
 * and no tag, or a valid tag. A tag that is present is always checked. A
 * row's tag covers its partition (u32 little-endian) before the value: a
 * row copied into another partition (or job) is not this one's. */
int fsgd_auth_row_ok(const fsgd_auth_t *a, const void *hex, size_t hexlen, int32_t partition, const void *value,
                     size_t len);
/* The nonce (sender incarnation and sequence, fsgd/replay.h) of the row
 * message whose tag the calling thread's last fsgd_auth_row_ok accepted: 1,
 * or 0 when that call found no tag to accept (no key, unsigned rows, a bad
 * tag). Inside a read_range callback (fsgd/bus.h) it is the callback's
 * message. */
int fsgd_auth_row_nonce(uint8_t nonce[FSGD_AUTH_NONCE_BYTES]);
/* The tag a row message for partition gets (hex_out: FSGD_AUTH_TAG_HEX + 1
 * bytes). Only when enabled. */
void fsgd_auth_row_tag_hex(fsgd_auth_t *a, char *hex_out, int32_t partition, const void *value, size_t len);

/* skip_bad for NAME.data (job key skip_bad): a row message that fails
 * fsgd_auth_row_ok is read as an empty message (no rows) and counted,
 * instead of stopping the job; every role reads it so, so the rows per
 * offset agree. Set before a role uses a. */
void fsgd_auth_set_skip_bad_rows(fsgd_auth_t *a, int skip);
int fsgd_auth_skip_bad_rows(const fsgd_auth_t *a);
/* Counts one such row; the first is remembered as "topic T partition P
 * offset O: why". Thread safe. */
void fsgd_auth_note_skipped_row(fsgd_auth_t *a, const char *topic, int32_t partition, int64_t offset,
                                const char *why);
/* Rows skipped so far under a, and the first one (may be ""). */
uint64_t fsgd_auth_skipped_rows(fsgd_auth_t *a, char *first, size_t cap);

/* tag = a nonce (a's incarnation and next sequence number,
 * fsgd/replay.h) and the Poly1305 tag of m1[0, m1len) m2[0, m2len) under
 * the one-time key of (domain, nonce); m2 may be NULL. Thread safe. Only
 * when enabled. */
void fsgd_auth_tag(fsgd_auth_t *a, uint8_t tag[FSGD_AUTH_TAG_BYTES], fsgd_auth_domain_t domain, const void *m1,
                   size_t m1len, const void *m2, size_t m2len);

/* 1 when tag is the tag of (domain, m1, m2) under a's key (constant-time
 * comparison), else 0. Only when enabled. */
int fsgd_auth_check(const fsgd_auth_t *a, const uint8_t tag[FSGD_AUTH_TAG_BYTES], fsgd_auth_domain_t domain,
                    const void *m1, size_t m1len, const void *m2, size_t m2len);

/* The same with the tag as FSGD_AUTH_TAG_HEX hex digits (a Kafka header
 * value, len bytes, not NUL-terminated): hex_out gets FSGD_AUTH_TAG_HEX + 1
 * bytes (NUL-terminated). */
void fsgd_auth_tag_hex(fsgd_auth_t *a, char *hex_out, fsgd_auth_domain_t domain, const void *m1, size_t m1len,
                       const void *m2, size_t m2len);
int fsgd_auth_check_hex(const fsgd_auth_t *a, const void *hex, size_t len, fsgd_auth_domain_t domain, const void *m1,
                        size_t m1len, const void *m2, size_t m2len);

#endif
