#!/usr/bin/env bash
# fsgd run starts its aggregator while the producer writes NAME.data (it
# connects and reads the test set meanwhile, then waits on a pipe for the
# data, trainer/KAFKA_FORMAT.md "Start-up"). When the producer fails on a
# malformed row, or fsgd run is stopped while it produces, the waiting
# aggregator and the workers go with it: a clear error naming the file and
# line (or the signal), fsgd run's status, and no process of the job left.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
data=$(data_dir)/a9a
# every row of a9a, then one that is not LIBSVM: the producer stops there
bad=$tmp/bad.svm
cat "$data" >"$bad"
echo "1 3:1 oops" >>"$bad"
lines=$(wc -l <"$bad")

# no process of job NAME may outlive fsgd run (the workers and the
# aggregator carry the job's --name on their command lines)
left_behind() { pgrep -f -- "--name $1( |$)" || true; }

name=$(job_name pfail)
start_run "$tmp/fail.log" --data "$bad" --test "$data.t" --workers 2 --name "$name"
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
sed "s/^/  | /" "$tmp/fail.log"
[ "$rc" -ne 0 ] || { echo "fsgd run succeeded on a malformed row"; exit 1; }
grep -q "run: produce: .*bad.svm.*$lines" "$tmp/fail.log" ||
    { echo "the error does not name the file and line $lines"; exit 1; }
grep -q "aggregator pid" "$tmp/fail.log" || { echo "the aggregator was not started during the produce"; exit 1; }
sleep 0.5
[ -z "$(left_behind "$name")" ] || { echo "processes left behind:"; left_behind "$name"; exit 1; }
echo "malformed row: exit $rc, the file and line named, nothing left behind"

# SIGTERM while the producer writes: it stops at its next chunk, the
# aggregator waits for data that never comes; fsgd run stops everything and
# exits 143
big=$tmp/big.svm
"$FSGD" gen --rows 400000 --dim 2^20 --nnz 40 --seed 3 --quiet --out "$big"
name=$(job_name pterm)
start_run "$tmp/term.log" --data "$big" --workers 2 --name "$name"
wait_for "$tmp/term.log" "aggregator pid" 60 || { cat "$tmp/term.log"; exit 1; }
kill -TERM "$RUN_PID"
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
sed "s/^/  | /" "$tmp/term.log"
[ "$rc" -eq 143 ] || { echo "fsgd run exited $rc on SIGTERM during the produce, not 143"; exit 1; }
# the producer stops at its next chunk: not after the whole file
grep -q "^fsgd: produced" "$tmp/term.log" && { echo "the produce went on to the end after SIGTERM"; exit 1; }
grep -q "interrupted by signal 15 while writing $name.data" "$tmp/term.log" ||
    { echo "no word that the produce was interrupted"; exit 1; }
sleep 0.5
[ -z "$(left_behind "$name")" ] || { echo "processes left behind:"; left_behind "$name"; exit 1; }
echo "SIGTERM during the produce: exit 143, nothing left behind"
