# Shared by tests/integration/kafka_*.sh: a fault-free reference, a
# distributed run in the background, and checks on its metrics JSON.
FSGD=${FSGD:-bin/fsgd}
DATA=${FSGD_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data}
PY=/usr/bin/python3
. "$(dirname "${BASH_SOURCE[0]}")/skip.bash"
needs_data a9a a9a.t
tmp=$(mktemp -d)
RUN_PID=
cleanup() {
    [ -n "$RUN_PID" ] && kill "$RUN_PID" 2>/dev/null && wait "$RUN_PID" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# Settings shared by the reference and the distributed runs.
COMMON=(--data "$DATA/a9a" --test "$DATA/a9a.t" --batch 256 --epochs 3 --lr 0.01 --codec none)

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
start_run() {
    local log=$1
    shift
    "$FSGD" run "${COMMON[@]}" "$@" >"$log" 2>&1 &
    RUN_PID=$!
}

wait_for() { # LOG PATTERN SECONDS
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        grep -q -- "$2" "$1" && return 0
        kill -0 "$RUN_PID" 2>/dev/null || { grep -q -- "$2" "$1" && return 0; return 1; }
        sleep 0.1
    done
    return 1
}

finish_run() { # LOG: waits, fails loudly with the log on a non-zero exit
    local rc=0
    wait "$RUN_PID" || rc=$?
    RUN_PID=
    if [ $rc -ne 0 ]; then
        echo "fsgd run failed with status $rc:"
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
