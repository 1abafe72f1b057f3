#!/usr/bin/env bash
# An input with no end (issue 27, part 3) is refused with a clear error, in
# bounded time and memory, by every reader of rows: a line without an end
# (/dev/zero) past 64 MiB, and a stream (stdin, a FIFO) past the machine's
# memory (here FSGD_MAX_STREAM_MB=20). A finite stream still trains.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d)
BG=
cleanup() {
    [ -z "$BG" ] || kill "$BG" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
case $FSGD in */*) FSGD=$(realpath "$FSGD") ;; *) FSGD=$(command -v "$FSGD") ;; esac
cd "$tmp"

# expect_refusal NAME PATTERN CMD...: fails (not killed by the 60 s bound,
# not 0) and says PATTERN
expect_refusal() {
    local name=$1 pattern=$2 rc=0
    shift 2
    timeout 60 "$@" >"$name.log" 2>&1 || rc=$?
    [ $rc -ne 0 ] || fail "$name: exit 0: $(tail -3 "$name.log")"
    [ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "$name: still reading after 60 s"
    grep -q -- "$pattern" "$name.log" || fail "$name: exit $rc without '$pattern': $(tail -3 "$name.log")"
    echo "$name: exit $rc: $(grep -m1 -- "$pattern" "$name.log")"
}

line="no line end within 64 MiB"
expect_refusal zero_libsvm "/dev/zero:1: $line" "$FSGD" train --data /dev/zero --quiet
expect_refusal zero_threads "/dev/zero:1: $line" "$FSGD" train --data /dev/zero --threads 2 --quiet
expect_refusal zero_criteo "/dev/zero:1: $line" "$FSGD" train --data /dev/zero --format criteo --quiet
"$FSGD" gen --rows 200 --dim 30 --nnz 4 --seed 5 --quiet --out d.svm
expect_refusal zero_test_set "/dev/zero:1: $line" "$FSGD" train --data d.svm --test /dev/zero --quiet
"$FSGD" train --data d.svm --epochs 1 --quiet --out m.fsgd >/dev/null
expect_refusal zero_predict "/dev/zero:1: $line" "$FSGD" predict --model m.fsgd --data /dev/zero --out s.txt
# fsgd run: the producer stops, and the workers it started are stopped too
expect_refusal zero_run "/dev/zero:1: $line" "$FSGD" run --data /dev/zero --workers 2 --epochs 1 --name endless
pgrep -f "name endless" >/dev/null && fail "zero_run left a process behind: $(pgrep -af 'name endless')"

stream="more than 20 MiB read from a stream"
export FSGD_MAX_STREAM_MB=20
expect_refusal stdin_libsvm "-: $stream" sh -c "yes '+1 1:1 2:1' | '$FSGD' train --data - --quiet"
criteo=$(printf '1\t5\t0\t1\t382\t4\t8\t18\t1\t4\t1\t0\t0\t2\t68fd1e64\t80e26c9b\tfb936136\t7b4723c4\t25c83c98\t7e0ccccf\tde7995b8\t1f89b562\ta73ee510\ta8cd5504\tb2cb9c98\t37c9c164\t2824a5f6\t1adce6ef\t8ba8b39a\t891b62e7\te5ba7672\tf54016b9\t21ddcdc9\tb1252a9d\t07b5194c\t\t3a171ecb\tc5c50484\te8b83407\t9727dd16')
expect_refusal stdin_criteo "-: $stream" sh -c "yes '$criteo' | '$FSGD' train --data - --format criteo --quiet"
mkfifo fifo
(yes '+1 3:1 4:0.5' >fifo 2>/dev/null || true) &
BG=$!
expect_refusal fifo_threads "fifo: $stream" "$FSGD" train --data fifo --threads 2 --quiet
kill "$BG" 2>/dev/null || true
BG=

# a stream that ends is trained as before
head -n 150 d.svm | "$FSGD" train --data - --epochs 1 --quiet --out s.fsgd >finite.log 2>&1 ||
    fail "a finite stream: $(tail -3 finite.log)"
[ -s s.fsgd ] || fail "a finite stream wrote no model"
echo ok
