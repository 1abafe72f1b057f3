"""The strategies table (tests/bench/strategies.sh) from the bench lines of
tests/bench/dist_net.sh on stdin: one row per strategy, in the order they
ran: bytes up and down per worker per step, time to the target loss, test
AUC and AUC minus none's; with repeats, the run of median time to target
(as dist_net_report.py picks). Then one line saying whether every strategy's
AUC is within TOL (argv[1], 0.01) of none's. Exit status 0 either way: the
table reports, the unit tests assert."""
import math
import os
import re
import sys


def kv(line):
    return dict(m.groups() for m in re.finditer(r'(\w+)=(\S+)', line))


def main():
    tol = float(sys.argv[1]) if len(sys.argv) > 1 else 0.01
    runs, order, data = {}, [], ""
    for line in sys.stdin:
        if line.startswith("bench dist_net_data "):
            data = line[len("bench dist_net_data "):].strip()
        elif line.startswith("bench dist "):
            d = kv(line)
            if d["codec"] not in runs:
                order.append(d["codec"])
            runs.setdefault(d["codec"], []).append(d)
    if not runs:
        print("strategies: no runs")
        return 0

    def ttt(d):
        t = float(d["time_to_target_s"])
        return math.inf if math.isnan(t) else t

    # the order of DIST_NET_CODECS (the report prints them sorted)
    want = os.environ.get("DIST_NET_CODECS", "").split()
    order = [c for c in want if c in runs] + [c for c in order if c not in want]
    pick = {c: sorted(r, key=ttt)[len(r) // 2] for c, r in runs.items()}
    none = float(pick["none"]["test_auc"]) if "none" in pick else float("nan")
    print("strategies table: %s" % data)
    print("| strategy | up B | down B | time to target (s) | AUC | AUC − none |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = 0.0
    for c in order:
        d = pick[c]
        auc = float(d["test_auc"])
        diff = auc - none
        if c != "none" and not math.isnan(diff):
            worst = max(worst, abs(diff))
        t = float(d["time_to_target_s"])
        print("| %s | %s | %s | %s | %.4f | %s |" % (
            c, format(int(round(float(d["up_B_per_worker_step"]))), ","),
            format(int(round(float(d["down_B_per_worker_step"]))), ","),
            "never" if math.isnan(t) else "%.3f" % t, auc, "—" if c == "none" else "%+.4f" % diff))
    if "none" not in pick:
        print("strategies auc_within=%g of none: no none run to compare with" % tol)
    else:
        print("strategies auc_within=%g of none: %s (largest |AUC − none| %.4f)" %
              (tol, "yes" if worst <= tol else "NO", worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
