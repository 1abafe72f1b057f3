#!/usr/bin/env bash
# Lesser things a user meets (issue 42, item 16): a job key file saved with
# a Windows line end (CRLF) is read; a sharded run's aggregator shard 1 names
# the files it wrote (its metrics JSON, METRICS.shard1) and no model it did
# not write; --resume on a real cluster asks for the job's key up front.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$FSGD" gen --rows 400 --dim 30 --nnz 4 --seed 5 --quiet --out "$tmp/d.svm"

# a CRLF key file
printf '%s\r\n' 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f >"$tmp/k.key"
chmod 600 "$tmp/k.key"
rc=0
"$FSGD" run --data "$tmp/d.svm" --epochs 1 --name lesser --job-key-file "$tmp/k.key" >"$tmp/k.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "a CRLF key file: status $rc: $(grep -i key "$tmp/k.log" | tail -2)"
echo "PASS: a CRLF job key file is read"

# shard 1 names its own files only
rc=0
"$FSGD" run --data "$tmp/d.svm" --epochs 1 --shards 2 --name lesser2 --out "$tmp/o.fsgd" \
    --metrics-json "$tmp/o.json" >"$tmp/s.log" 2>/dev/null || rc=$?
[ "$rc" = 0 ] || fail "the sharded run: status $rc"
[ "$(grep -c '^model: ' "$tmp/s.log")" = 1 ] || fail "model lines: $(grep '^model: ' "$tmp/s.log")"
grep -q "^metrics: $tmp/o.json.shard1\$" "$tmp/s.log" || fail "shard 1's metrics line: $(grep '^metrics' "$tmp/s.log")"
for f in o.fsgd o.json o.json.shard1; do [ -f "$tmp/$f" ] || fail "$f was not written"; done
echo "PASS: each shard names the files it wrote"
# --resume on a real cluster without the job's key: the rows its first run
# signed cannot be checked with a new key (the job used to stop with exit 3
# after starting); said before anything starts, exit 2
printf 'FSGDCKPT' >"$tmp/r.ckpt"
rc=0
"$FSGD" run --brokers 127.0.0.1:1 --name lesser3 --data "$tmp/d.svm" --epochs 1 --checkpoint "$tmp/r.ckpt" --resume \
    >"$tmp/r.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "resume on a real cluster needs the job's key" "$tmp/r.log" ||
    fail "--resume on a real cluster without a key: status $rc: $(cat "$tmp/r.log")"
echo "PASS: --resume on a real cluster without the job's key is refused before it starts"
echo "ok: run_lesser"
