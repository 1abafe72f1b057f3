"""The CTR regime's cost model (cost_model.ctr_parts, issue 37) from this
machine's measurements, checked against fsgd run, then asked about clusters
this machine cannot hold.

    scale_model_report.py INPUTS AGG_CAPACITY [RUN_JSON ...]

INPUTS: build/bench/bench_scale_inputs' lines (keys curve, per-key costs),
and build/bench/bench_bus_msg's (a Kafka message's CPU) when there;
AGG_CAPACITY: build/bench/bench_agg_capacity's lines (a shard's per-key
costs, codec none); RUN_JSON: `fsgd run --workers P --metrics-json` of the
same generated data, and beside it RUN_JSON.roles when sampled
(role_sampler.py: each role's CPU, every thread, sampled while it ran).
Lines:
  bench scale_model check workers=P batch=B what=W predicted=.. measured=.. error_pct=..
  bench scale_model predict mode=M workers=P batch=B shards=S rows_s=..
      over_train1=.. down_over_up=.. period_ms=.. bound=.. compute_share=..
check: bytes a worker-step and seconds a step of each role as the run's
metrics count them (wall clock: the roles share this machine's cores), and
with RUN_JSON.roles each role's CPU a step against the model's seconds
with its messages' CPU (what a core per role would be busy with):
worker_cpu_s and shard_cpu_s over the steady steps (from 20% to 90% of the
run's steps, lined up by the trace's clock), worker_cpu_run_s and
shard_cpu_run_s over the whole run (start and end included: the model's
step has neither, so those say what they add). predict: the shards that
give the fastest step, the fewest within 5% of it
(cost_model.ctr_shards_needed), each worker, shard and broker on a core and
a 10 Gb/s link of its own; over_train1: the cluster's rows a second over
fsgd train's on one core (train1_ns_row).
"""
import json
import math
import statistics
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
import cost_model as cm  # noqa: E402


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split()[2:] if "=" in kv)


def fit_msg(points):
    """msg, msg_byte (seconds) from (bytes, cpu_us_msg) points: least squares"""
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(c for _, c in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (c - my) for b, c in points) / sxx if sxx else 0.0
    return dict(msg=(my - slope * mx) * 1e-6, msg_byte=slope * 1e-6)


def read_inputs(path):
    curve, costs, msgs, start = [], [], [], []
    for line in open(path):
        if line.startswith("bench bus_msg ") and "cpu_us_msg=" in line:
            f = fields(line)
            if "burst" not in f:  # bursts: printed by the bench, not in the model
                msgs.append((float(f["bytes"]), float(f["cpu_us_msg"])))
        if not line.startswith("bench scale_inputs "):
            continue
        f = fields(line)
        if "error" in f:
            sys.exit("scale_model: bench_scale_inputs failed: %s" % f["error"])
        if f.get("kind") == "keys":
            curve.append({k: float(f[k]) for k in ("rows", "keys", "key_bytes", "up_codec_bytes")})
        elif f.get("kind") == "costs":
            costs.append({k: float(v) for k, v in f.items() if k != "kind"})
        elif f.get("kind") == "start":
            start.append({k: float(v) for k, v in f.items() if k != "kind"})
    if len(curve) < 2 or not costs:
        sys.exit("scale_model: %s holds no keys curve or no costs" % path)
    curve.sort(key=lambda c: c["rows"])
    med = lambda k: statistics.median(c[k] for c in costs)  # noqa: E731
    c = dict(grad_row=med("grad_ns_row"), encode_key=med("encode_ns_key"), keyenc_key=med("keyenc_ns_key"),
             apply_key=med("apply_ns_key"), answer_key=med("answer_ns_key"), train1_row=med("train1_ns_row"))
    if all("batch_ns_row" in x for x in costs):
        c["batch_row"] = med("batch_ns_row")
    if start:
        c["read_row"] = statistics.median(x["read_ns_row"] for x in start)
    c = {k: v * 1e-9 for k, v in c.items()}
    if msgs:
        c.update(fit_msg(msgs))
    return curve, c


def read_agg(path, curve):
    """a shard's costs from bench_agg_capacity's codec none lines at one
    shard: add a key of a worker's message, step and downlink a union key"""
    add, step, down = [], [], []
    for line in open(path):
        if not line.startswith("bench agg_capacity "):
            continue
        f = fields(line)
        if f.get("codec") != "none" or f.get("shards") != "1" or f.get("table", "dense") != "dense":
            continue
        P, B, union = int(f["workers"]), int(f["batch"]), float(f["keys_step"])
        own = cm.curve_at(curve, B, "keys")
        add.append(float(f["add_ns_key"]) * union / (P * own))
        step.append(float(f["step_ns_key"]))
        down.append(float(f["down_ns_key"]))
    if not add:
        sys.exit("scale_model: %s holds no codec=none shards=1 line" % path)
    return dict(add_key=statistics.median(add) * 1e-9, step_key=statistics.median(step) * 1e-9,
                down_key=statistics.median(down) * 1e-9)


def read_roles(path):
    """role_sampler.py's JSON, or None when the run was not sampled"""
    try:
        return json.load(open(path))
    except OSError:
        return None


def at(points, x):
    """y at x, linear between the points [(x, y), ...] (sorted by x) around it"""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return points[-1][1]


