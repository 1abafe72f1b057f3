#!/usr/bin/env bash
# Working-set workers against full replicas (issue 37): for P workers (and S
# aggregator shards) in each mode, what one worker sends and receives a step,
# and the model's test AUC against `fsgd train` on the same rows with the
# same batch and epochs. One line per run:
#   bench scale_out mode=MODE workers=P shards=S down_over_up=X test_auc=A auc_minus_train=D ...
# down_over_up is exact: the bytes a worker receives a step (the model
# message(s), and in working_set mode the answer to its pull) over the bytes
# it sends (its gradient part(s), and its pull), from the aggregators'
# metrics (summed over shards). Data: fsgd gen CTR rows (Zipf, 40 nonzeros,
# seed 1), SCALE_OUT_ROWS (default 400000) and a tenth more as the test
# set; 2^24 features on a real Apache Kafka broker (tests/kafka/broker.sh,
# one node on loopback) when java and mvn are here, else 2^20 on the
# embedded cluster (it holds at most 1.1M weights). 512 rows a worker-step,
# SCALE_OUT_EPOCHS epochs (default 1), codec SCALE_OUT_CODEC (default
# fastsgd), staleness SCALE_OUT_STALENESS (default: the job's, 4), modes
# SCALE_OUT_MODES (default both). pulls_by_id: the share of pulls that
# named a key list their shard keeps (key caching: from the second epoch).
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
ROWS=${SCALE_OUT_ROWS:-400000}
CODEC=${SCALE_OUT_CODEC:-fastsgd}
EPOCHS=${SCALE_OUT_EPOCHS:-1}
TAU=()
[ -z "${SCALE_OUT_STALENESS:-}" ] || TAU=(--staleness "$SCALE_OUT_STALENESS")
PAIRS=${SCALE_OUT_PAIRS:-2:1 4:2 8:4}
MODES=${SCALE_OUT_MODES:-working_set full}
here=$(cd "$(dirname "$0")" && pwd)
BROKER_SH=$here/../kafka/broker.sh
tmp=$(mktemp -d)
kdir=""
cleanup() {
    [ -z "$kdir" ] || "$BROKER_SH" stop "$kdir" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

brokers=() dim='2^20' where=embedded
if command -v java >/dev/null && command -v mvn >/dev/null; then
    kdir=$tmp/kafka
    brokers=(--brokers "$("$BROKER_SH" start "$kdir" 1 | sed -n 's/^brokers=//p')")
    dim='2^24' where=real_broker
fi
echo "bench scale_out cluster=$where dim=$dim rows=$ROWS epochs=$EPOCHS codec=$CODEC staleness=${SCALE_OUT_STALENESS:-default} load=$(cut -d' ' -f1 /proc/loadavg) cores=$(nproc)"
"$FSGD" gen --rows $((ROWS + ROWS / 10)) --dim "$dim" --nnz 40 --seed 1 --quiet --out "$tmp/all.svm"
head -n "$ROWS" "$tmp/all.svm" >"$tmp/train.svm"
tail -n $((ROWS / 10)) "$tmp/all.svm" >"$tmp/test.svm"
rm -f "$tmp/all.svm"
D=$(python3 -c "print(2**int("${dim#2^}"))")

declare -A train_auc
for pair in $PAIRS; do
    P=${pair%%:*}
    B=$((512 * P))
    [ -n "${train_auc[$B]:-}" ] && continue
    "$FSGD" train --data "$tmp/train.svm" --test "$tmp/test.svm" --dim "$D" --batch "$B" --epochs "$EPOCHS" \
        --metrics-json "$tmp/train$B.json" --quiet >/dev/null 2>"$tmp/train$B.log" ||
        { cat "$tmp/train$B.log" >&2; exit 1; }
    train_auc[$B]=$(python3 -c "import json; print(json.load(open('$tmp/train$B.json'))['test']['auc'])")
done

n=0
for pair in $PAIRS; do
    P=${pair%%:*} S=${pair##*:}
    B=$((512 * P))
    for mode in $MODES; do
        s=$S
        n=$((n + 1))
        load=$(cut -d' ' -f1 /proc/loadavg)
        t0=$(date +%s.%N)
        "$FSGD" run --data "$tmp/train.svm" --test "$tmp/test.svm" --dim "$D" --workers "$P" --shards "$s" \
            --replica "$mode" --batch "$B" --epochs "$EPOCHS" --codec "$CODEC" ${TAU[@]+"${TAU[@]}"} \
            ${brokers[@]+"${brokers[@]}"} \
            --name "so$$_$n" --metrics-json "$tmp/run$n.json" --quiet >"$tmp/run$n.log" 2>&1 ||
            { echo "bench scale_out mode=$mode workers=$P shards=$s error=\"fsgd run failed\""; cat "$tmp/run$n.log" >&2; exit 1; }
        t1=$(date +%s.%N)
        python3 - "$tmp/run$n.json" "$s" "$mode" "$P" "${train_auc[$B]}" "$load" "$t0" "$t1" <<'PY'
import json, sys
path, S, mode, P, train_auc, load, t0, t1 = sys.argv[1:]
S = int(S)
m = [json.load(open(path if i == 0 else "%s.shard%d" % (path, i))) for i in range(S)]
# a worker-step sends one part to each shard and receives each shard's message
up = sum(x["downlink"]["up_bytes_per_worker_step"] for x in m)
down = sum(x["downlink"]["down_bytes_per_worker_step"] + x["downlink"].get("values_bytes_per_worker_step", 0) for x in m)
auc = m[0]["test"]["auc"]
answered = sum(x.get("pulls", {}).get("answered", 0) for x in m)
by_id = sum(x.get("pulls", {}).get("by_id", 0) for x in m)
print("bench scale_out mode=%s workers=%s shards=%d down_over_up=%.3f test_auc=%.4f auc_minus_train=%+.4f "
      "up_bytes_worker_step=%.0f down_bytes_worker_step=%.0f pulls_by_id=%.3f steps=%d seconds=%.2f load=%s"
      % (mode, P, S, down / up if up else float("nan"), auc, auc - float(train_auc), up, down,
         by_id / answered if answered else 0.0, m[0]["steps"], float(t1) - float(t0), load))
PY
    done
done
