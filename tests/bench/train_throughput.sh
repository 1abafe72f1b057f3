#!/usr/bin/env bash
# Training throughput of `fsgd train`: rows/s and nonzeros processed per
# second per thread, with the default batch (one thread: too little work per
# step to split) and with a large batch on 1 and 2 threads, on a real file and
# on generated CTR-shaped data; the 2-thread figure as a ratio to 1 thread.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
D=${FSGD_DATA:-../shared/data}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$FSGD" gen --rows 200000 --dim 1000000 --nnz 40 --seed 7 --out "$tmp/gen.svm" 2>/dev/null
for data in "$D/a9a" "$tmp/gen.svm"; do
    name=$(basename "$data")
    declare -A rs=()
    for run in default:1 8192:1 8192:2; do
        batch=${run%:*} th=${run#*:}
        bflag=(); [ "$batch" = default ] || bflag=(--batch "$batch")
        "$FSGD" train --data "$data" --test-fraction 0.1 --epochs 3 --threads $th --codec none --quiet \
            "${bflag[@]}" --metrics-json "$tmp/m.json" > /dev/null
        read -r rows nnz_t auc used < <(/usr/bin/python3 -c "import json;m=json.load(open('$tmp/m.json'));print(m['rows_per_second'], m['nnz_per_second_per_thread'], m['test']['auc'], m['threads'])")
        rs[$run]=$rows
        echo "bench train data=$name batch=$batch threads=$used rows_s=$rows nnz_s_per_thread=$nnz_t test_auc=$auc"
    done
    echo "bench train data=$name batch=8192 speedup_2_over_1=$(/usr/bin/python3 -c "print(round(${rs[8192:2]}/${rs[8192:1]},3))")"
    unset rs
done
