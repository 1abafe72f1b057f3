#!/usr/bin/env bash
# A produce reply of the broker leading NAME.grads is delayed 3 s, past the
# workers' 1.5 s socket timeout: the client retries and the broker stores the
# gradient twice. The aggregator drops the copy by (sender, step, chunk).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
ref=$(reference_auc)
FSGD_RDKAFKA="socket.timeout.ms=1500" \
    start_run "$tmp/run.log" --workers 3 --fault produce-delay:after=6,rtt=3000,count=1,broker=2 \
    --metrics-json "$tmp/m.json"
finish_run "$tmp/run.log"; grep -v "^fsgd: epoch [0-9]* step" "$tmp/run.log" | sed "s/^/  | /"
grep "produce replies of broker 2 delayed" "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
dups=$(json_get "$tmp/m.json" messages.duplicates_dropped)
echo "duplicates dropped: $dups"
[ "$dups" -ge 1 ]
