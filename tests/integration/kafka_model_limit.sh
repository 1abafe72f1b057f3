#!/usr/bin/env bash
# A model too big for the embedded cluster's single-partition model topic
# fails at once with a message naming the limit and what to do: from --dim
# before anything starts, and from the data's own dimension after the scan.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
