#!/usr/bin/env bash
# NAME.ctl carries JSON status events any client can read: a job with 3
# standalone workers (one killed with -9 mid-run) is read back with kcat and
# checked: job_start (job, gen, rows, dim, codec, expected workers), each
# worker's partition assignment, worker_joined x3, worker_dropped for the
# killed one, epoch_end per epoch (rows = dataset rows, loss, AUC/logloss,
# seconds), job_end "done" matching the metrics JSON. Then an aggregator that
# fails for good publishes job_end "failed" with its error, and the running
# workers read it and exit promptly with that error.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
ct=$(job_name ct)
WPIDS=()
AGG=
trap 'kill ${AGG:-} ${WPIDS[@]+"${WPIDS[@]}"} 2>/dev/null || true; cleanup' EXIT
kafka_cluster "$ct" 6
head -n 12000 "$DATA/a9a" >"$tmp/rows"
"$FSGD" produce --brokers "$brokers" --name "$ct" --batch 8 --quiet "$tmp/rows"
# staleness 0 and steps of 32 rows: in lockstep the job runs long enough
# (3000 steps of 8 rows) to kill a worker mid-run on a fast machine: with
# steps of 32 a warm real broker ran all 750 in under 3 s, before the
# ctl topic showed worker 3's join
args=(--brokers "$brokers" --name "$ct" --test "$DATA/a9a.t" --batch 8 --epochs 2 --lr 0.01 --staleness 0 --quiet)
"$FSGD" aggregator "${args[@]}" --workers 3 --step-timeout-ms 1500 --metrics-json "$tmp/m.json" >"$tmp/agg.log" 2>&1 &
AGG=$!
for i in 1 2 3; do
    "$FSGD" worker "${args[@]}" --id "$i" >"$tmp/w$i.log" 2>&1 &
    WPIDS+=($!)
done
# kill worker 3 once it has joined (the job then waits for it at the next
# step until the step timeout drops it, so the kill cannot come too early)
for _ in $(seq 300); do
    kcat -C -b "$brokers" -t "$ct.ctl" -o beginning -e -q -f '%s\n' 2>/dev/null |
        grep -q '"event": "worker_joined".*"worker": 3,' && break
    sleep 0.1
done
kill -9 "${WPIDS[2]}" 2>/dev/null || { echo "FAIL: worker 3 had exited before the kill (the job ran out first):"
    tail -3 "$tmp/w3.log"; exit 1; }
wait "$AGG" || { echo "aggregator failed"; cat "$tmp/agg.log"; exit 1; }
wait "${WPIDS[0]}" "${WPIDS[1]}" || true
kcat -C -b "$brokers" -t "$ct.ctl" -o beginning -e -q -f '%k\t%s\n' >"$tmp/ctl.txt"
sed 's/^/  | /' "$tmp/ctl.txt" | cut -c1-200
"$PY" - "$tmp/ctl.txt" "$tmp/m.json" "$ct" <<'PYEOF'
import json, sys
ev = []
for line in open(sys.argv[1]):
    k, v = line.rstrip("\n").split("\t", 1)
    j = json.loads(v)
    assert j["event"] == k and j["job"] == sys.argv[3] and j["time"] > 1.6e9, j
    ev.append(j)
m = json.load(open(sys.argv[2]))
kinds = [e["event"] for e in ev]
s = [e for e in ev if e["event"] == "job_start"]
assert len(s) == 1, kinds
s = s[0]
assert s["gen"] == m["generation"] and s["dataset_rows"] == 12000 == m["dataset_rows"], s
assert s["dim"] == m["dim"] and s["weights"] == s["dim"] + 1 and s["codec"] == "none", s
assert s["expected_workers"] == 3 and s["partitions"] == 6 and s["epochs"] == 2, s
asg = {e["worker"]: e for e in ev if e["event"] == "worker_assignment"}
assert set(asg) == {1, 2, 3}, asg
joined = [e["worker"] for e in ev if e["event"] == "worker_joined"]
assert sorted(joined) == [1, 2, 3], joined
dropped = [e for e in ev if e["event"] == "worker_dropped"]
assert [d["worker"] for d in dropped] == [3] and 3 not in dropped[0]["live"], dropped
assert dropped[0]["timeout_ms"] == 1500, dropped
ep = [e for e in ev if e["event"] == "epoch_end"]
assert [e["epoch"] for e in ep] == [1, 2], ep
for e, me in zip(ep, m["per_epoch"]):
    assert e["rows"] == 12000 == e["dataset_rows"] and e["gen"] == s["gen"], e
    assert abs(e["train_loss"] - me["train_loss"]) < 1e-5 and abs(e["test_auc"] - me["test_auc"]) < 1e-5, (e, me)
    assert e["test_logloss"] > 0 and e["seconds"] > 0 and e["test_rows"] == m["test"]["n"], e
