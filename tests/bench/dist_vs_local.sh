#!/usr/bin/env bash
# Does the distributed run pay for itself? The same job, in one invocation:
# `fsgd train` (2 threads) against `fsgd run --workers 2` with staleness 0
# and with the default, each with its defaults (l2, lr and epochs auto: early
# stopping on held-out rows), whole process against whole process, on the
# embedded broker and on a real Apache Kafka broker (tests/kafka/broker.sh,
# one node on loopback). Data: fsgd gen CTR-shaped rows (40 nonzeros a row,
# Zipf), DVL_ROWS training rows (default 1e6) and DVL_TEST_ROWS test rows
# (100k).
#   DVL_DIMS     "BROKERS:DIM ..." (default "mock,real:2^20 real:2^24"; the
#                embedded cluster holds about 2^20 weights)
#   DVL_TAUS     staleness values (default "0 default")
#   DVL_ARGS     extra options for both commands (e.g. "--codec fastsgd")
#   DVL_RUN_ARGS extra options for fsgd run only (e.g. "--batch 1024")
#   DVL_REPEAT   rounds (default 1): each round runs fsgd train, then every
#                fsgd run, and a run's ratio is against its round's train; with
#                more than one, a median line per configuration closes
# Lines:
#   bench dist_vs_local dim=D broker=train wall_s=.. test_auc=.. epochs=..
#   bench dist_vs_local dim=D broker=B tau=T wall_s=.. ratio_run_over_train=..
#     test_auc=.. auc_minus_train=.. produce_s=.. other_s=.. train_s=.. step1_s=..
#     busy=.. step_p50_ms=..
#     grad_ms=.. encode_ms=.. decode_ms=.. comm_wait_ms=.. update_ms=.. update_step_ms=..
#     update_publish_ms=.. update_look_ms=.. update_over_grad=.. epochs=..
#     steps=.. batch=.. lr=.. train_wall_s=.. round=..
#   bench dist_vs_local_median dim=D broker=B tau=T rounds=N ratio=.. wall_s=..
#     train_wall_s=.. auc_minus_train=..   (DVL_REPEAT > 1: medians)
# update_over_grad: the aggregator's update a step over one worker's gradient
# a step (the metrics' gradient is the workers' sum).
# load: the machine's 1-minute load average when the command started (the
# 2 cores are shared: a load above ~0.5 before a run says another job ran beside it).
# produce_s: loading the file into NAME.data (fsgd run's own line); train_s:
# the aggregator's training seconds (from the settled group: step 1, which
# loads the workers' partitions, takes step1_s of it); other_s: the rest of the
# wall time (process start, topic set-up, the group join beyond produce_s).
# busy: worker compute + encode over the run's training seconds (all workers).
# The machine has 2 cores: the workers, the aggregator and the broker share
# them, so ratio_run_over_train is a whole-job figure, not a speed-up bound.
# The bound the machine allows: cpu_s is the CPU seconds the run took (its
# processes, user + system, and the real broker's JVM over the same span;
# the embedded cluster is inside fsgd run), train_cpu_s fsgd train's;
# cpu_bound_ratio = cpu_s / (cores x train wall): no schedule of that work
# on this machine's cores ends sooner, so a ratio near it says the job is
# CPU-bound here and only less work (not more overlap) lowers it.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
ROWS=${DVL_ROWS:-1000000}
TEST_ROWS=${DVL_TEST_ROWS:-100000}
DIMS=${DVL_DIMS:-mock,real:2^20 real:2^24}
TAUS=${DVL_TAUS:-0 default}
REPEAT=${DVL_REPEAT:-1}
read -r -a ARGS <<<"${DVL_ARGS:-}"
read -r -a RUN_ARGS <<<"${DVL_RUN_ARGS:-}"
BROKER_SH=$(cd "$(dirname "$0")/../kafka" && pwd)/broker.sh
tmp=$(mktemp -d)
kdir=""
cleanup() {
    [ -z "$kdir" ] || "$BROKER_SH" stop "$kdir" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
CORES=$(nproc)
# CPU seconds of the process /usr/bin/time wrote to $1 ("user sys")
cpu_of() { awk '{printf "%.3f", $1 + $2}' "$1"; }
# CPU seconds the real broker's JVM has used so far (0: none, or embedded)
broker_cpu() {
    local pid
    [ -n "$kdir" ] && [ -f "$kdir/node1/pid" ] && pid=$(cat "$kdir/node1/pid") && [ -r "/proc/$pid/stat" ] || { echo 0; return; }
    awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / hz}' "/proc/$pid/stat"
}
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b - a}'; }
real_brokers=""
need_real() {
    [ -n "$real_brokers" ] && return 0
    if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
        echo "bench dist_vs_local: no java/mvn: real-broker rows skipped" >&2
        return 1
    fi
    kdir=$tmp/kafka
    real_brokers=$("$BROKER_SH" start "$kdir" 1 | sed -n 's/^brokers=//p')
    [ -n "$real_brokers" ]
}

