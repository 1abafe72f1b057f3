#!/usr/bin/env bash
# fsgd serve under wrk on loopback: generated CTR rows (40 nonzeros, 2^24
# features) and a9a's one-hot rows (14 fields of 123 features), 1 and 100
# rows a request, 1 to 64 connections: requests/s, rows/s, p50/p99/p99.9
# latency and failed requests. The bound, in the same
# run: fsgd predict's rows/s on the same rows (one thread: parse, score,
# print), against which 100-row requests are compared per server thread.
# Then 100-row requests while the model file is replaced by rename every
# second: failed requests and p99 against steady runs, in rounds that
# alternate steady and swapping (the machine's other work moves p99 more
# than a swap does: each swapping run is compared with the steady run beside it).
# wrk saturates the server, so its latencies are a full queue's: the
# issue's latency target (single-row requests, p99 <= 2 ms at 20k
# requests/s) is measured at a held rate by serve_rate (serve_rate.c, built
# here with cc), which times each request from when it was due. At held
# rates too: 100-row requests steady, while the model file is replaced every
# second, and while a followed job (fsgd run --follow on its embedded
# cluster, rows produced every second) publishes a version every second
# that serve takes from the job's model topic: failed requests, versions
# swapped in, p99 against the steady run, and each answer checked against
# its version (serve_rate: every answer of a version the same bytes; with
# the file, each one of the two files' answers, as fsgd predict scores them).
# Also a generated one-hot set of 16 fields (1,000 values each).
# Prints "bench serve ..." lines, the load average first and last. About 9
# minutes; SECONDS_EACH=N (default 5) sets each wrk and rate run's length,
# SWAP_SECONDS=N (default 60) each swapping run's at a held rate,
# SAT_ROUNDS=N (default 3) the saturated steady/swapping rounds, RATE=N
# (default 20000) the single-row rate.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
EACH=${SECONDS_EACH:-5}
THREADS=${SERVE_THREADS:-2}
SWAP=${SWAP_SECONDS:-60}
SAT_ROUNDS=${SAT_ROUNDS:-3}
RATE1=${RATE:-20000}
RATE100=${RATE_100:-500}
command -v wrk >/dev/null || { echo "bench serve skipped: wrk not installed (Debian package wrk)"; exit 0; }
tmp=$(mktemp -d)
pid=
run_pid=
cleanup() {
    [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
    [ -z "$run_pid" ] || { kill "$run_pid" 2>/dev/null; wait "$run_pid" 2>/dev/null; } || true
    rm -rf "$tmp"
}
trap cleanup EXIT
# a script stopped by a signal still runs its EXIT trap (and stops what it started)
trap 'exit 130' INT
trap 'exit 143' TERM
echo "bench serve load_before $(cut -d' ' -f1-3 /proc/loadavg) cores=$(nproc)"

"$FSGD" gen --rows 20000 --dim 16777216 --nnz 40 --seed 3 > "$tmp/train.svm"
"$FSGD" gen --rows 100000 --dim 16777216 --nnz 40 --seed 4 > "$tmp/rows.svm"
"$FSGD" train --data "$tmp/train.svm" --dim 16777216 --epochs 1 --quiet --out "$tmp/a.model" >/dev/null
"$FSGD" train --data "$tmp/train.svm" --dim 16777216 --epochs 1 --seed 2 --quiet --out "$tmp/b.model" >/dev/null
# The one-hot set: a9a (the repository's data/sets), if unpacked.
a9a=${FSGD_DATA:-build/datasets}/a9a
[ -r "$a9a" ] && [ -r "$a9a.t" ] || a9a=

# bound SET MODEL ROWS: fsgd predict's rows/s on the rows (one thread) into predict_rows_s.
bound() {
    local n t0 t1
    n=$(wc -l < "$3")
    t0=$(date +%s.%N)
    "$FSGD" predict --model "$2" --data "$3" --proba --quiet --out "$tmp/p.txt"
    t1=$(date +%s.%N)
    predict_rows_s=$(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.0f", n / (b - a) }')
    echo "bench serve $1 predict rows=$n rows_s=$predict_rows_s (fsgd predict, 1 thread: the bound)"
}

# start MODEL|--brokers B --name N ...: fsgd serve on a free port (pid, port).
start() {
    [ $# -gt 1 ] || set -- --model "$1"
    : > "$tmp/serve.log" # sed on a missing file exits 2 (set -e)
    "$FSGD" serve "$@" --port 0 --threads "$THREADS" --poll-ms 100 2> "$tmp/serve.log" &
    pid=$!
    port=
    for _ in $(seq 1 600); do
        port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/serve.log" 2>/dev/null)
        [ -n "$port" ] && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log"; exit 1; }
        sleep 0.1
    done
    echo "fsgd serve did not start within 60 s"; cat "$tmp/serve.log"; exit 1
}
stop() {
    kill -TERM "$pid"
    wait "$pid"
    pid=
}

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

# run SET ROWS CONNS [LABEL]: one wrk run; prints its bench line, sets p99.
run() {
    local set=$1
    shift
    local rows=$1 conns=$2 label=${3:-steady} threads=$(( $2 < 2 ? $2 : 2 ))
    local out
    out=$(BODY="$tmp/body$rows" wrk -t "$threads" -c "$conns" -d "${EACH}s" --timeout 10s -s "$tmp/post.lua" \
        "http://127.0.0.1:$port/score" | grep '^RESULT')
    read -r _ n secs p50 p99_ p999 errs <<< "$out"
    p99=$p99_
    awk -v n="$n" -v s="$secs" -v r="$rows" -v c="$conns" -v p50="$p50" -v p99="$p99_" -v p999="$p999" \
        -v e="$errs" -v l="$label" -v t="$THREADS" -v bound="$predict_rows_s" -v set="$set" 'BEGIN {
        printf "bench serve %s %s rows_per_request=%d conns=%d server_threads=%d req_s=%.0f rows_s=%.0f " \
               "p50_ms=%.3f p99_ms=%.3f p99.9_ms=%.3f failed=%d", set, l, r, c, t, n / s, n * r / s, p50, p99, p999, e
        if (r > 1) printf " rows_s_per_thread_vs_predict=%.2f", n * r / s / t / bound
        printf "\n" }'
}

# rate SET ROWS REQ_S [LABEL] [SECONDS]: serve_rate at that rate; prints its
# bench line, sets p99.
rate() {
    local out
    out=$("$tmp/serve_rate" --port "$port" --body "$tmp/body$2" --rate "$3" --seconds "${5:-$EACH}" --conns 16 \
        --trace "$tmp/trace" ${expect[@]+"${expect[@]}"} | grep '^RATE')
    p99=$(sed -n 's/.* p99_ms=\([^ ]*\).*/\1/p' <<< "$out")
    echo "bench serve $1 rate_${4:-steady} rows_per_request=$2 server_threads=$THREADS target_req_s=$3 ${out#RATE }"
}
have_rate=
expect=() # serve_rate --expect FILE: the answers a swapping run may give
if cc -O2 -std=c11 -o "$tmp/serve_rate" tests/bench/serve_rate.c 2> "$tmp/cc.log"; then
    have_rate=1
else
    echo "bench serve rate skipped: tests/bench/serve_rate.c did not build: $(head -n 3 "$tmp/cc.log")"
fi

head -n 1 "$tmp/rows.svm" > "$tmp/body1"
head -n 100 "$tmp/rows.svm" > "$tmp/body100"
bound ctr "$tmp/a.model" "$tmp/rows.svm"
cp "$tmp/a.model" "$tmp/live.model"
start "$tmp/live.model"
for rows in 1 100; do
    for conns in 1 16 64; do
        run ctr "$rows" "$conns"
    done
done
if [ -n "$have_rate" ]; then
    rate ctr 1 "$RATE1"
    rate ctr 1 $((RATE1 / 4))
fi

# Saturated (wrk), in rounds: steady, then the model file replaced by
# rename every second, each EACH * 2 seconds.
ratios=
for round in $(seq 1 "$SAT_ROUNDS"); do
    EACH=$((EACH * 2)) run ctr 100 16 "steady_round$round"
    steady_p99=$p99
    r0=$(curl -sS "http://127.0.0.1:$port/metrics" | sed -n 's/^fsgd_serve_reloads_total{model="default"} //p')
    (
        for i in $(seq 1 $((EACH * 2))); do
            if [ $((i % 2)) -eq 1 ]; then src=b; else src=a; fi
            cp "$tmp/$src.model" "$tmp/next.model" && mv "$tmp/next.model" "$tmp/live.model"
            sleep 1
        done
    ) &
    swapper=$!
    EACH=$((EACH * 2)) run ctr 100 16 "swapping_round$round"
    wait "$swapper"
    r1=$(curl -sS "http://127.0.0.1:$port/metrics" | sed -n 's/^fsgd_serve_reloads_total{model="default"} //p')
    ratio=$(awk -v a="$p99" -v b="$steady_p99" 'BEGIN { printf "%.2f", a / b }')
    ratios="$ratios $ratio"
    echo "bench serve swap_saturated round=$round reloads=$((r1 - r0)) p99_ms=$p99 steady_p99_ms=$steady_p99 p99_ratio=$ratio load=$(cut -d' ' -f1 /proc/loadavg)"
done
echo "bench serve swap_saturated rounds=$SAT_ROUNDS p99_ratio_median=$(tr ' ' '\n' <<< "$ratios" | sed '/^$/d' | sort -g |
    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }') p99_ratios=${ratios# }"

# swap_rate LABEL WHAT: 100-row requests at RATE100 for SWAP seconds while
# WHAT (a command, in the background) makes new versions; prints the
# versions swapped in and p99 against rate_steady_p99.
swap_rate() {
    local v0 v1 what=$2
    v0=$(curl -sS "http://127.0.0.1:$port/metrics" | sed -n 's/^fsgd_serve_reloads_total{model="[^"]*"} //p')
    $what &
    local maker=$!
    rate ctr 100 "$RATE100" "$1" "$SWAP"
    kill "$maker" 2>/dev/null || true
    wait "$maker" 2>/dev/null || true
    v1=$(curl -sS "http://127.0.0.1:$port/metrics" | sed -n 's/^fsgd_serve_reloads_total{model="[^"]*"} //p')
    awk -v a="$p99" -v b="$rate_steady_p99" -v r=$((v1 - v0)) -v l="$1" -v s="$SWAP" 'BEGIN {
        printf "bench serve %s_swap reloads=%d seconds=%d p99_ms=%.3f steady_p99_ms=%.3f p99_ratio=%.2f\n",
            l, r, s, a, b, a / b }'
    expect=()
    # The same run split by time: requests due within 0.1 s of a swap (the
    # first request a new version answered; its load comes just before)
    # against the others, which saw the same background load.
    /usr/bin/python3 - "$tmp/trace" "$1" <<'PY'
import sys
rows = sorted(tuple(float(x) for x in line.split()) for line in open(sys.argv[1]))
first = {}
for due, lat, v in rows:
    first.setdefault(v, due)
swaps = sorted(t for v, t in first.items() if v != rows[0][2])
near, away, j = [], [], 0
for due, lat, v in rows:
    while j + 1 < len(swaps) and swaps[j + 1] <= due:
        j += 1
    d = min(abs(due - swaps[k]) for k in (j, j + 1) if k < len(swaps)) if swaps else 1e9
    (near if d <= 0.1 else away).append(lat)
def p(xs, q):
    xs = sorted(xs)
    return xs[int((len(xs) - 1) * q)] if xs else float("nan")
print("bench serve %s_swap_windows swaps=%d near_requests=%d near_p50_ms=%.3f near_p99_ms=%.3f away_requests=%d "
      "away_p50_ms=%.3f away_p99_ms=%.3f near_over_away_p99=%.2f" % (sys.argv[2], len(swaps), len(near), p(near, .5),
      p(near, .99), len(away), p(away, .5), p(away, .99), p(near, .99) / p(away, .99)))
PY
}
file_swapper() {
    for i in $(seq 1 "$SWAP"); do
        if [ $((i % 2)) -eq 1 ]; then src=b; else src=a; fi
        cp "$tmp/$src.model" "$tmp/next.model" && mv "$tmp/next.model" "$tmp/live.model"
        sleep 1
    done
}
if [ -n "$have_rate" ]; then
    rate ctr 100 "$RATE100" steady "$SWAP"
    rate_steady_p99=$p99
    for m in a b; do
        "$FSGD" predict --model "$tmp/$m.model" --data "$tmp/body100" --proba --quiet --out "$tmp/$m.scores"
    done
    expect=(--expect "$tmp/a.scores" --expect "$tmp/b.scores")
    swap_rate file file_swapper