# each epoch's own seconds of gradient, encode, decode, waiting and update
# (the bench's Table IV): none negative, together within the job's totals
# (which add the final snapshot's publish), the gradient's never zero
parts = [me["seconds_parts"] for me in m["per_epoch"]]
for k, total in m["total_seconds"].items():
    assert all(p[k] >= 0 for p in parts) and sum(p[k] for p in parts) <= total * (1 + 1e-5) + 1e-6, (k, parts, total)  # %.6g
assert all(p["gradient"] > 0 and p["update"] > 0 for p in parts), parts
end = [e for e in ev if e["event"] == "job_end"]
assert len(end) == 1 and kinds.index("job_end") > kinds.index("epoch_end"), kinds
end = end[0]
assert end["status"] == "done" and end["error"] is None, end
assert end["steps"] == m["steps"] + m["empty_steps"] and end["epochs"] == 2 and end["rows_applied"] == 24000, end
assert abs(end["test_auc"] - m["test"]["auc"]) < 1e-6 and end["workers_dropped"] >= 1, end
# the final model's step (the last epoch's), which readers pair its metrics with
assert end["step"] == ep[-1]["step"], (end, ep[-1])
leave = sorted(e["worker"] for e in ev if e["event"] == "worker_leave")
assert leave == [1, 2], leave
print("ctl events ok:", " ".join(kinds))
PYEOF
# An aggregator that fails for good (its test file is missing): job_end
# "failed" with the error, and the workers waiting for it stop on their own.
# (fresh topics: the first job's model topic ends with its final model)
kafka_cluster_stop
cf=$(job_name cf)
kafka_cluster "$cf" 2
"$FSGD" produce --brokers "$brokers" --name "$cf" --batch 64 --quiet "$tmp/rows"
args=(--brokers "$brokers" --name "$cf" --test "$DATA/a9a.t" --batch 64 --epochs 2 --lr 0.01 --quiet)
WPIDS=()
for i in 1 2; do
    "$FSGD" worker "${args[@]}" --id "$i" >"$tmp/fw$i.log" 2>&1 &
    WPIDS+=($!)
done
sleep 2
if "$FSGD" aggregator "${args[@]/$DATA\/a9a.t//nonexistent.t}" --workers 2 >"$tmp/fagg.log" 2>&1; then
    echo "aggregator with a missing test file succeeded"; exit 1
fi
t0=$SECONDS
for p in "${WPIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then echo "worker $p still running 10 s after the aggregator failed"; exit 1; fi
    if wait "$p"; then echo "worker exited 0 after the aggregator failed"; exit 1; fi
done
WPIDS=()
kcat -C -b "$brokers" -t "$cf.ctl" -o beginning -e -q -f '%k\t%s\n' | grep "^job_end" | tail -1 >"$tmp/end.txt"
cat "$tmp/end.txt" | cut -c1-300
"$PY" -c 'import json,sys
k, v = open(sys.argv[1]).read().split("\t", 1); j = json.loads(v)
assert j["status"] == "failed" and "nonexistent.t" in j["error"] and j["error_code"].startswith("FSGD_E_"), j' "$tmp/end.txt"
grep -h "failed for good" "$tmp"/fw*.log
echo "workers stopped $((SECONDS - t0)) s after the failed job_end"
