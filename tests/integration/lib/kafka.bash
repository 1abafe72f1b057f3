# Shared by tests/integration/kafka_*.sh: a fault-free reference, a
# distributed run in the background, and checks on its metrics JSON.
#
# Two brokers. FSGD_KAFKA unset or "mock": librdkafka's in-process cluster,
# which `fsgd run` embeds. FSGD_KAFKA=real: the Apache Kafka broker(s) at
# FSGD_BROKERS (tests/run_tests.sh starts them with tests/kafka/broker.sh;
# FSGD_KAFKA_DIR is that script's folder, for tests that stop brokers). On a
# real cluster every job gets a fresh name (job_name): topics outlive a job.
# A test that cannot run in a mode says why and exits 77 (counted skipped).
FSGD=${FSGD:-bin/fsgd}
PY=/usr/bin/python3
. "$(dirname "${BASH_SOURCE[0]}")/skip.bash"
DATA=$(data_dir)
needs_data a9a a9a.t
KAFKA_MODE=${FSGD_KAFKA:-mock}
case "$KAFKA_MODE" in
mock) ;;
real) [ -n "${FSGD_BROKERS:-}" ] || { echo "FSGD_KAFKA=real needs FSGD_BROKERS"; exit 1; } ;;
*) echo "FSGD_KAFKA must be mock or real, not '$KAFKA_MODE'"; exit 1 ;;
esac
BROKER_SH=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../kafka" && pwd)/broker.sh
tmp=$(mktemp -d)
RUN_PID=
BROKER_PID=
cleanup() {
    [ -n "$RUN_PID" ] && kill "$RUN_PID" 2>/dev/null && wait "$RUN_PID" 2>/dev/null
    [ -n "$BROKER_PID" ] && kill "$BROKER_PID" 2>/dev/null && wait "$BROKER_PID" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# a script stopped by a signal still runs its EXIT trap (and stops what it started)
trap 'exit 130' INT
trap 'exit 143' TERM

skip() { echo "SKIP: $*"; exit 77; }
mock_only() { [ "$KAFKA_MODE" = mock ] || skip "mock cluster only: $*"; }
real_only() { [ "$KAFKA_MODE" = real ] || skip "real Kafka only: $*"; }
# nodes in the real cluster (1 or 3); 0 on the mock
kafka_nodes() { [ "$KAFKA_MODE" = real ] && wc -l <"$FSGD_KAFKA_DIR/ports" || echo 0; }

# job_name BASE: BASE on the mock (a fresh cluster per run), BASE-<unique> on
# a real cluster, whose topics outlive the job.
job_name() {
    if [ "$KAFKA_MODE" = real ]; then
        echo "$1-$(date +%s%N | cut -c8-16)-$$"
    else
        echo "$1"
    fi
}

# kafka_cluster NAME PARTITIONS [OPTION...]: sets $brokers to a cluster holding
# the topics of job NAME (NAME.data with PARTITIONS partitions; the options,
# e.g. --shards 2, go to fsgd run). Mock: an embedded cluster in the
# background (BROKER_PID); real: the topics made on it.
kafka_cluster() {
    local log="$tmp/broker-$1.log" name=$1 parts=$2
    shift 2
    if [ "$KAFKA_MODE" = real ]; then
        "$FSGD" run --broker-only --brokers "$FSGD_BROKERS" --name "$name" --partitions "$parts" "$@" >"$log" 2>&1 ||
            { cat "$log"; exit 1; }
        brokers=$FSGD_BROKERS
        return 0
    fi
    "$FSGD" run --broker-only --name "$name" --partitions "$parts" "$@" >"$log" 2>&1 &
    BROKER_PID=$!
    for _ in $(seq 100); do grep -q '^brokers=' "$log" && break; sleep 0.1; done
    brokers=$(sed -n 's/^brokers=//p' "$log")
    [ -n "$brokers" ] || { cat "$log"; exit 1; }
}
kafka_cluster_stop() {
    [ -n "$BROKER_PID" ] || return 0
    kill "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=
}

# run_brokers LOG: the bootstrap list of a started run
run_brokers() {
    if [ "$KAFKA_MODE" = real ]; then
        echo "$FSGD_BROKERS"
    else
        sed -n 's/^fsgd: embedded Kafka cluster at \([^ ]*\) .*/\1/p' "$1"
    fi
}
# The job key of the tests' runs (fsgd run would make its own and remove it
# at the end): outside readers (fsgd model assemble, kafka_model_reader.py)
# check tags with it, and lib/frames.py signs with it unless told --key none.
FSGD_JOB_KEY=$tmp/job.key
(umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$FSGD_JOB_KEY" && echo >>"$FSGD_JOB_KEY")
export FSGD_JOB_KEY
# Settings shared by the reference and the distributed runs.
COMMON=(--data "$DATA/a9a" --test "$DATA/a9a.t" --batch 256 --epochs 3 --lr 0.01 --codec none
    --job-key-file "$FSGD_JOB_KEY")

json_get() { # file dotted.key
    "$PY" -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"
}

# The fault-free AUC: fsgd train with the same math (kafka_run.sh shows the
# distributed run matches it within 0.002).
reference_auc() {
    "$FSGD" train "${COMMON[@]}" --quiet --threads 3 --metrics-json "$tmp/ref.json" >/dev/null
    json_get "$tmp/ref.json" test.auc
}

# start_run LOG [args...]: fsgd run in the background.
# On a real cluster it adds --brokers, and --name (fresh) unless given.
start_run() {
    local log=$1 extra=()
    shift
    if [ "$KAFKA_MODE" = real ]; then
        extra=(--brokers "$FSGD_BROKERS")
        [[ " $* " == *" --name "* ]] || extra+=(--name "$(job_name run)")
    fi
    "$FSGD" run "${COMMON[@]}" "$@" ${extra[@]+"${extra[@]}"} >"$log" 2>&1 &
    RUN_PID=$!
}

# kcat_replay TOPIC PARTITION OFFSET [TO]: writes the message at OFFSET of
# TOPIC [PARTITION] again, its value, key and fsgd.mac tag unchanged, to
# partition TO (default: the same one), as anyone with write access to the
# topic could without the job key (KAFKA_FORMAT.md, "Exactly once under
# replay"). Needs kcat and $brokers.
kcat_replay() {
    local t=$1 p=$2 o=$3 to=${4:-$2} f=$tmp/replayed.msg key mac
    kcat -C -b "$brokers" -t "$t" -p "$p" -o "$o" -c 1 -e -q -f '%s' >"$f"
    key=$(kcat -C -b "$brokers" -t "$t" -p "$p" -o "$o" -c 1 -e -q -f '%k')
    mac=$(kcat -C -b "$brokers" -t "$t" -p "$p" -o "$o" -c 1 -e -q -f '%h' | sed -n 's/.*fsgd\.mac=\([0-9a-f]*\).*/\1/p')
    kcat -P -b "$brokers" -t "$t" -p "$to" ${key:+-k "$key"} ${mac:+-H "fsgd.mac=$mac"} "$f"
}

wait_for() { # LOG PATTERN SECONDS
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        # -s: the background run may not have opened LOG yet
        grep -qs -- "$2" "$1" && return 0
        kill -0 "$RUN_PID" 2>/dev/null || { grep -qs -- "$2" "$1" && return 0; return 1; }
        sleep 0.1
    done
    return 1
}

# A run that never ends (a livelock) fails the test after FSGD_RUN_LIMIT_S
# with its log, before tests/run_tests.sh's limit for the whole script.
RUN_LIMIT_S=${FSGD_RUN_LIMIT_S:-$([ "${FSGD_SANITIZED:-0}" = 1 ] && echo 900 || echo 450)}
finish_run() { # LOG: waits, fails loudly with the log on a non-zero exit or no end
    local rc=0 waited=0
    while kill -0 "$RUN_PID" 2>/dev/null && [ $waited -lt $((RUN_LIMIT_S * 5)) ]; do
        sleep 0.2
        waited=$((waited + 1))
    done
    if kill -0 "$RUN_PID" 2>/dev/null; then
        echo "fsgd run did not end within $RUN_LIMIT_S s (FSGD_RUN_LIMIT_S); stopping it. The end of its log:"
        kill "$RUN_PID" 2>/dev/null
        wait "$RUN_PID" 2>/dev/null
        RUN_PID=
        tail -80 "$1"
        exit 1
    fi
    wait "$RUN_PID" || rc=$?
    RUN_PID=
    if [ $rc -ne 0 ]; then
        echo "fsgd run failed with status $rc:"
        # the test sends no SIGTERM to a run it waits for: someone else did
        [ $rc -eq 143 ] && grep -q "run: interrupted by signal 15" "$1" &&
            echo "(fsgd run was stopped by a SIGTERM from outside this test)"
        cat "$1"
        exit 1
    fi
}

# check_metrics JSON REF_AUC TOL: every epoch applied exactly the dataset's rows
# and the test AUC is within TOL of the reference.
check_metrics() {
    "$PY" - "$1" "$2" "$3" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1])); ref = float(sys.argv[2]); tol = float(sys.argv[3])
rows, per = m["dataset_rows"], m["rows_per_epoch"]
print("rows per epoch %s (dataset %d), auc %.5f vs reference %.5f, messages %s, workers %s" %
      (per, rows, m["test"]["auc"], ref, m["messages"], m["workers"]))
ok = len(per) == m["epochs"] == 3 and all(r == rows for r in per) and abs(m["test"]["auc"] - ref) <= tol
sys.exit(0 if ok else 1)
PYEOF
}
