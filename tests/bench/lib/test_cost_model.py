"""The cost model's arithmetic (lib/cost_model.py) on fixed inputs whose
answers are worked out by hand here. Exits 1 naming the first figure that
is off; run by tests/integration/bench_cost_model.sh and paper_regime.sh."""
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost_model as cm  # noqa: E402

failures = []
checked = [0]


def close(name, got, want, rel=1e-9):
    checked[0] += 1
    if want is None or got is None:
        ok = got is want
    else:
        ok = abs(got - want) <= rel * max(1.0, abs(want))
    if not ok:
        failures.append("%s: got %r, want %r" % (name, got, want))


# Heaps' law: exact points of k = 3 n^0.5 give back a = 3, g = 0.5
a, g = cm.heaps_fit([(100, 30.0), (400, 60.0), (1600, 120.0)])
close("heaps a", a, 3.0)
close("heaps g", g, 0.5)
close("keys below dim", cm.keys(10000, (3.0, 0.5), 10 ** 6), 300.0)
close("keys capped at dim", cm.keys(10000, (3.0, 0.5), 200), 200.0)

# One step: R = 1000 rows, nnz 10, keys(n) = n (a = 1, g = 1), P = 4, S = 2.
# n_w = 250, k_w = 250, K = 1000
work = {"rows": 1000, "nnz": 10, "heaps": (1.0, 1.0), "dim": 10 ** 9}
strat = {"c_grad": 1e-6, "c_enc": 2e-6, "c_dec": 3e-6, "c_upd": 4e-6, "up_bpk": 8.0, "down_bpk": 4.0}
net = {"alpha": 1e-3, "beta_w": 1e-8, "hop": 2e-3, "beta_c": 1e-9}
p = cm.step_parts(work, strat, net, 4, 2)
close("grad", p["grad"], 1e-6 * 250 * 10)          # 2.5e-3
close("encode", p["encode"], 2e-6 * 250)           # 5e-4
close("decode", p["decode"], 3e-6 * 4 * 250 / 2)   # 1.5e-3
close("update", p["update"], 4e-6 * 1000 / 2)      # 2e-3
# B_up = 2000, B_down = 4000: 2 (1e-3 + 2e-3) + 6000e-8 + 4 * 6000e-9 / 2 = 6e-3 + 6e-5 + 1.2e-5
close("comm", p["comm"], 6e-3 + 6e-5 + 1.2e-5)
close("total", p["total"], 2.5e-3 + 5e-4 + 1.5e-3 + 2e-3 + 6.072e-3)
close("bytes up", p["bytes_up"], 2000.0)
close("bytes down", p["bytes_down"], 4000.0)

# More shards divide the aggregator's parts and the central bytes, nothing else
p8 = cm.step_parts(work, strat, net, 4, 8)
close("decode S=8", p8["decode"], p["decode"] / 4)
close("grad S=8", p8["grad"], p["grad"])

# measured keys stand in for Heaps' law: k_w = 100, K = 300
pk = cm.step_parts(dict(work, k_w=100.0, K=300.0), strat, net, 4, 2)
close("measured k_w encode", pk["encode"], 2e-6 * 100)
close("measured K update", pk["update"], 4e-6 * 300 / 2)

# fit_central: comm = 2 * 0.01 + x * 2e-9 exactly
hop, beta_c = cm.fit_central([(1e6, 0.02 + 2e-3), (4e6, 0.02 + 8e-3), (9e6, 0.02 + 18e-3)])
close("fit hop", hop, 0.01)
close("fit beta_c", beta_c, 2e-9)
# a negative slope is clamped: the central path is never faster than free
hop, beta_c = cm.fit_central([(1e6, 0.05), (2e6, 0.04)])
close("fit clamp beta_c", beta_c, 0.0)
close("fit clamp hop", hop, 0.045 / 2)

