#!/usr/bin/env bash
# Sharded aggregators (job key shards, issue 25): two `fsgd aggregator
# --shard I/2` processes and two workers train a9a rows through the broker.
# Both shards end after the same steps with the same training loss (the
# follower takes exactly the ranges shard 0 applied), every row counted once
# per epoch, and the model assembled from the shards' partitions is the
# unsharded job's bit for bit. fsgd run --shards 2 gives that model too, with
# shard 0's test AUC that of fsgd predict on it. Then what a sharded job
# refuses: a bad --shard, a strategy that does not shard, and a second
# shard 0 started by hand mid-job (exit 2 naming the running one; the job
# goes on: issue 42 item 14).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
PIDS=()
trap 'kill ${PIDS[@]+"${PIDS[@]}"} 2>/dev/null || true; cleanup' EXIT
head -n 8000 "$DATA/a9a" >"$tmp/rows"

# run_job NAME SHARDS CODEC [HOOK]: the job's roles, to the end (HOOK NAME
# ARGS... runs once they are started); its shards' logs in $tmp/NAME.a*.log
run_job() {
    local name=$1 shards=$2 codec=$3 hook=${4:-}
    kafka_cluster_stop
    kafka_cluster "$name" 4 --shards "$shards"
    "$FSGD" produce --brokers "$brokers" --name "$name" --shards "$shards" --batch 64 --quiet "$tmp/rows" 2>/dev/null
    local args=(--brokers "$brokers" --name "$name" --shards "$shards" --batch 64 --epochs 2 --staleness 0
                --codec "$codec" --step-timeout-ms 5000)
    PIDS=()
    for ((i = 0; i < shards; i++)); do
        "$FSGD" aggregator "${args[@]}" --shard "$i/$shards" --workers 2 >"$tmp/$name.a$i.log" 2>&1 &
        PIDS+=($!)
    done
    for i in 1 2; do
        "$FSGD" worker "${args[@]}" --id "$i" >"$tmp/$name.w$i.log" 2>&1 &
        PIDS+=($!)
    done
    [ -z "$hook" ] || "$hook" "$name" "${args[@]}"
    for p in "${PIDS[@]}"; do
        wait "$p" || { tail -n 5 "$tmp/$name".*.log; echo "FAIL: $name: a role exited with an error"; exit 1; }
    done
    PIDS=()
    # the whole model, from every shard's partition of NAME.model
    "$FSGD" model assemble --brokers "$brokers" --name "$name" --out "$tmp/$name.fsgd" >"$tmp/$name.asm.log" 2>&1 ||
        { cat "$tmp/$name.asm.log"; echo "FAIL: $name: the model does not assemble"; exit 1; }
}
loss() { grep -o 'epoch 2 done: [0-9]* rows (dataset [0-9]*), train loss [0-9.]*' "$1" | awk '{print $NF}'; }

s1=$(job_name shard1)
run_job "$s1" 1 none
s2=$(job_name shard2)
run_job "$s2" 2 none
l1=$(loss "$tmp/$s1.a0.log") l20=$(loss "$tmp/$s2.a0.log") l21=$(loss "$tmp/$s2.a1.log")
echo "train loss: unsharded $l1, shard 0 $l20, shard 1 $l21"
[ -n "$l20" ] && [ "$l20" = "$l21" ] || { echo "FAIL: the two shards disagree on the job's loss"; exit 1; }
grep -q "epoch 2 done: 8000 rows (dataset 8000)" "$tmp/$s2.a1.log" || { echo "FAIL: shard 1 did not apply every row once"; exit 1; }
grep -q "shard 1 of 2: .*keys k with k mod 2 = 1" "$tmp/$s2.a1.log" || { echo "FAIL: shard 1 does not say what it owns"; exit 1; }
$PY -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) < 0.005 else 1)" "$l1" "$l20" ||
    { echo "FAIL: sharded loss $l20 is not the unsharded $l1"; exit 1; }
# at staleness 0 with none: the same model bit for bit as the unsharded job's, at 2 and 4 shards
cmp "$tmp/$s1.fsgd" "$tmp/$s2.fsgd" || { echo "FAIL: the sharded model differs from the unsharded one"; exit 1; }
s4=$(job_name shard4)
run_job "$s4" 4 none
cmp "$tmp/$s1.fsgd" "$tmp/$s4.fsgd" || { echo "FAIL: the 4-shard model differs from the unsharded one"; exit 1; }

s3=$(job_name shard3)
run_job "$s3" 2 fastsgd
l30=$(loss "$tmp/$s3.a0.log") l31=$(loss "$tmp/$s3.a1.log")
[ -n "$l30" ] && [ "$l30" = "$l31" ] || { echo "FAIL: fastsgd: the shards disagree ($l30, $l31)"; exit 1; }
$PY -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) < 0.02 else 1)" "$l1" "$l30" ||
    { echo "FAIL: fastsgd sharded loss $l30 far from $l1"; exit 1; }

