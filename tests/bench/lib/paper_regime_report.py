"""The tables of tests/bench/paper_regime.sh from its runs (N.env, the shards'
metrics JSON: N.json, N.json.shardI), fsgd bench codec's lines on the same rows, the
links' α and β, and the training rows themselves (keys a step, Heaps' law):
Table IV and Fig. 7 in the paper's shape beside its numbers, bits per key
against the entropy floor, the cost model checked against every run and
extrapolated. Exits 1 when a run broke exactly-once (rows per epoch)."""
import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost_model as cm  # noqa: E402

# Table IV (LR, KDD12, 12 nodes on 1 GbE): seconds per epoch
PAPER_T4 = {"none": dict(total=156, grad=23, enc=0, dec=0, comm=68, upd=65),
            "fastsgd": dict(total=32, grad=23, enc=0.05, dec=0.06, comm=4, upd=5)}
PAPER_BITS = {"none": 32.00, "sketchml": 9.95, "fastsgd": 6.04}  # Table V
KDD12_TRAIN_ROWS = int(149_639_105 * 0.7)  # the paper's 70% of KDD12


def floor_bits(D, d):
    """log2(C(D, d)) / d: the fewest bits a key any code spends on d keys of D"""
    if d <= 0 or d >= D:
        return 0.0
    return (math.lgamma(D + 1) - math.lgamma(d + 1) - math.lgamma(D - d + 1)) / math.log(2) / d


def load_runs(runs_dir):
    runs = []
    for env_path in sorted(glob.glob(os.path.join(runs_dir, "*.env")), key=lambda p: int(os.path.basename(p)[:-4])):
        base = env_path[:-4]
        env = dict(kv.split("=", 1) for kv in open(env_path).read().split())
        paths = [base + ".json"] + sorted(glob.glob(base + ".json.shard*"), key=lambda p: int(p.rsplit("shard", 1)[1]))
        shards = [json.load(open(p)) for p in paths if os.path.exists(p)]
        if len(shards) != int(env["shards"]):
            print("bench paper error: run %s has %d of its %s shards' metrics" % (base, len(shards), env["shards"]))
            continue
        runs.append(figures(env, shards))
    return runs


def figures(env, shards):
    """one run's figures per epoch and per step"""
    m0 = shards[0]
    P, S, epochs = int(env["workers"]), int(env["shards"]), int(env["epochs"])
    e = m0["per_epoch"]
    # the last epoch: the first also loads the data into the workers' caches
    epoch_s = e[-1]["seconds_from_step1"] - e[-2]["seconds_from_step1"] if len(e) >= 2 else e[0]["seconds_from_step1"]
    steps = max(1, m0["steps"])
    steps_epoch = steps / max(1, len(e))
    if "seconds_parts" in e[-1]:
        # the last epoch's own parts (the aggregator's timers at each epoch's
        # end): neither the first epoch's load nor the final snapshot's publish
        part = lambda m, k: m["per_epoch"][-1]["seconds_parts"][k]  # noqa: E731
        grad = part(m0, "gradient") / P
        enc = part(m0, "encode") / P
        dec = max(part(m, "decode") for m in shards)
        upd = max(part(m, "update") for m in shards)
    else:  # an older fsgd: the job's totals spread over its epochs
        t = m0["total_seconds"]
        grad = t["gradient"] / P / len(e)
        enc = t["encode"] / P / len(e)
        dec = max(m["total_seconds"]["decode"] for m in shards) / len(e)
        upd = max(m["total_seconds"]["update"] for m in shards) / len(e)
    up = sum(m["downlink"]["up_bytes_per_worker_step"] for m in shards)
    down = sum(m["downlink"]["down_bytes_per_worker_step"] for m in shards)
    # every shard counts the workers' whole raw gradient (8 bytes a pair): shard 0's
    keys_w = m0["bytes"]["gradient_raw"] / 8 / (steps * P)
    rows_ok = all(x["rows"] == m["dataset_rows"] for m in shards for x in m["per_epoch"])
    return dict(env=env, set=env["set"], dim=int(env["dim"]), link=env["link"], codec=env["codec"], P=P, S=S,
                epochs=epochs, epoch_s=epoch_s, steps_epoch=steps_epoch, step_s=epoch_s / steps_epoch, grad=grad,
                enc=enc, dec=dec, upd=upd, comm=epoch_s - grad - enc - dec - upd, up=up, down=down, keys_w=keys_w,
                auc=m0["test"]["auc"], rows_ok=rows_ok, rows=int(env["rows"]), batch=int(env["batch"]),
                nnz=float(env["nnz"]), rss_agg=int(env["rss_agg_kb"]), rss_worker=int(env["rss_worker_kb"]),
                link_up=int(env["link_up"]), link_down=int(env["link_down"]))


