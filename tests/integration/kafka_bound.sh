#!/usr/bin/env bash
# Messages are bound to their job and place (issue 42, items 9 and 11): two
# jobs on one cluster share a key file. A copy of job A's final snapshot
# (its tag travels in the frame: no key needed to copy it) put into job B's
# model topic is not assembled as B's model; a row message of job C copied
# into another partition of C.data (its tag covers the partition) is not
# trained: with skip_bad it is skipped and counted, the dataset is the rows
# produced once. Replays inside a job are refused too (the tag's nonce is
# its sender's incarnation and sequence): B's opening snapshot copied to
# the end of B.model does not take B's assembled model back, and C's row
# message copied back into its own partition is trained once. On the
# embedded cluster (a broker-only run) or a real one.
# real-kafka: cluster
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR
needs_cmd kcat
a=$(job_name bdA) b=$(job_name bdB) c=$(job_name bdC)
kafka_cluster "$a" 2
K=(--job-key-file "$FSGD_JOB_KEY")
head -n 2000 "$DATA/a9a" >"$tmp/rows"
for j in "$a" "$b"; do
    "$FSGD" produce --brokers "$brokers" --name "$j" --partitions 2 --quiet "$tmp/rows" "${K[@]}"
done
"$FSGD" run --no-produce --brokers "$brokers" --name "$b" --workers 1 --epochs 3 --batch 64 "${K[@]}" \
    --out "$tmp/b.fsgd" >"$tmp/b.log" 2>&1 || { tail "$tmp/b.log"; exit 1; }
sleep 1 # A's generation (unix seconds) newer than B's: the one assemble would take
"$FSGD" run --no-produce --brokers "$brokers" --name "$a" --workers 1 --epochs 1 --batch 64 "${K[@]}" \
    --out "$tmp/a.fsgd" >"$tmp/a.log" 2>&1 || { tail "$tmp/a.log"; exit 1; }
cmp -s "$tmp/a.fsgd" "$tmp/b.fsgd" && { echo "FAIL: jobs A and B trained the same model"; exit 1; }

# A's last model message (its final snapshot; a frame carries its tag after
# its CRC), copied into B.model
kcat -C -b "$brokers" -t "$a.model" -p 0 -o -1 -c 1 -e -q -f '%s' >"$tmp/final"
kcat -P -b "$brokers" -t "$b.model" -p 0 -k snapshot.0 "$tmp/final"
rc=0
"$FSGD" model assemble --brokers "$brokers" --name "$b" "${K[@]}" --out "$tmp/asm.fsgd" >"$tmp/asm.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$tmp/asm.log"; echo "FAIL: assemble of B after the copy: status $rc"; exit 1; }
cmp -s "$tmp/asm.fsgd" "$tmp/a.fsgd" && { cat "$tmp/asm.log"; echo "FAIL: job B's model assembled as job A's"; exit 1; }
cmp "$tmp/asm.fsgd" "$tmp/b.fsgd" || { cat "$tmp/asm.log"; echo "FAIL: job B's model is not what B wrote"; exit 1; }
grep -q "skipped 1 messages without this job key's tag" "$tmp/asm.log" ||
    { cat "$tmp/asm.log"; echo "FAIL: the copied snapshot was not counted"; exit 1; }
echo "PASS: job A's final snapshot copied into $b.model: skipped, B's own model assembled"

# B's own opening snapshot (step 0, its first message) copied to the end of B.model
kcat_replay "$b.model" 0 0
rc=0
"$FSGD" model assemble --brokers "$brokers" --name "$b" "${K[@]}" --out "$tmp/asm2.fsgd" >"$tmp/asm2.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$tmp/asm2.log"; echo "FAIL: assemble of B after its replayed snapshot: status $rc"; exit 1; }
cmp "$tmp/asm2.fsgd" "$tmp/b.fsgd" || { cat "$tmp/asm2.log"; echo "FAIL: B's replayed snapshot took its model back"; exit 1; }
grep -q "and 1 replayed ones" "$tmp/asm2.log" || { cat "$tmp/asm2.log"; echo "FAIL: the replay was not counted"; exit 1; }
echo "PASS: B's opening snapshot replayed at the end of $b.model: skipped, B's final model assembled"

# a row message of C copied from partition 0 into partition 1
"$FSGD" produce --brokers "$brokers" --name "$c" --partitions 2 --quiet "$tmp/rows" "${K[@]}"
kcat -C -b "$brokers" -t "$c.data" -p 0 -o 0 -c 1 -e -q -f '%s' >"$tmp/row0"
mac=$(kcat -C -b "$brokers" -t "$c.data" -p 0 -o 0 -c 1 -e -q -f '%h' | sed -n 's/.*fsgd\.mac=\([0-9a-f]*\).*/\1/p')
[ ${#mac} = 64 ] || { echo "FAIL: no fsgd.mac header on $c.data"; exit 1; }
kcat -P -b "$brokers" -t "$c.data" -p 1 -H "fsgd.mac=$mac" "$tmp/row0"
kcat_replay "$c.data" 0 0 # and back into its own partition: a replay, whatever skip_bad says
rc=0
"$FSGD" run --no-produce --brokers "$brokers" --name "$c" --workers 1 --epochs 1 --batch 64 "${K[@]}" --skip-bad \
    --metrics-json "$tmp/c.json" >"$tmp/c.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || { tail "$tmp/c.log"; echo "FAIL: job C: status $rc"; exit 1; }
rows=$(json_get "$tmp/c.json" dataset_rows)
[ "$rows" = 2000 ] || { grep -i skip "$tmp/c.log" | head -3; echo "FAIL: job C trained $rows rows, not the 2000 produced"; exit 1; }
grep -q "partition 1 offset [0-9]*: a row whose tag is not this job key's" "$tmp/c.log" ||
    { grep -i skip "$tmp/c.log" | head; echo "FAIL: the copied row was not named"; exit 1; }
grep -q "rejected a message on $c.data: replayed: partition 0 offset [0-9]*: a copy of a row message" "$tmp/c.log" ||
    { grep -i replay "$tmp/c.log" | head; echo "FAIL: the replayed row was not named"; exit 1; }
echo "PASS: a row copied into another partition: skipped and counted; one copied into its own: a replay; $rows rows trained"
echo "ok: kafka_bound"
