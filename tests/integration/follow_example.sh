#!/usr/bin/env bash
# Issue 40 item 2: the continuous-training example of docs/run.md, run as
# written (bin/fsgd is $FSGD): fsgd run --follow keeps the job key in
# .fsgd/NAME.key and prints it, fsgd produce with that key feeds the running
# job, and the job ends on SIGTERM with its model. Before the keyed produce,
# the same produce without --job-key-file must be refused (exit 2, saying
# how to get the key) without writing a row: the job must not stop on "a
# row without a tag" as it did.
set -euo pipefail
# real-kafka: skip
cd "$(dirname "$0")/../.."
root=$(pwd)
FSGD=${FSGD:-bin/fsgd}
case $FSGD in /*) ;; *) FSGD=$root/$FSGD ;; esac
tmp=$(mktemp -d)
ex_pid=
# timeout puts the example in a process group of its own: a signal to this
# script's group (tests/run_tests.sh's limit) does not reach it, so stop it here
trap '[ -n "$ex_pid" ] && kill -TERM -- -"$ex_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
fail() { echo "FAIL: $*"; [ -f "$tmp/run.log" ] && tail -20 "$tmp/run.log"; exit 1; }

block=$(awk '/<!-- follow-example/ { on = 1; next } on && /^```sh/ { inb = 1; next } inb && /^```/ { exit } inb' docs/run.md)
[ -n "$block" ] || fail "docs/run.md has no follow-example block"
grep -q -- '--job-key-file .fsgd/demo.key' <<<"$block" || fail "the example's produce gives no --job-key-file"
# the keyless produce first: refused, nothing written, the job goes on
script=$(awk -v fsgd="$FSGD" '{ gsub(/bin\/fsgd/, fsgd) }
    /produce --follow/ { k = $0; sub(/ --job-key-file [^ ]*/, "", k);
        print "rc=0; " k " >produce-nokey.log 2>&1 || rc=$?";
        print "[ $rc -eq 2 ] || { echo \"produce without the key exited $rc, not 2\"; cat produce-nokey.log; exit 9; }" }
    { print }' <<<"$block")
cd "$tmp"
timeout 240 bash -euo pipefail -c "$script" >example.out 2>&1 &
ex_pid=$!
rc=0
wait "$ex_pid" || rc=$?
ex_pid=
[ $rc -eq 0 ] || { cat example.out; fail "the example exited $rc"; }
grep -q "job demo's key made in .fsgd/demo.key" run.log || fail "fsgd run did not say where the job key is"
[ -f .fsgd/demo.key ] || fail "the job key is gone after fsgd run ended"
grep -q -- '--job-key-file FILE' produce-nokey.log || fail "the refused produce did not say how to get the key: $(cat produce-nokey.log)"
grep -q 'Nothing was written' produce-nokey.log || fail "the refused produce did not say it wrote nothing"
grep -q 'without a tag' run.log && fail "the job saw rows without a tag"
grep -q 'stopped on request' run.log || fail "the job did not end on SIGTERM"
rows=$(sed -n 's/.*version [0-9]* (step [0-9]*): \([0-9]*\) rows, .*/\1/p' run.log | tail -1)
[ "${rows:-0}" -eq 25000 ] || fail "the job trained ${rows:-no} rows: the produced day2 rows never arrived"
[ -s demo.fsgd ] || fail "no model written"
grep -q ' | 0 epochs, ' run.log && fail "the follow job's result line counts epochs: $(grep ' | 0 epochs' run.log)"
grep -q '^loss: logistic' example.out || fail "fsgd model info did not read the model"
echo "ok: the follow example ran as written ($rows rows trained); a produce without the key was refused"
