#!/usr/bin/env bash
# The fault matrix of a sharded job on a real 3-broker cluster (issue 42):
# fsgd run --shards 2 --workers 2 with --checkpoint, and in turn kill -9 of
# aggregator shard 0, of shard 1 and of a worker, SIGTERM of a worker, of
# fsgd run, of shard 0 and of shard 1, and the checkpoint's file system filled (a 64 KiB tmpfs in a
# private mount namespace); after a fault that stops the job, --resume.
# Each line: the fault, the statuses, rows applied against epochs x rows,
# the test AUC against the fault-free run's. Not part of the suite (minutes,
# a JVM cluster): run by hand; starts and always stops its own cluster.
#   BUILD=build FSGD=bin/fsgd bash tests/kafka/shard_fault_matrix.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FSGD=${FSGD:-$ROOT/bin/fsgd}
DATA=${FSGD_DATA:-$ROOT/${BUILD:-build}/datasets}
PY=/usr/bin/python3
BROKER_SH=$ROOT/tests/kafka/broker.sh
tmp=$(mktemp -d)
"$BROKER_SH" check >/dev/null || { echo "SKIP: no java/kafka"; exit 77; }
cleanup() { "$BROKER_SH" stop "$tmp/c" >/dev/null 2>&1; umount "$tmp/mnt" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
out=$("$BROKER_SH" start "$tmp/c" 3) || { echo "FAIL: the cluster did not start: $out"; exit 1; }
B=${out#brokers=}
echo "3 brokers at $B"
# one key for the job's runs: a resumed run reads the rows the first one
# signed (a key fsgd run makes for itself lives as long as that run)
(umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$tmp/job.key" && echo >>"$tmp/job.key")
args=(--brokers "$B" --data "$DATA/a9a" --test "$DATA/a9a.t" --shards 2 --workers 2 --epochs 2 --batch 64
    --staleness 0 --replication-factor 3 --min-insync-replicas 2 --job-key-file "$tmp/job.key")
n=0
name() { n=$((n + 1)); echo "fm$n-$(date +%s%N | cut -c8-14)"; }
pid_of() { sed -n "s/^fsgd: $1 pid //p" "$2" | tail -n 1; }
wait_ckpt() { for _ in $(seq 1200); do [ -f "$1.shard1.prev" ] && return 0; sleep 0.1; done; return 1; }
result() { # LABEL STATUSES JSON [LOG: what fsgd run said of the fault]
    $PY - "$1" "$2" "$3" "$tmp/ok.json" "$(grep -h -o -e 'killed by signal 9; [a-z]* [a-z]*' -e 'resuming from checkpoint [^ ]* (--resume, step [0-9]*)' -e 'write failed: [A-Za-z ]*' "${@:4}" 2>/dev/null | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')" <<'PY'
import json, sys
label, st, path, okp, said = sys.argv[1:]
try:
    k, ok = json.load(open(path)), json.load(open(okp))
    rows, want = k["rows_applied"], 2 * k["dataset_rows"]
    auc, ref = k["test"]["auc"], ok["test"]["auc"]
    good = rows == want and abs(auc - ref) < 0.005
    print("| %-34s | %-10s | %d / %d | %.6f (%+.4f) | %s | %s |" % (label, st, rows, want, auc, auc - ref, "ok" if good else "FAIL", said))
except Exception as e:
    print("| %-34s | %-10s | no metrics (%s) | | FAIL |" % (label, st, e))
PY
    [ -f "$3" ] || for f in "$tmp"/*.log "$tmp"/*.log.*; do [ -f "$f" ] && { echo "--- $f"; grep -v "epoch [0-9]*/" "$f" | tail -n 4; }; done
}
j=$(name)
"$FSGD" run "${args[@]}" --name "$j" --metrics-json "$tmp/ok.json" >"$tmp/ok.log" 2>&1
echo "| fault | status | rows applied / epochs x rows | test AUC (vs fault-free) | | fsgd run said |"
echo "|---|---|---|---|---|---|"
result "none (fault-free)" "$?" "$tmp/ok.json"

# kill -9 of a process: fsgd run restarts the shards (or goes on without the
# worker); SIGTERM of a worker: it leaves, the job goes on with the other
for fault in "KILL aggregator" "KILL aggregator shard 1" "KILL worker 1" "TERM worker 1"; do
    sig=${fault%% *} victim=${fault#* }
    j=$(name)
    rm -f "$tmp"/k.ckpt*
    "$FSGD" run "${args[@]}" --name "$j" --checkpoint "$tmp/k.ckpt" --metrics-json "$tmp/k.json" >"$tmp/k.log" 2>&1 &
    rp=$!
    wait_ckpt "$tmp/k.ckpt"
    kill -"$sig" "$(pid_of "$victim" "$tmp/k.log")"
    wait "$rp"
    result "$([ "$sig" = KILL ] && echo "kill -9" || echo SIGTERM) $victim" "$?" "$tmp/k.json" "$tmp/k.log"
done

# a stop on purpose, then --resume
for how in "SIGTERM fsgd run" "SIGTERM aggregator" "SIGTERM aggregator shard 1"; do
    j=$(name)
    rm -f "$tmp"/t.ckpt*
    "$FSGD" run "${args[@]}" --name "$j" --checkpoint "$tmp/t.ckpt" >"$tmp/t.log" 2>&1 &
    rp=$!
    wait_ckpt "$tmp/t.ckpt"
    if [ "$how" = "SIGTERM fsgd run" ]; then kill -TERM "$rp"; else kill -TERM "$(pid_of "${how#SIGTERM }" "$tmp/t.log")"; fi
    wait "$rp"
    s1=$?
    "$FSGD" run "${args[@]}" --name "$j" --checkpoint "$tmp/t.ckpt" --resume --metrics-json "$tmp/t.json" >"$tmp/r.log" 2>&1
    result "$how, --resume" "$s1, $?" "$tmp/t.json" "$tmp/r.log"
done

# the checkpoint's file system full, then --resume once space is freed
if unshare -rm true 2>/dev/null; then
    j=$(name)
    unshare -rm bash -c '
        set -u; mnt=$1; shift; json=$1; shift; log=$1; shift
        mkdir -p "$mnt" && mount -t tmpfs -o size=64k tmpfs "$mnt" || exit 99
        "$@" --checkpoint "$mnt/d.ckpt" >"$log.1" 2>&1 &
        rp=$!
        for _ in $(seq 6000); do [ -f "$mnt/d.ckpt.shard1" ] && [ -f "$mnt/d.ckpt" ] && break; sleep 0.01; done
        dd if=/dev/zero of="$mnt/fill" bs=1k status=none 2>/dev/null
        wait $rp; s1=$?
        rm -f "$mnt/fill"
        "$@" --checkpoint "$mnt/d.ckpt" --resume --metrics-json "$json" >"$log.2" 2>&1; s2=$?
        echo "$s1, $s2" >"$log.st"' _ "$tmp/mnt" "$tmp/d.json" "$tmp/d.log" "$FSGD" run "${args[@]}" --name "$j"
    result "disk full under the checkpoint, --resume" "$(cat "$tmp/d.log.st" 2>/dev/null)" "$tmp/d.json" \
        "$tmp/d.log.1" "$tmp/d.log.2"
fi
