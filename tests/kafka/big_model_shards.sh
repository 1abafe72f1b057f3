#!/usr/bin/env bash
# Sharded aggregators at scale (issue 25): one job (2^26 weights, 400k
# training rows, 4 workers by default) trained through `fsgd run --brokers
# --shards S` on a real 3-broker Apache Kafka cluster, once per S in SHARDS.
# Per S it reports seconds per epoch, the aggregator's decode + reduce and
# update + publish per step (the largest over shards: the slowest shard
# paces the step), bytes per worker-step up and down (summed over shards: a
# worker sends a part to each and reads each one's delta), the busiest
# shard's share of keys (its gradient entries a step over the mean over
# shards), and the peak memory (VmHWM) of every process: each shard, each
# worker. The check: every S applies every row once per epoch on every
# shard, its shards hold every weight once and decode (within 5%) the
# entries a step the first S does, it ends within TOL test AUC of the first
# S, and with the largest S each shard's peak is at most RATIO times the
# single aggregator's (when SHARDS has 1).
#
#   tests/kafka/big_model_shards.sh                   starts a 3-node cluster (broker.sh), stops it at the end
#   FSGD_BROKERS=h:p,... tests/kafka/big_model_shards.sh   uses a running cluster
#
# Settings (environment): SHARDS ("1 2 4"), DIM (2^26), ROWS (440000: the
# first 400000 train, the rest test), NNZ (30), BATCH (1000), EPOCHS (2),
# WORKERS (4), CODEC (fastsgd), LR (0.01), SEED (7), NODES (3), TOL (0.01),
# RATIO (0.35), TEST (1; 0: no --test, so shard 0 never assembles the whole
# model at the end and no AUC is checked: its peak without that assembly),
# REPLICAS ("full"; "full working_set" runs each S both ways: a working-set
# worker's peak then follows its steps' keys, not the model), TABLES ("auto";
# "dense sparse" runs each of those with --table dense, then sparse: a
# sparse shard holds the keys its data touched, not its key range), COMPARE_BITS
# (unset; B: also `fsgd train --bits B` on the same rows, one process, its
# test AUC and peak beside: the same rows in a 2^B model).
#
# Every S of every replica mode is held to the first run's rows, keys and AUC.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
FSGD=${FSGD:-$root/bin/fsgd}
SHARDS=${SHARDS:-1 2 4} DIM=${DIM:-67108864} ROWS=${ROWS:-440000} NNZ=${NNZ:-30} BATCH=${BATCH:-1000}
EPOCHS=${EPOCHS:-2} WORKERS=${WORKERS:-4} CODEC=${CODEC:-fastsgd} LR=${LR:-0.01} SEED=${SEED:-7} NODES=${NODES:-3}
TOL=${TOL:-0.01} RATIO=${RATIO:-0.35} TEST=${TEST:-1} REPLICAS=${REPLICAS:-full} TABLES=${TABLES:-auto}
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
    out=$("$here/broker.sh" start "$kdir/c" "$NODES")
    FSGD_BROKERS=${out#brokers=}
    echo "started a $NODES-node cluster at $FSGD_BROKERS"
fi

"$FSGD" gen --rows "$ROWS" --dim "$DIM" --nnz "$NNZ" --seed "$SEED" --quiet --out "$tmp/all.svm"
head -n "$NTRAIN" "$tmp/all.svm" >"$tmp/train.svm"
tail -n +"$((NTRAIN + 1))" "$tmp/all.svm" >"$tmp/test.svm"
rm -f "$tmp/all.svm"
echo "data: $NTRAIN train rows ($(($(stat -c %s "$tmp/train.svm") / 1000000)) MB), $((ROWS - NTRAIN)) test rows," \
    "dim $DIM, $NNZ nnz/row; $WORKERS workers, codec $CODEC, batch $BATCH, $EPOCHS epoch(s)"
SET=(--data "$tmp/train.svm" --dim "$DIM" --batch "$BATCH" --epochs "$EPOCHS"
    --lr "$LR" --codec "$CODEC" --workers "$WORKERS" --brokers "$FSGD_BROKERS")
[ "$TEST" = 0 ] || SET+=(--test "$tmp/test.svm")

runs=()
for R in $REPLICAS; do
for T in $TABLES; do
for S in $SHARDS; do
    tag=$S-$R-$T
    runs+=("$tag")
    name=bigshard-$S-$(date +%s%N | cut -c8-16)-$$
    t0=$(date +%s.%N)
    "$FSGD" run "${SET[@]}" --shards "$S" --replica "$R" --table "$T" --name "$name" --metrics-json "$tmp/run$tag.json" \
        >"$tmp/run$tag.log" 2>&1 &
    run_pid=$!
    # each role's peak memory (VmHWM), sampled from /proc until the run ends
    /usr/bin/python3 "$here/../bench/lib/role_sampler.py" "$run_pid" "$tmp/peak$tag" --every 0.5 &
    sampler=$!
    rc=0
    wait "$run_pid" || rc=$?
    run_pid=
    t1=$(date +%s.%N)
    wait "$sampler" || true
    sampler=
    [ $rc -eq 0 ] || { echo "fsgd run --shards $S --replica $R --table $T failed with status $rc:"; tail -n 30 "$tmp/run$tag.log"; exit 1; }
    echo "S=$S $R table $T: $(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s whole job"
done
done
done

if [ -n "${COMPARE_BITS:-}" ] && [ "$TEST" != 0 ]; then
    t0=$(date +%s.%N)
    /usr/bin/time -f %M -o "$tmp/train.rss" "$FSGD" train --data "$tmp/train.svm" --test "$tmp/test.svm" \
        --bits "$COMPARE_BITS" --batch "$BATCH" --epochs "$EPOCHS" --lr "$LR" --quiet \
        --metrics-json "$tmp/train.json" >/dev/null
    t1=$(date +%s.%N)
    /usr/bin/python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))
