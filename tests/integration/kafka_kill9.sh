#!/usr/bin/env bash
# kill -9 of fsgd run (issue 12, finding 4): its aggregator and workers used
# to stay alive. Each child asks the kernel for SIGTERM when fsgd run dies
# (PR_SET_PDEATHSIG), so within 10 s (a liveness bound) none is left.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
start_run "$tmp/run.log" --workers 3 --batch 128 --name k9
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
pids=$(sed -n 's/^fsgd: \(aggregator\|worker [0-9]*\) pid \([0-9]*\)$/\2/p' "$tmp/run.log")
[ "$(wc -w <<<"$pids")" -eq 4 ] || { echo "expected 4 child pids, got: $pids"; exit 1; }
kill -KILL "$RUN_PID"
wait "$RUN_PID" 2>/dev/null || true
RUN_PID=
left=
for _ in $(seq 100); do
    left=
    for p in $pids; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && break
    sleep 0.1
done
if [ -n "$left" ]; then
    echo "children of the killed fsgd run still alive after 10 s:$left"
    ps -o pid,ppid,stat,args -p "$(tr " " "," <<<"${left# }")" || true
    kill -KILL $left 2>/dev/null || true
    exit 1
fi
echo "fsgd run killed with SIGKILL: its aggregator and 3 workers exited too"
