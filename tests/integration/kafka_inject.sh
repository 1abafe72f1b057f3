#!/usr/bin/env bash
# Injected bursts (issue 12, finding 3): into NAME.grads mid-job, a burst of
# garbage, a 5 MB and a 1 MB frame with valid CRCs, and 300 incomplete
# 2-chunk frames for far-future steps under the workers' own sender ids
# (which used to sit in reassembly until the job reached their step, then
# block the genuine gradients: the job stopped with no error). The job
# finishes, its AUC within 0.005 of a clean run; the log names each reason
# once; reassembly held no more than a legitimate step needs (the metric of
# held bytes, not RSS).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
FRAMES="$PY $(dirname "$0")/lib/frames.py"
# batch 32: ~3000 steps, so the job is still running when the burst lands
COMMON+=(--batch 32)
ref=$(reference_auc)
# What needs no generation is made before the job starts: garbage (200 lines
# of random text, 20 binary blobs) and big frames with valid CRCs from
# worker 1 (the mock may drop the 5 MB one silently: it loses single
# messages above ~2.5 MiB; a real broker refuses it; the 1 MB one arrives)
head -c 45000 /dev/urandom | base64 -w 300 >"$tmp/junk.txt" # 200 lines (no `| head`: SIGPIPE under pipefail)
blobs=()
for i in $(seq 20); do head -c $((i * 97)) /dev/urandom >"$tmp/blob$i"; blobs+=("$tmp/blob$i"); done
# a fresh name on a real broker (topics outlive a job), ij on the mock
job=$(job_name ij)
export FSGD_JOB=$job # lib/frames.py binds its tags to the job
$FRAMES chunk "$tmp/big5" --sender 1 --step 1 --size 5000000
$FRAMES chunk "$tmp/big1" --sender 1 --step 1 --size 1000000
start_run "$tmp/run.log" --workers 3 --name "$job" --metrics-json "$tmp/m.json"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
brokers=$(run_brokers "$tmp/run.log")
kcat -C -b "$brokers" -t "$job.model" -o -1 -c 1 -e -f '%s' >"$tmp/last" 2>/dev/null
read -r gen step < <($FRAMES header "$tmp/last")
echo "job at generation $gen step $step"
kcat -P -b "$brokers" -t "$job.grads" -l "$tmp/junk.txt"
kcat -P -b "$brokers" -t "$job.grads" "${blobs[@]}"
if [ "$KAFKA_MODE" = real ]; then
    # a real broker refuses the 5 MB frame itself (the topic's
    # max.message.bytes is 1048588, KAFKA_FORMAT.md): it never reaches fsgd
    if kcat -P -b "$brokers" -t "$job.grads" -X message.max.bytes=10000000 "$tmp/big5" 2>"$tmp/big5.err"; then
        echo "the broker took a 5 MB message on $job.grads"; exit 1
    fi
    grep "Message size too large" "$tmp/big5.err"
else
    kcat -P -b "$brokers" -t "$job.grads" -X message.max.bytes=10000000 "$tmp/big5"
fi
kcat -P -b "$brokers" -t "$job.grads" -X message.max.bytes=10000000 "$tmp/big1"
# 300 incomplete 2-chunk frames (chunk 0 only, 4 KB each) for far-future
# steps of this generation, from the three workers' ids
$FRAMES chunk "$tmp/inc" --gen "$gen" --senders 3 --step 100000 --count 300 --chunk 0 --nchunks 2 --size 4000
# in the order they were tagged (a glob's order is inc.0, inc.1, inc.10, ...:
# sequences more than 256 below the highest taken read as replays)
kcat -P -b "$brokers" -t "$job.grads" $(seq -f "$tmp/inc.%g" 0 299)
echo "injected 220 junk messages, 2 big frames, 300 incomplete frames"
finish_run "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
grep "rejected a message on $job.grads: corrupt: " "$tmp/run.log"
grep "rejected a message on $job.grads: oversize: .*a chunk of [0-9]* bytes" "$tmp/run.log"
grep "rejected a message on $job.grads: future: " "$tmp/run.log"
for r in corrupt oversize future; do
    [ "$(grep -c "rejected a message on $job.grads: $r:" "$tmp/run.log")" -eq 1 ] || { echo "$r logged more than once"; exit 1; }
done
"$PY" - "$tmp/m.json" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
rej, held = m["messages"]["rejected"], m["reassembly"]
print("rejected", rej, "reassembly", held)
assert rej["corrupt"] >= 200, rej
assert rej["oversize"] >= 1, rej
assert rej["future"] + rej["stale"] >= 300, rej
# 300 x 4 KB were injected: none of it may be held, only what a real step
# of single-chunk gradients passes through
assert held["held_bytes_max"] < 1 << 20, held
assert held["held_bytes_max"] <= held["limit_bytes"], held
assert m["workers"]["dropped"] == 0, m["workers"]
PYEOF
