#!/usr/bin/env bash
# Model messages that could not come from the job's current run (issue 27,
# part 1's last sentence: "a step or generation that jumps beyond what the
# control topic announced: reject, count, carry on"). Mid-job, snapshots of
# the next generation and of one far ahead, each one step past the model,
# are appended to NAME.model with the job key's tag: what an insider, or
# anyone on a job without a key, could send, so only the generation check
# stands in the way (kafka_auth.sh tries a step far ahead; test_roles has
# this case on the in-memory bus). No job_start on NAME.ctl announced those
# generations: every worker counts both as corrupt and keeps training, and
# the job ends with every epoch's rows and the fault-free AUC +- 0.005.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
lib=$(cd "$(dirname "$0")/lib" && pwd)
FRAMES="$PY $lib/frames.py"
# small steps: the job must still be running when the snapshots land
COMMON+=(--batch 32)
ref=$(reference_auc)
job=$(job_name ge)
export FSGD_JOB=$job # lib/frames.py binds its tags to the job
kafka_cluster "$job" 12
"$FSGD" produce --brokers "$brokers" --name "$job" --batch 32 --quiet "$DATA/a9a" --job-key-file "$FSGD_JOB_KEY"
start_run "$tmp/run.log" --no-produce --brokers "$brokers" --workers 2 --name "$job" --metrics-json "$tmp/m.json"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
kcat -C -b "$brokers" -t "$job.model" -o -1 -c 1 -e -f '%s' >"$tmp/last" 2>/dev/null
read -r gen step < <($FRAMES header "$tmp/last")
echo "job at generation $gen step $step"
grep -q "^test auc" "$tmp/run.log" && { echo "the job ended before the snapshots"; exit 1; }
$FRAMES snapshot "$tmp/next" --gen $((gen + 1)) --step $((step + 1)) --parts 12 --end 3000 --dim 123
$FRAMES snapshot "$tmp/far" --gen $((gen + 100000)) --step $((step + 1)) --parts 12 --end 3000 --dim 123
kcat -P -b "$brokers" -t "$job.model" -p 0 -k snapshot.0 "$tmp/next" "$tmp/far"
finish_run "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
[ "$(json_get "$tmp/m.json" workers.dropped)" -eq 0 ] || { echo "a worker was dropped"; exit 1; }
for i in 1 2; do
    n=$(sed -n "s/^fsgd: worker $i done: .* \([0-9]*\) corrupt and [0-9]* unauthenticated model\/ctl messages.*/\1/p" \
        "$tmp/run.log")
    echo "worker $i: ${n:-?} corrupt model/ctl messages"
    [ -n "$n" ] && [ "$n" -ge 2 ] || { echo "worker $i did not count both snapshots"; exit 1; }
done
grep -q "rejected a message on $job.model: corrupt: generation $((gen + 1)) step $((step + 1)): a snapshot of a generation $job.ctl never announced" \
    "$tmp/run.log" || { echo "no worker said why it refused the next generation's snapshot"; grep rejected "$tmp/run.log"; exit 1; }
echo ok
