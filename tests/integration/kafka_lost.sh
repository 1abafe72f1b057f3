#!/usr/bin/env bash
# Data lost by the broker is detected, never trained on: more than 5 MiB into
# one partition of the embedded cluster (which silently drops the oldest) makes
# the producer fail with "data lost"; fsgd run refuses a partition count too
# small for the file up front; an aggregator on a topic whose log start moved
# stops with a clear error.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
# ~12 MB of rows with random values (lz4 cannot squeeze them under 5 MiB)
awk 'BEGIN{srand(7); for (r = 0; r < 60000; r++) { l = (r % 2) ? "+1" : "-1";
    for (k = 1; k <= 12; k++) l = l " " (k * 9 + int(rand() * 9)) ":" rand(); print l } }' >"$tmp/big"
if "$FSGD" run --data "$tmp/big" --partitions 1 --workers 1 >"$tmp/r.log" 2>&1; then
    echo "run accepted 12 MB in one partition"; exit 1
fi
grep "needs at least" "$tmp/r.log"
"$FSGD" run --broker-only --name lost --partitions 1 >"$tmp/broker.log" 2>&1 &
BROKER_PID=$!
trap 'kill $BROKER_PID 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do grep -q '^brokers=' "$tmp/broker.log" && break; sleep 0.1; done
brokers=$(sed -n 's/^brokers=//p' "$tmp/broker.log")
if "$FSGD" produce --brokers "$brokers" --name lost --data "$tmp/big" >"$tmp/p.log" 2>&1; then
    echo "producer did not notice the dropped data"; cat "$tmp/p.log"; exit 1
fi
grep "data lost" "$tmp/p.log"
if "$FSGD" aggregator --brokers "$brokers" --name lost --workers 1 >"$tmp/a.log" 2>&1; then
    echo "aggregator trained on a partial topic"; exit 1
fi
grep "data lost" "$tmp/a.log"
