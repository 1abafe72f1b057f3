/* The in-memory bus (fsgd/bus.h): one process, Kafka's model without a
 * broker, for tests of the roles. Topics are growable logs; a consumer
 * group gives partition p to its member p % n in join order, so a run's
 * assignment does not depend on timing; fault hooks drop, duplicate or
 * delay messages and kill members. One mutex guards the whole cluster
 * (tests move little data); waits are on one condition variable. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bus_impl.h"
#include "bus_mem.h"
#include "fsgd/auth.h"
#include "fsgd/clock.h"
#include "fsgd/error.h"

/* A stored message: its value, then (in the same allocation) its key and
 * its fsgd.mac tag, each NUL-terminated, when it has them (length -1: none). */
typedef struct mmsg {
    uint8_t *val;
    size_t len;
    double sent; /* monotonic seconds */
    int32_t klen, mlen;
} mmsg_t;

typedef struct mpart {
    mmsg_t *log; /* offsets [0, hi); those below lo are freed */
    int64_t lo, hi, cap;
} mpart_t;

typedef struct mtopic {
    char name[256];
    int np;
    mpart_t *p;
} mtopic_t;

typedef struct mdelayed {
    double due;
    int topic;
    int32_t partition;
    uint8_t *val; /* packed as in mmsg_t */
    size_t len;
    double sent;
    int32_t klen, mlen;
} mdelayed_t;

struct mclient;

/* A member of a group; outlives a killed client until its session ends. */
typedef struct mmember {
    struct mclient *c; /* NULL once a killed client is gone */
    int tag;
    double leave_at; /* > 0: killed, leaves the group then */
    int32_t *owned;
    int nowned;
    int pending; /* owned changed: tell the client on its next poll */
} mmember_t;

typedef struct mgroup {
    char name[256], topic[256];
    mmember_t **m;
    int n, cap;
} mgroup_t;

typedef struct mcluster {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mtopic_t **t; /* pointers: messages and clients keep them */
    int nt;
    mgroup_t **g;
    int ng;
    mdelayed_t *d;
    int nd, capd;
    fsgd_bus_hook_fn hook;
    void *hook_ctx;
    int *dead; /* killed member tags */
    int ndead;
    int refs;
} mcluster_t;

typedef struct mbus {
    fsgd_bus_t base;
    mcluster_t *cl;
    int tag;
} mbus_t;

typedef struct masg {
    int topic;
    int32_t partition;
    int64_t pos;
    int stopped; /* the position left the log: reported, read nothing until restarted */
} masg_t;

typedef struct mclient {
    fsgd_bus_client_t base;
    mcluster_t *cl;
    int tag;
    int consumer;
    masg_t *a;
    int na;
    int rr;
    mgroup_t *g;
    mmember_t *mem;
    fsgd_bus_rebalance_fn rebalance;
    void *opaque;
} mclient_t;

typedef struct mmsg_out {
    fsgd_bus_msg_t m;
    uint8_t *copy;
    char errstr[200];
} mmsg_out_t;

static const fsgd_bus_ops_t mem_ops;

static int find_topic(const mcluster_t *cl, const char *name)
{
    for (int i = 0; i < cl->nt; i++)
        if (!strcmp(cl->t[i]->name, name))
            return i;
    return -1;
}

static int is_dead(const mcluster_t *cl, int tag)
{
    for (int i = 0; i < cl->ndead; i++)
        if (cl->dead[i] == tag)
            return 1;
    return 0;
}

static int topic_locked(mcluster_t *cl, const char *name, int partitions)
{
    if (find_topic(cl, name) >= 0)
        return 0;
    mtopic_t **nt = realloc(cl->t, (size_t)(cl->nt + 1) * sizeof *nt);
    if (!nt)
        return FSGD_E_NOMEM;
    cl->t = nt;
    mtopic_t *t = calloc(1, sizeof *t);
    if (!t)
        return FSGD_E_NOMEM;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->np = partitions > 0 ? partitions : 1;
    t->p = calloc((size_t)t->np, sizeof *t->p);
    if (!t->p) {
        free(t);
        return FSGD_E_NOMEM;
    }
    cl->t[cl->nt++] = t;
    return 0;
}

