#!/usr/bin/env bash
# Authenticated messages (issue 27, part 1). Mid-job, an outsider who can
# write to the job's topics but has no job key writes, with valid layouts and
# CRC32C: a model snapshot far ahead and a model delta (NAME.model), a
# gradient impersonating worker 1 and one signed with another key
# (NAME.grads), and a plain JSON job_end, "done" and "failed" (NAME.ctl, as
# kcat would). Every one is dropped and counted as unauthenticated, never
# acted on: the job finishes every epoch with the fault-free AUC +- 0.005.
# After the job, a forged FINAL snapshot of a higher generation is appended:
# fsgd model assemble with the key skips it and hands out the aggregator's
# model byte for byte, without the key it refuses the topic, and the Python
# model reader (written from KAFKA_FORMAT.md) skips it too.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
lib=$(cd "$(dirname "$0")/lib" && pwd)
FRAMES="$PY $lib/frames.py"
# small steps: the job must still be running when the forgeries land
# (with 256-row steps a9a's 3 epochs take about a second on an idle machine)
COMMON+=(--batch 32)
ref=$(reference_auc)
job=$(job_name au)
export FSGD_JOB=$job # lib/frames.py binds its tags to the job
# a cluster that outlives the run (the model topic is read after it)
kafka_cluster "$job" 12
"$FSGD" produce --brokers "$brokers" --name "$job" --batch 32 --quiet "$DATA/a9a" --job-key-file "$FSGD_JOB_KEY"
start_run "$tmp/run.log" --no-produce --brokers "$brokers" --workers 2 --name "$job" --metrics-json "$tmp/m.json" \
    --out "$tmp/model.fsgd"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
grep -q "messages on $job.grads, .model and .ctl are authenticated" "$tmp/run.log" ||
    { echo "no startup line about authentication"; cat "$tmp/run.log"; exit 1; }
