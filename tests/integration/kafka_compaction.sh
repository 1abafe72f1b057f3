#!/usr/bin/env bash
# NAME.model is compacted (KAFKA_FORMAT.md, "Topic settings"): snapshot chunk i
# has key snapshot.i and a delta chunk of step s key delta.(s mod
# snapshot_every).i, so compaction keeps the newest snapshot whole plus the
# deltas after it. A job with snapshots every 10 steps runs on a model topic
# whose segments roll every 100 ms (so the log cleaner has closed segments to
# work on); once the cleaner has removed messages, `fsgd model assemble`
# (a reader joining after the job) still rebuilds the model byte for byte.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
real_only "the embedded cluster has no log compaction"
command -v kcat >/dev/null || { echo "kcat not installed"; exit 1; }
name=$(job_name cmp)
kafka_cluster "$name" 4
# the test only: segments that roll at once, cleaned as soon as possible
"$BROKER_SH" alter-topic "$brokers" "$name.model" \
    "segment.ms=100,min.cleanable.dirty.ratio=0.01,min.compaction.lag.ms=0"
head -n 8000 "$DATA/a9a" >"$tmp/rows"
"$FSGD" produce --brokers "$brokers" --name "$name" --batch 128 --quiet "$tmp/rows" --job-key-file "$FSGD_JOB_KEY"
"$FSGD" run --no-produce --brokers "$brokers" --name "$name" --workers 2 --test "$DATA/a9a.t" --batch 128 \
    --epochs 2 --snapshot-every 10 --out "$tmp/model.fsgd" --metrics-json "$tmp/m.json" \
    --job-key-file "$FSGD_JOB_KEY" >"$tmp/run.log" 2>&1 ||
    { cat "$tmp/run.log"; exit 1; }
count() { kcat -C -b "$brokers" -t "$name.model" -o beginning -e -q -f 'x\n' | wc -l; }
# messages written = the last offset + 1 (offsets start at 0 and compaction
# keeps the last message); the cleaner may already have run during the job
written=$(($(kcat -C -b "$brokers" -t "$name.model" -o -1 -c 1 -e -q -f '%o\n') + 1))
echo "model topic: $written messages written ($(json_get "$tmp/m.json" steps) steps)"
n=$written
for _ in $(seq 120); do
    n=$(count)
    [ "$n" -lt "$written" ] && break
    sleep 0.5
done
echo "left after compaction: $n messages"
[ "$n" -lt "$written" ] || { echo "the log cleaner removed nothing in 60 s"; exit 1; }
"$FSGD" model assemble --brokers "$brokers" --name "$name" --out "$tmp/late.fsgd" --job-key-file "$FSGD_JOB_KEY"
cmp "$tmp/model.fsgd" "$tmp/late.fsgd"
echo "a reader after compaction rebuilds the final model byte for byte"