/* The bytes a stored message takes: value, key and tag (mmsg_t). */
static size_t packed_size(size_t len, int32_t klen, int32_t mlen)
{
    return len + (klen >= 0 ? (size_t)klen + 1 : 0) + (mlen >= 0 ? (size_t)mlen + 1 : 0) + 1;
}

/* val, key and mac in one allocation (NULL: out of memory). */
static uint8_t *pack(const void *val, size_t len, const char *key, const char *mac, int32_t *klen, int32_t *mlen)
{
    *klen = key ? (int32_t)strlen(key) : -1;
    *mlen = mac ? (int32_t)strlen(mac) : -1;
    uint8_t *v = malloc(packed_size(len, *klen, *mlen));
    if (!v)
        return NULL;
    if (len)
        memcpy(v, val, len);
    size_t o = len;
    if (key) {
        memcpy(v + o, key, (size_t)*klen + 1);
        o += (size_t)*klen + 1;
    }
    if (mac)
        memcpy(v + o, mac, (size_t)*mlen + 1);
    return v;
}

/* Points m's key and mac into packed bytes p (as pack wrote them). */
static void unpack(fsgd_bus_msg_t *m, const uint8_t *p, size_t len, int32_t klen, int32_t mlen)
{
    m->key = klen >= 0 ? p + len : NULL;
    m->key_len = klen >= 0 ? (size_t)klen : 0;
    m->mac = mlen >= 0 ? p + len + (klen >= 0 ? (size_t)klen + 1 : 0) : NULL;
    m->mac_len = mlen >= 0 ? (size_t)mlen : 0;
}

/* Stores packed bytes v (taken over). */
static int append_packed(mcluster_t *cl, int topic, int32_t partition, uint8_t *v, size_t len, int32_t klen,
                         int32_t mlen, double sent)
{
    mpart_t *p = &cl->t[topic]->p[partition];
    if (p->hi == p->cap) {
        int64_t nc = p->cap ? 2 * p->cap : 64;
        mmsg_t *nl = realloc(p->log, (size_t)nc * sizeof *nl);
        if (!nl) {
            free(v);
            return FSGD_E_NOMEM;
        }
        p->log = nl;
        p->cap = nc;
    }
    p->log[p->hi++] = (mmsg_t){v, len, sent, klen, mlen};
    pthread_cond_broadcast(&cl->cv);
    return 0;
}

static int append(mcluster_t *cl, int topic, int32_t partition, const void *val, size_t len, const char *key,
                  const char *mac, double sent)
{
    int32_t kl, ml;
    uint8_t *v = pack(val, len, key, mac, &kl, &ml);
    return v ? append_packed(cl, topic, partition, v, len, kl, ml, sent) : FSGD_E_NOMEM;
}

/* Stores the delayed messages whose time has come. */
static void deliver_due(mcluster_t *cl)
{
    double now = fsgd_clock_s();
    int k = 0;
    for (int i = 0; i < cl->nd; i++) {
        mdelayed_t *d = &cl->d[i];
        if (d->due <= now) {
            append_packed(cl, d->topic, d->partition, d->val, d->len, d->klen, d->mlen, d->sent);
        } else {
            cl->d[k++] = *d;
        }
    }
    cl->nd = k;
}

/* Partition p of the group's topic to member p % n, members in join order. */
static void regroup(mcluster_t *cl, mgroup_t *g)
{
    int ti = find_topic(cl, g->topic);
    int np = ti >= 0 ? cl->t[ti]->np : 0;
    for (int i = 0; i < g->n; i++) {
        mmember_t *m = g->m[i];
        free(m->owned);
        m->owned = malloc((size_t)(np ? np : 1) * sizeof *m->owned);
        m->nowned = 0;
        for (int p = 0; m->owned && p < np; p++)
            if (p % g->n == i)
                m->owned[m->nowned++] = p;
        m->pending = 1;
    }
    pthread_cond_broadcast(&cl->cv);
}

