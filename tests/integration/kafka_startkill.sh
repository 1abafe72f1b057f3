#!/usr/bin/env bash
# A worker killed before step 1 (issue 12, finding 5) used to stall step 1
# for 60 s without a word. Now the aggregator says what it waits for, and
# starts with the workers the consumer group settled on once the group has
# been stable past its session timeout (or, if the worker had reported its
# partitions, once the group has moved them). The job finishes with every
# row applied once per epoch and the AUC of a clean run.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
COMMON+=(--batch 128)
ref=$(reference_auc)
start_run "$tmp/run.log" --workers 3 --name sk --metrics-json "$tmp/m.json"
wait_for "$tmp/run.log" "worker 3 pid" 60 || { cat "$tmp/run.log"; exit 1; }
pid=$(sed -n 's/^fsgd: worker 3 pid \([0-9]*\)$/\1/p' "$tmp/run.log")
kill -9 "$pid"
echo "killed worker 3 (pid $pid) before step 1"
finish_run "$tmp/run.log"
grep -v "^fsgd: epoch [0-9]* step" "$tmp/run.log" | sed "s/^/  | /"
grep -E "aggregator: (starting with 2 of 3 expected workers|step 1: 2 of 3 expected workers answered; waiting for 3)" "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
[ "$(json_get "$tmp/m.json" assignment_settled)" -eq 1 ]
