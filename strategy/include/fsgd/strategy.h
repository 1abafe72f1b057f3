/* Compression strategies: everything one synchronous step of the
 * worker–aggregator exchange does to the numbers, in one place.
 *
 *   worker      fsgd_sworker_encode(gradient)          -> uplink message
 *   aggregator  fsgd_sagg_add(sender, message)  (each)    decode + reduce,
 *               fsgd_sagg_take(&sum)                      or reduce in the
 *                                                         compressed domain
 *               optimizer step on sum (fsgd_sagg_optimizer says which)
 *               fsgd_sagg_section(&bytes)              -> feedback section
 *               fsgd_sagg_downlink_encode(θ, keys)     -> downlink: Δ = θ − ρ
 *                         (θ − ρ is the aggregator's error feedback, so no
 *                         mass is lost)
 *   worker      fsgd_sworker_downlink_decode + _apply (θ += update), now and
 *               then fsgd_sworker_downlink_verify (θ == ρ), then
 *               fsgd_sworker_after_step(applied?, section)
 *
 * Messages are self-describing: any parameter that changes during a run
 * (MQGrad's bits) is in the uplink message itself (codec/FORMAT.md), and
 * what the aggregator tells the workers travels in the feedback section of
 * the model message that closes the step (trainer/KAFKA_FORMAT.md), so any
 * receiver decodes any step with no side channel.
 *
 * Key ranges: an aggregator instance only ever reduces the keys in the
 * messages it is given, and a worker instance only the keys it is given. An
 * aggregator split by key range runs one fsgd_sagg_t per range and its
 * workers one fsgd_sworker_t per range; nothing here assumes one instance
 * sees every key (a strategy whose selection is global, such as gTop-k,
 * becomes exact per range).
 *
 * Specs: "name:key=value,..." as for codecs (fsgd/codec.h). The codec
 * strategies (none, fastsgd, logquant, topk) take exactly their codec's
 * spec. Adding a strategy: one file under strategy/ defining an
 * fsgd_strategy_vt_t, and one line in the registry of strategy/strategy.c. */
#ifndef FSGD_STRATEGY_H
#define FSGD_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/codec.h"
#include "fsgd/error.h"
#include "fsgd/reduce.h"
#include "fsgd/sparse.h"

typedef struct fsgd_sworker fsgd_sworker_t;

/* The bounded delay the strategy of spec runs at when the job asks for
 * staleness: staleness itself, or 0 for a strategy whose worker must see the
 * outcome of its last message before it encodes the next (gtopk, gradiveq,
 * efsign). */
int fsgd_strategy_max_lag(const char *spec, int staleness);

/* 1 when the workers of spec's strategy run the optimizer themselves on a
 * whole replica (efsign), 0 otherwise (and for an unknown spec). */
int fsgd_strategy_workers_optimize(const char *spec);
typedef struct fsgd_sagg fsgd_sagg_t;

/* What the aggregator does with the reduced sum of a step. */
typedef enum fsgd_optimizer {
    FSGD_OPT_ADAM = 0, /* sum / rows is the mean gradient: L2 + sparse Adam (fsgd/adam.h) */
    FSGD_OPT_APPLY = 1 /* sum / workers is already a step: θ -= it (workers ran their own optimizer) */
} fsgd_optimizer_t;

/* What the aggregator knows about the step it is closing (for strategies
 * that adapt: MQGrad's reward). */
typedef struct fsgd_step_info {
    uint64_t step;       /* the step being closed, 1-based */
    uint64_t rows;       /* rows applied */
    double loss_sum;     /* sum of the per-row training losses before the update */
    double seconds;      /* wall time of the step */
    uint32_t n_senders;  /* messages reduced */
} fsgd_step_info_t;

/* Lists the registered strategy names, space separated (static string). */
const char *fsgd_strategy_list(void);

/* Checks a spec without making an instance: 0, or FSGD_E_ARG with err
 * naming the strategy or parameter. */
int fsgd_strategy_check(const char *spec, uint64_t dim, char *err, size_t errsz);

/* Can spec run on an aggregator split into `shards` key shards (fsgd/shard.h)?
 * 0, or FSGD_E_ARG with err naming the strategy and why not: gradiveq and
 * mqgrad are refused at shards > 1 (strategy/FORMAT.md, "Sharded
 * aggregators"), as is a count k=N below the shards. The one decision that
 * fsgd train --shards and the distributed shards both take. */
int fsgd_strategy_check_shards(const char *spec, int shards, char *err, size_t errsz);