static void group_remove(mcluster_t *cl, mgroup_t *g, mmember_t *m)
{
    for (int i = 0; i < g->n; i++)
        if (g->m[i] == m) {
            memmove(&g->m[i], &g->m[i + 1], (size_t)(g->n - i - 1) * sizeof *g->m);
            g->n--;
            break;
        }
    if (m->c)
        m->c->mem = NULL;
    free(m->owned);
    free(m);
    regroup(cl, g);
}

/* Members whose session ended leave their groups. */
static void expire(mcluster_t *cl)
{
    double now = fsgd_clock_s();
    for (int gi = 0; gi < cl->ng; gi++) {
        mgroup_t *g = cl->g[gi];
        for (int i = 0; i < g->n; i++)
            if (g->m[i]->leave_at > 0 && g->m[i]->leave_at <= now) {
                group_remove(cl, g, g->m[i]);
                i = -1;
            }
    }
}

static void wait_until(mcluster_t *cl, double until)
{
    struct timespec ts;
    double s = until - fsgd_clock_s();
    if (s <= 0)
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(s * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&cl->cv, &cl->mu, &ts);
}

/* --- the bus --- */

fsgd_bus_t *fsgd_bus_mem_new(void)
{
    mbus_t *b = calloc(1, sizeof *b);
    mcluster_t *cl = calloc(1, sizeof *cl);
    if (!b || !cl) {
        free(b);
        free(cl);
        return NULL;
    }
    pthread_mutex_init(&cl->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cl->cv, &ca);
    pthread_condattr_destroy(&ca);
    cl->refs = 1;
    b->base.ops = &mem_ops;
    b->cl = cl;
    return &b->base;
}

fsgd_bus_t *fsgd_bus_mem_view(fsgd_bus_t *bb, int member)
{
    mbus_t *src = (mbus_t *)bb;
    mbus_t *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    pthread_mutex_lock(&src->cl->mu);
    src->cl->refs++;
    pthread_mutex_unlock(&src->cl->mu);
    b->base.ops = &mem_ops;
    b->base.auth = src->base.auth; /* the same job's, unless fsgd_bus_set_auth gives it another */
    b->cl = src->cl;
    b->tag = member;
    return &b->base;
}

static void m_destroy(fsgd_bus_t *bb)
{
    mbus_t *b = (mbus_t *)bb;
    mcluster_t *cl = b->cl;
    pthread_mutex_lock(&cl->mu);
    int last = --cl->refs == 0;
    pthread_mutex_unlock(&cl->mu);
    free(b);
    if (!last)
        return;
    for (int i = 0; i < cl->nt; i++) {
        for (int p = 0; p < cl->t[i]->np; p++) {
            mpart_t *mp = &cl->t[i]->p[p];
            for (int64_t o = mp->lo; o < mp->hi; o++)
                free(mp->log[o].val);
            free(mp->log);
        }
        free(cl->t[i]->p);
        free(cl->t[i]);
    }
    free(cl->t);
    for (int gi = 0; gi < cl->ng; gi++) {
        for (int i = 0; i < cl->g[gi]->n; i++) {
            free(cl->g[gi]->m[i]->owned);
            free(cl->g[gi]->m[i]);
        }
        free(cl->g[gi]->m);
        free(cl->g[gi]);
    }
    free(cl->g);
    for (int i = 0; i < cl->nd; i++)
        free(cl->d[i].val);
    free(cl->d);
    free(cl->dead);
    pthread_mutex_destroy(&cl->mu);
    pthread_cond_destroy(&cl->cv);
    free(cl);
}

int fsgd_bus_mem_topic(fsgd_bus_t *bb, const char *topic, int partitions)
{
    mcluster_t *cl = ((mbus_t *)bb)->cl;
    pthread_mutex_lock(&cl->mu);
    int rc = topic_locked(cl, topic, partitions);
    pthread_mutex_unlock(&cl->mu);
    return rc;
}

void fsgd_bus_mem_set_hook(fsgd_bus_t *bb, fsgd_bus_hook_fn fn, void *ctx)
{
    mcluster_t *cl = ((mbus_t *)bb)->cl;
    pthread_mutex_lock(&cl->mu);
    cl->hook = fn;
    cl->hook_ctx = ctx;
    pthread_mutex_unlock(&cl->mu);
}

