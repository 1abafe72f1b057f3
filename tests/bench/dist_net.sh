#!/usr/bin/env bash
# Distributed training over Kafka (embedded cluster) with 2 and 4 workers,
# codecs none and fastsgd, over plain loopback and over a 1 Gbit/s link: a
# network namespace of our own whose loopback is shaped with
# `tc qdisc tbf rate 1gbit` (every byte between workers, broker and
# aggregator crosses it). Prints per configuration: time per epoch (epochs
# after the first, which holds the ~5 s consumer-group join), time to a
# target training loss (the loss codec none reaches after epoch 1), bytes on
# the wire (gradients up + model down), and fastsgd/none ratios measured in
# the same run. DIST_NET_DATA (default reuters), DIST_NET_EPOCHS (3).
set -euo pipefail
FSGD=$(realpath "${FSGD:-bin/fsgd}")
DATA=${FSGD_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data}
ds=${DIST_NET_DATA:-reuters}
epochs=${DIST_NET_EPOCHS:-3}
PY=/usr/bin/python3
tmp=$(mktemp -d)
ns=fsgd-bench-$$
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
links=(loopback)
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null && ip netns add "$ns" 2>/dev/null; then
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" tc qdisc add dev lo root tbf rate 1gbit burst 128kb latency 50ms
    links+=(1gbit)
else
    echo "bench dist_net note=\"no root/netns: 1 Gbit/s link emulation skipped\""
fi
run() { # link workers codec -> metrics json path
    local out="$tmp/$1-$2-$3.json"
    local cmd=("$FSGD" run --data "$DATA/$ds" --test "$DATA/$ds.t" --workers "$2" --codec "$3" --epochs "$epochs"
        --batch 1024 --quiet --metrics-json "$out")
    if [ "$1" = 1gbit ]; then ip netns exec "$ns" "${cmd[@]}" >/dev/null 2>&1; else "${cmd[@]}" >/dev/null 2>&1; fi
    echo "$out"
}
for link in "${links[@]}"; do
    for w in 2 4; do
        a=$(run "$link" "$w" none)
        b=$(run "$link" "$w" fastsgd)
        "$PY" - "$a" "$b" "$link" "$w" "$ds" <<'PYEOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
link, w, ds = sys.argv[3], sys.argv[4], sys.argv[5]
target = a["per_epoch"][0]["train_loss"]
def fig(m):
    e = m["per_epoch"]
    per = (e[-1]["seconds"] - e[0]["seconds"]) / max(1, len(e) - 1)
    ttl = next((x["seconds"] for x in e if x["train_loss"] <= target), float("nan"))
    wire = m["bytes"]["up"] + m["bytes"]["down"]
    return per, ttl, wire, m
for name, m in (("none", a), ("fastsgd", b)):
    per, ttl, wire, _ = fig(m)
    print("bench dist_net data=%s link=%s workers=%s codec=%s epoch_s=%.3f time_to_loss_s=%.3f target_loss=%.5f "
          "wire_bytes=%d grad_ratio=%.2f step_p50_ms=%.2f auc=%.5f" % (ds, link, w, name, per, ttl, target, wire,
          m["compression_ratio"], m["step_latency_ms"]["p50"], m["test"]["auc"]))
pa, ta, wa, _ = fig(a); pb, tb, wb, _ = fig(b)
print("bench dist_net data=%s link=%s workers=%s fastsgd_vs_none epoch_time_ratio=%.3f time_to_loss_ratio=%.3f "
      "wire_bytes_ratio=%.3f" % (ds, link, w, pb / pa, tb / ta, wb / wa))
PYEOF
    done
done
