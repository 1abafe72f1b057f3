#!/usr/bin/env bash
# Runs every unit test binary, replays every fuzz corpus, runs every
# integration script, and prints one "N passed, N failed, N skipped" line at
# the end. A test that cannot run here (no GPU, no data set, no clang) is
# skipped, never counted as passed: unit tests report skips in their
# "fsgd-test: NAME: P passed, F failed, S skipped" line, integration scripts
# exit with status 77 (as automake's test driver reads it).
set -u
BUILD=${BUILD:-build}
export FSGD=${FSGD:-bin/fsgd}
export FSGD_DATA=${FSGD_DATA:-$(cd "$(dirname "$0")/.." && pwd)/../shared/data}
passed=0 failed=0 skipped=0 failures=()
logdir=$(mktemp -d); trap 'rm -rf "$logdir"' EXIT
[ -d "$FSGD_DATA" ] || echo "note: test data directory $FSGD_DATA not found (set FSGD_DATA): tests that need it are skipped"

for t in "$BUILD"/unit/test_*; do
    [ -x "$t" ] || continue
    log=$(mktemp)
    "$t" >"$log" 2>&1
    rc=$?
    line=$(grep -E '^fsgd-test: .*: [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -1)
    p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
    s=$(sed -nE 's/.*, ([0-9]+) skipped$/\1/p' <<<"$line")
    p=${p:-0}; f=${f:-0}; s=${s:-0}
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or asserted outside a test
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ $rc -ne 0 ]; then
        failures+=("$t"); cat "$log"
    else
        echo "ok   $t ($p tests$([ "$s" -gt 0 ] && echo ", $s skipped"))"
        grep -h '^fsgd-test: test data' "$log" || true
    fi
    rm -f "$log"
done

for r in "$BUILD"/fuzz-replay/fuzz_*; do
    [ -x "$r" ] || continue
    name=$(basename "$r")
    corpus=tests/fuzz/corpus/${name#fuzz_}
    if "$r" "$corpus" >"$logdir/replay.log" 2>&1; then
        passed=$((passed + 1)); echo "ok   $r $(tail -1 "$logdir/replay.log")"
    else
        failed=$((failed + 1)); failures+=("$r"); cat "$logdir/replay.log"
    fi
done

for s in tests/integration/*.sh; do
    [ -f "$s" ] || continue
    BUILD=$BUILD bash "$s" >"$logdir/integ.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); echo "ok   $s"
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); echo "skip $s: $(tail -1 "$logdir/integ.log")"
    else
        failed=$((failed + 1)); failures+=("$s"); cat "$logdir/integ.log"
    fi
done

for f in "${failures[@]:-}"; do [ -n "$f" ] && echo "FAILED: $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