void fsgd_bus_mem_kill(fsgd_bus_t *bb, int member, int session_ms)
{
    mcluster_t *cl = ((mbus_t *)bb)->cl;
    pthread_mutex_lock(&cl->mu);
    int *nd = realloc(cl->dead, (size_t)(cl->ndead + 1) * sizeof *nd);
    if (nd) {
        cl->dead = nd;
        cl->dead[cl->ndead++] = member;
    }
    double at = fsgd_clock_s() + session_ms / 1e3;
    for (int gi = 0; gi < cl->ng; gi++)
        for (int i = 0; i < cl->g[gi]->n; i++)
            if (cl->g[gi]->m[i]->tag == member)
                cl->g[gi]->m[i]->leave_at = at;
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
}

void fsgd_bus_mem_truncate(fsgd_bus_t *bb, const char *topic, int32_t partition, int64_t offset)
{
    mcluster_t *cl = ((mbus_t *)bb)->cl;
    pthread_mutex_lock(&cl->mu);
    int ti = find_topic(cl, topic);
    if (ti >= 0 && partition >= 0 && partition < cl->t[ti]->np) {
        mpart_t *p = &cl->t[ti]->p[partition];
        for (; p->lo < offset && p->lo < p->hi; p->lo++) {
            free(p->log[p->lo].val);
            p->log[p->lo].val = NULL;
        }
    }
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
}

/* --- clients --- */

static fsgd_bus_client_t *m_client_new(fsgd_bus_t *bb, fsgd_kclient_t kind, const char *group, const char *topic,
                                       fsgd_bus_rebalance_fn rebalance, void *opaque, char *err, size_t errsz)
{
    mbus_t *b = (mbus_t *)bb;
    mcluster_t *cl = b->cl;
    mclient_t *c = calloc(1, sizeof *c);
    if (!c) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
        return NULL;
    }
    c->base.bus = bb;
    c->cl = cl;
    c->tag = b->tag;
    c->consumer = FSGD_KCLIENT_IS_CONSUMER(kind);
    if (!rebalance)
        return &c->base;
    c->rebalance = rebalance;
    c->opaque = opaque;
    pthread_mutex_lock(&cl->mu);
    mgroup_t *g = NULL;
    for (int i = 0; i < cl->ng && !g; i++)
        if (!strcmp(cl->g[i]->name, group) && !strcmp(cl->g[i]->topic, topic))
            g = cl->g[i];
    if (!g) {
        mgroup_t **ng = realloc(cl->g, (size_t)(cl->ng + 1) * sizeof *ng);
        if (ng) {
            cl->g = ng;
            g = calloc(1, sizeof *g);
        }
        if (g) {
            cl->g[cl->ng++] = g;
            snprintf(g->name, sizeof g->name, "%s", group);
            snprintf(g->topic, sizeof g->topic, "%s", topic);
        }
    }
    mmember_t *m = g ? calloc(1, sizeof *m) : NULL;
    if (m && g->n == g->cap) {
        int nc = g->cap ? 2 * g->cap : 8;
        mmember_t **nm = realloc(g->m, (size_t)nc * sizeof *nm);
        if (nm) {
            g->m = nm;
            g->cap = nc;
        } else {
            free(m);
            m = NULL;
        }
    }
    if (!m) {
        pthread_mutex_unlock(&cl->mu);
        free(c);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
        return NULL;
    }
    m->c = c;
    m->tag = c->tag;
    g->m[g->n++] = m;
    c->g = g;
    c->mem = m;
    regroup(cl, g);
    pthread_mutex_unlock(&cl->mu);
    return &c->base;
}

static void m_client_destroy(fsgd_bus_client_t *bc)
{
    mclient_t *c = (mclient_t *)bc;
    mcluster_t *cl = c->cl;
    pthread_mutex_lock(&cl->mu);
    if (c->mem) {
        if (c->mem->leave_at > 0)
            c->mem->c = NULL; /* killed: the group holds its partitions until the session ends */
        else
            group_remove(cl, c->g, c->mem);
    }
    pthread_mutex_unlock(&cl->mu);
    free(c->a);
    free(c);
}

