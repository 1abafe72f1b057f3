"""The cost of one synchronous step of fsgd's distributed training, from
measured constants, for P workers and S aggregator shards (issue 26).

A step: every worker computes its share of the batch's gradient and encodes
it; the messages go through Kafka to the S shards (each owns the keys
k mod S); each shard decodes its part of the P messages, updates its weights
and publishes its part of the model delta, which every worker reads.

    n_w   = R / P                       rows a worker (R rows a step)
    k_w   = keys(n_w), K = keys(R)      distinct keys of a worker's rows, of the step's
    grad  = c_grad * n_w * nnz          per worker, the workers in parallel
    enc   = c_enc * k_w
    dec   = c_dec * P * k_w / S         per shard, the shards in parallel
    upd   = c_upd * K / S               optimizer + downlink encode
    B_up  = up_bpk * k_w,  B_down = down_bpk * K    bytes a worker sends / receives
    comm  = 2 (alpha + hop) + (B_up + B_down) beta_w + P (B_up + B_down) beta_c / S

alpha, beta_w: the worker's link (one per worker, as the emulation and a
cluster have); hop: Kafka's fixed cost of a hop; beta_c: seconds per byte of
the central path (brokers and shards), which every worker's bytes cross and
which S shards (and their brokers' partitions) split. keys(n) is Heaps' law
a * n^g, at most the model's dimension: fitted on the bench's own rows.

Per-key costs depend on the model's dimension (a 2^26 model's weights miss the
caches, a 2^16 one's do not). costs_from_train reads them from a
single-process `fsgd train` at one dimension (threads standing in for the
workers, the same rows and batch: not the distributed runs the model is
checked against), and scale_by_dim carries the distributed runs' costs at the
main dimension to another by those measurements' ratio.
"""
import math


def heaps_fit(points):
    """(a, g) of k = a n^g, least squares in log-log over [(n, k), ...]"""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(k) for _, k in points]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    g = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return math.exp(my - g * mx), g


def keys(n_rows, heaps, dim):
    a, g = heaps
    return min(float(dim), a * n_rows ** g)


def step_parts(work, strat, net, P, S):
    """seconds of each part of a step: dict grad, encode, decode, update, comm, total.
    work: rows (a step), nnz, heaps (a, g), dim; k_w, K (optional: measured keys)
    strat: c_grad (s a nonzero), c_enc, c_dec (s a key), c_upd (s a step key), up_bpk, down_bpk (bytes a key)
    net: alpha, beta_w (s a byte, a worker's link), hop (s), beta_c (s a byte, central)"""
    n_w = work["rows"] / P
    # a run's own measured keys, where known, before Heaps' law
    k_w = work["k_w"] if "k_w" in work else keys(n_w, work["heaps"], work["dim"])
    K = work["K"] if "K" in work else keys(work["rows"], work["heaps"], work["dim"])
    b_up, b_down = strat["up_bpk"] * k_w, strat["down_bpk"] * K
    parts = {
        "grad": strat["c_grad"] * n_w * work["nnz"],
        "encode": strat["c_enc"] * k_w,
        "decode": strat["c_dec"] * P * k_w / S,
        "update": strat["c_upd"] * K / S,
        "comm": 2 * (net["alpha"] + net["hop"]) + (b_up + b_down) * net["beta_w"]
        + P * (b_up + b_down) * net["beta_c"] / S,
    }
    parts["total"] = sum(parts.values())
    parts["bytes_up"], parts["bytes_down"], parts["k_w"], parts["K"] = b_up, b_down, k_w, K
    return parts


def costs_from_train(m, heaps_g):
    """per-key costs, keys and uplink bytes of a step from fsgd train's
    metrics JSON m (threads = workers; seconds summed over threads):
    c_grad (s a nonzero), c_enc, c_dec (s a worker's key), c_upd (s a step
    key, K = k_w threads^g), k_w (keys a worker-step), up_bpk (bytes a key)"""
    steps, P = m["steps"], m["threads"]
    t = m["seconds"]
    pairs = m["raw_bytes"] / 8  # every worker-step's raw gradient, 8 bytes a pair
    k_w = pairs / (steps * P)
    K = min(float(m["dim"]), k_w * P ** heaps_g)
    return dict(c_grad=1 / m["nnz_per_second_per_thread"], c_enc=t["encode"] / pairs, c_dec=t["decode"] / pairs,
                c_upd=t["update"] / (steps * K), k_w=k_w, up_bpk=m["wire_bytes"] / pairs)


