#!/usr/bin/env bash
# A sharded job loses a shard (issue 25): kill -9 of aggregator shard 1 of
# `fsgd run --shards 2` mid-run. Every shard starts again from the newest
# step they all have a checkpoint of (they write them at the same steps and
# keep the one before), the workers take the new generation's snapshots,
# and the job ends with every row applied exactly once per epoch and the
# test AUC of the fault-free run within 0.005. Then a shard that never comes
# back (killed each time it starts): fsgd run gives up after 5 restarts with
# a clear error and a non-zero status, and leaves no process behind.
# real-kafka: cluster
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
args=(--data "$DATA/a9a" --test "$DATA/a9a.t" --shards 2 --batch 64 --epochs 2 --staleness 0 --job-key-file "$FSGD_JOB_KEY")
[ "$KAFKA_MODE" = real ] && args+=(--brokers "$FSGD_BROKERS")
shard1() { [ -f "$1" ] || return 0; sed -n 's/^fsgd: aggregator shard 1 pid //p' "$1" | tail -n 1; } # LOG may not exist yet

"$FSGD" run "${args[@]}" --name "$(job_name ok)" --out "$tmp/ok.fsgd" --metrics-json "$tmp/ok.json" >"$tmp/ok.log" 2>&1 ||
    { tail "$tmp/ok.log"; echo "FAIL: the fault-free sharded run"; exit 1; }

"$FSGD" run "${args[@]}" --name "$(job_name kill)" --checkpoint "$tmp/c.ckpt" --out "$tmp/k.fsgd" \
    --metrics-json "$tmp/k.json" >"$tmp/k.log" 2>&1 &
RUN_PID=$!
# shard 1 has written a checkpoint: the job is well under way
for _ in $(seq 600); do [ -f "$tmp/c.ckpt.shard1" ] && break; sleep 0.1; done
[ -f "$tmp/c.ckpt.shard1" ] || { tail "$tmp/k.log"; echo "FAIL: shard 1 wrote no checkpoint"; exit 1; }
pid=$(shard1 "$tmp/k.log")
sleep 0.5
kill -KILL "$pid" 2>/dev/null || { tail "$tmp/k.log"; echo "FAIL: shard 1 (pid $pid) was gone before the kill"; exit 1; }
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
[ "$rc" = 0 ] || { tail -n 20 "$tmp/k.log"; echo "FAIL: the job did not survive shard 1's kill -9 (status $rc)"; exit 1; }
grep -q "aggregator shard 1 killed by signal 9; restarting all 2 shards from their checkpoints of step [0-9]*" "$tmp/k.log" ||
    { tail -n 20 "$tmp/k.log"; echo "FAIL: no restart of the shards"; exit 1; }
$PY - "$tmp/ok.json" "$tmp/k.json" <<'PY'
import json, sys
ok, k = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert k["rows_applied"] == 2 * k["dataset_rows"], (k["rows_applied"], k["dataset_rows"])
assert k["epochs"] == 2, k["epochs"]
assert abs(k["test"]["auc"] - ok["test"]["auc"]) < 0.005, (k["test"]["auc"], ok["test"]["auc"])
print("after the restart: rows %d = 2 x %d, test auc %.6f (fault-free %.6f)" % (
    k["rows_applied"], k["dataset_rows"], k["test"]["auc"], ok["test"]["auc"]))
PY

# a shard that never comes back: killed each time fsgd run starts it again
"$FSGD" run "${args[@]}" --name "$(job_name gone)" --checkpoint "$tmp/g.ckpt" >"$tmp/g.log" 2>&1 &
RUN_PID=$!
killed=0 last=
for _ in $(seq 1200); do
    kill -0 "$RUN_PID" 2>/dev/null || break
    pid=$(shard1 "$tmp/g.log")
    if [ -n "$pid" ] && [ "$pid" != "$last" ] && alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
        last=$pid
    fi
    sleep 0.1
done
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
[ "$rc" != 0 ] || { tail "$tmp/g.log"; echo "FAIL: a job whose shard never comes back ended with status 0"; exit 1; }
grep -q "aggregator shard 1 (pid [0-9]*) was killed by signal 9 after 5 restarts: the job stops" "$tmp/g.log" ||
    { tail "$tmp/g.log"; echo "FAIL: no clear error for the shard that never came back"; exit 1; }
pids=$(sed -n 's/^fsgd: \(aggregator\|aggregator shard [0-9]*\|worker [0-9]*\) pid \([0-9]*\)$/\2/p' "$tmp/g.log")
sleep 1
for p in $pids; do
    alive "$p" && { echo "FAIL: process $p of the failed job is still running"; kill -KILL "$p"; exit 1; }
done
echo "ok: kafka_shard_kill (shard 1 killed $killed times in the last job, status $rc, nothing left behind)"

# a checkpoint of a 2-shard job is not resumed by a job with another number of shards
stop=$(job_name stop)
"$FSGD" run "${args[@]}" --name "$stop" --checkpoint "$tmp/s.ckpt" >"$tmp/s.log" 2>&1 &
RUN_PID=$!
for _ in $(seq 600); do [ -f "$tmp/s.ckpt" ] && break; sleep 0.1; done
kill -INT "$RUN_PID" 2>/dev/null || true
wait "$RUN_PID" || true
RUN_PID=
[ -f "$tmp/s.ckpt" ] || { tail "$tmp/s.log"; echo "FAIL: the interrupted job kept no checkpoint"; exit 1; }
one=("${args[@]}")
one[${#one[@]}]=--shards
one[${#one[@]}]=1
rc=0
"$FSGD" run "${one[@]}" --name "$stop" --checkpoint "$tmp/s.ckpt" --resume >"$tmp/r.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "written by a job with 2 aggregator shards" "$tmp/r.log" ||
    { tail "$tmp/r.log"; echo "FAIL: a 2-shard checkpoint resumed by a 1-shard job (status $rc)"; exit 1; }
echo "PASS: a 2-shard checkpoint refused by a 1-shard job: $(grep -o "written by a job with 2 aggregator shards[^:]*" "$tmp/r.log" | head -1)"