for spec in $DIMS; do
    brokers=${spec%%:*}
    dim=${spec#*:}
    "$FSGD" gen --rows $((ROWS + TEST_ROWS)) --dim "$dim" --nnz 40 --seed 1 --quiet --out "$tmp/all.svm"
    head -n "$ROWS" "$tmp/all.svm" >"$tmp/train.svm"
    tail -n "$TEST_ROWS" "$tmp/all.svm" >"$tmp/test.svm"
    rm -f "$tmp/all.svm"
    for round in $(seq "$REPEAT"); do
    train_load=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(now)
    /usr/bin/time -f "%U %S" -o "$tmp/train.cpu" \
        "$FSGD" train --data "$tmp/train.svm" --test "$tmp/test.svm" --threads 2 "${ARGS[@]}" --quiet \
        --metrics-json "$tmp/train.json" >/dev/null
    train_wall=$(sub "$t0" "$(now)")
    read -r train_auc train_epochs < <(python3 -c "import json; m = json.load(open('$tmp/train.json'))
print(m['test']['auc'], m.get('epochs_run', m.get('epochs')))")
    train_cpu=$(cpu_of "$tmp/train.cpu")
    echo "bench dist_vs_local dim=$dim broker=train wall_s=$train_wall cpu_s=$train_cpu test_auc=$train_auc epochs=$train_epochs load=$train_load round=$round"
    for b in ${brokers//,/ }; do
        bargs=()
        if [ "$b" = real ]; then
            need_real || continue
            bargs=(--brokers "$real_brokers")
        fi
        for tau in $TAUS; do
            targs=()
            [ "$tau" = default ] || targs=(--staleness "$tau")
            name=dvl$$_${b}_${tau}_${RANDOM}
            run_load=$(cut -d' ' -f1 /proc/loadavg)
            b0=$([ "$b" = real ] && broker_cpu || echo 0)
            t0=$(now)
            /usr/bin/time -f "%U %S" -o "$tmp/run.cpu" "$FSGD" run --data "$tmp/train.svm" --test "$tmp/test.svm" --workers 2 --name "$name" "${bargs[@]}" \
                "${targs[@]}" "${ARGS[@]}" "${RUN_ARGS[@]}" --metrics-json "$tmp/run.json" \
                >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; exit 1; }
            wall=$(sub "$t0" "$(now)")
            b1=$([ "$b" = real ] && broker_cpu || echo 0)
            run_cpu=$(cpu_of "$tmp/run.cpu")
            broker_cpu_s=$(sub "$b0" "$b1")
            produce_s=$(sed -n 's/^fsgd: produced .* in \([0-9.]*\) s$/\1/p' "$tmp/run.log")
            python3 - "$tmp/run.json" "$wall" "$train_wall" "$train_auc" "$dim" "$b" "$tau" "${produce_s:-0}" \
                "$round" "$run_load" "$run_cpu" "$broker_cpu_s" "$train_cpu" "$CORES" <<'EOF' | tee -a "$tmp/lines"
import json, sys
m = json.load(open(sys.argv[1]))
produce_s = float(sys.argv[8])
wall, twall, tauc = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
dim, broker, tau = sys.argv[5], sys.argv[6], m["staleness"]["tau"]
ps, tot = m["per_step_seconds"], m["total_seconds"]
us = m.get("update_seconds", {})
part_ms = lambda k: 1e3 * us.get(k, 0) / m["steps"] if m["steps"] else 0  # noqa: E731
train_s = m["train_seconds"]
busy = (tot["gradient"] + tot["encode"]) / (2 * train_s) if train_s > 0 else 0
run_cpu, broker_cpu, train_cpu, cores = (float(x) for x in sys.argv[11:15])
cpu = run_cpu + broker_cpu
print(f"bench dist_vs_local dim={dim} broker={broker} tau={tau} wall_s={wall:.3f} "
      f"ratio_run_over_train={wall / twall:.2f} cpu_s={cpu:.2f} broker_cpu_s={broker_cpu:.2f} "
      f"train_cpu_s={train_cpu:.2f} cpu_bound_ratio={cpu / (cores * twall):.2f} test_auc={m['test']['auc']:.5f} "
      f"auc_minus_train={m['test']['auc'] - tauc:+.4f} produce_s={produce_s:.2f} "
      f"other_s={wall - produce_s - train_s:.2f} train_s={train_s:.3f} step1_s={m['step1_at_seconds']:.2f} "
      f"busy={busy:.3f} step_p50_ms={m['step_latency_ms']['p50']:.3f} grad_ms={1e3 * ps['gradient']:.3f} "
      f"encode_ms={1e3 * ps['encode']:.3f} decode_ms={1e3 * ps['decode']:.3f} "
      f"comm_wait_ms={1e3 * ps['comm_wait']:.3f} update_ms={1e3 * ps['update']:.3f} "
      f"update_step_ms={part_ms('step'):.3f} update_publish_ms={part_ms('publish'):.3f} "
      f"update_look_ms={part_ms('look'):.3f} "
      f"update_over_grad={2 * ps['update'] / ps['gradient'] if ps['gradient'] > 0 else 0:.2f} "
      f"epochs={m.get('epochs_run', m['epochs'])} steps={m['steps']} batch={m.get('batch', 0)} lr={m['lr']:.5f} "
      f"train_wall_s={twall:.3f} load={sys.argv[10]} round={sys.argv[9]}")
EOF
        done
    done
    done
done
if [ "$REPEAT" -gt 1 ] && [ -s "$tmp/lines" ]; then
    python3 - "$tmp/lines" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[2:])
    runs.setdefault((f["dim"], f["broker"], f["tau"]), []).append(f)
for (dim, broker, tau), fs in runs.items():
    med = lambda k: statistics.median(float(f[k]) for f in fs)
    print(f"bench dist_vs_local_median dim={dim} broker={broker} tau={tau} rounds={len(fs)} "
          f"ratio={med('ratio_run_over_train'):.2f} cpu_bound_ratio={med('cpu_bound_ratio'):.2f} wall_s={med('wall_s'):.3f} "
          f"train_wall_s={med('train_wall_s'):.3f} auc_minus_train={med('auc_minus_train'):+.4f}")
EOF
fi