# relative: weights 1/comm^2; exact points still give the line back
hop, beta_c = cm.fit_central([(1e6, 0.02 + 2e-3), (4e6, 0.02 + 8e-3), (9e6, 0.02 + 18e-3)], relative=True)
close("fit relative hop", hop, 0.01)
close("fit relative beta_c", beta_c, 2e-9)
# two points, one with comm <= 0 left out: one point, all slope
hop, beta_c = cm.fit_central([(1e6, 0.004), (2e6, -0.01)], relative=True)
close("fit relative one point hop", hop, 0.0)
close("fit relative one point beta_c", beta_c, 4e-9)
# three points off a line: y = 0.01 at x = 0, 0.02 at 1e6, 0.05 at 2e6.
# Weights w = 1/y^2 = 1e4, 2500, 400: sw = 12900, sx = 2.5e9 + 8e8 = 3.3e9,
# sy = 100 + 50 + 20 = 170, sxx = 2.5e15 + 1.6e15 = 4.1e15,
# sxy = 5e7 + 4e7 = 9e7; den = 12900 * 4.1e15 - 1.089e19 = 4.2e19,
# b = (12900 * 9e7 - 3.3e9 * 170) / den = 6e11 / 4.2e19 = 1.4286e-8,
# a = (170 - b * 3.3e9) / 12900 = 0.0095238 (hop 0.0047619)
b_want = 6e11 / 4.2e19
a_want = (170 - b_want * 3.3e9) / 12900
close("fit relative a by hand", a_want, 0.2 / 21)
hop, beta_c = cm.fit_central([(0.0, 0.01), (1e6, 0.02), (2e6, 0.05)], relative=True)
close("fit relative beta_c weighted", beta_c, b_want)
close("fit relative hop weighted", hop, a_want / 2)

# interp_costs: linear in log2(dim) between calibrated dimensions, the
# nearest beyond them
cal2 = {2 ** 16: {"c_grad": 1.0, "c_upd": 4.0}, 2 ** 20: {"c_grad": 3.0, "c_upd": 8.0}}
close("interp below", cm.interp_costs(cal2, 2 ** 10)["c_grad"], 1.0)
close("interp above", cm.interp_costs(cal2, 2 ** 30)["c_upd"], 8.0)
close("interp at", cm.interp_costs(cal2, 2 ** 20)["c_grad"], 3.0)
close("interp 2^18", cm.interp_costs(cal2, 2 ** 18)["c_grad"], 2.0)   # halfway in log2
close("interp 2^17 upd", cm.interp_costs(cal2, 2 ** 17)["c_upd"], 5.0)  # a quarter
# scale_for_machine: main 2^20, run at 2^16 with P = 4: the workers' costs
# at 4 * 2^16 = 2^18 (c_grad 2.0 of 3.0 at main), the shards' at 2^16
# (c_upd 4.0 of 8.0); c_enc and c_dec are 0 in the references: kept
cal3 = {d: dict(c, c_enc=0.0, c_dec=0.0) for d, c in cal2.items()}
sm = cm.scale_for_machine(strat, cal3, 2 ** 20, 2 ** 16, 4)
close("machine c_grad", sm["c_grad"], 1e-6 * 2.0 / 3.0)
close("machine c_upd", sm["c_upd"], 4e-6 * 4.0 / 8.0)
close("machine c_enc kept", sm["c_enc"], 2e-6)
# at the main dimension itself: every cost as it was
sm = cm.scale_for_machine(strat, cal3, 2 ** 20, 2 ** 20, 4)
close("machine main c_grad", sm["c_grad"], 1e-6)
close("machine main c_upd", sm["c_upd"], 4e-6)