def scale_by_dim(strat, ref, at):
    """strat's costs (measured at ref's dimension) carried to at's: each
    per-key cost times at / ref of the same figure from costs_from_train; a
    figure whose reference is 0 stays as it is. Bytes a key stay strat's:
    fsgd train's wire bytes are not the sharded uplink's (no per-shard split)."""
    out = dict(strat)
    for c in ("c_grad", "c_enc", "c_dec", "c_upd"):
        if ref[c] > 0:
            out[c] = strat[c] * at[c] / ref[c]
    return out


def median_costs(costs):
    """the figure-by-figure median of several costs_from_train results (a
    shared machine's load slows single runs)"""
    out = {}
    for k in costs[0]:
        v = sorted(c[k] for c in costs)
        n = len(v)
        out[k] = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return out


def fit_central(points, relative=False):
    """(hop, beta_c) from loopback runs: comm = 2 hop + x beta_c with
    x = P (B_up + B_down) / S (bytes, after the worker links' own share is
    taken off comm); least squares over [(x, comm), ...], both kept >= 0.
    relative: each point's error as a share of its comm (weights 1/comm^2;
    points with comm <= 0 left out), so runs of small messages, whose comm
    is nearly all hop, set the hop, not the intercept of the big ones' line."""
    if relative:
        points = [(x, y) for x, y in points if y > 0]
    ws = [1.0 / (y * y) if relative else 1.0 for _, y in points]
    n = len(points)
    if n == 0:
        return 0.0, 0.0
    if n == 1:
        x, y = points[0]
        return 0.0, max(0.0, y / x) if x else 0.0
    sw = sum(ws)
    sx = sum(w * x for w, (x, _) in zip(ws, points))
    sy = sum(w * y for w, (_, y) in zip(ws, points))
    sxx = sum(w * x * x for w, (x, _) in zip(ws, points))
    sxy = sum(w * x * y for w, (x, y) in zip(ws, points))
    den = sw * sxx - sx * sx
    b = (sw * sxy - sx * sy) / den if den else 0.0
    b = max(0.0, b)
    a = max(0.0, (sy - b * sx) / sw)
    return a / 2, b


