#!/usr/bin/env bash
# A worker that is waiting when the data arrives (fsgd run starts its workers
# before it writes NAME.data) reads its partitions as the rows come and to
# their end once the producer's data_summary is on NAME.ctl, while the
# aggregator is not there yet: without the model's shape (an intercept's slot,
# the dimension unchecked), finished at step 1 ("read 4 partitions of
# NAME.data ahead of the first model"). The model is the one of a job whose
# worker came after the data (it sees no data_summary, says nothing of reading
# ahead): byte for byte, one worker in lockstep (staleness 0). Real brokers
# only: on the embedded cluster a worker reads nothing ahead.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
head -n 8000 "$DATA/a9a" >"$tmp/rows"
WPID=
trap 'kill ${WPID:-} 2>/dev/null || true; cleanup' EXIT
job=(--test "$DATA/a9a.t" --staleness 0 --epochs 2 --batch 128 --lr 0.01 --job-key-file "$FSGD_JOB_KEY" --quiet)
# 1: the worker waits, with its partitions, for the data
ahead=$(job_name ahead)
kafka_cluster "$ahead" 4
"$FSGD" worker --brokers "$brokers" --name "$ahead" --id 1 "${job[@]}" >"$tmp/w_ahead.log" 2>&1 &
WPID=$!
for _ in $(seq 300); do
    kcat -C -b "$brokers" -t "$ahead.ctl" -o beginning -e -q 2>/dev/null | grep -q '"worker_assignment".*"partitions": \[0' && break
    sleep 0.1
done
"$FSGD" produce --brokers "$brokers" --name "$ahead" --batch 128 --quiet "$tmp/rows" --job-key-file "$FSGD_JOB_KEY"
if [ "$KAFKA_MODE" = real ]; then
    for _ in $(seq 300); do grep -q "ahead of the first model" "$tmp/w_ahead.log" && break; sleep 0.1; done
    grep "read 4 partitions of $ahead.data ahead of the first model" "$tmp/w_ahead.log" ||
        { echo "the waiting worker did not read ahead"; cat "$tmp/w_ahead.log"; exit 1; }
else
    sleep 1 # (the embedded cluster's partitions are read at step 1: slow there, 70-100 ms each)
fi
"$FSGD" aggregator --brokers "$brokers" --name "$ahead" --workers 1 "${job[@]}" --out "$tmp/ahead.fsgd" \
    >"$tmp/a_ahead.log" 2>&1 || { cat "$tmp/a_ahead.log"; exit 1; }
wait "$WPID" || { echo "worker failed"; cat "$tmp/w_ahead.log"; exit 1; }
WPID=
kafka_cluster_stop
# 2: the data first, then the worker
late=$(job_name late)
kafka_cluster "$late" 4
"$FSGD" produce --brokers "$brokers" --name "$late" --batch 128 --quiet "$tmp/rows" --job-key-file "$FSGD_JOB_KEY"
"$FSGD" worker --brokers "$brokers" --name "$late" --id 1 "${job[@]}" >"$tmp/w_late.log" 2>&1 &
WPID=$!
"$FSGD" aggregator --brokers "$brokers" --name "$late" --workers 1 "${job[@]}" --out "$tmp/late.fsgd" \
    >"$tmp/a_late.log" 2>&1 || { cat "$tmp/a_late.log"; exit 1; }
wait "$WPID" || { echo "worker failed"; cat "$tmp/w_late.log"; exit 1; }
WPID=
grep -q "ahead of the first model" "$tmp/w_late.log" && { echo "the late worker read ahead"; exit 1; }
[ "$KAFKA_MODE" = real ] || ! grep -q "ahead of the first model" "$tmp/w_ahead.log" ||
    { echo "a worker read ahead on the embedded cluster"; exit 1; }
cmp "$tmp/ahead.fsgd" "$tmp/late.fsgd"
echo "the same model, byte for byte, with and without reading ahead"
