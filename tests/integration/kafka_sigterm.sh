#!/usr/bin/env bash
# fsgd run owns its processes (issue 12, finding 4): SIGTERM mid-epoch to a
# run with 3 workers stops the aggregator and every worker -- within 10 s
# (a liveness bound; it used to take minutes with serial waits and no KILL)
# no process of the run is left -- and fsgd run exits 143, naming the
# checkpoint it kept. The next run does not delete that checkpoint: it
# refuses to start until told --resume (continue from it: the job finishes
# within 0.005 AUC of a clean run) or --fresh. --workers is checked against
# the data partitions and the cores before anything starts.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
COMMON+=(--batch 128)
ref=$(reference_auc)
# alive PID: a process that exists and is not a zombie
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
# st on the mock; a fresh name on a real broker, where topics outlive a job
name=$(job_name st)
JOB=(--workers 3 --name "$name" --snapshot-every 20 --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json")
start_run "$tmp/run.log" "${JOB[@]}"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
for _ in $(seq 100); do [ -e "$tmp/m.fsgd.ckpt" ] && break; sleep 0.1; done
pids=$(sed -n 's/^fsgd: \(aggregator\|worker [0-9]*\) pid \([0-9]*\)$/\2/p' "$tmp/run.log")
[ "$(wc -w <<<"$pids")" -eq 4 ] || { echo "expected 4 child pids, got: $pids"; exit 1; }
run_pid=$RUN_PID
kill -TERM "$run_pid"
left=
for _ in $(seq 100); do
    left=
    for p in $run_pid $pids; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && break
    sleep 0.1
done
[ -z "$left" ] || { echo "processes of the run still alive 10 s after SIGTERM:$left"; ps -o pid,stat,args -p "$(tr " " "," <<<"${left# }")"; exit 1; }
rc=0
wait "$run_pid" || rc=$?
RUN_PID=
echo "fsgd run exited $rc after SIGTERM; no process of it left"
[ $rc -eq 143 ] || { cat "$tmp/run.log"; exit 1; }
grep "run: interrupted by signal 15" "$tmp/run.log"
grep "checkpoint kept at $tmp/m.fsgd.ckpt" "$tmp/run.log"
[ -s "$tmp/m.fsgd.ckpt" ]

# the next run neither deletes the checkpoint nor starts over silently
rc=0
"$FSGD" run "${COMMON[@]}" "${JOB[@]}" >"$tmp/again.log" 2>&1 || rc=$?
cat "$tmp/again.log"
[ $rc -eq 2 ] && grep -q "checkpoint '$tmp/m.fsgd.ckpt' exists .*--resume .*--fresh" "$tmp/again.log"
[ -s "$tmp/m.fsgd.ckpt" ]
# --resume continues from it
start_run "$tmp/resume.log" "${JOB[@]}" --resume
finish_run "$tmp/resume.log"
grep "resuming from checkpoint" "$tmp/resume.log"
check_metrics "$tmp/m.json" "$ref" 0.005
[ "$(json_get "$tmp/m.json" resumed_from_step)" -gt 0 ]
[ ! -e "$tmp/m.fsgd.ckpt" ]   # a finished job removes its checkpoint
# --workers against what the job and the machine hold, before anything
# starts (and before --fresh deletes anything); a file with a checkpoint's
# header, since --fresh deletes nothing else (issue 27)
printf 'FSGDCKPT' >"$tmp/m.fsgd.ckpt"
rc=0
"$FSGD" run "${COMMON[@]}" "${JOB[@]}" --fresh --workers 13 >"$tmp/w13.log" 2>&1 || rc=$?
cat "$tmp/w13.log"
[ $rc -eq 2 ] && grep -q -- "--workers 13: $name.data has 12 partitions" "$tmp/w13.log"
grep -q "embedded Kafka cluster" "$tmp/w13.log" && { echo "started a broker before checking --workers"; exit 1; }
[ -e "$tmp/m.fsgd.ckpt" ]
cores=$(nproc)
rc=0
"$FSGD" run "${COMMON[@]}" --workers $((8 * cores + 1)) --partitions 2048 >"$tmp/w.log" 2>&1 || rc=$?
cat "$tmp/w.log"
[ $rc -eq 2 ] && grep -q "this machine has $cores cores; at most $((8 * cores)) worker processes" "$tmp/w.log"
# --fresh deletes the checkpoint in place, says so, and starts over (on a
# real broker under a new name: there a job name is for one job, and the
# resumed job above used this one)
[ "$KAFKA_MODE" = real ] && JOB[3]=$(job_name st)
start_run "$tmp/fresh.log" "${JOB[@]}" --fresh --epochs 1
finish_run "$tmp/fresh.log"
grep "removed checkpoint $tmp/m.fsgd.ckpt (--fresh)" "$tmp/fresh.log"
[ "$(json_get "$tmp/m.json" resumed_from_step)" -eq -1 ]
