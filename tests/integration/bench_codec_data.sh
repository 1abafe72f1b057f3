#!/usr/bin/env bash
# Issue 40 item 10: `bin/fsgd bench codec`, a README command, failed after
# `make run` (cannot open 'build/datasets/a9a': make run never unpacked the
# data sets), after running 48 s. make run now unpacks them (make data), and
# bench codec checks every data set before it measures anything, naming
# `make data` when one is missing.
set -euo pipefail
# real-kafka: skip
cd "$(dirname "$0")/../.."
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

rc=0; timeout 20 "$FSGD" bench codec --data-dir "$tmp/none" >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 74 ] || fail "bench codec without its data sets exited $rc, not 74: $(cat "$tmp/err")"
grep -q "make data" "$tmp/err" || fail "bench codec did not say how to get the data sets: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "bench codec measured something before finding a data set missing: $(head -3 "$tmp/out")"
# make run unpacks the data sets (a build folder of its own: the rule, not its stamp, is checked)
command -v make >/dev/null || { echo "skipped: no make"; exit 77; }
make -n run CUDA=0 BUILD="$tmp/build" BIN="$tmp/bin" >"$tmp/make-n" 2>&1 || true
grep -q 'scripts/unpack-data.sh' "$tmp/make-n" || fail "make run does not unpack the data sets (make data)"
echo "ok: make run unpacks the data sets; bench codec says at once when one is missing"