fi
stop

# Topic swaps: a followed job publishes a version a second; serve follows its topic.
if [ -n "$have_rate" ]; then
    "$FSGD" gen --rows 8000 --dim 1048576 --nnz 40 --seed 5 > "$tmp/t0.svm"
    "$FSGD" gen --rows 500 --dim 1048576 --nnz 40 --seed 6 > "$tmp/tchunk.svm"
    (umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' > "$tmp/job.key" && echo >> "$tmp/job.key")
    "$FSGD" run --follow --data "$tmp/t0.svm" --dim 1048576 --workers 1 --partitions 4 --name benchserve \
        --version-seconds 1 --batch 256 --job-key-file "$tmp/job.key" > "$tmp/run.log" 2>&1 &
    run_pid=$!
    for _ in $(seq 900); do grep -qs "aggregator: version 1 " "$tmp/run.log" && break; sleep 0.1; done
    brokers=$(sed -n 's/^fsgd: embedded Kafka cluster at \([^ ]*\) .*/\1/p' "$tmp/run.log")
    if [ -z "$brokers" ] || ! grep -qs "aggregator: version 1 " "$tmp/run.log"; then
        echo "bench serve topic skipped: the follow job did not publish version 1: $(tail -n 3 "$tmp/run.log")"
    else
        start --brokers "$brokers" --name benchserve --job-key-file "$tmp/job.key"
        # the CTR rows' first 2^20 columns: what the job's model knows
        awk '{ printf "%s", $1; for (i = 2; i <= NF; i++) { split($i, f, ":"); if (f[1] <= 1048576) printf " %s", $i }
               print "" }' "$tmp/body100" > "$tmp/body100t"
        mv "$tmp/body100t" "$tmp/body100"
        rate ctr 100 "$RATE100" steady "$SWAP"
        rate_steady_p99=$p99
        topic_maker() {
            while :; do
                "$FSGD" produce --follow --brokers "$brokers" --name benchserve --job-key-file "$tmp/job.key" \
                    "$tmp/tchunk.svm" > /dev/null 2>&1 || true
                sleep 1
            done
        }
        swap_rate topic topic_maker
        stop
    fi
    kill -TERM "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
    run_pid=
