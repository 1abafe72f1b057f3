#!/usr/bin/env bash
# fsgd serve under wrk on loopback: generated CTR rows (40 nonzeros, 2^24
# features), 1 and 100 rows a request, 1 to 64 connections: requests/s,
# rows/s, p50/p99/p99.9 latency and failed requests. The bound, in the same
# run: fsgd predict's rows/s on the same rows (one thread: parse, score,
# print), against which 100-row requests are compared per server thread.
# Then 100-row requests while the model file is replaced by rename every
# second: failed requests and p99 against the steady run.
# Prints "bench serve ..." lines. About 90 s; SECONDS_EACH=N (default 5)
# sets each wrk run's length.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
EACH=${SECONDS_EACH:-5}
THREADS=${SERVE_THREADS:-2}
command -v wrk >/dev/null || { echo "bench serve skipped: wrk not installed (Debian package wrk)"; exit 0; }
tmp=$(mktemp -d)
pid=
cleanup() {
    [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

"$FSGD" gen --rows 20000 --dim 16777216 --nnz 40 --seed 3 > "$tmp/train.svm"
"$FSGD" gen --rows 100000 --dim 16777216 --nnz 40 --seed 4 > "$tmp/rows.svm"
"$FSGD" train --data "$tmp/train.svm" --dim 16777216 --epochs 1 --quiet --out "$tmp/a.model" >/dev/null
"$FSGD" train --data "$tmp/train.svm" --dim 16777216 --epochs 1 --seed 2 --quiet --out "$tmp/b.model" >/dev/null
head -n 1 "$tmp/rows.svm" > "$tmp/body1"
head -n 100 "$tmp/rows.svm" > "$tmp/body100"

# The bound: fsgd predict on the same rows, one thread.
t0=$(date +%s.%N)
"$FSGD" predict --model "$tmp/a.model" --data "$tmp/rows.svm" --proba --quiet --out "$tmp/p.txt"
t1=$(date +%s.%N)
predict_rows_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", 100000 / (b - a) }')
echo "bench serve predict rows=100000 nnz=40 dim=2^24 rows_s=$predict_rows_s (fsgd predict, 1 thread)"

cp "$tmp/a.model" "$tmp/live.model"
"$FSGD" serve --model "$tmp/live.model" --port 0 --threads "$THREADS" --poll-ms 100 2> "$tmp/serve.log" &
pid=$!
port=
for _ in $(seq 1 600); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/serve.log")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log"; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { echo "fsgd serve did not start within 60 s"; cat "$tmp/serve.log"; exit 1; }

# wrk posts the body file; its done() prints one line of figures.
cat > "$tmp/post.lua" <<'LUA'
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
wrk.headers["Content-Type"] = "text/plain"
f:close()
function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("RESULT %d %.6f %.3f %.3f %.3f %d\n", summary.requests, summary.duration / 1e6,
        latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000,
        e.connect + e.read + e.write + e.status + e.timeout))
end
LUA

# run ROWS CONNS [LABEL]: one wrk run; prints its bench line, sets p99.
run() {
    local rows=$1 conns=$2 label=${3:-steady} threads=$(( $2 < 2 ? $2 : 2 ))
    local out
    out=$(BODY="$tmp/body$rows" wrk -t "$threads" -c "$conns" -d "${EACH}s" --timeout 10s -s "$tmp/post.lua" \
        "http://127.0.0.1:$port/score" | grep '^RESULT')
    read -r _ n secs p50 p99_ p999 errs <<< "$out"
    p99=$p99_
    awk -v n="$n" -v s="$secs" -v r="$rows" -v c="$conns" -v p50="$p50" -v p99="$p99_" -v p999="$p999" \
        -v e="$errs" -v l="$label" -v t="$THREADS" -v bound="$predict_rows_s" 'BEGIN {
        printf "bench serve %s rows_per_request=%d conns=%d server_threads=%d req_s=%.0f rows_s=%.0f " \
               "p50_ms=%.3f p99_ms=%.3f p99.9_ms=%.3f failed=%d", l, r, c, t, n / s, n * r / s, p50, p99, p999, e
        if (r > 1) printf " rows_s_per_thread_vs_predict=%.2f", n * r / s / t / bound
        printf "\n" }'
}

for rows in 1 100; do
    for conns in 1 16 64; do
        run "$rows" "$conns"
    done
done
run 100 16 steady
steady_p99=$p99

# The same load while the model file is replaced by rename every second.
(
    for i in $(seq 1 $((EACH * 2))); do
        if [ $((i % 2)) -eq 1 ]; then src=b; else src=a; fi
        cp "$tmp/$src.model" "$tmp/next.model" && mv "$tmp/next.model" "$tmp/live.model"
        sleep 1
    done
) &
swapper=$!
EACH=$((EACH * 2)) run 100 16 swapping
wait "$swapper"
reloads=$(curl -sS "http://127.0.0.1:$port/metrics" | sed -n 's/^fsgd_serve_reloads_total{model="default"} //p')
awk -v a="$p99" -v b="$steady_p99" -v r="$reloads" 'BEGIN {
    printf "bench serve swap reloads=%s p99_ms=%.3f steady_p99_ms=%.3f p99_ratio=%.2f\n", r, a, b, a / b }'
kill -TERM "$pid"
wait "$pid"
pid=
