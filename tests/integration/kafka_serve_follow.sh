#!/usr/bin/env bash
# fsgd serve --brokers --name follows a running job (fsgd run --follow):
# its first version is the job's model on JOB.model, checked with the job
# key; rows produced into the job make new steps, which the server swaps in
# as new versions while it answers; once the job is idle, the server's
# scores are those of fsgd predict --brokers bit for bit, at the same step;
# once nothing is written, a poll reads only the topic's ends, not its frames.
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
trap '[ -z "$SERVE_PID" ] || kill -9 "$SERVE_PID" 2>/dev/null || true; cleanup' EXIT
wait_for "$tmp/serve.log" "listening on" 60 || { echo "FAIL: serve did not start"; cat "$tmp/serve.log"; exit 1; }
grep -q "are authenticated (key " "$tmp/serve.log" || { echo "FAIL: the job key was not used"; cat "$tmp/serve.log"; exit 1; }
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/serve.log")
url=http://127.0.0.1:$port
model() { curl -sS "$url/model/$name"; }
field() { model | json_get /dev/stdin "$1"; }
[ "$(field source)" = "topic $name.model on $brokers" ] || { echo "FAIL: source $(model)"; exit 1; }
v0=$(field version)

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
    r1=$(field source_reads) p1=$(field polls)
    sleep 1.5
    r2=$(field source_reads) p2=$(field polls)
    [ "$r1" -ge 1 ] && [ "$p2" -ge $((p1 + 3)) ] || { echo "FAIL: reads $r1, polls $p1 -> $p2 in 1.5 s at --poll-ms 200"; exit 1; }
    [ "$r2" = "$r1" ] && { idle=1; break; }
done
[ -n "$idle" ] || { echo "FAIL: the idle topic was read whole in every window of polls: reads $r1 -> $r2"; exit 1; }
echo "idle topic: polls $p1 -> $p2, reads stayed $r1"

kill -TERM "$SERVE_PID"
rc=0
wait "$SERVE_PID" || rc=$?
SERVE_PID= # reaped: no longer ours to kill
[ "$rc" -eq 0 ] || { echo "FAIL: serve exited $rc on SIGTERM"; exit 1; }
# the follow job ends as its user ends it (SIGTERM: a final version, exit 143 as kafka_follow.sh checks)
kill -TERM "$RUN_PID"
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
[ "$rc" -eq 143 ] || { echo "FAIL: the follow job exited $rc on SIGTERM, not 143"; cat "$tmp/run.log"; exit 1; }

echo "ok"