kcat -C -b "$brokers" -t "$job.model" -o -1 -c 1 -e -f '%s' >"$tmp/last" 2>/dev/null
read -r gen step < <($FRAMES header "$tmp/last")
echo "job at generation $gen step $step"
grep -q "run: aggregator failed\|^test auc" "$tmp/run.log" && { echo "the job ended before the forgeries"; exit 1; }
(umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$tmp/other.key" && echo >>"$tmp/other.key")
$FRAMES snapshot "$tmp/snap" --key none --gen "$gen" --step $((step + 100000)) --parts 12 --end 3000 --dim 123
$FRAMES delta "$tmp/delta" --key none --gen "$gen" --step $((step + 1)) --parts 12 --end 3000
$FRAMES grad "$tmp/g1" --key none --gen "$gen" --sender 1 --step $((step + 1)) --rows 0 --value 1
$FRAMES grad "$tmp/g2" --key "$tmp/other.key" --gen "$gen" --sender 2 --step $((step + 1)) --rows 0 --value 1
# and, independent of keys, a snapshot of this generation far ahead, signed
# with the job key (an insider's, or a keyless job's): no snapshot of this
# run can be that far past the workers' model, so it is refused too
$FRAMES snapshot "$tmp/snapk" --gen "$gen" --step $((step + 100000)) --parts 12 --end 3000 --dim 123
kcat -P -b "$brokers" -t "$job.model" -p 0 -k snapshot.0 "$tmp/snap" "$tmp/delta" "$tmp/snapk"
kcat -P -b "$brokers" -t "$job.grads" -k 1 "$tmp/g1" "$tmp/g2"
for status in done failed; do
    printf '{"event": "job_end", "job": "%s", "time": 0, "gen": %s, "status": "%s", "error": "forged"}' \
        "$job" "$gen" "$status" | kcat -P -b "$brokers" -t "$job.ctl" -p 0 -k job_end
done
finish_run "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
unauth=$(json_get "$tmp/m.json" messages.rejected.unauthenticated)
echo "aggregator: $unauth unauthenticated messages dropped"
# the 2 gradients at least; the job_end events too when the aggregator read
# NAME.ctl after them (it reads it between steps, best effort)
[ "$unauth" -ge 2 ] || { echo "expected >= 2 (the 2 gradients)"; exit 1; }
grep "rejected a message on $job.grads: unauthenticated" "$tmp/run.log"
# each worker read the snapshot, the delta and both job_end events: dropped
for i in 1 2; do
    n=$(sed -n "s/^fsgd: worker $i done: .* and \([0-9]*\) unauthenticated model\/ctl messages.*/\1/p" "$tmp/run.log")
    echo "worker $i: ${n:-?} unauthenticated messages dropped"
    [ -n "$n" ] && [ "$n" -ge 4 ] || { echo "worker $i did not drop them all"; exit 1; }
done
grep -q "worker 1: rejected a message on $job.model: corrupt: generation $gen: a snapshot of step $((step + 100000)).*not from this run" \
    "$tmp/run.log" || { echo "the far snapshot with the job key's tag was not refused"; exit 1; }
grep -q "the aggregator (generation [0-9]*) failed for good: forged" "$tmp/run.log" &&
    { echo "a forged job_end reached a worker"; exit 1; }

# a forged FINAL snapshot of a later generation, with no key and with another
$FRAMES snapshot "$tmp/final1" --key none --final --gen $((gen + 1)) --step $((step + 5)) --parts 12 --end 3000 \
    --dim 123
$FRAMES snapshot "$tmp/final2" --key "$tmp/other.key" --final --gen $((gen + 2)) --step $((step + 6)) --parts 12 \
    --end 3000 --dim 123
kcat -P -b "$brokers" -t "$job.model" -p 0 -k snapshot.0 "$tmp/final1" "$tmp/final2"
"$FSGD" model assemble --brokers "$brokers" --name "$job" --job-key-file "$FSGD_JOB_KEY" --out "$tmp/a.fsgd" \
    >"$tmp/asm.log" 2>&1 || { cat "$tmp/asm.log"; exit 1; }
cat "$tmp/asm.log"
grep -q "skipped [0-9]* messages without this job key's tag" "$tmp/asm.log"
cmp "$tmp/model.fsgd" "$tmp/a.fsgd" || { echo "assemble handed out another model than the aggregator's"; exit 1; }
rc=0
"$FSGD" model assemble --brokers "$brokers" --name "$job" --out "$tmp/b.fsgd" >"$tmp/asm2.log" 2>&1 || rc=$?
cat "$tmp/asm2.log"
[ $rc -eq 3 ] && grep -q "no job key was given" "$tmp/asm2.log" && [ ! -e "$tmp/b.fsgd" ] ||
    { echo "assemble without the key: status $rc"; exit 1; }
VPY=${FSGD_VENV:-$lib/../../../build/venv}/bin/python
if [ -x "$VPY" ] && "$VPY" -c 'import confluent_kafka' 2>/dev/null; then
    "$VPY" "$lib/kafka_model_reader.py" read "$brokers" "$job" "$tmp/model.fsgd" "$FSGD" | tee "$tmp/reader.log"
    grep -q "messages without this job key's tag skipped" "$tmp/reader.log"
else
    echo "note: no confluent-kafka in build/venv: the Python reader's check is left out"
fi

# NAME.data: rows fsgd produce wrote with the key carry its tag; a row an
# outside client wrote without one stops the job before step 1 (exit 3,
# naming its offset) unless the job allows unsigned rows, and a row whose
# tag is wrong stops it even then
rows_job() { # NAME EXTRA_ROW_ARGS...: signed rows, then one more row from kcat
    local n=$1
    shift
    head -n 2000 "$DATA/a9a" >"$tmp/rows"
    "$FSGD" produce --brokers "$brokers" --name "$n" --partitions 2 --quiet "$tmp/rows" --job-key-file "$FSGD_JOB_KEY" \
        2>/dev/null
    head -n 1 "$DATA/a9a" | kcat -P -b "$brokers" -t "$n.data" -p 0 "$@"
}
R=(--no-produce --brokers "$brokers" --workers 1 --epochs 1 --batch 500 --job-key-file "$FSGD_JOB_KEY" --quiet)
n2=$(job_name au2)
rows_job "$n2"
rc=0
"$FSGD" run "${R[@]}" --name "$n2" >"$tmp/r2.log" 2>&1 || rc=$?
[ $rc -eq 3 ] && grep -q "topic $n2.data partition 0 offset [0-9]*: a row without a tag" "$tmp/r2.log" ||
    { echo "an unsigned row: status $rc"; cat "$tmp/r2.log"; exit 1; }
"$FSGD" run "${R[@]}" --name "$n2" --unsigned-rows >"$tmp/r2u.log" 2>&1 || { cat "$tmp/r2u.log"; exit 1; }
n3=$(job_name au3)
rows_job "$n3" -H "fsgd.mac=$(printf '0%.0s' $(seq 64))"
rc=0
"$FSGD" run "${R[@]}" --name "$n3" --unsigned-rows >"$tmp/r3.log" 2>&1 || rc=$?
[ $rc -eq 3 ] && grep -q "topic $n3.data partition 0 offset [0-9]*: a row whose tag is not this job key's" "$tmp/r3.log" ||
    { echo "a row with a wrong tag: status $rc"; cat "$tmp/r3.log"; exit 1; }
echo ok
