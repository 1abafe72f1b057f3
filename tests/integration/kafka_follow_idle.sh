#!/usr/bin/env bash
# A follow job whose topic gets no new rows for longer than its workers'
# patience (60 step timeouts without a message on NAME.model: 12 s at a
# step timeout of 200 ms) keeps its workers: the aggregator says on
# NAME.ctl, once a step timeout, that it holds its step for rows. Before,
# every worker gave up ("no message on NAME.model ... giving up") and the
# job failed (issue 42: a quiet night ended a stream's job). SIGTERM then
# ends it as documented (143).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
mock_only "the aggregator's idle signal is the same on a real broker; one pass is enough"
head -n 2000 "$DATA/a9a" >"$tmp/rows.svm"
"$FSGD" run --follow --data "$tmp/rows.svm" --workers 2 --step-timeout-ms 200 --version-seconds 1 \
    --name "$(job_name idle)" >"$tmp/run.log" 2>&1 &
RUN_PID=$!
wait_for "$tmp/run.log" "aggregator: version 1 " 60 || { cat "$tmp/run.log"; exit 1; }
sleep 16 # past the workers' 12 s of patience, with nothing to train
if ! kill -0 "$RUN_PID" 2>/dev/null || grep -q "giving up\|failed with status" "$tmp/run.log"; then
    cat "$tmp/run.log"
    echo "FAIL: an idle follow job lost its workers"
    exit 1
fi
# nor do they say, every few seconds, that they wait for a model the
# aggregator has said it holds back for rows
if grep -q "waiting [0-9]* s for the model after step" "$tmp/run.log"; then
    cat "$tmp/run.log"
    echo "FAIL: an idle follow job's workers said they wait for the model although the aggregator said it waits for rows"
    exit 1
fi
kill -TERM "$RUN_PID"
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
[ $rc -eq 143 ] || { cat "$tmp/run.log"; echo "FAIL: fsgd run exited $rc after SIGTERM, not 143"; exit 1; }
echo "ok   idle for 16 s (the workers' patience: 12 s): workers kept, SIGTERM ended the job (143)"
