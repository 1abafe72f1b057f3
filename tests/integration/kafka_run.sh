#!/usr/bin/env bash
# fsgd run on the embedded cluster with 3 workers and codec none ends within
# 0.002 test AUC of fsgd train with the same settings; every epoch applies
# exactly the dataset's rows; the model file is written. With codec fastsgd
# the distributed run is within 0.005 of fsgd train with fastsgd.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
ref=$(reference_auc)
start_run "$tmp/run.log" --workers 3 --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json"
finish_run "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.002
test -s "$tmp/m.fsgd"
for k in per_step_seconds.gradient per_step_seconds.encode per_step_seconds.decode per_step_seconds.comm_wait \
    per_step_seconds.update bytes.up bytes.down compression_ratio rows_per_second step_latency_ms.p50 train_seconds; do
    v=$(json_get "$tmp/m.json" "$k")
    echo "$k = $v"
done
# fastsgd: within 0.005 of the local trainer with the same codec
COMMON=("${COMMON[@]/none/fastsgd}")
ref=$(reference_auc)
start_run "$tmp/run2.log" --workers 3 --metrics-json "$tmp/f.json"
finish_run "$tmp/run2.log"
check_metrics "$tmp/f.json" "$ref" 0.005
echo "fastsgd compression ratio $(json_get "$tmp/f.json" compression_ratio)"
# The downlink is compressed too, and every worker's replica passed every
# check against the aggregator's (CRC32C of all weights every 64 steps).
[ "$(json_get "$tmp/f.json" downlink.spec)" = fastsgd ]
checks=$(json_get "$tmp/f.json" downlink.replica_checks)
echo "downlink: $(json_get "$tmp/f.json" downlink.down_bytes_per_worker_step) B/worker/step down," \
    "$(json_get "$tmp/f.json" downlink.up_bytes_per_worker_step) up, $checks replica checks"
[ "$checks" -ge 5 ]
[ "$(grep -c 'worker .* done: .* replica mismatches 0,' "$tmp/run2.log")" -eq 3 ] ||
    { grep 'done:' "$tmp/run2.log"; echo "a worker's replica differed from the aggregator's"; exit 1; }
# Working-set workers (replica working_set) over 2 shards: each pulls its
# steps' keys from the shards that own them; the model as good as with full
# replicas; the answers to a worker's pulls cost less than what it sends (its
# gradient parts and its pulls). (On a9a's 123 features the step states,
# ~0.9 KB, are most of the downlink: tests/bench/scale_out.sh measures the
# ratio on CTR data.)
start_run "$tmp/run3.log" --workers 3 --shards 2 --replica working_set --metrics-json "$tmp/w.json"
finish_run "$tmp/run3.log"
check_metrics "$tmp/w.json" "$ref" 0.005
"$PY" - "$tmp/w.json" <<'PYEOF'
import json, sys
m = [json.load(open(sys.argv[1] + s)) for s in ("", ".shard1")]
up = sum(x["downlink"]["up_bytes_per_worker_step"] for x in m)
values = [x["downlink"]["values_bytes_per_worker_step"] for x in m]
down = sum(x["downlink"]["down_bytes_per_worker_step"] for x in m) + sum(values)
print("working set: %.0f B/worker/step down (%.0f of it values), %.0f up, down/up %.3f" % (down, sum(values), up, down / up))
assert all(v > 0 for v in values), "a shard answered no pull"
assert sum(values) < up, "the answers to a worker's pulls cost more than it sent"
PYEOF
