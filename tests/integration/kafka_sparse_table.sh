#!/usr/bin/env bash
# Sparse shard tables (job key table, issue 37) through the real processes
# of `fsgd run --shards 2 --replica working_set`: a job with sparse tables
# trains the model of a job with dense ones (the same test AUC, and each
# shard's metrics say which table it held and how many keys); shard 0
# assembles, scores and writes it as pairs (the model file loads and scores
# as the metrics say). Killed with kill -9 mid-run, shard 1 comes back from
# its checkpoint's key list (version 12/13) and the job ends with every row
# applied once per epoch. Sparse tables asked for where they cannot be (one
# aggregator, full replicas) are refused before anything starts (exit 2).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR
args=(--data "$DATA/a9a" --test "$DATA/a9a.t" --shards 2 --replica working_set --batch 64 --epochs 2 --staleness 0
    --codec none --job-key-file "$FSGD_JOB_KEY")
[ "$KAFKA_MODE" = real ] && args+=(--brokers "$FSGD_BROKERS")

for t in dense sparse; do
    "$FSGD" run "${args[@]}" --table "$t" --name "$(job_name "$t")" --out "$tmp/$t.fsgd" --metrics-json "$tmp/$t.json" \
        >"$tmp/$t.log" 2>&1 || { tail -n 20 "$tmp/$t.log"; echo "FAIL: the job with $t tables"; exit 1; }
done
grep -q "shard 1: table sparse (job key)" "$tmp/sparse.log" || { grep table "$tmp/sparse.log"; echo "FAIL: no table line"; exit 1; }
"$FSGD" predict --model "$tmp/sparse.fsgd" --data "$DATA/a9a.t" --out /dev/null 2>"$tmp/p.txt"
file_auc=$(sed -n 's/.* auc \([0-9.]*\) .*/\1/p' "$tmp/p.txt")
[ -n "$file_auc" ] || { cat "$tmp/p.txt"; echo "FAIL: fsgd predict said no auc"; exit 1; }
$PY - "$tmp/dense.json" "$tmp/sparse.json" "$file_auc" <<'PY'
import json, sys
d, s = (json.load(open(x)) for x in sys.argv[1:3])
p = {"test": {"auc": float(sys.argv[3])}}
s1 = json.load(open(sys.argv[2] + ".shard1"))
for m, want in ((d, "dense"), (s, "sparse"), (s1, "sparse")):
    assert m["shard"]["table"] == want, (m["shard"], want)
for m in (s, s1):  # a9a touches most of its 123 features: at most every weight
    assert 0 < m["shard"]["table_keys"] <= m["shard"]["weights_held"], m["shard"]
assert s["rows_applied"] == 2 * s["dataset_rows"], (s["rows_applied"], s["dataset_rows"])
assert abs(s["test"]["auc"] - d["test"]["auc"]) < 2e-3, (s["test"]["auc"], d["test"]["auc"])
# the model file shard 0 wrote from pairs scores as shard 0 did
assert abs(p["test"]["auc"] - s["test"]["auc"]) < 1e-6, (p["test"]["auc"], s["test"]["auc"])  # printed to 6 places
print("sparse tables: keys %d + %d of %d weights, test auc %.6f (dense %.6f, the file %.6f)" % (
    s["shard"]["table_keys"], s1["shard"]["table_keys"], s["dim"] + 1, s["test"]["auc"], d["test"]["auc"],
    p["test"]["auc"]))
PY

# kill -9 of shard 1 after its first checkpoint: the shards resume from their key lists
"$FSGD" run "${args[@]}" --table sparse --name "$(job_name kill)" --checkpoint "$tmp/c.ckpt" \
    --metrics-json "$tmp/k.json" >"$tmp/k.log" 2>&1 &
RUN_PID=$!
for _ in $(seq 600); do [ -f "$tmp/c.ckpt.shard1" ] && break; sleep 0.1; done
[ -f "$tmp/c.ckpt.shard1" ] || { tail "$tmp/k.log"; echo "FAIL: shard 1 wrote no checkpoint"; exit 1; }
pid=$(sed -n 's/^fsgd: aggregator shard 1 pid //p' "$tmp/k.log" | tail -n 1)
kill -KILL "$pid" 2>/dev/null || { tail "$tmp/k.log"; echo "FAIL: shard 1 (pid $pid) was gone before the kill"; exit 1; }
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
[ "$rc" = 0 ] || { tail -n 20 "$tmp/k.log"; echo "FAIL: the sparse job did not survive shard 1's kill -9 (status $rc)"; exit 1; }
grep -q "restarting all 2 shards from their checkpoints of step [0-9]*" "$tmp/k.log" ||
    { tail -n 20 "$tmp/k.log"; echo "FAIL: no restart of the shards"; exit 1; }
$PY - "$tmp/k.json" "$tmp/sparse.json" <<'PY'
import json, sys
k, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert k["shard"]["table"] == "sparse" and k["rows_applied"] == 2 * k["dataset_rows"], (k["shard"], k["rows_applied"])
assert abs(k["test"]["auc"] - s["test"]["auc"]) < 5e-3, (k["test"]["auc"], s["test"]["auc"])
print("after shard 1's kill -9: rows %d, test auc %.6f" % (k["rows_applied"], k["test"]["auc"]))
PY

# sparse where it cannot be: refused before anything starts, naming why
for bad in "--shards 1" "--replica full"; do
    rc=0
    # shellcheck disable=SC2086
    "$FSGD" run "${args[@]}" --table sparse $bad --name "$(job_name bad)" >"$tmp/bad.log" 2>&1 || rc=$?
    [ "$rc" = 2 ] || { cat "$tmp/bad.log"; echo "FAIL: --table sparse $bad: status $rc, not 2"; exit 1; }
    grep -q "table sparse" "$tmp/bad.log" || { cat "$tmp/bad.log"; echo "FAIL: --table sparse $bad: no reason"; exit 1; }
done
echo "ok: kafka_sparse_table"
