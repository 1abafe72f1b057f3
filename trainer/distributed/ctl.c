/* NAME.ctl events: a small JSON writer and reader (ctl.h). */
#include "ctl.h"
#include "fsgd/auth.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/error.h"

static void put(fsgd_ctl_json_t *j, const char *s, size_t n)
{
    if (j->oom)
        return;
    if (j->n + n + 1 > j->cap) {
        size_t nc = j->cap ? j->cap : 256;
        while (nc < j->n + n + 1)
            nc *= 2;
        char *np = realloc(j->p, nc);
        if (!np) {
            j->oom = 1;
            return;
        }
        j->p = np;
        j->cap = nc;
    }
    memcpy(j->p + j->n, s, n);
    j->n += n;
    j->p[j->n] = '\0';
}

static void putf(fsgd_ctl_json_t *j, const char *fmt, ...)
{
    char b[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(j, b, (size_t)n < sizeof b ? (size_t)n : sizeof b - 1);
}

static void put_string(fsgd_ctl_json_t *j, const char *s)
{
    put(j, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(j, e, 2);
        } else if (c < 0x20) {
            putf(j, "\\u%04x", c);
        } else {
            put(j, (const char *)&c, 1);
        }
    }
    put(j, "\"", 1);
}

static void key(fsgd_ctl_json_t *j, const char *k)
{
    put(j, ", ", 2);
    put_string(j, k);
    put(j, ": ", 2);
}

void fsgd_cj_begin(fsgd_ctl_json_t *j, const char *event, const char *job)
{
    j->n = 0;
    j->oom = 0;
    put(j, "{\"event\": ", 10);
    put_string(j, event);
    fsgd_cj_str(j, "job", job);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fsgd_cj_f64(j, "time", ts.tv_sec + ts.tv_nsec / 1e9);
}

void fsgd_cj_str(fsgd_ctl_json_t *j, const char *k, const char *v)
{
    key(j, k);
    if (v)
        put_string(j, v);
    else
        put(j, "null", 4);
}

void fsgd_cj_u64(fsgd_ctl_json_t *j, const char *k, uint64_t v)
{
    key(j, k);
    putf(j, "%llu", (unsigned long long)v);
}

void fsgd_cj_i64(fsgd_ctl_json_t *j, const char *k, int64_t v)
{
    key(j, k);
    putf(j, "%lld", (long long)v);
}

void fsgd_cj_f64(fsgd_ctl_json_t *j, const char *k, double v)
{
    key(j, k);
    if (isfinite(v))
        putf(j, "%.17g", v);
    else
        put(j, "null", 4);
}

void fsgd_cj_u32s(fsgd_ctl_json_t *j, const char *k, const uint32_t *v, size_t n)
{
    key(j, k);
    put(j, "[", 1);
    for (size_t i = 0; i < n; i++)
        putf(j, i ? ", %u" : "%u", v[i]);
    put(j, "]", 1);
}

void fsgd_cj_u64s(fsgd_ctl_json_t *j, const char *k, const uint64_t *v, size_t n)
{
    key(j, k);
    put(j, "[", 1);
    for (size_t i = 0; i < n; i++)
        putf(j, i ? ", %llu" : "%llu", (unsigned long long)v[i]);
    put(j, "]", 1);
}

void fsgd_cj_i32s(fsgd_ctl_json_t *j, const char *k, const int32_t *v, size_t n)
{
    key(j, k);
    put(j, "[", 1);
    for (size_t i = 0; i < n; i++)
        putf(j, i ? ", %d" : "%d", (int)v[i]);
    put(j, "]", 1);
}

int fsgd_cj_end(fsgd_ctl_json_t *j)
{
    put(j, "}", 1);
    return j->oom ? FSGD_E_NOMEM : 0;
}

void fsgd_cj_free(fsgd_ctl_json_t *j)
{
    free(j->p);
    memset(j, 0, sizeof *j);
}

