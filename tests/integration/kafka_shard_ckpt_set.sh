#!/usr/bin/env bash
# A sharded job's checkpoints are one set (issue 42, items 1, 3 and 4): a
# job of 2 shards stopped by SIGTERM, then its files as a crash, a hand or a
# rotation can leave them. --resume takes the newest step both shards have
# (shard 1 a step behind; PATH itself missing with its step in PATH.prev),
# with every row once per epoch; --fresh removes every file of the set (and
# no file fsgd did not make); a set whose members disagree (PATH and
# PATH.shard1 swapped, no common step, a damaged PATH.shard1) is refused
# before anything starts, naming the files.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR
mock_only "rebuilds the job's topics from --data on each resume"
args=(--data "$DATA/a9a" --test "$DATA/a9a.t" --shards 2 --batch 64 --epochs 1 --staleness 0 --name ckset)

"$FSGD" run "${args[@]}" --metrics-json "$tmp/ok.json" >"$tmp/ok.log" 2>&1 ||
    { tail "$tmp/ok.log"; echo "FAIL: the fault-free sharded run"; exit 1; }

# stopped once both shards have two checkpoints (PATH and PATH.prev each)
"$FSGD" run "${args[@]}" --checkpoint "$tmp/c.ckpt" >"$tmp/stop.log" 2>&1 &
RUN_PID=$!
for _ in $(seq 600); do [ -f "$tmp/c.ckpt.shard1.prev" ] && [ -f "$tmp/c.ckpt.prev" ] && break; sleep 0.1; done
kill -TERM "$RUN_PID"
wait "$RUN_PID" || true
RUN_PID=
for f in c.ckpt c.ckpt.prev c.ckpt.shard1 c.ckpt.shard1.prev; do
    [ -f "$tmp/$f" ] || { tail "$tmp/stop.log"; echo "FAIL: the stopped job left no $f"; exit 1; }
done
mkdir "$tmp/saved"
cp -p "$tmp"/c.ckpt* "$tmp/saved/"
restore() { rm -f "$tmp"/c.ckpt*; cp -p "$tmp/saved"/c.ckpt* "$tmp/"; }
step() { od -An -t u8 -j16 -N8 "$1" | tr -d ' '; }

# resume RUN-NAME: --resume must end the job with every row once and the
# fault-free run's AUC
resume() {
    local rc=0
    "$FSGD" run "${args[@]}" --checkpoint "$tmp/c.ckpt" --resume --metrics-json "$tmp/$1.json" >"$tmp/$1.log" 2>&1 ||
        rc=$?
    [ "$rc" = 0 ] || { tail -n 20 "$tmp/$1.log"; echo "FAIL: $1: --resume ended with status $rc"; exit 1; }
    $PY - "$tmp/ok.json" "$tmp/$1.json" "$1" <<'PY'
import json, sys
ok, k = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert k["rows_applied"] == k["dataset_rows"], (k["rows_applied"], k["dataset_rows"])
assert abs(k["test"]["auc"] - ok["test"]["auc"]) < 0.005, (k["test"]["auc"], ok["test"]["auc"])
print("PASS: %s: resumed, rows %d = %d, test auc %.6f (fault-free %.6f)" % (
    sys.argv[3], k["rows_applied"], k["dataset_rows"], k["test"]["auc"], ok["test"]["auc"]))
PY
}

# 1. shard 1 a checkpoint behind shard 0 (stopped between their writes)
restore
mv "$tmp/c.ckpt.shard1.prev" "$tmp/c.ckpt.shard1"
resume behind
grep -q "resuming from checkpoint $tmp/c.ckpt (--resume, step $(step "$tmp/saved/c.ckpt.prev"))" "$tmp/behind.log" ||
    { grep resuming "$tmp/behind.log"; echo "FAIL: not resumed from the step both shards have"; exit 1; }

# 1b. PATH renamed away mid-rotation: its step is in PATH.prev
restore
mv "$tmp/c.ckpt" "$tmp/c.ckpt.prev"
resume rotated

