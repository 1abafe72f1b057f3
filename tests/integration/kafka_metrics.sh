#!/usr/bin/env bash
# Prometheus metrics while a job runs: a 3-worker fsgd run with
# --metrics-port BASE serves the aggregator on BASE and worker i on BASE+i
# (as --help says). curl scrapes all four endpoints twice during training;
# each exposition passes the promtool-style checker (lib/promcheck.py:
# HELP/TYPE, names, labels, values, histogram buckets), the metrics the
# issue names are there, and between the two scrapes no counter went down
# and steps, rows, bytes and the step histogram went up. The checker itself
# is first shown to refuse broken expositions.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd curl
CHECK=("$PY" "$(dirname "$0")/lib/promcheck.py")
"${CHECK[@]}" selftest

# four free consecutive ports for the aggregator and workers 1..3, below the
# ephemeral range: there any Kafka client's outgoing connection (the workers
# connect before they serve /metrics) could take one first (CI saw it)
base=$("$PY" - <<'EOF'
import random, socket
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
for _ in range(200):
    b = random.randrange(10000, max(10001, low - 4))
    socks = []
    try:
        for p in range(b, b + 4):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(b); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
EOF
)
[ -n "$base" ]
# enough steps that two scrapes fall inside training on a loaded machine
start_run "$tmp/run.log" --workers 3 --epochs 12 --batch 128 --metrics-port "$base" --metrics-json "$tmp/m.json"
urls=()
for who in "aggregator" "worker 1" "worker 2" "worker 3"; do
    wait_for "$tmp/run.log" "^fsgd: $who metrics at " 60 || { cat "$tmp/run.log"; echo "no '$who metrics at' line"; exit 1; }
    urls+=("$(sed -n "s/^fsgd: $who metrics at //p" "$tmp/run.log" | tail -1)")
done
echo "endpoints: ${urls[*]}"
for i in 0 1 2 3; do
    [ "${urls[$i]}" = "http://127.0.0.1:$((base + i))/metrics" ] ||
        { echo "process $i serves on ${urls[$i]}, expected port $((base + i))"; exit 1; }
done

# scrape N: every endpoint once, each checked; returns once the aggregator
# has applied more than MIN steps (polling), so the scrapes are mid-training
value() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"].get(sys.argv[2], -1))' "$1" "$2"; }
has() { # FILE REGEX: some series matches
    "$PY" -c 'import json,re,sys; sys.exit(not any(re.fullmatch(sys.argv[2], k) for k in json.load(open(sys.argv[1]))["samples"]))' "$1" "$2"
}
scrape() { # N MIN_STEPS
    local n=$1 min=$2 i s
    for ((i = 0; i < 600; i++)); do
        curl -fsS --max-time 5 "${urls[0]}" >"$tmp/s$n-0.txt" || { cat "$tmp/run.log"; exit 1; }
        "${CHECK[@]}" check "$tmp/s$n-0.txt" >"$tmp/s$n-0.json"
        s=$(value "$tmp/s$n-0.json" 'fsgd_steps_total{}')
        [ "${s%.*}" -gt "$min" ] && break
        kill -0 "$RUN_PID" 2>/dev/null || { cat "$tmp/run.log"; echo "the run ended before scrape $n"; exit 1; }
        sleep 0.1
    done
    for i in 1 2 3; do
        curl -fsS --max-time 5 "${urls[$i]}" >"$tmp/s$n-$i.txt"
        "${CHECK[@]}" check "$tmp/s$n-$i.txt" >"$tmp/s$n-$i.json" || { cat "$tmp/s$n-$i.txt"; exit 1; }
    done
    echo "scrape $n: aggregator at step $s"
    STEPS=$s
}
scrape 1 5
s1=${STEPS%.*}
# the second scrape a few dozen steps later, still during training
scrape 2 $((s1 + 40))
kill -0 "$RUN_PID" 2>/dev/null || { echo "the run ended before both scrapes were taken"; exit 1; }

# what the issue names is there (aggregator)
for m in 'fsgd_steps_total{}' 'fsgd_rows_total{}' 'fsgd_train_loss{}' 'fsgd_test_auc{}' 'fsgd_test_logloss{}' \
    'fsgd_wire_bytes_total{direction="up",strategy="none"}' 'fsgd_wire_bytes_total{direction="down",strategy="none"}' \
    'fsgd_compression_ratio{}' 'fsgd_step_duration_seconds_count{}' 'fsgd_step_duration_seconds_bucket{le="+Inf"}' \
    'fsgd_phase_seconds_total{phase="gradient"}' 'fsgd_phase_seconds_total{phase="encode"}' \
    'fsgd_phase_seconds_total{phase="decode"}' 'fsgd_phase_seconds_total{phase="wait"}' \
    'fsgd_phase_seconds_total{phase="update"}' 'fsgd_rejected_messages_total{reason="corrupt"}' \
    'fsgd_rejected_messages_total{reason="forged"}' 'fsgd_workers_live{}'; do
    [ "$(value "$tmp/s2-0.json" "$m")" != -1 ] || { cat "$tmp/s2-0.txt"; echo "aggregator: $m missing"; exit 1; }
done
[ "$(value "$tmp/s2-0.json" 'fsgd_workers_live{}')" = 3.0 ] || { echo "workers_live is not 3"; exit 1; }
has "$tmp/s2-0.json" 'fsgd_job_info\{job="[^"]*",role="aggregator",strategy="none",version="[^"]*",worker="0"\}'
for i in 1 2 3; do
    for m in 'fsgd_steps_total{}' 'fsgd_resyncs_total{}' 'fsgd_phase_seconds_total{phase="wait"}'; do
        [ "$(value "$tmp/s2-$i.json" "$m")" != -1 ] || { cat "$tmp/s2-$i.txt"; echo "worker $i: $m missing"; exit 1; }
    done
    has "$tmp/s2-$i.json" "fsgd_job_info\\{job=\"[^\"]*\",role=\"worker\",strategy=\"none\",version=\"[^\"]*\",worker=\"$i\"\\}" ||
        { echo "worker $i: no fsgd_job_info of worker $i"; exit 1; }
done

# between the scrapes: nothing went down; steps, rows, bytes, step times went up
"${CHECK[@]}" compare "$tmp/s1-0.json" "$tmp/s2-0.json" --strict 'fsgd_steps_total{}' 'fsgd_rows_total{}' \
    'fsgd_wire_bytes_total{direction="up",strategy="none"}' 'fsgd_wire_bytes_total{direction="down",strategy="none"}' \
    'fsgd_step_duration_seconds_count{}' 'fsgd_step_duration_seconds_sum{}' 'fsgd_phase_seconds_total{phase="update"}'
for i in 1 2 3; do
    "${CHECK[@]}" compare "$tmp/s1-$i.json" "$tmp/s2-$i.json" --strict 'fsgd_steps_total{}' 'fsgd_rows_total{}' \
        'fsgd_wire_bytes_total{direction="up",strategy="none"}' 'fsgd_wire_bytes_total{direction="down",strategy="none"}'
done
finish_run "$tmp/run.log"
# the metrics JSON carries the trace fsgd plot draws
"$PY" - "$tmp/m.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
t = m["trace"]
n = t["points"]
assert n >= 2 and all(len(t[k]) == n for k in ("seconds_from_step1", "step", "rows", "loss", "bytes_up", "bytes_down")), t
assert t["step"] == sorted(t["step"]) and t["bytes_up"] == sorted(t["bytes_up"]), "trace not in order"
assert t["step"][-1] == m["steps"] + m["empty_steps"] and t["bytes_up"][-1] == m["bytes"]["up"], (t["step"][-1], m["steps"])
print("trace: %d points, last at step %d" % (n, t["step"][-1]))
EOF