int fsgd_ctl_send(fsgd_bus_client_t *prod, const char *topic, const char *job, const char *event,
                  const fsgd_ctl_json_t *j)
{
    if (!prod || j->oom || !j->p)
        return FSGD_E_KAFKA;
    /* the tag covers the key too: an event cannot be relabelled */
    char mac[FSGD_AUTH_TAG_HEX + 1] = "";
    fsgd_auth_t *auth = fsgd_bus_client_auth(prod);
    if (fsgd_auth_enabled(auth))
        fsgd_auth_tag_hex(auth, mac, FSGD_AUTH_CTL, event, strlen(event) + 1, j->p, j->n);
    const fsgd_bus_out_t m = {.topic = topic, .partition = 0, .key = event, .val = j->p, .len = j->n,
                              .job = job, .kind = "ctl", .mac = mac[0] ? mac : NULL};
    return fsgd_bus_produce(prod, &m, NULL, 0) ? FSGD_E_KAFKA : 0;
}

int fsgd_ctl_verify(const fsgd_auth_t *auth, const fsgd_bus_msg_t *m, char *why, size_t whysz)
{
    /* An event names its job: one of another job (copied from its NAME.ctl,
     * or a job of the same name's topics reused) is not acted on, key or no
     * key (issue 42: two worker_leave events of a finished job made a
     * running job's aggregator drop its live workers). */
    const char *me = fsgd_auth_job(auth);
    char job[FSGD_AUTH_JOB_MAX + 2];
    if (me[0] && !m->err && m->val) {
        if (!fsgd_ctl_get_str(m->val, m->len, "job", job, sizeof job))
            return fsgd_err_fmt(why, whysz, FSGD_E_AUTH, "offset %lld: an event without a \"job\" field",
                                (long long)m->offset);
        if (strcmp(job, me) != 0)
            return fsgd_err_fmt(why, whysz, FSGD_E_AUTH, "offset %lld: an event of job '%.64s', not of this job '%s'",
                                (long long)m->offset, job, me);
    }
    if (!fsgd_auth_enabled(auth))
        return 0;
    const void *mac = m->mac;
    size_t mlen = m->mac_len;
    if (m->err || !mac)
        return fsgd_err_fmt(why, whysz, FSGD_E_AUTH, "offset %lld: no %s header and this job is authenticated",
                            (long long)m->offset, FSGD_CTL_MAC_HEADER);
    /* the key is hashed with its terminating zero: (key, value) pairs never
     * run into each other */
    char event[64];
    size_t kl = m->key_len < sizeof event - 1 ? m->key_len : sizeof event - 1;
    memcpy(event, m->key ? m->key : "", m->key ? kl : 0);
    event[m->key ? kl : 0] = '\0';
    if (m->key_len >= sizeof event || memchr(event, '\0', m->key ? kl : 0) ||
        !fsgd_auth_check_hex(auth, mac, mlen, FSGD_AUTH_CTL, event, strlen(event) + 1, m->val, m->len))
        return fsgd_err_fmt(why, whysz, FSGD_E_AUTH, "offset %lld: the %s tag is not this job key's",
                            (long long)m->offset, FSGD_CTL_MAC_HEADER);
    return 0;
}

/* Finds `"key"` followed by `:` outside strings at nesting depth 1; returns
 * the position of the value (spaces skipped) or NULL. */
static const char *find(const char *s, size_t len, const char *k)
{
    size_t kl = strlen(k);
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']')
            depth--;
        else if (c == '"') {
            size_t b = i + 1, e = b;
            while (e < len && s[e] != '"')
                e += s[e] == '\\' ? 2 : 1;
            if (e >= len)
                return NULL;
            i = e;
            if (depth != 1 || e - b != kl || memcmp(s + b, k, kl))
                continue;
            size_t p = e + 1;
            while (p < len && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r'))
                p++;
            if (p >= len || s[p] != ':')
                continue;
            p++;
            while (p < len && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r'))
                p++;
            return p < len ? s + p : NULL;
        }
    }
    return NULL;
}

