#!/usr/bin/env bash
# kill -9 the aggregator mid-run: fsgd run restarts it, it resumes from its
# checkpoint (a new generation; workers follow its snapshot), every epoch
# still applies exactly the dataset's rows, AUC within 0.005 of fault-free.
set -euo pipefail
# real-kafka: cluster
. "$(dirname "$0")/lib/kafka.bash"
COMMON+=(--batch 128)
ref=$(reference_auc)
start_run "$tmp/run.log" --workers 3 --snapshot-every 20 --metrics-json "$tmp/m.json" --checkpoint "$tmp/agg.ckpt"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 40 || { cat "$tmp/run.log"; exit 1; }
# kill once the first checkpoint is written (step 20), so the restart resumes
# from it rather than starting over
for _ in $(seq 600); do [ -s "$tmp/agg.ckpt" ] && break; sleep 0.1; done
[ -s "$tmp/agg.ckpt" ] || { echo "no checkpoint written in 60 s"; cat "$tmp/run.log"; exit 1; }
sleep 0.3
pid=$(sed -n 's/^fsgd: aggregator pid \([0-9]*\)$/\1/p' "$tmp/run.log" | head -1)
kill -9 "$pid"
echo "killed the aggregator (pid $pid)"
finish_run "$tmp/run.log"
grep "restarting from" "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
resumed=$(json_get "$tmp/m.json" resumed_from_step)
echo "resumed from step $resumed"
[ "$resumed" -ge 0 ]