def median_runs(every):
    """one run a configuration (set, dim, link, codec): the median by epoch
    time (the lower of the middle two), so one run slowed by other work on a
    shared machine does not stand for it; each keeps how many it was chosen from"""
    groups = {}
    for r in every:
        groups.setdefault((r["set"], r["dim"], r["link"], r["codec"]), []).append(r)
    out = []
    for g in groups.values():
        g = sorted(g, key=lambda r: r["epoch_s"])
        m = dict(g[(len(g) - 1) // 2])
        m["of"] = len(g)
        m["epoch_runs"] = ",".join("%.2f" % r["epoch_s"] for r in g)
        out.append(m)
    return out


def heaps_points(train, batch):
    """(rows, distinct keys) over the first batch rows, at rows = batch / 2^j"""
    marks = sorted({max(1, batch >> j) for j in range(0, 12)})
    seen, pts, n = set(), [], 0
    with open(train) as f:
        for line in f:
            n += 1
            for tok in line.split()[1:]:
                seen.add(int(tok.split(":", 1)[0]))
            if n == marks[len(pts)]:
                pts.append((n, len(seen)))
                if len(pts) == len(marks):
                    break
    return pts


def first_keys(train, n_rows):
    """the sorted distinct keys of the first n_rows rows (a worker's first step)"""
    seen = set()
    with open(train) as f:
        for i, line in enumerate(f):
            if i >= n_rows:
                break
            for tok in line.split()[1:]:
                seen.add(int(tok.split(":", 1)[0]))
    return sorted(seen)


def sketchml_coder_bits(keys):
    """SketchML's key coder on one sorted group: a 2-bit length flag and 1, 2
    or 4 bytes of delta a key (its paper; codec/sketchml.c per group)"""
    prev, bits = 0, 0
    for k in keys:
        d = k - prev
        bits += 2 + 8 * (1 if d < 256 else 2 if d < 65536 else 4)
        prev = k
    return bits / len(keys) if keys else 0.0


def codec_key(spec):
    """a bench codec line's codec, by name; fastsgd with levels=optimal apart"""
    name = spec.split(":")[0]
    return name + "_optimal" if name == "fastsgd" and "levels=optimal" in spec else name


def parse_codec(path):
    """fsgd bench codec's lines on the bench's rows (not its kdd12 source), by
    codec_key; a sketchml entry gains its codec_sketchml_coder line's fields"""
    out = {}
    for line in open(path):
        kind = line.split(" ", 2)[1] if line.startswith("bench ") else ""
        if kind not in ("codec", "codec_sketchml_coder") or "source=kdd12" in line or "bits_per_key=" not in line:
            continue
        kv = dict(x.split("=", 1) for x in line.split()[2:] if "=" in x)
        name = codec_key(kv["codec"])
        if kind == "codec":
            out.setdefault(name, kv)
        elif name in out:
            for k in ("coder_own_groups_bits_per_key", "coder_one_group_bits_per_key", "header_bits_per_key"):
                out[name].setdefault(k, kv.get(k))
    return out


def slug(codec):
    """a codec spec as paper_regime.sh names its calibration files"""
    return re.sub(r"[^a-z0-9]", "", codec)


def load_calib(runs_dirs, heaps_g):
    """{(dim, slug(codec)): costs} from the single-process calibration runs
    (calib-DIM-CODEC-REP.json), each figure the median over the repeats"""
    got = {}
    for d in runs_dirs:
        for path in glob.glob(os.path.join(d, "calib-*.json")):
            dim, name = os.path.basename(path)[len("calib-"):-len(".json")].split("-")[:2]
            got.setdefault((int(dim), name), []).append(cm.costs_from_train(json.load(open(path)), heaps_g))
    out = {k: dict(cm.median_costs(v), of=len(v)) for k, v in got.items()}
    # the gradient is the same work whatever the codec: its cost is the median
    # over every codec's runs at the dimension (halves the noise of a shared machine)
    for (dim, name) in out:
        pooled = [c for (d2, _), v in got.items() if d2 == dim for c in v]
        out[(dim, name)]["c_grad"] = cm.median_costs(pooled)["c_grad"]
    return out


def parse_alphabeta(path):
    ab = {}
    for line in open(path):
        m = re.match(r"bench paper_alphabeta link=(\S+) alpha_s=(\S+) beta_s_per_byte=(\S+)", line)
        if m:
            ab[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return ab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True, nargs="+", help="runs folders; a configuration in several: its median")
    ap.add_argument("--codec-bench", required=True)
    ap.add_argument("--alphabeta", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--shards", type=int, required=True)
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    status = 0
    every = [r for d in a.runs for r in load_runs(d)]
    runs = median_runs(every)
    for r in every:
        if not r["rows_ok"]:
            print("bench paper error dim=%d link=%s codec=%s: rows per epoch differ from the dataset's" %
                  (r["dim"], r["link"], r["codec"]))
            status = 1
        print("bench paper_run set=%s dim=%d link=%s codec=%s workers=%d shards=%d epoch_s=%.3f step_s=%.3f "
              "steps_per_epoch=%.0f up_B_per_worker_step=%.0f down_B_per_worker_step=%.0f keys_per_worker_step=%.0f "
              "bits_per_sent_pair=%.2f test_auc=%.5f link_bytes_up=%d link_bytes_down=%d" %
              (r["set"], r["dim"], r["link"], r["codec"], r["P"], r["S"], r["epoch_s"], r["step_s"],
               r["steps_epoch"], r["up"], r["down"], r["keys_w"], r["up"] * 8 / r["keys_w"] if r["keys_w"] else 0,
               r["auc"], r["link_up"], r["link_down"]))

    # A sharded worker encodes after the gradient message's timing is taken
    # (trainer/distributed/worker.c): the metrics' encode reads ~0 and the
    # encoding lands in the rest. Where so, the encode is fsgd bench codec's
    # speed on this data (raw pairs a worker-step / its MB/s), taken off the rest.
    speeds = parse_codec(a.codec_bench)
    for r in runs:
        kv = speeds.get(r["codec"])
        if r["S"] > 1 and kv and "enc_MBps" in kv:
            est = r["steps_epoch"] * r["keys_w"] * 8 / (float(kv["enc_MBps"]) * 1e6)
            if r["enc"] < 0.1 * est:
                r["comm"] -= est - r["enc"]
                r["enc"] = est
                r["enc_src"] = "bench_codec"

    # Table IV: the main dimension, every link
    main_runs = [r for r in runs if r["set"] == "table4"]
    for link in sorted({r["link"] for r in main_runs}, key=lambda l: ("loopback", "10gbit", "1gbit", "100mbit").index(l)
                       if l in ("loopback", "10gbit", "1gbit", "100mbit") else 9):
        rs = {r["codec"]: r for r in main_runs if r["link"] == link}
        none = rs.get("none")
        for codec, r in rs.items():
            print("bench paper_table4 dim=%d link=%s codec=%s total_s=%.2f gradient_s=%.2f encode_s=%.3f decode_s=%.3f "
                  "communication_s=%.2f model_updating_s=%.2f message_B_per_step=%.0f "
                  "per_worker_up_B=%.0f "
                  "down_B=%.0f none_over_this=%.2f auc=%.5f auc_minus_none=%+.5f encode_from=%s runs=%s" %
                  (r["dim"], link, codec, r["epoch_s"], r["grad"], r["enc"], r["dec"], r["comm"], r["upd"],
                   r["up"] * r["P"], r["up"], r["down"], none["epoch_s"] / r["epoch_s"] if none else float("nan"),
                   r["auc"], r["auc"] - none["auc"] if none else float("nan"), r.get("enc_src", "metrics"),
                   r["epoch_runs"]))
    for codec, p in PAPER_T4.items():
        print("bench paper_table4 paper=KDD12-LR-12nodes-1GbE codec=%s total_s=%g gradient_s=%g encode_s=%g "
              "decode_s=%g communication_s=%g model_updating_s=%g none_over_this=%.2f" %
              (codec, p["total"], p["grad"], p["enc"], p["dec"], p["comm"], p["upd"],
               PAPER_T4["none"]["total"] / p["total"]))

    # Table V: bits per key of a worker's first step, against the floor
    n_w = a.batch // a.workers
    ks = first_keys(a.train, n_w)
    for name in ("none", "sketchml", "fastsgd", "fastsgd_optimal", "topk", "logquant"):
        kv = speeds.get(name)
        if not kv:
            continue
        sent, bpk = int(kv["sent"]), float(kv["bits_per_key"])
        fl = floor_bits(a.dim, sent)
        extra = ""
        if name.startswith("fastsgd"):
            # levels=paper: Phase 5's lengths M/4, M/2, 3M/4, M (l = 2); optimal:
            # the same l-bit flag and binary deltas, the 2^l lengths chosen per message
            extra = " levels=%s over_floor=%.3f within_10pct_of_floor=%s" % (
                "paper" if name == "fastsgd" else "optimal(not-the-paper's-rule)", bpk / fl,
                "yes" if bpk <= 1.1 * fl else "no")
        if name == "sketchml":
            one = float(kv["coder_one_group_bits_per_key"]) if kv.get("coder_one_group_bits_per_key") \
                else sketchml_coder_bits(ks)
            own = float(kv["coder_own_groups_bits_per_key"]) if kv.get("coder_own_groups_bits_per_key") else None
            if own:
                extra = (" coder_own_groups_bits=%.3f over_own_groups=%.3f within_10pct_of_coder=%s "
                         "coder_one_group_bits=%.3f grouping_cost=%.3f" %
                         (own, bpk / own, "yes" if abs(bpk / own - 1) <= 0.1 else "no", one, own / one))
            else:  # an older fsgd without codec_sketchml_coder: the one-group figure only
                extra = " coder_one_group_bits=%.3f over_one_group=%.3f" % (one, bpk / one)
        print("bench paper_keys codec=%s dim=%d worker_rows=%d keys=%d sent=%d bits_per_key=%.3f floor_bits_per_key=%.3f "
              "floor_from_bench_codec=%s paper_bits_per_key=%s%s" %
              (name, a.dim, n_w, len(ks), sent, bpk, fl, kv.get("floor_bits_per_key"),
               PAPER_BITS.get(name, "-"), extra))

    # Fig. 7: none and fastsgd per dimension on the Fig. 7 link
    f7 = [r for r in runs if r["set"] == "fig7"]
    if f7:
        link = f7[0]["link"]
        pts = {}
        for r in runs:
            if r["link"] == link and r["rows"] == f7[0]["rows"]:
                pts.setdefault(r["dim"], {})[r["codec"]] = r
        for dim in sorted(pts):
            c = pts[dim]
            if "none" in c and "fastsgd" in c:
                print("bench paper_fig7 link=%s dim=%d log2_dim=%.0f none_epoch_s=%.3f fastsgd_epoch_s=%.3f "
                      "speedup=%.2f none_up_B=%.0f fastsgd_up_B=%.0f none_runs=%s fastsgd_runs=%s" %
                      (link, dim, math.log2(dim), c["none"]["epoch_s"], c["fastsgd"]["epoch_s"],
                       c["none"]["epoch_s"] / c["fastsgd"]["epoch_s"], c["none"]["up"], c["fastsgd"]["up"],
                       c["none"]["epoch_runs"], c["fastsgd"]["epoch_runs"]))

    # the cost model: per-key costs from the runs, hop and central β from loopback, α β from the ping-pong
    ab = parse_alphabeta(a.alphabeta)
    hp = heaps_points(a.train, a.batch)
    heaps = cm.heaps_fit(hp)
    print("bench paper_heaps points=%s a=%.4g g=%.4f" % (",".join("%d:%d" % p for p in hp), heaps[0], heaps[1]))
    strats = {}
    for codec_name in sorted({r["codec"] for r in runs}):
        rs = [r for r in runs if r["codec"] == codec_name and r["dim"] == a.dim]
        if not rs:
            continue
        med = lambda f: statistics.median(f(r) for r in rs)  # noqa: E731
        Kr = lambda r: min(float(r["dim"]), r["keys_w"] * r["P"] ** heaps[1])  # noqa: E731
        strats[codec_name] = dict(
            c_grad=med(lambda r: r["grad"] / r["steps_epoch"] / (r["batch"] / r["P"] * r["nnz"])),
            c_enc=med(lambda r: r["enc"] / r["steps_epoch"] / r["keys_w"]),
            c_dec=med(lambda r: r["dec"] / r["steps_epoch"] / (r["P"] * r["keys_w"] / r["S"])),
            c_upd=med(lambda r: r["upd"] / r["steps_epoch"] / (Kr(r) / r["S"])),
            up_bpk=med(lambda r: r["up"] / r["keys_w"]), down_bpk=med(lambda r: r["down"] / Kr(r)))
    loop = [r for r in runs if r["link"] == "loopback" and r["dim"] == a.dim and r["codec"] in strats]
    al, bl = ab.get("loopback", (0.0, 0.0))
    pts = []
    for r in loop:
        b = r["up"] + r["down"]
        pts.append((r["P"] * b / r["S"], r["comm"] / r["steps_epoch"] - 2 * al - b * bl))
    hop, beta_c = cm.fit_central(pts, relative=True) if pts else (0.0, 0.0)
    print("bench paper_model_fit hop_s=%.4g beta_c_s_per_byte=%.4g (central MB/s %.1f) from %d loopback runs "
          "(least relative squares); "
          "heaps_a=%.4g heaps_g=%.4f" % (hop, beta_c, 1e-6 / beta_c if beta_c else float("inf"), len(pts), *heaps))
    for name, s in sorted(strats.items()):
        print("bench paper_model_strategy codec=%s c_grad_ns_per_nnz=%.3f c_enc_ns_per_key=%.3f c_dec_ns_per_key=%.3f "
              "c_upd_ns_per_key=%.3f up_B_per_key=%.3f down_B_per_step_key=%.3f" %
              (name, s["c_grad"] * 1e9, s["c_enc"] * 1e9, s["c_dec"] * 1e9, s["c_upd"] * 1e9, s["up_bpk"],
               s["down_bpk"]))
    # per-key costs by feature count: single-process runs at each dimension
    calib = load_calib(a.runs, heaps[1])
    for (dim, name), c in sorted(calib.items()):
        ref = calib.get((a.dim, name))
        print("bench paper_calib dim=%d codec=%s c_grad_ns_per_nnz=%.3f c_enc_ns_per_key=%.3f c_dec_ns_per_key=%.3f "
              "c_upd_ns_per_key=%.3f keys_per_worker_step=%.0f runs=%d grad_vs_main=%s upd_vs_main=%s" %
              (dim, name, c["c_grad"] * 1e9, c["c_enc"] * 1e9, c["c_dec"] * 1e9, c["c_upd"] * 1e9, c["k_w"],
               c["of"], "%.3f" % (c["c_grad"] / ref["c_grad"]) if ref else "-",
               "%.3f" % (c["c_upd"] / ref["c_upd"]) if ref and ref["c_upd"] else "-"))
    worst = 0.0
    worst_other = None
    for r in runs:
        s = strats.get(r["codec"])
        if not s or r["link"] not in ab:
            continue
        al, bw = ab[r["link"]]
        # the run's measured keys a worker; the step's by Heaps' law from them (K = k_w P^g)
        k_w, costs = r["keys_w"], "runs"
        by_dim = {d: c for (d, name), c in calib.items() if name == slug(r["codec"])}
        if r["dim"] != a.dim:
            if a.dim in by_dim and r["dim"] in by_dim:
                # the main runs' costs carried to this dimension (the workers'
                # at the P replicas' working set); its keys from its own calibration
                s, k_w, costs = (cm.scale_for_machine(s, by_dim, a.dim, r["dim"], r["P"]), by_dim[r["dim"]]["k_w"],
                                 "calibrated")
            else:
                costs = "main_dim(uncalibrated)"
        work = dict(rows=r["batch"], nnz=r["nnz"], heaps=heaps, dim=r["dim"], k_w=k_w,
                    K=min(float(r["dim"]), k_w * r["P"] ** heaps[1]))
        net = dict(alpha=al, beta_w=bw, hop=hop, beta_c=beta_c)
        p = cm.step_parts(work, s, net, r["P"], r["S"])
        err = p["total"] / r["step_s"] - 1
        worst = max(worst, abs(err))
        if r["dim"] != a.dim:
            worst_other = max(worst_other or 0.0, abs(err))
        print("bench paper_model_check set=%s dim=%d link=%s codec=%s measured_step_s=%.3f predicted_step_s=%.3f "
              "error=%+.1f%% predicted_comm_s=%.3f measured_comm_s=%.3f costs=%s keys_per_worker_model=%.0f "
              "keys_per_worker_run=%.0f" %
              (r["set"], r["dim"], r["link"], r["codec"], r["step_s"], p["total"], 100 * err, p["comm"],
               r["comm"] / r["steps_epoch"], costs, k_w, r["keys_w"]))
    if worst_other is not None:
        print("bench paper_model_check other_dims_largest_error=%.1f%%" % (100 * worst_other))
    print("bench paper_model_check largest_error=%.1f%% within_25pct=%s" % (100 * worst, "yes" if worst <= 0.25 else "no"))

    # The default size (4M training rows, 10% a step) on this bench's
    # own setup (its P, S, links, contended costs): what a full run would show
    for link in ("loopback", "1gbit", "100mbit"):
        if link not in ab:
            continue
        al, bw = ab[link]
        net = dict(alpha=al, beta_w=bw, hop=hop, beta_c=beta_c)
        work = dict(rows=400000, nnz=runs[0]["nnz"] if runs else 30, heaps=heaps, dim=a.dim)
        ep = {}
        for name in ("none", "fastsgd"):
            if name in strats:
                p = cm.step_parts(work, strats[name], net, a.workers, a.shards)
                ep[name] = 10 * p["total"]
        if len(ep) == 2:
            print("bench paper_model_default rows=4000000 batch=400000 dim=%d link=%s workers=%d shards=%d "
                  "none_epoch_s=%.2f fastsgd_epoch_s=%.2f none_over_fastsgd=%.2f" %
                  (a.dim, link, a.workers, a.shards, ep["none"], ep["fastsgd"], ep["none"] / ep["fastsgd"]))

    # Extrapolation: the bench's rows a step, and KDD12's (10% of 104.7M), on 1 GbE
    # links, each shard on a node of its own behind 1 GbE; the workers' costs
    # were measured with P workers sharing this machine's cores: scaled by cores / P.
    if "1gbit" in ab:
        al, bw = ab["1gbit"]
        net = dict(alpha=al, beta_w=bw, hop=hop, beta_c=bw + beta_c)
        share = min(1.0, a.cores / a.workers)
        for rows_label, rows_step in (("bench", a.batch), ("kdd12", KDD12_TRAIN_ROWS // 10)):
            for P in (12, 100, 1000):
                for name in ("none", "fastsgd"):
                    if name not in strats:
                        continue
                    s = dict(strats[name])
                    s["c_grad"] *= share
                    s["c_enc"] *= share
                    work = dict(rows=rows_step, nnz=runs[0]["nnz"], heaps=heaps, dim=a.dim)
                    line = []
                    for S in (1, 2, 4, 8, 16, 32, 64):
                        p = cm.step_parts(work, s, net, P, S)
                        line.append("S%d=%.3f" % (S, p["total"]))
                    p1 = cm.step_parts(work, s, net, P, 1)
                    need = cm.shards_within(work, s, net, P)
                    lim_p, _ = cm.one_aggregator_limit(work, s, net)
                    print("bench paper_model rows_per_step=%s(%d) workers=%d codec=%s step_s %s compute_s=%.3f "
                          "S1_parts grad=%.3f enc=%.3f dec=%.3f upd=%.3f comm=%.3f shards_for_1.2x_compute=%s "
                          "one_aggregator_best_at_P=%d" %
                          (rows_label, rows_step, P, name, " ".join(line), p1["grad"] + p1["encode"], p1["grad"],
                           p1["encode"], p1["decode"], p1["update"], p1["comm"], need if need else ">64", lim_p))

    # memory: the largest peak of each role
    bk = 0
    try:
        bk = max(int(open(os.path.join(d, "broker_rss_kb")).read().split()[0]) for d in a.runs)
    except (OSError, ValueError, IndexError):
        pass
    if runs:
        ra = max(runs, key=lambda r: r["rss_agg"])
        rw = max(runs, key=lambda r: r["rss_worker"])
        print("bench paper_mem aggregator_shard_peak_MiB=%.0f (dim=%d codec=%s) worker_peak_MiB=%.0f (dim=%d codec=%s) "
              "broker_jvm_peak_MiB=%.0f under_6GiB=%s" %
              (ra["rss_agg"] / 1024, ra["dim"], ra["codec"], rw["rss_worker"] / 1024, rw["dim"], rw["codec"], bk / 1024,
               "yes" if max(ra["rss_agg"], rw["rss_worker"], bk) < 6 * 1024 * 1024 else "no"))

    # the targets in one line each: what this invocation shows
    by = {(r["link"], r["codec"]): r for r in main_runs}
    for link, want in (("100mbit", 5.0), ("1gbit", 2.5)):
        n, f = by.get((link, "none")), by.get((link, "fastsgd"))
        if n and f:
            x = n["epoch_s"] / f["epoch_s"]
            print("bench paper_target what=none_over_fastsgd link=%s value=%.2f want=>=%.1f met=%s"
                  % (link, x, want, "yes" if x >= want else "no"))
    aucs = [(l, r["auc"] - by[(l, "none")]["auc"]) for (l, c), r in by.items() if c == "fastsgd" and (l, "none") in by]
    if aucs:
        d = min(x for _, x in aucs)
        print("bench paper_target what=fastsgd_auc_minus_none value=%+.5f want=>=-0.005 met=%s (%s)"
              % (d, "yes" if d >= -0.005 else "no", "fastsgd at or above none" if d >= 0 else "fastsgd below none"))
    for name, want_key, limit in (("fastsgd", "floor", 1.1), ("fastsgd_optimal", "floor", 1.1)):
        kv = speeds.get(name)
        if kv:
            x = float(kv["bits_per_key"]) / floor_bits(a.dim, int(kv["sent"]))
            print("bench paper_target what=%s_bits_over_floor value=%.3f want=<=%.2f met=%s"
                  % (name, x, limit, "yes" if x <= limit else "no"))
    print("bench paper_target what=cost_model_largest_error value=%.1f%% want=<=25%% met=%s"
          % (100 * worst, "yes" if worst <= 0.25 else "no"))
    return status


if __name__ == "__main__":
    sys.exit(main())