# 4. PATH and PATH.shard1 swapped: refused, naming them
restore
mv "$tmp/c.ckpt" "$tmp/x" && mv "$tmp/c.ckpt.shard1" "$tmp/c.ckpt" && mv "$tmp/x" "$tmp/c.ckpt.shard1"
rc=0
"$FSGD" run "${args[@]}" --checkpoint "$tmp/c.ckpt" --resume >"$tmp/swap.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "'$tmp/c.ckpt' is shard 1's file (it belongs at '$tmp/c.ckpt.shard1')" "$tmp/swap.log" ||
    { tail "$tmp/swap.log"; echo "FAIL: swapped shard files resumed (status $rc)"; exit 1; }
grep -q "^fsgd: aggregator pid" "$tmp/swap.log" && { echo "FAIL: the job started before the refusal"; exit 1; }
echo "PASS: swapped shard files refused: $(grep -o "is shard 1's file[^:]*" "$tmp/swap.log")"

# no step both shards have: refused, every file's step listed
restore
rm "$tmp/c.ckpt.shard1" "$tmp/c.ckpt.shard1.prev"
rc=0
"$FSGD" run "${args[@]}" --checkpoint "$tmp/c.ckpt" --resume >"$tmp/nocommon.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "no step that all 2 shards have a checkpoint of ($tmp/c.ckpt step [0-9]*, $tmp/c.ckpt.prev step [0-9]*, $tmp/c.ckpt.shard1 absent" "$tmp/nocommon.log" ||
    { tail "$tmp/nocommon.log"; echo "FAIL: a set with no common step (status $rc)"; exit 1; }
echo "PASS: no common step refused"

# a damaged PATH.shard1: bad input data, exit 3, named before anything starts
restore
printf '\xff\xff\xff\xff' | dd of="$tmp/c.ckpt.shard1" bs=1 seek=600 conv=notrunc status=none
cp "$tmp/c.ckpt.shard1" "$tmp/c.ckpt.shard1.prev"
rc=0
"$FSGD" run "${args[@]}" --checkpoint "$tmp/c.ckpt" --resume >"$tmp/crc.log" 2>&1 || rc=$?
[ "$rc" = 3 ] && grep -q "checkpoint '$tmp/c.ckpt.shard1[.prev]*': crc32c mismatch" "$tmp/crc.log" ||
    { tail "$tmp/crc.log"; echo "FAIL: a damaged shard checkpoint (status $rc)"; exit 1; }
echo "PASS: a damaged shard file refused with status 3"

# 3. --fresh: every file of the set goes (a file fsgd did not make stays)
restore
echo "not a checkpoint" >"$tmp/c.ckpt.shard3.prev.tmp.00000g" # not a member's name either
rc=0
"$FSGD" run "${args[@]}" --checkpoint "$tmp/c.ckpt" --fresh --metrics-json "$tmp/fresh.json" >"$tmp/fresh.log" 2>&1 ||
    rc=$?
[ "$rc" = 0 ] || { tail -n 20 "$tmp/fresh.log"; echo "FAIL: --fresh of a sharded set (status $rc)"; exit 1; }
for f in c.ckpt c.ckpt.prev c.ckpt.shard1 c.ckpt.shard1.prev; do
    grep -q "removed checkpoint $tmp/$f (--fresh)" "$tmp/fresh.log" || { echo "FAIL: --fresh kept $f"; exit 1; }
done
[ -f "$tmp/c.ckpt.shard3.prev.tmp.00000g" ] || { echo "FAIL: --fresh removed a file fsgd did not make"; exit 1; }
$PY -c 'import json,sys; k=json.load(open(sys.argv[1])); assert k["rows_applied"] == k["dataset_rows"] and k["resumed_from_step"] in (-1, None), k' \
    "$tmp/fresh.json" || { echo "FAIL: --fresh did not start over"; exit 1; }
echo "PASS: --fresh removed all 4 files of the set and started over"

# a file that is not a checkpoint under a member's name: neither read nor deleted
rm -f "$tmp"/c.ckpt*
echo "mine" >"$tmp/c.ckpt.shard1.prev"
rc=0
"$FSGD" run "${args[@]}" --checkpoint "$tmp/c.ckpt" --fresh >"$tmp/foreign.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && [ "$(cat "$tmp/c.ckpt.shard1.prev")" = mine ] ||
    { tail "$tmp/foreign.log"; echo "FAIL: --fresh and a foreign file in the set (status $rc)"; exit 1; }
echo "ok: kafka_shard_ckpt_set"