def steady_cpu(m, roles, first=0.2, last=0.9):
    """ROLE -> CPU seconds a step over steps [first, last] of the run's: the
    trace gives when those steps were applied (step1_clock_seconds + its
    seconds), the samples each role's CPU then. {} when the run or the
    sampling is too short to hold such a window."""
    tr, t1 = m.get("trace") or {}, m.get("step1_clock_seconds")
    steps, secs = tr.get("step") or [], tr.get("seconds_from_step1") or []
    samples = roles.get("samples") or []
    if not t1 or len(steps) < 4 or len(samples) < 4:
        return {}
    when = [(float(st), t1 + sec) for st, sec in zip(steps, secs)]
    s_a, s_b = first * steps[-1], last * steps[-1]
    t_a, t_b = at(when, s_a), at(when, s_b)
    if not samples[0][0] <= t_a < t_b <= samples[-1][0]:
        return {}
    out = {}
    for role in sorted({r for _, cpu in samples for r in cpu}):
        pts = [(t, cpu[role]) for t, cpu in samples if role in cpu]
        if len(pts) >= 2 and pts[0][0] <= t_a:
            out[role] = (at(pts, t_b) - at(pts, t_a)) / (s_b - s_a)
    return out


def check(m, curve, c, roles=None):
    """the model against a run's metrics (full replicas or working-set pulls: a run whose shards
    answered pulls): bytes and seconds"""
    P = int(m["workers"]["live"])
    B = m["rows_applied"] / (m["steps"] * P)  # a worker-step's rows as the run took them
    S = int((m.get("shard") or {}).get("shards", 1) or 1)
    d = m["downlink"]
    values = d.get("values_bytes_per_worker_step", 0)
    mode = "working_set" if values > 0 else "full"
    # key caching: from a run's second epoch its pulls name their key lists
    # epochs_run: the epochs' steps as run (a job stopped early ends inside one)
    epochs = max(1.0, float(m.get("epochs_run", m["epochs"])))
    p = cm.ctr_parts(mode, P, S, B, curve, c, parts=int(m["partitions"]), dim=m["dim"], epochs=epochs)
    ps = m["per_step_seconds"]
    rows = [
        ("up_bytes", p["up"], d["up_bytes_per_worker_step"]),
        ("down_bytes", p["down"], d["down_bytes_per_worker_step"] + values),
        # the metrics' gradient and encode are the workers' sums a step
        ("worker_grad_s", B * c["grad_row"], ps["gradient"] / P),
        ("shard_decode_s", P * p["k_own"] * c["add_key"], ps["decode"]),
        # working set: no values to publish (the answers go out as pulls come, outside the update)
        ("shard_update_s", p["k_union"] * (c["step_key"] + (c["down_key"] if mode == "full" else 0)), ps["update"]),
    ]
    us = m.get("update_seconds")
    if us:  # the update's parts the model has (the rest: looks, epoch ends, checkpoints)
        rows += [("shard_step_s", p["k_union"] * c["step_key"], us["step"] / m["steps"])]
        if mode == "full":
            rows += [("shard_publish_s", p["k_union"] * c["down_key"], us["publish"] / m["steps"])]
    if roles:  # a role's CPU a step, every thread: what a core of its own would be busy with
        steady = steady_cpu(m, roles)
        for name, per_step in (("", steady), ("_run", {r: v / m["steps"] for r, v in roles["cpu"].items()})):
            workers = [v for r, v in per_step.items() if r.startswith("worker")]
            shards = [v for r, v in per_step.items() if r.startswith("shard")]
            if workers:
                rows += [("worker_cpu%s_s" % name, p["worker"], sum(workers) / len(workers))]
            if shards:
                rows += [("shard_cpu%s_s" % name, p["shard"], max(shards))]
    for what, pred, meas in rows:
        err = 100.0 * (pred - meas) / meas if meas else float("nan")
        print("bench scale_model check mode=%s workers=%d batch=%.0f what=%s predicted=%.6g measured=%.6g "
              "error_pct=%+.1f" % (mode, P, B, what, pred, meas, err))
    return rows


def predict(curve, c, workers, batches, dim):
    for B in batches:
        for P in workers:
            for mode in ("full", "working_set"):
                S, p = cm.ctr_shards_needed(mode, P, B, curve, c, dim=dim)
                bound = max(("worker", "shard", "link", "broker"), key=lambda k: p[k])
                print("bench scale_model predict mode=%s workers=%d batch=%d shards=%s rows_s=%.0f over_train1=%.1f "
                      "down_over_up=%.2f period_ms=%.3f bound=%s compute_share=%.2f"
                      % (mode, P, B, S if S else ">4096", p["rows_s"], p["rows_s"] * c["train1_row"],
                         p["down"] / p["up"], 1e3 * p["period"], bound, p["compute_share"]))


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    curve, c = read_inputs(argv[1])
    c.update(read_agg(argv[2], curve))
    print("bench scale_model costs " + " ".join("%s_ns=%.2f" % (k, v * 1e9) for k, v in sorted(c.items())))
    dim = 1 << 24
    for path in argv[3:]:
        check(json.load(open(path)), curve, c, read_roles(path + ".roles"))
    predict(curve, c, [2, 4, 8, 16, 64, 256, 1000], [256, 1024], dim)


if __name__ == "__main__":
    main(sys.argv)
