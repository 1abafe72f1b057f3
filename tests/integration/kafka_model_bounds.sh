#!/usr/bin/env bash
# A model message whose step state claims offsets the data topic does not
# hold (issue 12, finding 8): a worker used to allocate one slot per claimed
# offset (end - start + 1) before reading anything. Now it compares the
# claim with the topic's watermarks first and stops with an error naming the
# partition and both ranges -- under a 2 GiB address space limit, where the
# table for 2^40 offsets could never be allocated. And a forged FINAL
# snapshot in a job without a key (anyone may write one there): 148 bytes,
# sparse, declaring 2^30 weights and holding none. The worker takes it (it
# cannot tell it from the aggregator's) but the memory it touches follows
# the bytes present: peak RSS far below the 4 GB of the declared shape (it
# used to write the dense zeros: 4.2 GB; issue 42).
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
echo "PASS: a step state claiming 2^40 offsets refused before any allocation"

if [ -x /usr/bin/time ]; then
    "$FSGD" produce --brokers "$brokers" --name mf --partitions 2 --block-rows 1 --quiet "$tmp/rows"
    $PY - "$(dirname "$0")/lib" "$tmp/final" <<'PYEOF'
import struct, sys
sys.path.insert(0, sys.argv[1])
import frames
# step state of 2 partitions, kind 1, has_bias | SPARSE, dim 2^30, n, 0 pairs; flag FINAL, unsigned
body = frames.state(2, 10) + struct.pack("<IIfQQQ", 1, 1 | 2, 0.0, 1 << 30, (1 << 30) + 1, 0)
open(sys.argv[2], "wb").write(frames.frame(3, 7, 0, 5, 0, 1, body, 1))
PYEOF
    kcat -P -b "$brokers" -t mf.model -p 0 -k snapshot.0 "$tmp/final"
    rc=0
    /usr/bin/time -f '%M' -o "$tmp/w2.rss" timeout 60 "$FSGD" worker --brokers "$brokers" --name mf --id 1 --quiet \
        >"$tmp/w2.log" 2>&1 || rc=$?
    kb=$(tail -1 "$tmp/w2.rss")
    # 0: the final model ends the worker; 70 "out of memory": a system that
    # does not overcommit refused the declared shape's (untouched) allocation
    [ $rc -eq 0 ] || { [ $rc -eq 70 ] && grep -q "out of memory" "$tmp/w2.log"; } ||
        { cat "$tmp/w2.log"; echo "FAIL: worker on a forged FINAL snapshot: status $rc"; exit 1; }
    # (AddressSanitizer's bookkeeping of a 4 GB allocation costs ~1 GB of
    # its own; the dense write was 4 GB more)
    bound=1048576
    grep -q libasan "$tmp/ldd.txt" && bound=2097152
    [ "$kb" -lt $bound ] || { cat "$tmp/w2.log"; echo "FAIL: peak RSS $kb KB on a $(stat -c %s "$tmp/final")-byte snapshot"; exit 1; }
    echo "PASS: a forged FINAL snapshot declaring 2^30 weights ($(stat -c %s "$tmp/final") bytes): worker status $rc, peak RSS $((kb / 1024)) MB"

    # A worker that holds the job's model (123 features) meets a forged
    # snapshot of another shape (2^30), then the job's final one: the
    # forgery is not taken (counted, named), the worker goes on and ends on
    # the final model with status 0 (it used to exit: "model shape changed")
    "$FSGD" produce --brokers "$brokers" --name ms --partitions 2 --block-rows 1 --quiet "$tmp/rows"
    $PY - "$(dirname "$0")/lib" "$tmp/ms" <<'PYEOF'
import struct, sys
sys.path.insert(0, sys.argv[1])
import frames
def snap(step, dim, flags):
    body = frames.state(2, 10) + struct.pack("<IIfQQQ", 1, 1 | 2, 0.0, dim, dim + 1, 0)
    return frames.frame(3, 7, 0, step, 0, 1, body, flags)
for i, (step, dim, flags) in enumerate([(0, 123, 0), (1, 1 << 30, 0), (2, 123, 1)]):
    open("%s.%d" % (sys.argv[2], i), "wb").write(snap(step, dim, flags))
PYEOF
    for i in 0 1 2; do kcat -P -b "$brokers" -t ms.model -p 0 -k snapshot.$i "$tmp/ms.$i"; done
    rc=0
    timeout 60 "$FSGD" worker --brokers "$brokers" --name ms --id 1 >"$tmp/w3.log" 2>&1 || rc=$?
    [ $rc -eq 0 ] && grep -q "a snapshot of a model of 1073741825 weights (loss 1); this job's has 124 (loss 1): not taken" \
        "$tmp/w3.log" || { cat "$tmp/w3.log"; echo "FAIL: a forged snapshot of another shape: worker status $rc"; exit 1; }
    echo "PASS: a forged snapshot of another shape not taken; the worker ended on the final model"
else
    echo "(no /usr/bin/time: the forged FINAL snapshot's peak RSS is not measured)"
fi