def interp_costs(calib, dim):
    """per-key costs at dim from single-process calibrations {dim: costs} at
    a few dimensions: figure by figure, linear in log2(dim) between the two
    calibrated dimensions around it, the nearest one's beyond them"""
    dims = sorted(calib)
    if dim <= dims[0]:
        return dict(calib[dims[0]])
    if dim >= dims[-1]:
        return dict(calib[dims[-1]])
    hi = next(d for d in dims if d >= dim)
    lo = dims[dims.index(hi) - 1]
    if hi == dim:
        return dict(calib[hi])
    t = (math.log2(dim) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
    out = {}
    for k in calib[lo]:
        a, b = calib[lo][k], calib[hi].get(k, calib[lo][k])
        out[k] = a + t * (b - a) if isinstance(a, (int, float)) else a
    return out


def scale_for_machine(strat, calib, main_dim, dim, P):
    """strat's costs (measured at main_dim with P workers on one machine)
    carried to dim: the workers' costs (gradient, encode) by the
    calibrations' ratio at the machine's working set of the workers'
    weights, P replicas of dim (each worker process holds its own, and the
    P of them share the caches that one fsgd train's threads share one θ
    in), the shards' (decode, update) at dim (S shards hold dim between
    them); capped at the main dimension's. Bytes a key stay strat's."""
    ref = interp_costs(calib, main_dim)
    at_w = interp_costs(calib, min(main_dim, P * dim))
    at_a = interp_costs(calib, dim)
    out = dict(strat)
    for c, at in (("c_grad", at_w), ("c_enc", at_w), ("c_dec", at_a), ("c_upd", at_a)):
        if ref[c] > 0:
            out[c] = strat[c] * at[c] / ref[c]
    return out


def shards_within(work, strat, net, P, factor=1.2, s_max=64):
    """the fewest shards S (1..s_max, powers of 2) whose step is within factor x
    the workers' pure compute (grad + encode); None when none is"""
    S = 1
    while S <= s_max:
        p = step_parts(work, strat, net, P, S)
        if p["total"] <= factor * (p["grad"] + p["encode"]):
            return S
        S *= 2
    return None


def one_aggregator_limit(work, strat, net, p_max=4096):
    """the worker count past which one aggregator (S = 1) makes a step slower
    (the step's minimum over P = 1, 2, 4, ...)"""
    best_p, best = 1, step_parts(work, strat, net, 1, 1)["total"]
    P = 2
    while P <= p_max:
        t = step_parts(work, strat, net, P, 1)["total"]
        if t < best:
            best_p, best = P, t
        P *= 2
    return best_p, best


# ---------------------------------------------------------------------------
# The CTR regime (issue 37): small steps of B rows a worker, Zipf keys, many
# workers, bounded staleness. Steps are pipelined (a worker computes step t
# on the model of t - 1 - tau), so a step's period is its slowest stage, not
# their sum: the workers' compute, a shard's work, a worker's link, a
# broker's. Two ways a worker gets its weights:
#   full:        every worker holds the whole model and receives the step's
#                union of keys (fsgd run today);
#   working_set: a worker pulls the values of its own batch's keys from the
#                shards that own them (a sorted key list up, the values in
#                its order down), as the Parameter Server's workers do.
# Byte constants: trainer/KAFKA_FORMAT.md (an authenticated frame, the
# gradient body's header and a range, the model body's step state).
FRAME_BYTES = 40 + 32
GRAD_HEADER_BYTES = 52
RANGE_BYTES = 20
STATE_BYTES = 16
STATE_PART_BYTES = 28
VALUE_HEADER_BYTES = 8
PULL_HEADER_BYTES = 8      # a pull's body before its key block (trainer/distributed/pull.h)
PULL_BY_ID_BYTES = 24      # a pull that names a key list its shard keeps (key caching)
ANSWER_HEADER_BYTES = 24   # an answer's body before its values


def curve_at(curve, rows, field, dim=None):
    """field ("keys", "key_bytes", "up_codec_bytes") of `rows` consecutive
    rows, from the measured curve [{rows, keys, ...}, ...] (sorted by rows):
    linear in log-log between the two points around it, the end segment's
    slope beyond them; keys at most dim"""
    pts = [(c["rows"], c[field]) for c in curve if c[field] > 0]
    if rows <= pts[0][0]:
        lo, hi = pts[0], pts[1]
    elif rows >= pts[-1][0]:
        lo, hi = pts[-2], pts[-1]
    else:
        i = next(i for i, p in enumerate(pts) if p[0] >= rows)
        lo, hi = pts[i - 1], pts[i]
    t = (math.log(rows) - math.log(lo[0])) / (math.log(hi[0]) - math.log(lo[0]))
    v = math.exp(math.log(lo[1]) + t * (math.log(hi[1]) - math.log(lo[1])))
    return min(v, float(dim)) if dim and field == "keys" else v


def ctr_parts(mode, P, S, B, curve, c, parts=12, dim=None, link_bps=1.25e9, value_bytes=4, epochs=1):
    """one pipelined step of P workers of B rows each and S shards.
    curve: bench_scale_inputs' kind=keys lines; c: costs in seconds:
      grad_row, encode_key, keyenc_key, apply_key, answer_key (a worker's and
      a shard's, bench_scale_inputs), add_key (a shard, a key of a worker's
      message), step_key, down_key (a shard, a key of the step's union:
      bench_agg_capacity), and optionally msg, msg_byte (a Kafka message's
      CPU, both ends together: msg + msg_byte a byte, bench_bus_msg; half is
      charged to each end: a worker sends and receives 2 messages a shard a
      step with full replicas, 4 with pulls; a shard 1 + P, or 1 + 3P;
      every message priced as one alone (bench_bus_msg's bursts show what
      fetches that bring several would save: not counted),
      batch_row (a worker's step copies its rows from its cache) and
      read_row (a row read from NAME.data's row blocks into that cache,
      once a job: a step's share is 1 / epochs), both optional;
      parts: NAME.data's partitions (the step state);
    link_bps: a machine's link, bytes a second (10 Gb/s), workers' and
    brokers' alike, one broker a shard; value_bytes: a pulled value's (4,
    or 2 as halves with a lossy codec); epochs: a batch's key list comes
    round each epoch, so after the first its pull names the list (key
    caching; bytes are the mean over the job; a fraction counts the last
    epoch's part). Returns seconds of each stage, the
    period (their max), bytes a worker-step and rows a second."""
    k_own = curve_at(curve, B, "keys", dim)
    k_union = curve_at(curve, P * B, "keys", dim)
    ranges = math.ceil(parts / P)
    up = S * (FRAME_BYTES + GRAD_HEADER_BYTES + RANGE_BYTES * ranges) + curve_at(curve, B, "up_codec_bytes")
    state = STATE_BYTES + STATE_PART_BYTES * parts
    worker = B * (c["grad_row"] + c.get("batch_row", 0.0) + c.get("read_row", 0.0) / epochs) + k_own * c["encode_key"]
    shard = P * k_own * c["add_key"] + k_union * c["step_key"]
    if mode == "full":
        down = S * (FRAME_BYTES + state + VALUE_HEADER_BYTES) + curve_at(curve, P * B, "key_bytes") + 4 * k_union
        worker += k_union * c["apply_key"]
        shard += k_union * c["down_key"]
    elif mode == "working_set":
        # the pull to each shard: the batch's sorted keys; down: each shard's
        # step message (its state, no values) and its answer, the values in
        # the pull's order
        keys = S * PULL_HEADER_BYTES + curve_at(curve, B, "key_bytes")
        up += S * FRAME_BYTES + (keys + (epochs - 1) * S * PULL_BY_ID_BYTES) / epochs
        down = (S * (FRAME_BYTES + state + VALUE_HEADER_BYTES) + S * (FRAME_BYTES + ANSWER_HEADER_BYTES)
                + value_bytes * k_own)
        worker += k_own * (c["keyenc_key"] + c["apply_key"])
        shard += P * k_own * c["answer_key"]
    else:
        raise ValueError("mode must be full or working_set, not %r" % mode)
    shard /= S
    # each end of a Kafka message: its client's CPU (librdkafka, the frame and its tag)
    ends_w, ends_s = (2 * S, 1 + P) if mode == "full" else (4 * S, 1 + 3 * P)
    msg, msg_byte = c.get("msg", 0.0), c.get("msg_byte", 0.0)
    worker += 0.5 * (ends_w * msg + (up + down) * msg_byte)
    shard += 0.5 * (ends_s * msg + P * (up + down) / S * msg_byte)
    link = (up + down) / link_bps
    broker = P * (up + down) / (S * link_bps)  # every worker's bytes cross the brokers, S of them
    period = max(worker, shard, link, broker)
    return dict(worker=worker, shard=shard, link=link, broker=broker, period=period, up=up, down=down,
                k_own=k_own, k_union=k_union, rows_s=P * B / period, compute_share=B * c["grad_row"] / period)


def ctr_shards_needed(mode, P, B, curve, c, s_max=4096, slack=1.05, **kw):
    """the shards S (powers of 2 up to s_max) for the fastest step: the
    fewest whose period is within slack x the best one's (past it, more
    shards only add to every worker's messages). (S, parts)"""
    runs = []
    S = 1
    while S <= s_max:
        runs.append((S, ctr_parts(mode, P, S, B, curve, c, **kw)))
        S *= 2
    best = min(p["period"] for _, p in runs)
    return next((S, p) for S, p in runs if p["period"] <= slack * best)
