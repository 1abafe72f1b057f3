#!/usr/bin/env bash
# Corrupt messages in NAME.grads, written with kcat mid-run (random bytes, and
# a frame with a flipped body byte): rejected and counted, the job finishes.
set -euo pipefail
# real-kafka: cluster
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
name=$(job_name cj)
# steps of 32 rows in lockstep (staleness 0): the job is still running when
# kcat's messages come (at 128 rows and the default staleness it could end
# first: CI failed so under ASan)
start_run "$tmp/run.log" --workers 3 --batch 32 --staleness 0 --name "$name" --metrics-json "$tmp/m.json"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 40 || { cat "$tmp/run.log"; exit 1; }
brokers=$(run_brokers "$tmp/run.log")
# 1: random bytes
head -c 300 /dev/urandom >"$tmp/junk1"
# 2: a real gradient frame taken from the topic, one body byte flipped
kcat -C -b "$brokers" -t "$name.grads" -o beginning -c 1 -e -f '%s' >"$tmp/frame" 2>/dev/null
"$PY" -c 'import sys
b=bytearray(open(sys.argv[1],"rb").read()); b[40]^=0xff; open(sys.argv[2],"wb").write(b)' "$tmp/frame" "$tmp/junk2"
for f in junk1 junk2; do
    kcat -P -b "$brokers" -t "$name.grads" -H "fsgd.job=$name" -H fsgd.step=1 "$tmp/$f"
done
finish_run "$tmp/run.log"
COMMON+=(--batch 32)
ref=$(reference_auc)
check_metrics "$tmp/m.json" "$ref" 0.005
bad=$(json_get "$tmp/m.json" messages.corrupt_rejected)
echo "corrupt rejected: $bad"
[ "$bad" -ge 2 ]
