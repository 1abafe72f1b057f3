#!/usr/bin/env bash
# A model message whose step state claims offsets the data topic does not
# hold (issue 12, finding 8): a worker used to allocate one slot per claimed
# offset (end - start + 1) before reading anything. Now it compares the
# claim with the topic's watermarks first and stops with an error naming the
# partition and both ranges -- under a 2 GiB address space limit, where the
# table for 2^40 offsets could never be allocated.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
FRAMES="$PY $(dirname "$0")/lib/frames.py"
needs_cmd kcat
"$FSGD" run --broker-only --name mb --partitions 2 >"$tmp/broker.log" 2>&1 &
BROKER_PID=$!
trap 'kill $BROKER_PID 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do grep -q '^brokers=' "$tmp/broker.log" && break; sleep 0.1; done
brokers=$(sed -n 's/^brokers=//p' "$tmp/broker.log")
head -n 500 "$DATA/a9a" >"$tmp/rows"
# one row a message: the topic holds offsets [0, 250) in each partition
"$FSGD" produce --brokers "$brokers" --name mb --block-rows 1 --quiet "$tmp/rows" --job-key-file "$FSGD_JOB_KEY"
$FRAMES snapshot "$tmp/snap" --job mb --gen 7 --step 0 --parts 2 --end $((1 << 40)) --dim 123
kcat -P -b "$brokers" -t mb.model -k 0 "$tmp/snap"
rc=0
# (AddressSanitizer reserves terabytes of shadow memory: no limit there; it
# fails a huge allocation by itself)
limit=2097152
ldd "$FSGD" >"$tmp/ldd.txt" 2>&1 || true
grep -q libasan "$tmp/ldd.txt" && limit=unlimited
(ulimit -v $limit; exec timeout 120 "$FSGD" worker --brokers "$brokers" --name mb --id 1 --quiet \
    --job-key-file "$FSGD_JOB_KEY") >"$tmp/w.log" 2>&1 || rc=$?
cat "$tmp/w.log"
[ $rc -eq 3 ]
grep -q "model message of step 0 says mb.data \[[01]\] holds offsets \[0, 1099511627776), but the topic holds \[0, 250)" "$tmp/w.log"
