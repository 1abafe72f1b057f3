#!/usr/bin/env bash
# Issue 40 item 5: the build prints a short line per step ("  CC      FILE"),
# not every compiler command; V=1 prints the commands. One object file is
# built in a build folder of its own.
set -euo pipefail
# real-kafka: skip
cd "$(dirname "$0")/../.."
command -v make >/dev/null && command -v cc >/dev/null || { echo "skipped: no make or cc"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
clean_make() { env -i PATH="$PATH" HOME="${HOME:-/root}" make --no-print-directory CUDA=0 "$@"; }
clean_make BUILD="$tmp/b" "$tmp/b/common/crc32c.o" >"$tmp/quiet.log" 2>&1 || fail "make failed: $(cat "$tmp/quiet.log")"
grep -q '^  CC      common/crc32c.c$' "$tmp/quiet.log" || fail "no short CC line: $(cat "$tmp/quiet.log")"
grep -q -- '-std=c11' "$tmp/quiet.log" && fail "the compiler command was printed without V=1: $(cat "$tmp/quiet.log")"
clean_make BUILD="$tmp/v" V=1 "$tmp/v/common/crc32c.o" >"$tmp/v.log" 2>&1 || fail "make V=1 failed"
grep -q -- '-std=c11 .*-c common/crc32c.c' "$tmp/v.log" || fail "V=1 did not print the command: $(cat "$tmp/v.log")"
echo "ok: short build lines, V=1 for the commands"
