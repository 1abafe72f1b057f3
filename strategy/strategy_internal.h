/* Private to strategy/: the vtable every strategy fills in. The public
 * wrappers (strategy.c) only dispatch; each strategy's state is its own
 * struct behind a void pointer. */
#ifndef FSGD_STRATEGY_INTERNAL_H
#define FSGD_STRATEGY_INTERNAL_H

#include "fsgd/downlink.h"
#include "fsgd/strategy.h"

typedef struct fsgd_strategy_vt {
    const char *name;
    /* Checks the spec (name included); 0 or FSGD_E_ARG. */
    int (*check)(const char *spec, uint64_t dim, char *err, size_t errsz);

    /* worker side */
    void *(*worker_new)(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz);
    void (*worker_destroy)(void *w);
    fsgd_codec_t *(*device_codec)(void *w);                 /* may be NULL: none */
    size_t (*bound)(const void *w, size_t n);
    int (*encode)(void *w, const uint32_t *keys, const float *vals, size_t n, uint64_t rows, fsgd_outbuf_t *out,
                  char *err, size_t errsz);
    int (*after_step)(void *w, int applied, const uint8_t *section, size_t len, char *err, size_t errsz);
    int (*reset)(void *w);
    size_t (*residual_entries)(const void *w);

    /* aggregator side */
    void *(*agg_new)(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz);
    void (*agg_destroy)(void *a);
    int (*add)(void *a, uint32_t sender, const uint8_t *msg, size_t len, double value_bound, size_t *entries,
               char *err, size_t errsz);
    fsgd_reducer_t *(*take)(void *a, const fsgd_step_info_t *info, char *err, size_t errsz);
    const uint8_t *(*section)(const void *a, size_t *len);   /* may be NULL: no section */
    fsgd_optimizer_t optimizer;
    const char *(*downlink_spec)(const void *a);             /* NULL result: lossless */
    double (*param)(const void *a, const char *name);        /* may be NULL */
    /* 1: a worker's next message depends on the outcome of its last one
     * (gTop-k's put-back, GradiVeQ's basis shared by all of a step's
     * messages, efsign's momentum and residual restored for one message),
     * so it never runs ahead of the model (staleness 0). */
    int lockstep;
} fsgd_strategy_vt_t;

/* One side of a strategy: its vtable and the state that side's constructor
 * made. Each public type holds exactly one, first (so a pointer to either
 * converts to a pointer to its side and back, C11 6.7.2.1). */
typedef struct side {
    const fsgd_strategy_vt_t *vt;
    void *s;
} side_t;

struct fsgd_sworker {
    side_t side;
};

struct fsgd_sagg {
    side_t side;
    uint64_t dim;
    fsgd_downlink_t *down; /* the coded downlink (NULL: none open), strategy_downlink.c */
};

/* The codec strategies (codec_strategy.c) share one implementation. */
extern const fsgd_strategy_vt_t fsgd_strategy_vt_none, fsgd_strategy_vt_fastsgd, fsgd_strategy_vt_logquant,
    fsgd_strategy_vt_topk;

/* The building blocks a strategy made of a codec reuses (codec_strategy.c):
 * a worker that encodes with one codec (error feedback in the codec), and
 * an aggregator that decodes, checks bounds and sums into a reducer. */
typedef struct fsgd_codec_worker {
    fsgd_codec_t *codec; /* error feedback lives in its residual */
} fsgd_codec_worker_t;

typedef struct fsgd_codec_agg {
    uint64_t dim;
    fsgd_codec_t *probe;   /* an encoder of the spec: lossless? downlink spec */
    fsgd_reducer_t *red;
    fsgd_sparse_t dec;
    char spec[192];
} fsgd_codec_agg_t;

void *fsgd_codec_worker_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz);
void fsgd_codec_worker_destroy(void *w);
fsgd_codec_t *fsgd_codec_worker_device_codec(void *w);
size_t fsgd_codec_worker_bound(const void *w, size_t n);
int fsgd_codec_worker_encode(void *w, const uint32_t *keys, const float *vals, size_t n, uint64_t rows,
                             fsgd_outbuf_t *out, char *err, size_t errsz);
int fsgd_codec_worker_after_step(void *w, int applied, const uint8_t *section, size_t len, char *err, size_t errsz);
int fsgd_codec_worker_reset(void *w);
size_t fsgd_codec_worker_residual_entries(const void *w);

void *fsgd_codec_agg_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz);
void fsgd_codec_agg_destroy(void *a);
/* Decodes msg into a->dec and checks every value against value_bound,
 * without reducing (for strategies that select before summing). */
int fsgd_codec_agg_decode(fsgd_codec_agg_t *a, const uint8_t *msg, size_t len, double value_bound, char *err,
                          size_t errsz);
int fsgd_codec_agg_add(void *a, uint32_t sender, const uint8_t *msg, size_t len, double value_bound,
                       size_t *entries, char *err, size_t errsz);
fsgd_reducer_t *fsgd_codec_agg_take(void *a, const fsgd_step_info_t *info, char *err, size_t errsz);
const char *fsgd_codec_agg_downlink_spec(const void *a);

/* The strategy name of a spec ("gtopk" of "gtopk:density=0.001") into
 * name[0..sz); 0, or FSGD_E_ARG when it is empty or too long. */
int fsgd_strategy_spec_name(const char *spec, char *name, size_t sz);

#endif