/* The spec that shard `shard` of `shards` runs (its sworker and sagg, over
 * the shard's local dim) for a model of dim keys, into out[0..outsz): spec
 * itself, except the counts: topk's and gtopk's k=N, and gtopk's
 * ceil(density x dim), become the shard's budget N/S, one more for the
 * first N mod S shards, so the budgets add up to N (topk's ratio of each
 * message's entries stays as it is). 0, or FSGD_E_ARG with err
 * (fsgd_strategy_check_shards's refusals, more shards than dim keys, a
 * budget below one entry a shard, out too small). */
int fsgd_strategy_shard_spec(const char *spec, uint64_t dim, uint32_t shard, uint32_t shards, char *out,
                             size_t outsz, char *err, size_t errsz);

/* ---- worker side: one instance per worker (per key range) ---- */

/* NULL with err on a bad spec or out of memory. seed: for strategies with
 * randomness (the same seed gives the same run). */
fsgd_sworker_t *fsgd_sworker_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz);
void fsgd_sworker_destroy(fsgd_sworker_t *w);

/* The uplink codec, for a device backend that encodes on the GPU with it
 * (fsgd_backend_gradient_encoded), or NULL when the strategy must see the
 * gradient itself first (momentum, projections): the caller then encodes
 * with fsgd_sworker_encode. */
fsgd_codec_t *fsgd_sworker_device_codec(fsgd_sworker_t *w);

/* Upper bound on the uplink message for a gradient of n entries. */
size_t fsgd_sworker_bound(const fsgd_sworker_t *w, size_t n);

/* Encodes the step's gradient (n entries, keys strictly increasing < dim:
 * the sum over the worker's rows, as fsgd_backend_gradient gives it; rows:
 * how many) into out (fsgd/codec.h's fsgd_outbuf_t, sized by
 * fsgd_sworker_bound). Error-feedback state is kept in w. */
int fsgd_sworker_encode(fsgd_sworker_t *w, const uint32_t *keys, const float *vals, size_t n, uint64_t rows,
                        fsgd_outbuf_t *out, char *err, size_t errsz);

/* A sharded worker's gradient, split by shard: fsgd_sworker_whole_scale of
 * the whole gradient's values, once a step, then fsgd_sworker_set_whole on
 * each part's worker, so a strategy whose choices are relative to the whole
 * takes them from it and a sharded job sends the pairs an unsharded one
 * would (fsgd_codec_whole_scale). NAN: the part's own. */
double fsgd_sworker_whole_scale(fsgd_sworker_t *w, const float *whole, size_t n);
void fsgd_sworker_set_whole(fsgd_sworker_t *w, double scale);

/* The step this worker sent a message for is closed. applied: whether the
 * aggregator applied that message (the model message's applied list);
 * section/len: the feedback section of that model message (len 0: none).
 * A message that was not applied has its error-feedback mass restored; a
 * strategy with feedback (gTop-k's put-back, MQGrad's bits) reads its
 * section. Returns 1 when error-feedback mass was restored, 0 otherwise, or
 * FSGD_E_FORMAT with err when the section is malformed (state unchanged). */
int fsgd_sworker_after_step(fsgd_sworker_t *w, int applied, const uint8_t *section, size_t len, char *err,
                            size_t errsz);

/* The model was replaced by a snapshot of another aggregator generation:
 * forget all error-feedback state. Returns 1 when state was discarded. */
int fsgd_sworker_reset(fsgd_sworker_t *w);

/* The downlink as a worker reads it. These need no instance: the message
 * names its codec (codec/FORMAT.md), so anything holding a replica of the
 * model (a worker, the model assembler, a fuzz target) applies it alike.
 *
 * Decodes a coded downlink message of a model of dim weights into update
 * (keys strictly increasing, < dim; caller owns it, reused across calls).
 * 0, or FSGD_E_FORMAT with err naming the field; θ is not touched. */
int fsgd_sworker_downlink_decode(const uint8_t *msg, size_t len, uint64_t dim, fsgd_sparse_t *update, char *err,
                                 size_t errsz);

/* θ += update, the same float additions in the same order as the
 * aggregator's replica, so both stay bit-identical. 0, or FSGD_E_NONFINITE
 * (θ unchanged) when a sum would not be finite. */
int fsgd_sworker_downlink_apply(float *theta, uint64_t dim, const fsgd_sparse_t *update, char *err, size_t errsz);

/* 1 when θ (dim weights) is the aggregator's replica whose check value the
 * model message carried (fsgd_sagg_downlink_check), 0 when it is not. */
int fsgd_sworker_downlink_verify(const float *theta, uint64_t dim, uint32_t check);

/* The strategy's optimizer, as fsgd_sagg_optimizer. With FSGD_OPT_APPLY the
 * worker's message is already a step, so the job's L2 penalty must be in the
 * gradient the worker encodes (λ·rows·θ_k on the touched keys of a gradient
 * sum over rows): the aggregator only averages. */
