#!/usr/bin/env bash
# A worker that cannot read the job's messages says so and leaves (issue
# 42, item 12): a worker started without --job-key-file in an authenticated
# job joins the group, then meets the first authenticated model message; it
# exits with status 3 naming the missing key, its partitions go to the
# others, and the job ends with every row once (it used to hold half the
# partitions and stall the job for minutes, its only clue one line at start).
# real-kafka: cluster
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR
j=$(job_name kw)
kafka_cluster "$j" 4
K=(--job-key-file "$FSGD_JOB_KEY")
head -n 4000 "$DATA/a9a" >"$tmp/rows"
"$FSGD" produce --brokers "$brokers" --name "$j" --partitions 4 --quiet "$tmp/rows" "${K[@]}"
# the keyless worker joins first
"$FSGD" worker --brokers "$brokers" --name "$j" --id 9 --batch 64 >"$tmp/w.log" 2>&1 &
WPID=$!
trap 'kill "$WPID" 2>/dev/null || true; cleanup' EXIT
"$FSGD" run --no-produce --brokers "$brokers" --name "$j" --workers 1 --epochs 2 --batch 64 "${K[@]}" \
    --metrics-json "$tmp/m.json" >"$tmp/run.log" 2>&1 &
RUN_PID=$!
wrc=0
# a bound against a hang (it leaves in seconds), not a timing assertion
timeout 240 tail --pid="$WPID" -f /dev/null || { echo "FAIL: the keyless worker did not leave in 240 s"; exit 1; }
wait "$WPID" || wrc=$?
[ "$wrc" = 3 ] || { tail "$tmp/w.log"; echo "FAIL: the keyless worker ended with status $wrc, not 3"; exit 1; }
grep -q "this worker was started without its key (--job-key-file): it cannot read the model; leaving the group" "$tmp/w.log" ||
    { tail "$tmp/w.log"; echo "FAIL: the keyless worker did not say why it left"; exit 1; }
echo "PASS: the keyless worker left with status 3: $(grep -o 'the job.s messages are authenticated[^;]*' "$tmp/w.log" | head -1)"
rc=0
timeout 300 tail --pid="$RUN_PID" -f /dev/null || { echo "FAIL: the job did not end in 300 s after the keyless worker left"; exit 1; }
wait "$RUN_PID" || rc=$?
RUN_PID=
[ "$rc" = 0 ] || { tail "$tmp/run.log"; echo "FAIL: the job ended with status $rc"; exit 1; }
rows=$(json_get "$tmp/m.json" rows_applied)
[ "$rows" = 8000 ] || { echo "FAIL: $rows rows applied, not 2 x 4000"; exit 1; }
echo "PASS: the job went on with the other worker: $rows rows = 2 x 4000"
echo "ok: kafka_keyless_worker"