# shards_within: the compute-only step (grad + encode = 3e-3) with an
# aggregator part of 1e-2 / S and nothing else: 3e-3 + 1e-2 / S <= 3.6e-3
# first at S = 32 (1e-2 / 32 = 3.1e-4; at 16, 6.25e-4 > 6e-4)
work2 = {"rows": 1000, "nnz": 10, "heaps": (1.0, 1.0), "dim": 10 ** 9}
strat2 = {"c_grad": 3e-7, "c_enc": 0.0, "c_dec": 0.0, "c_upd": 1e-5, "up_bpk": 0.0, "down_bpk": 0.0}
net0 = {"alpha": 0.0, "beta_w": 0.0, "hop": 0.0, "beta_c": 0.0}
close("shards within 1.2x", cm.shards_within(work2, strat2, net0, 1), 32)
close("shards never", cm.shards_within(work2, strat2, net0, 1, s_max=16), None)

# one aggregator: grad 1e-2 / P against P * 1e-4 central: the minimum of
# 1e-2/P + 1e-4 P over powers of 2 is at P = 8 (1.25e-3 + 8e-4 = 2.05e-3;
# P = 16: 6.25e-4 + 1.6e-3)
work3 = {"rows": 1000, "nnz": 1, "heaps": (1.0, 0.0), "dim": 10 ** 9}  # one key a worker
strat3 = {"c_grad": 1e-5, "c_enc": 0.0, "c_dec": 0.0, "c_upd": 0.0, "up_bpk": 1.0, "down_bpk": 0.0}
net3 = {"alpha": 0.0, "beta_w": 0.0, "hop": 0.0, "beta_c": 1e-4}
best_p, best = cm.one_aggregator_limit(work3, strat3, net3)
close("one aggregator P", best_p, 8)
close("one aggregator step", best, 1.25e-3 + 8e-4)

# costs_from_train: 4 threads, 2 steps, 8000 pairs (1000 keys a worker-step),
# g = 0.5: K = 1000 * 4^0.5 = 2000; 1e6 nonzeros a second a thread
m = {"steps": 2, "threads": 4, "dim": 10 ** 6, "raw_bytes": 64000, "wire_bytes": 16000,
     "nnz_per_second_per_thread": 1e6, "seconds": {"encode": 0.008, "decode": 0.004, "update": 0.02}}
c = cm.costs_from_train(m, 0.5)
close("train c_grad", c["c_grad"], 1e-6)
close("train k_w", c["k_w"], 1000.0)
close("train c_enc", c["c_enc"], 0.008 / 8000)   # 1e-6 s a key
close("train c_dec", c["c_dec"], 0.004 / 8000)   # 5e-7
close("train c_upd", c["c_upd"], 0.02 / (2 * 2000))  # 5e-6 s a step key
close("train up_bpk", c["up_bpk"], 2.0)
# K capped at the dimension: dim 1500 < 2000
close("train c_upd capped", cm.costs_from_train(dict(m, dim=1500), 0.5)["c_upd"], 0.02 / (2 * 1500))

# scale_by_dim: the runs' costs at the main dimension times the single-process
# ratio; a zero reference (none's encode) leaves the cost as it is
ref = {"c_grad": 2e-7, "c_enc": 0.0, "c_dec": 1e-7, "c_upd": 4e-7, "up_bpk": 8.0}
at = {"c_grad": 5e-8, "c_enc": 3e-9, "c_dec": 5e-8, "c_upd": 1e-7, "up_bpk": 4.0}
sc = cm.scale_by_dim(strat, ref, at)
close("scaled c_grad", sc["c_grad"], 1e-6 * 0.25)
close("scaled c_enc kept", sc["c_enc"], 2e-6)
close("scaled c_dec", sc["c_dec"], 3e-6 * 0.5)
close("scaled c_upd", sc["c_upd"], 4e-6 * 0.25)
close("up_bpk kept", sc["up_bpk"], 8.0)
close("down_bpk kept", sc["down_bpk"], 4.0)
# median_costs: figure by figure; an even count averages the middle two
md = cm.median_costs([{"c_grad": 3.0, "k_w": 10.0}, {"c_grad": 1.0, "k_w": 30.0}, {"c_grad": 2.0, "k_w": 20.0}])
close("median odd c_grad", md["c_grad"], 2.0)
close("median odd k_w", md["k_w"], 20.0)
close("median even", cm.median_costs([{"c_grad": 1.0}, {"c_grad": 4.0}])["c_grad"], 2.5)
close("strat untouched", strat["c_grad"], 1e-6)

