/* Replayed messages: a copy of a message its sender wrote before
 * (trainer/KAFKA_FORMAT.md, "Exactly once under replay").
 *
 * Every tag's nonce (fsgd/auth.h) is the sender's incarnation (8 random
 * bytes a process draws once) and its sequence number (u64 little-endian,
 * 1, 2, ... in the order the process tags its messages). The tag covers the
 * nonce, so neither can be changed without the key. A reader keeps, for
 * each stream it reads (a topic's partition), the highest sequence of each
 * incarnation it has taken and which of the 256 below it came: a message
 * whose sequence is at or below its incarnation's highest and was taken
 * already, or is 256 or more below it, is a replay (RFC 4303's
 * anti-replay window: messages a retry reordered still pass). A restarted
 * process draws a new incarnation, so its messages are never replays of
 * the old one's.
 *
 * Verdicts are a function of the stream's content: each one is kept by
 * offset, and an offset read again (a reader that reads a range twice, or
 * from the log start after a loss) gets the same verdict. A reader that
 * starts in the middle of a stream sees only what comes after its start
 * (fsgd_replay_next tells a reader that must catch up where to start).
 *
 * A handle is used by one thread at a time; handles are independent. */
#ifndef FSGD_REPLAY_H
#define FSGD_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#define FSGD_REPLAY_NONCE_BYTES 16
#define FSGD_REPLAY_WINDOW 256 /* sequences below the highest that may still come (reordered) */

typedef struct fsgd_replay fsgd_replay_t;

/* A reader's verdicts on its streams (0, 1, ... : a topic's partitions).
 * NULL without memory. Every function below takes a NULL handle as one
 * that finds nothing (verdict fresh). */
fsgd_replay_t *fsgd_replay_new(void);
void fsgd_replay_destroy(fsgd_replay_t *r);

/* The verdict on the message at offset of stream with nonce: 0 fresh
 * (taken), 1 a replay (counted), FSGD_E_NOMEM. Offsets come in increasing
 * order, gaps allowed (a compacted topic); an offset below the last one
 * taken gets the verdict it got then (fresh when it was never taken). */
int fsgd_replay_check(fsgd_replay_t *r, int32_t stream, int64_t offset, const uint8_t nonce[FSGD_REPLAY_NONCE_BYTES]);

/* The offset after the last one checked on stream; -1 when none was. */
int64_t fsgd_replay_next(const fsgd_replay_t *r, int32_t stream);

/* Replays found so far, and the first as "stream S offset O: incarnation
 * I sequence Q, at or below Q' seen before" in first (cap bytes; may be
 * NULL). */
uint64_t fsgd_replay_count(const fsgd_replay_t *r, char *first, size_t cap);

/* The nonce of an authenticated frame (flag AUTH: its tag's first 16
 * bytes, after the CRC; len: the bytes at frame): 1, or 0 for a frame
 * without a tag. */
int fsgd_replay_frame_nonce(const uint8_t *frame, size_t len, uint8_t nonce[FSGD_REPLAY_NONCE_BYTES]);

/* The nonce of a tag given as hex digits (a fsgd.mac header): 1, or 0 when
 * the header is not a tag. */
int fsgd_replay_hex_nonce(const void *hex, size_t len, uint8_t nonce[FSGD_REPLAY_NONCE_BYTES]);

/* The verdict on a frame (fsgd_replay_check) or a NAME.ctl event (its
 * fsgd.mac header, stream 0) whose tag was verified: 1 a replay, 0 fresh or
 * without a tag, FSGD_E_NOMEM. */
int fsgd_replay_frame(fsgd_replay_t *r, int32_t stream, int64_t offset, const uint8_t *frame, size_t len);
int fsgd_replay_ctl(fsgd_replay_t *r, int64_t offset, const void *mac, size_t mac_len);

/* NAME.data: the verdict on the row message that fsgd_auth_row_ok accepted
 * last on this thread (a read_range callback's message, fsgd/bus.h): 1 a
 * replay, 0 fresh or without a tag (an unauthenticated job, unsigned rows:
 * nothing to tell copies apart by), FSGD_E_NOMEM. */
int fsgd_replay_row(fsgd_replay_t *r, int32_t partition, int64_t offset);

#endif