# refusals: exit 2 and a line that says why
set +e
"$FSGD" aggregator --brokers "$brokers" --name x --shard 2/2 >"$tmp/bad.log" 2>&1; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "expected I/S" "$tmp/bad.log" || { cat "$tmp/bad.log"; echo "FAIL: --shard 2/2 not refused"; exit 1; }
set +e
"$FSGD" aggregator --brokers "$brokers" --name "$s3" --shard 0/2 --codec gradiveq --epochs 1 >"$tmp/gv.log" 2>&1; rc=$?
set -e
[ "$rc" != 0 ] && grep -qi "gradiveq" "$tmp/gv.log" || { cat "$tmp/gv.log"; echo "FAIL: gradiveq sharded not refused"; exit 1; }
# workers that do not match the job's shards say so
rc=0
timeout 60 "$FSGD" worker --brokers "$brokers" --name "$s3" --batch 64 >"$tmp/w1.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "runs 2 aggregator shards.*give the worker --shards 2" "$tmp/w1.log" ||
    { tail -n 3 "$tmp/w1.log"; echo "FAIL: an unsharded worker took a sharded job's model (status $rc)"; exit 1; }
rc=0
timeout 60 "$FSGD" worker --brokers "$brokers" --name "$s3" --batch 64 --shards 4 >"$tmp/w4.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "has 2 partitions, and 4 aggregator shards" "$tmp/w4.log" ||
    { tail -n 3 "$tmp/w4.log"; echo "FAIL: a 4-shard worker on a 2-shard job (status $rc)"; exit 1; }

# a second shard 0 started by hand while the job trains: it asks on NAME.ctl,
# the running shard 0 answers, and it stops (exit 2) having published
# nothing; the job goes on to its end, every row once per epoch. The workers
# are held (SIGSTOP) while it asks, so the job is mid-way whatever the
# machine's speed (shard 1 follows once shard 0's opening snapshot is out).
twin_shard0() {
    local name=$1 log=$tmp/$1.a1.log i rc=0
    shift
    for ((i = 0; i < 600; i++)); do grep -qs "following shard 0's steps" "$log" && break; sleep 0.1; done
    kill -STOP "${PIDS[2]}" "${PIDS[3]}"
    timeout 60 "$FSGD" aggregator "$@" --shard 0/2 --workers 2 >"$tmp/twin.log" 2>&1 || rc=$?
    kill -CONT "${PIDS[2]}" "${PIDS[3]}"
    [ "$rc" = 2 ] && grep -q "aggregator shard 0 of job '$name' is running already (pid ${PIDS[0]}," "$tmp/twin.log" ||
        { cat "$tmp/twin.log"; echo "FAIL: a second shard 0 mid-job: status $rc"; exit 1; }
}
s5=$(job_name shardtwin)
run_job "$s5" 2 none twin_shard0
grep -q "another aggregator for shard 0 of this job asked whether it runs" "$tmp/$s5.a0.log" ||
    { tail -n 5 "$tmp/$s5.a0.log"; echo "FAIL: shard 0 did not say it answered the second one"; exit 1; }
grep -q "epoch 2 done: 8000 rows (dataset 8000)" "$tmp/$s5.a1.log" ||
    { tail -n 5 "$tmp/$s5.a1.log"; echo "FAIL: the job with a second shard 0 did not apply every row once"; exit 1; }
echo "PASS: a second shard 0 mid-job is refused: $(grep -o 'is running already ([^)]*)' "$tmp/twin.log")"
kafka_cluster_stop

# fsgd run --shards 2 (its own embedded cluster, or the real one): the same model
run_args=(--data "$tmp/rows" --test "$DATA/a9a.t" --batch 64 --epochs 2 --staleness 0 --quiet)
[ "$KAFKA_MODE" = real ] && run_args+=(--brokers "$FSGD_BROKERS")
"$FSGD" run "${run_args[@]}" --name "$(job_name run1)" --out "$tmp/r1.fsgd" >"$tmp/r1.log" 2>&1 ||
    { tail "$tmp/r1.log"; echo "FAIL: fsgd run"; exit 1; }
"$FSGD" run "${run_args[@]}" --name "$(job_name run2)" --shards 2 --out "$tmp/r2.fsgd" --metrics-json "$tmp/r2.json" \
    >"$tmp/r2.log" 2>&1 || { tail "$tmp/r2.log"; echo "FAIL: fsgd run --shards 2"; exit 1; }
cmp "$tmp/r1.fsgd" "$tmp/r2.fsgd" || { echo "FAIL: fsgd run --shards 2 gave another model"; exit 1; }
[ -f "$tmp/r2.json.shard1" ] || { echo "FAIL: shard 1 wrote no metrics"; exit 1; }
auc=$("$FSGD" predict --model "$tmp/r2.fsgd" --data "$DATA/a9a.t" 2>&1 | sed -n 's/.*auc \([0-9.]*\).*/\1/p')
$PY - "$tmp/r2.json" "$tmp/r2.json.shard1" "$auc" <<'PY'
import json, sys
m0, m1 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert m0["shard"]["index"] == 0 and m1["shard"]["index"] == 1 and m0["shard"]["shards"] == 2, (m0["shard"], m1["shard"])
assert m0["shard"]["weights_held"] + m1["shard"]["weights_held"] == m0["dim"] + 1, (m0["shard"], m1["shard"], m0["dim"])
assert m0["steps"] == m1["steps"] and m0["rows_applied"] == m1["rows_applied"] == 16000, (m0["steps"], m1["steps"])
assert abs(m0["test"]["auc"] - float(sys.argv[3])) < 1e-6, (m0["test"], sys.argv[3])
PY
echo "PASS: kafka_shards (loss unsharded $l1, sharded $l20, fastsgd sharded $l30)"
