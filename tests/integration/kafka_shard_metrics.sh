#!/usr/bin/env bash
# What each aggregator shard says (issue 25): fsgd run --shards 2 with two
# workers and --metrics-port 0 (every process picks its own port). Both
# shards' /metrics, scraped mid-training, pass the exposition checker
# (lib/promcheck.py); every series of a shard carries shard="I" (one of
# each), fsgd_shards is 2, and the shards' fsgd_shard_weights add up to the
# model (dim + bias), split k mod 2. Each shard's progress line and summary
# name its range, its weights and how busy it is.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd curl
CHECK=("$PY" "$(dirname "$0")/lib/promcheck.py")

# not --quiet: the progress lines are what is checked
start_run "$tmp/run.log" --workers 2 --shards 2 --staleness 0 --epochs 6 --batch 128 --metrics-port 0
for who in "worker 1" "worker 2"; do
    wait_for "$tmp/run.log" "^fsgd: $who metrics at " 90 || { cat "$tmp/run.log"; echo "no '$who metrics at' line"; exit 1; }
done
for ((i = 0; i < 900; i++)); do
    [ "$(grep -c '^fsgd: aggregator metrics at ' "$tmp/run.log")" -ge 2 ] && break
    kill -0 "$RUN_PID" 2>/dev/null || break
    sleep 0.1
done
mapfile -t urls < <(sed -n 's/^fsgd: aggregator metrics at //p' "$tmp/run.log")
[ "${#urls[@]}" = 2 ] || { cat "$tmp/run.log"; echo "FAIL: ${#urls[@]} aggregator endpoints, expected one a shard"; exit 1; }
echo "shard endpoints: ${urls[*]}"

value() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"].get(sys.argv[2], -1))' "$1" "$2"; }
# scrape each endpoint until it has applied more than 5 steps (mid-training)
for j in 0 1; do
    for ((i = 0; i < 600; i++)); do
        curl -fsS --max-time 5 "${urls[$j]}" >"$tmp/a$j.txt" || { cat "$tmp/run.log"; exit 1; }
        "${CHECK[@]}" check "$tmp/a$j.txt" >"$tmp/a$j.json" || { cat "$tmp/a$j.txt"; exit 1; }
        s=$("$PY" -c 'import json,sys
for k, v in json.load(open(sys.argv[1]))["samples"].items():
    if k.startswith("fsgd_steps_total{"): print(int(v))' "$tmp/a$j.json")
        [ "${s:-0}" -gt 5 ] && break
        kill -0 "$RUN_PID" 2>/dev/null || { cat "$tmp/run.log"; echo "FAIL: the run ended before shard endpoint $j was scraped"; exit 1; }
        sleep 0.1
    done
    echo "endpoint $j: step $s"
done
kill -0 "$RUN_PID" 2>/dev/null || { echo "FAIL: the run ended before both shards were scraped"; exit 1; }

# every sample of a shard carries its shard, the shard gauges say what it holds
"$PY" - "$tmp/a0.json" "$tmp/a1.json" <<'EOF'
import json, re, sys
seen, weights, dims = set(), 0, set()
for path in sys.argv[1:]:
    samples = json.load(open(path))["samples"]
    shards = set()
    for key in samples:
        m = re.search(r'(?:[{,])shard="([^"]*)"', key)
        assert m, "%s: %s has no shard label" % (path, key)
        shards.add(m.group(1))
    assert len(shards) == 1, "%s: several shard labels %s" % (path, shards)
    (i,) = shards
    assert i not in seen, "two endpoints say shard %s" % i
    seen.add(i)
    lab = '{shard="%s"}' % i
    assert samples["fsgd_shards" + lab] == 2, samples.get("fsgd_shards" + lab)
    w, d = samples["fsgd_shard_weights" + lab], samples["fsgd_model_dim" + lab]
    # shard I owns the keys k mod 2 = I of dim + 1 (the bias): ceil((dim + 1 - I) / 2)
    assert w == (d + 1 - int(i) + 1) // 2, (i, w, d)
    weights += w
    dims.add(d)
    assert any(re.fullmatch(r'fsgd_job_info\{.*role="aggregator",shard="%s".*\}' % i, k) for k in samples), i
    assert samples['fsgd_phase_seconds_total{phase="decode",shard="%s"}' % i] > 0, i
assert seen == {"0", "1"}, seen
assert len(dims) == 1 and weights == dims.pop() + 1, weights
print("shards %s: weights %d in all" % (sorted(seen), weights))
EOF
finish_run "$tmp/run.log"

# the progress lines and summaries: range, weights, how busy
for i in 0 1; do
    grep -Eq "^fsgd: epoch [0-9]+/6 .*shard $i/2 \(keys k mod 2 = $i, [0-9]+ weights\)  busy [0-9.]+% decode\+update  [0-9.]+[kM]? entries/step" "$tmp/run.log" ||
        { grep "^fsgd: epoch" "$tmp/run.log" | tail -4; echo "FAIL: no progress line of shard $i saying its range and load"; exit 1; }
    grep -Eq "\| dropped [0-9]+ \| shard $i/2 \(keys k mod 2 = $i, [0-9]+ weights\)  busy [0-9.]+%" "$tmp/run.log" ||
        { tail -20 "$tmp/run.log"; echo "FAIL: shard $i's summary does not say its range and load"; exit 1; }
done
grep -m2 -Eo "shard [01]/2 \(keys .*entries/step" "$tmp/run.log"