/* Stores one message through the fault hook. Called locked. */
static int produce_locked(mclient_t *c, const char *topic, int32_t partition, const void *val, size_t len,
                          const char *key, const char *mac, char *err, size_t errsz)
{
    mcluster_t *cl = c->cl;
    if (is_dead(cl, c->tag))
        return 0; /* a crashed process: what it sends never arrives */
    int ti = find_topic(cl, topic);
    if (ti < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "produce to %s: unknown topic", topic);
    if (partition < 0)
        partition = 0; /* keyed: the roles' keyed topics have one partition */
    if (partition >= cl->t[ti]->np)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "produce to %s [%d]: unknown partition", topic,
                            (int)partition);
    deliver_due(cl);
    int delay_ms = 0;
    fsgd_bus_fault_t f = cl->hook ? cl->hook(cl->hook_ctx, topic, partition, val, len, &delay_ms) : FSGD_BUS_DELIVER;
    double now = fsgd_clock_s();
    if (f == FSGD_BUS_DROP)
        return 0;
    if (f == FSGD_BUS_DELAY) {
        if (cl->nd == cl->capd) {
            int nc = cl->capd ? 2 * cl->capd : 16;
            mdelayed_t *nd = realloc(cl->d, (size_t)nc * sizeof *nd);
            if (!nd)
                return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
            cl->d = nd;
            cl->capd = nc;
        }
        int32_t kl, ml;
        uint8_t *v = pack(val, len, key, mac, &kl, &ml);
        if (!v)
            return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
        cl->d[cl->nd++] = (mdelayed_t){now + delay_ms / 1e3, ti, partition, v, len, now, kl, ml};
        return 0;
    }
    int rc = append(cl, ti, partition, val, len, key, mac, now);
    if (!rc && f == FSGD_BUS_DUPLICATE)
        rc = append(cl, ti, partition, val, len, key, mac, now);
    return rc ? fsgd_err_fmt(err, errsz, rc, "bus: out of memory") : 0;
}

static int m_send(fsgd_bus_client_t *bc, const fsgd_bus_out_t *m, uint64_t *wire, char *err, size_t errsz)
{
    /* the frames of fsgd_kbus_send */
    mclient_t *c = (mclient_t *)bc;
    const fsgd_kframe_t *hdr = m->hdr;
    const uint8_t *body = m->val;
    const size_t len = m->len;
    size_t cm = FSGD_KBUS_CHUNK_MAX;
    size_t n = len ? (len + cm - 1) / cm : 1;
    if (n > FSGD_KBUS_MAX_CHUNKS)
        return fsgd_err_fmt(err, errsz, FSGD_E_RANGE, "message of %zu bytes needs %zu chunks (max %u)", len, n,
                            FSGD_KBUS_MAX_CHUNKS);
    uint8_t *buf = malloc((len < cm ? len : cm) + FSGD_KFRAME_OVERHEAD + FSGD_KFRAME_TAG);
    if (!buf)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "send: out of memory");
    int rc = 0;
    pthread_mutex_lock(&c->cl->mu);
    for (size_t i = 0; i < n && !rc; i++) {
        fsgd_kframe_t f = *hdr;
        size_t off = i * cm, bl = len - off < cm ? len - off : cm;
        f.chunk = (uint32_t)i;
        f.nchunks = (uint32_t)n;
        f.body = body + off;
        f.body_len = (uint32_t)bl;
        size_t fl = fsgd_kframe_write(buf, &f, bc->bus->auth);
        rc = produce_locked(c, m->topic, m->partition, buf, fl, NULL, NULL, err, errsz);
        if (!rc && wire)
            *wire += fl;
    }
    pthread_mutex_unlock(&c->cl->mu);
    free(buf);
    return rc;
}

static int m_produce(fsgd_bus_client_t *bc, const fsgd_bus_out_t *m, char *err, size_t errsz)
{
    mclient_t *c = (mclient_t *)bc;
    pthread_mutex_lock(&c->cl->mu);
    int rc = produce_locked(c, m->topic, m->partition, m->val, m->len, m->key, m->mac, err, errsz);
    pthread_mutex_unlock(&c->cl->mu);
    return rc;
}

