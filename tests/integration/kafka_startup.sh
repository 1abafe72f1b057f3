#!/usr/bin/env bash
# Start-up with 4 workers that join the consumer group at different times
# (staggered by STAGGER seconds, as containers do): the aggregator waits for a
# settled assignment (every data partition owned by exactly one of the 4
# workers, from their worker_assignment events on NAME.ctl) before step 1, so
# no rebalance follows step 1 and almost no step is empty. Three runs; each
# must have empty_steps <= 5, apply every row once per epoch and report
# assignment_settled = 1.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
STAGGER=${STAGGER:-0.7}
RUNS=${RUNS:-3}
head -n 8000 "$DATA/a9a" >"$tmp/rows"
WP=()
agg=
trap 'kill ${agg:-} ${WP[@]+"${WP[@]}"} 2>/dev/null || true; cleanup' EXIT
for run in $(seq "$RUNS"); do
    name=$(job_name su$run)
    kafka_cluster "$name" 12
    "$FSGD" produce --brokers "$brokers" --name "$name" --batch 128 --quiet "$tmp/rows"
    args=(--brokers "$brokers" --name "$name" --batch 128 --epochs 1 --lr 0.01 --quiet)
    "$FSGD" aggregator "${args[@]}" --workers 4 --metrics-json "$tmp/m$run.json" >"$tmp/agg$run.log" 2>&1 &
    agg=$!
    WP=()
    for i in 1 2 3 4; do
        "$FSGD" worker "${args[@]}" --id "$i" >"$tmp/w$run-$i.log" 2>&1 &
        WP+=($!)
        sleep "$STAGGER"
    done
    wait $agg || { echo "aggregator failed"; cat "$tmp/agg$run.log"; exit 1; }
    for p in "${WP[@]}"; do wait "$p" || true; done
    WP=()
    kafka_cluster_stop
    "$PY" - "$tmp/m$run.json" "$run" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
print("run %s: empty_steps %d of %d, assignment wait %.2f s (settled %d), step 1 at %.2f s, rows %s" %
      (sys.argv[2], m["empty_steps"], m["steps"] + m["empty_steps"], m["assignment_wait_seconds"],
       m["assignment_settled"], m["step1_at_seconds"], m["rows_per_epoch"]))
assert m["rows_per_epoch"] == [m["dataset_rows"]] == [8000], m["rows_per_epoch"]
assert m["assignment_settled"] == 1
assert m["empty_steps"] <= 5, m["empty_steps"]
PYEOF
done
