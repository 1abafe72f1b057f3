#!/usr/bin/env bash
# Threads in `fsgd train`, measured in one run on generated CTR-shaped data
# (fsgd gen, BENCH_THREADS_ROWS rows, default 1e6, dim 2^24, 40 nonzeros a
# row): the same job (batch 2048, so that a step has enough nonzeros for two
# threads: fsgd/train.h FSGD_TRAIN_MIN_NNZ_PER_THREAD; 1 epoch, lr 0.005) on
# 1 and 2 threads, alternating, BENCH_REPEATS (3) times; medians.
#   gradient step: wall seconds of the gradient rounds (metrics
#     seconds.gradient_round_wall), all threads at once
#   update: wall seconds of the reduce + Adam rounds
#   whole process: wall seconds of fsgd train, parsing and writing included
# Lines:
#   bench train_threads threads=T grad_round_s=.. update_s=.. train_s=.. wall_s=.. test_auc=..
#   bench train_threads speedup_2_over_1 gradient=.. update=.. train=.. whole_process=..
# (> 1: two threads are faster). On a machine shared with other work the
# ratios mean little: check `uptime` first.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
ROWS=${BENCH_THREADS_ROWS:-1000000}
REPEATS=${BENCH_REPEATS:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$FSGD" gen --rows "$ROWS" --dim 16777216 --nnz 40 --seed 1 --quiet --out "$tmp/ctr.svm"
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A g u t w a
for ((i = 0; i < REPEATS; i++)); do
    for th in 1 2; do
        t0=$(date +%s.%N)
        "$FSGD" train --data "$tmp/ctr.svm" --test-fraction 0.1 --batch 2048 --epochs 1 --lr 0.005 --threads $th \
            --quiet --metrics-json "$tmp/m.json" > /dev/null
        t1=$(date +%s.%N)
        read -r used gr up tr auc < <(/usr/bin/python3 -c "import json; m = json.load(open('$tmp/m.json'))
print(m['threads'], m['seconds']['gradient_round_wall'], m['seconds']['update'], m['train_seconds'], m['test']['auc'])")
        [ "$used" = "$th" ] || { echo "train_throughput: asked for $th threads, fsgd used $used" >&2; exit 1; }
        g[$th]+="$gr " u[$th]+="$up " t[$th]+="$tr " a[$th]=$auc
        w[$th]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b - a}') "
    done
done
declare -A G U T W
for th in 1 2; do
    # shellcheck disable=SC2086
    G[$th]=$(median ${g[$th]}); U[$th]=$(median ${u[$th]}); T[$th]=$(median ${t[$th]}); W[$th]=$(median ${w[$th]})
    echo "bench train_threads threads=$th grad_round_s=${G[$th]} update_s=${U[$th]} train_s=${T[$th]} wall_s=${W[$th]} test_auc=${a[$th]}"
done
r() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a / b}'; }
echo "bench train_threads speedup_2_over_1 gradient=$(r "${G[1]}" "${G[2]}") update=$(r "${U[1]}" "${U[2]}")" \
    "train=$(r "${T[1]}" "${T[2]}") whole_process=$(r "${W[1]}" "${W[2]}")"
