"""Reads the runs of tests/bench/dist_net.sh (RUN.json metrics + RUN.env)
and prints the bench lines: one per run, ratios to none per link, the bound
of each link (none on loopback over none on the link) and the loopback step
breakdown. Exits 1 when a run broke exactly-once (rows per epoch)."""
import glob
import json
import math
import os
import statistics
import sys


def load(runs_dir):
    runs = []
    for env_path in sorted(glob.glob(os.path.join(runs_dir, "*.env"))):
        base = env_path[:-4]
        if not os.path.exists(base + ".json"):
            continue
        env = dict(kv.split("=", 1) for kv in open(env_path).read().split())
        m = json.load(open(base + ".json"))
        runs.append((env, m))
    return runs


def nan_if_neg(x):
    return x if x is not None and x >= 0 else float("nan")


def main():
    runs = load(sys.argv[1])
    status = 0
    table = {}
    for env, m in runs:
        e = m["per_epoch"]
        if not all(x["rows"] == m["dataset_rows"] for x in e):
            print("bench dist_net error broker=%s dim=%s link=%s workers=%s codec=%s: rows per epoch %s differ from "
                  "the dataset's %d" % (env["broker"], env["dim"], env["link"], env["workers"], env["codec"],
                                        [x["rows"] for x in e], m["dataset_rows"]))
            status = 1
        w = int(env["workers"])
        steps = max(1, m["steps"])
        epoch_s = (e[-1]["seconds_from_step1"] - e[0]["seconds_from_step1"]) / max(1, len(e) - 1)
        hops = [float(x) for x in env.get("model_hops", "").split(",") if x and float(x) >= 0]
        d = m.get("downlink", {})
        fig = dict(ttt=nan_if_neg(m["time_to_target_loss_s"]), epoch_s=epoch_s,
                   up=d.get("up_bytes_per_worker_step", float("nan")),
                   down=d.get("down_bytes_per_worker_step", float("nan")), auc=m["test"]["auc"],
                   step_p50=m["step_latency_ms"]["p50"], hop_grads=m.get("hop_latency_ms", {}).get("grads_p50"),
                   hop_model=statistics.median(hops) if hops else float("nan"), m=m, w=w, steps=steps)
        key = (env["broker"], env["dim"], env["link"], env["workers"])
        table.setdefault(key, {}).setdefault(env["codec"], []).append(fig)
        link_fig = ""
        if env["link"] != "loopback":
            link_fig = " link_bytes_up=%s link_bytes_down=%s" % (env["link_up"], env["link_down"])
        print("bench dist broker=%s dim=%s link=%s workers=%s codec=%s time_to_target_s=%.3f target_step=%d "
              "epoch_s=%.3f up_B_per_worker_step=%.0f down_B_per_worker_step=%.0f down_over_up=%.3f test_auc=%.5f "
              "step_p50_ms=%.2f hop_grads_p50_ms=%.3f hop_model_p50_ms=%.3f steps=%d empty_steps=%d%s" %
              (env["broker"], env["dim"], env["link"], env["workers"], env["codec"], fig["ttt"],
               m["target_loss_step"], epoch_s, fig["up"], fig["down"], fig["down"] / fig["up"] if fig["up"] else 0,
               fig["auc"], fig["step_p50"], fig["hop_grads"] or float("nan"), fig["hop_model"], m["steps"],
               m["empty_steps"], link_fig))
    # repeats: the median run by time to target stands for the configuration
    for codecs in table.values():
        for codec, figs in codecs.items():
            ttts = sorted(f["ttt"] for f in figs)
            med = dict(sorted(figs, key=lambda f: f["ttt"])[len(figs) // 2])
            med["epoch_s"] = statistics.median(f["epoch_s"] for f in figs)
            med["ttt_runs"] = ",".join("%.3f" % t for t in ttts)
            codecs[codec] = med
    for (broker, dim, link, w), codecs in sorted(table.items()):
        none = codecs.get("none")
        if not none:
            continue
        loop = table.get((broker, dim, "loopback", w), {}).get("none")
        bound = loop["ttt"] / none["ttt"] if loop and link != "loopback" else 1.0
        print("bench dist_bound broker=%s dim=%s link=%s workers=%s none_loopback_ttt_s=%.3f none_link_ttt_s=%.3f "
              "bound=%.3f none_link_runs=%s" % (broker, dim, link, w, loop["ttt"] if loop else float("nan"),
                                                none["ttt"], bound, none["ttt_runs"]))
        for codec, f in sorted(codecs.items()):
            if codec == "none":
                continue
            r = f["ttt"] / none["ttt"]
            print("bench dist_ratio broker=%s dim=%s link=%s workers=%s codec=%s time_to_target_over_none=%.3f "
                  "bound=%.3f gap_to_bound=%.3f epoch_time_over_none=%.3f bytes_up_over_none=%.3f "
                  "bytes_down_over_none=%.3f auc_minus_none=%+.5f runs=%s" %
                  (broker, dim, link, w, codec, r, bound, r / bound if bound > 0 else float("nan"),
                   f["epoch_s"] / none["epoch_s"], f["up"] / none["up"], f["down"] / none["down"],
                   f["auc"] - none["auc"], f["ttt_runs"]))
    # the step floor: where a loopback step goes
    for (broker, dim, link, w), codecs in sorted(table.items()):
        if link != "loopback":
            continue
        for codec, f in sorted(codecs.items()):
            m, steps, wk = f["m"], f["steps"], f["w"]
            ps = m["total_seconds"]
            grad = ps["gradient"] / steps / wk * 1e3   # summed over workers: one worker's share
            enc = ps["encode"] / steps / wk * 1e3
            dec = ps["decode"] / steps * 1e3
            upd = ps["update"] / steps * 1e3
            down = m.get("downlink", {}).get("encode_seconds", 0) / steps * 1e3
            hg = f["hop_grads"] or float("nan")
            hm = f["hop_model"]
            step = m["step_latency_ms"]["mean"]
            rest = step - (grad + enc + dec + upd + hg + hm)
            print("bench dist_step broker=%s dim=%s workers=%s codec=%s step_mean_ms=%.2f worker_gradient_ms=%.2f "
                  "worker_encode_ms=%.2f hop_grads_ms=%.2f aggregator_decode_reduce_ms=%.2f "
                  "aggregator_update_publish_ms=%.2f (of which downlink_encode_ms=%.2f) hop_model_ms=%.2f "
                  "other_ms=%.2f" % (broker, dim, w, codec, step, grad, enc, hg, dec, upd, down, hm, rest))
    return status


if __name__ == "__main__":
    sys.exit(main())
