#!/usr/bin/env bash
# Issue 40: tests run one at a time. A unit test binary with a pattern runs
# only its cases whose "suite: case" name contains it (and exits 2 when none
# does; --list names them); tests/run_tests.sh with T=PATTERN runs only the
# tests whose file name contains it.
set -euo pipefail
# real-kafka: skip
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
FSGD=${FSGD:-bin/fsgd}
t=$BUILD/unit/test_adam
[ -x "$t" ] || { echo "skipped: $t not built"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
counts() { sed -nE 's/^fsgd-test: .*: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p' "$1"; }

"$t" >"$tmp/all" 2>&1 || fail "$t failed"
read -r all _ < <(counts "$tmp/all")
"$t" --list >"$tmp/list"
[ "$(grep -c '^adam: ' "$tmp/list")" -eq "$all" ] || fail "--list names $(grep -c '^adam: ' "$tmp/list") cases, the run $all"
first=$(grep '^adam: ' "$tmp/list" | head -1 | sed 's/^adam: //')
"$t" "${first^^}" >"$tmp/one" 2>&1 || fail "$t '$first' failed: $(tail -5 "$tmp/one")"
read -r one failed < <(counts "$tmp/one")
[ "$one" -ge 1 ] && [ "$one" -lt "$all" ] && [ "$failed" -eq 0 ] ||
    fail "a pattern naming one case ran $one of $all (failed $failed)"
grep -q "Test: $first" "$tmp/one" || fail "the case '$first' did not run"
rc=0; "$t" no-such-case-xyz >"$tmp/none" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "no case matches 'no-such-case-xyz'" "$tmp/none" || fail "no match: exit $rc, $(cat "$tmp/none")"

FSGD_KAFKA_REAL=0 T=test_adam BUILD=$BUILD FSGD=$FSGD bash tests/run_tests.sh >"$tmp/suite" 2>&1 || fail "T=test_adam: $(tail -5 "$tmp/suite")"
grep -q "^ok   $t " "$tmp/suite" || fail "T=test_adam did not run $t"
[ "$(grep -c '^ok   ' "$tmp/suite")" -eq 1 ] || fail "T=test_adam ran more: $(grep '^ok   ' "$tmp/suite")"
tail -1 "$tmp/suite" | grep -q "^$all passed, 0 failed" || fail "T=test_adam: $(tail -1 "$tmp/suite")"
echo "ok: $t CASE runs one case of $all; T=test_adam runs one binary"
