#!/usr/bin/env bash
# kill -9 one of three workers mid-epoch: the aggregator drops it after the
# step timeout, the consumer group moves its partitions, the new owners resume
# at the last applied positions; every epoch applies exactly the dataset's
# rows and the AUC stays within 0.005 of the fault-free reference.
set -euo pipefail
# real-kafka: cluster
. "$(dirname "$0")/lib/kafka.bash"
ref=$(reference_auc)
start_run "$tmp/run.log" --workers 3 --batch 128 --step-timeout-ms 2000 --metrics-json "$tmp/m.json"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 40 || { cat "$tmp/run.log"; exit 1; }
sleep 0.3
pid=$(sed -n 's/^fsgd: worker 2 pid \([0-9]*\)$/\1/p' "$tmp/run.log")
kill -9 "$pid"
echo "killed worker 2 (pid $pid)"
finish_run "$tmp/run.log"
grep "killed by signal 9" "$tmp/run.log"
COMMON+=(--batch 128)
ref=$(reference_auc)
check_metrics "$tmp/m.json" "$ref" 0.005
[ "$(json_get "$tmp/m.json" workers.dropped)" -ge 1 ]
