/* Job keys and message tags (fsgd/auth.h): libsodium does the
 * cryptography (keyed BLAKE2b, the CSPRNG, constant-time comparison). */
#include "fsgd/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgd/error.h"

static void fsgd_auth_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* One job's message security. The nonce state is per object: an
 * incarnation drawn at creation (and again in a forked child, whose tags
 * must never repeat its parent's) and a sequence, so each object's tags
 * come in the order it made them, as readers check (fsgd/replay.h). */
struct fsgd_auth {
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    int have_key;
    char job[FSGD_AUTH_JOB_MAX + 1];
    int unsigned_rows, skip_bad_rows;
    pthread_mutex_t mu; /* the nonce and the skipped-row count */
    uint8_t incarnation[8];
    pid_t incarnation_pid;
    uint64_t sequence;
    uint64_t skipped;
    char first_skipped[256];
};

fsgd_auth_t *fsgd_auth_new(const uint8_t *key, const char *job)
{
    if (sodium_init() < 0)
        return NULL;
    fsgd_auth_t *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    if (key) {
        memcpy(a->key, key, sizeof a->key);
        a->have_key = 1;
    }
    snprintf(a->job, sizeof a->job, "%s", job ? job : "");
    return a;
}

void fsgd_auth_destroy(fsgd_auth_t *a)
{
    if (!a)
        return;
    pthread_mutex_destroy(&a->mu);
    sodium_memzero(a, sizeof *a);
    free(a);
}

int fsgd_auth_enabled(const fsgd_auth_t *a) { return a && a->have_key; }

const char *fsgd_auth_job(const fsgd_auth_t *a) { return a ? a->job : ""; }

void fsgd_auth_set_unsigned_rows(fsgd_auth_t *a, int allowed) { a->unsigned_rows = allowed != 0; }

void fsgd_auth_set_skip_bad_rows(fsgd_auth_t *a, int skip) { a->skip_bad_rows = skip != 0; }
int fsgd_auth_skip_bad_rows(const fsgd_auth_t *a) { return a && a->skip_bad_rows; }

void fsgd_auth_note_skipped_row(fsgd_auth_t *a, const char *topic, int32_t partition, int64_t offset, const char *why)
{
    pthread_mutex_lock(&a->mu);
    if (!a->skipped++)
        snprintf(a->first_skipped, sizeof a->first_skipped, "topic %s partition %d offset %lld: %s", topic,
                 (int)partition, (long long)offset, why);
    pthread_mutex_unlock(&a->mu);
}

uint64_t fsgd_auth_skipped_rows(fsgd_auth_t *a, char *first, size_t cap)
{
    if (first && cap)
        first[0] = '\0';
    if (!a)
        return 0;
    pthread_mutex_lock(&a->mu);
    uint64_t n = a->skipped;
    if (first && cap)
        snprintf(first, cap, "%s", a->first_skipped);
    pthread_mutex_unlock(&a->mu);
    return n;
}

/* The nonce of the row message this thread accepted last with a tag: the
 * readers' callbacks see the value only, and their replay check needs the
 * sender and sequence (fsgd_auth_row_nonce). Scratch of the reading
 * thread, not configuration: whichever job's reader ran last set it. */
static _Thread_local uint8_t row_nonce[FSGD_AUTH_NONCE_BYTES];
static _Thread_local int row_nonce_set;

int fsgd_auth_row_ok(const fsgd_auth_t *a, const void *hex, size_t hexlen, int32_t partition, const void *value,
                     size_t len)
{
    row_nonce_set = 0;
    if (!fsgd_auth_enabled(a))
        return 1;
    if (!hex)
        return a->unsigned_rows;
    uint8_t p[4];
    fsgd_auth_le32(p, (uint32_t)partition);
    size_t n = 0;
    int ok = fsgd_auth_check_hex(a, hex, hexlen, FSGD_AUTH_DATA, p, 4, value, len);
    row_nonce_set = ok && sodium_hex2bin(row_nonce, sizeof row_nonce, hex, 2 * sizeof row_nonce, NULL, &n, NULL) == 0 &&
                    n == sizeof row_nonce;
    return ok;
}

int fsgd_auth_row_nonce(uint8_t nonce[FSGD_AUTH_NONCE_BYTES])
{
    if (row_nonce_set)
        memcpy(nonce, row_nonce, sizeof row_nonce);
    return row_nonce_set;
}

void fsgd_auth_row_tag_hex(fsgd_auth_t *a, char *hex_out, int32_t partition, const void *value, size_t len)
{
    uint8_t p[4];
    fsgd_auth_le32(p, (uint32_t)partition);
    fsgd_auth_tag_hex(a, hex_out, FSGD_AUTH_DATA, p, 4, value, len);
}

/* A tag is a 16-byte nonce and the Poly1305 tag of the message under a key
 * used for this message only: BLAKE2b keyed with the job key over (the
 * scheme's version '2', the domain, the nonce, the job name's length as
 * one byte and its bytes). That is NaCl's secretbox
 * construction (a PRF gives each message its own one-time key), chosen over
 * keyed BLAKE2b on the whole message because Poly1305 runs about 3.5 times
 * faster on a snapshot's megabytes (tests/bench/bench_auth.c); the domain
 * in the key derivation keeps one kind of message's tag from passing as
 * another's. */
static void one_time_key(const fsgd_auth_t *a, uint8_t otk[crypto_onetimeauth_KEYBYTES], fsgd_auth_domain_t domain,
                         const uint8_t *nonce)
{
    /* version '2': '1' had no job name, so one job's messages passed in
     * another's topics when both used one key file (issue 42) */
    uint8_t in[2 + FSGD_AUTH_NONCE_BYTES + 1 + FSGD_AUTH_JOB_MAX] = {'2', (uint8_t)domain};
    memcpy(in + 2, nonce, FSGD_AUTH_NONCE_BYTES);
    size_t jn = strlen(a->job);
    in[2 + FSGD_AUTH_NONCE_BYTES] = (uint8_t)jn;
    memcpy(in + 3 + FSGD_AUTH_NONCE_BYTES, a->job, jn);
    crypto_generichash(otk, crypto_onetimeauth_KEYBYTES, in, 3 + FSGD_AUTH_NONCE_BYTES + jn, a->key, sizeof a->key);
}

static void poly(const fsgd_auth_t *a, uint8_t out[crypto_onetimeauth_BYTES], fsgd_auth_domain_t domain,
                 const uint8_t *nonce, const void *m1, size_t m1len, const void *m2, size_t m2len)
{
    uint8_t otk[crypto_onetimeauth_KEYBYTES];
    one_time_key(a, otk, domain, nonce);
    crypto_onetimeauth_state st;
    crypto_onetimeauth_init(&st, otk);
    crypto_onetimeauth_update(&st, m1, m1len);
    if (m2 && m2len)
        crypto_onetimeauth_update(&st, m2, m2len);
    crypto_onetimeauth_final(&st, out);
    sodium_memzero(otk, sizeof otk);
}

/* The nonce: the object's incarnation and its next sequence number (u64
 * LE): unique per message, as the one-time key needs. */
static void next_nonce(fsgd_auth_t *a, uint8_t nonce[FSGD_AUTH_NONCE_BYTES])
{
    pthread_mutex_lock(&a->mu);
    if (a->incarnation_pid != getpid()) {
        randombytes_buf(a->incarnation, sizeof a->incarnation);
        a->incarnation_pid = getpid();
        a->sequence = 0;
    }
    uint64_t q = ++a->sequence;
    memcpy(nonce, a->incarnation, sizeof a->incarnation);
    pthread_mutex_unlock(&a->mu);
    fsgd_auth_le32(nonce + 8, (uint32_t)q);
    fsgd_auth_le32(nonce + 12, (uint32_t)(q >> 32));
}

void fsgd_auth_tag(fsgd_auth_t *a, uint8_t tag[FSGD_AUTH_TAG_BYTES], fsgd_auth_domain_t domain, const void *m1,
                   size_t m1len, const void *m2, size_t m2len)
{
    next_nonce(a, tag);
    poly(a, tag + FSGD_AUTH_NONCE_BYTES, domain, tag, m1, m1len, m2, m2len);
}

int fsgd_auth_check(const fsgd_auth_t *a, const uint8_t tag[FSGD_AUTH_TAG_BYTES], fsgd_auth_domain_t domain,
                    const void *m1, size_t m1len, const void *m2, size_t m2len)
{
    uint8_t want[crypto_onetimeauth_BYTES];
    poly(a, want, domain, tag, m1, m1len, m2, m2len);
    return sodium_memcmp(want, tag + FSGD_AUTH_NONCE_BYTES, crypto_onetimeauth_BYTES) == 0;
}

void fsgd_auth_tag_hex(fsgd_auth_t *a, char *hex_out, fsgd_auth_domain_t domain, const void *m1, size_t m1len,
                       const void *m2, size_t m2len)
{
    uint8_t tag[FSGD_AUTH_TAG_BYTES];
    fsgd_auth_tag(a, tag, domain, m1, m1len, m2, m2len);
    sodium_bin2hex(hex_out, FSGD_AUTH_TAG_HEX + 1, tag, sizeof tag);
}

int fsgd_auth_check_hex(const fsgd_auth_t *a, const void *hex, size_t len, fsgd_auth_domain_t domain, const void *m1,
                        size_t m1len, const void *m2, size_t m2len)
{
    uint8_t tag[FSGD_AUTH_TAG_BYTES];
    size_t n = 0;
    if (!hex || len != FSGD_AUTH_TAG_HEX ||
        sodium_hex2bin(tag, sizeof tag, hex, len, NULL, &n, NULL) != 0 || n != sizeof tag)
        return 0;
    return fsgd_auth_check(a, tag, domain, m1, m1len, m2, m2len);
}

int fsgd_auth_key_load(const char *path, uint8_t key[FSGD_AUTH_KEY_BYTES], char *err, size_t errsz)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "job key file '%s': %s", path,
                            errno == ELOOP ? "a symbolic link (name the file itself)" : strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "job key file '%s': %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "job key file '%s' is not a regular file", path);
    else if (st.st_uid != geteuid())
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "job key file '%s' belongs to uid %u, not to this user (%u)", path,
                          (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & 077)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG,
                          "job key file '%s' has mode %04o: others may read it; chmod 600 it (a key others can "
                          "read authenticates nothing)",
                          path, (unsigned)(st.st_mode & 07777));
    char buf[2 * FSGD_AUTH_KEY_BYTES + 3]; /* the digits, "\r\n", and one more to see a longer file */
    ssize_t n = 0;
    if (!rc) {
        n = read(fd, buf, sizeof buf);
        if (n < 0)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "job key file '%s': %s", path, strerror(errno));
    }
    close(fd);
    if (rc)
        return rc;
    size_t len = (size_t)n;
    /* one line end, Unix or Windows (a key saved by a Windows editor) */
    if (len && len < sizeof buf && buf[len - 1] == '\n')
        len--;
    if (len && len < sizeof buf && buf[len - 1] == '\r')
        len--;
    if (len > 2 * FSGD_AUTH_KEY_BYTES)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "job key file '%s': more than %d hex digits", path,
                          2 * FSGD_AUTH_KEY_BYTES);
    size_t got = 0;
    if (!rc && (len != 2 * FSGD_AUTH_KEY_BYTES ||
                sodium_hex2bin(key, FSGD_AUTH_KEY_BYTES, buf, len, NULL, &got, NULL) != 0 ||
                got != FSGD_AUTH_KEY_BYTES))
        rc = fsgd_err_fmt(err, errsz, FSGD_E_ARG, "job key file '%s': expected %d hex digits (fsgd run makes one)",
                          path, 2 * FSGD_AUTH_KEY_BYTES);
    sodium_memzero(buf, sizeof buf);
    if (rc)
        sodium_memzero(key, FSGD_AUTH_KEY_BYTES);
    return rc;
}

int fsgd_auth_key_generate(const char *path, char *err, size_t errsz)
{
    if (sodium_init() < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "libsodium did not start");
    uint8_t key[FSGD_AUTH_KEY_BYTES];
    char hex[2 * FSGD_AUTH_KEY_BYTES + 2];
    randombytes_buf(key, sizeof key);
    sodium_bin2hex(hex, sizeof hex, key, sizeof key);
    sodium_memzero(key, sizeof key);
    size_t len = strlen(hex);
    hex[len++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = 0;
    if (fd < 0)
        rc = fsgd_err_fmt(err, errsz, errno == EEXIST ? FSGD_E_ARG : FSGD_E_IO, "job key file '%s': %s", path,
                          strerror(errno));
    else if (fchmod(fd, 0600) != 0 || write(fd, hex, len) != (ssize_t)len || fsync(fd) != 0)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "job key file '%s': %s", path, strerror(errno));
    if (fd >= 0 && close(fd) != 0 && !rc)
        rc = fsgd_err_fmt(err, errsz, FSGD_E_IO, "job key file '%s': %s", path, strerror(errno));
    if (rc && fd >= 0)
        unlink(path);
    sodium_memzero(hex, sizeof hex);
    return rc;
}