print("bench kafka_shards train bits=%s dim=%d auc=%.5f seconds=%.1f peak_MB=%.0f" % (sys.argv[2], m["dim"],
      m["test"]["auc"], float(sys.argv[3]), int(open(sys.argv[4]).read().split()[-1]) / 1024))' \
        "$tmp/train.json" "$COMPARE_BITS" "$(awk "BEGIN {print $t1 - $t0}")" "$tmp/train.rss"
fi

/usr/bin/python3 - "$tmp" "$TOL" "$RATIO" "${runs[@]}" <<'PYEOF'
import json, os, sys
tmp, tol, ratio, tags = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
ok, auc0, entries0, peaks = True, None, None, {}
shards = sorted({int(t.split("-")[0]) for t in tags})
for tag in tags:
    S, R, T = int(tag.split("-")[0]), tag.split("-")[1], tag.split("-")[2]
    base = os.path.join(tmp, "run%s.json" % tag)
    m = [json.load(open(base if i == 0 else "%s.shard%d" % (base, i))) for i in range(S)]
    peak = json.load(open(os.path.join(tmp, "peak%s" % tag)))["peak_kb"]
    tables = "/".join("%s:%d" % (x["shard"].get("table", "dense"), x["shard"].get("table_keys", x["shard"]["weights_held"]))
                      for x in m)
    if R == "full" or S not in peaks:
        peaks[S] = peak
    lead = m[0]
    for i, x in enumerate(m):
        assert x["shard"]["index"] == i and x["shard"]["shards"] == S, (S, i, x["shard"])
    # an epoch's own time: epoch 1 from step 1 (the consumer group settled)
    prev, durs = None, []
    for e in lead["per_epoch"]:
        durs.append(e["seconds_from_step1"] if prev is None else e["seconds"] - prev)
        prev = e["seconds"]
    dec = max(x["per_step_seconds"]["decode"] for x in m) * 1e3
    upd = max(x["per_step_seconds"]["update"] for x in m) * 1e3
    up = sum(x["downlink"]["up_bytes_per_worker_step"] for x in m)
    down = sum(x["downlink"]["down_bytes_per_worker_step"] for x in m)
    # keys a step per shard: the gradient entries it decoded a step, every
    # worker's part (the same steps on every shard)
    keys = [x["shard"]["entries_per_step"] for x in m]
    busiest = max(keys) / (sum(keys) / S) if sum(keys) else float("nan")
    held = sum(x["shard"]["weights_held"] for x in m)
    shard_mb = [peak.get("shard%d" % i, 0) / 1024 for i in range(S)]
    worker_mb = [peak[r] / 1024 for r in sorted(peak) if r.startswith("worker")]
    auc = lead["test"]["auc"] if lead["test"]["n"] else float("nan")  # TEST=0: none
    auc0 = auc if auc0 is None else auc0
    every = all(r == lead["dataset_rows"] for x in m for r in x["rows_per_epoch"]) and \
        all(x["steps"] == lead["steps"] for x in m) and held == lead["dim"] + 1
    good = every and (auc != auc or abs(auc - auc0) <= tol) and all(shard_mb)
    # the shards split the job's keys: together they decode what one
    # aggregator does (fastsgd codes per shard: within 5%)
    if entries0 is None:
        entries0 = sum(keys)
    elif abs(sum(keys) - entries0) > 0.05 * entries0:
        print("S=%d %s: the shards decoded %.0f entries a step in all, %s %.0f" % (S, R, sum(keys), tags[0], entries0))
        good = False
    ok &= good
    print("S=%d %s table %s (%s): %d steps, test AUC %.5f, epochs %s s, decode+reduce %.2f ms/step, update+publish %.2f ms/step (max over "
          "shards), %.0f B up / %.0f B down per worker-step, keys a step per shard %s (busiest %.3fx the mean), "
          "peak MB shards %s, workers %s%s" %
          (S, R, T, tables, lead["steps"], auc, "/".join("%.1f" % d for d in durs), dec, upd, up, down,
           "/".join("%.0f" % k for k in keys), busiest, "/".join("%.0f" % v for v in shard_mb),
           "/".join("%.0f" % v for v in worker_mb), "" if good else "  <- FAILED"))
    print("bench kafka_shards S=%d replica=%s table=%s dim=%d workers=%d steps=%d auc=%.5f epoch_s=%s decode_ms=%.3f "
          "update_ms=%.3f up_B=%.0f down_B=%.0f busiest=%.4f shard_peak_MB=%s worker_peak_MB=%s" %
          (S, R, T, lead["dim"], len(worker_mb), lead["steps"], auc, ",".join("%.2f" % d for d in durs), dec, upd, up, down,
           busiest, ",".join("%.0f" % v for v in shard_mb), ",".join("%.0f" % v for v in worker_mb)))
if 1 in peaks and max(shards) > 1:
    single, S = peaks[1]["shard0"], max(shards)
    worst = max(peaks[S]["shard%d" % i] for i in range(S))
    print("largest shard peak at S=%d: %.3fx the single aggregator's (%.0f MB of %.0f MB; target %.2fx)" %
          (S, worst / single, worst / 1024, single / 1024, ratio))
    print("bench kafka_shards peak_ratio S=%d ratio=%.4f" % (S, worst / single))
    ok &= worst <= ratio * single
print("kafka_shards_big: %s" % ("ok" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PYEOF