static void m_serve(fsgd_bus_client_t *bc)
{
    mclient_t *c = (mclient_t *)bc;
    pthread_mutex_lock(&c->cl->mu);
    deliver_due(c->cl);
    expire(c->cl);
    pthread_mutex_unlock(&c->cl->mu);
}

static int m_flush(fsgd_bus_client_t *bc, int timeout_ms, char *err, size_t errsz)
{
    m_serve(bc);
    return 0;
}

static int64_t resolve(const mpart_t *p, int64_t off)
{
    if (off == FSGD_BUS_OFFSET_BEGINNING)
        return p->lo;
    if (off == FSGD_BUS_OFFSET_END || off < 0)
        return p->hi;
    return off;
}

static int m_assign(fsgd_bus_client_t *bc, const fsgd_bus_tp_t *tps, int n, char *err, size_t errsz)
{
    mclient_t *c = (mclient_t *)bc;
    masg_t *a = n ? calloc((size_t)n, sizeof *a) : NULL;
    if (n && !a)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
    pthread_mutex_lock(&c->cl->mu);
    for (int i = 0; i < n; i++) {
        int ti = find_topic(c->cl, tps[i].topic);
        if (ti < 0 || tps[i].partition < 0 || tps[i].partition >= c->cl->t[ti]->np) {
            pthread_mutex_unlock(&c->cl->mu);
            free(a);
            return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "assign %s [%d]: unknown partition", tps[i].topic,
                                (int)tps[i].partition);
        }
        a[i] = (masg_t){ti, tps[i].partition, resolve(&c->cl->t[ti]->p[tps[i].partition], tps[i].offset), 0};
    }
    pthread_mutex_unlock(&c->cl->mu);
    free(c->a);
    c->a = a;
    c->na = n;
    return 0;
}

static int m_restart(fsgd_bus_client_t *bc, const char *topic, int32_t partition, int64_t offset, char *err,
                     size_t errsz)
{
    mclient_t *c = (mclient_t *)bc;
    pthread_mutex_lock(&c->cl->mu);
    int ti = find_topic(c->cl, topic);
    for (int i = 0; i < c->na; i++)
        if (c->a[i].topic == ti && c->a[i].partition == partition) {
            c->a[i].pos = resolve(&c->cl->t[ti]->p[partition], offset);
            c->a[i].stopped = 0;
        }
    pthread_mutex_unlock(&c->cl->mu);
    return 0;
}

static fsgd_bus_msg_t *new_msg(mclient_t *c, int topic, int32_t partition, int64_t offset)
{
    mmsg_out_t *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->m.client = &c->base;
    o->m.topic = c->cl->t[topic]->name; /* topics are never removed */
    o->m.partition = partition;
    o->m.offset = offset;
    o->m.lat_ms = -1;
    o->m.errstr = o->errstr;
    o->m.errname = "";
    return &o->m;
}