/* 4 hex digits at v (before end) -> 0..0xffff, or -1 */
static long hex4(const char *v, const char *end)
{
    if (end - v < 4)
        return -1;
    long x = 0;
    for (int i = 0; i < 4; i++) {
        char c = v[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        x = x * 16 + d;
    }
    return x;
}

/* Decodes the escape after the backslash at *pv (JSON: \" \\ \/ \b \f \n
 * \r \t \uXXXX, surrogate pairs joined) into u (UTF-8, up to 4 bytes);
 * leaves *pv on the escape's last character. Anything else is taken
 * literally, as before. Returns the bytes in u. */
static int unescape(const char **pv, const char *end, char *u)
{
    const char *v = *pv + 1; /* past the backslash */
    *pv = v;
    switch (*v) {
    case 'b': u[0] = '\b'; return 1;
    case 'f': u[0] = '\f'; return 1;
    case 'n': u[0] = '\n'; return 1;
    case 'r': u[0] = '\r'; return 1;
    case 't': u[0] = '\t'; return 1;
    case 'u': break;
    default: u[0] = *v; return 1;
    }
    long c = hex4(v + 1, end);
    if (c < 0) {
        u[0] = *v;
        return 1;
    }
    v += 4;
    if (c >= 0xd800 && c <= 0xdbff && end - v >= 7 && v[1] == '\\' && v[2] == 'u') {
        long lo = hex4(v + 3, end);
        if (lo >= 0xdc00 && lo <= 0xdfff) {
            c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
            v += 6;
        }
    }
    if (c >= 0xd800 && c <= 0xdfff)
        c = 0xfffd; /* a lone surrogate */
    *pv = v;
    if (c < 0x80) {
        u[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        u[0] = (char)(0xc0 | (c >> 6));
        u[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        u[0] = (char)(0xe0 | (c >> 12));
        u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        u[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    u[0] = (char)(0xf0 | (c >> 18));
    u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    u[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

int fsgd_ctl_get_str(const char *json, size_t len, const char *k, char *out, size_t cap)
{
    const char *v = find(json, len, k), *end = json + len;
    if (!v || *v != '"' || cap == 0)
        return 0;
    size_t n = 0;
    for (v++; v < end && *v != '"'; v++) {
        char u[4];
        int nu = 1;
        u[0] = *v;
        if (*v == '\\' && v + 1 < end)
            nu = unescape(&v, end, u);
        for (int i = 0; i < nu; i++)
            if (n + 1 < cap)
                out[n++] = u[i];
    }
    out[n] = '\0';
    return v < end;
}

int fsgd_ctl_get_num(const char *json, size_t len, const char *k, double *val)
{
    const char *v = find(json, len, k), *end = json + len;
    if (!v)
        return 0;
    char b[64];
    size_t n = 0;
    while (v + n < end && n + 1 < sizeof b && strchr("+-0123456789.eE", v[n]))
        n++;
    if (!n)
        return 0;
    memcpy(b, v, n);
    b[n] = '\0';
    char *ep;
    double d = strtod(b, &ep);
    if (ep == b || !isfinite(d))
        return 0;
    *val = d;
    return 1;
}

int fsgd_ctl_get_u32s(const char *json, size_t len, const char *k, uint32_t *out, size_t cap, size_t *n)
{
    const char *v = find(json, len, k), *end = json + len;
    *n = 0;
    if (!v || *v != '[')
        return 0;
    v++;
    for (;;) {
        while (v < end && (*v == ' ' || *v == ','))
            v++;
        if (v >= end)
            return 0;
        if (*v == ']')
            return 1;
        uint64_t x = 0;
        int digits = 0;
        while (v < end && *v >= '0' && *v <= '9' && digits < 11) {
            x = x * 10 + (uint64_t)(*v++ - '0');
            digits++;
        }
        if (!digits || x > UINT32_MAX)
            return 0;
        if (*n >= cap)
            return 0;
        out[(*n)++] = (uint32_t)x;
    }
}