# the report reads paper_regime.sh's calibration files (calib-DIM-CODEC-REP.json):
# two repeats at one dimension give the median of each figure
import paper_regime_report as rep  # noqa: E402
with tempfile.TemporaryDirectory() as d:
    for i, enc in ((1, 0.008), (2, 0.016)):
        json.dump(dict(m, seconds=dict(m["seconds"], encode=enc)),
                  open(os.path.join(d, "calib-65536-fastsgd-%d.json" % i), "w"))
    json.dump(m, open(os.path.join(d, "calib-1048576-none-1.json"), "w"))
    # the gradient's cost pools the codecs at a dimension: 1, 2, 4 us a nonzero -> 2
    for i, rate in ((1, 1e6), (2, 5e5)):
        json.dump(dict(m, nnz_per_second_per_thread=rate), open(os.path.join(d, "calib-16384-c%d-1.json" % i), "w"))
    json.dump(dict(m, nnz_per_second_per_thread=2.5e5), open(os.path.join(d, "calib-16384-c1-2.json"), "w"))
    cal = rep.load_calib([d], 0.5)
close("calib keys", float(len(cal)), 4.0)
close("calib pooled c_grad c1", cal[(16384, "c1")]["c_grad"], 2e-6)
close("calib pooled c_grad c2", cal[(16384, "c2")]["c_grad"], 2e-6)
close("calib repeats", float(cal[(65536, "fastsgd")]["of"]), 2.0)
close("calib median c_enc", cal[(65536, "fastsgd")]["c_enc"], (0.008 + 0.016) / 2 / 8000)
close("calib slug", float((1048576, rep.slug("none")) in cal), 1.0)
close("slug of a spec", float(rep.slug("topk:ratio=0.01") == "topkratio001"), 1.0)

# The CTR regime (ctr_parts): a curve where keys = rows (10, 100, 1000 rows),
# key bytes = 2 a key, codec bytes = 8 a key; P = 4 workers of B = 100 rows,
# S = 2 shards, 4 partitions (one range a worker), links of 1e6 bytes/s.
curve = [{"rows": r, "keys": float(r), "key_bytes": 2.0 * r, "up_codec_bytes": 8.0 * r} for r in (10, 100, 1000)]
close("curve point", cm.curve_at(curve, 100, "keys"), 100.0)
close("curve between (log-log)", cm.curve_at(curve, 400, "keys"), 400.0)
close("curve beyond (last slope)", cm.curve_at(curve, 4000, "key_bytes"), 8000.0)
close("curve capped at dim", cm.curve_at(curve, 4000, "keys", dim=3000), 3000.0)
c = dict(grad_row=1e-6, encode_key=1e-8, keyenc_key=2e-8, apply_key=3e-8, answer_key=4e-8, add_key=5e-8,
         step_key=6e-8, down_key=7e-8)
