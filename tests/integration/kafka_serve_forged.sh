#!/usr/bin/env bash
# fsgd serve following a finished job's model topic, checked with the job
# key: it first serves the job's final model (scores equal to fsgd predict on
# the job's --out, bit for bit); then model snapshots are appended to
# JOB.model by hand (lib/frames.py): an unsigned one (an outsider without the
# key) is skipped and the version serving stays; a signed one of the same
# shape is swapped in (a zero model: every score 0.5); a signed one of
# another dimension is refused, logged and counted, and the zero model keeps
# serving.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
FRAMES="$PY $(dirname "$0")/lib/frames.py"
needs_cmd kcat
command -v curl >/dev/null || skip "curl not installed"
DIM=3000
name=$(job_name servefg)
export FSGD_JOB=$name # lib/frames.py binds its tags to the job
kafka_cluster "$name" 2
"$FSGD" gen --rows 5000 --dim $DIM --nnz 12 --seed 41 --quiet --out "$tmp/all.svm"
head -n 4000 "$tmp/all.svm" > "$tmp/train.svm"
tail -n 1000 "$tmp/all.svm" > "$tmp/test.svm"
head -n 50 "$tmp/test.svm" > "$tmp/rows.svm"
key=(--job-key-file "$FSGD_JOB_KEY")
"$FSGD" produce --brokers "$brokers" --name "$name" --batch 128 --quiet "${key[@]}" "$tmp/train.svm"
"$FSGD" run --no-produce --brokers "$brokers" --name "$name" --workers 2 --test "$tmp/test.svm" --dim $DIM \
    --batch 128 --epochs 1 --out "$tmp/model.fsgd" "${key[@]}" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; exit 1; }
"$FSGD" predict --model "$tmp/model.fsgd" --data "$tmp/rows.svm" --proba --quiet > "$tmp/want"

"$FSGD" serve --brokers "$brokers" --name "$name" "${key[@]}" --port 0 --poll-ms 100 2> "$tmp/serve.log" &
SERVE_PID=$!
trap '[ -z "$SERVE_PID" ] || kill -9 "$SERVE_PID" 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 600); do
    grep -qs "listening on" "$tmp/serve.log" && break
    kill -0 "$SERVE_PID" 2>/dev/null || { echo "FAIL: serve exited"; cat "$tmp/serve.log"; exit 1; }
    sleep 0.1
done
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/serve.log")
[ -n "$port" ] || { echo "FAIL: serve did not start in 60 s"; cat "$tmp/serve.log"; exit 1; }
url=http://127.0.0.1:$port
field() { curl -sS "$url/model/$name" | json_get /dev/stdin "$1"; }
score() { curl -sS -D "$tmp/h" --data-binary @"$tmp/rows.svm" "$url/score/$name"; }
score > "$tmp/got"
cmp -s "$tmp/got" "$tmp/want" || { echo "FAIL: the job's model scores differ from fsgd predict on its --out"; exit 1; }
grep -qi "^X-Fsgd-Model-Version: 1" "$tmp/h" || { echo "FAIL: $(cat "$tmp/h")"; exit 1; }

# polled: the watcher has checked the topic twice more since now.
polled() {
    local p0 i
    p0=$(field polls)
    for ((i = 0; i < 600; i++)); do
        [ "$(field polls)" -ge $((p0 + 2)) ] && return 0
        sleep 0.1
    done
    echo "FAIL: the watcher did not poll in 60 s"; exit 1
}
kcat -C -b "$brokers" -t "$name.model" -o -1 -c 1 -e -f '%s' > "$tmp/last" 2>/dev/null
read -r gen step < <($FRAMES header "$tmp/last")
publish() { kcat -P -b "$brokers" -t "$name.model" -p 0 -k snapshot.0 "$1"; }

# 1. Unsigned: skipped, version 1 serves on.
$FRAMES snapshot "$tmp/unsigned" --key none --gen "$gen" --step $((step + 10)) --parts 2 --end 1 --dim $DIM
publish "$tmp/unsigned"
polled
[ "$(field version)" = 1 ] || { echo "FAIL: an unsigned snapshot became version $(field version)"; exit 1; }
score > "$tmp/got"
cmp -s "$tmp/got" "$tmp/want" || { echo "FAIL: scores changed after an unsigned snapshot"; exit 1; }

# 2. Signed, same shape: version 2, the zero model.
$FRAMES snapshot "$tmp/zero" --gen "$gen" --step $((step + 20)) --parts 2 --end 1 --dim $DIM
publish "$tmp/zero"
for _ in $(seq 600); do [ "$(field version)" = 2 ] && break; sleep 0.1; done
[ "$(field version)" = 2 ] || { echo "FAIL: the signed snapshot was not swapped in"; cat "$tmp/serve.log"; exit 1; }
[ "$(field step)" = $((step + 20)) ] || { echo "FAIL: version 2 at step $(field step)"; exit 1; }
score > "$tmp/got"
[ "$(sort -u "$tmp/got")" = 0.5 ] || { echo "FAIL: the zero model scored $(sort -u "$tmp/got" | head -3)"; exit 1; }
grep -qi "^X-Fsgd-Model-Version: 2" "$tmp/h" || { echo "FAIL: $(cat "$tmp/h")"; exit 1; }

# 3. Signed, another dimension: refused, the zero model serves on.
$FRAMES snapshot "$tmp/wide" --gen "$gen" --step $((step + 30)) --parts 2 --end 1 --dim $((DIM + 1))
publish "$tmp/wide"
for _ in $(seq 600); do [ "$(field refused)" = 1 ] && break; sleep 0.1; done
[ "$(field refused)" = 1 ] || { echo "FAIL: the wider snapshot was not refused"; cat "$tmp/serve.log"; exit 1; }
grep -q "model $name: new version refused: $name.model step $((step + 30)): dimension $((DIM + 1)), the model serving has $DIM; version 2 keeps serving" \
    "$tmp/serve.log" || { echo "FAIL: refusal not logged"; cat "$tmp/serve.log"; exit 1; }
polled
[ "$(field version)" = 2 ] || { echo "FAIL: version $(field version) after the refusal"; exit 1; }
score > "$tmp/got"
[ "$(sort -u "$tmp/got")" = 0.5 ] || { echo "FAIL: scores changed after the refusal"; exit 1; }
curl -sS "$url/metrics" > "$tmp/metrics.txt"
grep -q "^fsgd_serve_reloads_refused_total{model=\"$name\"} 1$" "$tmp/metrics.txt" ||
    { echo "FAIL: refusal not counted on /metrics"; exit 1; }

kill -TERM "$SERVE_PID"
rc=0
wait "$SERVE_PID" || rc=$?
SERVE_PID= # reaped: no longer ours to kill
[ "$rc" -eq 0 ] || { echo "FAIL: serve exited $rc on SIGTERM"; exit 1; }
echo "ok: unsigned snapshot skipped, signed one swapped in, one of another dimension refused"
