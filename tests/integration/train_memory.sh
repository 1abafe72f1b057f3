#!/usr/bin/env bash
# What keeps fsgd train's memory down (issue 29) leaves its model as it was:
# binary rows loaded without values (the threaded loader), the step batches
# in a temporary file (FSGD_SPILL_MB=0 spills any size; -1 never) and early
# stopping's best weights in one. On a9a and on generated CTR rows, the
# default run writes the model file byte for byte as the run with all of it
# in memory (FSGD_SPILL_MB=-1; the same two threads, since how a step's
# gradient is split over threads decides the last bits of its sums; values
# kept against binary rows: tests/unit/test_train_memory.c), also with a
# test split taken from the data, and where no temporary file can be made
# (TMPDIR missing: everything stays in memory). A set with real values
# (ijcnn1) trains as before through the spill file too.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir)
needs_data a9a a9a.t ijcnn1 ijcnn1.t
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# same NAME BINARY ARGS...: the model of the in-memory run and of the default and
# spill-everything runs, compared byte for byte.
same() {
    local name=$1 binary=$2
    shift 2
    FSGD_SPILL_MB=-1 "$FSGD" train "$@" --threads 2 --quiet --out "$tmp/$name.mem" > "$tmp/$name.mem.txt"
    "$FSGD" train "$@" --threads 2 --quiet --out "$tmp/$name.default" --metrics-json "$tmp/$name.json" \
        > "$tmp/$name.default.txt"
    FSGD_SPILL_MB=0 "$FSGD" train "$@" --threads 2 --quiet --out "$tmp/$name.spill" \
        --metrics-json "$tmp/$name.spill.json" > "$tmp/$name.spill.txt"
    mkdir -p "$tmp/none"
    TMPDIR=$tmp/none/missing FSGD_SPILL_MB=0 "$FSGD" train "$@" --threads 2 --quiet --out "$tmp/$name.notmp" \
        > /dev/null
    for v in default spill notmp; do
        cmp -s "$tmp/$name.mem" "$tmp/$name.$v" || fail "$name: the $v run's model differs from the in-memory run's"
    done
    grep -q "^test  auc" "$tmp/$name.spill.txt" || fail "$name: no test line: $(cat "$tmp/$name.spill.txt")"
    diff <(grep -v "^train:\|^model written" "$tmp/$name.mem.txt") \
        <(grep -v "^train:\|^model written" "$tmp/$name.spill.txt") > /dev/null ||
        fail "$name: the summaries differ: $(diff "$tmp/$name.mem.txt" "$tmp/$name.spill.txt")"
    # the metrics say where the batches were: all in the file when spilled,
    # none below the default's 64 MiB
    /usr/bin/python3 - "$tmp/$name.json" "$tmp/$name.spill.json" "$binary" <<'PY'
import json, sys
d, s = (json.load(open(p)) for p in sys.argv[1:3])
binary = sys.argv[3] == "1"
assert s["batch_mb"] > 0 and s["batch_mb_on_disk"] == s["batch_mb"], s
assert d["batch_mb"] == s["batch_mb"] and d["batch_mb_on_disk"] == 0, d
assert d["batches_binary"] is binary and s["batches_binary"] is binary, (d["batches_binary"], binary)
PY
    echo "$name: the same model in memory, by default, spilled and without a temporary directory"
}

same a9a 1 --data "$DATA/a9a" --test "$DATA/a9a.t"
same a9a_split 1 --data "$DATA/a9a"
same ijcnn1 0 --data "$DATA/ijcnn1" --test "$DATA/ijcnn1.t"
"$FSGD" gen --rows 30000 --dim 2^20 --nnz 40 --seed 5 --quiet --out "$tmp/ctr.svm"
same ctr 1 --data "$tmp/ctr.svm"
# epochs given: no holdout, no best weights; the last weights as before
same ctr_epochs 1 --data "$tmp/ctr.svm" --epochs 2
echo "PASS train_memory"
