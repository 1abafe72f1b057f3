#!/usr/bin/env bash
# A job name reused on the same brokers (issue 12, finding 5): the second
# job used to fail after 12.5 s with no explanation (its workers took the
# first job's final model for their own end: "done: 0 steps"). Now fsgd run
# refuses at once, naming the topics and what they hold, and a standalone
# aggregator refuses a model topic that ends with a finished job's model.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
"$FSGD" run --broker-only --name ru --partitions 6 >"$tmp/broker.log" 2>&1 &
BROKER_PID=$!
trap 'kill $BROKER_PID 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do grep -q '^brokers=' "$tmp/broker.log" && break; sleep 0.1; done
brokers=$(sed -n 's/^brokers=//p' "$tmp/broker.log")
head -n 4000 "$DATA/a9a" >"$tmp/rows"
"$FSGD" produce --brokers "$brokers" --name ru --batch 128 --quiet "$tmp/rows"
args=(--no-produce --brokers "$brokers" --name ru --test "$DATA/a9a.t" --workers 2 --epochs 1 --batch 128 --quiet)
"$FSGD" run "${args[@]}" >"$tmp/first.log" 2>&1 || { cat "$tmp/first.log"; exit 1; }
echo "first job done"
rc=0
"$FSGD" run "${args[@]}" >"$tmp/second.log" 2>&1 || rc=$?
cat "$tmp/second.log"
[ $rc -eq 2 ]
grep -q "run: job name 'ru' was used before on these brokers: ru.model holds [0-9]* messages" "$tmp/second.log"
grep -q "choose a new --name" "$tmp/second.log"
grep -q "aggregator pid" "$tmp/second.log" && { echo "processes were started"; exit 1; }
# the aggregator on its own (a deployment without fsgd run) says the same
rc=0
"$FSGD" aggregator --brokers "$brokers" --name ru --workers 1 --epochs 1 --quiet >"$tmp/agg.log" 2>&1 || rc=$?
cat "$tmp/agg.log"
[ $rc -eq 2 ]
grep -q "job name 'ru' is taken: ru.model ends with the final model of a finished job" "$tmp/agg.log"
