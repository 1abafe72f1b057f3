#!/usr/bin/env bash
# A model the embedded cluster cannot hold (2^24 weights by default: 64 MiB
# snapshots in 128 chunks), trained through `fsgd run --brokers` on a real
# Apache Kafka broker, against `fsgd train` on the same rows with the same
# settings. Reports test AUC of both, seconds per epoch, bytes per
# worker-step up and down, model bytes published, the broker's disk use for
# the job, and peak memory (VmHWM) of the aggregator, each worker, the broker
# JVM and the fsgd train reference. Prints `bench kafka_big ...` lines, and
# the job key's MAC per step against the step's p50 (`bench auth_job`, from
# build/bench/bench_auth with this job's figures).
#
#   tests/kafka/big_model.sh                   starts a 1-node broker (broker.sh), stops it at the end
#   FSGD_BROKERS=h:p tests/kafka/big_model.sh  uses a running broker
#
# Settings (environment): DIM (2^24), ROWS (220000: the first 200000 train,
# the rest test), NNZ (30), BATCH (1000), EPOCHS (2), WORKERS (2),
# CODEC (fastsgd), LR (0.01), SEED (7), TOL (0.005: |AUC run - AUC train|
# above it exits 1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
FSGD=${FSGD:-$root/bin/fsgd}
DIM=${DIM:-16777216} ROWS=${ROWS:-220000} NNZ=${NNZ:-30} BATCH=${BATCH:-1000} EPOCHS=${EPOCHS:-2}
WORKERS=${WORKERS:-2} CODEC=${CODEC:-fastsgd} LR=${LR:-0.01} SEED=${SEED:-7} TOL=${TOL:-0.005}
NTRAIN=$((ROWS * 10 / 11))
tmp=$(mktemp -d)
kdir= run_pid= sampler=
cleanup() {
    [ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
    [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null && wait "$run_pid" 2>/dev/null
    [ -n "$kdir" ] && "$here/broker.sh" stop "$kdir/c" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${FSGD_BROKERS:-}" ]; then
    "$here/broker.sh" check
    "$here/broker.sh" install
    kdir=$tmp/kafka
    out=$("$here/broker.sh" start "$kdir/c" 1)
    FSGD_BROKERS=${out#brokers=}
    echo "started a 1-node broker at $FSGD_BROKERS"
fi

"$FSGD" gen --rows "$ROWS" --dim "$DIM" --nnz "$NNZ" --seed "$SEED" --quiet --out "$tmp/all.svm"
head -n "$NTRAIN" "$tmp/all.svm" >"$tmp/train.svm"
tail -n +"$((NTRAIN + 1))" "$tmp/all.svm" >"$tmp/test.svm"
rm -f "$tmp/all.svm"
echo "data: $NTRAIN train rows ($(($(stat -c %s "$tmp/train.svm") / 1000000)) MB), $((ROWS - NTRAIN)) test rows," \
    "dim $DIM, $NNZ nnz/row"
SET=(--data "$tmp/train.svm" --test "$tmp/test.svm" --dim "$DIM" --batch "$BATCH" --epochs "$EPOCHS"
    --lr "$LR" --codec "$CODEC")

# the reference, one process
/usr/bin/time -f '%e %M' -o "$tmp/train.time" "$FSGD" train "${SET[@]}" --threads "$WORKERS" --quiet \
    --metrics-json "$tmp/train.json" >/dev/null
read -r train_s train_kb <"$tmp/train.time"

# the distributed job; VmHWM of each of its processes (and the broker's)
# sampled until it ends
name=big-$(date +%s%N | cut -c8-16)-$$
t0=$(date +%s.%N)
"$FSGD" run "${SET[@]}" --brokers "$FSGD_BROKERS" --name "$name" --workers "$WORKERS" \
    --metrics-json "$tmp/run.json" >"$tmp/run.log" 2>&1 &
run_pid=$!
broker_pids=$([ -n "$kdir" ] && cat "$kdir"/c/node*/pid || true)
(
    declare -A peak
    while kill -0 "$run_pid" 2>/dev/null; do
        while read -r role pid; do
            kb=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status" 2>/dev/null || true)
            [ -n "$kb" ] && [ "$kb" -gt "${peak[$role]:-0}" ] && peak[$role]=$kb
        done < <(sed -n 's/^fsgd: aggregator pid \([0-9]*\)$/aggregator \1/p
                        s/^fsgd: worker \([0-9]*\) pid \([0-9]*\)$/worker\1 \2/p' "$tmp/run.log"
            for p in $broker_pids; do echo "broker $p"; done)
        for r in "${!peak[@]}"; do echo "$r ${peak[$r]}"; done >"$tmp/peak.new" && mv "$tmp/peak.new" "$tmp/peak"
        sleep 0.5
    done
) &
sampler=$!
rc=0
wait "$run_pid" || rc=$?
run_pid=
t1=$(date +%s.%N)
wait "$sampler" || true
sampler=
[ $rc -eq 0 ] || { echo "fsgd run failed with status $rc:"; cat "$tmp/run.log"; exit 1; }
disk=
[ -n "$kdir" ] && disk=$(du -s --block-size=1 "$kdir"/c/node1/data/"$name".* 2>/dev/null | awk '{s += $1} END {print s}')

/usr/bin/python3 - "$tmp/train.json" "$tmp/run.json" "$tmp/peak" "$train_s" "$train_kb" "$(awk "BEGIN {print $t1 - $t0}")" \
    "${disk:-0}" "$TOL" "$CODEC" "$WORKERS" <<'PYEOF'
import json, sys
tr, rn = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
peak = dict(l.split() for l in open(sys.argv[3]) if l.strip())
train_s, train_kb, wall, disk, tol = float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8])
codec, W = sys.argv[9], int(sys.argv[10])
d = rn["downlink"]
print("fsgd train: test AUC %.5f, %.1f s whole process, peak RSS %.0f MB" % (tr["test"]["auc"], train_s, train_kb / 1024))
print("fsgd run --brokers (%s, %d workers, dim %d): test AUC %.5f, %.1f s whole process, %d steps" %
      (codec, W, rn["dim"], rn["test"]["auc"], wall, rn["steps"]))
# per_epoch seconds count from the start of training (step 1 waits for the
# consumer group to settle: step1_at_seconds); an epoch's own time is the
# difference, and epoch 1's is counted from step 1
prev, durs = None, []
for e in rn["per_epoch"]:
    durs.append(e["seconds_from_step1"] if prev is None else e["seconds"] - prev)
    prev = e["seconds"]
print("  step 1 at %.2f s (topics, data watermarks, consumer group)" % rn["step1_at_seconds"])
for e, dur in zip(rn["per_epoch"], durs):
    print("  epoch %d: %.2f s, train loss %.5f, test AUC so far %s" % (e["epoch"], dur, e["train_loss"], e.get("test_auc", "-")))
print("  rows per epoch %s (dataset %d)" % (rn["rows_per_epoch"], rn["dataset_rows"]))
print("  per worker-step: %.0f B up, %.0f B down (coded deltas); model topic %.1f MB in all, snapshots included (%.0f B/step); "
      "step p50 %.1f ms p99 %.1f ms" %
      (d["up_bytes_per_worker_step"], d["down_bytes_per_worker_step"], rn["bytes"]["model_published"] / 1e6,
       rn["bytes"]["model_published"] / max(rn["steps"], 1), rn["step_latency_ms"]["p50"], rn["step_latency_ms"]["p99"]))
if disk:
    print("  broker disk for the job's topics: %.1f MB" % (disk / 1e6))
print("  peak RSS (VmHWM): " + ", ".join("%s %.0f MB" % (k, int(v) / 1024) for k, v in sorted(peak.items())))
for e, dur in zip(rn["per_epoch"], durs):
    print("bench kafka_big epoch=%d seconds=%.3f" % (e["epoch"], dur))
print("bench kafka_big dim=%d codec=%s workers=%d auc_run=%.5f auc_train=%.5f up_B_per_step=%.0f down_B_per_step=%.0f "
      "model_published_B=%d step_p50_ms=%.2f wall_s=%.1f train_wall_s=%.1f" %
      (rn["dim"], codec, W, rn["test"]["auc"], tr["test"]["auc"], d["up_bytes_per_worker_step"],
       d["down_bytes_per_worker_step"], rn["bytes"]["model_published"], rn["step_latency_ms"]["p50"], wall, train_s))
ok = all(r == rn["dataset_rows"] for r in rn["rows_per_epoch"]) and abs(rn["test"]["auc"] - tr["test"]["auc"]) <= tol
print("kafka_big: %s (rows per epoch equal the dataset, |AUC difference| %.5f, tolerance %.3f)" %
      ("ok" if ok else "FAILED", abs(rn["test"]["auc"] - tr["test"]["auc"]), tol))
with open(sys.argv[3] + ".auth", "w") as f:
    f.write("%.3f %.0f %.0f %d\n" % (rn["step_latency_ms"]["p50"], d["up_bytes_per_worker_step"],
                                    rn["bytes"]["model_published"] / max(rn["steps"], 1), W))
sys.exit(0 if ok else 1)
PYEOF
# the job key's share of this job's step (issue 27: under 3%), from its own figures
bench_auth=$root/${BUILD:-build}/bench/bench_auth
if [ -x "$bench_auth" ]; then
    read -r a_step a_up a_model a_w <"$tmp/peak.auth"
    "$bench_auth" "$a_step" "$a_up" "$a_model" "$a_w" | grep "^bench auth_job"
else
    echo "note: no $bench_auth (make $bench_auth): the MAC's share of the step is not measured"
fi
