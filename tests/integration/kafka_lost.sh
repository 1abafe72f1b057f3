#!/usr/bin/env bash
# Data lost by the broker is detected, never trained on.
#   mock: more than 5 MiB into one partition of the embedded cluster (which
#         silently drops the oldest) makes the producer fail with "data
#         lost"; fsgd run refuses a partition count too small for the file up
#         front; an aggregator on a topic whose log start moved stops with a
#         clear error.
#   real: Kafka drops data by retention (or kafka-delete-records), never by a
#         size limit, so the producer-side cases do not arise; the log start
#         of one partition of NAME.data is moved past 0 with
#         DeleteRecords after loading, and the aggregator stops with "data
#         lost" instead of training on a partial epoch.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
if [ "$KAFKA_MODE" = real ]; then
    name=$(job_name lost)
    kafka_cluster "$name" 2
    head -n 2000 "$DATA/a9a" >"$tmp/rows"
    # one row a message (text, as an outside client writes): 1000 offsets a
    # partition, of which DeleteRecords takes the first 100
    "$FSGD" produce --brokers "$brokers" --name "$name" --block-rows 1 --quiet "$tmp/rows"
    "$BROKER_SH" delete-records "$brokers" "$name.data" 1 100
    if "$FSGD" aggregator --brokers "$brokers" --name "$name" --workers 1 >"$tmp/a.log" 2>&1; then
        echo "aggregator trained on a partial topic"; exit 1
    fi
    grep "data lost" "$tmp/a.log"
    echo "mock-only parts not run here: the producer's 5 MiB loss check and the partition count check are about the embedded cluster's size limit"
    exit 0
fi
# ~22 MB of rows with random values: 11 MB as row blocks (4 bytes a value),
# which lz4 cannot squeeze under 5 MiB
awk 'BEGIN{srand(7); for (r = 0; r < 150000; r++) { l = (r % 2) ? "+1" : "-1";
    for (k = 1; k <= 12; k++) l = l " " (k * 9 + int(rand() * 9)) ":" rand(); print l } }' >"$tmp/big"
if "$FSGD" run --data "$tmp/big" --partitions 1 --workers 1 >"$tmp/r.log" 2>&1; then
    echo "run accepted 22 MB in one partition"; exit 1
fi
grep "needs at least" "$tmp/r.log"
kafka_cluster lost 1
if "$FSGD" produce --brokers "$brokers" --name lost --data "$tmp/big" >"$tmp/p.log" 2>&1; then
    echo "producer did not notice the dropped data"; cat "$tmp/p.log"; exit 1
fi
grep "data lost" "$tmp/p.log"
if "$FSGD" aggregator --brokers "$brokers" --name lost --workers 1 >"$tmp/a.log" 2>&1; then
    echo "aggregator trained on a partial topic"; exit 1
fi
grep "data lost" "$tmp/a.log"
