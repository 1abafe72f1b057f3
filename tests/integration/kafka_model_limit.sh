#!/usr/bin/env bash
# A model too big for the embedded cluster's single-partition model topic
# fails at once with a message naming the limit and what to do: from --dim
# before anything starts, and from the data's own dimension after the scan.
#
# On a real broker (FSGD_KAFKA=real) there is no such limit: the same 2^24
# model (64 MiB snapshots, 128 chunks) trains through `fsgd run --brokers`,
# applying every row once.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "${FSGD_KAFKA:-mock}" = real ]; then
    "$FSGD" gen --rows 3000 --dim 16777216 --nnz 20 --seed 3 --out "$tmp/big.svm" >/dev/null
    name=limit-$(date +%s%N | cut -c8-16)-$$
    "$FSGD" run --brokers "$FSGD_BROKERS" --name "$name" --data "$tmp/big.svm" --dim 16777216 --workers 2 \
        --epochs 1 --batch 500 --metrics-json "$tmp/m.json" >"$tmp/r.log" 2>&1 || { cat "$tmp/r.log"; exit 1; }
    /usr/bin/python3 - "$tmp/m.json" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
print("2^24 weights on real Kafka: rows per epoch %s (dataset %d), model published %d B" %
      (m["rows_per_epoch"], m["dataset_rows"], m["bytes"]["model_published"]))
assert m["dim"] == 16777216 and m["rows_per_epoch"] == [m["dataset_rows"]] == [3000]
PYEOF
    exit 0
fi
rc=0
"$FSGD" run --data data/sets/a9a --dim 16777216 --workers 2 >"$tmp/a.log" 2>&1 || rc=$?
cat "$tmp/a.log"
[ "$rc" -ne 0 ] && grep -q 'model of 16777217 weights needs 64.0 MiB snapshots.*--brokers' "$tmp/a.log"
"$FSGD" gen --rows 3000 --dim 16777216 --nnz 20 --seed 3 --out "$tmp/big.svm" >/dev/null
rc=0
timeout 120 "$FSGD" run --data "$tmp/big.svm" --workers 2 --epochs 1 >"$tmp/b.log" 2>&1 || rc=$?
tail -3 "$tmp/b.log"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q 'holds at most 1100000 weights.*--brokers' "$tmp/b.log"
echo "ok: both refused with the limit named"
