#!/usr/bin/env bash
# fsgd serve --brokers --name follows a running job (fsgd run --follow):
# its first version is the job's model on JOB.model, checked with the job
# key; rows produced into the job make new steps, which the server swaps in
# as new versions while it answers; once the job is idle, the server's
# scores are those of fsgd predict --brokers bit for bit, at the same step;
# once nothing is written, a poll reads only the topic's ends, not its frames;
# a poll that finds new frames reads only those (delta_reads), not the topic.
# Versions carry what the job recorded on JOB.ctl for their step (rows
# trained, held-out metrics): with --min-auc the server serves the job's
# recorded versions only, and refuses to start below the bound (exit 3).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
command -v curl >/dev/null || skip "curl not installed"
DIM=3000
"$FSGD" gen --rows 9000 --dim $DIM --nnz 12 --seed 31 --quiet --out "$tmp/all.svm"
head -n 3000 "$tmp/all.svm" > "$tmp/d0.svm"
sed -n '3001,6000p' "$tmp/all.svm" > "$tmp/chunk.svm"
tail -n 2000 "$tmp/all.svm" > "$tmp/test.svm"
head -n 100 "$tmp/test.svm" > "$tmp/rows.svm"
name=$(job_name servefollow)
extra=()
[ "$KAFKA_MODE" = real ] && extra=(--brokers "$FSGD_BROKERS")
"$FSGD" run --follow --data "$tmp/d0.svm" --test "$tmp/test.svm" --dim $DIM --workers 2 --partitions 2 --name "$name" \
    --version-seconds 1 --batch 256 --job-key-file "$FSGD_JOB_KEY" ${extra[@]+"${extra[@]}"} > "$tmp/run.log" 2>&1 &
RUN_PID=$!
wait_for "$tmp/run.log" "aggregator: version 1 " 90 || { echo "FAIL: no version 1"; cat "$tmp/run.log"; exit 1; }
brokers=$(run_brokers "$tmp/run.log")
key=(--job-key-file "$FSGD_JOB_KEY")

"$FSGD" serve --brokers "$brokers" --name "$name" "${key[@]}" --port 0 --poll-ms 200 2> "$tmp/serve.log" &
SERVE_PID=$!
"$FSGD" serve --brokers "$brokers" --name "$name" "${key[@]}" --port 0 --poll-ms 200 --min-auc 0.1 \
    2> "$tmp/gated.log" &
GATED_PID=$!
trap 'for p in $SERVE_PID $GATED_PID; do kill -9 "$p" 2>/dev/null || true; done; cleanup' EXIT
wait_for "$tmp/serve.log" "listening on" 60 || { echo "FAIL: serve did not start"; cat "$tmp/serve.log"; exit 1; }
grep -q "are authenticated (key " "$tmp/serve.log" || { echo "FAIL: the job key was not used"; cat "$tmp/serve.log"; exit 1; }
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/serve.log")
url=http://127.0.0.1:$port
model() { curl -sS "$url/model/$name"; }
field() { model | json_get /dev/stdin "$1"; }
[ "$(field source)" = "topic $name.model on $brokers" ] || { echo "FAIL: source $(model)"; exit 1; }
v0=$(field version)

# recorded: /model's JSON (stdin) describes a version the job logged
# ("aggregator: version N (step S): R rows, ...; ... test
# auc A logloss L"), with its rows and metrics; exit 1 saying why not.
recorded() {
    "$PY" -c '
import json, re, sys
d = json.load(sys.stdin)
log = open(sys.argv[1]).read()
rec = {int(s): (int(r), float(a), float(l)) for s, r, a, l in
       re.findall(r"version \d+ \(step (\d+)\): (\d+) rows, .*?; test auc ([0-9.]+) logloss ([0-9.]+)", log)}
m = d["metrics"]
if d["step"] not in rec:
    sys.exit("step %d is none of the job versions (steps %s); metrics %s, note %s" % (d["step"], sorted(rec), m, d["metrics_note"]))
r, a, l = rec[d["step"]]
if not (m and d["rows_trained"] == r and m["test_rows"] == 2000 and abs(m["test_auc"] - a) <= 6e-6
        and abs(m["test_logloss"] - l) <= 6e-6):
    sys.exit("step %d: /model says rows %s, metrics %s; the job logged rows %d, auc %s, logloss %s" % (d["step"], d["rows_trained"], m, r, a, l))
' "$tmp/run.log"
}
wait_for "$tmp/gated.log" "listening on" 60 || { echo "FAIL: serve --min-auc did not start"; cat "$tmp/gated.log"; exit 1; }
gport=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/gated.log")
gated() { curl -sS "http://127.0.0.1:$gport/model/$name"; }
why=
for _ in $(seq 50); do why=$(gated | recorded 2>&1) && break; sleep 0.2; done # the log line follows the event
gated | recorded || { echo "FAIL: serve --min-auc 0.1 serves no recorded version: $why"; cat "$tmp/gated.log"; exit 1; }
gv0=$(gated | json_get /dev/stdin version)
auc=$(gated | json_get /dev/stdin metrics.test_auc)
echo "serve --min-auc 0.1: version $gv0 at a recorded step, held-out AUC $auc as the job logged it"
rc=0; "$FSGD" serve --brokers "$brokers" --name "$name" "${key[@]}" --port 0 --min-auc 0.999999 2> "$tmp/e.txt" || rc=$?
[ "$rc" -eq 3 ] && grep -q "held-out AUC 0\.[0-9]* (2000 test rows) below --min-auc 0.999999" "$tmp/e.txt" ||
    { echo "FAIL: --min-auc above the job's AUC at start: rc $rc $(cat "$tmp/e.txt")"; exit 1; }

