/* NAME.ctl: JSON status events (KAFKA_FORMAT.md, "NAME.ctl"). Private to trainer/distributed/.
 *
 * Events are one JSON object per message, key = the event type. The
 * writer is a tiny append-only builder; the reader finds top-level fields
 * of the flat objects fsgd writes (and tolerates anything else: an outside
 * client may write junk into the topic, which is then ignored). */
#ifndef FSGD_DIST_CTL_H
#define FSGD_DIST_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/bus.h"

typedef struct fsgd_ctl_json {
    char *p;
    size_t n, cap;
    int oom;
} fsgd_ctl_json_t;

/* {"event": EVENT, "job": JOB, "time": unix seconds (f64) */
void fsgd_cj_begin(fsgd_ctl_json_t *j, const char *event, const char *job);
void fsgd_cj_str(fsgd_ctl_json_t *j, const char *k, const char *v); /* NULL -> null */
void fsgd_cj_u64(fsgd_ctl_json_t *j, const char *k, uint64_t v);
void fsgd_cj_i64(fsgd_ctl_json_t *j, const char *k, int64_t v);
void fsgd_cj_f64(fsgd_ctl_json_t *j, const char *k, double v); /* non-finite -> null */
void fsgd_cj_u32s(fsgd_ctl_json_t *j, const char *k, const uint32_t *v, size_t n);
void fsgd_cj_u64s(fsgd_ctl_json_t *j, const char *k, const uint64_t *v, size_t n);
void fsgd_cj_i32s(fsgd_ctl_json_t *j, const char *k, const int32_t *v, size_t n);
/* closes the object; 0 or FSGD_E_NOMEM */
int fsgd_cj_end(fsgd_ctl_json_t *j);
void fsgd_cj_free(fsgd_ctl_json_t *j);

/* Produces j (closed) to topic partition 0 with key = event. Best effort:
 * returns 0 or FSGD_E_KAFKA (the caller decides whether that matters). */
int fsgd_ctl_send(fsgd_bus_client_t *prod, const char *topic, const char *job, const char *event, const fsgd_ctl_json_t *j);

/* The Kafka header that carries an event's tag (hex) when the job has a key. */
#define FSGD_CTL_MAC_HEADER "fsgd.mac"

/* 0 when m may be acted on: no job key is set, or m carries a valid tag
 * (FSGD_CTL_MAC_HEADER) over its key and value; FSGD_E_AUTH with why set
 * otherwise (the caller drops and counts it). */
int fsgd_ctl_verify(const fsgd_auth_t *auth, const fsgd_bus_msg_t *m, char *why, size_t whysz);

/* Field lookup in a flat JSON object: 1 found, 0 absent/mistyped. */
int fsgd_ctl_get_str(const char *json, size_t len, const char *key, char *out, size_t cap);
int fsgd_ctl_get_num(const char *json, size_t len, const char *key, double *v);
/* Array of non-negative integers; *n gets the count (at most cap). */
int fsgd_ctl_get_u32s(const char *json, size_t len, const char *key, uint32_t *out, size_t cap, size_t *n);

#endif