fsgd_optimizer_t fsgd_sworker_optimizer(const fsgd_sworker_t *w);

/* ---- aggregator side: one instance per aggregator (per key range) ---- */

fsgd_sagg_t *fsgd_sagg_new(const char *spec, uint64_t dim, uint64_t seed, char *err, size_t errsz);
void fsgd_sagg_destroy(fsgd_sagg_t *a);

/* Decodes and reduces one sender's message for the current step. Every
 * decoded value must be finite and |v| <= value_bound (a forged or broken
 * sender), else FSGD_E_RANGE and nothing of it is kept; FSGD_E_FORMAT for
 * a message that does not decode, whatever the reason (CRC, length, key
 * range); FSGD_E_NOMEM. err names the field. *entries: the entries the
 * message carried (for the downlink budget). */
int fsgd_sagg_add(fsgd_sagg_t *a, uint32_t sender, const uint8_t *msg, size_t len, double value_bound,
                  size_t *entries, char *err, size_t errsz);

/* Closes the reduction: returns the reducer holding the sum of the step
 * that is to be applied (double precision, fsgd/reduce.h), which the
 * caller drains (fsgd_reducer_take*) before the next add. NULL with err on
 * failure (out of memory). */
fsgd_reducer_t *fsgd_sagg_take(fsgd_sagg_t *a, const fsgd_step_info_t *info, char *err, size_t errsz);

/* The feedback section for the model message that closes this step (valid
 * until the next add/take); *len 0 when the strategy sends none. */
const uint8_t *fsgd_sagg_section(const fsgd_sagg_t *a, size_t *len);

/* 1 when the aggregator side is only "decode each message with
 * fsgd_codec_decode and sum" (the codec strategies) with Adam on the sum:
 * a caller may then decode and sum in parallel itself (fsgd train does). */
int fsgd_sagg_plain_sum(const fsgd_sagg_t *a);

/* How the aggregator applies the sum (see fsgd_optimizer_t). */
fsgd_optimizer_t fsgd_sagg_optimizer(const fsgd_sagg_t *a);

/* The lossy codec spec for the downlink's Δ when the job says "auto", or
 * NULL when the strategy is lossless (the exact values go down). */
const char *fsgd_sagg_downlink_spec(const fsgd_sagg_t *a);

/* A strategy parameter the aggregator currently uses, for metrics (e.g.
 * "bits"); NAN when it has none of that name. */
double fsgd_sagg_param(const fsgd_sagg_t *a, const char *name);

/* The downlink as the aggregator sends it: it keeps a replica ρ of what
 * every worker holds and codes Δ = θ − ρ (fsgd/downlink.h says how).
 *
 * Opens it for the job's downlink key: "full" (or NULL) opens none (the
 * caller sends float32 values); "auto" or "" codes with
 * fsgd_sagg_downlink_spec (none for a lossless strategy); anything else is
 * a lossy codec spec. ρ starts at theta (dim weights of fsgd_sagg_new).
 * Writes the spec in use ("full" when none) to used[0..usedsz). 0, or
 * FSGD_E_ARG with err naming the spec. Call once, before the first encode. */
int fsgd_sagg_downlink_open(fsgd_sagg_t *a, const char *job_downlink, const float *theta, char *used, size_t usedsz,
                            char *err, size_t errsz);

/* 1 when a coded downlink is open (the model message is a coded delta), 0
 * when float32 values go down. The calls below need one open. */
int fsgd_sagg_downlink_coded(const fsgd_sagg_t *a);

/* Upper bound on a downlink message over n keys. */
size_t fsgd_sagg_downlink_bound(const fsgd_sagg_t *a, size_t n);

/* Codes Δ = θ − ρ over keys[0..n) (strictly increasing), at most budget
 * entries (0: all n), into out (sized by fsgd_sagg_downlink_bound), and adds
 * to ρ what a worker will add (fsgd_downlink_encode). Returns 0 or a
 * negative fsgd_err. */
int fsgd_sagg_downlink_encode(fsgd_sagg_t *a, const float *theta, const uint32_t *keys, size_t n, size_t budget,
                              fsgd_outbuf_t *out, char *err, size_t errsz);

/* The check value of ρ, for fsgd_sworker_downlink_verify. */
uint32_t fsgd_sagg_downlink_check(const fsgd_sagg_t *a);

/* ρ = θ: a snapshot went down, so every worker now holds θ exactly. */
void fsgd_sagg_downlink_sync(fsgd_sagg_t *a, const float *theta);

#endif