static fsgd_bus_msg_t *m_poll(fsgd_bus_client_t *bc, int timeout_ms)
{
    mclient_t *c = (mclient_t *)bc;
    mcluster_t *cl = c->cl;
    double until = fsgd_clock_s() + timeout_ms / 1e3;
    pthread_mutex_lock(&cl->mu);
    for (;;) {
        deliver_due(cl);
        expire(cl);
        int dead = is_dead(cl, c->tag);
        if (!dead && c->mem && c->mem->pending) {
            /* the group changed: revoke, then assign (Kafka's eager protocol) */
            c->mem->pending = 0;
            int n = c->mem->nowned;
            int32_t *p = malloc((size_t)(n ? n : 1) * sizeof *p);
            if (p && n)
                memcpy(p, c->mem->owned, (size_t)n * sizeof *p);
            pthread_mutex_unlock(&cl->mu);
            c->rebalance(c->opaque, 0, NULL, 0);
            if (p)
                c->rebalance(c->opaque, 1, p, n);
            free(p);
            pthread_mutex_lock(&cl->mu);
            continue;
        }
        for (int k = 0; !dead && k < c->na; k++) {
            masg_t *a = &c->a[(c->rr + k) % c->na];
            mpart_t *p = &cl->t[a->topic]->p[a->partition];
            if (a->stopped)
                continue;
            if (a->pos < p->lo) {
                a->stopped = 1;
                fsgd_bus_msg_t *m = new_msg(c, a->topic, a->partition, a->pos);
                if (m) {
                    mmsg_out_t *o = (mmsg_out_t *)m;
                    m->err = FSGD_BUS_LOST;
                    m->code = 1;
                    m->errname = "OFFSET_OUT_OF_RANGE";
                    snprintf(o->errstr, sizeof o->errstr, "offset %lld is before the log start %lld",
                             (long long)a->pos, (long long)p->lo);
                }
                c->rr = (c->rr + k + 1) % c->na;
                pthread_mutex_unlock(&cl->mu);
                return m;
            }
            if (a->pos < p->hi) {
                const mmsg_t *s = &p->log[a->pos];
                fsgd_bus_msg_t *m = new_msg(c, a->topic, a->partition, a->pos);
                mmsg_out_t *o = (mmsg_out_t *)m;
                size_t full = packed_size(s->len, s->klen, s->mlen);
                if (m && !(o->copy = malloc(full))) {
                    free(o);
                    m = NULL;
                }
                if (m) {
                    memcpy(o->copy, s->val, full);
                    m->val = o->copy;
                    m->len = s->len;
                    unpack(m, o->copy, s->len, s->klen, s->mlen);
                    m->lat_ms = (fsgd_clock_s() - s->sent) * 1e3;
                    a->pos++;
                }
                c->rr = (c->rr + k + 1) % c->na;
                pthread_mutex_unlock(&cl->mu);
                return m;
            }
        }
        if (fsgd_clock_s() >= until)
            break;
        /* wake for delayed messages and session ends too */
        double next = until;
        for (int i = 0; i < cl->nd; i++)
            if (cl->d[i].due < next)
                next = cl->d[i].due;
        if (next > fsgd_clock_s() + 0.05)
            next = fsgd_clock_s() + 0.05;
        wait_until(cl, next);
    }
    pthread_mutex_unlock(&cl->mu);
    return NULL;
}

static void m_msg_destroy(fsgd_bus_msg_t *m)
{
    mmsg_out_t *o = (mmsg_out_t *)m;
    free(o->copy);
    free(o);
}

static int m_fatal(fsgd_bus_client_t *bc, char *buf, size_t cap)
{
    return 0;
}

static int m_partitions(fsgd_bus_client_t *bc, const char *topic, int timeout_ms, char *err, size_t errsz)
{
    mclient_t *c = (mclient_t *)bc;
    pthread_mutex_lock(&c->cl->mu);
    int ti = find_topic(c->cl, topic);
    int n = ti >= 0 ? c->cl->t[ti]->np : -1;
    pthread_mutex_unlock(&c->cl->mu);
    if (n < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "topic %s: no metadata: unknown topic", topic);
    return n;
}

static int m_topic_exists(fsgd_bus_client_t *bc, const char *topic, int timeout_ms, char *err, size_t errsz)
{
    (void)timeout_ms, (void)err, (void)errsz;
    mclient_t *c = (mclient_t *)bc;
    pthread_mutex_lock(&c->cl->mu);
    int ti = find_topic(c->cl, topic);
    pthread_mutex_unlock(&c->cl->mu);
    return ti >= 0;
}

static int m_watermarks(fsgd_bus_client_t *bc, const char *topic, int32_t partition, int64_t *lo, int64_t *hi,
                        int timeout_ms, char *err, size_t errsz)
{
    mclient_t *c = (mclient_t *)bc;
    pthread_mutex_lock(&c->cl->mu);
    deliver_due(c->cl);
    int ti = find_topic(c->cl, topic);
    int ok = ti >= 0 && partition >= 0 && partition < c->cl->t[ti]->np;
    if (ok) {
        *lo = c->cl->t[ti]->p[partition].lo;
        *hi = c->cl->t[ti]->p[partition].hi;
    }
    pthread_mutex_unlock(&c->cl->mu);
    if (!ok)
        return fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "watermarks of %s [%d]: unknown partition", topic,
                            (int)partition);
    return 0;
}

