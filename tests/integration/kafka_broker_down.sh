#!/usr/bin/env bash
# The broker leading NAME.grads goes down for 3 s mid-run (mock cluster fault
# injection): clients reconnect, the job finishes, exactly-once holds.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
COMMON+=(--batch 128)
ref=$(reference_auc)
start_run "$tmp/run.log" --workers 3 --fault broker-down:after=6,for=3,broker=2 --metrics-json "$tmp/m.json"
finish_run "$tmp/run.log"
grep "fault: broker 2 down" "$tmp/run.log"
grep "fault: broker 2 up" "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
