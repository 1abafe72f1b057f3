#!/usr/bin/env bash
# The CTR regime's cost model (issue 37, item 3): measured on this machine,
# checked against fsgd run, asked about clusters it cannot hold.
#  1. build/bench/bench_scale_inputs: how a step's distinct keys grow with
#     its rows (a worker's own keys: B rows; a step's union: P·B), their
#     bytes on the wire, and each piece of a step on one core;
#  2. build/bench/bench_agg_capacity: a shard's per-key costs (codec none);
#  3. fsgd run --workers P (P = SCALE_WORKERS, default "2 4 8") --batch P·B
#     (B = SCALE_BATCH rows a worker-step, default 256), with full
#     replicas and with working-set workers (--replica), on a real
#     Apache Kafka broker (tests/kafka/broker.sh, one node on loopback), the
#     same generated rows as the benches (fsgd gen, 2^24 features, 40
#     nonzeros, Zipf, seed 1; SCALE_ROWS rows, default 300000, and 30000 test);
#     each role's CPU sampled from /proc while it runs (lib/role_sampler.py:
#     RUN_JSON.roles), and
#     build/bench/bench_bus_msg on the broker: a Kafka message's CPU;
#  4. tests/bench/lib/scale_model_report.py: the model's bytes and seconds
#     against every run's metrics (check lines, mode=full or working_set;
#     what=worker_cpu_s and shard_cpu_s: each role's CPU a step in the run's
#     steady steps; worker_cpu_run_s, shard_cpu_run_s: over the whole run),
#     then its predictions for 2 to 1,000 workers in both modes (predict
#     lines).
# SCALE_KEEP=DIR keeps the inputs and every run's metrics there (the report
# can then be run again on them).
# The runs share this machine's cores with the broker and each other, so
# their seconds are not a core each as the model's are: the check lines say
# by how much they differ.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
BUILD=${BUILD:-build}
ROWS=${SCALE_ROWS:-300000}
WORKERS=${SCALE_WORKERS:-2 4 8}
# rows a worker-step (the issue's regime: 256 to 1,024); a run's batch is P of them
B=${SCALE_BATCH:-256}
here=$(cd "$(dirname "$0")" && pwd)
BROKER_SH=$here/../kafka/broker.sh
for b in bench_scale_inputs bench_agg_capacity bench_bus_msg; do
    [ -x "$BUILD/bench/$b" ] || { echo "bench scale_model error=\"$BUILD/bench/$b not built (make bench)\""; exit 1; }
done
tmp=$(mktemp -d)
kdir=""
run_pid="" sampler=""
cleanup() {
    [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
    [ -z "$run_pid" ] || kill "$run_pid" 2>/dev/null || true
    [ -z "$kdir" ] || "$BROKER_SH" stop "$kdir" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench scale_model load=$(cut -d' ' -f1 /proc/loadavg) cores=$(nproc)"
"$BUILD/bench/bench_scale_inputs" | tee "$tmp/inputs"
"$BUILD/bench/bench_agg_capacity" | tee "$tmp/agg"
jsons=()
if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    echo "bench scale_model: no java/mvn: no fsgd run to check the model against" >&2
else
    kdir=$tmp/kafka
    brokers=$("$BROKER_SH" start "$kdir" 1 | sed -n 's/^brokers=//p')
    FSGD_BROKERS=$brokers "$BUILD/bench/bench_bus_msg" | tee -a "$tmp/inputs"
    "$FSGD" gen --rows $((ROWS + ROWS / 10)) --dim '2^24' --nnz 40 --seed 1 --quiet --out "$tmp/all.svm"
    head -n "$ROWS" "$tmp/all.svm" >"$tmp/train.svm"
    tail -n $((ROWS / 10)) "$tmp/all.svm" >"$tmp/test.svm"
    rm -f "$tmp/all.svm"
    for P in $WORKERS; do
        for mode in full working_set; do
            load=$(cut -d' ' -f1 /proc/loadavg)
            "$FSGD" run --data "$tmp/train.svm" --test "$tmp/test.svm" --workers "$P" --batch $((P * B)) --brokers "$brokers" \
                --replica "$mode" --name "scale$$_${mode}_$P" --metrics-json "$tmp/run$mode$P.json" --quiet \
                >"$tmp/run$mode$P.log" 2>&1 &
            run_pid=$!
            python3 "$here/lib/role_sampler.py" "$run_pid" "$tmp/run$mode$P.json.roles" &
            sampler=$!
            rc=0
            wait "$run_pid" || rc=$?
            wait "$sampler" || true
            run_pid="" sampler=""
            [ "$rc" = 0 ] || { cat "$tmp/run$mode$P.log" >&2; exit 1; }
            echo "bench scale_model run mode=$mode workers=$P load=$load $(tail -1 "$tmp/run$mode$P.log" | cut -d'|' -f1-2)"
            jsons+=("$tmp/run$mode$P.json")
        done
    done
fi
python3 "$here/lib/scale_model_report.py" "$tmp/inputs" "$tmp/agg" ${jsons[@]+"${jsons[@]}"}
if [ -n "${SCALE_KEEP:-}" ]; then
    mkdir -p "$SCALE_KEEP"
    cp "$tmp/inputs" "$tmp/agg" "$tmp"/run*.json* "$SCALE_KEEP"/ 2>/dev/null || true
fi