full = cm.ctr_parts("full", 4, 2, 100, curve, c, parts=4, link_bps=1e6)
# own 100 keys, union 400; up = 2 (72 + 52 + 20) + 800; down = 2 (72 + 16 + 4*28 + 8) + 800 + 1600
close("full up", full["up"], 2 * 144 + 800)
close("full down", full["down"], 2 * 208 + 2400)
close("full worker", full["worker"], 100e-6 + 100 * 1e-8 + 400 * 3e-8)      # 1.13e-4
close("full shard", full["shard"], (4 * 100 * 5e-8 + 400 * (6e-8 + 7e-8)) / 2)  # 3.6e-5
close("full link", full["link"], (1088 + 2816) / 1e6)
close("full broker", full["broker"], 4 * (1088 + 2816) / (2 * 1e6))
close("full period (the broker)", full["period"], full["broker"])
close("full rows/s", full["rows_s"], 400 / full["broker"])
ws = cm.ctr_parts("working_set", 4, 2, 100, curve, c, parts=4, link_bps=1e6)
# up adds the pull: 2 frames and pull headers + 200 key bytes; down = each
# shard's step message 2 (72 + 128 + 8), its answer 2 (72 + 24), 4 * 100 values
close("ws up", ws["up"], 2 * 144 + 800 + 2 * (72 + 8) + 200)
close("ws down", ws["down"], 2 * 208 + 2 * 96 + 400)
# 3 epochs: epochs 2 and 3 name each shard's list (24 bytes) in place of its header and keys
close("ws up, key caching", cm.ctr_parts("working_set", 4, 2, 100, curve, c, parts=4, epochs=3)["up"],
      2 * 144 + 800 + 2 * 72 + (2 * 8 + 200 + 2 * 2 * 24) / 3)
close("ws down, halves", cm.ctr_parts("working_set", 4, 2, 100, curve, c, parts=4, value_bytes=2)["down"],
      2 * 208 + 2 * 96 + 200)
close("ws worker", ws["worker"], 100e-6 + 100 * 1e-8 + 100 * (2e-8 + 3e-8))
close("ws shard", ws["shard"], (4 * 100 * 5e-8 + 400 * 6e-8 + 4 * 100 * 4e-8) / 2)
# a Kafka message's CPU (msg a message + msg_byte a byte, both ends), half to each end:
# a worker 4 S = 8 ends a step with pulls, 2 S = 4 with full replicas; a shard 1 + 3 P = 13, or 1 + P = 5
cm_ = dict(c, msg=1e-4, msg_byte=1e-9)
wsm = cm.ctr_parts("working_set", 4, 2, 100, curve, cm_, parts=4, link_bps=1e6)
close("ws worker, messages", wsm["worker"], ws["worker"] + 0.5 * (8 * 1e-4 + (ws["up"] + ws["down"]) * 1e-9))
close("ws shard, messages", wsm["shard"], ws["shard"] + 0.5 * (13 * 1e-4 + 4 * (ws["up"] + ws["down"]) / 2 * 1e-9))
fullm = cm.ctr_parts("full", 4, 2, 100, curve, cm_, parts=4, link_bps=1e6)
close("full worker, messages", fullm["worker"], full["worker"] + 0.5 * (4 * 1e-4 + (full["up"] + full["down"]) * 1e-9))
close("full shard, messages", fullm["shard"], full["shard"] + 0.5 * (5 * 1e-4 + 4 * (full["up"] + full["down"]) / 2 * 1e-9))
# a step's rows copied into its batch (2e-7 a row) and read from NAME.data once a job (3e-7 a row, 2 epochs)
close("ws worker, rows", cm.ctr_parts("working_set", 4, 2, 100, curve, dict(c, batch_row=2e-7, read_row=3e-7), parts=4,
                                      epochs=2)["worker"], ws["worker"] + 100 * (2e-7 + 3e-7 / 2))
S, p4 = cm.ctr_shards_needed("working_set", 4, 100, curve, c, parts=4, link_bps=1e9)
close("ws shards needed", float(S), 1.0)  # shard 6e-5 <= worker 1.05e-4 at S = 1: the period is the worker's
# with messages a worker pays each shard's: more shards cut a shard's time, add 4 S message ends to a worker's
S, p4 = cm.ctr_shards_needed("working_set", 4, 100, curve, dict(c, msg=1e-5, step_key=1e-6), parts=4, link_bps=1e9)
close("ws shards, messages", float(S), 4.0)
try:
    cm.ctr_parts("replica", 4, 2, 100, curve, c)
    failures.append("an unknown mode was not refused")
except ValueError:
    checked[0] += 1

if failures:
    print("FAIL: cost model: " + "; ".join(failures))
    sys.exit(1)
print("PASS: cost model arithmetic (%d figures)" % checked[0])