fi

# 16 one-hot fields of 1,000 values each (popular values first), labels
# from a hidden weight per value: the issue's "16-field one-hot set".
awk -v n=100000 'BEGIN { srand(7); for (j = 0; j < 16000; j++) w[j] = rand() - 0.5
    for (i = 0; i < n; i++) { line = ""; m = 0
        for (f = 0; f < 16; f++) { k = f * 1000 + int(1000 * rand() ^ 3); m += w[k]; line = line " " (k + 1) ":1" }
        print (m + rand() - 0.5 > 0 ? 1 : -1) line } }' > "$tmp/oh.svm"
"$FSGD" train --data "$tmp/oh.svm" --epochs 1 --quiet --out "$tmp/oh.model" >/dev/null
head -n 1 "$tmp/oh.svm" > "$tmp/body1"
head -n 100 "$tmp/oh.svm" > "$tmp/body100"
bound onehot16 "$tmp/oh.model" "$tmp/oh.svm"
start "$tmp/oh.model"
for rows in 1 100; do
    for conns in 1 16 64; do
        run onehot16 "$rows" "$conns"
    done
done
stop

if [ -n "$a9a" ]; then
    "$FSGD" train --data "$a9a" --epochs 1 --quiet --out "$tmp/a9a.model" >/dev/null
    head -n 1 "$a9a.t" > "$tmp/body1"
    head -n 100 "$a9a.t" > "$tmp/body100"
    # ~100k rows, so that the bound is not fsgd predict's start-up
    for _ in 1 2 3 4 5 6; do cat "$a9a.t"; done > "$tmp/a9a_rows.svm"
    bound a9a "$tmp/a9a.model" "$tmp/a9a_rows.svm"
    start "$tmp/a9a.model"
    for rows in 1 100; do
        for conns in 1 16 64; do
            run a9a "$rows" "$conns"
        done
    done
    stop
else
    echo "bench serve a9a skipped: $a9a not unpacked (make data)"
fi
echo "bench serve load_after $(cut -d' ' -f1-3 /proc/loadavg)"