# New rows: new steps, swapped in while the server answers.
"$FSGD" produce --follow --brokers "$brokers" --name "$name" "${key[@]}" "$tmp/chunk.svm" > "$tmp/produce.log" 2>&1 ||
    { echo "FAIL: produce"; cat "$tmp/produce.log"; exit 1; }
for _ in $(seq 600); do
    [ "$(field version)" -gt "$v0" ] && break
    curl -sS -o /dev/null --data-binary @"$tmp/rows.svm" "$url/score"
    sleep 0.1
done
[ "$(field version)" -gt "$v0" ] || { echo "FAIL: no new version in 60 s"; cat "$tmp/serve.log"; exit 1; }
grep -q "model $name: version 2 from $name.model (step [0-9]*)" "$tmp/serve.log" ||
    { echo "FAIL: no version 2 line"; cat "$tmp/serve.log"; exit 1; }
# the new steps were read on from the last read's end, not from the topic's start
[ "$(field source_reads)" -eq 1 ] && [ "$(field delta_reads)" -ge 1 ] ||
    { echo "FAIL: reads of the whole topic $(field source_reads), read on $(field delta_reads)"; exit 1; }
# the gated server takes the job's newer recorded versions, each with its metrics
for _ in $(seq 300); do [ "$(gated | json_get /dev/stdin version)" -gt "$gv0" ] && break; sleep 0.2; done
for _ in $(seq 50); do why=$(gated | recorded 2>&1) && break; sleep 0.2; done
[ "$(gated | json_get /dev/stdin version)" -gt "$gv0" ] && gated | recorded ||
    { echo "FAIL: serve --min-auc took no newer recorded version: $why"; cat "$tmp/gated.log"; exit 1; }

# Idle job: the server's step settles on the topic's; then the same scores.
ok=
for _ in $(seq 60); do
    "$FSGD" predict --brokers "$brokers" --name "$name" "${key[@]}" --data "$tmp/rows.svm" --proba \
        --out "$tmp/want" 2> "$tmp/p.err" || { cat "$tmp/p.err"; exit 1; }
    want_step=$(sed -n 's/.*at step \([0-9]*\),.*/\1/p' "$tmp/p.err")
    curl -sS -D "$tmp/h" -o "$tmp/got" --data-binary @"$tmp/rows.svm" "$url/score"
    got_version=$(sed -n 's/^X-Fsgd-Model-Version: \([0-9]*\).*/\1/ip' "$tmp/h")
    info=$(model)
    if [ "$(json_get <(echo "$info") step)" = "$want_step" ] && [ "$(json_get <(echo "$info") version)" = "$got_version" ]; then
        cmp -s "$tmp/got" "$tmp/want" || { echo "FAIL: scores at step $want_step differ from fsgd predict --brokers"; exit 1; }
        # a step the job recorded has its metrics; any other says why not
        if why=$(echo "$info" | recorded 2>&1); then
            echo "step $want_step is a recorded version: its metrics are the job's"
        else
            [ "$(json_get <(echo "$info") metrics)" = None ] &&
                json_get <(echo "$info") metrics_note | grep -q "records no metrics for step $want_step" ||
                { echo "FAIL: step $want_step: $why"; exit 1; }
            echo "step $want_step is no recorded version: $(json_get <(echo "$info") metrics_note)"
        fi
        ok=1
        break
    fi
    sleep 1
done
[ -n "$ok" ] || { echo "FAIL: the server's step never matched the topic's"; cat "$tmp/serve.log"; exit 1; }
echo "serve follows $name.model: version $got_version at step $want_step scores as fsgd predict --brokers"

# An idle job writes nothing: polls ask the topic's ends and read nothing
# (once the job's last step is read: a window of polls without a read).
idle=
for _ in $(seq 10); do
    r1=$(($(field source_reads) + $(field delta_reads))) p1=$(field polls)
    sleep 1.5
    r2=$(($(field source_reads) + $(field delta_reads))) p2=$(field polls)
    [ "$r1" -ge 1 ] && [ "$p2" -ge $((p1 + 3)) ] || { echo "FAIL: reads $r1, polls $p1 -> $p2 in 1.5 s at --poll-ms 200"; exit 1; }
    [ "$r2" = "$r1" ] && { idle=1; break; }
done
[ -n "$idle" ] || { echo "FAIL: the idle topic was read in every window of polls: reads $r1 -> $r2"; exit 1; }
echo "idle topic: polls $p1 -> $p2, reads stayed $r1"

kill -TERM "$SERVE_PID" "$GATED_PID"
rc=0 grc=0
wait "$SERVE_PID" || rc=$?
wait "$GATED_PID" || grc=$?
SERVE_PID= GATED_PID= # reaped: no longer ours to kill
[ "$rc" -eq 0 ] && [ "$grc" -eq 0 ] || { echo "FAIL: serve exited $rc, serve --min-auc $grc on SIGTERM"; exit 1; }
# the follow job ends as its user ends it (SIGTERM: a final version, exit 143 as kafka_follow.sh checks)
kill -TERM "$RUN_PID"
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
[ "$rc" -eq 143 ] || { echo "FAIL: the follow job exited $rc on SIGTERM, not 143"; cat "$tmp/run.log"; exit 1; }

echo "ok"
