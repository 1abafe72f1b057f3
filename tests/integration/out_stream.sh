#!/usr/bin/env bash
# Issue 40 item 8: `--out -` and devices, as users of other tools expect.
# fsgd train and fsgd export write their output to stdout for "-" (and
# /dev/stdout), their own result lines then going to stderr, never a file
# named "-"; /dev/null is written in place; fsgd predict takes /dev/stdout
# and /dev/null as it takes "-". A failed run sends nothing. (A FIFO or a
# device under another name stays refused: out_paths.sh.)
set -euo pipefail
# real-kafka: skip
FSGD=${FSGD:-bin/fsgd}
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir)
needs_data a9a a9a.t
case $FSGD in /*) ;; */*) FSGD=$PWD/$FSGD ;; *) FSGD=$(command -v "$FSGD") ;; esac
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$tmp"
T=(train --data "$DATA/a9a" --epochs 1 --seed 3 --threads 1)

"$FSGD" "${T[@]}" --quiet --out m.fsgd >/dev/null
"$FSGD" "${T[@]}" --quiet --out - >stdout.fsgd 2>err.txt || fail "train --out - exited $?"
[ ! -e ./- ] || fail "train --out - wrote a file named '-'"
cmp -s m.fsgd stdout.fsgd || fail "train --out - did not write the model (and only it) to stdout"
"$FSGD" "${T[@]}" --out /dev/stdout >devstdout.fsgd 2>err.txt || fail "train --out /dev/stdout exited $?"
cmp -s m.fsgd devstdout.fsgd || fail "train --out /dev/stdout: not the model alone on stdout"
grep -q '^model written to stdout' err.txt || fail "train --out /dev/stdout: 'model written to stdout' not on stderr: $(cat err.txt)"
"$FSGD" "${T[@]}" --out /dev/null >out.txt 2>&1 || fail "train --out /dev/null exited $?"
grep -q '^model written to /dev/null' out.txt || fail "train --out /dev/null said: $(tail -2 out.txt)"
# a failed run sends nothing to stdout
: >empty.svm
rc=0; "$FSGD" train --data empty.svm --out - >failed.out 2>/dev/null || rc=$?
[ "$rc" -ne 0 ] && [ ! -s failed.out ] || fail "a failed train --out - exited $rc and wrote $(wc -c <failed.out) bytes"

"$FSGD" export --model m.fsgd --format liblinear --out model.txt >/dev/null
"$FSGD" export --model m.fsgd --format liblinear --out - >export.txt 2>err.txt || fail "export --out - exited $?"
[ ! -e ./- ] || fail "export --out - wrote a file named '-'"
cmp -s model.txt export.txt || fail "export --out - is not the exported model"
grep -q '^exported stdout' err.txt || fail "export --out -: no 'exported stdout' on stderr"

"$FSGD" predict --model m.fsgd --data "$DATA/a9a.t" --out scores.txt 2>/dev/null
"$FSGD" predict --model m.fsgd --data "$DATA/a9a.t" --out /dev/stdout >devstdout.txt 2>/dev/null ||
    fail "predict --out /dev/stdout exited $?"
cmp -s scores.txt devstdout.txt || fail "predict --out /dev/stdout: not the scores"
"$FSGD" predict --model m.fsgd --data "$DATA/a9a.t" --out /dev/null >null.out 2>&1 || fail "predict --out /dev/null exited $?"
[ -c /dev/null ] || fail "/dev/null is no longer a device"
# block devices and links are still refused
rc=0; "$FSGD" "${T[@]}" --out "$tmp/missing/dir/m.fsgd" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "an output in a missing directory exited $rc, not 2"
echo "ok: --out -, /dev/stdout and /dev/null for train, export and predict"