static int m_read_range(fsgd_bus_client_t *bc, const fsgd_bus_range_t *r, char *err, size_t errsz)
{
    mclient_t *c = (mclient_t *)bc;
    const char *topic = r->topic;
    const int32_t partition = r->partition;
    const int64_t start = r->start, end = r->end;
    int rc = 0;
    fsgd_bus_msg_t tag = {0}; /* the key and mac of the offset read */
    for (int64_t o = start; o < end && !rc; o++) {
        pthread_mutex_lock(&c->cl->mu);
        int ti = find_topic(c->cl, topic);
        const mpart_t *p = ti >= 0 && partition >= 0 && partition < c->cl->t[ti]->np ? &c->cl->t[ti]->p[partition]
                                                                                   : NULL;
        uint8_t *copy = NULL;
        size_t len = 0;
        if (!p)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_KAFKA, "%s [%d]: unknown partition", topic, (int)partition);
        else if (o < p->lo)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_LOST,
                              "data lost: %s [%d] offset %lld is no longer in the log (log start %lld)", topic,
                              (int)partition, (long long)o, (long long)p->lo);
        else if (o >= p->hi)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_TIMEOUT, "%s [%d]: no data at offset %lld (reading up to %lld)",
                              topic, (int)partition, (long long)o, (long long)end);
        else if (!(copy = malloc(packed_size(p->log[o].len, p->log[o].klen, p->log[o].mlen))))
            rc = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "bus: out of memory");
        else {
            len = p->log[o].len;
            memcpy(copy, p->log[o].val, packed_size(len, p->log[o].klen, p->log[o].mlen));
            unpack(&tag, copy, len, p->log[o].klen, p->log[o].mlen);
        }
        pthread_mutex_unlock(&c->cl->mu);
        fsgd_auth_t *auth = bc->bus->auth;
        const int row_ok = rc || r->mode != FSGD_BUS_READ_ROWS ||
                           fsgd_auth_row_ok(auth, tag.mac, tag.mac_len, partition, copy, len);
        if (!row_ok && fsgd_auth_skip_bad_rows(auth)) {
            fsgd_auth_note_skipped_row(auth, topic, partition, o,
                                       tag.mac ? "a row whose tag is not this job key's" : "a row without a tag");
            len = 0; /* no rows at this offset */
        } else if (!row_ok)
            rc = fsgd_err_fmt(err, errsz, FSGD_E_AUTH,
                              "topic %s partition %d offset %lld: %s: the job is authenticated and its rows must be "
                              "written with its key, or the job must allow unsigned rows",
                              topic, (int)partition, (long long)o,
                              tag.mac ? "a row whose tag is not this job key's" : "a row without a tag");
        if (!rc)
            rc = r->fn(r->ctx, partition, o, copy, len, err, errsz);
        free(copy);
    }
    return rc;
}

static int m_create_topic(fsgd_bus_client_t *bc, const char *topic, int partitions, int replication,
                          const char *const *configs, int timeout_ms, char *err, size_t errsz)
{
    mclient_t *c = (mclient_t *)bc;
    pthread_mutex_lock(&c->cl->mu);
    int rc = topic_locked(c->cl, topic, partitions);
    pthread_mutex_unlock(&c->cl->mu);
    return rc ? fsgd_err_fmt(err, errsz, rc, "bus: out of memory") : 0;
}

static int m_broker_count(fsgd_bus_client_t *bc, int timeout_ms, char *err, size_t errsz)
{
    return 1;
}

static int m_kind(const fsgd_bus_t *b)
{
    (void)b;
    return FSGD_BUS_MEMORY;
}

static const fsgd_bus_ops_t mem_ops = {
    .destroy = m_destroy,
    .kind = m_kind,
    .client_new = m_client_new,
    .client_destroy = m_client_destroy,
    .send = m_send,
    .produce = m_produce,
    .serve = m_serve,
    .flush = m_flush,
    .assign = m_assign,
    .restart = m_restart,
    .poll = m_poll,
    .msg_destroy = m_msg_destroy,
    .fatal = m_fatal,
    .partitions = m_partitions,
    .topic_exists = m_topic_exists,
    .watermarks = m_watermarks,
    .read_range = m_read_range,
    .create_topic = m_create_topic,
    .broker_count = m_broker_count,
};
